"""Best-effort control of the BLAS thread count NumPy uses (OpenBLAS), and
which of its kernels runs.

On a loaded machine a multi-threaded BLAS spinning on shared cores can make
small matrix products 10x slower and timings meaningless; the demo and the
benchmarks pin it to one thread.  Returns the previous count, or None when
the BLAS library is not OpenBLAS or cannot be found (then nothing changes).
"""
import ctypes

_CORE_NAMES = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
               "openblas_get_corename64_", "openblas_get_corename")
#: OpenBLAS cores whose SGEMM works in 512-bit vectors (kernel/x86_64)
_WIDE_CORES = ("skylakex", "cooperlake", "sapphirerapids")

_NAMES = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
          ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
          ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
          ("openblas_set_num_threads", "openblas_get_num_threads")]


def _libs():
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps.splitlines()
                   if "openblas" in line.lower() and line.split()[-1].startswith("/")})


def set_blas_threads(n):
    """Set OpenBLAS to ``n`` threads; the previous count or None."""
    import numpy  # noqa: F401  (loads the BLAS library)
    for path in _libs():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in _NAMES:
            if hasattr(lib, setter) and hasattr(lib, getter):
                old = int(getattr(lib, getter)())
                getattr(lib, setter)(int(n))
                return old
    return None


def blas_core():
    """The name of the OpenBLAS core NumPy's products run on (e.g.
    ``"Haswell"``), or None when the BLAS is not OpenBLAS or does not say."""
    import numpy  # noqa: F401  (loads the BLAS library)
    for path in _libs():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _CORE_NAMES:
            if hasattr(lib, name):
                fn = getattr(lib, name)
                fn.restype = ctypes.c_char_p
                core = fn()
                return core.decode("ascii", "replace").strip() if core else None
    return None


def tiles_wider_than_blas():
    """True when the C core's convolution tiles run in AVX-512 and NumPy's
    OpenBLAS runs a core without 512-bit vectors (OpenBLAS builds pick
    ``Haswell`` on some AVX-512 processors): its SGEMM then does half the
    multiply-adds per instruction of the tiles.  False when either is not
    known."""
    from .._native import lib
    if not lib.pa_kernels_isa() & lib.PA_ISA_AVX512:
        return False
    core = blas_core()
    return core is not None and core.lower() not in _WIDE_CORES
