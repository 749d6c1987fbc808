"""Patch-based execution of a leading stage: row bands (MCUNetV2-style).

The arena of a CNN is set by its first, high-resolution stages: a few
feature maps of hundreds of kilobytes live together while the rest of the
network needs far less.  A *patched stage* runs a contiguous run of spatial
ops -- Conv (depthwise and grouped too, with a fused activation or residual),
MaxPool / AveragePool, per-element activations, BatchNormalization and
element-wise Add / Sub / Mul / Div / Max / Min, constant-mode Pad
of H, W and the channels (TFLite models write one before a stride-2 conv,
and one of the channels in a skip branch), Resize, Slices of constant
bounds (a step-2 Slice of rows is a 1-row window of stride 2: YOLOv5's
Focus), channel Concats (row-local: a CSP block's branches), and, as its
first op, the NCHW -> NHWC Transpose of the stage input (which keeps its
own H axis); around a peak, a row-local op may also read a second
tensor whole from before the stage (a feature pyramid's lateral map:
``Stage.extra``) -- one band of output rows at
a time: for each band of the stage output, the receptive-field arithmetic
below gives the rows of every tensor of the stage that band needs, the ops
compute just those rows into small band buffers, and the band is written
into its rows of the full stage output.  Only the stage input and output
are ever whole; the intermediate tensors exist one band at a time.  Rows
at a band's edge are computed by both bands that need them (the recompute,
counted in multiply-accumulates).

**Arithmetic** (along H; W stays whole).  For output rows ``[a, b)`` of
an op with stride ``s``, kernel ``k``, dilation ``d`` and top padding
``p``, the input rows are ``[a*s - p, (b-1)*s - p + d*(k-1) + 1)`` clamped
to the tensor; what the clamp cut off is the band's own padding (only the
first and last bands have any).  A Pad of ``(top, bottom)`` rows is a
1-row kernel with that padding whose padded rows may stand alone: output
rows ``[a, b)`` read input rows ``[a - top, b - top)`` clamped, the rows
cut off are written as the pad value by the band, and a band made of
padding alone reads no rows (the ops that only it would need are skipped).  Element-wise ops need the same rows of
each input.  A tensor read by several ops of the stage (a residual skip)
is computed for the hull of what they need; a reader that needs fewer rows
gets them copied out.

**Rewrite.**  :func:`patch_graph` replaces the stage's ops by one op of
type ``PatchedStage`` (the runtime's kernel ``runtime/kernels/patched.py``
runs it).  Its inputs are the stage input and every constant of the stage,
its output the stage output; its attributes hold the stage's ops, the
shapes of its intermediate tensors (which leave the graph) and the bands.
Its workspace (``Op.scratch_bytes``, sized by the kernel) holds the band
buffers, so the planner reserves them like any scratch and the validator
checks them as such.  :func:`stages` lists the candidate stages of a graph.
"""
import math

import numpy as np

from ..errors import GraphError
from ..graph import Op, conv_weight_shape
from .geometry import is_spatial, op_geometry, row_kind, slice_params
from .resize_rows import resize_in_rows, resize_ready

__all__ = ["PATCH_OP", "is_spatial", "row_kind", "Stage", "stages", "band_rows", "band_needs", "patch_graph",
           "patch_op", "splice",
           "stage_macs", "stage_needs", "iter_needs", "fill_rounds", "op_geometry", "op_rows", "slice_params",
           "row_shapes"]

PATCH_OP = "PatchedStage"

def _h(shape, h_axis):
    return int(shape[h_axis])


def _row_local_const(t, out_shape, h_axis):
    """A constant operand that broadcasts along H (size 1 there)."""
    s = tuple(int(d) for d in (t.shape or ()))
    full = (1,) * (len(out_shape) - len(s)) + s
    return len(full) == len(out_shape) and full[h_axis] == 1


