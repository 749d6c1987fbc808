"""onnxruntime's weight and bias quantization of a float Conv /
ConvTranspose / Gemm inside a QDQ group, done the same way before the
QDQ rewrite (onnx_qdq.py).

onnxruntime's optimiser (its default level; ``WeightBiasQuantization``,
onnxruntime/core/optimizer/qdq_transformer/weight_bias_quantization.cc)
takes a Conv, ConvTranspose or Gemm whose data input is a
DequantizeLinear with a scalar scale and whose result runs, through Relu /
Clip only, into a QuantizeLinear, and

* quantizes a float32 weight initializer to int8 per tensor
  (``GetQuantizationParameter``, core/util/qmath.h: the range widened to
  include 0, ``scale = (max - min) / 255``, zero point
  ``round_half_even(clamp(-128 - min / scale))``; ``scale = 1`` for an
  all-zero weight), then a QuantizeLinear -> DequantizeLinear of it;
* quantizes a 1-D float bias initializer to int32 at scale
  ``x_scale * w_scale`` (``Cast(Round(bias / scale))``, then a
  DequantizeLinear).

A QOperator file's ConvTranspose (its quantizer has no integer form for
it) then computes on rounded weights in onnxruntime's default run and not
in its unoptimised one: PP-OCRv4's text detector, quantized, was 22 output
quanta from the default run before this pass and 0 after.  A Conv so
treated becomes a QLinearConv in the rewrite, as in onnxruntime.
"""
import numpy as np

from .onnx_qdq_graph import QdqGraph

__all__ = ["quantize_float_weights"]

_OPS = ("Conv", "ConvTranspose", "Gemm")


class _Model(QdqGraph):
    """The shared lookups, and the DQ nodes this pass adds."""

    def __init__(self, onnx, g, views):
        super().__init__(onnx, g, views)
        self.names = set(self.inits) | set(self.producer)

    def scalar_dq(self, name):
        """The DQ producing ``name`` with a constant scalar scale, or None."""
        d = self.producer.get(name)
        if d is None or d.op_type != "DequantizeLinear" or d.domain not in ("", "ai.onnx") or \
                len(d.input) < 2 or d.input[1] not in self.inits:
            return None
        return d if self.value(d.input[1]).size == 1 else None

    def runs_into_q(self, n):
        """onnxruntime's IsNoBranchPathToQuantizeLinear: one reader each,
        Relu / Clip only, up to a QuantizeLinear."""
        cur = n
        while True:
            rs = self.readers.get(cur.output[0], [])
            if len(cur.output) != 1 or len(rs) != 1 or cur.output[0] in self.outputs:
                return False
            if rs[0].op_type == "QuantizeLinear":
                return True
            if rs[0].op_type not in ("Relu", "Clip"):
                return False
            cur = rs[0]

    def fresh(self, base):
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def constant(self, base, value):
        """A new initializer (beside the file's weights when they are read
        in place); returns its name."""
        name = self.fresh(base)
        self.add_constant(value, name)
        self.inits[name] = self.new_inits[-1]
        return name

    def dq_node(self, base, q, scale, zp, axis=None):
        out = self.fresh(base)
        ins = [self.constant(base + "_q", q), self.constant(base + "_scale", scale),
               self.constant(base + "_zp", zp)]
        kw = {} if axis is None else {"axis": axis}
        return self.onnx.helper.make_node("DequantizeLinear", ins, [out], name=out, **kw)


def weight_params(w):
    """onnxruntime's GetQuantizationParameter<int8_t> (asymmetric, full
    range) of the float32 array ``w``: (scale, zero point), float32 steps."""
    w = np.asarray(w, np.float32)
    lo = np.float32(min(float(w.min()), 0.0)) if w.size else np.float32(0)
    hi = np.float32(max(float(w.max()), 0.0)) if w.size else np.float32(0)
    scale = np.float32(1) if hi == lo else np.float32(hi - lo) / np.float32(255)
    z0 = np.float32(-128) - lo / scale
    zp = np.rint(np.clip(z0, np.float32(-128), np.float32(127)))
    return np.float32(scale), np.int8(zp)


