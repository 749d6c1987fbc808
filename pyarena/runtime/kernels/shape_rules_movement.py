"""Output shapes of the ONNX operators that move, reshape, index, reduce or
make tensors (the rest of :mod:`.shape_rules`; same conventions)."""
import math

import numpy as np

from .shape_rules import FLOAT, INT64, broadcast, dims_op, known, norm_axis

def reshape(n):
    x, target = n.s(0), n.v(1)
    if target is None:
        return [(None, n.t(0))]
    shp = [int(d) for d in np.asarray(target).reshape(-1)]
    if not n.a.get("allowzero", 0):
        shp = [(x[i] if x is not None and i < len(x) else None) if d == 0 else d
               for i, d in enumerate(shp)]
    if shp.count(-1) > 1:
        raise ValueError(f"Reshape target {shp} has more than one -1")
    if -1 in shp:
        total = None if x is None else dims_op(lambda *d: math.prod(d), *x)
        rest = dims_op(lambda *d: math.prod(d), *[d for d in shp if d != -1])
        if total is not None and rest is not None:
            if rest == 0 or total % rest:
                raise ValueError(f"cannot reshape {x} to {shp}")
            shp[shp.index(-1)] = total // rest
        else:
            shp[shp.index(-1)] = None
    elif x is not None and all(known(d) for d in list(x) + shp) and \
            math.prod(x) != math.prod(shp):
        raise ValueError(f"cannot reshape {x} ({math.prod(x)} values) to {shp}")
    return [(shp, n.t(0))]


