"""``Pool``: NumPy arrays from the C work pool, and NumPy's own allocator.

Lifetime rules (the reason for most of this file and of
pyarena/_native/glue_handle.c, the arena's and the pool's one scheme):

* The C pool is owned by a handle capsule that destroys it when the last
  reference is gone.  The ``Pool`` object holds one reference, every
  block holds one (the block's owner capsule is the array's ``base``), and
  every NumPy allocator made by :func:`numpy_allocator` holds one.  So an
  array keeps its block, a block keeps the pool, and dropping or closing
  the ``Pool`` before its arrays is fine.
* Deferred reclamation: a block goes back to the pool when its array and
  every view of it are gone (NumPy points every view at the array that owns
  the block, and the array holds the owner capsule).
* ``pool.free(arr)`` returns the block early.  It is safe because it
  refuses (``StateError``) while anything else still references the array
  -- a view, a memoryview, a container, another name -- which the
  array's reference count tells (every view's base *is* that array).  Then
  the array itself is emptied in place (``ndarray.__setstate__`` to shape
  ``(0,)``): it drops the block, and whoever still holds the name holds a
  harmless empty array, never a dangling pointer.  A second ``free`` of
  it raises ``DoubleFreeError``.  There is no ``force``: freeing memory a
  live view can still read would be a use-after-free.
* Destructors are C capsule destructors: they never raise and do nothing
  while the interpreter finalizes.

Thread safety: the C pool is thread-safe (one lock); ``empty``, ``free``
and NumPy's allocator run with the GIL held, the other calls release it.
The one C call that calls back (``pa_pool_walk``) copies blocks out in C
(``_pa_pool_walk_copy`` in pyarena/_native/build.py), so no Python
callback ever runs under the pool lock.

fork(): the C core's pthread_atfork handlers leave every C pool unlocked
and consistent in the child; the one Python lock (``_lock``, held around
the peak bookkeeping of ``statistics``/``reset_peak``) is made anew in the
child by ``_after_fork_in_child``, so the child can use every pool
whatever the parent's other threads were doing.
"""
import contextlib
import dataclasses
import functools
import os
import threading
import weakref

import numpy as np

from .._format import human_bytes
from .._native import check, ffi, glue, lib
from ..errors import DoubleFreeError, ForeignPointerError, InvalidArgumentError, StateError
from . import dtypes
from .closable import Closable
from .policy import Policy
from .refcount import BASE_ONE_HOLDER, ONE_HOLDER, base_references, references
from .stats import ZONES, PoolStatistics, PoolStats, out_of_memory

__all__ = ["Pool", "Block"]

_glue_owner = glue.owner
_ndarray = np.ndarray

_LIVE_POOLS = weakref.WeakSet()   # for the fork handler below


def _after_fork_in_child():
    # a thread of the parent may have held a pool's _lock at the fork:
    # it does not exist in the child, so the lock would never be released
    for pool in list(_LIVE_POOLS):
        pool._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

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


def _raw_stats(h, hcap):
    st = ffi.new("pa_pool_stats_t *")
    check(lib.pa_pool_stats(h, st), "pool stats")
    retries, ooms = glue.pool_counters(hcap)
    return PoolStats.from_c(st, retries, ooms)


def _alloc_failed(h, hcap, nbytes, status, align):
    """Called by the native ``empty`` when the pool refused a block (after
    the one retry): OVERFLOW is a valid size no pool could ever serve."""
    if status in (lib.PA_ERR_NOMEM, lib.PA_ERR_OVERFLOW):
        raise out_of_memory(nbytes, _raw_stats(h, hcap))
    check(status, f"pool allocation of {nbytes:,} bytes")
    raise StateError("pool allocation failed without a status")


