"""TFLite ``IF`` and ``WHILE``: subgraphs (pyarena graphs made by the
importer, ``importers/tflite_control.py``) run by pyarena's own kernels,
each planned on its own inside the operator's scratch (:class:`.Body`).

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
"""
import numpy as np

from .registry import Kernel, register
from .subgraph import Body

__all__ = ["IfElse", "While"]


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
            b.bind(region)

    def release(self):
        if not self.stable:     # scratch allocated per run: let it go
            for b in self.parts:
                b.unbind()


@register
class IfElse(_Branching):
    """``then`` / ``else`` bodies; input 0 the condition."""

    op_types = ("IfElse",)
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