def flatten(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    ax = int(n.a.get("axis", 1))
    if not -len(x) <= ax <= len(x):
        raise ValueError(f"axis {ax} is out of range for rank {len(x)}")
    ax = ax + len(x) if ax < 0 else ax
    prod = lambda ds: dims_op(lambda *d: math.prod(d), *ds)  # noqa: E731
    return [([prod(x[:ax]), prod(x[ax:])], n.t(0))]


def _axes_of(n, attr_before):
    """Axes from the attribute (opset < ``attr_before``) or input 1."""
    if n.opset < attr_before:
        return n.ints("axes")
    if not n.has(1):
        return None
    v = n.v(1)
    if v is None:
        raise LookupError
    return [int(d) for d in np.asarray(v).reshape(-1)]


def squeeze(n):
    x = n.s(0)
    try:
        axes = _axes_of(n, 13)
    except LookupError:
        return [(None, n.t(0))]
    if x is None:
        return [(None, n.t(0))]
    if axes is None:
        if not all(known(d) for d in x):
            return [(None, n.t(0))]
        return [([d for d in x if d != 1], n.t(0))]
    axes = {norm_axis(a, len(x)) for a in axes}
    return [([d for i, d in enumerate(x) if i not in axes], n.t(0))]


def unsqueeze(n):
    x = n.s(0)
    try:
        axes = _axes_of(n, 13)
    except LookupError:
        return [(None, n.t(0))]
    if x is None or axes is None:
        return [(None, n.t(0))]
    rank = len(x) + len(axes)
    axes = sorted(norm_axis(a, rank) for a in axes)
    out, it = [], iter(x)
    for i in range(rank):
        out.append(1 if i in axes else next(it))
    return [(out, n.t(0))]


def transpose(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    perm = n.ints("perm") or list(range(len(x)))[::-1]
    if sorted(perm) != list(range(len(x))):
        raise ValueError(f"perm {perm} does not fit rank {len(x)}")
    return [([x[p] for p in perm], n.t(0))]


def concat(n):
    xs = [n.s(i) for i in range(len(n.ins)) if n.has(i)]
    if any(x is None for x in xs) or not xs:
        return [(None, n.t(0))]
    if "axis" not in n.a:
        raise ValueError("the axis attribute is missing")
    rank = len(xs[0])
    if any(len(x) != rank for x in xs):
        raise ValueError(f"inputs of ranks {[len(x) for x in xs]}")
    ax = norm_axis(n.a["axis"], rank)
    out = []
    for i in range(rank):
        if i == ax:
            out.append(dims_op(lambda *d: sum(d), *[x[i] for x in xs]))
        else:
            out.append(broadcast(*[[x[i]] for x in xs])[0])
    return [(out, n.t(0))]


def split(n):
    x = n.s(0)
    k = n.nout
    if x is None:
        return [(None, n.t(0))] * k
    ax = norm_axis(n.a.get("axis", 0), len(x))
    if n.opset < 13:
        parts = n.ints("split")
    elif n.has(1):
        v = n.v(1)
        if v is None:
            return [(None, n.t(0))] * k
        parts = [int(d) for d in np.asarray(v).reshape(-1)]
    else:
        parts = None
    if parts is None:
        d = x[ax]
        if not known(d):
            parts = [None] * k
        else:
            each = -(-d // k)
            parts = [min(each, max(d - each * i, 0)) for i in range(k)]
    if len(parts) != k:
        raise ValueError(f"split {parts} for {k} outputs")
    return [(list(x[:ax]) + [p] + list(x[ax + 1:]), n.t(0)) for p in parts]


def sliced(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    if n.opset >= 10:
        vs = [n.v(i) if n.has(i) else None for i in range(1, 5)]
        if vs[0] is None or vs[1] is None or (n.has(3) and vs[2] is None) or \
                (n.has(4) and vs[3] is None):
            return [([None] * len(x), n.t(0))]
        starts, ends = [[int(d) for d in np.asarray(v).reshape(-1)] for v in vs[:2]]
        axes = None if vs[2] is None else [int(d) for d in np.asarray(vs[2]).reshape(-1)]
        steps = None if vs[3] is None else [int(d) for d in np.asarray(vs[3]).reshape(-1)]
    else:
        starts, ends, axes, steps = n.ints("starts"), n.ints("ends"), n.ints("axes"), None
    axes = list(range(len(starts))) if axes is None else [norm_axis(a, len(x)) for a in axes]
    steps = steps or [1] * len(starts)
    out = list(x)
    for ax, st, en, sp in zip(axes, starts, ends, steps):
        if sp == 0:
            raise ValueError("Slice step 0")
        out[ax] = dims_op(lambda d: len(range(*slice(st, en, sp).indices(d))), x[ax])
    return [(out, n.t(0))]


def gather(n):
    x, idx = n.s(0), n.s(1)
    if x is None or idx is None:
        return [(None, n.t(0))]
    ax = norm_axis(n.a.get("axis", 0), len(x))
    return [(list(x[:ax]) + list(idx) + list(x[ax + 1:]), n.t(0))]


def gather_nd(n):
    x, idx = n.s(0), n.s(1)
    b = int(n.a.get("batch_dims", 0))
    if x is None or idx is None or not known(idx[-1]):
        return [(None, n.t(0))]
    return [(list(idx[:-1]) + list(x[b + idx[-1]:]), n.t(0))]


def _values(n, i):
    v = n.v(i)
    return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]


def expand(n):
    shp = _values(n, 1)
    return [(None if shp is None else broadcast(n.s(0), shp), n.t(0))]


def center_crop_pad(n):
    """CenterCropPad: the input's shape with the ``axes`` (all by default)
    given the target sizes of input 1."""
    x, target = n.s(0), _values(n, 1)
    if x is None:
        return [(None, n.t(0))]
    axes = n.ints("axes") or list(range(len(x)))
    axes = [norm_axis(a, len(x)) for a in axes]
    out = list(x)
    for i, a in enumerate(axes):
        out[a] = None if target is None else target[i]
    if target is not None and len(target) != len(axes):
        raise ValueError(f"shape {target} does not give one size per axis {axes}")
    return [(out, n.t(0))]


def col2im(n):
    """Col2Im: (N, C, *image_shape), C the columns' rows over the block size."""
    x, image, block = n.s(0), _values(n, 1), _values(n, 2)
    if x is None or image is None or block is None:
        return [(None, n.t(0))]
    size = int(np.prod(block))
    return [([x[0], dims_op(lambda c: c // size, x[1])] + image, n.t(0))]


def tile(n):
    x, reps = n.s(0), _values(n, 1)
    if x is None or reps is None:
        return [(None, n.t(0))]
    if len(reps) != len(x):
        raise ValueError(f"repeats {reps} for rank {len(x)}")
    return [([dims_op(lambda d, r=r: d * r, d) for d, r in zip(x, reps)], n.t(0))]


def pad(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    pads = n.ints("pads") if n.opset < 11 else _values(n, 1)
    if pads is None:
        return [([None] * len(x), n.t(0))]
    axes = _values(n, 3) if n.has(3) else list(range(len(x)))
    if axes is None:
        return [([None] * len(x), n.t(0))]
    axes = [norm_axis(a, len(x)) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads {pads} for {len(axes)} axes")
    out = list(x)
    for j, ax in enumerate(axes):
        out[ax] = dims_op(lambda d: d + pads[j] + pads[j + len(axes)], x[ax])
    return [(out, n.t(0))]


def resize(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    if n.op_type_is("Upsample") or n.opset < 11:
        scales = n.a.get("scales") if n.opset < 9 else n.v(1 if n.opset >= 9 else 2)
        sizes = None
    else:
        scales = n.v(2) if n.has(2) else None
        sizes = n.v(3) if n.has(3) else None
        if n.has(2) and n.has(3) and (scales is None) == (sizes is None) and \
                np.asarray(scales if scales is not None else []).size:
            raise ValueError("both scales and sizes are given")
    if str(n.a.get("keep_aspect_ratio_policy", "stretch")) != "stretch" or \
            n.a.get("axes") is not None:
        raise NotImplementedError
    if sizes is not None and np.asarray(sizes).size:
        return [([int(d) for d in np.asarray(sizes).reshape(-1)], n.t(0))]
    if scales is None or not np.asarray(scales).size:
        return [([None] * len(x), n.t(0))]
    sc = [float(s) for s in np.asarray(scales).reshape(-1)]
    if len(sc) != len(x):
        raise ValueError(f"scales {sc} for rank {len(x)}")
    # as ONNX's own inference: floor of the float32 product
    return [([dims_op(lambda d, s=s: int(np.floor(np.float32(d) * np.float32(s))), d)
              for d, s in zip(x, sc)], n.t(0))]


def depth_space(n):
    x, b = n.s(0), int(n.a["blocksize"])
    if x is None:
        return [(None, n.t(0))]
    if n.op_type_is("DepthToSpace"):
        return [([x[0], dims_op(lambda c: c // (b * b), x[1]), dims_op(lambda h: h * b, x[2]),
                  dims_op(lambda w: w * b, x[3])], n.t(0))]
    return [([x[0], dims_op(lambda c: c * b * b, x[1]), dims_op(lambda h: h // b, x[2]),
              dims_op(lambda w: w // b, x[3])], n.t(0))]


# -- reductions, indices, sequences --------------------------------------------------
def reduce(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    attr_before = 13 if n.op_type_is("ReduceSum") else 18
    try:
        axes = _axes_of(n, attr_before)
    except LookupError:
        return [(None, n.t(0))]
    keep = int(n.a.get("keepdims", 1))
    if not axes:
        if n.a.get("noop_with_empty_axes", 0) and n.opset >= attr_before:
            return [(list(x), n.t(0))]
        axes = list(range(len(x)))
    axes = {norm_axis(a, len(x)) for a in axes}
    out = [1 if i in axes else d for i, d in enumerate(x)] if keep else \
        [d for i, d in enumerate(x) if i not in axes]
    return [(out, n.t(0))]


def arg_reduce(n):
    x = n.s(0)
    if x is None:
        return [(None, INT64)]
    ax = norm_axis(n.a.get("axis", 0), len(x))
    keep = int(n.a.get("keepdims", 1))
    out = [1 if i == ax else d for i, d in enumerate(x)] if keep else \
        [d for i, d in enumerate(x) if i != ax]
    return [(out, INT64)]


def topk(n):
    x = n.s(0)
    k = _values(n, 1) if n.opset >= 10 else n.ints("k")
    if x is None:
        return [(None, n.t(0)), (None, INT64)]
    ax = norm_axis(n.a.get("axis", -1), len(x))
    out = list(x)
    out[ax] = None if k is None else k[0]
    return [(out, n.t(0)), (out, INT64)]


def shape_of(n):
    x = n.s(0)
    if x is None:
        return [(None, INT64)]
    r = len(x)
    start, end = int(n.a.get("start", 0)), n.a.get("end")
    idx = range(r)[slice(start, None if end is None else int(end))]
    return [([len(idx)], INT64)]


def size_of(n):
    return [([], INT64)]


def constant_of_shape(n):
    shp = _values(n, 0)
    val = n.a.get("value")
    from onnx.helper import np_dtype_to_tensor_dtype
    t = FLOAT if val is None else np_dtype_to_tensor_dtype(np.asarray(val).dtype)
    if shp is None:
        s = n.s(0)
        return [(None if s is None or not known(s[0]) else [None] * s[0], t)]
    return [(shp, t)]


def arange(n):
    v = [n.v(i) for i in range(3)]
    if any(x is None for x in v):
        return [([None], n.t(0))]
    start, limit, delta = (float(np.asarray(x).reshape(())) for x in v)
    if delta == 0:
        raise ValueError("Range delta 0")
    return [([max(int(math.ceil((limit - start) / delta)), 0)], n.t(0))]


def one_hot(n):
    x, depth = n.s(0), n.v(1)
    if x is None:
        return [(None, n.t(2))]
    rank = len(x) + 1
    ax = norm_axis(n.a.get("axis", -1), rank)
    d = None if depth is None else int(np.asarray(depth).reshape(-1)[0])
    return [(list(x[:ax]) + [d] + list(x[ax:]), n.t(2))]


def nonzero(n):
    x = n.s(0)
    return [(None if x is None else [len(x), None], INT64)]


def eye_like(n):
    return [(n.s(0), int(n.a.get("dtype", 0)) or n.t(0))]


def det(n):
    """Det: the batch dims of square matrices."""
    x = n.s(0)
    if x is not None and len(x) < 2:
        raise ValueError(f"Det takes matrices, got shape {x}")
    return [(None if x is None else list(x[:-2]), n.t(0))]


def recurrent(n):
    x, w = n.s(0), n.s(1)
    h = int(n.a["hidden_size"]) if "hidden_size" in n.a else (
        None if w is None else dims_op(lambda g: g // {"LSTM": 4, "GRU": 3}.get(
            n.node.op_type, 1), w[1]))
    direction = n.a.get("direction", "forward")
    if isinstance(direction, bytes):    # (a contrib op's attribute, undecoded)
        direction = direction.decode("utf-8", "replace")
    d = 2 if str(direction) == "bidirectional" else 1
    t = n.t(0)
    if x is None:
        return [(None, t)] * n.nout
    layout = int(n.a.get("layout", 0))
    seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    y = [batch, seq, d, h] if layout else [seq, d, batch, h]
    state = [batch, d, h] if layout else [d, batch, h]
    return [(y, t), (state, t), (state, t)][:n.nout]


def einsum(n):
    eq = str(n.a["equation"]).replace(" ", "")
    if "." in eq:
        raise NotImplementedError       # an ellipsis: ONNX's inference instead
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    shapes = [n.s(i) for i in range(len(terms))]
    if any(s is None for s in shapes):
        return [(None, n.t(0))]
    dims = {}
    for term, s in zip(terms, shapes):
        if len(term) != len(s):
            raise ValueError(f"term {term!r} for shape {s}")
        for c, d in zip(term, s):
            dims[c] = d if dims.get(c) in (None, 1) else dims[c]
    if not arrow:
        rhs = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    return [([dims[c] for c in rhs], n.t(0))]


def gather_elements(n):
    return [(n.s(1), n.t(0))]
