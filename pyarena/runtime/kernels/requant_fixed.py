"""TFLite's fixed-point requantization, for the int8 operators of TFLite
files: the multipliers TFLite derives from the scales, and the NumPy form of
the C core's ``pa_qrequant`` (kernels/qrequant.c: the rounding, twice).

TFLite's reference kernels scale an int32 accumulator by a Q31 multiplier
and a power of two (``QuantizeMultiplier`` of ``x_scale * w_scale[c] /
y_scale``, in double: kernels/kernel_util.cc,
PopulateConvolutionQuantizationParams), rounding half up to Q31 and then
half away from zero to the power of two; onnxruntime's float32 product
rounds once.  The two disagree by one unit now and then (a keyword
spotter's conv: 0.15-0.5 % of its outputs), and a streaming model keeps the
unit in its state for many steps.  Both paths of a TFLite convolution use
this one (tests/runtime/test_requant_fixed.py compares them).  TFLite's
FULLY_CONNECTED rounds once, half away from zero (``single_rounding``: its
int8 product runs through ruy, ruy/apply_multiplier.cc) -- the
interpreter's bytes, measured (tests/importers/test_tflite_int8.py)."""
import math

import numpy as np

__all__ = ["tflite_multipliers", "requant_fixed"]


def tflite_multipliers(x_scale, w_scales, y_scale):
    """(multipliers, shifts) as int32 arrays, one per output channel:
    TFLite's QuantizeMultiplier of ``x_scale * w_scale / y_scale`` in
    double (a significand rounded half away from zero to Q31; a
    significand of 2^31 halved; shifts below -31 give 0 -- the channel
    writes the zero point)."""
    mult, shift = [], []
    for ws in np.asarray(w_scales, np.float32).reshape(-1):
        real = float(np.float32(x_scale)) * float(ws) / float(np.float32(y_scale))
        if real <= 0 or not math.isfinite(real):
            raise ValueError(f"scale {real!r} is not finite and > 0")
        q, e = math.frexp(real)
        m = math.floor(q * (1 << 31) + 0.5)         # TfLiteRound: half away (q > 0)
        if m == 1 << 31:
            m //= 2
            e += 1
        if e < -31:
            m, e = 0, 0
        if e > 30:
            raise ValueError(f"scale {real!r} is too large for a fixed-point multiplier")
        mult.append(m)
        shift.append(e)
    return np.array(mult, np.int32), np.array(shift, np.int32)


def requant_fixed(acc, mult, shift, zero_point, lo, hi, out, single_rounding=False):
    """``out`` = TFLite's requantization of the integer-valued ``acc``
    (any numeric dtype, exact integers), ``mult`` / ``shift`` broadcast
    against it (per channel), then ``+ zero_point`` clamped to [lo, hi].
    ``single_rounding``: FULLY_CONNECTED's (ruy's MultiplyByQuantizedMultiplier,
    ruy/apply_multiplier.cc): ``acc * m / 2^(31 - shift)`` rounded once,
    half away from zero, saturated to int32."""
    a = np.asarray(acc).astype(np.int64)
    if single_rounding:
        t = (31 - np.asarray(shift)).astype(np.int64)
        v = a * np.asarray(mult).astype(np.int64)
        r = (np.abs(v) + (np.int64(1) << (t - 1))) >> t
        r = np.clip(np.where(v < 0, -r, r), -2**31, 2**31 - 1)
        np.copyto(out, np.clip(r + int(zero_point), lo, hi), casting="unsafe")
        return
    left = np.maximum(shift, 0).astype(np.int64)
    right = np.maximum(-shift, 0).astype(np.int64)
    a = np.clip(a << left, -2**31, 2**31 - 1)           # (an int32 in TFLite)
    v = a * mult.astype(np.int64)
    v = v + np.where(v >= 0, 1 << 30, 1 - (1 << 30))
    h = np.where(v >= 0, v >> 31, -((-v) >> 31))        # C's division: toward 0
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (h < 0)
    r = (h >> right) + ((h & mask) > threshold)
    np.copyto(out, np.clip(r + int(zero_point), lo, hi), casting="unsafe")
