"""The graph rewrite that lets a convolution do the work of the ops after it.

``fuse(graph)`` rewrites a float32 graph in place, before it is planned, so
the planner plans exactly what the executor runs (no op is skipped at run
time, and the tensors between the fused ops no longer exist):

* **BatchNormalization** after a Conv (NCHW, constant statistics) is folded
  into the Conv's weights and bias (after a ConvTranspose of groups 1 too:
  its scales apply along the weights' axis 1, the activation after it is
  fused as below): the bias is computed here, the weights
  keep their constant (a view of the model file) and the Conv records the
  per-channel scale in ``notes.weight_scales``, which its kernel applies
  when it lays its weights out (``kernels/weight_scales.py``) -- so the folded weights
  are held once, in the kernel's layout, not also as a graph constant;
* a per-channel or scalar **affine** ``Mul(conv, a)`` then ``Add(., b)``,
  or either alone (constants, e.g. PaddleOCR's learnable scales, or a
  bias exported as a constant Add) is folded the same way;
* the **activation** after a Conv becomes the Conv's ``activation``
  attribute, applied by the native kernel in registers: Relu, Clip
  (constant bounds), Sigmoid, HardSigmoid, HardSwish, SiLU written as
  ``Mul(x, Sigmoid(x))`` and hard-swish written as
  ``Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)``;
* a zero **Pad** of only the spatial axes before a Conv whose own
  padding does not depend on the input size (VALID or explicit pads)
  becomes part of the Conv's pads (TFLite's explicit padding before
  stride-2 VALID convolutions: no padded copy, no Pad op);
* the **residual Add** (or two-input Sum) after a pointwise Conv (1x1, stride 1, unpadded,
  groups 1, or grouped NCHW) without an activation: ``Add(conv, r)`` -- r computed before
  the Conv (never a constant), of the output's shape, or a ``Pad`` of it
  that only appends zero channels (BlazeFace's channel padding) -- becomes
  the Conv's input 3 (``residual_channels`` the channels r has), then the
  activation after the Add is fused as above: the packed SGEMM adds r in
  registers before the activation (pyarena/runtime/kernels/conv.py).  An r
  computed after the Conv (a ResNet's stride-2 shortcut) moves the Conv
  after r's producer (``graph.validate()`` sorts the ops again, stably).  The
  shape test is a shape decision (:mod:`pyarena.graph.decisions`): an
  InferenceSession retargeting the graph to shapes where r would not
  match imports those in full;
* a **channel shuffle** after a grouped pointwise Conv (NCHW):
  ``Reshape(conv, (N, G, C/G, H, W))``, ``Transpose(0, 2, 1, 3, 4)``,
  ``Reshape(., (N, C, H, W))`` with G the Conv's groups (ShuffleNet) --
  the Conv writes each group's channel j at j*G + g itself
  (``shuffle_groups``: its 1x1 matmul writes through a strided view, its
  bias permuted to match), so no shuffled copy is made.

A BatchNormalization no Conv absorbs takes the constant Mul / Add and the
activation after it (:mod:`.fusion_norm`).  A MatMul by constant weights takes the bias Add and the GELU after it
(:mod:`.fusion_linear`); an attention spelled out op by op (MatMul, scale,
mask, Softmax, MatMul) becomes one fused op (:mod:`.fusion_attention`).

A chain is fused only when every tensor inside it has that one reader and
is not a graph output, and only for float32 Convs without an activation
yet.  The fused Conv writes the chain's last tensor, so every later reader
is unchanged.  Returns the number of ops removed.  Run by
``load_model(..., native=True)`` (the default); ``native=False`` keeps the
graph as imported.
"""
import numpy as np

from ..graph.decisions import decide
from ..memory.mapped import release_pages
from .fusion_attention import fuse_attention
from .fusion_linear import fuse_linear
from .fusion_norm import fuse_batch_norm
from .kernels import op_fact

__all__ = ["fuse"]

_F32 = np.dtype(np.float32)


