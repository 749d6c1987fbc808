"""Type conversions: Cast, CastLike (the second input's type, its values
unread) and BitCast (the bytes read as another type of the same width).
Each copies into the planned output (``np.copyto``, unsafe casting)."""
import numpy as np

from . import evaluators as ev
from . import shape_rules as rules
from .registry import Kernel, register


@register
class Cast(Kernel):
    op_types = ('Cast',)
    family = 'unary'
    inplace = 'none'
    shape_rule = rules.cast
    evaluate = ev.cast

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0], casting="unsafe")


@register
class BitCast(Kernel):
    """The input's bytes read as the type ``to`` (opset 26): the same width
    only, so a copy of a view."""

    op_types = ('BitCast',)
    family = 'unary'
    inplace = 'none'
    shape_rule = rules.cast
    evaluate = ev.bit_cast

    def setup(self):
        src, dst = np.dtype(self.ins[0].dtype), self.dtype
        if src.itemsize != dst.itemsize:
            self.fail(f"reads {src.name} as {dst.name}: BitCast needs types of the same "
                      f"width")

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0].view(ys[0].dtype))


@register
class CastLike(Kernel):
    """Cast to the element type of the second input (only its type is
    read, never its values)."""

    op_types = ('CastLike',)
    family = 'unary'
    inplace = 'none'
    shape_rule = rules.cast_like
    evaluate = ev.cast_like

    def setup(self):
        self.runtime = (0,)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0], casting="unsafe")
