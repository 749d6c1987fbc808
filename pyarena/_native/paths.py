"""Where the installed C header and library live."""
import os

# the package directory: include/ and lib/ are installed next to it
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get_include():
    """Directory holding ``pyarena.h`` (pass it to the compiler with -I)."""
    path = os.path.join(_HERE, "include")
    if not os.path.exists(os.path.join(path, "pyarena.h")):
        # A source checkout without an install: the header in csrc/.
        src = os.path.join(os.path.dirname(_HERE), "csrc")
        if os.path.exists(os.path.join(src, "pyarena.h")):
            return src
        raise FileNotFoundError("pyarena.h is not installed next to the package")
    return path


def get_library(kind="shared"):
    """Path of ``libpyarena.so`` (kind="shared") or ``libpyarena.a``
    (kind="static") built from the same C core as the extension."""
    names = {"shared": "libpyarena.so", "static": "libpyarena.a"}
    if kind not in names:
        raise ValueError(f"kind must be 'shared' or 'static', not {kind!r}")
    path = os.path.join(_HERE, "lib", names[kind])
    if not os.path.exists(path):
        raise FileNotFoundError(f"{names[kind]} is not installed next to the package")
    return path


def get_tool(name):
    """Path of a program built with the C core (``pa_replay``: the trace
    replayer of ``pyarena alloc-bench``), installed next to the library, or
    built by ``make -C csrc`` in a source checkout."""
    for path in (os.path.join(_HERE, "lib", name),
                 os.path.join(os.path.dirname(_HERE), "csrc", "build", name)):
        if os.path.exists(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(f"{name} is not installed next to the package (rebuild "
                            "pyarena: pip install .)")


_DIGEST = []


def core_digest():
    """What identifies the C core this process runs (the cffi extension's
    file): its GNU build ID (``build-id:<hex>``, a few small reads), else a
    CRC-32 of the file read in 1 MiB pieces (``crc32:<hex>``); worked out
    once.  A compiled model records it with the layouts the kernels
    packed, so that a file packed by another build of the core is packed
    again rather than read as if it were this one's."""
    if not _DIGEST:
        from . import _cffi
        from .build_id import gnu_build_id
        found = gnu_build_id(_cffi.__file__)
        if found is not None:
            _DIGEST.append(f"build-id:{found}")
        else:
            import zlib
            crc = 0
            with open(_cffi.__file__, "rb") as f:
                for piece in iter(lambda: f.read(1 << 20), b""):
                    crc = zlib.crc32(piece, crc)
            _DIGEST.append(f"crc32:{crc & 0xFFFFFFFF:08x}")
    return _DIGEST[0]
