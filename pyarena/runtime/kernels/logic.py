"""Comparison and logic kernels: Equal, Less, Greater, LessOrEqual,
GreaterOrEqual, And, Or, Xor, Not, IsNaN, IsInf, Where, and Mod; the
bitwise ops on integers: BitwiseAnd / Or / Xor / Not and BitShift.

Each is one or two ufunc passes with ``out=`` into the planned output
(bool for the comparisons and tests), so none allocates at run time and
none needs scratch.  TFLite's comparisons, LOGICAL_*, SELECT_V2 and
FLOOR_MOD map onto them (no options to convert).  The binary ones
broadcast like NumPy (= ONNX multidirectional broadcasting); their
in-place kind is "binary" (the planner merges only same-shaped,
same-dtype inputs, so a comparison of floats never lands in its input).  Where writes its output in two
masked copies, the second reading ``x`` after ``y`` was copied: it may
not share memory with an input ("none").
"""
import numpy as np

from . import evaluators as ev
from . import shape_rules as rules
from .registry import Kernel, const, register

_BINARY = {"Equal": np.equal, "Less": np.less, "Greater": np.greater,
           "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal,
           "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


@register
class Compare(Kernel):
    """The comparisons and the logical binary ops: one ufunc into a bool
    output."""

    op_types = tuple(_BINARY)
    family = "logic"
    inplace = "binary"
    shape_rule = {**{t: rules.compare for t in _BINARY if t not in ("And", "Or", "Xor")},
                  "And": rules.bcast, "Or": rules.bcast, "Xor": rules.bcast}
    evaluate = {t: ev.logical(f, 2) for t, f in _BINARY.items()}
    tflite = {"EQUAL": ("Equal", {}), "LESS": ("Less", {}), "LESS_EQUAL": ("LessOrEqual", {}),
              "GREATER": ("Greater", {}), "GREATER_EQUAL": ("GreaterOrEqual", {}),
              "LOGICAL_AND": ("And", {}), "LOGICAL_OR": ("Or", {})}

    def setup(self):
        self.f = _BINARY[self.op.op_type]

    def run(self, xs, ys, sc):
        self.f(xs[0], xs[1], out=ys[0])


@register
class Not(Kernel):
    op_types = ("Not",)
    family = "logic"
    inplace = "unary"
    shape_rule = rules.same
    evaluate = ev.logical(np.logical_not, 1)
    tflite = {"LOGICAL_NOT": ("Not", {})}

    def run(self, xs, ys, sc):
        np.logical_not(xs[0], out=ys[0])


@register
class IsNaN(Kernel):
    op_types = ("IsNaN",)
    family = "logic"
    inplace = "unary"
    shape_rule = rules.same_bool

    def run(self, xs, ys, sc):
        np.isnan(xs[0], out=ys[0])


@register
class IsInf(Kernel):
    """``detect_positive`` / ``detect_negative`` (both 1 by default): a
    comparison with +inf or -inf, or ``isinf`` for both."""

    op_types = ("IsInf",)
    family = "logic"
    inplace = "unary"
    shape_rule = rules.same_bool

    def setup(self):
        pos = int(self.attrs.get("detect_positive", 1))
        neg = int(self.attrs.get("detect_negative", 1))
        dt = np.dtype(self.ins[0].dtype)
        self.which = None if pos and neg else \
            const(np.inf, dt) if pos else const(-np.inf, dt) if neg else False

    def run(self, xs, ys, sc):
        if self.which is None:
            np.isinf(xs[0], out=ys[0])
        elif self.which is False:
            ys[0].fill(False)
        else:
            np.equal(xs[0], self.which, out=ys[0])


@register
class Where(Kernel):
    """y = x where cond else other, broadcast: ``other`` copied in, then
    ``x`` copied over it where ``cond`` holds."""

    op_types = ("Where",)
    family = "logic"
    inplace = "none"
    shape_rule = rules.where
    evaluate = ev.where
    fold = "expanding"
    tflite = {"SELECT_V2": ("Where", {})}

    def run(self, xs, ys, sc):
        c, a, b = xs
        np.copyto(ys[0], b)
        np.copyto(ys[0], a, where=c)


@register
class Mod(Kernel):
    """``fmod`` 0: the sign of the divisor (``numpy.mod``, integers only in
    ONNX); 1: the sign of the dividend (``numpy.fmod``, C's fmod)."""

    op_types = ("Mod",)
    family = "logic"
    inplace = "binary"
    shape_rule = rules.bcast
    tflite = {"FLOOR_MOD": ("Mod", {"fmod": 0})}

    def setup(self):
        self.f = np.fmod if int(self.attrs.get("fmod", 0)) else np.mod

    def run(self, xs, ys, sc):
        with np.errstate(divide="ignore", invalid="ignore"):
            self.f(xs[0], xs[1], out=ys[0])


_BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
            "BitwiseXor": np.bitwise_xor}


@register
class Bitwise(Kernel):
    """BitwiseAnd / Or / Xor of broadcast integer operands: one ufunc."""

    op_types = tuple(_BITWISE)
    family = "logic"
    inplace = "binary"
    shape_rule = rules.bcast
    evaluate = {t: ev.logical(f, 2) for t, f in _BITWISE.items()}

    def setup(self):
        self.f = _BITWISE[self.op.op_type]

    def run(self, xs, ys, sc):
        self.f(xs[0], xs[1], out=ys[0])


@register
class BitwiseNot(Kernel):
    op_types = ("BitwiseNot",)
    family = "logic"
    inplace = "unary"
    shape_rule = rules.same
    evaluate = ev.logical(np.invert, 1)

    def run(self, xs, ys, sc):
        np.invert(xs[0], out=ys[0])


@register
class BitShift(Kernel):
    """x << s or x >> s (``direction`` LEFT / RIGHT) in one ufunc.  ONNX
    (opset 28) reads the amount as unsigned: a shift by the width or more
    -- a negative one too -- gives 0, or the sign (0 / -1) for a right
    shift of a signed integer.  NumPy's shifts define exactly that (they
    compare the amount, cast to size_t, with the width) instead of C's
    undefined behaviour."""

    op_types = ("BitShift",)
    family = "logic"
    inplace = "binary"
    shape_rule = rules.bcast
    evaluate = ev.bit_shift

    def setup(self):
        dt = np.dtype(self.ins[0].dtype)
        if dt.kind not in "iu" or np.dtype(self.ins[1].dtype) != dt:
            self.fail(f"shifts integers by an amount of the same type, not "
                      f"{dt.name} by {np.dtype(self.ins[1].dtype).name}")
        direction = self.attrs.get("direction", "")
        direction = direction.decode() if isinstance(direction, bytes) else str(direction)
        if direction not in ("LEFT", "RIGHT"):
            self.fail(f"direction must be LEFT or RIGHT, not {direction!r}")
        self.f = np.left_shift if direction == "LEFT" else np.right_shift

    def run(self, xs, ys, sc):
        self.f(xs[0], xs[1], out=ys[0])