class _Graph:
    """Readers and the producer of each tensor and the graph outputs, kept
    up to date."""

    def __init__(self, graph, memo=None):
        self.g = graph
        self.memo = memo
        self.dead = set()       # ids of the ops fused away, still in g.ops
        self.outputs = set(graph.outputs)
        self.readers = {}
        #: tensor -> (position in g.ops, op writing it); the positions hold
        #: until sweep() (ops only leave, all at once)
        self.producer = {}
        for i, op in enumerate(graph.ops):
            for t in op.inputs:
                if t:
                    self.readers.setdefault(t, []).append(op)
            for t in op.outputs:
                if t:
                    self.producer[t] = (i, op)

    def writer(self, tensor):
        """The op writing ``tensor`` (None: an input, a constant)."""
        return self.producer.get(tensor, (0, None))[1]

    def only_reader(self, tensor):
        """The one op reading ``tensor`` (None if not exactly one, or if it
        is a graph output)."""
        r = self.readers.get(tensor, [])
        if tensor in self.outputs or len(r) != 1:
            return None
        return r[0]

    def const(self, name):
        t = self.g.tensors.get(name) if name else None
        if t is None or t.role != "constant" or t.data is None:
            return None
        return np.asarray(t.data)

    def scalar(self, name):
        v = self.const(name)
        if v is None or v.size != 1:
            return None
        return float(v.reshape(-1)[0])

    def drop(self, ops, tensors):
        """``ops`` and ``tensors`` go (the ops leave ``g.ops`` in :meth:`sweep`)."""
        dead = {id(op) for op in ops}
        self.dead |= dead
        for t in tensors:
            self.g.tensors.pop(t, None)
            self.readers.pop(t, None)
            self.producer.pop(t, None)
        for op in ops:
            for t in op.inputs:
                if t and t in self.readers:
                    self.readers[t] = [o for o in self.readers[t] if id(o) not in dead]
            for t in op.outputs:
                if self.producer.get(t, (0, None))[1] is op:
                    del self.producer[t]

    def take_output(self, op, last, ops, tensors):
        """``op`` now writes ``last``'s output; ``ops`` and ``tensors`` go."""
        at = self.producer[op.outputs[0]][0]
        op.outputs = [last.outputs[0]]
        self.producer[op.outputs[0]] = (at, op)
        self.drop(ops, tensors)

    def sweep(self):
        """The ops fused away leave ``g.ops``, all at once."""
        if self.dead:
            self.g.ops = [op for op in self.g.ops if id(op) not in self.dead]
            self.dead = set()
            self.producer = {t: (i, op) for i, op in enumerate(self.g.ops)
                             for t in op.outputs if t}

    def set_param(self, conv, index, name, value, kept=False):
        """Give ``conv`` a new constant input ``index`` (weights or bias);
        ``kept``: ``value`` is already a read-only weights-arena array."""
        name = self._fresh(f"{conv.name}.{name}")
        self.g.add_tensor(name, value.shape, "float32", role="constant", data=value if kept
                          else self.g.keep_constant(np.asarray(value, dtype=np.float32)))
        while len(conv.inputs) <= index:
            conv.inputs.append("")
        old = conv.inputs[index]
        conv.inputs[index] = name
        self.readers.setdefault(name, []).append(conv)
        if old:
            self.readers[old] = [o for o in self.readers.get(old, []) if o is not conv]
            if not self.readers[old] and old not in self.outputs:
                gone = self.g.tensors.pop(old, None)
                if gone is not None and gone.data is not None:
                    release_pages(gone.data)     # a weight still in its file

    def _fresh(self, base):
        name, k = base, 0
        while name in self.g.tensors:
            k += 1
            name = f"{base}_{k}"
        return name


def _conv_ok(G, op):
    if op.op_type not in ("Conv", "ConvTranspose") or \
            op.attrs.get("activation") not in (None, "", "NONE"):
        return False
    if op.op_type == "ConvTranspose" and (int(op.attrs.get("group", 1)) != 1 or
                                          op.attrs.get("layout", "NCHW") != "NCHW"):
        return False        # (its scales fold along the weights' axis 1: groups 1 only)
    out = G.g.tensors.get(op.outputs[0]) if op.outputs else None
    return out is not None and np.dtype(out.dtype) == _F32 and G.const(op.inputs[1]) is not None