def _concat_ok(op, graph, inside, h_axis, y):
    """A Concat of stage tensors along an axis other than batch and H (the
    channels of a CSP block, a Focus layer): row-local, each input's rows
    are the output's."""
    ins = [n for n in op.inputs if n]
    ax = int(op.attrs.get("axis", 0))
    ax = ax + 4 if ax < 0 else ax
    return bool(ins) and ax not in (0, h_axis) and ax < 4 and all(
        n in inside and len(graph.tensors[n].shape) == 4 and
        int(graph.tensors[n].shape[h_axis]) == int(y.shape[h_axis]) for n in ins)


def _op_ok(op, graph, inside, h_axis):
    """True when ``op`` can run banded, reading stage tensors ``inside``."""
    outs = [n for n in op.outputs if n]
    if len(outs) != 1 or outs != op.outputs[:1]:
        return False
    y = graph.tensors[outs[0]]
    if y.shape is None or len(y.shape) != 4 or y.dynamic or np.dtype(y.dtype).kind != "f":
        return False
    kind = row_kind(op)
    if is_spatial(op):
        if not op.inputs or op.inputs[0] not in inside:
            return False
        extra = [n for n in op.inputs[1:] if n]
        if kind in ("pad", "resize"):
            geo = op_geometry(op, graph, h_axis)
            xs = graph.tensors[op.inputs[0]].shape
            return geo is not None and all(
                graph.tensors[n].role == "constant" for n in extra) and (
                geo[0] == "resize" or all(int(y.shape[a]) == int(xs[a]) + geo[3][a] + geo[4][a]
                                          for a in range(4)))
        if kind == "conv":
            extra = [n for i, n in enumerate(op.inputs[1:3], 1) if n]
            if any(graph.tensors[n].role != "constant" for n in extra):
                return False
            if len(op.inputs) > 3 and op.inputs[3] and op.inputs[3] not in inside:
                return False
        elif extra and kind != "slice":      # (a Slice's: checked as its geometry)
            return False
        if kind == "transpose" and len(inside) != 1:   # the stage input's only
            return False
        return op_geometry(op, graph, h_axis) is not None
    if kind == "concat":
        return _concat_ok(op, graph, inside, h_axis, y)
    if kind not in ("local", "broadcast"):
        return False
    ins = [n for n in op.inputs if n]
    if not ins or ins[0] not in inside and kind == "local":
        return False
    for n in ins:
        t = graph.tensors[n]
        if n in inside:
            if tuple(t.shape) != tuple(y.shape):
                return False
        elif t.role != "constant" or not _row_local_const(t, y.shape, h_axis):
            return False
    return any(n in inside for n in ins)


class Stage:
    """Ops ``graph.ops[first:last + 1]`` from tensor ``x`` to tensor ``y``,
    but for those at the indices ``hoisted``: a side branch that reads
    nothing of the stage but ``x`` (and what the branch itself makes),
    run whole before the stage."""

    def __init__(self, graph, first, last, x, y, h_axis, hoisted=(), x_axis=None, extra=()):
        self.first, self.last, self.x, self.y, self.h_axis = first, last, x, y, h_axis
        #: H of the stage input: another axis when its first op transposes it
        self.x_axis = h_axis if x_axis is None else x_axis
        #: other whole inputs, made before the stage and read by its row-local
        #: ops (a feature pyramid's lateral map joining an upsampled one)
        self.extra = tuple(extra)
        self.hoisted = tuple(hoisted)
        self.ops = [op for i, op in enumerate(graph.ops[first:last + 1], first)
                    if i not in self.hoisted]
        self.rows = _h(graph.tensors[y].shape, h_axis)

    @property
    def key(self):
        return f"{self.ops[0].name}..{self.ops[-1].name}"


def _uses(graph):
    """tensor -> index of its last reader (graph outputs: past the end)."""
    last = {}
    for i, op in enumerate(graph.ops):
        for n in op.inputs:
            if n:
                last[n] = i
    for n in graph.outputs:
        last[n] = len(graph.ops)
    return last


