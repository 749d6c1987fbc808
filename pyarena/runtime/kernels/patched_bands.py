"""The band plan of a patched stage, as its kernel (``patched.py``) reads
it from the op's attributes: the stage's tensors and ops (a Slice's
bounds and a Pad's pads turned into attributes, so each band sets its
own), the geometry of its spatial ops, the bands and the rows each band
needs of each tensor (``planning/patch.py``'s arithmetic), and what
follows from them for the buffers:

* row reuse: the rows each band keeps of the bands before it (moved to
  the start of a *held* tensor's buffer, laid out for its largest
  window), and the pieces the first band's ops run in;
* in place: an element-wise op writing over its input's band when
  nothing reads that input after it.

No buffer is laid out here (``patched_buffers.py``) and no kernel built
(the stage's kernel does that, given to :meth:`BandPlan.band_ops`).
"""
import math
from itertools import islice
from types import MappingProxyType

import numpy as np

from ...graph import Graph, Op, Tensor
from ...planning.patch import (is_spatial, iter_needs, op_geometry, op_rows, row_shapes,
                               slice_params)
from .registry import KERNELS


#: the moves of a band that keeps no rows (one for all: the plan of a fine
#: banding has hundreds of bands)
_NO_MOVES = MappingProxyType({})


def _rows(shape, h, r):
    s = list(shape)
    s[h] = r[1] - r[0]
    return tuple(s)


class BandNeeds:
    """The ``(need, per_op)`` of every band in order (the fill rounds of
    row reuse first), as :func:`~pyarena.planning.patch.stage_needs` gives
    them, made again each time they are walked: held all at once, a stage
    at one row per band keeps hundreds of small dicts (a budget search
    sizes dozens of such stages, and the pymalloc arenas they fill stay
    resident after it).  ``len`` is counted once."""

    __slots__ = ("args", "count")

    def __init__(self, *args):
        self.args, self.count = args, None

    def __iter__(self):
        return iter_needs(*self.args)

    def __len__(self):
        if self.count is None:
            self.count = sum(1 for _ in self)
        return self.count


