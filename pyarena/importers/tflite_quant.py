"""Full-integer TFLite operators -> pyarena's quantized operators.

A TFLite operator whose activations are int8 / uint8 (tensors with
quantization parameters) becomes the ONNX-style quantized operator with
the same arithmetic (see :mod:`pyarena.runtime.kernels.quantization`); its
scales and zero points become small constant inputs, its weights stay
int8 in TFLite's own layout (OHWI, depthwise 1HWC, fully connected
(out, in)), per-channel scales along ``quantized_dimension``.  A fused
activation becomes a clamp of the quantized output (``qmin`` / ``qmax``),
as TFLite applies it.  Anything else is refused by name.
"""
import numpy as np

from .tflite_options import OpContext, convert_options

__all__ = ["is_quantized", "convert_quantized"]

_INT = (np.dtype(np.int8), np.dtype(np.uint8))
_SAME = {"RESHAPE": "Reshape", "SQUEEZE": "Reshape", "EXPAND_DIMS": "Reshape",
         "MAX_POOL_2D": "MaxPool"}


def is_quantized(t, ins, outs):
    """Whether the op reads or writes a quantized 8-bit activation."""
    return any(i >= 0 and t.data[i] is None and t.dtypes[i] in _INT and t.quant[i] is not None
               for i in list(ins) + list(outs))


def convert_quantized(tflite, t, code, op, ins, outs, opname):
    """(op type, attrs, input indices) of one quantized TFLite operator;
    constants for scales and zero points are added to ``t``."""
    def fail(why):
        from ..errors import UnsupportedOpError
        raise UnsupportedOpError(f"operator {opname!r} ({code}, int8): {why}")

    c = OpContext(tflite, code, op, ins, outs, t.shapes, t.data, {}, fail)
    if code in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL",
                "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "SOFTMAX", "MEAN",
                "RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        convert_options(c)
    a = c.attrs
    q = _Q(t, opname, fail)
    x, y = c.ins[0] if c.ins else -1, outs[0] if outs else -1
    act = a.pop("activation", None)
    if act is not None:
        a.update(q.clamp(y, act))
    if code in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        if code == "DEPTHWISE_CONV_2D":
            a["weight_layout"] = "1HWC"
        w = c.ins[1]
        ins_q = [x] + q.params(x) + [w] + q.params(w, per_axis=True) + q.params(y)
        if len(c.ins) > 2 and c.ins[2] >= 0:
            ins_q.append(c.ins[2])
        return "QLinearConv", a, ins_q
    if code == "FULLY_CONNECTED":
        a["transB"] = 1
        w = c.ins[1]
        ins_q = [x] + q.params(x) + [w] + q.params(w, per_axis=True)
        bias = c.ins[2] if len(c.ins) > 2 and c.ins[2] >= 0 else q.const("none", np.zeros(
            t.shapes[w][0], np.int32))
        return "QGemm", a, ins_q + [bias] + q.params(y)
    if code in ("ADD", "MUL"):
        b = c.ins[1]
        return ("QLinearAdd" if code == "ADD" else "QLinearMul"), a, \
            [x] + q.params(x) + [b] + q.params(b) + q.params(y)
    if code == "LOGISTIC":
        return "QLinearSigmoid", a, [x] + q.params(x) + q.params(y)
    if code == "AVERAGE_POOL_2D":
        a.pop("layout", None)
        a["channels_last"] = 1
        return "QLinearAveragePool", a, [x] + q.params(x) + q.params(y)
    if code == "MEAN":
        axes = sorted(int(v) % 4 for v in np.asarray(t.data[c.ins[1]]).reshape(-1))
        if len(t.shapes[x]) != 4 or axes != [1, 2]:
            fail(f"a mean over axes {axes} (only the spatial axes 1, 2 of NHWC)")
        return "QLinearGlobalAveragePool", {"channels_last": 1}, [x] + q.params(x) + q.params(y)
    if code == "SOFTMAX":
        if abs(a.get("beta", 1.0) - 1.0) > 1e-6:
            fail(f"beta={a['beta']} (only 1)")
        return "QLinearSoftmax", {"axis": -1, "opset": 13}, [x] + q.params(x) + q.params(y)
    if code == "CONCATENATION":
        ins_q = q.params(y)
        for i in c.ins:
            ins_q += [i] + q.params(i)
        return "QLinearConcat", a, ins_q
    if code in ("RELU", "RELU6", "RELU_N1_TO_1"):   # requantized, clamped
        a = dict(axis=0, **q.clamp(y, code))
        return "QLinearConcat", a, q.params(y) + [x] + q.params(x)
    if code == "QUANTIZE":
        if t.dtypes[x] in _INT:       # int8 -> int8 requantization
            return "QLinearConcat", {"axis": 0}, q.params(y) + [x] + q.params(x)
        return "QuantizeLinear", {}, [x] + q.params(y)
    if code == "DEQUANTIZE":
        return "DequantizeLinear", {}, [x] + q.params(x)
    if code in _SAME:
        if act is not None:
            fail(f"fused activation {act}")
        if code == "MAX_POOL_2D" and not q.same(x, y):
            fail("input and output quantization differ")
        return _SAME[code], a, c.ins[:1]
    fail("no integer kernel for this builtin")


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
