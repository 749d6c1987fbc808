"""ONNX ``Loop`` and ``Scan``: a body subgraph run once per iteration by
pyarena's own kernels, its memory a plan of its own inside the operator's
scratch (:mod:`.subgraph`).

The importer (``importers/onnx_loop.py``) hands the body over as a
pyarena Graph (``attrs["body"]``) with the names of its inputs (formal
ones, then the outer-scope names it reads, which are also the op's last
inputs) and outputs.  Shapes are static per iteration.  Loop-carried
values go through staging buffers in the scratch (a body may swap two of
them); each scan output is written into its slot of the op's output as
the iteration ends.  A Loop whose scan outputs have a length only known at
run time is run by :mod:`pyarena.runtime.dynamic` through ``run_dynamic``.
"""
import numpy as np

from .registry import Kernel, register
from .subgraph import Body

__all__ = ["Loop", "Scan"]


def _slot(axis, index):
    """The index of slice ``index`` along ``axis`` (a view, 0-d too)."""
    return (slice(None),) * axis + (index, Ellipsis)


class _Control(Kernel):
    """What Loop and Scan share: the body, the staging of carried values,
    outputs by position."""

    outputs_by_position = True
    #: formal inputs of the body before the carried / state values
    lead = 0

    def setup(self):
        a = self.attrs
        self.body = Body(a["body"], a["body_inputs"], a["body_outputs"], self.keep,
                         self.scratch_budget, self.use_native)
        self.n = self.carried_count()
        g = a["body"]
        self.carried = [g.tensors[a["body_outputs"][self.out_at + j]]
                        for j in range(self.n)]
        self.scratch = [((self.body.nbytes,), np.uint8)] + \
            [(tuple(int(d) for d in t.shape), t.dtype) for t in self.carried]
        # output position -> index in ys (an output nobody reads is omitted)
        self.where = {}
        for pos, name in enumerate(self.op.outputs):
            if name:
                self.where[pos] = len(self.where)

    def carried_count(self):
        raise NotImplementedError

    def start(self, xs, sc, first_input):
        """Bind the body in the region, copy the outer-scope inputs and the
        initial carried values in; the carried values' current arrays."""
        body = self.body
        body.bind(sc[0])
        n_formal = len(body.names_in) - (len(xs) - self.outer_at)
        for x, dst in zip(xs[self.outer_at:], body.ins[n_formal:]):
            if dst is not None:
                np.copyto(dst, x)
        cur = []
        for j in range(self.n):
            dst = body.ins[self.lead + j]
            dst = sc[1 + j] if dst is None else dst
            np.copyto(dst, xs[first_input + j])
            cur.append(dst)
        return cur

    def carry(self, cur, outs, sc):
        """The body's carried outputs become the next iteration's inputs."""
        n, at = self.n, self.out_at
        for j in range(n):
            np.copyto(sc[1 + j], outs[at + j])
        for j in range(n):
            if cur[j] is not sc[1 + j]:
                np.copyto(cur[j], sc[1 + j])

    def finish(self, cur, ys):
        for j in range(self.n):
            k = self.where.get(j)
            if k is not None:
                np.copyto(ys[k], cur[j])
        if not self.stable:     # scratch allocated per run: let it go
            self.body.unbind()


