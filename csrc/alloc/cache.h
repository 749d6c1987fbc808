/* alloc/cache.h -- the work pool's deferred-reclamation caches (cache.c): a LIFO
 * bin per slab class, per buddy order and per large size class.
 * Not installed; names start with _pa_.
 *
 * The caches sit between the pool's front end (pool.c) and the zones: a
 * freed block is pushed here and handed back to its zone (slot freed,
 * buddies merged, span coalesced) only when a bin is flushed.  The fast
 * paths (pop, put) are inline: they run on every allocation and free.
 *
 * Lock rule: guarded by the owning pool's lock (pool_internal.h).
 */
#ifndef PA_CACHE_H
#define PA_CACHE_H

#include "buddy.h"
#include "large.h"
#include "slab.h"

typedef struct pa_cache_entry {
    void *ptr;
    void *owner;              /* slab: pa_slab_t*, buddy: pa_buddy_region_t*,
                                 large: pa_span_t*                        */
    size_t size;              /* block bytes                              */
} pa_cache_entry_t;

/* One bin: a LIFO stack of cached blocks of one size class. */
typedef struct pa_cache_bin {
    pa_cache_entry_t *entries;
    uint32_t count, cap;
} pa_cache_bin_t;

#define PA_LARGE_CREDIT_MAX 256
#define PA_LARGE_CREDIT_HIT 8
#define PA_LARGE_PROBE 64

typedef struct pa_cache {
    /* bins: slab classes, then buddy orders, then large size classes */
    pa_cache_bin_t *bins;
    size_t nbins, first_buddy_bin, first_large_bin;
    uint64_t *nonempty_bins;  /* bit b set: bins[b] holds entries         */
    size_t budget;            /* flush when `cached` exceeds it           */
    size_t zone_cached[PA_ZONE_COUNT]; /* ...per zone                     */
    uint64_t zone_hits[PA_ZONE_COUNT]; /* allocations served from a bin   */
    uint64_t full_flushes;    /* _pa_cache_flush_all() calls              */
    /* Large blocks are cached only while caching them pays: a large
     * request that finds the large bins nonempty adds PA_LARGE_CREDIT_HIT
     * on a hit and takes 1 on a miss; at 0 a freed large block goes
     * straight back to the heap, except every PA_LARGE_PROBE-th large
     * free (counted by the zone), cached to notice when repeats come
     * back. */
    uint32_t large_credit;    /* 0 .. PA_LARGE_CREDIT_MAX                 */
    /* where flushed blocks go */
    pa_slab_zone_t *slab;
    pa_buddy_zone_t *buddy;
    pa_large_zone_t *large;
} pa_cache_t;

/* Bytes in all bins (the zones' sum: one counter less to store per
 * cached block). */
static inline size_t _pa_cache_total(const pa_cache_t *c) {
    return c->zone_cached[0] + c->zone_cached[1] + c->zone_cached[2];
}

/* Allocate the bins (after the slab classes are known); -1 when out of
 * memory.  Call _pa_cache_destroy() either way. */
int _pa_cache_init(pa_cache_t *c, size_t budget, pa_slab_zone_t *slab, pa_buddy_zone_t *buddy,
                   pa_large_zone_t *large);
/* Free the bins; the cached blocks die with their zones. */
void _pa_cache_destroy(pa_cache_t *c);

/* Give the `count` oldest entries of bin `b` back to their zone. */
void _pa_cache_flush_bin(pa_cache_t *c, size_t b, uint32_t count);
/* Flush every nonempty bin from `from` on. */
void _pa_cache_flush_from(pa_cache_t *c, size_t from);
/* Flush every bin (a reclaim). */
void _pa_cache_flush_all(pa_cache_t *c);
/* A cached large block of `npages` pages (an exact count, else the best
 * fit among the newest entries of bin `b` and the next, unless the heap
 * has a tighter free span), LIVE again with `req` bytes; NULL if none. */
void *_pa_cache_pop_large(pa_cache_t *c, size_t b, size_t npages, size_t req,
                          size_t *bsize);
/* Bytes of the largest cached block (0 if none). */
size_t _pa_cache_largest(const pa_cache_t *c);
/* Number of broken invariants of the bins and entries (looked up in
 * `map`); adds each zone's cached bytes to zone_bytes[] and the entries
 * to *nentries, for the caller to compare with the zones' tallies. */
size_t _pa_cache_check(const pa_cache_t *c, const pa_page_map_t *map,
                       size_t zone_bytes[PA_ZONE_COUNT], size_t *nentries);

/* Cache the large block just freed (the zone's `nth_free` large free)?
 * No while large requests keep
 * missing the large bins (random sizes): the heap takes it at once, so
 * the next span request has nothing to flush first. */
static inline int _pa_cache_wants_large(const pa_cache_t *c, uint64_t nth_free) {
    return c->large_credit || (nth_free & (PA_LARGE_PROBE - 1)) == 0;
}

