"""Full-integer TFLite operators -> pyarena's quantized operators.

A TFLite operator whose activations are int8 / uint8 (tensors with
quantization parameters) becomes the ONNX-style quantized operator with
the same arithmetic (see :mod:`pyarena.runtime.kernels.quantization`); its
scales and zero points become small constant inputs, its weights stay
int8 in TFLite's own layout (OHWI, depthwise 1HWC, fully connected
(out, in)), per-channel scales along ``quantized_dimension``.  A fused
activation becomes a clamp of the quantized output (``qmin`` / ``qmax``),
as TFLite applies it.  Which builtins run in 8 bits, and how each is
wired, is declared by the integer kernel that runs it
(``Kernel.tflite_int8``); anything else is refused by name.
"""
import numpy as np

from ..runtime.kernels import TFLITE_INT8
from .tflite_options import OpContext, convert_options

__all__ = ["is_quantized", "convert_quantized"]

_INT = (np.dtype(np.int8), np.dtype(np.uint8))


def is_quantized(t, ins, outs):
    """Whether the op reads or writes a quantized 8-bit activation."""
    return any(i >= 0 and t.data[i] is None and t.dtypes[i] in _INT and t.quant[i] is not None
               for i in list(ins) + list(outs))


def convert_quantized(tflite, t, code, op, ins, outs, opname):
    """(op type, attrs, input indices) of one quantized TFLite operator, as
    the kernel that declares the builtin (``Kernel.tflite_int8``) wires it;
    constants for scales and zero points are added to ``t``."""
    def fail(why):
        from ..errors import UnsupportedOpError
        raise UnsupportedOpError(f"operator {opname!r} ({code}, int8): {why}")

    rec = TFLITE_INT8.get(code)
    if rec is None:
        fail("no integer kernel for this builtin")
    op_type, wiring = rec
    c = OpContext(tflite, code, op, ins, outs, t.shapes, t.data, {}, fail,
                  name=opname)
    convert_options(c)
    w = _Wire(c, _Q(t, opname, fail), t, outs)
    if w.act is not None:
        w.a.update(w.q.clamp(w.y, w.act))
    return _WIRINGS[wiring](w, op_type)


class _Wire:
    """What a wiring reads: the options' context ``c``, its attributes
    ``a`` (the fused activation ``act`` taken out), the quantization
    constants ``q``, the tensors ``t``, the data input ``x`` and output ``y``."""

    def __init__(self, c, q, t, outs):
        self.c, self.q, self.t, self.a = c, q, t, c.attrs
        self.x, self.y = c.ins[0] if c.ins else -1, outs[0] if outs else -1
        self.act = self.a.pop("activation", None)
        self.code, self.fail = c.code, c.fail


def _conv(w, op_type):
    if w.code == "DEPTHWISE_CONV_2D":
        w.a["weight_layout"] = "1HWC"
    w.a["requant"] = "tflite"       # TFLite's fixed-point multipliers (requant_fixed.py)
    q, x, c = w.q, w.x, w.c
    wt = c.ins[1]
    ins_q = [x] + q.params(x) + [wt] + q.params(wt, per_axis=True) + q.params(w.y)
    if len(c.ins) > 2 and c.ins[2] >= 0:
        ins_q.append(c.ins[2])
    return op_type, w.a, ins_q


def _fully_connected(w, op_type):
    w.a["transB"] = 1
    w.a["requant"] = "tflite"       # TFLite's fixed-point multipliers, as conv's
    q, x, c = w.q, w.x, w.c
    wt = c.ins[1]
    ins_q = [x] + q.params(x) + [wt] + q.params(wt, per_axis=True)
    bias = c.ins[2] if len(c.ins) > 2 and c.ins[2] >= 0 else q.const("none", np.zeros(
        w.t.shapes[wt][0], np.int32))
    return op_type, w.a, ins_q + [bias] + q.params(w.y)


def _add_mul(w, op_type):
    if w.code == "MUL":             # TFLite's fixed-point product (QLinearMul.tflite_fixed)
        w.a["requant"] = "tflite"
    q, b = w.q, w.c.ins[1]
    return op_type, w.a, [w.x] + q.params(w.x) + [b] + q.params(b) + q.params(w.y)


def _activation(w, op_type):
    return op_type, w.a, [w.x] + w.q.params(w.x) + w.q.params(w.y)


def _average_pool(w, op_type):
    w.a.pop("layout", None)
    w.a["channels_last"] = 1
    w.a["requant"] = "tflite"       # TFLite's integer average (QLinearAveragePool)
    return op_type, w.a, [w.x] + w.q.params(w.x) + w.q.params(w.y)


def _mean(w, op_type):
    axes = sorted(int(v) % 4 for v in np.asarray(w.t.data[w.c.ins[1]]).reshape(-1))
    if len(w.t.shapes[w.x]) != 4 or axes != [1, 2]:
        w.fail(f"a mean over axes {axes} (only the spatial axes 1, 2 of NHWC)")
    return op_type, {"channels_last": 1}, [w.x] + w.q.params(w.x) + w.q.params(w.y)


def _softmax(w, op_type):
    if abs(w.a.get("beta", 1.0) - 1.0) > 1e-6:
        w.fail(f"beta={w.a['beta']} (only 1)")
    return op_type, {"axis": -1, "opset": 13}, [w.x] + w.q.params(w.x) + w.q.params(w.y)


def _concat(w, op_type):
    ins_q = w.q.params(w.y)
    for i in w.c.ins:
        ins_q += [i] + w.q.params(i)
    return op_type, w.a, ins_q


