"""Output shapes of the ``com.microsoft`` (and ``ai.pyarena``) 8-bit
operators (same conventions as :mod:`.shape_rules`).

ONNX shape inference skips operators outside the standard domains, so
these rules size everything downstream of onnxruntime's quantized
``QLinear*`` ops.  They size output 0 from fully known input shapes only
(the importer hands them no symbolic dims) and leave it unknown otherwise.
"""
import numpy as np

__all__ = ["qlinear_binary", "qlinear_lookup", "qlinear_unary",
           "qlinear_global_average_pool", "qgemm", "qlinear_average_pool",
           "qlinear_concat"]


def _broadcast(a, b):
    try:
        return list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def _out_type(n, i):
    """The output zero point's type (input ``i``), else the input's."""
    return n.t(i) if n.has(i) else n.t(0)


def qlinear_binary(n):
    """QLinearAdd / QLinearMul: the operands (inputs 0 and 3) broadcast."""
    a, b = n.s(0), n.s(3)
    return [((_broadcast(a, b) if a is not None and b is not None else None), _out_type(n, 7))]


def qlinear_lookup(n):
    return [(n.s(0), n.t(1))]


def qlinear_unary(n):
    """QLinearSigmoid / QLinearLeakyRelu / QLinearSoftmax."""
    return [(n.s(0), _out_type(n, 4))]


def qlinear_global_average_pool(n):
    x = n.s(0)
    if x is None or len(x) < 3:
        return [(None, None)]
    if n.a.get("channels_last", 0):
        return [([x[0]] + [1] * (len(x) - 2) + [x[-1]], _out_type(n, 4))]
    return [(x[:2] + [1] * (len(x) - 2), _out_type(n, 4))]


def qgemm(n):
    a, b = n.s(0), n.s(3)
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return [(None, None)]
    cols = b[0] if n.a.get("transB", 0) else b[1]
    return [([a[0], cols], (_out_type(n, 8) if n.has(7) else 1))]    # 1: FLOAT


def qlinear_average_pool(n):
    return [(_pool_shape(n.s(0), n.a), _out_type(n, 4))]


def qlinear_concat(n):
    xs = [n._shape(name) for name in n.ins[2::3]]
    if not xs or any(x is None for x in xs):
        return [(None, None)]
    axis = int(n.a.get("axis", 1))
    axis = axis + len(xs[0]) if axis < 0 else axis
    out = list(xs[0])
    out[axis] = sum(x[axis] for x in xs)
    return [(out, n.t(1))]


def _pool_shape(x, attrs):
    """AveragePool's output shape (NCHW, or NHWC with ``channels_last``)."""
    if x is None:
        return None
    last = bool(attrs.get("channels_last", 0))
    sp = x[1:-1] if last else x[2:]
    k = list(attrs.get("kernel_shape", []))
    if len(k) != len(sp):
        return None
    st = list(attrs.get("strides", [1] * len(sp)))
    pads = list(attrs.get("pads", [0] * (2 * len(sp))))
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil = int(attrs.get("ceil_mode", 0))
    out = []
    for i, (n, kk, s) in enumerate(zip(sp, k, st)):
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-n // s))
        elif auto == "VALID":
            out.append((n - kk) // s + 1)
        else:
            span = n + pads[i] + pads[i + len(sp)] - kk
            o = (-(-span // s) if ceil else span // s) + 1
            # onnxruntime's pool_attributes.h: the last window starts in the input
            out.append(o - 1 if ceil and (o - 1) * s >= n + pads[i] else o)
    return [x[0]] + out + [x[-1]] if last else x[:2] + out