def _h_axis(graph, op):
    if row_kind(op) == "resize":   # no layout: the axis whose size changes with C kept
        x, y = graph.tensors[op.inputs[0]].shape, graph.tensors[op.outputs[0]].shape
        nhwc = x is not None and y is not None and len(x) == len(y) == 4 and \
            int(x[1]) != int(y[1]) and int(x[3]) == int(y[3])
        return 1 if nhwc else 2
    return 1 if op.attrs.get("layout", "NCHW") == "NHWC" else 2


def stages(graph, max_starts=3, side_starts=5, around=None, back=16):
    """Candidate stages: from the first ``max_starts`` spatial ops reading a
    4-D tensor, every contiguous run of bandable ops after which exactly
    one of its tensors is read later and whose output is smaller (fewer
    rows) than its input; from the first ``side_starts``, those that need
    a side branch (reading only the stage input) run before them.
    With ``around`` (an op index, where a plan peaks): the stages from the
    spatial ops (Resize too) at most ``back`` ops before it that contain
    it and have an inner tensor at least as large as the smaller of their
    input and output; their input may be read after them (a decoder's
    skip).
    Shortest first."""
    last = _uses(graph)
    pos = {n: i for i, o in enumerate(graph.ops) for n in o.outputs if n}  # tensor -> writer
    found, starts = [], 0
    lo = 0 if around is None else max(0, around - back)
    for s, op0 in enumerate(graph.ops[lo:around + 1 if around is not None else None], lo):
        kind0 = row_kind(op0)
        if kind0 not in ("pool", "resize", "conv", "slice", "transpose") or \
                not op0.inputs or around is None and kind0 == "resize":
            continue
        x = op0.inputs[0]
        tx = graph.tensors[x]
        if tx.role == "constant" or tx.shape is None or len(tx.shape) != 4:
            continue
        # a Slice has no layout of its own: the convolutions after it decide
        axes = (1, 2) if kind0 == "slice" else (_h_axis(graph, op0),) if \
            kind0 != "transpose" else (1,)
        axes = [a for a in axes if _op_ok(op0, graph, {x}, a)]
        if not axes:
            continue
        starts += 1
        x_axis = 2 if kind0 == "transpose" else None
        for h_axis in axes:
            for hoist in (False, True):
                if not hoist and starts > max_starts and around is None:
                    continue
                found += [st for st in _ends(_stages_from(graph, s, x, h_axis, last, hoist,
                                                          around, x_axis, pos), graph)
                          if not hoist or st.hoisted]
        if starts >= max(max_starts, side_starts) and around is None:
            break
    return sorted(found, key=lambda st: (st.last - st.first, st.first))


def _ends(found, graph):
    """Of the stages from one start, at each output resolution: the
    shortest (least recompute), the one with the smallest output (least
    held whole) and the longest (least left outside)."""
    by_rows = {}
    for st in found:
        by_rows.setdefault(st.rows, []).append(st)
    out = []
    for group in by_rows.values():
        small = min(group, key=lambda st: graph.tensors[st.y].nbytes)
        for st in (group[0], small, group[-1]):
            if st not in out:
                out.append(st)
    return out


def _outer(graph, op, inside, s, h_axis, pos):
    """The tensors a row-local op (Concat, element-wise) of a stage from op
    ``s`` may read whole from outside: 4-D activations made before op ``s``
    (or graph inputs) with the output's rows; None if it reads another."""
    if row_kind(op) not in ("concat", "broadcast"):
        return None
    y = graph.tensors[op.outputs[0]] if op.outputs and op.outputs[0] else None
    out = []
    for n in op.inputs:
        if not n or n in inside:
            continue
        t = graph.tensors[n]
        if t.role == "constant":
            continue
        if y is None or t.shape is None or len(t.shape) != 4 or t.dynamic or \
                pos.get(n, -1) >= s or _h(t.shape, h_axis) != _h(y.shape, h_axis):
            return None
        out.append(n)
    return out