def _clamp(w, op_type):
    """RELU / RELU6 / RELU_N1_TO_1: requantized and clamped, as TFLite does
    it (a table of the 256 input bytes: :func:`_requant_table`)."""
    return _requant_table(w, **w.q.clamp(w.y, w.code))


def _quantize(w, op_type):
    if w.t.dtypes[w.x] in _INT:       # int8 -> int8 requantization
        return _requant_table(w)
    return op_type, {}, [w.x] + w.q.params(w.y)


def _requant_table(w, qmin=None, qmax=None):
    """An 8-bit -> 8-bit requantization (RELU*, QUANTIZE) as TFLite computes
    it: ``MultiplyByQuantizedMultiplier(x - x_zp)`` with the Q31 multiplier
    of ``x_scale / y_scale`` in double (activations.cc, quantize.cc;
    reference_ops::Requantize), two roundings as conv's, ``+ y_zp``
    clamped -- worked out for the 256 input bytes at import, then a
    ``QLinearLookup``.  (onnxruntime's float32 rule is a unit off on ~1 in
    10 bytes of some scale pairs.)"""
    from ..runtime.kernels.requant_fixed import requant_fixed, tflite_multipliers
    (xs, xz, _), (ys, yz, _) = w.q.qp(w.x), w.q.qp(w.y)
    if xs.size != 1 or ys.size != 1:
        w.fail("a per-channel requantization")
    x_dt, y_dt = w.t.dtypes[w.x], w.t.dtypes[w.y]
    if x_dt not in _INT or y_dt not in _INT:
        w.fail("a requantization of other than 8-bit tensors")
    try:
        m, sh = tflite_multipliers(float(xs.reshape(-1)[0]), [1.0], float(ys.reshape(-1)[0]))
    except ValueError as exc:
        w.fail(str(exc))
    info = np.iinfo(y_dt)
    lo = info.min if qmin is None else max(int(qmin), info.min)
    hi = info.max if qmax is None else min(int(qmax), info.max)
    u = np.arange(256, dtype=np.uint8).view(x_dt).astype(np.int64)
    table = np.zeros(256, y_dt)
    requant_fixed(u - int(xz.reshape(-1)[0]), m, sh, int(yz.reshape(-1)[0]), lo, hi, table)
    return "QLinearLookup", {}, [w.x, w.q.const("requant_table", table)]


def _dequantize(w, op_type):
    return op_type, {}, [w.x] + w.q.params(w.x)


def _same(w, op_type):
    """The op itself on the integer tensor (it only moves or selects)."""
    if w.act is not None:
        w.fail(f"fused activation {w.act}")
    if w.code == "MAX_POOL_2D" and not w.q.same(w.x, w.y):
        w.fail("input and output quantization differ")
    return op_type, w.a, w.c.ins[:1]


def _select(w, op_type):
    """An op that copies some of its input's values (a slice, a split):
    the op itself on the integer tensor, with its other inputs as its
    options left them; each output must have the input's scale and zero
    point (the bytes are copied as they are)."""
    if w.act is not None:
        w.fail(f"fused activation {w.act}")
    for o in w.c.outs:
        if not w.q.same(w.x, o):
            w.fail(f"output {w.t.names[o]!r} is quantized unlike the input")
    return op_type, w.a, w.c.ins


#: wiring (``Kernel.tflite_int8``) -> the function that wires the op
_WIRINGS = {"conv": _conv, "fully_connected": _fully_connected, "add_mul": _add_mul,
            "activation": _activation, "average_pool": _average_pool, "mean": _mean,
            "softmax": _softmax, "concat": _concat, "clamp": _clamp, "quantize": _quantize,
            "dequantize": _dequantize, "same": _same, "select": _select}


class _Q:
    """Scale / zero point constants of the TFLite tensors, added once each."""

    def __init__(self, t, opname, fail):
        self.t, self.opname, self.fail = t, opname, fail

    def qp(self, i):
        qp = self.t.quant[i] if i >= 0 else None
        if qp is None:
            self.fail(f"tensor {self.t.names[i]!r} has no quantization parameters")
        return qp

    def const(self, what, value):
        return self.t.add_const(f"{self.opname}/{what}", value)

    def params(self, i, per_axis=False):
        """[scale, zero point] constant indices of tensor ``i``."""
        scale, zp, axis = self.qp(i)
        name = self.t.names[i]
        if scale.size > 1 and not per_axis:
            self.fail(f"tensor {name!r} is quantized per channel")
        dt = self.t.dtypes[i] if self.t.dtypes[i] in _INT else np.dtype(np.int8)
        zp = np.broadcast_to(zp.reshape(-1), scale.shape)
        if scale.size == 1:
            scale, zp = scale.reshape(()), zp.reshape(())
        return [self.t.add_const(f"{name}/scale", scale.astype(np.float32)),
                self.t.add_const(f"{name}/zero_point", zp.astype(dt))]

    def same(self, a, b):
        qa, qb = self.qp(a), self.qp(b)
        return np.array_equal(qa[0], qb[0]) and np.array_equal(qa[1], qb[1])

    def clamp(self, y, act):
        """``qmin`` / ``qmax`` of a fused activation on the quantized output."""
        scale, zp, _ = self.qp(y)
        s, z = float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0])
        quant = lambda v: z + int(np.rint(v / s))  # noqa: E731
        if act == "RELU":
            return {"qmin": quant(0.0)}
        if act == "RELU6":
            return {"qmin": quant(0.0), "qmax": quant(6.0)}
        if act == "RELU_N1_TO_1":
            return {"qmin": quant(-1.0), "qmax": quant(1.0)}
        self.fail(f"fused activation {act} on a quantized output")
