"""The NHWC pass: the NCHW regions of an ONNX graph that the NHWC kernels
cover run in NHWC.

``to_nhwc(graph, rule="auto")`` rewrites a fused float32 graph in place,
before it is planned (after :func:`pyarena.runtime.fuse`), so the planner
plans exactly what runs.  The C core's NHWC convolutions are the fast ones
(the packed 1x1 SGEMM with its epilogue in registers, the depthwise kernel
over contiguous channels); an ONNX model is NCHW throughout, so its 1x1
layers went to BLAS plus an epilogue pass and its depthwise layers to the
NCHW kernel.

* An op is **convertible** when it has an NHWC form -- its kernel's
  ``nhwc`` fact (pyarena/runtime/kernels/facts.py) -- and its tensors are
  4-D: Conv (any groups; fused activation and residual input kept; its
  weights constant stays ONNX's OIHW, noted ``notes.weights_oihw``: the kernel
  reads it as ``OHWI``, depthwise as ``1HWC`` as TFLite stores them, when
  it lays its weights out -- so no re-laid out copy is held beside the
  kernel's packed one), MaxPool / AveragePool / GlobalAveragePool /
  GlobalMaxPool, BatchNormalization (inference), the element-wise activations, Add / Sub / Mul / Div / Max /
  Min / Sum / Mean / Pow (a constant operand of rank <= 4 re-laid out:
  ``(C, 1, 1)`` becomes ``(C,)``), Concat and Split (their axis remapped,
  negative axes included: a YOLOv8 C2f block splits its channels), Pad (its pads permuted), Slice of constant starts / ends
  (its axes remapped), Resize / Upsample of constant scales or sizes (the
  four values permuted), PRelu, Dropout / Identity.
* A **region** is a connected set of convertible ops (connected through
  the tensors one writes and another reads).  A region is converted when
  the rule takes it (:func:`worth`); its ops get ``layout="NHWC"`` where it
  matters, the tensors they write become NHWC, and explicit ``Transpose``
  ops go at its boundary: a tensor read from outside (a graph input, a
  Reshape's output...) is transposed to NHWC before its first reader in
  the region, a tensor read outside the region or a graph output is
  transposed back to NCHW under its own name (the region writes an NHWC
  copy named ``<name>.nhwc``).  Graph inputs and outputs keep their names,
  shapes and layout.
* Rules: ``"auto"`` (the default) converts a region holding a depthwise
  convolution, or a 1x1 one and at most MAX_WEIGHTS of convolution
  weights, whose boundary Transposes copy few bytes next to what its
  convolutions write (:func:`worth`) -- where it is measured faster
  (docs/native-kernels.md); ``"nhwc"`` every region holding a
  convolution; ``"keep"`` none.

``graph.relaid`` records what was done (None when nothing converted): the
counts for reports (``regions``, ``ops``, ``transposes``), ``shapes``
(tensor -> (the NCHW tensor whose shape it permutes, perm)) for retargeting
the graph to other input shapes (importers/retarget.py), and ``baked`` (the
constants whose values were re-laid out into new ones: the operands of
element-wise ops, PRelu slopes, Pad's pads).  Returns the number of ops
converted.
"""
import math
import os

import numpy as np

from ..errors import InvalidArgumentError
from ..graph.decisions import decide
from ..graph.graph import Op
from ..memory.mapped import release_pages
from ..planning.geometry import slice_params
from .fusion import _Graph
from .kernels import op_fact

__all__ = ["to_nhwc", "worth", "RULES", "TO_NHWC", "TO_NCHW"]

