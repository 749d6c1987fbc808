"""Output shapes and element types of ONNX operators, one rule per
operator family: the element-wise, convolution, pooling and matrix-product
rules (the rest: :mod:`.shape_rules_movement`).  Each kernel names its
rule (``Kernel.shape_rule``); the ONNX importer's shape inference
(:mod:`pyarena.importers.onnx_shapes`) runs them.

A rule takes a :class:`Node` view (input shapes, element types, the values
of small constant inputs, attributes) and returns one ``(shape, elem_type)``
per output.  A shape is a list of dims -- ``int``, a symbol ``str`` or
``None`` for unknown -- or ``None`` when even the rank is unknown; the
element type is the ONNX ``TensorProto`` number (``None``: unknown).  A
rule raises ``ValueError`` for inputs that cannot go together (the caller
names the operator).
"""
import numpy as np

__all__ = ["Node", "broadcast", "known", "dims_op", "norm_axis", "FLOAT", "UINT8", "INT32",
           "INT64", "BOOL"]

FLOAT, UINT8, INT32, INT64, BOOL = 1, 2, 6, 7, 9     # ONNX TensorProto element types
_NUMPY_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16,
                6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64,
                12: np.uint32, 13: np.uint64}


class Node:
    """What a rule (or an evaluator, :mod:`.evaluators`) sees of one node:
    ``s(i)`` / ``t(i)`` / ``v(i)`` the shape, element type and known value
    of input ``i`` (None: unknown or omitted), ``a`` the attributes,
    ``opset``, and ``dtype_of(elem_type)`` the NumPy dtype of an ONNX
    element type (set by the importer that folds)."""

    #: ONNX element type -> NumPy dtype (the folding importer sets onnx's,
    #: which knows every type; this one, the standard numeric types)
    dtype_of = staticmethod(lambda t: np.dtype(_NUMPY_TYPES[int(t)]))

    def __init__(self, node, attrs, opset, shape, etype, value, ins=None, op_type=None,
                 nout=None):
        self.node, self.a, self.opset = node, attrs, opset
        # (ins, op_type, nout: read from ``node`` once by a prepared program)
        self.ins = list(node.input) if ins is None else ins
        self._op = node.op_type if op_type is None else op_type
        self._nout = nout
        self._shape, self._etype, self._value = shape, etype, value
        self._ints = {}     # attribute -> its ints (the attributes never change)

    @classmethod
    def on_values(cls, op_type, attrs, values, opset=None):
        """A view of an op of ``op_type`` whose inputs are ``values`` (arrays,
        None for an omitted one): an evaluator run on them."""
        names = [f"#{i}" if v is not None else "" for i, v in enumerate(values)]
        known = {f"#{i}": v for i, v in enumerate(values) if v is not None}
        return cls(_Values(names), attrs, opset,
                   lambda k: None if k not in known else list(known[k].shape),
                   lambda k: None, known.get, names, op_type, 1)

    def s(self, i):
        return self._shape(self.ins[i]) if i < len(self.ins) and self.ins[i] else None

    def t(self, i):
        return self._etype(self.ins[i]) if i < len(self.ins) and self.ins[i] else None

    def v(self, i):
        """The input's value when it is a known small constant, else None."""
        return self._value(self.ins[i]) if i < len(self.ins) and self.ins[i] else None

    def op_type_is(self, t):
        return self._op == t

    def has(self, i):
        return i < len(self.ins) and bool(self.ins[i])

    @property
    def nout(self):
        return len(self.node.output) if self._nout is None else self._nout

    def ints(self, key, default=None):
        got = self._ints.get(key)
        if got is None:
            v = self.a.get(key, default)
            got = None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]
            if default is None:
                self._ints[key] = got
        return None if got is None else list(got)


class _Values:
    """The stand-in proto of :meth:`Node.on_values` (inputs and one output)."""

    def __init__(self, names):
        self.input, self.output, self.name = names, ["#out"], ""


def known(d):
    return isinstance(d, int)


def dims_op(f, *dims):
    """``f`` of dims when all are known ints, else None."""
    return f(*dims) if all(known(d) for d in dims) else None


def norm_axis(ax, rank):
    ax = int(ax)
    if not -rank <= ax < max(rank, 1):
        raise ValueError(f"axis {ax} is out of range for rank {rank}")
    return ax + rank if ax < 0 else ax


