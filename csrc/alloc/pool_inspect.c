/* alloc/pool_inspect.c -- read-only views of a work pool: the statistics
 * snapshot, the consistency check and the block walk.
 *
 * The public views (pa_pool_stats, pa_pool_check, pa_pool_walk) take the
 * pool's lock through pool.c (_pa_pool_enter / _pa_pool_leave) and read
 * under it; nothing here changes the pool, and pool.c calls nothing here.
 * Each view asks every layer for its own part (the heap for chunks and
 * free spans, each zone for its blocks, the caches for their entries, the
 * learned region for its plans and live blocks) and only adds the parts
 * up.
 *
 * Design choice: the check recounts everything from the side tables --
 * every span of every chunk, every slot, tag and cache entry -- and
 * compares the totals with the counters the fast paths keep, so a counter
 * that drifts is caught even when each structure looks fine on its own.
 * O(pool size): for tests and debugging, not for the hot path.
 */
#include "pool_internal.h"

#include <string.h>

static size_t zone_reserved(const pa_pool_impl_t *p, int zone) {
    /* large spans are whole blocks, live or cached */
    return zone == PA_ZONE_SLAB ? p->slab.reserved
           : zone == PA_ZONE_BUDDY ? p->buddy.reserved
           : p->zone[PA_ZONE_LARGE].allocated + p->cache.zone_cached[PA_ZONE_LARGE];
}

/* The largest block servable without growing: a free span, a free buddy
 * block, a free slab slot or a cached block. */
static size_t largest_free(const pa_pool_impl_t *p) {
    size_t best = _pa_heap_largest_free(&p->heap);
    size_t b = _pa_buddy_largest_free(&p->buddy);
    if (b > best) best = b;
    b = _pa_slab_largest_free(&p->slab);
    if (b > best) best = b;
    b = _pa_cache_largest(&p->cache);
    if (b > best) best = b;
    return best;
}

static void stats_locked(const pa_pool_impl_t *p, pa_pool_stats_t *out) {
    memset(out, 0, sizeof(*out));
    out->requested = _pa_pool_requested(p);
    out->allocated = _pa_pool_allocated(p);
    out->reserved = p->heap.reserved + p->heap.outside;
    out->cached = _pa_cache_total(&p->cache);
    out->peak_requested = p->peak_requested;
    out->peak_allocated = p->peak_allocated;
    out->peak_reserved = p->heap.peak_reserved;
    out->total_free = out->reserved >= out->allocated ? out->reserved - out->allocated : 0;
    out->largest_free = largest_free(p);
    out->chunks = p->heap.nchunks;
    out->limit = p->heap.limit;
    out->high_watermark = p->high_watermark;
    out->low_watermark = p->low_watermark;
    out->alignment = p->granularity;
    out->failures = p->failures;
    out->trims = p->trims;
    out->grows = p->heap.grows;
    out->reclaims = p->cache.full_flushes;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        pa_pool_zone_stats_t *o = &out->zone[z];
        const pa_zone_counters_t *s = &p->zone[z];
        o->requested = s->requested;
        o->allocated = s->allocated;
        o->reserved = zone_reserved(p, z);
        o->cached = p->cache.zone_cached[z];
        o->peak_requested = s->peak_requested;
        o->peak_allocated = s->peak_allocated;
        o->live = (size_t)(s->allocs - s->frees);
        o->allocs = s->allocs;
        o->frees = s->frees;
        o->cache_hits = p->cache.zone_hits[z];
        /* pool counts: zone sums */
        out->live += o->live;
        out->allocs += s->allocs;
        out->frees += s->frees;
    }
    /* the learned region: its blocks are in the pool's totals, no zone's */
    out->live += p->learn.live;
    out->allocs += p->learn.hits;
    out->frees += p->learn.frees;
    _pa_learn_stats(&p->learn, out);
}

/* Every span of every chunk: each zone checks its own and tallies its
 * blocks in t[]; zone_bytes[] gets the span bytes per zone. */
static size_t check_spans(const pa_pool_impl_t *p, pa_check_tally_t t[PA_ZONE_COUNT],
                          size_t zone_bytes[PA_ZONE_COUNT]) {
    size_t broken = 0;
    pa_span_iter_t it = _pa_heap_span_iter(&p->heap);
    for (pa_span_t *sp; (sp = _pa_heap_next_span(&p->heap, &it, &broken)) != NULL;) {
        size_t bytes = sp->npages << PA_PAGE_SHIFT;
        if (sp->kind == PA_SPAN_SLAB) {
            broken += _pa_slab_check_slab(&p->slab, sp->owner, &t[PA_ZONE_SLAB]);
            zone_bytes[PA_ZONE_SLAB] += bytes;
        } else if (sp->kind == PA_SPAN_BUDDY) {
            broken += _pa_buddy_check_region(&p->buddy, sp->owner, &t[PA_ZONE_BUDDY]);
            zone_bytes[PA_ZONE_BUDDY] += bytes;
        } else if (sp->kind == PA_SPAN_LARGE) {
            broken += _pa_large_check_span(sp, &t[PA_ZONE_LARGE]);
            zone_bytes[PA_ZONE_LARGE] += bytes;
        }
    }
    return broken;
}

