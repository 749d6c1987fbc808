"""The 8-bit quantized element-wise kernels of the C core
(``kernels/qelementwise.c``), as the runtime calls them.

Thin on purpose, one function per C call: arrays become ``void *`` with
:func:`bptr` (``ffi.from_buffer``, which keeps the array alive and refuses a
non-contiguous one), status codes exceptions through :func:`check`.  The
descriptor of a binary op (:func:`qbinary`) is a cffi struct built once per
operator.  Nothing here allocates per call.
"""
import numpy as np

from . import check, ffi, lib

__all__ = ["QTYPES", "ADD", "MUL", "DQ_ADD", "DQ_MUL", "TFLITE_MUL", "bptr", "qbinary", "run_qbinary", "lookup",
           "lookup_channels",
           "quantize_linear", "dequantize_linear", "qaffine", "global_avgpool",
           "softmax_table", "softmax", "qavgpool", "run_qavgpool"]

#: 8-bit dtype -> pa_qtype_t
QTYPES = {np.dtype(np.uint8): lib.PA_Q_U8, np.dtype(np.int8): lib.PA_Q_S8}
ADD, MUL = lib.PA_QBINARY_ADD, lib.PA_QBINARY_MUL
#: the float path of an unfused DequantizeLinear -> Add / Mul -> QuantizeLinear
DQ_ADD, DQ_MUL = lib.PA_QBINARY_DQ_ADD, lib.PA_QBINARY_DQ_MUL
#: TFLite's int8 MUL: the integer product, a Q31 multiplier and a shift
TFLITE_MUL = lib.PA_QBINARY_TFLITE_MUL


def bptr(arr):
    """``char *`` (passed as ``void *``) into a C-contiguous array."""
    return ffi.from_buffer("char[]", arr)


def qbinary(*, op, dtype, scales, zero_points, clamp, loops, a_strides, b_strides,
            fixed=(0, 0)):
    """A ``pa_qbinary_t *``: ``scales`` / ``zero_points`` (a, b, y),
    ``clamp`` (y_min, y_max), ``loops`` (outer, middle, inner) and each
    operand's strides over them in elements; ``fixed`` (TFLITE_MUL): the
    multiplier and shift."""
    (sa, sb, sy), (za, zb, zy) = scales, zero_points
    return ffi.new("pa_qbinary_t *", {
        "op": op, "type": QTYPES[np.dtype(dtype)],
        "a_scale": float(sa), "b_scale": float(sb), "y_scale": float(sy),
        "a_zero_point": int(za), "b_zero_point": int(zb), "y_zero_point": int(zy),
        "y_min": int(clamp[0]), "y_max": int(clamp[1]),
        "outer": loops[0], "middle": loops[1], "inner": loops[2],
        "a_outer": a_strides[0], "a_middle": a_strides[1], "a_inner": a_strides[2],
        "b_outer": b_strides[0], "b_middle": b_strides[1], "b_inner": b_strides[2],
        "multiplier": int(fixed[0]), "shift": int(fixed[1])})


def qaffine(dtype, scale, zero_point, y_min=0, y_max=0):
    """A ``pa_qaffine_t *`` (a quantize / dequantize call record's
    parameters)."""
    return ffi.new("pa_qaffine_t *", {
        "type": QTYPES[np.dtype(dtype)], "scale": float(scale),
        "zero_point": int(zero_point), "y_min": int(y_min), "y_max": int(y_max)})


def run_qbinary(desc, a, b, y):
    """``pa_qbinary`` on the ``void *`` of a, b and y."""
    check(lib.pa_qbinary(desc, a, b, y), "pa_qbinary")


def lookup(table, x, y, blocks, block_len, x_stride, y_stride):
    """``pa_qlookup``: ``table`` a ``uint8_t *`` (256 entries), x and y
    ``void *``; strides in bytes."""
    check(lib.pa_qlookup(table, x, y, blocks, block_len, x_stride, y_stride), "pa_qlookup")