/* Slow paths of _pa_cache_put(). */
int _pa_cache_grow_bin(pa_cache_bin_t *bin);
void _pa_cache_release_entry(pa_cache_t *c, pa_zone_t zone, const pa_cache_entry_t *e);

/* The bin of a slab class, a buddy order, a large page count. */
static inline size_t _pa_cache_slab_bin(const pa_cache_t *c, size_t class_index) {
    (void)c;
    return class_index;
}
static inline size_t _pa_cache_buddy_bin(const pa_cache_t *c, unsigned order) {
    return c->first_buddy_bin + order;
}
static inline size_t _pa_cache_large_bin(const pa_cache_t *c, size_t npages) {
    return c->first_large_bin + _pa_large_bin_of_pages(npages);
}

static inline pa_zone_t _pa_cache_bin_zone(const pa_cache_t *c, size_t b) {
    return b < c->first_buddy_bin ? PA_ZONE_SLAB
           : b < c->first_large_bin ? PA_ZONE_BUDDY : PA_ZONE_LARGE;
}

static inline void _pa_cache_mark_nonempty(pa_cache_t *c, size_t b) {
    c->nonempty_bins[b >> 6] |= 1ull << (b & 63);
}

static inline void _pa_cache_mark_empty(pa_cache_t *c, size_t b) {
    c->nonempty_bins[b >> 6] &= ~(1ull << (b & 63));
}

/* The newest entry of slab or buddy bin `b` off its bin: its block and
 * owner in *ptr / *owner (still CACHED in its zone and in the cached
 * bytes: the caller makes it live, then calls _pa_cache_hit); 0 if the
 * bin is empty.  Split so that a caller can finish the hit in a second
 * function with fewer values live (pool.c, alloc_slab_hit). */
static inline int _pa_cache_take(pa_cache_t *c, size_t b, void **ptr, void **owner) {
    pa_cache_bin_t *bin = &c->bins[b];
    if (!bin->count) return 0;
    const pa_cache_entry_t *e = &bin->entries[--bin->count];
    *ptr = e->ptr;
    *owner = e->owner;
    if (!bin->count) _pa_cache_mark_empty(c, b);
    return 1;
}

/* A block of `bytes` taken off a bin of `zone` (_pa_cache_take) is no
 * longer cached: a hit. */
static inline void _pa_cache_hit(pa_cache_t *c, pa_zone_t zone, size_t bytes) {
    c->zone_cached[zone] -= bytes;
    c->zone_hits[zone]++;
}

/* The newest cached block of bin `b` (zone `zone`; `order` is the buddy
 * order, `npages` the large page count), LIVE again with `req` bytes and
 * its block bytes in *bsize; NULL if the bin is empty. */
static inline void *_pa_cache_pop(pa_cache_t *c, pa_zone_t zone, size_t b, size_t order_or_npages,
                                  size_t req, size_t *bsize) {
    if (zone == PA_ZONE_LARGE) /* no call while nothing large is cached (random sizes) */
        return c->zone_cached[PA_ZONE_LARGE]
                   ? _pa_cache_pop_large(c, b, order_or_npages, req, bsize) : NULL;
    pa_cache_bin_t *bin = &c->bins[b];
    if (!bin->count) return NULL;
    size_t bytes = bin->entries[bin->count - 1].size;
    void *ptr, *owner;
    _pa_cache_take(c, b, &ptr, &owner);
    if (zone == PA_ZONE_SLAB) _pa_slab_reuse_cached(owner, ptr, req);
    else _pa_buddy_reuse_cached(owner, ptr, (unsigned)order_or_npages, req);
    _pa_cache_hit(c, zone, bytes);
    *bsize = bytes;
    return ptr;
}

/* Cache a freed block (already marked CACHED by its zone) on bin `b`; when
 * the caches exceed their budget, flush half the bin, then everything. */
static inline void _pa_cache_put(pa_cache_t *c, pa_zone_t zone, size_t b, void *ptr,
                                 void *owner, size_t bsize) {
    pa_cache_entry_t e = {ptr, owner, bsize};
    pa_cache_bin_t *bin = &c->bins[b];
    c->zone_cached[zone] += bsize;
    if (pa_unlikely(bin->count == bin->cap) && _pa_cache_grow_bin(bin) != 0) {
        _pa_cache_release_entry(c, zone, &e); /* no room to cache: release now */
        return;
    }
    _pa_cache_mark_nonempty(c, b);
    bin->entries[bin->count++] = e;
    if (pa_unlikely(_pa_cache_total(c) > c->budget)) {
        _pa_cache_flush_bin(c, b, (bin->count + 1) / 2);
        if (_pa_cache_total(c) > c->budget) _pa_cache_flush_all(c);
    }
}

#endif /* PA_CACHE_H */