def _cout(G, conv):
    """Output channels of ``conv``: its weights' axis 0, or a (groups 1)
    ConvTranspose's axis 1 (ONNX's [c_in][c_out][kh][kw])."""
    return G.const(conv.inputs[1]).shape[1 if conv.op_type == "ConvTranspose" else 0]


def _channel_vector(v, cout):
    """A per-output-channel vector from a constant broadcast against an
    NCHW conv output ((C,1,1), (1,C,1,1), (C,) is not NCHW-broadcastable),
    or a scalar; None otherwise."""
    if v is None:
        return None
    if v.size == 1:
        return np.full(cout, float(v.reshape(-1)[0]))
    shape = tuple(v.shape)
    while shape and shape[0] == 1 and len(shape) > 3:
        shape = shape[1:]
    if shape in ((cout, 1, 1),):
        return v.reshape(cout).astype(np.float64)
    return None


def _scale_shift(G, conv, scale, shift):
    """conv' = scale * conv + shift per output channel (NCHW weights;
    ``scale`` None: 1, a shift alone).  The new bias is computed now (into
    the weights arena); the weights keep their constant and ``scale`` joins
    the conv's ``notes.weight_scales`` (module docstring)."""
    cout = _cout(G, conv)
    bn = conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else ""
    bt = G.g.tensors[bn].data if bn else None
    if scale is not None:
        scale = np.asarray(scale, dtype=np.float64).reshape(-1)
    key = hit = None
    if G.memo is not None:      # the same bias folded for another input shape
        key = ("bias", id(bt), cout, None if scale is None else scale.tobytes(),
               np.asarray(shift).tobytes())
        hit = G.memo.get(key)
        if hit is not None and hit[0] is not bt:
            hit = None
    if scale is not None:
        conv.notes.weight_scales = tuple(conv.notes.weight_scales) + (scale.tobytes(),)
    if hit is not None:
        G.set_param(conv, 2, "b", hit[1], kept=True)
        return
    b = np.zeros(cout) if bt is None else np.asarray(bt).astype(np.float64).reshape(-1)
    G.set_param(conv, 2, "b", ((b if scale is None else b * scale) + shift).astype(np.float32))
    if key is not None:         # the source held, so its id stays its own
        G.memo[key] = (bt, G.const(conv.inputs[2]))


def _take_output(G, conv, last, ops, tensors):
    G.take_output(conv, last, ops, tensors)


def _fold_bn(G, conv):
    bn = G.only_reader(conv.outputs[0])
    if bn is None or bn.op_type != "BatchNormalization" or conv.attrs.get("layout") == "NHWC":
        return 0
    if bn.inputs[0] != conv.outputs[0] or len([o for o in bn.outputs if o]) != 1 or \
            int(bn.attrs.get("training_mode", 0)):      # (batch statistics: not a fold)
        return 0
    p = [G.const(n) for n in bn.inputs[1:5]]
    cout = _cout(G, conv)
    if any(v is None or v.size != cout for v in p):
        return 0
    gamma, beta, mean, var = (v.astype(np.float64).reshape(-1) for v in p)
    s = gamma / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    _scale_shift(G, conv, s, beta - mean * s)
    _take_output(G, conv, bn, [bn], [conv.outputs[0]])
    return 1