RULES = ("auto", "nhwc", "keep")
#: the "auto" rule takes a region whose boundary Transposes copy at most
#: 1/MOVED_SHARE of the bytes its convolutions write (MobileNetV2: its input
#: image; ShuffleNet's channel shuffles, two full copies per unit, are not:
#: 1.2x; Inception-v1's regions 2.3-2.5x, DenseNet's below 1x).  YOLOv8n
#: at 320 (one region once Split converts: 7.5x) runs 1.77x faster in NHWC
#: (103 vs 183 ms, one thread, interleaved), so the bar sits at 5
MOVED_SHARE = 5
#: ... and, without a depthwise convolution, at most this many bytes of
#: convolution weights: where they are large the large 1x1 layers are where
#: BLAS beats the NHWC tile -- ResNet-50 (89.5 MiB) measured no faster
#: (1.02x the NCHW time), Inception-v2 (38.7 MiB) and SqueezeNet (4.7 MiB)
#: 0.87x (docs/native-kernels.md)
MAX_WEIGHTS = 64 << 20
#: ... where the C core's tiles are AVX-512 and the BLAS's are not (an
#: OpenBLAS that picks its Haswell core on an AVX-512 processor), every
#: region whose convolutions do at least this many multiply-adds per byte
#: its boundary Transposes move (one thread, interleaved, against the NCHW
#: path: ResNet-50 80 -> 37 ms, DenseNet-121 109 -> 66, Inception-v1 32 ->
#: 17; ShuffleNet's channel shuffles 3.5 -> 4.9 ms, not taken)
DENSITY = 16
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
_AXIS = (0, 3, 1, 2)        # NCHW axis a is NHWC axis _AXIS[a]

_F32 = np.dtype(np.float32)


class _Pass(_Graph):
    """The graph, its readers (and constants, as fusion sees them) and
    writers (``writer``, from fusion's graph view), and the new tensors'
    names."""

    def __init__(self, graph):
        super().__init__(graph)
        self.op_names = {op.name for op in graph.ops}
        self.shapes = {}        # tensor -> (NCHW source tensor, perm)
        self.baked = set()      # constants re-laid out into new ones

    def act4(self, name):
        """Whether ``name`` is a planned 4-D activation of known shape."""
        t = self.g.tensors.get(name) if name else None
        return (t is not None and t.role != "constant" and not t.dynamic and
                t.shape is not None and len(t.shape) == 4 and
                all(isinstance(d, (int, np.integer)) for d in t.shape))

    def fresh(self, base, names):
        name, k = base, 0
        while name in names:
            k += 1
            name = f"{base}_{k}"
        return name

    def new_const(self, op, index, value):
        """``op``'s input ``index`` becomes a new constant ``value``; the old
        one goes when nothing else reads it."""
        old = op.inputs[index]
        name = self.fresh(f"{old}.nhwc", self.g.tensors)
        value = np.ascontiguousarray(value)
        self.g.add_tensor(name, value.shape, value.dtype.name, role="constant",
                          data=self.g.constant_data(value))
        op.inputs[index] = name
        self.readers[name] = [op]
        self.baked.add(old)
        rest = [o for o in self.readers.get(old, []) if o is not op]
        self.readers[old] = rest
        if not rest and old not in self.outputs:
            gone = self.g.tensors.pop(old, None)
            if gone is not None and gone.data is not None:
                release_pages(gone.data)       # a weight still in its file


# -- which ops convert ----------------------------------------------------------------

def _conv_ok(P, op):
    a = op.attrs
    if a.get("layout", "NCHW") != "NCHW" or a.get("weight_layout") or len(op.inputs) > 4 or \
            a.get("shuffle_groups"):        # (its shuffled writes are NCHW planes)
        return False
    w = P.const(op.inputs[1]) if len(op.inputs) > 1 else None
    out = P.g.tensors.get(op.outputs[0]) if op.outputs else None
    if w is None or w.ndim != 4 or out is None or np.dtype(out.dtype) != _F32:
        return False
    if len(op.inputs) > 2 and op.inputs[2] and P.const(op.inputs[2]) is None:
        return False
    return len(op.inputs) < 4 or not op.inputs[3] or P.act4(op.inputs[3])


def _operand_ok(P, name):
    """An element-wise operand: a 4-D activation or a constant of rank <= 4."""
    if P.act4(name):
        return True
    c = P.const(name)
    return c is not None and c.ndim <= 4


def _pad_ok(P, op):
    if len(op.inputs) > 3 and op.inputs[3]:          # axes: not remapped
        return False
    pads = P.const(op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] else \
        op.attrs.get("pads")
    return pads is not None and np.asarray(pads).size == 8 and \
        not op.attrs.get("layout_pairs")


def _slice_ok(P, op):
    """A Slice of constant starts / ends (axes, steps) in opset-10 form."""
    params = slice_params(op, P.g)
    return params is not None and all(0 <= a < 4 for a in params[2])