class Pool(Closable):
    """A dynamic work pool handing out NumPy arrays.

    ``Pool(policy=Policy(...))``, or ``Pool(limit=..., mode=...)`` as a
    shortcut for the same policy fields.  See :class:`~pyarena.Policy`.
    """

    _kind = "pool"

    def __init__(self, policy=None, **fields):
        if policy is None:
            policy = Policy(**fields)
        elif fields:
            policy = policy.replace(**fields)
        elif not isinstance(policy, Policy):
            raise TypeError(f"policy must be a pyarena.Policy, not {policy!r}")
        cfg = ffi.new("pa_pool_config_t *")
        lib.pa_pool_config_default(cfg)
        policy.fill_config(cfg)
        status = ffi.new("pa_status_t *")
        h = lib.pa_pool_create(cfg, status)
        if h == ffi.NULL:
            if status[0] == lib.PA_ERR_NOMEM:
                need = policy.chunk_size or policy.limit or (1 << 20)
                raise out_of_memory(int(need), limit=policy.limit, what="pool creation")
            check(status[0], f"pool creation with {policy}")
        try:
            self._hcap = glue.handle(glue.POOL, int(ffi.cast("uintptr_t", h)))
        except BaseException:
            lib.pa_pool_destroy(h)
            raise
        self._h = h
        self.policy = policy
        self.alignment = int(cfg.alignment)
        self._freed = {}           # id(array) -> weakref, for DoubleFreeError
        self._floor = None         # PoolStats whose peaks survive statistics()
        self._recorders = []       # active PoolStatistics
        self._lock = threading.Lock()
        _LIVE_POOLS.add(self)
        # The native empty() / zeros(): one C call each, holding the handle
        # (so a kept bound method keeps the C pool, like an array does).
        failed = functools.partial(_alloc_failed, h, self._hcap)
        self._empty, self._zeros = (
            glue.empty_function(self._hcap, self.alignment, None, dtypes.CACHE,
                                dtypes.resolve_dtype, failed, zero) for zero in (False, True))
        self.empty, self.zeros = self._empty, self._zeros

    # -- allocation -----------------------------------------------------------
    def empty(self, shape, dtype=np.float64, align=None):
        """An uninitialised C-contiguous array over a pool block, aligned to
        the pool's granularity (or to ``align``, a larger power of two).
        The block returns to the pool when the array and all its views are
        gone, or at :meth:`free`.  (An instance attribute replaces this
        method with the native call of the same signature.)"""
        self._check_open()
        return self._empty(shape, dtype, align)

    def zeros(self, shape, dtype=np.float64, align=None):
        """Like :meth:`empty`, filled with zeros."""
        self._check_open()
        return self._zeros(shape, dtype, align)

    def full(self, shape, fill_value, dtype=None):
        """Like :meth:`empty`, filled with ``fill_value``."""
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        a = self.empty(shape, dtype)
        a.fill(fill_value)
        return a

    def empty_like(self, a, dtype=None):
        """An uninitialised pool array with ``a``'s shape (and dtype)."""
        a = np.asarray(a)
        return self.empty(a.shape, a.dtype if dtype is None else dtype)

    def asarray(self, obj, dtype=None):
        """A copy of ``obj`` in the pool."""
        src = np.asarray(obj, dtype=dtype)
        out = self.empty(src.shape, src.dtype)
        np.copyto(out, src)
        return out

    # -- early free ---------------------------------------------------------------
    def free(self, arr):
        """Give ``arr``'s block back now.

        ``arr`` must be an array this pool handed out (by :meth:`empty` and
        friends, or by NumPy under :func:`numpy_allocator`), held by no other
        name, view, memoryview or container -- otherwise ``StateError`` and
        nothing changes.  Afterwards ``arr`` is an empty array of shape
        ``(0,)``; freeing it again raises ``DoubleFreeError``.  A foreign
        array raises ``ForeignPointerError``; a closed pool ``StateError``.
        """
        self._check_open()
        if not isinstance(arr, _ndarray):
            raise TypeError(f"free() takes a numpy array, not {type(arr).__name__}")
        ref = self._freed.get(id(arr))
        if ref is not None and ref() is arr:
            raise DoubleFreeError("array was already freed into this pool")
        info = _glue_owner(arr)
        if info is None:
            base = arr.base
            if isinstance(base, _ndarray) and _glue_owner(base) is not None:
                raise StateError(
                    f"cannot free a view (shape {arr.shape}) of a pool array: free "
                    "the array the pool handed out, after dropping its views")
            raise ForeignPointerError(
                f"array of shape {arr.shape} and dtype {arr.dtype} was not "
                "allocated by a pyarena pool")
        cap, kind = info
        if cap is not self._hcap:
            raise ForeignPointerError(
                f"array of shape {arr.shape} was allocated by another pool")
        del info, cap
        extra = references(arr) - ONE_HOLDER
        if kind == 1 and extra <= 0 and base_references(arr) > BASE_ONE_HOLDER:
            extra = 1  # someone kept arr.base, the block's owner capsule
        if extra > 0:
            raise StateError(
                f"cannot free array of shape {arr.shape}: {extra} other reference(s) "
                "(views, memoryviews, containers or names) still see its block; "
                "delete them first, or just drop the array (its block returns to "
                "the pool when the last reference is gone)")
        try:
            state = (1, (0,), arr.dtype, False, b"")
            arr.__setstate__(state)  # drops the block (owner capsule / NumPy data)
        except Exception:
            arr.__setstate__((1, (0,), np.dtype(np.uint8), False, b""))
        self._freed[id(arr)] = weakref.ref(arr, self._forget(id(arr)))

    def _forget(self, key):
        freed = self._freed

        def cb(_ref, freed=freed, key=key):
            r = freed.get(key)
            if r is _ref:
                del freed[key]
        return cb

    def owns(self, arr):
        """True if ``arr`` (or the array it is a view of) came from this pool."""
        if self._closed or not isinstance(arr, _ndarray):
            return False
        info = _glue_owner(arr)
        if info is None and isinstance(arr.base, _ndarray):
            info = _glue_owner(arr.base)
        return info is not None and info[0] is self._hcap

    def block_size(self, arr):
        """Usable bytes of the block under ``arr`` (>= ``arr.nbytes``); 0 if
        ``arr`` does not start a live block of this pool."""
        self._check_open()
        addr = arr.__array_interface__["data"][0]
        return int(lib.pa_pool_block_size(self._h, ffi.cast("void *", addr)))

    # -- steps -------------------------------------------------------------------------
    def step(self):
        """Mark the end of one step (one inference, one loop iteration).

        With ``Policy.learn`` (the default) the pool records each step's
        allocations and frees; once a step has repeated
        ``Policy.learn_repeats`` times it is planned, and the steps that
        repeat it are served at planned offsets from one region (see
        docs/pool.md).  A step that differs falls back to the zones for the
        rest of it; nothing handed out is ever moved."""
        self._check_open()
        check(lib.pa_pool_step(self._h), "pool step")

    @contextlib.contextmanager
    def step_scope(self):
        """``with pool.step_scope():`` -- the block is one step: the step
        ends when the block is left (also on an exception)."""
        self._check_open()
        try:
            yield self
        finally:
            if not self._closed:
                self.step()

    # -- reclamation and limits --------------------------------------------------
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

    # -- introspection -----------------------------------------------------------
    def stats(self):
        """A :class:`PoolStats` snapshot."""
        self._check_open()
        s = _raw_stats(self._h, self._hcap)
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

    def n_free_blocks(self):
        """Blocks held in the deferred caches."""
        return sum(1 for b in self.walk() if b.state == "cached")

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

    def memory_stats(self):
        """A flat dict in PyTorch's style (``torch.cuda.memory_stats``):
        ``allocated_bytes.current``, ``allocated_bytes.peak``,
        ``reserved_bytes.*``, ``requested_bytes.*``, ``cached_bytes.current``,
        ``allocation.*`` counts, ``num_alloc_retries``, ``num_ooms`` ..., and
        per zone ``<stat>.<zone>.<metric>`` (zones slab, buddy, large)."""
        s = self.stats()
        d = {
            "allocated_bytes.current": s.allocated,
            "allocated_bytes.peak": s.peak_allocated,
            "reserved_bytes.current": s.reserved,
            "reserved_bytes.peak": s.peak_reserved,
            "requested_bytes.current": s.requested,
            "requested_bytes.peak": s.peak_requested,
            "cached_bytes.current": s.cached,
            "free_bytes.current": s.total_free,
            "largest_free_bytes.current": s.largest_free,
            "allocation.current": s.live,
            "allocation.allocated": s.allocs,
            "allocation.freed": s.frees,
            "num_alloc_retries": s.alloc_retries,
            "num_ooms": s.ooms,
            "num_failures": s.failures,
            "num_trims": s.trims,
            "num_grows": s.grows,
            "num_reclaims": s.reclaims,
            "num_chunks": s.chunks,
            "fragmentation.internal": s.frag_internal,
            "fragmentation.external": s.frag_external,
            "fragmentation.overall": s.frag_overall,
            "limit_bytes": s.limit,
            "alignment": s.alignment,
            "learned.sequences": s.learned_sequences,
            "learned.region_bytes": s.planned_bytes,
            "learned.live_bytes": s.planned_live,
            "learned.hits": s.plan_hits,
            "learned.misses": s.plan_misses,
            "learned.steps_served": s.plan_steps,
            "num_steps": s.steps,
        }
        for name, z in zip(ZONES, s.zones):
            d[f"allocated_bytes.{name}.current"] = z.allocated
            d[f"allocated_bytes.{name}.peak"] = z.peak_allocated
            d[f"requested_bytes.{name}.current"] = z.requested
            d[f"requested_bytes.{name}.peak"] = z.peak_requested
            d[f"reserved_bytes.{name}.current"] = z.reserved
            d[f"cached_bytes.{name}.current"] = z.cached
            d[f"allocation.{name}.current"] = z.live
            d[f"allocation.{name}.allocated"] = z.allocs
            d[f"allocation.{name}.freed"] = z.frees
            d[f"cache_hits.{name}"] = z.cache_hits
        return d

    def memory_summary(self):
        """A readable table of :meth:`memory_stats` (like PyTorch's
        memory_summary)."""
        s = self.stats()

        b = human_bytes
        rows = [("", "current", "peak", "slab", "buddy", "large")]
        rows.append(("requested", b(s.requested), b(s.peak_requested),
                     *(b(z.requested) for z in s.zones)))
        rows.append(("allocated", b(s.allocated), b(s.peak_allocated),
                     *(b(z.allocated) for z in s.zones)))
        rows.append(("reserved", b(s.reserved), b(s.peak_reserved),
                     *(b(z.reserved) for z in s.zones)))
        rows.append(("cached", b(s.cached), "",
                     *(b(z.cached) for z in s.zones)))
        rows.append(("live blocks", str(s.live), "", *(str(z.live) for z in s.zones)))
        rows.append(("allocs", str(s.allocs), "", *(str(z.allocs) for z in s.zones)))
        rows.append(("frees", str(s.frees), "", *(str(z.frees) for z in s.zones)))
        rows.append(("cache hits", "", "", *(str(z.cache_hits) for z in s.zones)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out = [line, f"| pyarena Pool memory summary ({self.policy.mode}, alignment "
               f"{s.alignment})".ljust(len(line) - 1) + "|", line]
        for i, r in enumerate(rows):
            out.append("| " + " | ".join(c.rjust(w) if j else c.ljust(w)
                                         for j, (c, w) in enumerate(zip(r, widths))) + " |")
            if i == 0:
                out.append(line)
        out.append(line)
        lim = f"{b(s.limit)}" if s.limit else "none"
        out.append(f"limit {lim}; free {b(s.total_free)} (largest {b(s.largest_free)}); "
                   f"chunks {s.chunks}")
        out.append(f"fragmentation: internal {s.frag_internal:.1%}, external "
                   f"{s.frag_external:.1%}, overall {s.frag_overall:.1%}")
        out.append(f"retries {s.alloc_retries}, OOMs {s.ooms}, failures {s.failures}, "
                   f"trims {s.trims}, reclaims {s.reclaims}, grows {s.grows}")
        if s.steps:
            out.append(f"steps {s.steps}: {s.learned_sequences} learned, region "
                       f"{b(s.planned_bytes)}, {s.plan_steps} served from a plan, "
                       f"hits {s.plan_hits}, misses {s.plan_misses}")
        return "\n".join(out)

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
                    after = _raw_stats(self._h, self._hcap)
                    rec._fold(after)
                    rec.after = after
                else:
                    rec.after = rec.before
                self._recorders.remove(rec)

    # -- lifetime -------------------------------------------------------------------
    def _drop(self):
        # arrays keep the C pool alive; it is destroyed when the last is gone
        self._empty.__self__.close()                  # kept bound methods refuse too
        self._zeros.__self__.close()
        self._empty = self._zeros = None
        self.__dict__.pop("empty", None)
        self.__dict__.pop("zeros", None)
        self._hcap = None
        self._h = ffi.NULL
        self._freed = {}

    def __repr__(self):
        if self._closed:
            return "<pyarena.Pool closed>"
        st = self.stats()
        return (f"<pyarena.Pool {self.policy.mode} used={st.allocated:,} "
                f"reserved={st.reserved:,} live={st.live} alignment={st.alignment}>")
