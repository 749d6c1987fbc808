"""A BatchNormalization no convolution absorbs, with what follows it.

A pre-activation network (DenseNet: ``Concat -> BatchNormalization -> Mul
-> Add -> Relu -> Conv``) normalises a convolution's *input*, so
:mod:`.fusion` cannot fold the normalisation into the weights before it.
Here an inference BatchNormalization of constant statistics takes

* a per-channel or scalar constant ``Mul`` then ``Add`` after it (either
  alone; Caffe2's exports spell the affine part of the normalisation that
  way): folded into its parameters -- the new scale ``s * a`` and shift
  ``t * a + b`` are computed here in float64 (``s``, ``t``: the
  normalisation's own, in onnxruntime's order) and stored as the
  normalisation's scale and bias with mean 0, variance 1 and epsilon 0,
  so the op stays an ONNX BatchNormalization of the same outputs (to
  float rounding);
* then the activation after that (what a Conv absorbs: Relu, Clip,
  Sigmoid, HardSigmoid, SiLU and hard-swish chains) as its
  ``activation`` attribute.

Its kernel (:mod:`.kernels.batch_norm`) then runs the whole chain in one
native pass (``pa_scale_bias_act``) where there were up to four NumPy or
native passes, and in NHWC too, so the NHWC pass's regions run through it
instead of stopping at it (:mod:`.nhwc`).  Same rules as :mod:`.fusion`:
every tensor inside a chain has one reader and is not a graph output.
"""
import numpy as np

__all__ = ["fuse_batch_norm"]

_F32 = np.dtype(np.float32)


def _bn_params(G, bn):
    """(scale, shift) in float64 of an inference BatchNormalization of
    constant statistics on a float32 tensor of rank >= 2, not yet fused
    with anything; None otherwise."""
    if bn.op_type != "BatchNormalization" or id(bn) in G.dead or \
            len([o for o in bn.outputs if o]) != 1 or len(bn.inputs) < 5 or \
            int(bn.attrs.get("training_mode", 0)) or \
            bn.attrs.get("activation") not in (None, "", "NONE") or \
            bn.attrs.get("layout", "NCHW") != "NCHW":
        return None
    out = G.g.tensors.get(bn.outputs[0])
    if out is None or np.dtype(out.dtype) != _F32 or len(out.shape) < 2:
        return None
    p = [G.const(n) for n in bn.inputs[1:5]]
    if any(v is None for v in p) or len({v.size for v in p}) != 1:
        return None
    gamma, beta, mean, var = (v.astype(np.float64).reshape(-1) for v in p)
    s = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    return s, beta - mean * s


def _per_channel(v, c, rank):
    """``v`` as c per-channel values when it broadcasts along axis 1 of a
    rank-``rank`` tensor without growing it (a scalar, or (c, 1, ...) with
    leading ones at most), else None."""
    if v is None:
        return None
    if v.size == 1:
        return np.full(c, float(v.reshape(-1)[0]))
    shape, want = tuple(v.shape), (c,) + (1,) * (rank - 2)
    while len(shape) > len(want) and shape[0] == 1:
        shape = shape[1:]
    return v.reshape(c).astype(np.float64) if shape == want else None


def _other_const(G, op, x):
    other = [t for t in op.inputs if t != x]
    return G.const(other[0]) if len(op.inputs) == 2 and len(other) == 1 else None


def _fold_affine(G, bn, s, t):
    """Mul / Add of constants after ``bn`` folded into (s, t); returns
    (s, t, ops taken, tensors between them)."""
    rank = len(G.g.tensors[bn.outputs[0]].shape)
    ops, last = [], bn
    for kind in ("Mul", "Add"):
        nxt = G.only_reader(last.outputs[0])
        if nxt is None or nxt.op_type != kind or \
                nxt.attrs.get("activation") not in (None, "", "NONE"):
            continue
        v = _per_channel(_other_const(G, nxt, last.outputs[0]), s.size, rank)
        out = G.g.tensors.get(nxt.outputs[0]) if len(nxt.outputs) == 1 else None
        if v is None or out is None or np.dtype(out.dtype) != _F32:
            continue
        s, t = (s * v, t * v) if kind == "Mul" else (s, t + v)
        ops.append(nxt)
        last = nxt
    return s, t, ops


def _fuse_one(G, bn, absorb_activation):
    found = _bn_params(G, bn)
    if found is None:
        return 0
    s, t, ops = _fold_affine(G, bn, *found)
    if ops:
        c = s.size
        G.set_param(bn, 1, "scale", s.astype(np.float32))
        G.set_param(bn, 2, "bias", t.astype(np.float32))
        G.set_param(bn, 3, "mean", np.zeros(c, np.float32))
        G.set_param(bn, 4, "var", np.ones(c, np.float32))
        bn.attrs["epsilon"] = 0.0
        G.take_output(bn, ops[-1], ops, [bn.outputs[0]] + [o.outputs[0] for o in ops[:-1]])
    return len(ops) + absorb_activation(G, bn)


def fuse_batch_norm(G, absorb_activation):
    """Every BatchNormalization of ``G`` (fusion's graph view) that takes a
    Mul / Add / activation after it (module docstring); returns the number
    of ops removed.  ``absorb_activation(G, op)``: :mod:`.fusion`'s
    activation rule (sets ``op``'s ``activation``, takes the output)."""
    return sum(_fuse_one(G, op, absorb_activation) for op in list(G.g.ops)
               if op.op_type == "BatchNormalization")
