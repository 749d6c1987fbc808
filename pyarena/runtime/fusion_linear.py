"""The graph rewrite that lets a MatMul by constant weights (a linear
layer) do the work of the ops after it, as runtime/fusion.py does for a
Conv: run by :func:`pyarena.runtime.fusion.fuse` on float32 graphs.

* the **bias** ``Add(MatMul(x, W), b)`` -- W a constant 2-D matrix, b a
  constant of W's column count broadcast along the last axis only ((N,),
  (1, N), (1, 1, N)...) -- becomes the MatMul's input 2;
* the **GELU** after it (with or without a bias) becomes the MatMul's
  ``activation`` "GELU": the standard ``Gelu`` (approximate "none"),
  com.microsoft ``Gelu``, com.microsoft ``BiasGelu(y, b)`` (its bias
  taken as above), and the erf form a PyTorch export writes,
  ``Mul(Mul(y, Add(Erf(Div(y, sqrt 2)), 1)), 0.5)`` -- the Div may be a
  Mul by 1 / sqrt 2, the halving may come first (``Mul(Mul(y, 0.5),
  Add(...))``);
* the **SiLU** after it (with or without a bias), ``Mul(y, Sigmoid(y))``
  (a decoder's feed-forward), becomes the MatMul's ``activation``
  "SILU";
* the **bias of a SkipLayerNormalization** after it (onnxruntime's
  transformer optimizer gives the projection's bias to the norm) becomes
  the MatMul's input 2: the norm then adds two tensors of one shape and
  runs in the C call lists.  The sum is (x @ W + b) + skip instead of
  (x @ W + skip) + b: equal within float rounding.

The MatMul kernel (kernels/linalg.py) runs the packed SGEMM, which adds
the bias and applies the activation in registers.  As in fusion.py, a chain is
fused only when every tensor inside it has that one reader and is not a
graph output.  Returns the number of ops removed.
"""
import math

import numpy as np

__all__ = ["fuse_linear"]

_F32 = np.dtype(np.float32)
_ROOT2 = math.sqrt(2.0)


def _near(v, want):
    return v is not None and abs(v - want) <= 1e-6 * abs(want)


def _linear_ok(G, op):
    if op.op_type != "MatMul" or len(op.inputs) != 2 or len(op.outputs) != 1 or \
            op.attrs.get("activation") not in (None, "", "NONE"):
        return False
    w = G.const(op.inputs[1])
    out = G.g.tensors.get(op.outputs[0])
    a = G.g.tensors.get(op.inputs[0])
    return w is not None and w.ndim == 2 and out is not None and a is not None and \
        np.dtype(out.dtype) == _F32 and np.dtype(a.dtype) == _F32 and \
        len(out.shape) >= 2 and w.dtype == _F32


def _row_bias(G, name, n, rank):
    """The constant ``name`` as a bias of ``n`` values broadcast along the
    last axis of a rank-``rank`` result only, or None."""
    b = G.const(name)
    if b is None or b.dtype != _F32 or b.ndim > rank or b.size != n or \
            (b.ndim and b.shape[-1] != n):
        return None
    return b


def _other(op, x):
    """The input of a two-input ``op`` that is not ``x`` (None if both or
    neither are)."""
    if len(op.inputs) != 2 or (op.inputs[0] == x) == (op.inputs[1] == x):
        return None
    return op.inputs[1] if op.inputs[0] == x else op.inputs[0]


def _erf_gelu(G, y):
    """The ops of the erf GELU of ``y`` in the module doc's forms (the
    last one writes the result), or None."""
    readers = G.readers.get(y, [])
    if y in G.outputs or len(readers) != 2:
        return None
    scale = next((o for o in readers if o.op_type in ("Div", "Mul") and
                  G.only_reader(o.outputs[0]) is not None and
                  G.only_reader(o.outputs[0]).op_type == "Erf"), None)
    if scale is None or (scale.op_type == "Div" and scale.inputs[0] != y):
        return None
    c = G.scalar(_other(scale, y))
    if not (_near(c, _ROOT2) if scale.op_type == "Div" else _near(c, 1 / _ROOT2)):
        return None
    erf = G.only_reader(scale.outputs[0])
    add = G.only_reader(erf.outputs[0])
    if add is None or add.op_type != "Add" or not _near(G.scalar(_other(add, erf.outputs[0])),
                                                         1.0):
        return None
    mul = next((o for o in readers if o is not scale), None)
    if mul is None or mul.op_type != "Mul":
        return None
    half = G.scalar(_other(mul, y))
    if _near(half, 0.5):        # Mul(Mul(y, 0.5), Add(...))
        last = G.only_reader(mul.outputs[0])
        if last is None or last.op_type != "Mul" or G.only_reader(add.outputs[0]) is not last \
                or _other(last, add.outputs[0]) != mul.outputs[0]:
            return None
        return [scale, erf, add, mul, last]
    if _other(mul, y) != add.outputs[0] or G.only_reader(add.outputs[0]) is not mul:
        return None
    last = G.only_reader(mul.outputs[0])      # Mul(Mul(y, Add(...)), 0.5)
    if last is None or last.op_type != "Mul" or \
            not _near(G.scalar(_other(last, mul.outputs[0])), 0.5):
        return None
    return [scale, erf, add, mul, last]


