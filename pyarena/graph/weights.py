"""The constants a graph computes at load -- folded, dequantized, fused
biases -- and the graph's weights arena that holds them
(:class:`WeightsArena`, part of :class:`~pyarena.graph.graph.Graph`).
Constants live in that one arena, not in malloc'd memory a freed copy
would leave fragmented, and an Executor places its weights in the same
arena, so each is held once (docs/footprint.md).
"""
import numpy as np

from ..memory import Arena
from ..memory.mapped import is_mapped

__all__ = ["WeightsArena", "SMALL_CONSTANT_BYTES"]

#: constants made at load up to this size stay plain NumPy arrays
#: (:meth:`Graph.constant_data`); larger ones go to the weights arena
SMALL_CONSTANT_BYTES = 4096


class WeightsArena:
    """Mixed into ``Graph``: its ``weights`` attribute, the arena, made on
    first use."""

    def keep_constant(self, value, dtype=None):
        """``value`` (converted to ``dtype`` if given) copied into the
        graph's weights arena, as a read-only array: constants made at load
        live in the global pool, not in malloc'd memory that a freed copy
        would leave fragmented.  An array already in that arena is kept as
        it is."""
        v = np.asarray(value)
        dt = v.dtype if dtype is None else np.dtype(dtype)
        if dt.hasobject or v.size == 0:
            return v.astype(dt, copy=False)
        if self.weights is not None and self.weights.owns(v) and v.flags.c_contiguous \
                and v.dtype == dt:
            kept = v.view()
        else:
            kept = self.constant_buffer(v.shape, dt)
            np.copyto(kept, v, casting="unsafe")
        kept.flags.writeable = False
        return kept

    def constant_data(self, value, dtype=None):
        """The data to give a constant tensor made at load: a view of the
        model file or a small value as it is, anything larger in the
        weights arena (:meth:`keep_constant`)."""
        v = np.asarray(value)
        if is_mapped(v) and (dtype is None or v.dtype == np.dtype(dtype)):
            return v
        if v.nbytes <= SMALL_CONSTANT_BYTES or v.dtype.hasobject:
            return v if dtype is None else v.astype(dtype)
        return self.keep_constant(v, dtype)

    def constant_buffer(self, shape, dtype):
        """A writable array in the graph's weights arena, to compute a
        constant straight into (then :meth:`keep_constant` it)."""
        if self.weights is None:
            self.weights = Arena(alignment=64)
        return self.weights.empty(shape, dtype)
