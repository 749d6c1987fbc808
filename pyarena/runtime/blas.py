"""Best-effort control of the BLAS thread count NumPy uses (OpenBLAS).

On a loaded machine a multi-threaded BLAS spinning on shared cores can make
small matrix products 10x slower and timings meaningless; the demo and the
benchmarks pin it to one thread.  Returns the previous count, or None when
the BLAS library is not OpenBLAS or cannot be found (then nothing changes).
"""
import ctypes

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
