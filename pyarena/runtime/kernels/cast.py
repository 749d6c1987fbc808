"""Type conversions.  Cast and CastLike: a copy into the output's type
(NumPy's unsafe casting, as ONNX's), saturating into a float8 type's
range unless ``saturate`` is 0; BitCast: the bytes read as another type of
the same width."""
import numpy as np

from ...errors import UnsupportedOpError
from . import evaluators as ev
from . import shape_rules as rules
from .registry import Kernel, const, register


@register
class Cast(Kernel):
    """Cast, and CastLike (to the type of its second input, whose values
    are not read)."""

    op_types = ('Cast', 'CastLike')
    family = 'unary'
    inplace = 'none'
    shape_rule = {'Cast': rules.cast, 'CastLike': rules.cast_like}
    evaluate = {'Cast': ev.cast, 'CastLike': ev.cast_like}

    def setup(self):
        self.runtime = (0,)
        # to a float8 type, ``saturate`` (default 1) clamps what is out of its
        # range, infinities too, to its largest value (NumPy's cast: NaN)
        self.bound = None
        src = self.ins[0].dtype
        try:
            hi = ev.saturation(src, self.dtype, self.attrs.get("saturate", 1))
        except UnsupportedOpError as e:
            self.fail(str(e))
        if hi is not None:
            self.bound = (const(-hi, src), const(hi, src))
            self.scratch = [(self.shape(0), src)]

    def run(self, xs, ys, sc):
        if self.bound is not None:
            np.clip(xs[0], *self.bound, out=sc[0])
            np.copyto(ys[0], sc[0], casting="unsafe")
            return
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