def _resize_index(P, op):
    """The input index of a Resize's constant 4-D scales or sizes (the one
    given), or None: opset-18 axes, crop-and-resize (a roi) and sizes
    computed at run time stay NCHW."""
    ctm = op.attrs.get("coordinate_transformation_mode", "half_pixel")
    ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
    if op.attrs.get("axes") is not None or ctm == "tf_crop_and_resize":
        return None
    old = op.op_type == "Upsample" or len(op.inputs) == 2
    for i in ((1,) if old else (2, 3)):
        n = op.inputs[i] if len(op.inputs) > i else ""
        c = P.const(n) if n else None
        if c is not None and c.size == 4:
            return i
        if n and c is None:
            return None
    return None


def convertible(P, op):
    """Whether ``op`` has an NHWC form here (module docstring)."""
    outs = [t for t in op.outputs if t]
    kind = op_fact(op.op_type, "nhwc")
    if kind == "split":         # outputs along one axis, every one 4-D
        ax = int(op.attrs.get("axis", 0))
        return bool(outs) and all(P.act4(t) for t in outs) and bool(op.inputs) and \
            P.act4(op.inputs[0]) and -4 <= ax < 4
    if len(outs) != 1 or not P.act4(outs[0]) or not op.inputs or not op.inputs[0]:
        return False
    if kind == "conv":
        return _conv_ok(P, op)
    if kind == "attr":      # (a BatchNormalization: its inference form)
        return P.act4(op.inputs[0]) and op.attrs.get("layout", "NCHW") == "NCHW" and \
            not int(op.attrs.get("training_mode", 0))
    if kind in ("elementwise", "prelu"):
        if not P.act4(op.inputs[0]):
            return False
        rest = [P.const(n) for n in op.inputs[1:] if n]
        if kind == "prelu":
            return len(rest) == 1 and rest[0] is not None and rest[0].ndim != 1 and \
                rest[0].ndim <= 4
        return all(c is not None and c.size == 1 for c in rest)
    if kind == "broadcast":
        names = [n for n in op.inputs if n]
        return all(_operand_ok(P, n) for n in names) and any(P.act4(n) for n in names)
    if kind == "concat":
        ax = int(op.attrs.get("axis", 0))
        return -4 <= ax < 4 and all(P.act4(n) for n in op.inputs if n)
    if kind == "pad":
        return P.act4(op.inputs[0]) and _pad_ok(P, op)
    if kind == "slice":
        return P.act4(op.inputs[0]) and _slice_ok(P, op)
    if kind == "resize":
        return P.act4(op.inputs[0]) and _resize_index(P, op) is not None
    return False


def _regions(P):
    """Connected sets of convertible ops, in graph order."""
    ops = [op for op in P.g.ops if convertible(P, op)]
    parent = {id(op): id(op) for op in ops}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k
    for op in ops:
        for t in op.inputs:
            src = P.writer(t)
            if src is not None and id(src) in parent:
                parent[find(id(op))] = find(id(src))
    groups = {}
    for op in ops:
        groups.setdefault(find(id(op)), []).append(op)
    return list(groups.values())


def _depthwise(P, op):
    """groups = input channels (ONNX weights: C_in / groups = 1 per group)."""
    return int(op.attrs.get("group", 1)) > 1 and P.const(op.inputs[1]).shape[1] == 1


def _edges(P, region):
    """The tensors at the region's boundary, sorted: 4-D activations read
    from outside it, and what it writes that is read outside or is a
    graph output (each gets a Transpose)."""
    inside = {id(op) for op in region}
    edges = set()
    for op in region:
        for t in op.inputs:
            src = P.writer(t)
            if t and P.act4(t) and (src is None or id(src) not in inside):
                edges.add(t)
        for t in op.outputs:
            if t and (t in P.outputs or
                      any(id(r) not in inside for r in P.readers.get(t, []))):
                edges.add(t)
    return sorted(edges)


def _cheap_rule(n_edges, itemsizes):
    """The byte test of "auto" over the shapes of the region's ``n_edges``
    boundary tensors, then its convolutions' outputs (``itemsizes``: each
    one's): the boundary Transposes copy at most 1/MOVED_SHARE of the bytes
    the convolutions write.  One moving only size-1 axes is a view: no
    copy."""
    def cheap(*shapes):
        size = [math.prod(s) * z for s, z in zip(shapes, itemsizes)]
        moved = sum(n for n, s in zip(size[:n_edges], shapes) if s[1] > 1 and s[2] * s[3] > 1)
        return moved * MOVED_SHARE <= sum(size[n_edges:])
    return cheap


