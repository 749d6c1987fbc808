"""Shapes for the ``com.microsoft`` operators pyarena runs.

ONNX shape inference skips operators outside the standard domains, so
everything downstream of onnxruntime's quantized ``QLinear*`` contrib ops
would stay unsized.  :func:`infer_with_contrib` runs the standard
inference, then derives each contrib op's output shape and type from its
inputs by the op's own rule, records them as ``value_info`` and infers
again, until nothing new is learnt.  The same fills the standard ops ONNX
leaves unsized (GroupNormalization, a function op in opset 18: its output
has its input's shape and type).
"""
import numpy as np

__all__ = ["CONTRIB_DOMAINS", "runs_in_domain", "infer_with_contrib", "contrib_rule"]

CONTRIB_DOMAINS = ("com.microsoft", "ai.pyarena")
#: standard ops ONNX shape inference leaves unsized; output 0 is input 0's shape
_UNSIZED_STANDARD = ("GroupNormalization",)


def runs_in_domain(op_type, domain):
    """Whether a kernel runs ``op_type`` of ``domain`` (a contrib domain)."""
    from ..runtime.kernels import KERNELS
    cls = KERNELS.get(op_type)
    return cls is not None and getattr(cls, "onnx_domain", "") == domain


def _broadcast(a, b):
    try:
        return list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        return None


def contrib_rule(node, attrs, shape, etype):
    """(shape, elem type) of output 0 of a contrib node, or None."""
    t, ins = node.op_type, list(node.input)
    if t in _UNSIZED_STANDARD:
        return shape(ins[0]), etype(ins[0])

    def out_type(i):      # the output zero point's type, else the input's
        return etype(ins[i]) if len(ins) > i and ins[i] else etype(ins[0])

    if t in ("QLinearAdd", "QLinearMul"):
        a, b = shape(ins[0]), shape(ins[3])
        return (_broadcast(a, b) if a is not None and b is not None else None), out_type(7)
    if t == "QLinearLookup":
        return shape(ins[0]), etype(ins[1])
    if t in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        return shape(ins[0]), out_type(4)
    if t == "QLinearGlobalAveragePool":
        x = shape(ins[0])
        if x is None or len(x) < 3:
            return None, None
        if attrs.get("channels_last", 0):
            return [x[0]] + [1] * (len(x) - 2) + [x[-1]], out_type(4)
        return x[:2] + [1] * (len(x) - 2), out_type(4)
    if t == "QGemm":
        a, b = shape(ins[0]), shape(ins[3])
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return None, None
        n = b[0] if attrs.get("transB", 0) else b[1]
        has_y = len(ins) > 7 and ins[7]
        return [a[0], n], (out_type(8) if has_y else 1)    # 1: FLOAT
    if t == "QLinearAveragePool":
        return _pool_shape(shape(ins[0]), attrs), out_type(4)
    if t == "QLinearConcat":
        xs = [shape(n) for n in ins[2::3]]
        if not xs or any(x is None for x in xs):
            return None, None
        axis = int(attrs.get("axis", 1))
        axis = axis + len(xs[0]) if axis < 0 else axis
        out = list(xs[0])
        out[axis] = sum(x[axis] for x in xs)
        return out, etype(ins[1])
    return None, None


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
            out.append((-(-span // s) if ceil else span // s) + 1)
    return [x[0]] + out + [x[-1]] if last else x[:2] + out


def infer_with_contrib(onnx, model, infer, collect):
    """``infer(model)`` (ONNX shape inference), then the contrib ops' output
    shapes added as value_info and inferred again until a fixed point."""
    m = infer(model)
    contrib = [n for n in m.graph.node if n.domain in CONTRIB_DOMAINS or (
        n.domain in ("", "ai.onnx") and n.op_type in _UNSIZED_STANDARD)]
    for _ in range(len(contrib) + 1):
        shapes, types = collect(m)
        known = lambda n: shapes.get(n) is not None and all(  # noqa: E731
            isinstance(d, int) for d in shapes[n])
        added = False
        for n in contrib:
            out = n.output[0] if n.output else ""
            if not out or known(out):
                continue
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            shp, et = contrib_rule(n, attrs, lambda k: shapes.get(k) if known(k) else None,
                            types.get)
            if shp is None or not et:
                continue
            m.graph.value_info.append(onnx.helper.make_tensor_value_info(out, et, shp))
            added = True
        if not added:
            return m
        m = infer(m)
    return m
