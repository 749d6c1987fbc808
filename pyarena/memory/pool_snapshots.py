"""A pool's statistics: :meth:`Pool.stats` snapshots, CuPy's byte counts,
:meth:`Pool.reset_peak` and the :meth:`Pool.statistics` recorder
(:class:`Snapshots`, part of :class:`~pyarena.memory.pool.Pool`).  The
snapshot and recorder types are plain data in :mod:`.stats`.

Peaks: ``statistics()`` resets the C pool's peaks so a recorder sees the
peaks reached inside its block; the pool's own peaks survive it because
the snapshot taken just before (``_floor``) is folded into every later
``stats()``.  The one Python lock (``_lock``) is held around that
bookkeeping (``_floor`` and the active recorders, ``_recorders``).

fork(): the C core's pthread_atfork handlers leave every C pool unlocked
and consistent in the child; ``_lock`` is made anew in the child by
``_after_fork_in_child``, so the child can use every pool whatever the
parent's other threads were doing.
"""
import contextlib
import dataclasses
import os
import threading
import weakref

from .._native import check, ffi, glue, lib
from .stats import PoolStatistics, PoolStats

__all__ = ["Snapshots", "raw_stats"]

_LIVE_POOLS = weakref.WeakSet()   # for the fork handler below


def _after_fork_in_child():
    # a thread of the parent may have held a pool's _lock at the fork:
    # it does not exist in the child, so the lock would never be released
    for pool in list(_LIVE_POOLS):
        pool._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def raw_stats(h, hcap):
    """The C pool's own :class:`PoolStats` (its peaks since the last reset)."""
    st = ffi.new("pa_pool_stats_t *")
    check(lib.pa_pool_stats(h, st), "pool stats")
    retries, ooms = glue.pool_counters(hcap)
    return PoolStats.from_c(st, retries, ooms)


class Snapshots:
    """Mixed into ``Pool``: uses its ``_h``, ``_hcap``, ``_closed`` and
    ``_check_open``; ``Pool.__init__`` calls :meth:`_init_snapshots`."""

    def _init_snapshots(self):
        self._floor = None         # PoolStats whose peaks survive statistics()
        self._recorders = []       # active PoolStatistics
        self._lock = threading.Lock()   # held around _floor and _recorders
        _LIVE_POOLS.add(self)

    def stats(self):
        """A :class:`PoolStats` snapshot."""
        self._check_open()
        s = raw_stats(self._h, self._hcap)
        f = self._floor
        if f is not None:
            # statistics() resets the C peaks; the pool's own peaks (and
            # the zones') are the max of the C peaks and those before it
            zones = tuple(
                dataclasses.replace(z, peak_requested=max(z.peak_requested, fz.peak_requested),
                                    peak_allocated=max(z.peak_allocated, fz.peak_allocated))
                for z, fz in zip(s.zones, f.zones))
            s = dataclasses.replace(
                s, peak_requested=max(f.peak_requested, s.peak_requested),
                peak_allocated=max(f.peak_allocated, s.peak_allocated),
                peak_reserved=max(f.peak_reserved, s.peak_reserved), zones=zones)
        return s

    def used_bytes(self):
        """Bytes in live blocks (CuPy's name)."""
        return self.stats().allocated

    def total_bytes(self):
        """Bytes reserved from the OS, live and cached (CuPy's name)."""
        return self.stats().reserved

    def free_bytes(self):
        """Reserved bytes not in live blocks (CuPy's name)."""
        return self.stats().total_free

    def reset_peak(self):
        """Set the peaks to the current values (PyTorch's
        reset_peak_memory_stats)."""
        self._check_open()
        with self._lock:
            self._fold_recorders()
            self._floor = None
            check(lib.pa_pool_reset_peak(self._h), "pool reset_peak")

    def _fold_recorders(self):
        if not self._recorders:
            return
        st = self.stats()
        for r in self._recorders:
            r._fold(st)

    @contextlib.contextmanager
    def statistics(self):
        """``with pool.statistics() as st:`` -- counts and peaks of the pool
        over the block (RMM's statistics): ``st.allocations``, ``st.frees``,
        ``st.peak_allocated`` ...  Nests; the pool's own peaks
        (memory_stats) are unaffected."""
        self._check_open()
        rec = PoolStatistics(self)
        with self._lock:
            self._fold_recorders()
            self._floor = self.stats()  # the peaks so far, floors included
            check(lib.pa_pool_reset_peak(self._h), "pool reset_peak")
            rec.before = self.stats()
            rec._peaks = [rec.before.requested, rec.before.allocated,
                          rec.before.reserved]
            self._recorders.append(rec)
        try:
            yield rec
        finally:
            with self._lock:
                if not self._closed:
                    after = raw_stats(self._h, self._hcap)
                    rec._fold(after)
                    rec.after = after
                else:
                    rec.after = rec.before
                self._recorders.remove(rec)