def _dense_rule(n_edges, itemsizes, reduce):
    """The work test of "auto" where the tiles are wider than the BLAS
    (:func:`~pyarena.runtime.blas.tiles_wider_than_blas`), over the same
    shapes as :func:`_cheap_rule`: the convolutions' multiply-adds (each
    output element times ``reduce``, its weights' C_in / groups x kh x kw)
    at least DENSITY per byte the boundary Transposes move."""
    def dense(*shapes):
        moved = sum(math.prod(s) * z for s, z in zip(shapes[:n_edges], itemsizes)
                    if s[1] > 1 and s[2] * s[3] > 1)
        work = sum(math.prod(s) * k for s, k in zip(shapes[n_edges:], reduce))
        return work >= DENSITY * moved
    return dense


_WIDER = []


def _tiles_wider():
    """Whether the C core's tiles are wider than NumPy's BLAS (asked once;
    ``PYARENA_NHWC_WIDE=1`` / ``0`` in the environment says so instead:
    the test suite pins it, so what it expects of a graph does not depend
    on the machine's BLAS)."""
    if not _WIDER:
        from .blas import tiles_wider_than_blas
        forced = os.environ.get("PYARENA_NHWC_WIDE", "")
        _WIDER.append(forced == "1" if forced in ("0", "1") else tiles_wider_than_blas())
    return _WIDER[0]


def worth(P, region, rule):
    """Whether ``rule`` converts ``region`` (module docstring): "auto" when
    it holds a depthwise convolution, or a 1x1 one and at most
    MAX_WEIGHTS bytes of convolution weights, and its boundary Transposes
    copy at most 1/MOVED_SHARE of the bytes its convolutions write -- a
    test of the shapes, recorded with the graph
    (:func:`~pyarena.graph.decisions.decide`: a retarget to shapes that
    would choose otherwise declines)."""
    convs = [op for op in region if op.op_type == "Conv"]
    if rule == "nhwc":
        return bool(convs)
    if rule != "auto" or not convs:
        return False
    edges = _edges(P, region)
    names = edges + [op.outputs[0] for op in convs]
    sizes = [np.dtype(P.g.tensors[n].dtype).itemsize for n in names]
    what = f"the NHWC pass: the region of {convs[0].name!r}"
    if not any(_depthwise(P, op) for op in convs):
        if _tiles_wider():
            # the tiles do twice the BLAS's multiply-adds per instruction:
            # the region pays when its convolutions' work outweighs what
            # its boundary Transposes move
            reduce = [math.prod(P.const(op.inputs[1]).shape[1:]) for op in convs]
            return decide(P.g, what, names, _dense_rule(len(edges), sizes, reduce))
        if not any(P.const(op.inputs[1]).shape[2:] == (1, 1) for op in convs) or \
                sum(P.g.tensors[op.inputs[1]].nbytes for op in convs) > MAX_WEIGHTS:
            return False
    return decide(P.g, what, names, _cheap_rule(len(edges), sizes))


# -- converting -----------------------------------------------------------------------

