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

from ...errors import InvalidArgumentError
from .registry import Kernel, register
from .subgraph import Body

__all__ = ["Loop", "Scan"]


def _along(a, axis, backwards):
    """``a`` viewed with ``axis`` first, in reverse when ``backwards``:
    slice t of a scan is then ``view[t, ...]``."""
    v = np.moveaxis(a, int(axis), 0)
    return v[::-1] if backwards else v


def _same(a, b):
    """Whether two arrays are the same memory, element for element."""
    return a.__array_interface__ == b.__array_interface__


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
        initial carried values in; the carried values' current arrays.
        Prepares ``self.carry``, the copies between two iterations."""
        body = self.body
        body.bind(sc[0], self.stable)
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
        self.carry = self.carrier(cur, sc)
        return cur

    def carrier(self, cur, sc):
        """``carry()``: the body's carried outputs become the next
        iteration's inputs -- copied straight in when no carried output
        shares memory with another value's input (none for one the planner
        put in its own input's memory), else through the staging buffers
        (a body may swap two values)."""
        outs = self.body.outs[self.out_at:self.out_at + self.n]
        if any(j != k and np.may_share_memory(o, c)
               for j, o in enumerate(outs) for k, c in enumerate(cur)):
            pairs = [(sc[1 + j], o) for j, o in enumerate(outs)] + \
                [(c, sc[1 + j]) for j, c in enumerate(cur) if c is not sc[1 + j]]
        else:
            pairs = [(c, o) for c, o in zip(cur, outs) if not _same(c, o)]
        copy = np.copyto

        def carry():
            for dst, src in pairs:
                copy(dst, src)
        return carry

    def finish(self, cur, ys):
        for j in range(self.n):
            k = self.where.get(j)
            if k is not None:
                np.copyto(ys[k], cur[j])
        if not self.stable:     # scratch allocated per run: let it go
            self.body.unbind()
            self.carry = None


@register
class Loop(_Control):
    """``M`` (trip count, optional) and ``cond`` (optional) read at run
    time; the body's inputs (iteration number, condition, carried values)
    and outputs (condition, carried values, scan outputs).  Scan outputs
    are planned with the trip count fixed at import (``attrs["trip"]``)."""

    op_types = ("Loop",)
    body = "loop"
    family = "control"
    fold = "never"
    lead = 2
    out_at = 1
    #: iterations a Loop may run (a trip count of 2**62, or a condition
    #: that never turns false, would hang the caller): InvalidArgumentError
    #: beyond it.  A class attribute: raise it for a model that needs more.
    max_iterations = 10_000_000

    def carried_count(self):
        return int(self.attrs["n_carried"])

    @property
    def outer_at(self):
        return 2 + self.n

    def run(self, xs, ys, sc):
        self.iterate(xs, sc, lambda outs: self.store(ys, outs))
        trip = int(self.attrs.get("trip", -1))
        if trip >= 0 and self.done != trip:
            self.malformed(f"ran {self.done} iterations, {trip} planned")
        self.finish(self.cur, ys)
        self.cur = None

    def iterate(self, xs, sc, make_each):
        """Run the iterations, calling ``each(i)`` after each (``each =
        make_each(body outputs)``, once the body is bound); leaves the count
        in ``self.done`` and the carried values in ``self.cur``."""
        body = self.body
        m = None if xs[0] is None else int(xs[0].reshape(-1)[0])
        cond = True if len(xs) < 2 or xs[1] is None else bool(xs[1].reshape(-1)[0])
        cap = self.max_iterations
        if m is not None and m > cap and cond:
            raise InvalidArgumentError(
                f"operator {self.op.name!r} (Loop): trip count {m:,} is over "
                f"Loop.max_iterations ({cap:,}); raise it for a model that needs more")
        self.cur = self.start(xs, sc, 2)
        it, cin, cout = body.ins[0], body.ins[1], body.outs[0]
        each, carry, run = make_each(body.outs), self.carry, body.run
        i = 0
        while cond and (m is None or i < m):
            if it is not None:
                it.fill(i)
            if cin is not None:
                cin.fill(cond)
            run()
            cond = bool(cout.item())
            each(i)         # before the carry: an output may alias an input
            carry()
            i += 1
            if i == cap and cond and (m is None or i < m):
                raise InvalidArgumentError(
                    f"operator {self.op.name!r} (Loop): {cap:,} iterations run and its "
                    f"condition is still true (Loop.max_iterations)")
        self.done = i

    def produce(self, xs, ys, sc, pool):
        """The Loop with scan outputs whose length only the run tells: they
        grow (doubling) in ``pool`` buffers, then go to pool arrays of the
        exact length; ``ys`` holds the planned outputs (None: a pool one)."""
        n, grown = self.n, {}
        self.body.use_pool(pool)
        shapes = [tuple(int(d) for d in self.attrs["body"].tensors[b].shape)
                  for b in self.attrs["body_outputs"][1 + n:]]

        def each(i):
            outs = self.body.outs
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
        self.iterate(xs, sc, lambda outs: each)
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

    def store(self, ys, outs):
        """``each(i)`` writing the scan outputs into their planned slots."""
        pairs = [(ys[k], outs[1 + j]) for j in range(self.n, len(outs) - 1)
                 for k in [self.where.get(j)] if k is not None]
        copy = np.copyto

        def each(i):
            for y, v in pairs:
                copy(y[i, ...], v)
        return each


@register
class Scan(_Control):
    """Opset >= 9: state values carried from one iteration to the next,
    scan inputs sliced along ``scan_input_axes`` (backwards where
    ``scan_input_directions`` says 1), scan outputs stacked along
    ``scan_output_axes`` (in reverse where ``scan_output_directions`` says 1).
    Opset 8 (``batch``): the same once per entry of the batch axis."""

    op_types = ("Scan",)
    body = "scan"
    family = "control"
    fold = "never"
    out_at = 0

    def carried_count(self):
        return int(self.attrs["n_state"])

    @property
    def outer_at(self):
        return self.n + len(self.attrs["scan_input_axes"])

    def run(self, xs, ys, sc):
        if "batch" not in self.attrs:
            self.scan(xs, ys, sc)
            return
        # opset 8: input 0 is sequence_lens (omitted), then the states and
        # scan inputs with a batch axis first: one scan per batch entry
        n_in = self.outer_at + 1
        for b in range(int(self.attrs["batch"])):
            self.scan([x[b] for x in xs[1:n_in]] + list(xs[n_in:]), [y[b] for y in ys], sc)

    def scan(self, xs, ys, sc):
        a, body, n = self.attrs, self.body, self.n
        cur = self.start(xs, sc, 0)
        ins, outs, length = [], [], 0
        for j, (ax, d) in enumerate(zip(a["scan_input_axes"], a["scan_input_directions"])):
            x = _along(xs[n + j], ax, d)
            length = x.shape[0]
            if body.ins[n + j] is not None:
                ins.append((body.ins[n + j], x))
        for j, (ax, d) in enumerate(zip(a["scan_output_axes"], a["scan_output_directions"])):
            k = self.where.get(n + j)
            if k is not None:
                outs.append((_along(ys[k], ax, d), body.outs[n + j]))
        copy, run, carry = np.copyto, body.run, self.carry
        for t in range(length):
            for dst, x in ins:
                copy(dst, x[t, ...])
            run()
            for y, v in outs:
                copy(y[t, ...], v)
            carry()
        self.finish(cur, ys)

    def produce(self, xs, ys, sc, pool):
        """The Scan whose body holds pool tensors: run with ``pool``; its
        own outputs are planned."""
        self.body.use_pool(pool)
        self.run(xs, ys, sc)
        return ys