def _fold_affine(G, conv):
    """Mul(conv, a) [then Add(., b)], or Add(conv, b) alone, with constant
    per-channel or scalar a, b: into the weights and the bias.  (An Add of
    a constant is a shift of the bias, never a residual: a constant has
    one shape, the conv's output another at each batch size.)"""
    if conv.attrs.get("layout") == "NHWC":
        return 0
    cout = _cout(G, conv)
    first = G.only_reader(conv.outputs[0])
    if first is None or first.op_type not in ("Mul", "Add"):
        return 0
    a, add, ops, tensors, last = None, first, [], [conv.outputs[0]], conv
    if first.op_type == "Mul":
        a = _channel_vector(_other_const(G, first, conv.outputs[0]), cout)
        if a is None:
            return 0
        ops, last = [first], first
        add = G.only_reader(first.outputs[0])
    b = np.zeros(cout)
    if add is not None and add.op_type == "Add" and \
            add.attrs.get("activation") in (None, "", "NONE"):
        bb = _channel_vector(_other_const(G, add, last.outputs[0]), cout)
        if bb is not None:
            b = bb
            if ops:
                tensors.append(last.outputs[0])
            ops.append(add)
            last = add
    if not ops:
        return 0
    _scale_shift(G, conv, a, b)
    _take_output(G, conv, last, ops, tensors)
    return len(ops)


def _other_const(G, op, x):
    """The value of binary ``op``'s constant operand other than ``x``, or None."""
    other = [t for t in op.inputs if t != x]
    return G.const(other[0]) if len(other) == 1 and len(op.inputs) == 2 else None


def _hardswish_chain(G, x, add):
    """Add(x, 3) -> Clip(0, 6) -> Mul(x, .) -> Div(., 6) (or Mul 1/6):
    the ops after ``add``, or None."""
    other = [t for t in add.inputs if t != x]
    if add.op_type != "Add" or len(add.inputs) != 2 or len(other) != 1 or \
            G.scalar(other[0]) != 3.0:
        return None
    clip = G.only_reader(add.outputs[0])
    if clip is None or clip.op_type != "Clip" or _clip_bounds(G, clip) != (0.0, 6.0):
        return None
    mul = G.only_reader(clip.outputs[0])
    if mul is None or mul.op_type != "Mul" or set(mul.inputs) != {x, clip.outputs[0]}:
        return None
    last = G.only_reader(mul.outputs[0])
    if last is None or len(last.inputs) != 2 or last.inputs[0] != mul.outputs[0]:
        return None
    k = G.scalar(last.inputs[1])
    if not ((last.op_type == "Div" and k == 6.0) or
            (last.op_type == "Mul" and k is not None and abs(k - 1 / 6) < 1e-7)):
        return None
    return [add, clip, mul, last]


def _clip_bounds(G, clip):
    lo, hi = clip.attrs.get("min"), clip.attrs.get("max")
    if len(clip.inputs) > 1 and clip.inputs[1]:
        lo = G.scalar(clip.inputs[1])
    if len(clip.inputs) > 2 and clip.inputs[2]:
        hi = G.scalar(clip.inputs[2])
    lo = -np.inf if lo is None else float(lo)
    hi = np.inf if hi is None else float(hi)
    return lo, hi


def _fuse_activation(G, conv):
    x = conv.outputs[0]
    readers = G.readers.get(x, [])
    if x in G.outputs or not readers:
        return 0
    if len(readers) == 2:      # SiLU / hard-swish read x twice
        sig = next((o for o in readers if o.op_type in ("Sigmoid", "HardSigmoid")), None)
        mul = next((o for o in readers if o.op_type == "Mul"), None)
        if sig is not None and mul is not None and G.only_reader(sig.outputs[0]) is mul \
                and set(mul.inputs) == {x, sig.outputs[0]}:
            if sig.op_type == "Sigmoid":
                kind = "SILU"
            elif abs(float(sig.attrs.get("alpha", 0.2)) - 1 / 6) < 1e-7 and \
                    float(sig.attrs.get("beta", 0.5)) == 0.5:
                kind = "HARDSWISH"
            else:
                return 0
            conv.attrs["activation"] = kind
            _take_output(G, conv, mul, [sig, mul], [x, sig.outputs[0]])
            return 2
        add = next((o for o in readers if o.op_type == "Add"), None)
        chain = _hardswish_chain(G, x, add) if add is not None else None
        if chain and {id(o) for o in readers} == {id(chain[0]), id(chain[2])}:
            conv.attrs["activation"] = "HARDSWISH"
            _take_output(G, conv, chain[-1], chain, [x] + [o.outputs[0] for o in chain[:-1]])
            return len(chain)
        return 0
    if len(readers) != 1:
        return 0
    act = readers[0]
    kind = op_fact(act.op_type, "conv_act")     # (declared by the activation's kernel)
    if kind == "CLIP":
        lo, hi = _clip_bounds(G, act)
        if any(n and G.const(n) is None for n in act.inputs[1:]):
            return 0
        conv.attrs.update(activation="CLIP", activation_min=lo, activation_max=hi)
    elif kind == "HARDSIGMOID":
        conv.attrs.update(activation="HARDSIGMOID",
                          activation_alpha=float(act.attrs.get("alpha", 0.2)),
                          activation_beta=float(act.attrs.get("beta", 0.5)))
    elif kind is not None:
        conv.attrs["activation"] = kind
    else:
        return 0
    _take_output(G, conv, act, [act], [x])
    return 1