/* The zones' tallies against the counters and the caches' contents. */
static size_t check_totals(const pa_pool_impl_t *p, const pa_check_tally_t t[PA_ZONE_COUNT],
                           const size_t zone_bytes[PA_ZONE_COUNT],
                           const size_t cached_bytes[PA_ZONE_COUNT], size_t nentries,
                           size_t planned_bytes, size_t planned_req) {
    size_t broken = 0, tn = 0, tc = 0, alloc = planned_bytes, req = planned_req, cached = 0;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        const pa_zone_counters_t *c = &p->zone[z];
        tn += t[z].ncached;
        tc += t[z].cached;
        alloc += t[z].allocated;
        req += t[z].requested;
        cached += cached_bytes[z];
        if (t[z].live != (size_t)(c->allocs - c->frees) || t[z].allocated != c->allocated ||
            t[z].requested != c->requested || t[z].cached != p->cache.zone_cached[z] ||
            cached_bytes[z] != p->cache.zone_cached[z] || zone_bytes[z] != zone_reserved(p, z))
            broken++;
        if (c->peak_requested < c->requested || c->peak_allocated < c->allocated) broken++;
    }
    if (tn != nentries || tc != cached || cached != _pa_cache_total(&p->cache)) broken++;
    size_t p_req = _pa_pool_requested(p), p_alloc = _pa_pool_allocated(p);
    if (alloc != p_alloc || req != p_req) broken++;
    if (zone_bytes[0] + zone_bytes[1] + zone_bytes[2] + p->heap.free_bytes != p->heap.reserved)
        broken++;
    if (p->peak_requested < p_req || p->peak_allocated < p_alloc) broken++;
    if (p_req > p_alloc) broken++;
    return broken;
}

static size_t check_locked(const pa_pool_impl_t *p) {
    pa_check_tally_t t[PA_ZONE_COUNT];
    memset(t, 0, sizeof(t));
    size_t zone_bytes[PA_ZONE_COUNT] = {0, 0, 0}, cached_bytes[PA_ZONE_COUNT] = {0, 0, 0};
    size_t nentries = 0;
    size_t broken = _pa_heap_check(&p->heap);
    broken += check_spans(p, t, zone_bytes);
    broken += _pa_slab_check_classes(&p->slab);
    broken += _pa_buddy_check_lists(&p->buddy);
    broken += _pa_cache_check(&p->cache, &p->heap.map, cached_bytes, &nentries);
    size_t plive, pbytes, preq;
    broken += _pa_learn_check(&p->learn, &plive, &pbytes, &preq);
    return broken + check_totals(p, t, zone_bytes, cached_bytes, nentries, pbytes, preq);
}

static void walk_locked(const pa_pool_impl_t *p, pa_pool_walker_t fn, void *ctx) {
    pa_span_iter_t it = _pa_heap_span_iter(&p->heap);
    int stop = 0;
    for (pa_span_t *sp; !stop && (sp = _pa_heap_next_span(&p->heap, &it, NULL)) != NULL;) {
        if (sp->kind == PA_SPAN_SLAB) stop = _pa_slab_walk(&p->slab, sp->owner, fn, ctx);
        else if (sp->kind == PA_SPAN_BUDDY) stop = _pa_buddy_walk(sp->owner, fn, ctx);
        else stop = _pa_large_walk_span(sp, fn, ctx);
    }
}

/* ---- public API --------------------------------------------------------------------- */

pa_status_t pa_pool_stats(pa_pool_t *h, pa_pool_stats_t *out) {
    pa_status_t st;
    if (!out) return PA_ERR_INVALID;
    pa_pool_impl_t *p = _pa_pool_enter(h, &st);
    if (!p) return st;
    stats_locked(p, out);
    _pa_pool_leave(h);
    /* the ratios need no lock: computed from the snapshot */
    if (out->allocated)
        out->frag_internal = 1.0 - (double)out->requested / (double)out->allocated;
    if (out->total_free)
        out->frag_external = 1.0 - (double)out->largest_free / (double)out->total_free;
    if (out->reserved)
        out->frag_overall = 1.0 - (double)out->requested / (double)out->reserved;
    return PA_OK;
}

size_t pa_pool_check(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = _pa_pool_enter(h, &st);
    if (!p) return 1;
    size_t r = check_locked(p);
    _pa_pool_leave(h);
    return r;
}

pa_status_t pa_pool_walk(pa_pool_t *h, pa_pool_walker_t fn, void *ctx) {
    pa_status_t st;
    if (!fn) return PA_ERR_INVALID;
    pa_pool_impl_t *p = _pa_pool_enter(h, &st);
    if (!p) return st;
    walk_locked(p, fn, ctx);
    _pa_pool_leave(h);
    return PA_OK;
}
