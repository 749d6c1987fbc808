"""Choices a pass made from the shapes of one signature, kept with the graph:
:class:`ShapeDecision`, ``Graph.shape_decisions``.

Some rewrites choose by the tensors' shapes: fusion takes an Add's other
input as a convolution's residual only where it has the output's shape
(``runtime/fusion.py``); the NHWC pass converts a region only where its
boundary Transposes copy few bytes next to what its convolutions write
(``runtime/nhwc.py``).  An :class:`~pyarena.InferenceSession` gives an
imported graph other input shapes without running the passes again
(``importers/retarget.py``), so a choice right for the shapes it was made
with would be kept for shapes it is wrong for -- a residual of batch 1
under an output of batch 3.  Each such choice is therefore made through
:func:`decide`, which records the rule with what it chose; the retarget
evaluates every rule on the new shapes and declines (the signature is
imported in full) where one would choose otherwise.  A retargeted graph
is then the graph a fresh import makes.

A rule reads shapes only through its arguments (one tuple of ints per
tensor named), so that it can be asked again about other shapes.
"""
from dataclasses import dataclass
from numbers import Integral

__all__ = ["ShapeDecision", "decide"]


@dataclass(frozen=True)
class ShapeDecision:
    """``rule(*shapes of tensors) == choice`` was decided by ``what``."""

    #: the pass and what it decided about (messages, tests)
    what: str
    #: the tensors whose shapes the rule reads: the model's names, in the
    #: layout the pass saw (NCHW for the NHWC pass's)
    tensors: tuple
    #: shapes (tuples of ints, one per tensor) -> the choice
    rule: object
    choice: object

    def holds(self, shapes):
        """Whether the rule chooses the same on ``shapes`` (name -> dims);
        False when one of them is unknown or not concrete."""
        args = []
        for name in self.tensors:
            dims = shapes.get(name)
            if dims is None or not all(isinstance(d, Integral) for d in dims):
                return False
            args.append(tuple(int(d) for d in dims))
        return self.rule(*args) == self.choice


def decide(graph, what, tensors, rule):
    """What ``rule`` chooses on ``graph``'s shapes of ``tensors`` now,
    recorded in ``graph.shape_decisions`` (module docstring)."""
    tensors = tuple(tensors)
    choice = rule(*(tuple(int(d) for d in graph.tensors[n].shape) for n in tensors))
    graph.shape_decisions.append(ShapeDecision(what, tensors, rule, choice))
    return choice
