"""PatchedStage: a run of spatial ops executed one band of output rows at a
time (the stage and its bands are chosen by ``planning/patch.py``).

Setup builds one kernel per op and per distinct band geometry (the first,
the middle and the last band differ in their rows and their padding) with
the registry's ordinary kernels, and lays the band buffers out in the op's
workspace: each intermediate tensor's band (sized for its largest band)
lives from the op that makes it to the last op of the stage that reads it,
so buffers whose lifetimes do not overlap share bytes (first fit, largest
first).  A band of the stage input, or a part of a band buffer, that a
kernel reads is copied into a staging buffer when it is not one
contiguous block (a row slice of an NCHW tensor with several channels);
the output band goes straight into its rows of the stage output when
those are contiguous (NHWC, batch 1), else through a staging buffer.
A steady-state run allocates nothing: the views are made once for the
workspace, input and output it is given.
"""
import math

import numpy as np

from ...graph import Graph, Op, Tensor
from ...planning.patch import SPATIAL, band_needs, op_geometry
from .registry import KERNELS, Kernel, make_kernel, register

_ALIGN = 64


def _rows(shape, h, r):
    s = list(shape)
    s[h] = r[1] - r[0]
    return tuple(s)


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


@register
class PatchedStage(Kernel):
    """The stage's ops run band by band, writing the stage output in place."""

    op_types = ("PatchedStage",)
    inplace = "none"

    def setup(self):
        a = self.attrs
        self.h = h = int(a["h_axis"])
        self.shapes = {n: (tuple(int(d) for d in v["shape"]), np.dtype(v["dtype"]))
                       for n, v in a["stage_tensors"].items()}
        self.x_name, self.y_name = self.op.inputs[0], self.op.outputs[0]
        g = Graph("stage")
        for n, (shape, dt) in self.shapes.items():
            g.tensors[n] = Tensor(n, shape, dt.name)
        self.consts = {t.name: i for i, t in enumerate(self.ins) if i and t is not None}
        for n, i in self.consts.items():
            g.tensors[n] = self.ins[i]
        self.ops = [Op(d["name"], d["type"], list(d["inputs"]), list(d["outputs"]),
                       attrs=dict(d["attrs"])) for d in a["stage_ops"]]
        self.geos = {i: op_geometry(op, g, h) for i, op in enumerate(self.ops)
                     if op.op_type in SPATIAL}
        if any(v is None for v in self.geos.values()):
            self.malformed("a spatial op of the stage cannot be run in bands")
        for i, geo in self.geos.items():
            if geo[0] == "pad":     # pads as attributes, so each band sets its own
                op = self.ops[i]
                value = op.inputs[2] if len(op.inputs) > 2 else ""
                self.ops[i] = Op(op.name, "Pad", [op.inputs[0], "", value], op.outputs,
                                 attrs={"mode": "constant", "pads": geo[3] + geo[4],
                                        "value": float(op.attrs.get("value", 0.0))})
        shapes = {n: s for n, (s, _) in self.shapes.items()}
        self.bands = [tuple(b) for b in a["bands"]]
        self.needs = [band_needs(self.ops, shapes, self.y_name, b, h, self.geos)
                      for b in self.bands]
        self.subs = {}
        self.slots = {}
        self.root = self._in_place()
        for need, per_op in self.needs:
            self._band_slots(need, per_op)
        self.offsets, total = first_fit(self.slots)
        self.scratch = [((total,), np.uint8)] if total else []
        self._runtime_inputs()
        self._key = None

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
            if any(per_op[i] is None for _, per_op in self.needs):
                continue
            if kind not in ("unary", "binary"):
                continue
            out = op.outputs[0]
            for j, n in enumerate(op.inputs[:1 if kind == "unary" else 2]):
                if n in (self.x_name, self.y_name) or n not in self.shapes or \
                        last.get(n) != i or out == self.y_name or \
                        self.shapes[n] != self.shapes[out]:
                    continue
                if all(per_op[i][0].get(j) == need.get(n) for need, per_op in self.needs):
                    root[out] = root.get(n, n)
                    break
        self.last = last
        return root

    def _band_ops(self, need, per_op):
        """``(index, op, rows each input needs, kernel)`` of every op the
        band runs (a band of padding alone skips the ops only it needs)."""
        for i, op in enumerate(self.ops):
            if per_op[i] is not None:
                req, pads = per_op[i]
                yield i, op, req, self._kernel(i, op, req, pads, need[op.outputs[0]])

    def _band_slots(self, need, per_op):
        """The kernels and workspace slots one band needs."""
        last = self.last
        for i, op, req, k in self._band_ops(need, per_op):
            out = op.outputs[0]
            if k.scratch_bytes:
                self._slot(("sc", i), k.scratch_bytes, i, i)
            for j, r in req.items():
                n = op.inputs[j]
                if r[0] == r[1]:
                    continue
                src = self.shapes[n][0] if n == self.x_name else _rows(
                    self.shapes[n][0], self.h, need[n])
                rel = r if n == self.x_name else (r[0] - need[n][0], r[1] - need[n][0])
                if not _contiguous(src, self.h, rel):
                    self._slot(("in", i, j), self._bytes(n, r), i, i)
            if out == self.y_name:
                if not _contiguous(self.shapes[out][0], self.h, need[out]):
                    self._slot(("y",), self._bytes(out, need[out]), i, i)
            else:
                self._slot(self.root.get(out, out), self._bytes(out, need[out]), i,
                           last.get(out, i))

    def _bytes(self, n, r):
        shape, dt = self.shapes[n]
        return math.prod(_rows(shape, self.h, r)) * dt.itemsize

    def _slot(self, key, size, first, last):
        old = self.slots.get(key)
        self.slots[key] = (size, first, last) if old is None else (
            max(old[0], size), min(old[1], first), max(old[2], last))

    def _kernel(self, i, op, req, pads, out_rows):
        """The kernel of op ``i`` for one band geometry (built once)."""
        key = (i, tuple(sorted((j, r[1] - r[0]) for j, r in req.items())),
               out_rows[1] - out_rows[0], pads)
        k = self.subs.get(key)
        if k is not None:
            return k
        attrs = dict(op.attrs)
        if pads is not None and self.geos[i][0] == "pad":
            begin, end = list(self.geos[i][3]), list(self.geos[i][4])
            begin[self.h], end[self.h] = pads
            attrs["pads"] = begin + end
        elif pads is not None:
            geo = self.geos[i]
            attrs["pads"] = [pads[0], geo[4], pads[1], geo[6]]
            attrs["auto_pad"] = "NOTSET"
        sub = Op(f"{self.op.name}/{op.name}", op.op_type, op.inputs, op.outputs, attrs=attrs)
        ins = []
        for j, n in enumerate(op.inputs):
            if not n:
                ins.append(None)
            elif j in req:
                ins.append(Tensor(n, _rows(self.shapes[n][0], self.h, req[j]),
                                  self.shapes[n][1].name))
            else:
                ins.append(self.ins[self.consts[n]])
        out = op.outputs[0]
        outs = [Tensor(out, _rows(self.shapes[out][0], self.h, out_rows),
                       self.shapes[out][1].name)]
        k = make_kernel(sub, ins, outs, self.keep, self.scratch_budget, self.use_native)
        self.subs[key] = k
        return k

    def _runtime_inputs(self):
        """Input 0 and the constants some band kernel reads at run time."""
        used = {0}
        for (i, *_), k in self.subs.items():
            op = self.ops[i]
            for j, n in enumerate(op.inputs):
                if n in self.consts and (k.runtime is None or j in k.runtime):
                    used.add(self.consts[n])
        self.runtime = tuple(sorted(used))

    def _view(self, sc, key, n, r):
        shape, dt = self.shapes[n]
        shape = _rows(shape, self.h, r)
        off = self.offsets[key]
        nb = math.prod(shape) * dt.itemsize
        return sc[off:off + nb].view(dt).reshape(shape)

    def _steps(self, xs, y, sc):
        """Per band: (copies before, kernel, inputs, outputs, scratch, copy after)."""
        for k in self.subs.values():
            k.workers = self.workers
        x = xs[0]
        steps = []
        for band, (need, per_op) in zip(self.bands, self.needs):
            for i, op, req, k in self._band_ops(need, per_op):
                out = op.outputs[0]
                pre, ins = [], []
                for j, n in enumerate(op.inputs):
                    if not n:
                        ins.append(None)
                    elif j not in req:
                        ins.append(xs[self.consts[n]])
                    elif req[j][0] == req[j][1]:    # a band of padding alone
                        ins.append(np.empty(_rows(self.shapes[n][0], self.h, req[j]),
                                            self.shapes[n][1]))
                    else:
                        src = _cut(x, self.h, req[j]) if n == self.x_name else _cut(
                            self._view(sc, self.root.get(n, n), n, need[n]), self.h,
                            (req[j][0] - need[n][0], req[j][1] - need[n][0]))
                        if ("in", i, j) in self.offsets and not src.flags.c_contiguous:
                            dst = self._view(sc, ("in", i, j), n, req[j])
                            pre.append((dst, src))
                            src = dst
                        ins.append(src)
                post = None
                if out == self.y_name:
                    whole = _cut(y, self.h, need[out])
                    dst = whole
                    if not whole.flags.c_contiguous:
                        dst = self._view(sc, ("y",), out, need[out])
                        post = (whole, dst)
                else:
                    dst = self._view(sc, self.root.get(out, out), out, need[out])
                ksc = None
                if k.scratch_bytes:
                    o = self.offsets[("sc", i)]
                    ksc = sc[o:o + k.scratch_bytes]
                steps.append((pre, k, ins, [dst], ksc, post))
        return steps

    def run(self, xs, ys, sc):
        buf = sc[0] if sc else np.empty(0, np.uint8)
        key = (xs[0].__array_interface__["data"][0], ys[0].__array_interface__["data"][0],
               buf.__array_interface__["data"][0])
        if key != self._key:
            self._all = self._steps(xs, ys[0], buf)
            self._key = key
        copyto = np.copyto
        for pre, k, ins, outs, ksc, post in self._all:
            for dst, src in pre:
                copyto(dst, src)
            k(ins, outs, ksc)
            if post is not None:
                copyto(post[0], post[1])
