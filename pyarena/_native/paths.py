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