def lookup_channels(tables, ntables, x, y, blocks, block_len):
    """``pa_qlookup_channels``: block k of x (C-contiguous) through table
    ``k % ntables`` of ``tables`` (a ``uint8_t *``, ntables x 256)."""
    check(lib.pa_qlookup_channels(tables, ntables, x, y, blocks, block_len),
          "pa_qlookup_channels")


def quantize_linear(dtype, x, y, n, scale, zero_point, y_min, y_max):
    """``pa_quantize_linear`` (x a ``float *``, y a ``void *``)."""
    check(lib.pa_quantize_linear(QTYPES[np.dtype(dtype)], x, y, n, scale, zero_point,
                                 y_min, y_max), "pa_quantize_linear")


def dequantize_linear(dtype, x, y, n, scale, zero_point):
    """``pa_dequantize_linear`` (x a ``void *``, y a ``float *``)."""
    check(lib.pa_dequantize_linear(QTYPES[np.dtype(dtype)], x, y, n, scale, zero_point),
          "pa_dequantize_linear")


def global_avgpool(dtype, nhwc, n, c, spatial, x, y, x_zero_point, multiplier,
                   y_zero_point, y_min, y_max):
    """``pa_qglobal_avgpool`` (x and y ``void *``)."""
    layout = lib.PA_LAYOUT_NHWC if nhwc else lib.PA_LAYOUT_NCHW
    check(lib.pa_qglobal_avgpool(QTYPES[np.dtype(dtype)], layout, n, c, spatial, x, y,
                                 x_zero_point, multiplier, y_zero_point, y_min, y_max),
          "pa_qglobal_avgpool")


def softmax_table(x_scale, reduce_len):
    """``pa_qsoftmax_table``: onnxruntime's 256 exponentials (float32)."""
    table = np.empty(256, np.float32)
    check(lib.pa_qsoftmax_table(float(x_scale), int(reduce_len),
                                ffi.from_buffer("float[]", table)), "pa_qsoftmax_table")
    return table


def softmax(dtype, table, x, y, outer, n, inner, y_scale, y_zero_point):
    """``pa_qsoftmax`` (table a ``float *``, x and y ``void *``)."""
    check(lib.pa_qsoftmax(QTYPES[np.dtype(dtype)], table, x, y, outer, n, inner,
                          float(y_scale), int(y_zero_point)), "pa_qsoftmax")


def qavgpool(*, dtype, nhwc, dims, out, kernel, strides, pads, count_include_pad,
             scales, zero_points, integer_clamp=None):
    """A ``pa_qavgpool_t *``: ``dims`` (n, c, h, w), ``out`` (out_h, out_w),
    ``kernel`` / ``strides`` (h, w), ``pads`` (top, left, bottom, right),
    ``scales`` / ``zero_points`` (x, y); ``integer_clamp`` (y_min, y_max):
    TFLite's integer average, clamped so (None: onnxruntime's)."""
    lo, hi = integer_clamp or (0, 0)
    n, c, h, w = dims
    return ffi.new("pa_qavgpool_t *", {
        "type": QTYPES[np.dtype(dtype)],
        "layout": lib.PA_LAYOUT_NHWC if nhwc else lib.PA_LAYOUT_NCHW,
        "n": n, "c": c, "h": h, "w": w, "out_h": out[0], "out_w": out[1],
        "kernel_h": kernel[0], "kernel_w": kernel[1],
        "stride_h": strides[0], "stride_w": strides[1],
        "pad_top": pads[0], "pad_left": pads[1], "pad_bottom": pads[2], "pad_right": pads[3],
        "count_include_pad": int(bool(count_include_pad)),
        "x_scale": float(scales[0]), "y_scale": float(scales[1]),
        "x_zero_point": int(zero_points[0]), "y_zero_point": int(zero_points[1]),
        "integer_average": int(integer_clamp is not None), "y_min": int(lo), "y_max": int(hi)})


def run_qavgpool(desc, x, y):
    """``pa_qavgpool`` on the ``void *`` of x and y."""
    check(lib.pa_qavgpool(desc, x, y), "pa_qavgpool")
