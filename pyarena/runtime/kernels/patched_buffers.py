"""The workspace of a patched stage: where its band buffers lie, and the
views of them a band's kernels read and write.

Each intermediate tensor's band (sized for its largest band) lives from
the op that makes it to the last op of the stage that reads it, so
buffers whose lifetimes do not overlap share bytes (:func:`first_fit`,
largest first); a tensor that keeps rows from band to band (row reuse)
has its buffer for the whole stage.  A band of the stage input, or a part
of a band buffer, that a kernel reads is copied into a staging buffer
when it is not one contiguous block (a row slice of an NCHW tensor with
several channels); the output band goes straight into its rows of the
stage output when those are contiguous (NHWC, batch 1), else through a
staging buffer.  The rows a band keeps are moved to the start of their
buffer, through a move buffer when the two places overlap or are not
single blocks.
"""
import math

import numpy as np

from .patched_bands import _rows

_ALIGN = 64


def _cut(a, h, r):
    sl = [slice(None)] * a.ndim
    sl[h] = slice(r[0], r[1])
    return a[tuple(sl)]


def _contiguous(shape, h, r):
    """A row slice ``r`` of a C-contiguous array of ``shape`` is one block."""
    return (r[0] == 0 and r[1] == shape[h]) or math.prod(shape[:h]) == 1


def first_fit(slots):
    """Offsets for ``slots`` {key: (bytes, first, last)}: 64-byte aligned,
    no two slots live at one step overlap.  Returns (offsets, total)."""
    placed, off = [], {}
    for key, (size, first, last) in sorted(slots.items(), key=lambda kv: -kv[1][0]):
        busy = sorted((o, o + s) for (o, s, f, la) in placed if f <= last and first <= la)
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, -(-hi // _ALIGN) * _ALIGN)
        placed.append((at, size, first, last))
        off[key] = at
    return off, max((o + s for o, s, _, _ in placed), default=0)


class BandBuffers:
    """The band buffers of ``plan`` (a :class:`~.patched_bands.BandPlan`) in
    one workspace of ``total`` bytes.  ``kernel``: as for
    :meth:`~.patched_bands.BandPlan.band_ops` (the kernels' own scratch is
    laid out here too).  Slot keys: a tensor's name (its band buffer),
    ``("sc", i)`` op ``i``'s scratch, ``("in", i, j)`` / ``("out", i)`` /
    ``("y",)`` staging, ``("move",)`` the move buffer."""

    def __init__(self, plan, kernel):
        self.plan = plan
        self.slots = {}
        for band, (need, per_op) in enumerate(plan.needs):
            self._band_slots(band, need, per_op, kernel)
        self.offsets, self.total = first_fit(self.slots)

    def _band_slots(self, band, need, per_op, kernel):
        """The kernels and workspace slots one band needs."""
        p = self.plan
        last, end, h = p.last, len(p.ops), p.h
        for n, (down, kept) in p.moves[band].items():
            if down and not (down >= kept and p.whole_rows(n)):
                self._slot(("move",), p.nbytes(n, (0, kept)), -1, -1)
        for i, op, req, rows, k in p.band_ops(need, per_op, kernel):
            out = op.outputs[0]
            if k.scratch_bytes:
                self._slot(("sc", i), k.scratch_bytes, i, i)
            for j, r in req.items():
                n = op.inputs[j]
                if r[0] == r[1]:
                    continue
                ax = p.ax(n)
                src = _rows(p.shapes[n][0], ax,
                            (0, p.shapes[n][0][ax]) if n in p.whole else p.layout(n, need))
                rel = r if n in p.whole else (r[0] - need[n][0], r[1] - need[n][0])
                if not _contiguous(src, ax, rel):
                    self._slot(("in", i, j), p.nbytes(n, r), i, i)
            if out == p.y_name:
                if not _contiguous(p.shapes[out][0], h, rows):
                    self._slot(("y",), p.nbytes(out, rows), i, i)
                continue
            if out in p.held:
                self._slot(out, p.nbytes(out, (0, p.cap[out])), -1, end)
            else:
                self._slot(p.root.get(out, out), p.nbytes(out, need[out]), i,
                           last.get(out, i))
            rel = (rows[0] - need[out][0], rows[1] - need[out][0])
            if not _contiguous(_rows(p.shapes[out][0], h, p.layout(out, need)), h, rel):
                self._slot(("out", i), p.nbytes(out, rows), i, i)

    def _slot(self, key, size, first, last):
        old = self.slots.get(key)
        self.slots[key] = (size, first, last) if old is None else (
            max(old[0], size), min(old[1], first), max(old[2], last))

    # the views, in workspace ``sc`` (made once per workspace, input and output)
    def view(self, sc, key, n, r):
        """Rows ``r`` of tensor ``n`` at slot ``key`` of ``sc``."""
        shape, dt = self.plan.shapes[n]
        shape = _rows(shape, self.plan.ax(n), r)
        off = self.offsets[key]
        nb = math.prod(shape) * dt.itemsize
        return sc[off:off + nb].view(dt).reshape(shape)

    def window(self, sc, n, need):
        """The view of ``n``'s window in its band buffer."""
        p = self.plan
        buf = self.view(sc, p.root.get(n, n), n, p.layout(n, need))
        return _cut(buf, p.h, (0, need[n][1] - need[n][0]))

    def moves(self, sc, band, need):
        """The copies that move the kept rows of each held tensor to the
        start of its buffer (through the move buffer when the two places
        overlap or are not single blocks)."""
        p = self.plan
        pre = []
        for n, (down, kept) in p.moves[band].items():
            if not down:
                continue
            buf = self.view(sc, n, n, (0, p.cap[n]))
            src, dst = _cut(buf, p.h, (down, down + kept)), _cut(buf, p.h, (0, kept))
            if down >= kept and p.whole_rows(n):
                pre.append((dst, src))
            else:
                via = self.view(sc, ("move",), n, (0, kept))
                pre += [(via, src), (dst, via)]
        return pre

    def band_inputs(self, sc, xs, i, op, req, need):
        """The input views of op ``i`` in one band (``xs``: the stage op's
        inputs) and the staging copies that make them single blocks."""
        p = self.plan
        pre, ins = [], []
        for j, n in enumerate(op.inputs):
            if not n:
                ins.append(None)
            elif j not in req:
                ins.append(xs[p.consts[n]])
            elif req[j][0] == req[j][1]:    # a band of padding alone
                ins.append(np.empty(_rows(p.shapes[n][0], p.ax(n), req[j]), p.shapes[n][1]))
            else:
                src = _cut(xs[p.whole[n]], p.ax(n), req[j]) if n in p.whole else _cut(
                    self.window(sc, n, need), p.h,
                    (req[j][0] - need[n][0], req[j][1] - need[n][0]))
                if ("in", i, j) in self.offsets and not src.flags.c_contiguous:
                    dst = self.view(sc, ("in", i, j), n, req[j])
                    pre.append((dst, src))
                    src = dst
                ins.append(src)
        return pre, ins

    def band_output(self, sc, y, i, out, rows, need):
        """(the view op ``i`` writes, the copy after it or None)."""
        p = self.plan
        if out == p.y_name:
            whole = _cut(y, p.h, rows)
            if whole.flags.c_contiguous:
                return whole, None
            dst = self.view(sc, ("y",), out, rows)
            return dst, (whole, dst)
        lo = need[out][0]
        part = _cut(self.window(sc, out, need), p.h, (rows[0] - lo, rows[1] - lo))
        if part.flags.c_contiguous:
            return part, None
        dst = self.view(sc, ("out", i), out, rows)
        return dst, (part, dst)
