"""``Loop`` over sequences or optionals, and ``If`` whose branches make
or read them: the body run once per iteration, or the branch taken, as a
model of its own (importers/onnx_held_bodies.py gives them as
``attrs["run_body"]``, ``attrs["then_run"]`` / ``["else_run"]``), their
sequences held outside the arena.  The ops' held forms
(registry.HELD_FORMS): a Loop or an If of tensors only is
``control.Loop`` / ``branching.If``, its bodies planned in the op's scratch.
"""
import numpy as np

from ...errors import InvalidArgumentError
from .held import HeldValues
from .registry import held_form

__all__ = ["HeldLoop", "HeldIf"]


@held_form
class HeldLoop(HeldValues):
    """See the module docstring: ``M`` and ``cond`` read at run time; each
    iteration's carried values fed to the next; each scan output's values
    stacked on a new first axis."""

    op_types = ("Loop",)
    family = "control"
    outputs_by_position = True
    #: iterations a Loop may run (as control.Loop's)
    max_iterations = 10_000_000

    def setup(self):
        self.run_body = self.attrs.get("run_body")
        if self.run_body is None:
            self.fail("a Loop over sequences or optionals needs its body imported as a model "
                      "of its own (importers/onnx_held_bodies.py)")
        self.names = list(self.attrs["body_inputs"])
        self.n = int(self.attrs["n_carried"])

    def compute(self, xs):
        name = f"operator {self.op.name!r} (Loop)"
        m = None if xs[0] is None else int(np.asarray(xs[0]).reshape(-1)[0])
        cond = True if len(xs) < 2 or xs[1] is None else bool(np.asarray(xs[1]).reshape(-1)[0])
        vals, outer = list(xs[2:2 + self.n]), list(xs[2 + self.n:])
        scans, i = None, 0
        while cond and (m is None or i < m):
            if i == self.max_iterations:
                raise InvalidArgumentError(f"{name}: {i:,} iterations run and it is not done "
                                           f"(Loop.max_iterations)")
            feeds = {k: v for k, v in zip(self.names, [np.array(i, np.int64), np.array(cond)]
                                          + vals + outer) if v is not None}
            outs = self.run_body(feeds)
            cond = bool(np.asarray(outs[0]).reshape(-1)[0])
            vals = list(outs[1:1 + self.n])
            if scans is None:
                scans = [[] for _ in outs[1 + self.n:]]
            for s, v in zip(scans, outs[1 + self.n:]):
                s.append(v)
            i += 1
        n_scan = len(self.op.outputs) - self.n
        if scans is None:       # no iteration: empty scan outputs
            scans = [[] for _ in range(n_scan)]
        stacked = []
        for k, s in enumerate(scans):
            try:
                stacked.append(np.stack(s) if s else
                               np.empty((0,), self._scan_dtype(k)))
            except ValueError as exc:
                raise InvalidArgumentError(f"{name}: scan output {k} changes shape between "
                                           f"iterations ({exc})") from None
        return vals + stacked

    def _scan_dtype(self, k):
        outs = [n for n in self.op.outputs]
        t = self.outs[sum(1 for n in outs[:self.n + k] if n)] \
            if self.op.outputs[self.n + k] else None
        return np.float32 if t is None or t.host else np.dtype(t.dtype)


@held_form
class HeldIf(HeldValues):
    """See the module docstring: the branch the condition picks, fed the
    outer values it reads."""

    op_types = ("If",)
    family = "control"

    def setup(self):
        a = self.attrs
        if a.get("then_run") is None or a.get("else_run") is None:
            self.fail("an If over sequences or optionals needs its branches imported as "
                      "models of their own (importers/onnx_held_bodies.py)")
        self.outer = list(a["outer"])

    def compute(self, xs):
        c = np.asarray(xs[0])
        if c.size != 1:
            raise InvalidArgumentError(f"operator {self.op.name!r} (If): the condition has "
                                       f"{c.size} values, not one")
        which = "then" if bool(c.reshape(-1)[0]) else "else"
        given = dict(zip(self.outer, xs[1:]))
        feeds = {n: given[n] for n in self.attrs[f"{which}_inputs"] if given.get(n) is not None}
        return list(self.attrs[f"{which}_run"](feeds))
