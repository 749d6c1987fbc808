"""The C core's 8-bit quantized convolution (``pa_qconv2d_*``), as the
quantized kernels call it: a descriptor built once per operator, its
weights packed once into an array the caller owns (the weights arena),
then one call per run.  Thin on purpose; status codes become exceptions
through :func:`pyarena._native.check`."""
import numpy as np

from ..errors import InvalidArgumentError
from . import check, ffi, lib

__all__ = ["QTYPES", "qconv2d", "packed_size", "scratch_size", "pack", "pack_fixed", "run", "ptr",
           "qrequant", "requant", "REQUANT_MODES"]

#: requant mode name -> pa_qrequant_mode_t (None: onnxruntime's float32
#: scale; "fixed": TFLite's two roundings; "single": FULLY_CONNECTED's one)
REQUANT_MODES = {None: lib.PA_QREQ_FLOAT, "fixed": lib.PA_QREQ_FIXED,
                 "single": lib.PA_QREQ_FIXED_SINGLE}

#: NumPy dtype -> pa_qtype_t
QTYPES = {np.dtype(np.uint8): lib.PA_Q_U8, np.dtype(np.int8): lib.PA_Q_S8,
          np.dtype(np.int32): lib.PA_Q_S32}


def ptr(arr):
    """``void *`` into a C-contiguous array (kept alive by it)."""
    return ffi.from_buffer(arr)


def qconv2d(*, nhwc, n, c_in, h, w, c_out, h_out, w_out, kh, kw, sh, sw, dh, dw, pad_top,
            pad_left, groups, x_dtype, w_dtype, y_dtype, x_zp, y_zp=0, y_lo=0, y_hi=0,
            requant=None):
    """A ``pa_qconv2d_t *``; the dtypes are NumPy dtypes of :data:`QTYPES`,
    ``requant`` a key of :data:`REQUANT_MODES`."""
    conv = {"layout": lib.PA_LAYOUT_NHWC if nhwc else lib.PA_LAYOUT_NCHW,
            "n": n, "c_in": c_in, "h": h, "w": w, "c_out": c_out, "h_out": h_out,
            "w_out": w_out, "kh": kh, "kw": kw, "sh": sh, "sw": sw, "dh": dh, "dw": dw,
            "pad_top": pad_top, "pad_left": pad_left, "groups": groups,
            "act": {"kind": lib.PA_ACT_NONE, "alpha": 0.0, "beta": 0.0}}
    return ffi.new("pa_qconv2d_t *", {
        "conv": conv, "x_type": QTYPES[np.dtype(x_dtype)], "w_type": QTYPES[np.dtype(w_dtype)],
        "y_type": QTYPES[np.dtype(y_dtype)], "x_zp": int(x_zp), "y_zp": int(y_zp),
        "y_lo": int(y_lo), "y_hi": int(y_hi), "requant": REQUANT_MODES[requant]})


def packed_size(desc):
    """Bytes of the packed weights; InvalidArgumentError for a descriptor
    the C kernel refuses."""
    n = lib.pa_qconv2d_packed_size(desc)
    if n == 0:
        raise InvalidArgumentError("native quantized conv: descriptor out of range")
    return int(n)


def scratch_size(desc):
    """Bytes of workspace per run."""
    n = lib.pa_qconv2d_scratch_size(desc)
    if n == ffi.cast("size_t", -1):
        raise InvalidArgumentError("native quantized conv: descriptor out of range")
    return int(n)


def pack(desc, weight_ohwi, w_zp, bias, scale, packed):
    """Pack OHWI 8-bit weights, their zero points (int32 per output channel
    or None), the int32 bias (or None) and the float32 multipliers (or None
    for int32 outputs) into the uint8 array ``packed``."""
    w = np.ascontiguousarray(weight_ohwi)
    args = [None if a is None else np.ascontiguousarray(a, dt)
            for a, dt in ((w_zp, np.int32), (bias, np.int32), (scale, np.float32))]
    p = [ffi.NULL if a is None else ffi.from_buffer(a) for a in args]
    check(lib.pa_qconv2d_pack(desc, ptr(w), ffi.cast("int32_t *", p[0]),
                              ffi.cast("int32_t *", p[1]), ffi.cast("float *", p[2]),
                              ptr(packed), packed.nbytes), "pa_qconv2d_pack")
    return packed


def pack_fixed(desc, weight_ohwi, w_zp, bias, mult_shift, packed):
    """:func:`pack` for a descriptor in a fixed-point requant mode:
    ``mult_shift`` the int32 multipliers then shifts, one per output channel
    each (as :func:`requant` takes them)."""
    w = np.ascontiguousarray(weight_ohwi)
    args = [None if a is None else np.ascontiguousarray(a, np.int32)
            for a in (w_zp, bias, mult_shift)]
    p = [ffi.NULL if a is None else ffi.cast("int32_t *", ffi.from_buffer(a)) for a in args]
    check(lib.pa_qconv2d_pack_fixed(desc, ptr(w), p[0], p[1], p[2], ptr(packed), packed.nbytes),
          "pa_qconv2d_pack_fixed")
    return packed


def run(desc, packed_ptr, x_ptr, y_ptr, scratch_ptr, scratch_bytes, workers=ffi.NULL):
    """One ``pa_qconv2d_run`` (pointers from :func:`ptr`)."""
    st = lib.pa_qconv2d_run(desc, packed_ptr, x_ptr, y_ptr, scratch_ptr, scratch_bytes, workers)
    if st:
        check(st, "pa_qconv2d_run")


def qrequant(y_dtype, channels, zero_point, y_min, y_max, single_rounding=False):
    """A ``pa_qrequant_t *`` (TFLite's requantization into ``y_dtype``;
    ``single_rounding``: FULLY_CONNECTED's one rounding, not conv's two)."""
    return ffi.new("pa_qrequant_t *", {
        "type": QTYPES[np.dtype(y_dtype)], "channels": int(channels),
        "zero_point": int(zero_point), "y_min": int(y_min), "y_max": int(y_max),
        "single_rounding": int(bool(single_rounding))})


def requant(params, mult_shift, acc, y, n):
    """``pa_qrequant``: ``mult_shift`` (int32, the multipliers then the
    shifts), ``acc`` (int32) and ``y`` arrays."""
    check(lib.pa_qrequant(params, ffi.cast("int32_t *", ptr(mult_shift)),
                          ffi.cast("int32_t *", ptr(acc)), ptr(y), n), "pa_qrequant")
