"""Reclamation and limits of a pool: :meth:`Pool.reclaim`,
:meth:`Pool.trim`, :meth:`Pool.free_all_blocks`, the hard limit
(:meth:`Pool.set_limit`, :meth:`Pool.get_limit`, CuPy's names) and the
trimming watermarks (:class:`Limits`, part of
:class:`~pyarena.memory.pool.Pool`).  What the pool gives back to the OS
and when; the C pool does the work (docs/pool.md).
"""
import os

import numpy as np

from .._native import check, ffi, lib
from ..errors import InvalidArgumentError

__all__ = ["Limits"]


class Limits:
    """Mixed into ``Pool``: uses its ``_h`` (the C pool), ``_check_open``
    and ``stats``."""

    def reclaim(self):
        """Flush the deferred caches into their zones (coalescing).  Maps and
        unmaps nothing; call at a step boundary."""
        self._check_open()
        check(lib.pa_pool_reclaim(self._h), "pool reclaim")

    def trim(self, target_reserved=0):
        """Reclaim, then release free chunks until at most ``target_reserved``
        bytes stay reserved.  Returns the bytes released."""
        self._check_open()
        target_reserved = self._size_arg(target_reserved, "target_reserved")
        released = ffi.new("size_t *")
        check(lib.pa_pool_trim(self._h, target_reserved, released), "pool trim")
        return int(released[0])

    def free_all_blocks(self):
        """CuPy's name: release every cached block and every free chunk."""
        self._check_open()
        check(lib.pa_pool_free_all(self._h), "pool free_all_blocks")

    def set_limit(self, size=None, fraction=None):
        """Set the hard limit on reserved bytes (CuPy's signature): ``size``
        in bytes, or ``fraction`` of physical memory; ``None``/0 = no limit.
        A limit below the bytes live blocks need raises InvalidArgumentError
        (the limit is unchanged)."""
        self._check_open()
        if size is not None and fraction is not None:
            raise InvalidArgumentError("give size or fraction, not both")
        if fraction is not None:
            if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
                raise InvalidArgumentError(f"fraction must be in [0, 1], not {fraction!r}")
            phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            size = int(phys * fraction)
        limit = self._size_arg(size or 0, "limit")
        status = lib.pa_pool_set_limit(self._h, limit)
        if status == lib.PA_ERR_INVALID:
            st = self.stats()
            raise InvalidArgumentError(
                f"limit {limit:,} bytes is below what the pool must keep: "
                f"{st.reserved:,} bytes reserved for {st.allocated:,} bytes of live "
                f"blocks (the limit is unchanged)")
        check(status, "pool set_limit")

    def get_limit(self):
        """The hard limit in bytes (0 = none)."""
        return self.stats().limit

    def set_watermarks(self, high, low=None):
        """Trim when reserved bytes exceed ``high``, down to ``low`` (default
        ``high``); ``high=0`` or None turns it off."""
        self._check_open()
        high = self._size_arg(high or 0, "high")
        low = high if low is None else self._size_arg(low, "low")
        if low > high:
            raise InvalidArgumentError(f"low watermark {low} is above high {high}")
        check(lib.pa_pool_set_watermarks(self._h, high, low), "pool set_watermarks")

    @staticmethod
    def _size_arg(v, what):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            raise InvalidArgumentError(f"{what} must be a non-negative int, not {v!r}")
        if v > (1 << 64) - 1:
            raise InvalidArgumentError(f"{what} {v!r} does not fit in a size_t")
        return int(v)
