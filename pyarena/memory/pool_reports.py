"""PyTorch-style views of a pool's statistics: the flat
:meth:`Pool.memory_stats` dict (``torch.cuda.memory_stats``' keys) and the
:meth:`Pool.memory_summary` table (:class:`Reports`, part of
:class:`~pyarena.memory.pool.Pool`), both read from one :meth:`Pool.stats`
snapshot.
"""
from .._format import human_bytes
from .stats import ZONES

__all__ = ["Reports"]


class Reports:
    """Mixed into ``Pool``: uses its ``stats`` and ``policy``."""

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
            "learned.fallbacks": s.learn_fallbacks,
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
                       f"hits {s.plan_hits}, misses {s.plan_misses}, "
                       f"fallbacks {s.learn_fallbacks}")
        return "\n".join(out)
