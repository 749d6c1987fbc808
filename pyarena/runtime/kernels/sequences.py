"""Sequence and optional kernels: SequenceEmpty, SequenceConstruct,
SequenceInsert, SequenceErase, SequenceAt, SequenceLength, SplitToSequence,
ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement, and
Identity of a sequence or an optional.

A sequence is a Python list of NumPy arrays held outside the arena
(``Tensor.host == "sequence"``), an optional None or its value
(``"optional"``); the executor keeps them with its pool tensors
(runtime/dynamic.py) and every op touching one is a pool op
(kernels/held.py).  A kernel never changes a list it was given: it makes
a new one (the same list may be a graph input, another op's input or an
output already returned), and an array it puts in one is its own copy.
"""
import numpy as np

from ...errors import InvalidArgumentError
from .held import HeldValues
from .registry import held_form, register

__all__ = ["SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
           "SequenceAt", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
           "HeldIdentity", "Optional", "OptionalHasElement", "OptionalGetElement"]


class _Sequence(HeldValues):
    family = "movement"

    def position(self, p, n, inclusive=False):
        """Position tensor ``p`` in a sequence of ``n`` (negative: from the
        back); InvalidArgumentError naming the op when it is out of range
        (``inclusive``: ``n`` itself allowed, an insertion at the back)."""
        a = np.asarray(p).reshape(-1)
        if a.size != 1 or a.dtype.kind not in "iu":
            raise InvalidArgumentError(f"operator {self.op.name!r} ({self.op.op_type}): the "
                                       f"position must be one integer, not {a.tolist()}")
        i = int(a[0])
        hi = n if inclusive else n - 1
        if not -n <= i <= hi:
            raise InvalidArgumentError(f"operator {self.op.name!r} ({self.op.op_type}): "
                                       f"position {i} is out of range [{-n}, {hi}] of a "
                                       f"sequence of {n}")
        return i + n if i < 0 else i

    def sequence(self, x, k=0):
        if not isinstance(x, list):
            self.malformed(f"input {k} must be a sequence, not {type(x).__name__}")
        return x


@register
class SequenceEmpty(_Sequence):
    """An empty sequence."""

    op_types = ("SequenceEmpty",)

    def compute(self, xs):
        return [[]]


@register
class SequenceConstruct(_Sequence):
    """A sequence of the inputs (copies)."""

    op_types = ("SequenceConstruct",)

    def compute(self, xs):
        return [[np.array(x) for x in xs]]


@register
class SequenceInsert(_Sequence):
    """The sequence with a copy of the tensor inserted at ``position``
    (default: at the back; negative: from the back)."""

    op_types = ("SequenceInsert",)

    def compute(self, xs):
        seq = self.sequence(xs[0])
        n = len(seq)
        at = n if len(xs) < 3 or xs[2] is None else self.position(xs[2], n, inclusive=True)
        return [seq[:at] + [np.array(xs[1])] + seq[at:]]


@register
class SequenceErase(_Sequence):
    """The sequence without the tensor at ``position`` (default: the last)."""

    op_types = ("SequenceErase",)

    def compute(self, xs):
        seq = self.sequence(xs[0])
        if not seq:
            raise InvalidArgumentError(f"operator {self.op.name!r} (SequenceErase): the "
                                       f"sequence is empty")
        at = len(seq) - 1 if len(xs) < 2 or xs[1] is None else self.position(xs[1], len(seq))
        return [seq[:at] + seq[at + 1:]]


@register
class SequenceAt(_Sequence):
    """The tensor at ``position``."""

    op_types = ("SequenceAt",)

    def compute(self, xs):
        seq = self.sequence(xs[0])
        return [seq[self.position(xs[1], len(seq))]]


@register
class SequenceLength(_Sequence):
    """The number of tensors, an int64 scalar."""

    op_types = ("SequenceLength",)

    def compute(self, xs):
        return [np.array(len(self.sequence(xs[0])), np.int64)]


