"""The kernel base of the operators that read or write values held outside
the arena (``Tensor.host``: strings, sequences, optionals): they are pool
ops (runtime/dynamic.py), built at run time.

``compute(xs)`` gives every output's value, by position in ``op.outputs``;
``produce`` hands the held values over as they are (a new object array, a
new list -- never one a kernel changes afterwards) and copies the numeric
ones into their planned views, or into pool arrays when their size
follows the data (``ys`` holds None there).  ``run`` is ``produce`` with
every numeric output planned.  An array put into a sequence is a copy of
its own: a planned view is overwritten by the next step that reuses its
bytes.
"""
import numpy as np

from .registry import Kernel

__all__ = ["HeldValues"]


class HeldValues(Kernel):
    """See the module docstring."""

    family = "other"
    fold = "never"       # a folded value would be a constant held outside the arena

    def run(self, xs, ys, sc):
        self.produce(xs, ys, sc, None)

    def produce(self, xs, ys, sc, pool):
        values = self.compute(xs)
        out = []
        for name, v in zip(self.op.outputs, values):
            if not name:
                continue
            k = len(out)
            t = self.outs[k]
            if t.host:
                out.append(v)
                continue
            y = ys[k]
            if y is None:
                y = pool.empty(v.shape, t.dtype)
            elif y.shape != v.shape:
                self.malformed(f"the data makes output {name!r} of shape {list(v.shape)}, "
                               f"the model declares {list(y.shape)}")
            np.copyto(y, v, casting="unsafe")
            out.append(y)
        return out

    def compute(self, xs):
        raise NotImplementedError