def broadcast(*shapes):
    """Multidirectional (NumPy) broadcast of shapes with unknown dims."""
    if len(shapes) == 2 and shapes[0] is not None and shapes[1] is not None:
        out = _broadcast_two(*shapes)
        if out is not None:
            return out
    if any(s is None for s in shapes):
        return None
    if shapes and all(list(s) == list(shapes[0]) for s in shapes[1:]) and \
            all(type(d) is int for d in shapes[0]):
        return list(shapes[0])      # the common case: the same known shape
    if all(type(d) is int for s in shapes for d in s):
        return _broadcast_ints(shapes)
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        other = [d for d in dims if d != 1]
        ints = {d for d in other if known(d)}
        if len(ints) > 1:
            raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
        if ints:
            out.append(ints.pop())
        elif not other:
            out.append(1)
        elif all(d == other[0] for d in other) and other[0] is not None:
            out.append(other[0])       # one symbol on every side
        else:
            out.append(None)
    return out


def _broadcast_two(a, b):
    """:func:`broadcast` of two shapes of known dims (the common case of an
    element-wise op), else None (the general path)."""
    if len(a) != len(b):
        if len(a) < len(b):
            a = [1] * (len(b) - len(a)) + list(a)
        else:
            b = [1] * (len(a) - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if type(x) is not int or type(y) is not int:
            return None
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None         # the general path names the shapes
    return out


def _broadcast_ints(shapes):
    """:func:`broadcast` of shapes whose dims are all known."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        off = rank - len(s)
        for i, d in enumerate(s):
            o = out[off + i]
            if d != 1 and d != o:
                if o != 1:
                    raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast")
                out[off + i] = d
    return out


# -- element-wise -------------------------------------------------------------
def same(n):
    return [(n.s(0), n.t(0))] + [(n.s(0), n.t(0))] * (n.nout - 1)


def batch_norm(n):
    """Y like X; training mode's running mean and variance like the scale."""
    return [(n.s(0), n.t(0))] + [(n.s(1), n.t(1))] * (n.nout - 1)


def same_bool(n):
    return [(n.s(0), BOOL)]


def bcast(n):
    get = n._shape
    return [(broadcast(*[get(x) for x in n.ins if x]), n.t(0))]


def compare(n):
    return [(broadcast(n.s(0), n.s(1)), BOOL)]


def where(n):
    return [(broadcast(n.s(0), n.s(1), n.s(2)), n.t(1))]


def cast(n):
    return [(n.s(0), int(n.a["to"]))]


def dropout(n):
    return [(n.s(0), n.t(0)), (n.s(0), BOOL)][:n.nout]


def dequantize(n):
    return [(n.s(0), int(n.a.get("output_dtype", 0)) or n.t(1))]


def quantize(n):
    t = int(n.a.get("output_dtype", 0)) or (n.t(2) if n.has(2) else UINT8)
    return [(n.s(0), t)]


def dynamic_quantize(n):
    return [(n.s(0), UINT8), ([], FLOAT), ([], UINT8)]


def layer_norm(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0)), (None, FLOAT), (None, FLOAT)][:n.nout]
    ax = norm_axis(n.a.get("axis", -1), len(x))
    stat = list(x[:ax]) + [1] * (len(x) - ax)
    stash = int(n.a.get("stash_type", FLOAT))
    return [(x, n.t(0)), (stat, stash), (stat, stash)][:n.nout]


def _reduction(n):
    r = n.a.get("reduction", "mean")
    return r.decode() if isinstance(r, bytes) else str(r)


def nll_loss(n):
    """NegativeLogLikelihoodLoss: the target's shape (reduction "none") or
    a scalar."""
    return [(n.s(1) if _reduction(n) == "none" else [], n.t(0))]


def softmax_cross_entropy(n):
    """SoftmaxCrossEntropyLoss: the loss (as NLL's), then log_prob shaped
    like the scores."""
    out = [(n.s(1) if _reduction(n) == "none" else [], n.t(0)), (n.s(0), n.t(0))]
    return out[:n.nout]


