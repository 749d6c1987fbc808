"""Pool tensors: the part of a planned graph whose sizes depend on data.

A tensor whose shape is known only at run time (``Tensor.dynamic``: the
output of NonZero, of a TopK whose K is fed at run time, a Loop's scan
outputs when the loop stops on data, and whatever is computed from them
with a size that follows) is not planned: the plan gives it 0 bytes, and
the executor takes it from its :class:`~pyarena.Pool` when it is produced
and frees it after its last reader.  Every other tensor stays planned.

An operator that reads or writes a pool tensor is a
:class:`~pyarena.runtime.kernels.pool_op.PoolOp` (there, since a Loop,
Scan or If body runs them too): its kernel is built at run time per input
shape.  ``PoolStats`` counts the pool bytes of one run, ``_Counted`` is the
pool as the steps see it, and ``PoolTensors`` is what an executor keeps
of them: the pool, its counts and the run's pool tensors.
"""
from ..errors import StateError
from .kernels.pool_op import PoolOp, pool_frees

__all__ = ["PoolOp", "PoolStats", "PoolTensors", "pool_frees"]


class PoolStats:
    """Pool bytes of the last run: ``bytes`` held now, ``peak``,
    ``allocations``."""

    def __init__(self):
        self.bytes = self.peak = self.allocations = 0

    def reset(self):
        self.bytes = self.peak = self.allocations = 0


class _Counted:
    """The pool as kernels see it (``empty``/``free``), counting bytes."""

    def __init__(self, pool, stats):
        self.pool, self.stats = pool, stats

    def empty(self, shape, dtype):
        a = self.pool.empty(tuple(int(d) for d in shape), dtype)
        s = self.stats
        s.bytes += a.nbytes
        s.allocations += 1
        s.peak = max(s.peak, s.bytes)
        return a

    def free(self, a):
        self.stats.bytes -= a.nbytes
        try:
            self.pool.free(a)
        except StateError:  # still seen elsewhere: back when the last view goes
            pass


class PoolTensors:
    """An executor's pool tensors: ``stats`` (:class:`PoolStats` of the
    last run), ``live`` (that run's pool tensors, by name) and
    :meth:`pool`, the counted Pool serving them (made on first use)."""

    def __init__(self):
        self.stats = PoolStats()
        self.live = {}
        self._pool = None

    def pool(self):
        """The Pool that serves pool tensors, counted in ``stats``."""
        if self._pool is None:
            from ..memory import Pool
            self._pool = _Counted(Pool(), self.stats)
        return self._pool

    def clear(self):
        """Before a run: the last run's pool tensors and counts go."""
        if self.live or self.stats.bytes:
            self.live.clear()
            self.stats.reset()
