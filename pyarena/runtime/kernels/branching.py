"""Branches and conditional loops: TFLite ``IF`` and ``WHILE``, ONNX
``If``.  Their subgraphs (pyarena graphs made by the importers,
``importers/tflite_control.py``, ``importers/onnx_control.py``) are run by
pyarena's own kernels, each planned on its own inside the operator's
scratch (:class:`.Body`).

``If`` (op type ``IfElse``): input 0 is the condition, read at run time;
the other inputs are the operands both branches take; the chosen branch
runs and its outputs are copied to the op's.  Both branches are planned
side by side in the scratch (each its own region), their outputs of the
op's static shapes.

``While``: the inputs are the carried values, the outputs their final
values (same shapes).  ``cond`` reads the carried values and gives one
bool; while it is true ``body`` maps the carried values to their next
ones.  The carried values live in staging buffers in the scratch, so a
body output that is one of its inputs (passed through), or two that swap,
are copied safely.

ONNX ``If`` (op type ``If``): input 0 is the condition, the others the
outer-scope names either branch reads (each branch picks its own by
name).  Only one branch runs, so both are planned in the same region (the
larger of the two).  Outputs the branches make with the same shape are
planned outputs of the op; one whose shape differs is a pool tensor, and
the op then runs through ``produce`` (:mod:`pyarena.runtime.dynamic`),
which takes it from the pool in the shape of the branch that ran.
"""
import numpy as np

from .registry import Kernel, register
from .subgraph import Body

__all__ = ["If", "IfElse", "While"]


def _feed(body, values):
    """Copy ``values`` into the body's inputs (those it reads)."""
    for dst, v in zip(body.ins, values):
        if dst is not None:
            np.copyto(dst, v)


class _Branching(Kernel):
    """Bodies named by ``attrs``, one scratch region each, then ``extra``."""

    #: attribute prefixes of the bodies: ``<p>`` graph, ``<p>_inputs``, ``<p>_outputs``
    bodies = ()

    def setup(self):
        a = self.attrs
        self.parts = [Body(a[p], a[f"{p}_inputs"], a[f"{p}_outputs"], self.keep,
                           self.scratch_budget, self.use_native) for p in self.bodies]
        self.scratch = [((b.nbytes,), np.uint8) for b in self.parts] + self.extra()

    def extra(self):
        return []

    def bind_bodies(self, sc):
        for b, region in zip(self.parts, sc):
            b.bind(region, self.stable)

    def release(self):
        if not self.stable:     # scratch allocated per run: let it go
            for b in self.parts:
                b.unbind()


@register
class IfElse(_Branching):
    """``then`` / ``else`` bodies; input 0 the condition."""

    op_types = ("IfElse",)
    family = "control"
    fold = "never"
    tflite = {"IF": ("IfElse", {}, "control")}      # (inlined on a constant condition)
    bodies = ("then", "else")

    def setup(self):
        super().setup()
        for b in self.parts:
            if len(b.names_in) != len(self.ins) - 1 or len(b.names_out) != len(self.outs):
                self.malformed(f"a branch has {len(b.names_in)} inputs and "
                               f"{len(b.names_out)} outputs; the op {len(self.ins) - 1} "
                               f"operands and {len(self.outs)} outputs")

    def run(self, xs, ys, sc):
        self.bind_bodies(sc)
        body = self.parts[0 if bool(np.asarray(xs[0]).reshape(-1)[0]) else 1]
        _feed(body, xs[1:])
        body.run()
        for y, v in zip(ys, body.outs):
            np.copyto(y, v)
        self.release()


@register
class While(_Branching):
    """``cond`` and ``body`` bodies over the carried values."""

    op_types = ("While",)
    family = "control"
    fold = "never"
    tflite = {"WHILE": ("While", {}, "control")}
    bodies = ("cond", "body")

    def extra(self):
        return [(tuple(int(d) for d in t.shape), t.dtype) for t in self.outs]

    def run(self, xs, ys, sc):
        self.bind_bodies(sc)
        cond, body = self.parts
        cur = sc[2:]
        for c, x in zip(cur, xs):
            np.copyto(c, x)
        while True:
            _feed(cond, cur)
            cond.run()
            if not bool(cond.outs[0].reshape(-1)[0]):
                break
            _feed(body, cur)
            body.run()
            for c, v in zip(cur, body.outs):
                np.copyto(c, v)
        for y, c in zip(ys, cur):
            np.copyto(y, c)
        self.release()


@register
class If(Kernel):
    """ONNX ``If``: ``then`` / ``else`` bodies reading outer names, one
    region for both; input 0 the condition."""

    op_types = ("If",)
    body = "if"
    family = "control"
    fold = "never"
    outputs_by_position = True

    def setup(self):
        a, pos = self.attrs, {n: i for i, n in enumerate(self.op.inputs)}
        self.parts, self.feeds = [], []
        for p in ("then", "else"):
            if a[p] is None:        # cannot run with these shapes: a[f"{p}_error"]
                self.parts.append(None)
                self.feeds.append([])
                continue
            body = Body(a[p], a[f"{p}_inputs"], a[f"{p}_outputs"], self.keep,
                        self.scratch_budget, self.use_native)
            if len(body.names_out) != len(self.op.outputs) or \
                    any(n not in pos for n in body.names_in):
                self.malformed(f"the {p} branch has {len(body.names_out)} outputs and "
                               f"reads {body.names_in}; the op has {len(self.op.outputs)} "
                               f"outputs and inputs {self.op.inputs}")
            self.parts.append(body)
            self.feeds.append([pos[n] for n in body.names_in])
        self.scratch = [((max(b.nbytes for b in self.parts if b is not None),), np.uint8)]
        # output position -> index in ys (an output nobody reads is omitted)
        self.where = {}
        for j, name in enumerate(self.op.outputs):
            if name:
                self.where[j] = len(self.where)

    def branch(self, xs, sc):
        """Run the branch the condition picks; returns it (its ``outs``)."""
        which = 0 if bool(np.asarray(xs[0]).reshape(-1)[0]) else 1
        body = self.parts[which]
        if body is None:
            p = ("then", "else")[which]
            self.malformed(f"the condition picks the {p}_branch, which cannot run with "
                           f"these input shapes: {self.attrs[f'{p}_error']}")
        body.bind(sc[0], self.stable)
        _feed(body, [xs[i] for i in self.feeds[which]])
        body.run()
        return body

    def run(self, xs, ys, sc):
        body = self.branch(xs, sc)
        for j, k in self.where.items():
            np.copyto(ys[k], body.outs[j])
        self.release(body)

    def produce(self, xs, ys, sc, pool):
        """Some outputs are pool tensors (None in ``ys``): made in the
        shape of the branch that ran; a branch's own pool tensors come
        from ``pool`` too."""
        for b in self.parts:
            if b is not None:
                b.use_pool(pool)
        body = self.branch(xs, sc)
        out = list(ys)
        for j, k in self.where.items():
            v = body.outs[j]
            if out[k] is None:
                out[k] = pool.empty(v.shape, v.dtype)
            np.copyto(out[k], v)
        self.release(body)
        return out

    def release(self, body):
        if not self.stable:     # scratch allocated per run: let it go
            body.unbind()