def _stages_from(graph, s, x, h_axis, last, hoist, around=None, x_axis=None, pos=None):
    inside, made, out, extra = {x}, [], [], []
    side, hoisted = {x}, []         # a side branch from x: run before the stage
    hx = _h(graph.tensors[x].shape, h_axis if x_axis is None else x_axis)
    for j in range(s, len(graph.ops)):
        op = graph.ops[j]
        ins = [n for n in op.inputs if n and graph.tensors[n].role != "constant"]
        if hoist and j > s and ins and all(n in side for n in ins) and \
                not any(n in op.inputs for n in made):
            side.update(n for n in op.outputs if n)
            hoisted.append(j)
            continue
        outer = _outer(graph, op, inside, s, h_axis, pos) if around is not None and \
            any(n not in inside for n in ins) else []
        if outer is None or not _op_ok(op, graph, inside | set(outer), h_axis) or \
                any(n not in inside and n not in outer for n in ins):
            break
        for n in outer:
            if n not in extra:
                extra.append(n)
        inside.update(outer)
        inside.add(op.outputs[0])
        made.append(op.outputs[0])
        if last.get(x, -1) > j and around is None or around is not None and j < around:
            continue
        live = [n for n in made if last.get(n, -1) > j]
        if len(live) != 1:
            continue
        y = live[0]
        if any(y in o.inputs for o in graph.ops[s:j + 1]):
            continue
        hy = _h(graph.tensors[y].shape, h_axis)
        if around is not None:     # an inner tensor as large as the smaller end
            big = max((graph.tensors[n].nbytes for n in made if n != y), default=0)
            ok = hy >= 2 and big >= min(graph.tensors[x].nbytes, graph.tensors[y].nbytes)
        else:
            ok = 2 <= hy < hx
        if ok:
            out.append(Stage(graph, s, j, x, y, h_axis, hoisted, x_axis, extra))
    return out


