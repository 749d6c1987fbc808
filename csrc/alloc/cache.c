/* alloc/cache.c -- the work pool's deferred-reclamation caches.
 *
 * A freed block is not merged at once: it is pushed on the LIFO bin of its
 * size class (slab class, buddy order, or a large size class) and the next
 * request of that bin gets it back, so the hottest memory is reused and a
 * free / alloc pair of the same size costs a push and a pop.  The bins are
 * flushed into their zones (slots freed, buddies merged, spans coalesced)
 * by pa_pool_reclaim() (a step boundary), by trims, when a request would
 * otherwise need a new chunk (pool.c decides), and in part when they
 * exceed the budget.
 *
 * Design choices:
 *  - A bitmap of nonempty bins: a flush visits only the bins that hold
 *    something, not a few hundred empty ones.
 *  - A partial flush (over budget) gives back the OLDEST half of the bin:
 *    the newest entries are the ones the next requests will want.
 *  - Large blocks are reused best fit from the newest entries of their bin
 *    and the next one (see _pa_cache_pop_large); the other zones' bins
 *    hold one block size each, so their pop is the newest entry.
 */
#include "cache.h"

#include <stdlib.h>
#include <string.h>

int _pa_cache_init(pa_cache_t *c, size_t budget, pa_slab_zone_t *slab, pa_buddy_zone_t *buddy,
                   pa_large_zone_t *large) {
    c->slab = slab;
    c->buddy = buddy;
    c->large = large;
    c->budget = budget;
    c->large_credit = PA_LARGE_CREDIT_MAX;
    c->first_buddy_bin = slab->nclasses;
    c->first_large_bin = slab->nclasses + PA_BUDDY_ORDERS;
    c->nbins = c->first_large_bin + PA_LARGE_BINS;
    c->bins = calloc(c->nbins, sizeof(pa_cache_bin_t));
    c->nonempty_bins = calloc((c->nbins + 63) / 64, sizeof(uint64_t));
    return c->bins && c->nonempty_bins ? 0 : -1;
}

void _pa_cache_destroy(pa_cache_t *c) {
    if (c->bins)
        for (size_t b = 0; b < c->nbins; b++) free(c->bins[b].entries);
    free(c->bins);
    free(c->nonempty_bins);
    c->bins = NULL;
    c->nonempty_bins = NULL;
}

int _pa_cache_grow_bin(pa_cache_bin_t *bin) {
    uint32_t nc = bin->cap ? bin->cap * 2 : 16;
    pa_cache_entry_t *ne = realloc(bin->entries, nc * sizeof(pa_cache_entry_t));
    if (!ne) return -1;
    bin->entries = ne;
    bin->cap = nc;
    return 0;
}

/* Give a cached block back to its zone. */
void _pa_cache_release_entry(pa_cache_t *c, pa_zone_t zone, const pa_cache_entry_t *e) {
    c->zone_cached[zone] -= e->size;
    if (zone == PA_ZONE_SLAB) _pa_slab_release(c->slab, e->owner, (uintptr_t)e->ptr);
    else if (zone == PA_ZONE_BUDDY) _pa_buddy_release(c->buddy, e->owner, (uintptr_t)e->ptr);
    else _pa_large_release(c->large, e->owner);
}

void _pa_cache_flush_bin(pa_cache_t *c, size_t b, uint32_t count) {
    pa_cache_bin_t *bin = &c->bins[b];
    pa_zone_t zone = _pa_cache_bin_zone(c, b);
    if (count > bin->count) count = bin->count;
    for (uint32_t i = 0; i < count; i++) _pa_cache_release_entry(c, zone, &bin->entries[i]);
    memmove(bin->entries, bin->entries + count, (bin->count - count) * sizeof(pa_cache_entry_t));
    bin->count -= count;
    if (!bin->count) _pa_cache_mark_empty(c, b);
}

void _pa_cache_flush_from(pa_cache_t *c, size_t from) {
    size_t nw = (c->nbins + 63) >> 6;
    for (size_t w = from >> 6; w < nw; w++) {
        uint64_t m = c->nonempty_bins[w];
        if (w == (from >> 6)) m &= ~0ull << (from & 63);
        while (m) {
            size_t b = w * 64 + (size_t)__builtin_ctzll(m);
            m &= m - 1;
            _pa_cache_flush_bin(c, b, c->bins[b].count);
        }
    }
}

void _pa_cache_flush_all(pa_cache_t *c) {
    _pa_cache_flush_from(c, 0);
    c->full_flushes++;
}

