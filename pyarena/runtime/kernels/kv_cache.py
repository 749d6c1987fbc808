"""The write of a decode step's new keys (or values) into a KV cache
reserved once for the whole context (:mod:`pyarena.importers.session_kv`).

``KvCacheAppend(new, position) -> cache`` stands where a decoder's
``Concat(past, new, axis=2)`` made its present: ``new`` is (batch, heads,
new tokens, size), ``position`` an int64 (1,) holding the past length,
and the output is the whole cache (batch, heads, max context, size); with an attribute
``perm``, ``new`` is read through ``new.transpose(perm)`` (the
Transpose that split the heads, absorbed).
Only the new rows, ``cache[:, :, position:position + new tokens]``, are
written: the rows before them are the past, left where earlier steps
wrote them, so a step copies no past.  The session binds the output to
the cache it holds (not to a planned view), which outlives every run."""
import numpy as np

from ...errors import InvalidArgumentError
from .registry import Kernel, register


@register
class KvCacheAppend(Kernel):
    """KvCacheAppend(new, position): cache, written at rows [position,
    position + new tokens) of axis 2 (see the module docstring)."""

    op_types = ("pyarena.KvCacheAppend",)
    onnx_domain = "pyarena"
    family = "movement"
    fold = "never"

    def setup(self):
        new, out = self.shape(0), self.oshape()
        self.perm = self.attrs.get("perm")      # new rows read through a transposed view
        if self.perm is not None:
            if sorted(self.perm) != list(range(len(new))):
                self.malformed(f"perm {list(self.perm)} does not permute {len(new)} axes")
            new = tuple(new[a] for a in self.perm)
        if len(new) != 4 or len(out) != 4 or new[:2] != out[:2] or new[3] != out[3] \
                or new[2] > out[2]:
            self.malformed(f"new rows {list(new)} do not fit the cache {list(out)}")
        self.rows = new[2]
        self.length = out[2]

    def run(self, xs, ys, sc):
        at = int(xs[1][0])
        if at < 0 or at + self.rows > self.length:
            raise InvalidArgumentError(
                f"operator {self.op.name!r} (KvCacheAppend): {self.rows} new rows at "
                f"position {at} pass the cache's {self.length}")
        x = xs[0] if self.perm is None else xs[0].transpose(self.perm)
        np.copyto(ys[0][:, :, at:at + self.rows], x)