def band_rows(rows, n):
    """``n`` bands of ``rows`` output rows: [(a, b), ...], as equal as can be."""
    n = max(1, min(int(n), rows))
    step = -(-rows // n)
    return [(a, min(a + step, rows)) for a in range(0, rows, step)]


def _in_rows(geo, a, b, size):
    """Input rows and band pads (top, bottom) for output rows [a, b)."""
    if geo[0] == "pad":     # may be padding alone: then no rows, all pads
        lo, hi = a - geo[1], b - geo[1]
        top, bottom = min(b - a, max(0, -lo)), min(b - a, max(0, hi - size))
        r0 = min(max(0, lo), size)
        return (r0, r0 + (b - a) - top - bottom), (top, bottom)
    if geo[0] == "resize":  # "pads": the band's coordinates (its kernel's key)
        return resize_in_rows(geo, a, b, size)
    s, d, k, pt = geo[:4]
    lo, hi = a * s - pt, (b - 1) * s - pt + d * (k - 1) + 1
    r0, r1 = max(0, lo), min(size, hi)
    return (r0, r1), (r0 - lo, hi - r1)


def band_needs(ops, tensors, y, band, h_axis, geos, done=None):
    """For output rows ``band`` of tensor ``y``: ``need`` (tensor -> its
    window: the hull of the rows its readers read in this band) and, per op
    index, ``(requests, pads, rows)``: the rows of each stage input it
    reads (input index -> (r0, r1)), its band pads along H (None for a
    per-element op) and the rows of its output it computes; None for an
    op the band does not run (only a band of padding reads its output, and
    reads no rows of it; or, with reuse, every row it would make is kept).
    ``tensors`` maps names to shapes of the stage's tensors, ``geos`` op
    index -> geometry (spatial ops).  ``done`` (row reuse: tensor -> the
    end of the rows the bands before computed, updated here) makes each
    op compute only the rows of its window past those: the rows before
    are kept from the band before."""
    need, read = {y: tuple(band)}, {y}
    per_op, made = {}, {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        out = need.get(op.outputs[0])
        if op.outputs[0] not in read:
            raise GraphError(f"patched stage: op {op.name!r} computes rows nothing reads")
        if out is not None and done is not None:
            lo = max(out[0], done.get(op.outputs[0], 0))
            out = (lo, out[1]) if lo < out[1] else None
        if out is None:
            per_op[i] = None
            read.update(n for n in op.inputs if n in tensors)
            continue
        made[op.outputs[0]] = out[1]
        req, pads = op_rows(ops, i, tensors, h_axis, geos, out)
        for k, r in req.items():
            n = op.inputs[k]
            read.add(n)
            if r[0] == r[1]:
                continue
            have = need.get(n)
            need[n] = r if have is None else (min(have[0], r[0]), max(have[1], r[1]))
        per_op[i] = (req, pads, out)
    if done is not None:
        done.update(made)
    return need, per_op


def op_rows(ops, i, tensors, h_axis, geos, rows):
    """(the rows of each stage input op ``i`` reads, its band pads along H)
    for output rows ``rows`` (see :func:`band_needs`)."""
    op, (a, b) = ops[i], rows
    req, pads = {}, None
    for k, n in enumerate(op.inputs):
        if n not in tensors:
            continue
        if k == 0 and i in geos:
            req[k], pads = _in_rows(geos[i], a, b, _h(tensors[n], h_axis))
        else:
            req[k] = (a, b)
    return req, pads


def stage_needs(ops, tensors, y, bands, h_axis, geos, reuse=False):
    """:func:`band_needs` of every band in order.  With row reuse each band
    computes only the rows the bands before did not, and the rows the first
    band needs (the stage's whole receptive field) are made first by
    :func:`fill_rounds`, whose rounds come before the bands' in the list."""
    return list(iter_needs(ops, tensors, y, bands, h_axis, geos, reuse))


def iter_needs(ops, tensors, y, bands, h_axis, geos, reuse=False):
    """:func:`stage_needs` one band (or fill round) at a time.  A caller
    that reads each once holds one band's dicts, not every band's: a stage
    at one row per band has hundreds, and all of them at once were the
    peak of a budget search's small objects (and the pymalloc arenas that
    peak leaves resident)."""
    if not reuse:
        for b in bands:
            yield band_needs(ops, tensors, y, b, h_axis, geos)
        return
    first, _ = band_needs(ops, tensors, y, bands[0], h_axis, geos)
    done = {}
    yield from _fill_rounds(ops, tensors, y, h_axis, geos, first, bands, done)
    del first
    for b in bands:
        yield band_needs(ops, tensors, y, b, h_axis, geos, done)


def _ready(geo, have, size, out_size):
    """Output rows of a spatial op computable from its input's first
    ``have`` rows (of ``size``)."""
    if have >= size:
        return out_size
    if geo[0] == "pad":
        return min(out_size, have + geo[1])
    if geo[0] == "resize":
        return resize_ready(geo, have, out_size)
    s, d, k, pt = geo[:4]
    return min(out_size, max(0, (have - 1 + pt - d * (k - 1)) // s + 1))


def _frontier(ops, tensors, y, h_axis, geos, first, x_rows):
    """tensor -> the rows [0, n) of it a fill round makes from the stage
    input's first ``x_rows`` rows, capped by the first band's windows."""
    x = ops[0].inputs[0]
    have = {x: min(x_rows, _h(tensors[x], h_axis))}
    for i, op in enumerate(ops):
        out = op.outputs[0]
        n = _h(tensors[out], h_axis)
        for j, m in enumerate(op.inputs):
            if m not in have:
                continue
            if j == 0 and i in geos:     # rows along H differ: through the op's window
                n = min(n, _ready(geos[i], have[m], _h(tensors[m], h_axis), n))
            else:                        # element-wise: the same rows
                n = min(n, have[m])
        have[out] = 0 if out == y else min(n, first.get(out, (0, 0))[1])
    return have


def _next_read(ops, tensors, h_axis, geos, i, j, done):
    """The first row of input ``j`` op ``i`` reads for its next output row."""
    out = ops[i].outputs[0]
    if done.get(out, 0) >= _h(tensors[out], h_axis):
        return None
    a = done.get(out, 0)
    r = op_rows(ops, i, tensors, h_axis, geos, (a, a + 1))[0][j]
    return r[0]


def fill_rounds(ops, tensors, y, h_axis, geos, first, bands, done):
    """Row reuse: the rounds that make the rows ``first`` (the first band's
    windows) lists, a few input rows at a time (as many as a band reads),
    every op as far as its inputs allow.  Each round is ``(need,
    per_op)`` as :func:`band_needs` gives; the windows hold the rows read
    in the round and those a reader still needs later; ``done`` gets the
    end of the rows made."""
    return list(_fill_rounds(ops, tensors, y, h_axis, geos, first, bands, done))


def _fill_rounds(ops, tensors, y, h_axis, geos, first, bands, done):
    """:func:`fill_rounds` one round at a time (``done`` updated as each
    is made)."""
    x = ops[0].inputs[0]
    grow = max(1, -(-_h(tensors[x], h_axis) // len(bands)))
    readers = {}
    for i, op in enumerate(ops):
        for j, n in enumerate(op.inputs):
            if n in tensors:
                readers.setdefault(n, []).append((i, j))
    r = grow
    while any(done.get(n, 0) < first[n][1] for n in first if n not in (x, y)):
        have = _frontier(ops, tensors, y, h_axis, geos, first, r)
        r += grow
        per_op, lo = {}, {}
        for i, op in enumerate(ops):
            out = op.outputs[0]
            rows = (done.get(out, 0), have[out])
            if rows[0] >= rows[1]:
                per_op[i] = None
                continue
            req, pads = op_rows(ops, i, tensors, h_axis, geos, rows)
            per_op[i] = (req, pads, rows)
            lo[out] = min(lo.get(out, rows[0]), rows[0])
            for j, q in req.items():
                if q[0] < q[1]:
                    lo[op.inputs[j]] = min(lo.get(op.inputs[j], q[0]), q[0])
        for i, v in per_op.items():
            if v is not None:
                done[ops[i].outputs[0]] = v[2][1]
        need = {}
        for n, rs in readers.items():
            if n == x:
                if n in lo:
                    need[n] = (lo[n], max(v[0][j][1] for i, j in rs
                                          if (v := per_op[i]) is not None and j in v[0]))
                continue
            later = [q for i, j in rs if (q := _next_read(ops, tensors, h_axis, geos, i, j,
                                                         done)) is not None]
            a = min(([lo[n]] if n in lo else []) + later, default=None)
            if a is not None and a < done.get(n, 0):
                need[n] = (max(0, a), done[n])
        yield need, per_op


def _macs_per_row(op, graph):
    """Multiply-accumulates of one output row of a Conv (0 for other ops)."""
    if op.op_type != "Conv":
        return 0
    y = graph.tensors[op.outputs[0]].shape
    w = conv_weight_shape(op, graph.tensors[op.inputs[1]].shape)
    nhwc = op.attrs.get("layout", "NCHW") == "NHWC"
    n, c, wo = (int(y[0]), int(y[3]), int(y[2])) if nhwc else \
        (int(y[0]), int(y[1]), int(y[3]))
    per_out = math.prod(int(v) for v in w) // (int(w[0]) if not (
        nhwc and op.attrs.get("weight_layout") == "1HWC") else int(w[3]))
    return n * c * wo * per_out


def stage_macs(graph, stage, bands, reuse=False):
    """(MACs of the stage run whole, MACs of the banded run).  The banded
    run may compute fewer: rows no band needs (the last rows under a
    stride) are not computed at all; with ``reuse`` no row twice."""
    tensors = row_shapes({n: graph.tensors[n].shape for n in _stage_tensors(stage)},
                         stage.x, stage.x_axis, stage.h_axis)
    geos = _geos(graph, stage)
    per_row = [_macs_per_row(op, graph) for op in stage.ops]
    whole = sum(r * _h(graph.tensors[op.outputs[0]].shape, stage.h_axis)
                for r, op in zip(per_row, stage.ops))
    banded = 0
    for _, per_op in iter_needs(stage.ops, tensors, stage.y, bands, stage.h_axis, geos,
                                reuse):
        banded += sum(r * (per_op[i][2][1] - per_op[i][2][0])
                      for i, r in enumerate(per_row) if per_op[i] is not None)
    return whole, banded


def row_shapes(shapes, x, x_axis, h_axis):
    """``shapes`` (tensor -> shape) for the row arithmetic, which reads H at
    ``h_axis``: the stage input's H moved there from ``x_axis``."""
    if x_axis == h_axis:
        return shapes
    s = list(shapes[x])
    s.insert(h_axis, s.pop(x_axis))
    return {**shapes, x: tuple(s)}


def _stage_tensors(stage):
    out = [stage.x] + list(stage.extra)
    for op in stage.ops:
        out.append(op.outputs[0])
    return out


def _geos(graph, stage):
    return {i: op_geometry(op, graph, stage.h_axis) for i, op in enumerate(stage.ops)
            if is_spatial(op)}


def patch_graph(graph, stage, n_bands, reuse=True):
    """Replace ``stage``'s ops in ``graph`` by one ``PatchedStage`` op running
    ``n_bands`` row bands (``reuse``: rows two bands share are kept from the
    first, not computed again); the stage's intermediate tensors leave the
    graph.  Returns the record of what was done (for ``plan.budget``)."""
    op, record = patch_op(graph, stage, n_bands, reuse)
    splice(graph, stage, op)
    return record


def splice(graph, stage, op):
    """Put ``op`` (from :func:`patch_op`) in place of ``stage``'s ops, after
    its side branch; the stage's intermediate tensors leave the graph."""
    graph.ops[stage.first:stage.last + 1] = [graph.ops[i] for i in stage.hoisted] + [op]
    for o in stage.ops:
        if o.outputs[0] != stage.y:
            del graph.tensors[o.outputs[0]]


def patch_op(graph, stage, n_bands, reuse=True):
    """(the ``PatchedStage`` op of ``stage`` in ``n_bands`` bands, its
    record); the graph is not changed.  A stage with other whole inputs
    recomputes its band edges (no row reuse)."""
    reuse = reuse and not stage.extra
    bands = band_rows(stage.rows, n_bands)
    whole, banded = stage_macs(graph, stage, bands, reuse)
    consts = []
    for op in stage.ops:
        for n in op.inputs:
            if n and graph.tensors[n].role == "constant" and n not in consts:
                consts.append(n)
    shapes = {n: {"shape": [int(d) for d in graph.tensors[n].shape],
                  "dtype": graph.tensors[n].dtype} for n in _stage_tensors(stage)}
    name = f"patched[{stage.key}]"
    op = Op(name, PATCH_OP, [stage.x] + list(stage.extra) + consts, [stage.y], attrs={
        "stage_ops": [{"name": o.name, "type": o.op_type, "inputs": list(o.inputs),
                       "outputs": list(o.outputs), "attrs": dict(o.attrs),
                       "notes": o.notes.copy()} for o in stage.ops],
        "stage_tensors": shapes, "bands": [list(b) for b in bands],
        "h_axis": stage.h_axis, "x_axis": stage.x_axis, "extra_inputs": list(stage.extra),
        "reuse": bool(reuse)})
    return op, {"op": name, "input": stage.x, "output": stage.y,
            "ops": [o.name for o in stage.ops], "grid": [len(bands), 1],
            "bands": [list(b) for b in bands], "reuse": bool(reuse), "macs": whole,
            "recompute_macs": max(0, banded - whole)}
