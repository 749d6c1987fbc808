"""The C core's DynamicQuantizeLinear (``pa_dynamic_quantize``): float32
data to uint8 with the scale and zero point computed from it, as
onnxruntime computes them.  Thin: one call, status codes to exceptions."""
from . import check, ffi, lib

__all__ = ["dynamic_quantize"]


def dynamic_quantize(x, y, scale, zero_point):
    """Quantize the C-contiguous float32 array ``x`` into the uint8 array
    ``y`` (same size); the scale goes to the one-element float32 array
    ``scale``, the zero point to the one-element uint8 ``zero_point``."""
    check(lib.pa_dynamic_quantize(ffi.from_buffer("float[]", x), x.size,
                                  ffi.from_buffer("uint8_t[]", y),
                                  ffi.from_buffer("float[]", scale),
                                  ffi.from_buffer("uint8_t[]", zero_point)),
          "pa_dynamic_quantize")