def _fuse_bias(G, mm, n, rank):
    add = G.only_reader(mm.outputs[0])
    if add is None or add.op_type != "Add" or len(add.outputs) != 1:
        return 0
    bias = _other(add, mm.outputs[0])
    if bias is None or _row_bias(G, bias, n, rank) is None:
        return 0
    _attach_bias(G, mm, bias)
    G.take_output(mm, add, [add], [mm.outputs[0]])
    return 1


def _fuse_skip_bias(G, mm, n, rank):
    """The bias of the SkipLayerNormalization after ``mm`` (its only
    reader, ``mm``'s output its input or skip) moved to ``mm``: the norm
    then adds two tensors of one shape, which the C call lists run
    (kernels/contrib_norms.py).  Removes no op: returns 0."""
    y = mm.outputs[0]
    skip = G.only_reader(y)
    if skip is None or skip.op_type != "SkipLayerNormalization" or len(mm.inputs) != 2 or \
            y not in skip.inputs[:2] or len(skip.inputs) < 5 or not skip.inputs[4] or \
            any(skip.outputs[1:3]):
        return 0
    bias = skip.inputs[4]
    if _row_bias(G, bias, n, rank) is None:
        return 0
    _attach_bias(G, mm, bias)
    del skip.inputs[4:]
    G.readers[bias] = [r for r in G.readers.get(bias, []) if r is not skip]
    return 0


def _attach_bias(G, mm, bias):
    mm.inputs.append(bias)
    G.readers.setdefault(bias, []).append(mm)


def _approximate(op):
    ap = op.attrs.get("approximate", "none")
    return ap.decode() if isinstance(ap, bytes) else ap


def _fuse_gelu(G, mm, n, rank):
    y = mm.outputs[0]
    one = G.only_reader(y)
    if one is not None and (
            (one.op_type == "Gelu" and _approximate(one) == "none") or
            one.op_type == "com.microsoft.Gelu"):
        chain = [one]
    elif one is not None and one.op_type == "BiasGelu" and len(mm.inputs) == 2 \
            and one.inputs[0] == y and _row_bias(G, one.inputs[1], n, rank) is not None:
        _attach_bias(G, mm, one.inputs[1])
        chain = [one]
    else:
        chain = _erf_gelu(G, y)
        if chain is None:
            return 0
    mm.attrs["activation"] = "GELU"
    G.take_output(mm, chain[-1], chain, [y] + [o.outputs[0] for o in chain[:-1]])
    return len(chain)


def _silu(G, y):
    """[Sigmoid, Mul] of ``Mul(y, Sigmoid(y))`` (either operand order),
    or None."""
    readers = G.readers.get(y, [])
    if y in G.outputs or len(readers) != 2:
        return None
    sig = next((o for o in readers if o.op_type == "Sigmoid"), None)
    mul = next((o for o in readers if o.op_type == "Mul"), None)
    if sig is None or mul is None or G.only_reader(sig.outputs[0]) is not mul or \
            sorted(mul.inputs) != sorted([y, sig.outputs[0]]):
        return None
    return [sig, mul]


def _fuse_silu(G, mm):
    y = mm.outputs[0]
    chain = _silu(G, y)
    if chain is None:
        return 0
    mm.attrs["activation"] = "SILU"
    G.take_output(mm, chain[-1], chain, [y, chain[0].outputs[0]])
    return len(chain)


def fuse_linear(G):
    """Fuse the bias and the GELU or SiLU after every linear MatMul of fusion.py's
    graph view ``G``; the number of ops removed (``G.sweep()`` is the
    caller's)."""
    removed = 0
    for mm in list(G.g.ops):
        if id(mm) in G.dead or not _linear_ok(G, mm):
            continue
        n = int(G.const(mm.inputs[1]).shape[1])
        rank = len(G.g.tensors[mm.outputs[0]].shape)
        removed += _fuse_bias(G, mm, n, rank)
        _fuse_skip_bias(G, mm, n, rank)
        gelu = _fuse_gelu(G, mm, n, rank)
        removed += gelu or _fuse_silu(G, mm)
    return removed