@register
class SplitToSequence(_Sequence):
    """The input split along ``axis`` into a sequence: in pieces of the
    sizes of ``split`` (a scalar: pieces of that size, the last one
    shorter), else in pieces of 1, without the axis when ``keepdims`` is 0."""

    op_types = ("SplitToSequence",)

    def compute(self, xs):
        x = xs[0]
        axis = int(self.attrs.get("axis", 0))
        if not -x.ndim <= axis < x.ndim:
            self.malformed(f"axis {axis} is out of range for rank {x.ndim}")
        axis %= x.ndim
        n = x.shape[axis]
        split = xs[1] if len(xs) > 1 else None
        if split is None:
            parts = np.split(x, n, axis=axis) if n else []
            if not int(self.attrs.get("keepdims", 1)):
                parts = [np.squeeze(p, axis=axis) for p in parts]
            return [[p.copy() for p in parts]]
        s = np.asarray(split)
        if s.dtype.kind not in "iu" or np.any(s < 0) or s.ndim > 1:
            raise InvalidArgumentError(f"operator {self.op.name!r} (SplitToSequence): split "
                                       f"must be non-negative integers, not {s.tolist()}")
        if s.ndim == 0:
            size = int(s)
            if size < 1:
                raise InvalidArgumentError(f"operator {self.op.name!r} (SplitToSequence): "
                                           f"split {size} must be positive")
            cuts = list(range(size, n, size))
        else:
            if int(s.sum()) != n:
                raise InvalidArgumentError(f"operator {self.op.name!r} (SplitToSequence): "
                                           f"split {s.tolist()} does not sum to the axis' "
                                           f"length {n}")
            cuts = np.cumsum(s)[:-1].tolist()
        return [[p.copy() for p in np.split(x, cuts, axis=axis)]]


@register
class ConcatFromSequence(_Sequence):
    """The sequence's tensors joined along ``axis`` (stacked on a new one
    when ``new_axis`` is 1)."""

    op_types = ("ConcatFromSequence",)

    def compute(self, xs):
        seq = self.sequence(xs[0])
        if not seq:
            raise InvalidArgumentError(f"operator {self.op.name!r} (ConcatFromSequence): the "
                                       f"sequence is empty")
        axis = int(self.attrs.get("axis", 0))
        try:
            if int(self.attrs.get("new_axis", 0)):
                return [np.stack(seq, axis=axis)]
            return [np.concatenate(seq, axis=axis)]
        except (ValueError, np.exceptions.AxisError) as exc:
            raise InvalidArgumentError(f"operator {self.op.name!r} (ConcatFromSequence): "
                                       f"{exc}") from None


@held_form
class HeldIdentity(_Sequence):
    """Identity of a sequence or an optional: the same value (lists are
    never changed in place, so it is shared)."""

    op_types = ("Identity",)

    def compute(self, xs):
        return [xs[0]]


@register
class Optional(_Sequence):
    """An optional of the input (a copy of a tensor; a sequence as it is),
    or an empty one when there is no input."""

    op_types = ("Optional",)

    def compute(self, xs):
        x = xs[0] if xs else None
        return [x if x is None or isinstance(x, list) else np.array(x)]


@register
class OptionalHasElement(_Sequence):
    """Whether the optional holds a value (a tensor or a sequence input:
    true; no input: false), a bool scalar."""

    op_types = ("OptionalHasElement",)

    def compute(self, xs):
        return [np.array(bool(xs) and xs[0] is not None)]


@register
class OptionalGetElement(_Sequence):
    """The optional's value (a tensor or a sequence input: itself);
    InvalidArgumentError when it is empty."""

    op_types = ("OptionalGetElement",)

    def compute(self, xs):
        if not xs or xs[0] is None:
            raise InvalidArgumentError(f"operator {self.op.name!r} (OptionalGetElement): "
                                       f"the optional is empty")
        return [xs[0]]


@register
class SequenceMap(_Sequence):
    """The body run once per position of the sequence inputs (the tensor
    inputs given whole each time), each body output collected into a
    sequence.  The importer gives the body as ``run_body`` (a model of its
    own, planned per shape signature: importers/onnx_seqmap.py)."""

    op_types = ("SequenceMap",)
    body = "sequence_map"
    fold = "never"

    def setup(self):
        self.run_body = self.attrs.get("run_body")
        if self.run_body is None:
            self.fail("its body was not imported (run_body missing)")
        self.names = list(self.attrs["body_inputs"])

    def compute(self, xs):
        seqs = [i for i, x in enumerate(xs) if isinstance(x, list)]
        if not seqs:
            self.malformed("input 0 must be a sequence")
        n = len(xs[seqs[0]])
        if any(len(xs[i]) != n for i in seqs):
            raise InvalidArgumentError(f"operator {self.op.name!r} (SequenceMap): its "
                                       f"sequences have lengths "
                                       f"{[len(xs[i]) for i in seqs]}")
        outs = [[] for _ in self.outs]
        for p in range(n):
            feeds = {name: x[p] if isinstance(x, list) else x
                     for name, x in zip(self.names, xs) if x is not None}
            for seq, y in zip(outs, self.run_body(feeds)):
                seq.append(y)
        return outs
