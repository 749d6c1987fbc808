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
    """Set every OpenBLAS loaded in the process to ``n`` threads (NumPy's,
    and the copy SciPy ships beside it: a program that imports SciPy has
    two, and pinning only SciPy's left NumPy's products on every core);
    the previous count of NumPy's (else the first one's), or None."""
    import numpy  # noqa: F401  (loads the BLAS library)
    olds = []
    for path in sorted(_libs(), key=lambda p: "numpy" not in p):   # NumPy's first
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for setter, getter in _NAMES:
            if hasattr(lib, setter) and hasattr(lib, getter):
                olds.append(int(getattr(lib, getter)()))
                getattr(lib, setter)(int(n))
                break
    return olds[0] if olds else None


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


def cpu_vendor():
    """The processor's vendor (``"AuthenticAMD"``, ``"GenuineIntel"``...)
    as /proc/cpuinfo names it, or None where it does not."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return None


def tiles_wider_than_blas():
    """True when the C core's convolution tiles run in AVX-512 and beat
    NumPy's OpenBLAS: its core has no 512-bit vectors (OpenBLAS builds
    pick ``Haswell`` on some AVX-512 processors: its SGEMM then does half
    the multiply-adds per instruction of the tiles), or the processor is
    an AMD one (Zen 4 runs a 512-bit instruction as two 256-bit halves;
    there OpenBLAS 0.3.31's SkylakeX SGEMM behind im2col lost to the
    tiles: ResNet-50 at 224, one thread, 1.50 -> 1.10x onnxruntime's time,
    interleaved).  False when the tiles or the core are not known."""
    from .._native import lib
    if not lib.pa_kernels_isa() & lib.PA_ISA_AVX512:
        return False
    core = blas_core()
    if core is None:
        return False
    return core.lower() not in _WIDE_CORES or cpu_vendor() == "AuthenticAMD"
