"""The C core's logistic and tanh as onnxruntime computes them
(``pa_ort_logistic`` / ``pa_ort_tanh``, kernels/ort_approx.c: MLAS's
rational approximations, bit for bit).  Thin: one call, status codes to
exceptions; ``x`` and ``y`` C-contiguous float32 of one size (y may be x)."""
from . import check, ffi, lib

__all__ = ["logistic", "tanh"]


def logistic(x, y):
    check(lib.pa_ort_logistic(ffi.from_buffer("float[]", x), ffi.from_buffer("float[]", y),
                              x.size), "pa_ort_logistic")


def tanh(x, y):
    check(lib.pa_ort_tanh(ffi.from_buffer("float[]", x), ffi.from_buffer("float[]", y),
                          x.size), "pa_ort_tanh")