def attention(n):
    """Attention (opsets 23-25): Y, present_key, present_value and
    qk_matmul_output, from 3-D (batch, seq, heads * size) or 4-D (batch,
    heads, seq, size) Q, K, V and the past cache."""
    q, k, v = n.s(0), n.s(1), n.s(2)
    t = n.t(0)
    if q is None or k is None or v is None:
        return [(None, t)] * n.nout
    past = n.s(4) if n.has(4) else None
    if len(q) == 3:
        hq, hkv = int(n.a["q_num_heads"]), int(n.a["kv_num_heads"])
        b, sq, skv = q[0], q[1], k[1]
        dk = dims_op(lambda d: d // hkv, k[2])
        dv = dims_op(lambda d: d // hkv, v[2])
        y = [b, sq, dims_op(lambda d: d * hq, dv)]
    else:
        b, hq, sq = q[0], q[1], q[2]
        hkv, skv, dk, dv = k[1], k[2], k[3], v[3]
        y = [b, hq, sq, dv]
    total = skv if past is None else dims_op(lambda a, c: a + c, past[2], skv)
    outs = [(y, t), ([b, hkv, total, dk], t), ([b, hkv, total, dv], t),
            ([b, hq, sq, total], t)]
    return outs[:n.nout]


def grid_sample(n):
    """GridSample: (N, C) of the input, the grid's spatial dims."""
    x, g = n.s(0), n.s(1)
    if x is None or g is None:
        return [(None, n.t(0))]
    return [([x[0], x[1]] + list(g[1:-1]), n.t(0))]


def affine_grid(n):
    """AffineGrid: (N, [D,] H, W, 2 or 3) from the size input's value."""
    size = n.v(1)
    if size is None:
        return [(None, n.t(0))]
    size = [int(d) for d in np.asarray(size).reshape(-1)]
    return [([size[0]] + size[2:] + [len(size) - 2], n.t(0))]


def non_max_suppression(n):
    """NonMaxSuppression: (selected, 3) indices, their count the data's."""
    return [([None, 3], INT64)]


def causal_conv_with_state(n):
    """CausalConvWithState: the output like the input, the state (N, C, k - 1)."""
    x, w = n.s(0), n.s(1)
    state = None if x is None or w is None else \
        [x[0], x[1], dims_op(lambda k: k - 1, w[2])]
    return [(x, n.t(0)), (state, n.t(0))][:n.nout]


def linear_attention(n):
    """LinearAttention: (B, T, q_heads * d_v) and the state (B, kv_heads,
    d_k, d_v)."""
    q, v = n.s(0), n.s(2)
    hq, hkv = int(n.a.get("q_num_heads", 0)), int(n.a.get("kv_num_heads", 0))
    if q is None or v is None or not hq or not hkv:
        return [(None, n.t(0)), (None, n.t(0))][:n.nout]
    dk = dims_op(lambda d: d // hq, q[2])
    dv = dims_op(lambda d: d // hkv, v[2])
    st = n.t(3) if n.has(3) else n.t(0)
    return [([q[0], q[1], dims_op(lambda d: d * hq, dv)], n.t(0)),
            ([q[0], hkv, dk, dv], st)][:n.nout]


def mel_weight_matrix(n):
    """MelWeightMatrix: (dft_length // 2 + 1, num_mel_bins) from the values."""
    mels, dft = n.v(0), n.v(1)
    t = int(n.a.get("output_datatype", FLOAT))
    if mels is None or dft is None:
        return [(None, t)]
    return [([int(np.asarray(dft).reshape(-1)[0]) // 2 + 1,
              int(np.asarray(mels).reshape(-1)[0])], t)]


def max_unpool(n):
    """MaxUnpool: output_shape's value, else (in - 1) * stride + kernel - pads."""
    if n.has(2):        # output_shape: its value, unknown until it is known
        shape = n.v(2)
        return [(None if shape is None else [int(d) for d in np.asarray(shape).reshape(-1)],
                 n.t(0))]
    x = n.s(0)
    if x is None:
        return [(None, n.t(0))]
    k = n.ints("kernel_shape")
    r = len(k)
    st = n.ints("strides") or [1] * r
    pads = n.ints("pads") or [0] * (2 * r)
    sp = [dims_op(lambda d, i=i: (d - 1) * st[i] + k[i] - pads[i] - pads[i + r], x[2 + i])
          for i in range(r)]
    return [(list(x[:2]) + sp, n.t(0))]


# -- convolution, pooling, matrix products ----------------------------------------
def _spatial(n, x_sp, k, dilations=None, ceil=False):
    """Output spatial dims of a convolution or pooling window."""
    r = len(x_sp)
    st = n.ints("strides") or [1] * r
    dil = dilations or n.ints("dilations") or [1] * r
    pads = n.ints("pads") or [0] * (2 * r)
    auto = n.a.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if len(k) != r or len(st) != r or len(dil) != r or len(pads) != 2 * r:
        raise ValueError(f"kernel {k}, strides {st}, dilations {dil} or pads {pads} do "
                         f"not fit {r} spatial dims")
    out = []
    for i, d in enumerate(x_sp):
        ek = dims_op(lambda kk, dd: (kk - 1) * dd + 1, k[i], dil[i])
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out.append(dims_op(lambda v, s: -(-v // s), d, st[i]))
        elif auto == "VALID":
            out.append(dims_op(lambda v, e, s: (v - e) // s + 1 if v >= e else -1,
                               d, ek, st[i]))
        else:
            def one(v, e, s, lo=pads[i], hi=pads[i + r]):
                span = v + lo + hi - e
                if span < 0:
                    raise ValueError(f"the window is larger than the padded input "
                                     f"({list(x_sp)})")
                o = (-(-span // s) if ceil else span // s) + 1
                if ceil and (o - 1) * s >= v + lo:
                    # no window may start in the end padding: opset 22's rule,
                    # and onnxruntime's at every opset (pool_attributes.h, as
                    # PyTorch's pooling_output_shape), so a file exported at
                    # an older opset gets the shape its exporter and
                    # onnxruntime give, and its quantized twin's
                    o -= 1
                return o
            out.append(dims_op(one, d, ek, st[i]))
        if known(out[-1]) and out[-1] < 0:
            raise ValueError(f"the window is larger than the padded input ({list(x_sp)})")
    return out


def conv(n, x_i=0, w_i=1, out_type=None):
    x, w = n.s(x_i), n.s(w_i)
    t = out_type if out_type is not None else n.t(x_i)
    if x is None or w is None:
        return [(None, t)]
    if len(x) != len(w) or len(x) < 3:
        raise ValueError(f"input {x} and weight {w} ranks differ")
    k = n.ints("kernel_shape") or list(w[2:])
    return [([x[0], w[0]] + _spatial(n, x[2:], k), t)]


def conv_transpose(n):
    x, w = n.s(0), n.s(1)
    if x is None or w is None:
        return [(None, n.t(0))]
    r = len(x) - 2
    g = int(n.a.get("group", 1))
    chans = dims_op(lambda c: c * g, w[1])
    if n.a.get("output_shape") is not None:
        return [([x[0], chans] + n.ints("output_shape")[-r:], n.t(0))]
    k = n.ints("kernel_shape") or list(w[2:])
    st = n.ints("strides") or [1] * r
    dil = n.ints("dilations") or [1] * r
    opad = n.ints("output_padding") or [0] * r
    pads = n.ints("pads") or [0] * (2 * r)
    auto = n.a.get("auto_pad", "NOTSET")
    out = []
    for i in range(r):
        if auto in ("SAME_UPPER", "SAME_LOWER", b"SAME_UPPER", b"SAME_LOWER"):
            out.append(dims_op(lambda v: v * st[i], x[2 + i]))
        else:
            out.append(dims_op(lambda v, kk: st[i] * (v - 1) + opad[i] + (kk - 1) * dil[i] + 1
                           - pads[i] - pads[i + r], x[2 + i], k[i]))
    return [([x[0], chans] + out, n.t(0))]


def pool(n):
    x = n.s(0)
    if x is None:
        return [(None, n.t(0)), (None, INT64)][:n.nout]
    k = n.ints("kernel_shape")
    if k is None:
        raise ValueError("kernel_shape is missing")
    y = list(x[:2]) + _spatial(n, x[2:], k, ceil=bool(n.a.get("ceil_mode", 0)))
    return [(y, n.t(0)), (y, INT64)][:n.nout]


def global_pool(n):
    x = n.s(0)
    return [(None if x is None else list(x[:2]) + [1] * (len(x) - 2), n.t(0))]


def gemm(n):
    a, b = n.s(0), n.s(1)
    if a is None or b is None:
        return [(None, n.t(0))]
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm takes matrices, got {a} and {b}")
    m = a[1] if n.a.get("transA", 0) else a[0]
    cols = b[0] if n.a.get("transB", 0) else b[1]
    return [([m, cols], n.t(0))]


def _matmul_shape(a, b):
    if a is None or b is None:
        return None
    a1, b1 = len(a) == 1, len(b) == 1
    a2 = [1] + list(a) if a1 else list(a)
    b2 = list(b) + [1] if b1 else list(b)
    k1, k2 = a2[-1], b2[-2]
    if known(k1) and known(k2) and k1 != k2:
        raise ValueError(f"inner dims of {list(a)} x {list(b)} differ")
    out = broadcast(a2[:-2], b2[:-2]) + [a2[-2], b2[-1]]
    if a1:
        del out[-2]
    if b1:
        del out[-1]
    return out


def matmul(n, out_type=None):
    return [(_matmul_shape(n.s(0), n.s(1)), out_type if out_type is not None else n.t(0))]


def qlinear_matmul(n):
    return [(_matmul_shape(n.s(0), n.s(3)), n.t(7))]


def cast_like(n):
    return [(n.s(0), n.t(1))]


def conv_integer(n):
    return conv(n, out_type=INT32)


def qlinear_conv(n):
    return conv(n, 0, 3, out_type=n.t(7))


def matmul_integer(n):
    return matmul(n, INT32)