static void *pop_large(pa_cache_t *c, size_t b0, size_t npages, size_t req, size_t *bsize) {
    /* Newest first in this bin and the next: an exact page count, else
     * the first block that is big enough (large.c cuts a tail over 1/8 of
     * the request), so a reused block wastes at most 1/8 -- and nothing on
     * exact repeats, the common case of inference traces. */
    for (size_t b = b0; b <= b0 + 1 && b < c->nbins; b++) {
        pa_cache_bin_t *bin = &c->bins[b];
        uint32_t lo = bin->count > 8 ? bin->count - 8 : 0, pick = UINT32_MAX;
        for (uint32_t i = bin->count; i-- > lo;) {
            size_t np = bin->entries[i].size >> PA_PAGE_SHIFT; /* no descriptor miss */
            if (np == npages) {
                pick = i;
                break;
            }
            if (pick == UINT32_MAX && np > npages) pick = i;
        }
        if (pick == UINT32_MAX) continue;
        size_t cnp = bin->entries[pick].size >> PA_PAGE_SHIFT;
        if (cnp != npages) {
            /* a bigger cached block only when it is the best fit: a
             * tighter free span in the heap wins (the pool flushes the
             * large caches and places the block there) */
            size_t h = _pa_heap_fit_pages(c->large->heap, npages);
            if (h && h < cnp) return NULL;
        }
        pa_cache_entry_t e = bin->entries[pick];
        memmove(bin->entries + pick, bin->entries + pick + 1,
                (bin->count - pick - 1) * sizeof(pa_cache_entry_t));
        if (!--bin->count) _pa_cache_mark_empty(c, b);
        c->zone_cached[PA_ZONE_LARGE] -= e.size;
        c->zone_hits[PA_ZONE_LARGE]++;
        *bsize = _pa_large_reuse(c->large, e.owner, npages, req);
        return e.ptr;
    }
    return NULL;
}

void *_pa_cache_pop_large(pa_cache_t *c, size_t b0, size_t npages, size_t req,
                          size_t *bsize) {
    if (!c->zone_cached[PA_ZONE_LARGE]) return NULL; /* nothing learned */
    void *r = pop_large(c, b0, npages, req, bsize);
    if (r) {
        c->large_credit += PA_LARGE_CREDIT_HIT;
        if (c->large_credit > PA_LARGE_CREDIT_MAX) c->large_credit = PA_LARGE_CREDIT_MAX;
    } else if (c->large_credit) {
        c->large_credit--;
    }
    return r;
}


size_t _pa_cache_largest(const pa_cache_t *c) {
    size_t best = 0;
    for (size_t i = 0; i < c->nbins; i++)
        for (uint32_t j = 0; j < c->bins[i].count; j++)
            if (c->bins[i].entries[j].size > best) best = c->bins[i].entries[j].size;
    return best;
}

/* Is entry `e` of bin `b` the CACHED block its zone says?  0 if so. */
static size_t check_entry(const pa_cache_t *c, const pa_page_map_t *map, size_t b,
                          const pa_cache_entry_t *e) {
    uintptr_t ptr = (uintptr_t)e->ptr;
    pa_span_t *sp = _pa_page_map_lookup(map, ptr);
    if (!sp) return 1;
    switch (_pa_cache_bin_zone(c, b)) {
    case PA_ZONE_SLAB:
        return _pa_slab_check_cached(c->slab, e->owner, sp, ptr, b, e->size);
    case PA_ZONE_BUDDY:
        return _pa_buddy_check_cached(e->owner, sp, ptr, (unsigned)(b - c->first_buddy_bin),
                                      e->size);
    default:
        return _pa_large_check_cached(sp, e->owner, ptr, e->size, b - c->first_large_bin);
    }
}

size_t _pa_cache_check(const pa_cache_t *c, const pa_page_map_t *map,
                       size_t zone_bytes[PA_ZONE_COUNT], size_t *nentries) {
    size_t broken = c->large_credit > PA_LARGE_CREDIT_MAX;
    for (size_t b = 0; b < c->nbins; b++) {
        const pa_cache_bin_t *bin = &c->bins[b];
        pa_zone_t zone = _pa_cache_bin_zone(c, b);
        if (bin->count > bin->cap) broken++;
        if (!!(c->nonempty_bins[b >> 6] & (1ull << (b & 63))) != (bin->count > 0)) broken++;
        for (uint32_t i = 0; i < bin->count; i++) {
            (*nentries)++;
            zone_bytes[zone] += bin->entries[i].size;
            broken += check_entry(c, map, b, &bin->entries[i]);
        }
    }
    return broken;
}
