/* alloc/large.h -- the large zone of the work pool: blocks that are whole spans
 * (large.c).  Not installed; names start with _pa_.
 *
 * A large block's state lives in its span descriptor (kind PA_SPAN_LARGE,
 * state LIVE or CACHED, requested bytes); the pool and the caches change
 * it only through the functions below.  Lock rule: guarded by the owning
 * pool's lock (pool_internal.h).
 */
#ifndef PA_LARGE_H
#define PA_LARGE_H

#include "zone.h"

#define PA_LARGE_BINS 192 /* cache bins: 4 per doubling of the page count */

typedef struct pa_large_zone {
    pa_page_heap_t *heap;     /* where released blocks go back            */
    pa_span_source_t source;  /* where new blocks come from               */
} pa_large_zone_t;

void _pa_large_init(pa_large_zone_t *z, pa_page_heap_t *heap, pa_span_source_t source);
/* A LIVE block of `npages` pages holding `req` bytes; NULL with *st set
 * when no span can be had. */
void *_pa_large_alloc(pa_large_zone_t *z, size_t npages, size_t req, pa_status_t *st);
/* A CACHED block handed out again for `npages` pages and `req` bytes: a
 * tail over 1/8 of the request goes back to the heap.  Returns the block
 * bytes. */
size_t _pa_large_reuse(pa_large_zone_t *z, pa_span_t *s, size_t npages, size_t req);
/* A CACHED block goes back to the page heap (coalescing there). */
void _pa_large_release(pa_large_zone_t *z, pa_span_t *s);

/* Checks (broken-invariant counts) and the walk, for pool_check.c. */
size_t _pa_large_check_span(const pa_span_t *s, pa_check_tally_t *t);
/* Is the cache entry (owner, ptr, size) of large bin `bin` (counted from
 * the first large bin) the CACHED block of span `s`?  0 if so, else 1. */
size_t _pa_large_check_cached(const pa_span_t *s, const void *owner, uintptr_t ptr,
                              size_t size, size_t bin);
/* Report a large or free span (free ones as PA_BLOCK_FREE). */
int _pa_large_walk_span(const pa_span_t *s, pa_pool_walker_t fn, void *ctx);

/* The cache bin of a page count: 4 per doubling, so a reused block is at
 * most ~19 % bigger than asked for before the tail is cut. */
static inline size_t _pa_large_bin_of_pages(size_t npages) {
    unsigned lg = _pa_log2_floor(npages);
    size_t sub = lg >= 2 ? (npages >> (lg - 2)) & 3 : 0;
    return (size_t)lg * 4 + sub;
}

/* Describe the live large block at `addr` of span `s` (the untagged
 * page-map entry, maybe stale: the range is checked); PA_ERR_FOREIGN /
 * PA_ERR_DOUBLE_FREE if it is not one (the start of a free span reads as
 * a double free). */
static inline pa_status_t _pa_large_find_live(pa_span_t *s, uintptr_t addr,
                                              pa_block_ref_t *b) {
    if (!s || addr < s->start || ((addr - s->start) >> PA_PAGE_SHIFT) >= s->npages)
        return PA_ERR_FOREIGN;
    switch (s->kind) {
    case PA_SPAN_LARGE:
        if (addr != s->start) return PA_ERR_FOREIGN;
        if (s->state != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
        b->zone = PA_ZONE_LARGE;
        b->owner = s;
        b->bsize = s->npages << PA_PAGE_SHIFT;
        b->requested = s->requested;
        b->unit = 0;
        return PA_OK;
    case PA_SPAN_FREE:
        return addr == s->start ? PA_ERR_DOUBLE_FREE : PA_ERR_FOREIGN;
    default:
        return PA_ERR_FOREIGN;
    }
}

/* A span just taken from the heap becomes a LIVE large block of `req`
 * bytes. */
static inline void _pa_large_set_live(pa_span_t *s, size_t req) {
    s->kind = PA_SPAN_LARGE;
    s->state = PA_BLOCK_LIVE;
    s->requested = req;
}

/* A freed LIVE block goes to the caches: CACHED. */
static inline void _pa_large_mark_cached(pa_span_t *s) {
    s->state = PA_BLOCK_CACHED;
    s->requested = 0;
}

/* A LIVE block resized in place (realloc to the same page count). */
static inline void _pa_large_set_requested(pa_span_t *s, size_t req) {
    s->requested = req;
}

#endif /* PA_LARGE_H */