@register
class Loop(_Control):
    """``M`` (trip count, optional) and ``cond`` (optional) read at run
    time; the body's inputs (iteration number, condition, carried values)
    and outputs (condition, carried values, scan outputs).  Scan outputs
    are planned with the trip count fixed at import (``attrs["trip"]``)."""

    op_types = ("Loop",)
    lead = 2
    out_at = 1

    def carried_count(self):
        return int(self.attrs["n_carried"])

    @property
    def outer_at(self):
        return 2 + self.n

    def run(self, xs, ys, sc):
        self.iterate(xs, sc, lambda i, outs: self.store(ys, i, outs))
        trip = int(self.attrs.get("trip", -1))
        if trip >= 0 and self.done != trip:
            self.malformed(f"ran {self.done} iterations, {trip} planned")
        self.finish(self.cur, ys)
        self.cur = None

    def iterate(self, xs, sc, each):
        """Run the iterations, calling ``each(i, body outputs)`` after each;
        leaves the count in ``self.done`` and the carried values in ``self.cur``."""
        body = self.body
        m = None if xs[0] is None else int(xs[0].reshape(-1)[0])
        cond = True if len(xs) < 2 or xs[1] is None else bool(xs[1].reshape(-1)[0])
        self.cur = self.start(xs, sc, 2)
        it, cin = body.ins[0], body.ins[1]
        i = 0
        while cond and (m is None or i < m):
            if it is not None:
                it.fill(i)
            if cin is not None:
                cin.fill(cond)
            body.run()
            outs = body.outs
            cond = bool(outs[0].reshape(-1)[0])
            each(i, outs)       # before the carry: an output may alias an input
            self.carry(self.cur, outs, sc)
            i += 1
        self.done = i

    def produce(self, xs, ys, sc, pool):
        """The Loop with scan outputs whose length only the run tells: they
        grow (doubling) in ``pool`` buffers, then go to pool arrays of the
        exact length; ``ys`` holds the planned outputs (None: a pool one)."""
        n, grown = self.n, {}
        shapes = [tuple(int(d) for d in self.attrs["body"].tensors[b].shape)
                  for b in self.attrs["body_outputs"][1 + n:]]

        def each(i, outs):
            for j in range(n, len(outs) - 1):
                k = self.where.get(j)
                if k is None:
                    continue
                if ys[k] is not None:
                    np.copyto(ys[k][i, ...], outs[1 + j])
                    continue
                buf = grown.get(k)
                if buf is None or buf.shape[0] == i:
                    new = pool.empty((max(4, 2 * i),) + shapes[j - n], outs[1 + j].dtype)
                    if buf is not None:
                        np.copyto(new[:i], buf[:i])
                        pool.free(buf)
                    grown[k] = buf = new
                np.copyto(buf[i, ...], outs[1 + j])
        self.iterate(xs, sc, each)
        out = list(ys)
        for j in range(n, len(self.op.outputs)):
            k = self.where.get(j)
            if k is not None and out[k] is None:
                buf = grown.pop(k, None)
                out[k] = pool.empty((self.done,) + shapes[j - n],
                                    self.attrs["body"].tensors[
                                        self.attrs["body_outputs"][1 + j]].dtype)
                if buf is not None:
                    np.copyto(out[k], buf[:self.done])
                    pool.free(buf)
        self.finish(self.cur, out)
        self.cur = None
        return out

    def store(self, ys, i, outs):
        n = self.n
        for j in range(n, len(outs) - 1):
            k = self.where.get(j)
            if k is not None:
                np.copyto(ys[k][i, ...], outs[1 + j])


@register
class Scan(_Control):
    """Opset >= 9: state values carried from one iteration to the next,
    scan inputs sliced along ``scan_input_axes`` (backwards where
    ``scan_input_directions`` says 1), scan outputs stacked along
    ``scan_output_axes`` (in reverse where ``scan_output_directions`` says 1)."""

    op_types = ("Scan",)
    out_at = 0

    def carried_count(self):
        return int(self.attrs["n_state"])

    @property
    def outer_at(self):
        return self.n + len(self.attrs["scan_input_axes"])

    def run(self, xs, ys, sc):
        a, body, n = self.attrs, self.body, self.n
        cur = self.start(xs, sc, 0)
        ins_slots, outs_slots = [], []
        length = None
        for j, (ax, d) in enumerate(zip(a["scan_input_axes"], a["scan_input_directions"])):
            x = xs[n + j]
            ax = ax + x.ndim if ax < 0 else ax
            length = x.shape[ax]
            ins_slots.append((x, ax, d, body.ins[n + j]))
        for j, (ax, d) in enumerate(zip(a["scan_output_axes"], a["scan_output_directions"])):
            k = self.where.get(n + j)
            if k is not None:
                y = ys[k]
                outs_slots.append((y, ax + y.ndim if ax < 0 else ax, d, n + j))
        for t in range(length or 0):
            for x, ax, d, dst in ins_slots:
                if dst is not None:
                    np.copyto(dst, x[_slot(ax, length - 1 - t if d else t)])
            body.run()
            outs = body.outs
            for y, ax, d, j in outs_slots:
                np.copyto(y[_slot(ax, length - 1 - t if d else t)], outs[j])
            self.carry(cur, outs, sc)
        self.finish(cur, ys)