def _relaid_const(c):
    """A constant operand broadcast against NCHW, for NHWC: rank 4 by leading
    ones, permuted, leading ones dropped ((C, 1, 1) -> (C,))."""
    c4 = c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(TO_NHWC)
    shape = list(c4.shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return c4.reshape(shape)


def _convert_op(P, op):
    """``op``'s attributes and constants for NHWC (its tensors are done
    by the caller)."""
    kind = op_fact(op.op_type, "nhwc")
    if kind == "conv":
        op.attrs["layout"] = "NHWC"
        op.notes.weights_oihw = True
        if _depthwise(P, op):
            op.attrs["weight_layout"] = "1HWC"
    elif kind in ("attr", "prelu"):
        op.attrs["layout"] = "NHWC"
        if kind == "prelu":
            P.new_const(op, 1, _relaid_const(P.const(op.inputs[1])))
    elif kind == "broadcast":
        for i, n in enumerate(op.inputs):
            c = P.const(n)
            if c is not None and c.size > 1:
                P.new_const(op, i, _relaid_const(c))
    elif kind in ("concat", "split"):
        ax = int(op.attrs.get("axis", 0))
        op.attrs["axis"] = _AXIS[ax + 4 if ax < 0 else ax]
    elif kind == "resize":       # scales or sizes per axis, permuted
        i = _resize_index(P, op)
        c = np.asarray(P.const(op.inputs[i])).reshape(-1)
        P.new_const(op, i, c[list(TO_NHWC)])
    elif kind == "slice":
        new = np.asarray([_AXIS[a] for a in slice_params(op, P.g)[2]], np.int64)
        if len(op.inputs) > 3 and op.inputs[3]:
            P.new_const(op, 3, new)
        else:
            name = P.fresh(f"{op.name}.axes.nhwc", P.g.tensors)
            P.g.add_tensor(name, new.shape, "int64", role="constant", data=new)
            while len(op.inputs) < 4:
                op.inputs.append("")
            op.inputs[3] = name
            P.readers[name] = [op]
    elif kind == "pad":
        has = len(op.inputs) > 1 and op.inputs[1]
        pads = [int(v) for v in np.asarray(P.const(op.inputs[1]) if has
                                           else op.attrs["pads"]).reshape(-1)]
        new = [pads[p] for p in TO_NHWC] + [pads[4 + p] for p in TO_NHWC]
        if has:
            P.new_const(op, 1, np.asarray(new, dtype=np.int64))
        else:
            op.attrs["pads"] = new


def _transpose(P, src, dst, perm, ops):
    """Append ``Transpose(src) -> dst`` (perm) to ``ops``."""
    name = P.fresh(f"{dst}.transpose", P.op_names)
    P.op_names.add(name)
    ops.append(Op(name, "Transpose", [src], [dst], 0, {"perm": list(perm)}))


def _nhwc_tensor(P, name, like):
    """A new activation ``name`` with ``like``'s shape permuted to NHWC."""
    t = P.g.tensors[like]
    P.g.add_tensor(name, [t.shape[p] for p in TO_NHWC], t.dtype)
    P.shapes[name] = (like, TO_NHWC)


def _rewrite(P, regions):
    """The regions' ops and tensors in NHWC, Transposes at their edges."""
    inside = {id(op) for r in regions for op in r}
    entry, renamed, new_ops, count = {}, {}, [], 0
    for op in P.g.ops:
        if id(op) not in inside:
            new_ops.append(op)
            continue
        _convert_op(P, op)              # (reads the NCHW shapes: first)
        for i, t in enumerate(op.inputs):
            if not t or P.g.tensors[t].role == "constant":
                continue
            src = P.writer(t)
            if src is not None and id(src) in inside:
                op.inputs[i] = renamed.get(t, t)
                continue
            if t not in entry:          # from outside: one NHWC copy, made here
                entry[t] = P.fresh(f"{t}.nhwc", P.g.tensors)
                _nhwc_tensor(P, entry[t], t)
                _transpose(P, t, entry[t], TO_NHWC, new_ops)
                count += 1
            op.inputs[i] = entry[t]
        new_ops.append(op)
        for j, t in enumerate(op.outputs):
            if not t:
                continue
            if t in P.outputs or any(id(r) not in inside for r in P.readers.get(t, [])):
                renamed[t] = op.outputs[j] = P.fresh(f"{t}.nhwc", P.g.tensors)
                _nhwc_tensor(P, renamed[t], t)
                _transpose(P, renamed[t], t, TO_NCHW, new_ops)
                count += 1
            else:
                tt = P.g.tensors[t]
                tt.shape = tuple(tt.shape[p] for p in TO_NHWC)
                P.shapes[t] = (t, TO_NHWC)
    P.g.ops = new_ops
    return count


def to_nhwc(graph, rule="auto"):
    """Convert ``graph``'s NCHW regions to NHWC in place (module
    docstring); returns the number of ops converted."""
    if rule not in RULES:
        raise InvalidArgumentError(f"layout rule must be one of {RULES}, not {rule!r}")
    graph.relaid = None
    if rule == "keep":
        return 0
    P = _Pass(graph)
    regions = [r for r in _regions(P) if worth(P, r, rule)]
    if not regions:
        return 0
    n_transposes = _rewrite(P, regions)
    n_ops = sum(len(r) for r in regions)
    graph.relaid = {"regions": len(regions), "ops": n_ops, "transposes": n_transposes,
                    "shapes": P.shapes, "baked": frozenset(P.baked)}
    graph.validate()
    return n_ops