def _pointwise(G, conv):
    """1x1, stride 1, groups 1, 4-D: what the packed SGEMM takes; or NCHW
    grouped, not depthwise: BLAS per group, then r added (ShuffleNet) (with
    output pixels = input pixels, so no padding: a test of the shapes,
    :func:`_residual_rule`'s)."""
    w = G.const(conv.inputs[1])
    xt = G.g.tensors.get(conv.inputs[0])
    nhwc = conv.attrs.get("layout") == "NHWC"
    if w is None or w.ndim != 4 or xt is None or len(xt.shape) != 4 or \
            conv.attrs.get("weight_layout") == "1HWC":
        return False
    k = w.shape[1:3] if nhwc else w.shape[2:]
    g = int(conv.attrs.get("group", 1))
    return (tuple(k) == (1, 1) and (g == 1 or not nhwc and 1 < g < int(xt.shape[1]))
            and all(int(v) == 1 for v in conv.attrs.get("strides", [1, 1])))


def _zero_pads(G, pad):
    """(begins, ends) per axis of a 4-D ``pad`` that adds zeros (constant
    mode, constant non-negative pads, value 0, no axes input); else None."""
    mode = pad.attrs.get("mode", "constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant" or \
            (len(pad.inputs) > 3 and pad.inputs[3]):
        return None
    value = G.const(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] else \
        np.float32(pad.attrs.get("value", 0.0))
    pads = G.const(pad.inputs[1]) if len(pad.inputs) > 1 and pad.inputs[1] else \
        pad.attrs.get("pads")
    if value is None or np.any(np.asarray(value) != 0) or pads is None:
        return None
    pads = np.asarray(pads, dtype=np.int64).reshape(-1)
    if pad.attrs.get("layout_pairs"):              # TFLite: [[b, e], ...]
        pads = pads.reshape(-1, 2).T.reshape(-1)
    if pads.size != 8 or (pads < 0).any():
        return None
    return [int(v) for v in pads[:4]], [int(v) for v in pads[4:]]


def _zero_channel_pad(G, pad, axis):
    """True when ``pad`` only appends zeros on ``axis`` (constant mode)."""
    be = _zero_pads(G, pad)
    return be is not None and not any(be[0]) and \
        not any(e for a, e in enumerate(be[1]) if a != axis)


def _fold_pad(G, conv):
    """A zero ``Pad`` of only the spatial axes whose one reader is a 2-D
    Conv with padding of its own that does not depend on the input size
    (VALID or explicit pads): the Conv takes the Pad's input and the sum
    of both paddings (TFLite models pad explicitly before their stride-2
    VALID convolutions).  Returns ops removed."""
    from .kernels.spatial import pads_for
    x = conv.inputs[0]
    pad = G.writer(x)
    auto = conv.attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    xt, w = G.g.tensors.get(x), G.const(conv.inputs[1])
    if pad is None or pad.op_type != "Pad" or G.only_reader(x) is not conv or \
            auto not in ("NOTSET", "VALID") or xt is None or len(xt.shape) != 4 or \
            w is None or w.ndim != 4:
        return 0
    be = _zero_pads(G, pad)
    nhwc = conv.attrs.get("layout") == "NHWC"
    sp = (1, 2) if nhwc else (2, 3)
    if be is None or any(be[0][a] or be[1][a] for a in range(4) if a not in sp):
        return 0
    k_sp = w.shape[1:3] if nhwc else w.shape[2:]
    if conv.attrs.get("weight_layout") == "1HWC":
        k_sp = w.shape[1:3]
    strides = [int(v) for v in conv.attrs.get("strides", [1, 1])]
    dil = [int(v) for v in conv.attrs.get("dilations", [1, 1])]
    own = pads_for(conv.attrs, [xt.shape[a] for a in sp], k_sp, strides, dil)
    conv.attrs["auto_pad"] = "NOTSET"
    conv.attrs["pads"] = [own[0] + be[0][sp[0]], own[1] + be[0][sp[1]],
                          own[2] + be[1][sp[0]], own[3] + be[1][sp[1]]]
    conv.inputs[0] = pad.inputs[0]
    G.readers.setdefault(pad.inputs[0], []).append(conv)
    G.drop([pad], [x])
    return 1


def _residual_rule(axis):
    """Whether an ``Add(y, other)`` after a pointwise conv from ``x`` to
    ``y`` can be its residual, by the shapes (other, y, the sum, r, x): the
    conv keeps x's pixels (it is unpadded), ``other`` has y's shape (so does
    the sum), and r -- ``other``, or what a Pad of it appends zero channels
    to -- differs from y only by fewer channels on ``axis``.
    (:func:`~pyarena.graph.decisions.decide` records it: a retarget needs the
    same answer at its shapes.)"""
    pixels = (1, 2) if axis == 3 else (2, 3)

    def fits(other, y, total, r, x):
        return (all(x[i] == y[i] for i in pixels) and other == y and total == y and
                len(r) == len(y) and 1 <= r[axis] <= y[axis] and
                all(a == b for i, (a, b) in enumerate(zip(r, y)) if i != axis))
    return fits


def _fuse_residual(G, conv):
    """Add(conv, r) or a two-input Sum (Caffe2's ResNets) (r maybe a zero
    channel Pad of a tensor) after a
    pointwise conv: r becomes the conv's input 3.  Never a constant r:
    its shape is one, the output's changes with the batch (a constant
    per-channel one was folded into the bias, :func:`_fold_affine`).
    Returns ops removed."""
    x = conv.outputs[0]
    add = G.only_reader(x)
    if add is None or add.op_type not in ("Add", "Sum") or len(add.inputs) != 2 or \
            add.inputs[0] == add.inputs[1] or not _pointwise(G, conv):
        return 0
    other = add.inputs[1] if add.inputs[0] == x else add.inputs[0]
    ot = G.g.tensors.get(other)
    if ot is None or np.dtype(ot.dtype) != _F32:
        return 0
    axis = 3 if conv.attrs.get("layout") == "NHWC" else 1
    ops, tensors, res = [add], [x], other
    pad = G.writer(other)
    if pad is not None and pad.op_type == "Pad" and G.only_reader(other) is add and \
            _zero_channel_pad(G, pad, axis):
        ops, tensors, res = [add, pad], [x, other], pad.inputs[0]
    if G.g.tensors[res].role == "constant":     # (a Pad of one too)
        return 0
    if not decide(G.g, f"fusion: {add.name!r} the residual of {conv.name!r}",
                  (other, x, add.outputs[0], res, conv.inputs[0]), _residual_rule(axis)):
        return 0
    while len(conv.inputs) < 3:
        conv.inputs.append("")
    conv.inputs[3:] = [res]
    G.readers.setdefault(res, []).append(conv)
    conv.attrs["residual_channels"] = int(G.g.tensors[res].shape[axis])
    act = add.attrs.get("activation")       # a TFLite ADD's own fused activation
    if act not in (None, "", "NONE"):
        conv.attrs["activation"] = act
    _take_output(G, conv, add, ops, tensors)
    return len(ops)


def _shuffle_rule(groups):
    """Whether Reshape (``a``) - Transpose (``b``) - Reshape (``total``) after
    a conv output ``y`` is its channel shuffle over ``groups``, by the shapes."""
    def fits(y, a, b, total):
        n, c, h, w = y
        return (c % groups == 0 and a == (n, groups, c // groups, h, w) and
                b == (n, c // groups, groups, h, w) and total == y)
    return fits


def _fuse_shuffle(G, conv):
    """A channel shuffle (module docstring) after a grouped pointwise NCHW
    conv (what :class:`~.kernels.conv_numpy.Pointwise` runs): the conv
    writes the shuffled tensor (``shuffle_groups``).  Returns ops removed."""
    groups = int(conv.attrs.get("group", 1))
    w, y = G.const(conv.inputs[1]), conv.outputs[0]
    if conv.op_type != "Conv" or groups < 2 or conv.attrs.get("layout", "NCHW") != "NCHW" or \
            len(conv.inputs) > 3 or w is None or w.ndim != 4 or w.shape[2:] != (1, 1) or \
            any(int(v) != 1 for v in conv.attrs.get("strides", [1, 1])) or \
            any(int(v) for v in conv.attrs.get("pads", [0] * 4)) or \
            conv.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET", "VALID", b"VALID"):
        return 0
    ops = []
    for want in ("Reshape", "Transpose", "Reshape"):
        op = G.only_reader(ops[-1].outputs[0] if ops else y)
        if op is None or op.op_type != want or op.inputs[0] != (ops[-1].outputs[0] if ops else y):
            return 0
        ops.append(op)
    if [int(v) for v in ops[1].attrs.get("perm", [])] != [0, 2, 1, 3, 4] or \
            any(len(G.g.tensors[t].shape) != n for t, n in
                ((y, 4), (ops[0].outputs[0], 5), (ops[1].outputs[0], 5), (ops[2].outputs[0], 4))):
        return 0
    if not decide(G.g, f"fusion: the channel shuffle {ops[1].name!r} into {conv.name!r}",
                  (y, ops[0].outputs[0], ops[1].outputs[0], ops[2].outputs[0]),
                  _shuffle_rule(groups)):
        return 0
    conv.attrs["shuffle_groups"] = groups
    _take_output(G, conv, ops[2], ops, [y, ops[0].outputs[0], ops[1].outputs[0]])
    return len(ops)


def fuse(graph, memo=None):
    """Rewrite ``graph`` in place (see the module doc); returns the number
    of ops removed.  ``memo`` (a dict kept by the caller): biases folded
    before from the same constant arrays (the same objects) are taken from
    it instead of being computed and stored again -- an InferenceSession
    importing its model once per input shape shares them (and its kernels
    then lend each other their weights: the same arrays, the same scales)."""
    G = _Graph(graph, memo)
    removed = 0
    for conv in list(graph.ops):
        if conv.op_type == "Conv" and len(conv.outputs) == 1 and \
                np.dtype(graph.tensors[conv.outputs[0]].dtype) == _F32:
            removed += _fold_pad(G, conv)
        if not _conv_ok(G, conv):
            continue
        folded = 1
        while folded:       # a bias Add then a BatchNormalization (PaddleOCR's export)
            folded = _fold_bn(G, conv) + _fold_affine(G, conv)
            removed += folded
        n = _fuse_activation(G, conv)
        if not n and len(conv.inputs) < 4 and conv.op_type == "Conv":
            r = _fuse_residual(G, conv)
            n = r + (0 if conv.attrs.get("activation") else _fuse_activation(G, conv)) \
                if r else 0
        removed += n + _fuse_shuffle(G, conv)
    removed += fuse_batch_norm(G, _fuse_activation)
    removed += fuse_linear(G)
    removed += fuse_attention(G)
    G.sweep()
    if removed:
        graph.validate()
    return removed
