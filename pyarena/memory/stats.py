"""Statistics as plain data: dataclasses over the C stats structs, the
``statistics()`` recorder of a pool, and the one builder of
:class:`~pyarena.OutOfMemoryError` from a snapshot."""
from dataclasses import dataclass, fields

from ..errors import OutOfMemoryError


@dataclass(frozen=True)
class ArenaStats:
    """A snapshot of an :class:`~pyarena.Arena` (bytes unless noted)."""

    reserved: int   #: obtained from the OS or the caller's buffer
    used: int       #: consumed by live allocations, padding included
    requested: int  #: asked for by live allocations
    padding: int    #: used - requested: alignment waste
    peak: int       #: highest ``used`` so far
    count: int      #: live allocations
    chunks: int     #: chunks in use
    spare: int      #: bytes of spare chunks kept for reuse (in reserved)
    capacity: int   #: hard limit, 0 = unlimited
    alignment: int  #: granularity

    @classmethod
    def from_c(cls, st):
        return cls(**{f.name: int(getattr(st, f.name)) for f in fields(cls)})

    @property
    def padding_ratio(self):
        """Fraction of used bytes lost to alignment."""
        return self.padding / self.used if self.used else 0.0

    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


# -- work pool (pyarena issue 3, Python part) ---------------------------------

ZONES = ("slab", "buddy", "large")  #: zone names, indexed like PA_ZONE_*


@dataclass(frozen=True)
class ZoneStats:
    """One zone of a :class:`~pyarena.Pool` (bytes unless noted)."""

    requested: int       #: asked for by live blocks
    allocated: int       #: live blocks, rounded to their size class
    reserved: int        #: spans the zone holds
    cached: int          #: freed blocks held in the deferred caches
    peak_requested: int
    peak_allocated: int
    live: int            #: live blocks (count)
    allocs: int          #: successful allocations (count)
    frees: int           #: successful frees (count)
    cache_hits: int      #: allocations served from the cache (count)

    @classmethod
    def from_c(cls, z):
        return cls(**{f.name: int(getattr(z, f.name)) for f in fields(cls)})

    def as_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of a :class:`~pyarena.Pool` (``pa_pool_stats_t`` plus the
    Python layer's retry counters).  Bytes unless noted."""

    requested: int       #: asked for by live blocks
    allocated: int       #: live blocks (size-class rounded) = used_bytes()
    reserved: int        #: obtained from the OS = total_bytes()
    cached: int          #: held in the deferred caches
    peak_requested: int
    peak_allocated: int
    peak_reserved: int
    live: int            #: live blocks (count)
    total_free: int      #: reserved - allocated
    largest_free: int    #: largest block servable without growing
    chunks: int          #: chunks mapped (count)
    limit: int           #: hard limit, 0 = none
    high_watermark: int
    low_watermark: int
    alignment: int
    allocs: int          #: successful allocations (count)
    frees: int           #: successful frees (count)
    failures: int        #: allocations that returned NULL (count)
    trims: int           #: trims run (count)
    grows: int           #: chunks mapped after creation (count)
    reclaims: int        #: cache flushes (count)
    frag_internal: float  #: 1 - requested / allocated
    frag_external: float  #: 1 - largest_free / total_free
    frag_overall: float   #: 1 - requested / reserved
    zones: tuple         #: ZoneStats per zone, in ZONES order
    alloc_retries: int = 0  #: allocations retried after releasing the caches
    ooms: int = 0           #: allocations that failed after that retry
    # learned steps (Pool.step); their blocks are in the totals above too
    learned_sequences: int = 0  #: step sequences planned and kept
    planned_bytes: int = 0      #: bytes of the one learned region (in reserved)
    planned_live: int = 0       #: bytes of live blocks in that region
    plan_hits: int = 0          #: allocations served at a planned offset
    plan_misses: int = 0        #: steps that diverged from their plan
    plan_steps: int = 0         #: steps served from a plan to their end
    steps: int = 0              #: step ends marked
    learn_fallbacks: int = 0    #: times learning did not pay and the pool ran plain

    @classmethod
    def from_c(cls, st, alloc_retries=0, ooms=0):
        kw = {}
        for f in fields(cls):
            if f.name in ("zones", "alloc_retries", "ooms"):
                continue
            v = getattr(st, f.name)
            kw[f.name] = float(v) if f.name.startswith("frag_") else int(v)
        kw["zones"] = tuple(ZoneStats.from_c(st.zone[i]) for i in range(len(ZONES)))
        return cls(alloc_retries=int(alloc_retries), ooms=int(ooms), **kw)

    def zone(self, name):
        """The :class:`ZoneStats` of zone ``name`` ("slab", "buddy", "large")."""
        return self.zones[ZONES.index(name)]

    def as_dict(self):
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "zones"}
        d["zones"] = {n: z.as_dict() for n, z in zip(ZONES, self.zones)}
        return d


class PoolStatistics:
    """What happened in a pool during a ``with pool.statistics():`` block
    (like RMM's statistics): counts and byte deltas, and the peaks reached
    inside the block.  Counts every thread's use of the pool."""

    def __init__(self, pool):
        self._pool = pool
        self.before = None
        self.after = None
        self._peaks = [0, 0, 0]  # requested, allocated, reserved

    def _fold(self, st):
        p = self._peaks
        p[0] = max(p[0], st.peak_requested)
        p[1] = max(p[1], st.peak_allocated)
        p[2] = max(p[2], st.peak_reserved)

    def _snapshot(self):
        return self.after if self.after is not None else self._pool.stats()

    @property
    def allocations(self):
        return self._snapshot().allocs - self.before.allocs

    @property
    def frees(self):
        return self._snapshot().frees - self.before.frees

    @property
    def failures(self):
        return self._snapshot().failures - self.before.failures

    @property
    def ooms(self):
        return self._snapshot().ooms - self.before.ooms

    @property
    def allocated_delta(self):
        """Change of live allocated bytes over the block."""
        return self._snapshot().allocated - self.before.allocated

    @property
    def peak_allocated(self):
        return self._peaks[1]

    @property
    def peak_requested(self):
        return self._peaks[0]

    @property
    def peak_reserved(self):
        return self._peaks[2]

    def as_dict(self):
        return {k: getattr(self, k) for k in (
            "allocations", "frees", "failures", "ooms", "allocated_delta",
            "peak_requested", "peak_allocated", "peak_reserved")}

    def __repr__(self):
        return f"PoolStatistics({self.as_dict()})"


def out_of_memory(size, stats=None, *, limit=None, what="allocation"):
    """The :class:`OutOfMemoryError` for a request of ``size`` bytes, with
    the facts of an :class:`ArenaStats` or :class:`PoolStats` snapshot
    (bytes in use, reserved, the limit, and for a pool the fragmentation);
    without a snapshot (the allocator could not even be created) nothing is
    in use or reserved and ``limit`` is the one asked for."""
    if stats is None:
        return OutOfMemoryError(size, 0, reserved=0, limit=limit, what=what)
    if isinstance(stats, ArenaStats):
        return OutOfMemoryError(size, stats.used, reserved=stats.reserved,
                                limit=stats.capacity, what=what)
    return OutOfMemoryError(size, stats.allocated, reserved=stats.reserved, limit=stats.limit,
                            fragmentation=stats.frag_external, what=what)
