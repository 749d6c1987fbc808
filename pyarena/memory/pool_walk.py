"""The pool block by block: :meth:`Pool.walk`, :meth:`Pool.check` (the C
pool's invariants) and :meth:`Pool.n_free_blocks` (:class:`Walk`, part of
:class:`~pyarena.memory.pool.Pool`), and :class:`Block`, what the walk
sees.  The one C call that calls back (``pa_pool_walk``) copies the blocks
out in C (``_pa_pool_walk_copy`` in pyarena/_native/build.py), so no
Python callback ever runs under the pool lock.
"""
from .._native import ffi, lib
from ..errors import StateError
from .stats import ZONES

__all__ = ["Block", "Walk"]

_STATE_NAMES = {lib.PA_BLOCK_FREE: "free", lib.PA_BLOCK_LIVE: "live",
                lib.PA_BLOCK_CACHED: "cached"}


class Block:
    """One block seen by :meth:`Pool.walk` (``pa_pool_block_t``)."""

    __slots__ = ("address", "size", "requested", "zone", "state")

    def __init__(self, address, size, requested, zone, state):
        self.address = address
        self.size = size
        self.requested = requested
        self.zone = zone
        self.state = state

    def __repr__(self):
        return (f"Block(0x{self.address:x}, size={self.size}, requested="
                f"{self.requested}, zone={self.zone!r}, state={self.state!r})")


class Walk:
    """Mixed into ``Pool``: uses its ``_h`` (the C pool) and
    ``_check_open``."""

    def check(self):
        """Number of broken internal invariants of the C pool (0 = healthy)."""
        self._check_open()
        return int(lib.pa_pool_check(self._h))

    def walk(self):
        """Every block (live, cached, free) as :class:`Block` objects, in
        address order within each chunk."""
        self._check_open()
        cap = 256
        while True:
            buf = ffi.new("pa_pool_block_t[]", cap)
            n = lib._pa_pool_walk_copy(self._h, buf, cap)
            if n == ffi.cast("size_t", -1):
                raise StateError("pool walk failed")
            if n <= cap:
                break
            cap = n + n // 4 + 16
        return [Block(int(ffi.cast("uintptr_t", b.ptr)), int(b.size), int(b.requested),
                      ZONES[b.zone] if 0 <= b.zone < len(ZONES) else str(b.zone),
                      _STATE_NAMES.get(b.state, str(b.state)))
                for b in buf[0:n]]

    def n_free_blocks(self):
        """Blocks held in the deferred caches."""
        return sum(1 for b in self.walk() if b.state == "cached")