class BandPlan:
    """The stage of a ``PatchedStage`` op in bands.  ``attrs``: the op's
    attributes; ``x_name`` / ``y_name``: the stage input and output;
    ``ins``: the op's input tensors (the constants of the stage after the
    inputs read whole); ``malformed(why)`` raises the kernel's error (only
    used while the plan is made: the plan keeps no reference to the
    kernel)."""

    def __init__(self, attrs, x_name, y_name, ins, malformed):
        a = attrs
        self.h = h = int(a["h_axis"])
        #: H of the stage input (another axis when the stage's first op is
        #: its NCHW -> NHWC Transpose)
        self.xh = int(a.get("x_axis", h))
        self.shapes = {n: (tuple(int(d) for d in v["shape"]), np.dtype(v["dtype"]))
                       for n, v in a["stage_tensors"].items()}
        self.x_name, self.y_name = x_name, y_name
        #: the inputs read whole: the stage input and the others (input k)
        extra = list(a.get("extra_inputs", ()))
        self.whole = {n: k for k, n in enumerate([x_name] + extra)}
        #: the stage's constants: name -> input index of the op
        self.consts = {t.name: i for i, t in enumerate(ins)
                       if i >= len(self.whole) and t is not None}
        self._read_ops(a["stage_ops"], ins, malformed)
        self.plain = row_shapes({n: s for n, (s, _) in self.shapes.items()}, x_name,
                                self.xh, h)
        self.bands = [tuple(b) for b in a["bands"]]
        self.reuse = bool(a.get("reuse", False))
        self.needs = BandNeeds(self.ops, self.plain, y_name, self.bands, h, self.geos,
                               self.reuse)
        self.moves = self._kept(malformed)
        self.chunk = self._chunks()
        self.root = self._in_place()

    def _read_ops(self, stage_ops, ins, malformed):
        """The stage's ops and the geometry of its spatial ones; a Slice's
        bounds and a Pad's pads as attributes, so each band sets its own."""
        h = self.h
        g = Graph("stage")
        for n, (shape, dt) in self.shapes.items():
            g.tensors[n] = Tensor(n, shape, dt.name)
        for n, i in self.consts.items():
            g.tensors[n] = ins[i]
        self.ops = [Op(d["name"], d["type"], list(d["inputs"]), list(d["outputs"]),
                       attrs=dict(d["attrs"]), notes=d["notes"].copy())
                    for d in stage_ops]
        self.geos = {i: op_geometry(op, g, h) for i, op in enumerate(self.ops)
                     if is_spatial(op)}
        if any(v is None for v in self.geos.values()):
            malformed("a spatial op of the stage cannot be run in bands")
        for i, geo in self.geos.items():
            op = self.ops[i]
            if op.op_type == "Slice":   # as attributes, so each band sets its rows
                starts, ends, axes, steps = slice_params(op, g)
                self.ops[i] = Op(op.name, "Slice", [op.inputs[0]], op.outputs,
                                 attrs={"starts": starts, "ends": ends, "axes": axes,
                                        "steps": steps})
            elif geo[0] == "pad":   # pads as attributes, so each band sets its own
                value = op.inputs[2] if len(op.inputs) > 2 else ""
                self.ops[i] = Op(op.name, "Pad", [op.inputs[0], "", value], op.outputs,
                                 attrs={"mode": "constant", "pads": geo[3] + geo[4],
                                        "value": float(op.attrs.get("value", 0.0))})

    def _kept(self, malformed):
        """Row reuse: per band, ``{tensor: (rows down, rows kept)}`` -- the
        rows from its window's first on that the bands before computed,
        moved to the start of its buffer (they were ``rows down`` further
        in) before the band runs.  That is every computed row past the
        window's start, not only those the band reads: a tensor read by two
        ops at different depths (a residual skip read by the block's first
        conv rows ahead of the Add) has its window shrink in the last bands,
        once its far reader is done, while the rows computed ahead are still
        to be read.  A tensor that keeps rows (``self.held``) has a buffer
        of its own for the whole stage.  The same walk of the bands counts
        them and gathers what :meth:`_in_place` asks of every band."""
        base, done, moves, self.held, wide = {}, {}, [], set(), {}
        pairs = self._pairs()
        self._skipped, self._unlike = set(), set()
        for need, per_op in self.needs:
            for i, j, n in pairs:
                if per_op[i] is None:
                    self._skipped.add(i)
                elif per_op[i][0].get(j) != need.get(n):
                    self._unlike.add((i, j))
            if not self.reuse:          # every band computes its whole window
                moves.append(_NO_MOVES)
                continue
            mine = {}
            for n, (lo, hi) in need.items():
                wide[n] = max(wide.get(n, 0), hi - lo)
                if n in self.whole or n == self.y_name:
                    continue
                if n in done and done[n] > lo:
                    if lo < base[n]:
                        malformed(f"the window of {n!r} moves up between bands")
                    mine[n] = (lo - base[n], done[n] - lo)
                    self.held.add(n)
                base[n] = lo
            for i, op in enumerate(self.ops):
                if per_op[i] is not None:
                    done[op.outputs[0]] = per_op[i][2][1]
            moves.append(mine or _NO_MOVES)
        self.needs.count = len(moves)
        self.cap = {n: wide[n] for n in self.held}
        return moves

    def _pairs(self):
        """``(op index, input index, tensor)`` of the inputs an element-wise
        op might be written over (:meth:`_in_place`)."""
        out = []
        for i, op in enumerate(self.ops):
            kind = getattr(KERNELS.get(op.op_type), "inplace", "none")
            if kind in ("unary", "binary"):
                out += [(i, j, n) for j, n in enumerate(op.inputs[:1 if kind == "unary" else 2])]
        return out

    def _chunks(self):
        """Row reuse: op index -> the most rows it computes in one band after
        the first.  The first band also fills every window (its rows are
        the stage's whole receptive field), so its ops run in pieces of at
        most that many rows: their workspace and staging stay those of the
        bands after."""
        if not self.reuse or len(self.bands) < 2:
            return {}
        out = {}
        for _, per_op in islice(self.needs, len(self.needs) - len(self.bands) + 1, None):
            for i, v in per_op.items():
                if v is not None:
                    out[i] = max(out.get(i, 1), v[2][1] - v[2][0])
        return out

    def _in_place(self):
        """tensor -> the tensor whose band buffer it is written into: an
        element-wise op (the kernels' ``unary`` / ``binary`` in-place kinds)
        writes over a same-shaped input band that nothing reads after it,
        as the planner does between whole tensors."""
        last = {}
        for i, op in enumerate(self.ops):
            for n in op.inputs:
                last[n] = i
        root = {}
        for i, op in enumerate(self.ops):
            kind = getattr(KERNELS.get(op.op_type), "inplace", "none")
            if i in self._skipped:      # some band does not run it
                continue
            if kind not in ("unary", "binary"):
                continue
            out = op.outputs[0]
            for j, n in enumerate(op.inputs[:1 if kind == "unary" else 2]):
                if n in self.whole or n == self.y_name or n not in self.shapes or \
                        last.get(n) != i or out == self.y_name or \
                        self.shapes[n] != self.shapes[out] or {n, out} & self.held:
                    continue
                if (i, j) not in self._unlike:  # it reads the band as made, in every band
                    root[out] = root.get(n, n)
                    break
        #: tensor -> index of the last op of the stage that reads it
        self.last = last
        del self._skipped, self._unlike
        return root

    def band_ops(self, need, per_op, kernel):
        """``(index, op, rows each input needs, rows out, kernel)`` of every
        op the band runs (a band of padding alone skips the ops only it
        needs); ``kernel(i, op, req, pads, rows)`` gives the kernel of one
        band geometry."""
        for i, op in enumerate(self.ops):
            if per_op[i] is None:
                continue
            req, pads, rows = per_op[i]
            step = self.chunk.get(i, rows[1] - rows[0])
            if rows[1] - rows[0] <= step:
                yield i, op, req, rows, kernel(i, op, req, pads, rows)
                continue
            for a in range(rows[0], rows[1], step):      # the first band's fill
                part = (a, min(a + step, rows[1]))
                req, pads = op_rows(self.ops, i, self.plain, self.h, self.geos, part)
                yield i, op, req, part, kernel(i, op, req, pads, part)

    def layout(self, n, need):
        """The rows of ``n``'s buffer as laid out in this band: a held
        tensor's buffer keeps the layout of its largest window (in NCHW the
        channel stride depends on it), the others are their window."""
        return (0, self.cap[n]) if n in self.held else need[n]

    def whole_rows(self, n):
        """Rows of ``n`` are single blocks (NHWC or one channel, batch 1)."""
        return math.prod(self.shapes[n][0][:self.h]) == 1

    def ax(self, n):
        """The H axis of tensor ``n`` (the stage input's may differ)."""
        return self.xh if n == self.x_name else self.h

    def rows_shape(self, n, r):
        """The shape of rows ``r`` of tensor ``n``."""
        return _rows(self.shapes[n][0], self.ax(n), r)

    def nbytes(self, n, r):
        """Bytes of rows ``r`` of tensor ``n``."""
        return math.prod(self.rows_shape(n, r)) * self.shapes[n][1].itemsize