def quantize_weight(w, scale, zp):
    """QuantizeLinear as onnxruntime computes it: x / scale in float32,
    rounded half to even, plus the zero point, saturated to int8."""
    with np.errstate(all="ignore"):
        q = np.rint(np.asarray(w, np.float32) / np.float32(scale)) + np.float32(zp)
    return np.clip(q, -128, 127).astype(np.int8)


def _bias(M, n, dx, w_scale, per_channel):
    """The int32 DQ of ``n``'s float bias, or None if it has none to
    quantize (or one onnxruntime would not)."""
    b = n.input[2] if len(n.input) > 2 else ""
    if not b:
        return None
    bias = np.asarray(M.value(b), np.float32)
    scale = (np.asarray(M.value(dx.input[1]), np.float32).reshape(()) *
             np.asarray(w_scale, np.float32).reshape(-1)).astype(np.float32)
    if not per_channel:
        scale = scale.reshape(())
    with np.errstate(all="ignore"):
        r = np.rint(bias / scale)
    if not np.isfinite(r).all() or np.abs(r).max(initial=0) >= 2.0 ** 31:
        return False
    # (onnxruntime's DQ has no zero point: 0, written out for the rewrite)
    return M.dq_node(f"{n.name or n.output[0]}_bias_dq", r.astype(np.int32), scale,
                     np.zeros(scale.shape, np.int32), axis=0 if per_channel else None)


def _plan_node(M, n):
    """The DQ nodes that quantize ``n``'s weight and bias (and the inputs
    they replace), or None."""
    if n.op_type not in _OPS or n.domain not in ("", "ai.onnx") or len(n.input) < 2:
        return None
    dx = M.scalar_dq(n.input[0])
    if dx is None or not M.runs_into_q(n):
        return None
    w, b = n.input[1], n.input[2] if len(n.input) > 2 else ""
    dw = M.scalar_dq(w) or M.producer.get(w)
    if dw is not None and dw.op_type != "DequantizeLinear":
        return None
    if dw is None and (w not in M.inits or M.inits[w].data_type != M.onnx.TensorProto.FLOAT):
        return None
    if b and (b not in M.inits or len(M.inits[b].dims) != 1 or
              M.inits[b].data_type != M.onnx.TensorProto.FLOAT):
        return None
    if dw is not None and not b:
        return None
    new, ins = [], list(n.input)
    if dw is None:
        scale, zp = weight_params(M.value(w))
        q = quantize_weight(M.value(w), scale, zp)
        new.append(M.dq_node(f"{n.name or n.output[0]}_weight_dq", q, scale, zp))
        ins[1], w_scale, per_channel = new[-1].output[0], scale, False
    else:
        if len(dw.input) < 2 or dw.input[1] not in M.inits:
            return None
        w_scale = M.value(dw.input[1])
        per_channel = w_scale.size > 1
        attrs = {a.name: M.onnx.helper.get_attribute_value(a) for a in dw.attribute}
        want = 0 if n.op_type != "Gemm" else (0 if any(
            a.name == "transB" and a.i for a in n.attribute) else 1)
        if per_channel and (attrs.get("block_size", 0) or attrs.get("axis", 1) != want or
                            w_scale.size != M.inits[b].dims[0]):
            return None
    if b:
        bq = _bias(M, n, dx, w_scale, per_channel)
        if bq is False:
            return None
        new.append(bq)
        ins[2] = bq.output[0]
    return new, ins


def quantize_float_weights(onnx, g, views=None):
    """Rewrite ``g`` in place as onnxruntime's WeightBiasQuantization does
    (the module docstring); returns the number of nodes changed."""
    M = _Model(onnx, g, views)
    nodes, changed = [], 0
    for n in g.node:
        plan = _plan_node(M, n)
        if plan is not None:
            new, ins = plan
            nodes.extend(new)
            del n.input[:]
            n.input.extend(ins)
            changed += 1
        nodes.append(n)
    if changed:
        del g.node[:]
        g.node.extend(nodes)
        g.initializer.extend(M.new_inits)
    return changed
