"""The graph rewrite that turns an attention spelled out op by op -- as a
PyTorch export writes it -- into one ``pyarena.Attention`` op
(kernels/attention_fused.py, the C core's ``pa_attention``); run by
:func:`pyarena.runtime.fusion.fuse` on float32 graphs.

Recognised, from each Softmax over the last axis of rank-4 float32
scores::

    MatMul(Q, Kt) -> [Mul(., c) | Div(., c)] -> [Add(., mask)] -> Softmax
        -> MatMul(., V) -> [Transpose]

``c`` a scalar constant (either operand of the Mul; the divisor of the
Div), ``mask`` any float32 tensor (either operand of the Add).  ``Kt`` is
the keys transposed: a Transpose of K (absorbed: the fused op reads K
where it lies) or a tensor already transposed (read with its key axis
last).  A Transpose writing Q or V, and one after the second MatMul, are
absorbed the same way (the fused op reads and writes through strides).
As in fusion.py, every tensor inside the chain must have that one reader
and not be a graph output; an absorbed Transpose's input may have others.
A Softmax over another axis, a scale that is not a scalar constant, two
Adds, or a Softmax read twice leave the graph as it is.  Returns the
number of ops removed.
"""
import numpy as np

__all__ = ["fuse_attention"]

_F32 = np.dtype(np.float32)
ATTENTION = "pyarena.Attention"


def _rank4_f32(G, name):
    t = G.g.tensors.get(name)
    return t is not None and len(t.shape) == 4 and np.dtype(t.dtype) == _F32


def _perm(op):
    p = op.attrs.get("perm")
    return [3, 2, 1, 0] if p is None else [int(a) for a in p]


def _through_transpose(G, name, reader):
    """(source tensor, its perm) when ``name`` is written by a rank-4
    Transpose that ``reader`` alone reads; else (name, None)."""
    w = G.writer(name)
    if w is None or w.op_type != "Transpose" or G.only_reader(name) is not reader or \
            not _rank4_f32(G, w.inputs[0]) or sorted(_perm(w)) != [0, 1, 2, 3]:
        return name, None
    return w.inputs[0], _perm(w)


def _inner(G, name, op_type):
    """The op writing ``name`` if it is of ``op_type`` and ``name`` has
    one reader and is no graph output; else None."""
    w = G.writer(name)
    if w is None or w.op_type not in op_type or G.only_reader(name) is None or \
            len(w.outputs) != 1:
        return None
    return w


def _chain(G, soft):
    """The ops and operands of the attention ending in Softmax ``soft``
    (module doc), or None."""
    scores = soft.inputs[0]
    if len(soft.outputs) != 1 or not _rank4_f32(G, scores) or \
            int(soft.attrs.get("axis", -1)) not in (-1, 3):
        return None
    mm2 = G.only_reader(soft.outputs[0])
    if mm2 is None or mm2.op_type != "MatMul" or mm2.inputs[0] != soft.outputs[0] or \
            mm2.inputs[1] == soft.outputs[0] or not _rank4_f32(G, mm2.outputs[0]):
        return None
    ops, x, mask, scale = [soft], scores, "", 1.0
    add = _inner(G, x, ("Add",))
    if add is not None:
        if len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
            return None
        # the scores: the operand a scale or the product writes (the first
        # one if both are)
        path = [n for n in add.inputs if _inner(G, n, ("Mul", "Div", "MatMul")) is not None]
        if not path:
            return None
        x = path[0]
        mask = add.inputs[1] if add.inputs[0] == x else add.inputs[0]
        t = G.g.tensors.get(mask)
        if t is None or np.dtype(t.dtype) != _F32 or len(t.shape) > 4:
            return None
        ops.append(add)
    sc = _inner(G, x, ("Mul", "Div"))
    if sc is not None and len(sc.inputs) == 2:
        pos = 0 if sc.op_type == "Div" else next(
            (i for i in (0, 1) if G.scalar(sc.inputs[1 - i]) is not None), None)
        c = None if pos is None else G.scalar(sc.inputs[1 - pos])
        if c is None or (sc.op_type == "Div" and c == 0.0):
            return None
        scale = c if sc.op_type == "Mul" else 1.0 / c
        ops.append(sc)
        x = sc.inputs[pos]
    mm1 = _inner(G, x, ("MatMul",))
    if mm1 is None or not all(_rank4_f32(G, n) for n in mm1.inputs[:2]) or \
            len(mm1.inputs) != 2:
        return None
    ops.append(mm1)
    return ops, mm1, mm2, mask, float(scale)


def _rewire(G, op, inputs):
    """``op`` reads ``inputs`` now (its readers' lists kept up to date)."""
    for n in op.inputs:
        if n and n in G.readers:
            G.readers[n] = [o for o in G.readers[n] if o is not op]
    op.inputs = list(inputs)
    for n in op.inputs:
        if n:
            G.readers.setdefault(n, []).append(op)


def _fuse_one(G, soft):
    found = _chain(G, soft)
    if found is None:
        return 0
    ops, mm1, mm2, mask, scale = found
    q, q_perm = _through_transpose(G, mm1.inputs[0], mm1)
    k, k_perm = _through_transpose(G, mm1.inputs[1], mm1)
    v, v_perm = _through_transpose(G, mm2.inputs[1], mm2)
    kt = k_perm or [0, 1, 2, 3]
    absorbed = [G.writer(n) for n, p in ((mm1.inputs[0], q_perm), (mm1.inputs[1], k_perm),
                                         (mm2.inputs[1], v_perm)) if p is not None]
    tensors = [o.outputs[0] for o in ops] + [o.outputs[0] for o in absorbed]
    out_axes = [0, 1, 2, 3]
    last = G.only_reader(mm2.outputs[0])
    if last is not None and last.op_type == "Transpose" and len(last.outputs) == 1 and \
            sorted(_perm(last)) == [0, 1, 2, 3]:
        p = _perm(last)
        out_axes = [p.index(a) for a in range(4)]     # logical axis a -> output axis
        tensors.append(mm2.outputs[0])
    else:
        last = None
    mm2.attrs = {"scale": scale, "q_axes": q_perm or [0, 1, 2, 3],
                 "k_axes": [kt[0], kt[1], kt[3], kt[2]], "v_axes": v_perm or [0, 1, 2, 3],
                 "out_axes": out_axes}
    mm2.op_type = ATTENTION
    _rewire(G, mm2, [q, k, v] + ([mask] if mask else []))
    dead = ops + absorbed + ([last] if last is not None else [])
    if last is not None:
        G.take_output(mm2, last, dead, tensors)
    else:
        G.drop(dead, tensors)
    return len(dead)


def fuse_attention(G):
    """Fuse every attention of fusion.py's graph view ``G`` (module doc);
    the number of ops removed (``G.sweep()`` is the caller's)."""
    removed = 0
    for op in list(G.g.ops):
        if op.op_type == "Softmax" and id(op) not in G.dead:
            removed += _fuse_one(G, op)
    return removed
