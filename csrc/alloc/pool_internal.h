/* alloc/pool_internal.h -- the pool proper behind a pa_pool_t handle, shared by
 * pool.c (lock, routing, public API) and pool_inspect.c (statistics,
 * check, walk: it takes the lock through pool.c, pool.c calls nothing
 * there).  Not installed; names start with _pa_.
 *
 * The layers below, each with its own header:
 *   cache.h      deferred-reclamation bins (cache.c)
 *   slab.h, buddy.h, large.h   the zones (slab.c, buddy.c, large.c)
 *   zone.h       what the zones share (span source, block reference)
 *   page_heap.h  chunks, reservation, spans (page_heap.c)
 *   page_map.h   address -> span (inline)
 *   pool_learn.h learned steps: one planned region beside the heap
 * Calls go down only: pool.c -> cache -> zones -> page heap -> page map.
 */
#ifndef PA_POOL_INTERNAL_H
#define PA_POOL_INTERNAL_H

#include "cache.h"
#include "pool_learn.h"

/* Per-zone counters kept by the front end (the zones count their reserved
 * bytes, the caches their cached bytes and hits).  live = allocs - frees:
 * alloc and free write disjoint counters. */
typedef struct pa_zone_counters {
    size_t requested, allocated;
    size_t peak_requested, peak_allocated;
    uint64_t allocs, frees;
} pa_zone_counters_t;

/* Lock rule: every field below, and everything reachable from it (the
 * heap and its chunks, spans and page map, the zones, the caches), belongs
 * to one pool and is guarded by that pool's lock (struct pa_pool.lock in
 * pool.c, the handle that points here).  Every _pa_ function of the pool's
 * files is called with the lock held and never takes it, but for
 * _pa_pool_enter, which takes it for the views. */
typedef struct pa_pool_impl {
    /* configuration (fixed after create except the watermarks and
       heap.limit) */
    size_t granularity;
    pa_pool_mode_t mode;
    size_t high_watermark, low_watermark;

    pa_page_heap_t heap;      /* spans for every zone                     */
    pa_slab_zone_t slab;
    pa_buddy_zone_t buddy;
    pa_large_zone_t large;
    pa_cache_t cache;         /* freed blocks waiting for reuse           */
    pa_learn_t learn;         /* learned steps and their region           */

    /* statistics */
    pa_zone_counters_t zone[PA_ZONE_COUNT];
    /* the pool's requested / allocated bytes are not kept: they are the
       zones' plus the learned region's (_pa_pool_requested); one counter
       less to store on every alloc and free.  live / allocs / frees: sums
       of both too */
    size_t peak_requested, peak_allocated;
    uint64_t failures, trims;
} pa_pool_impl_t;

/* Requested / allocated bytes of every live block: zones + learned region. */
static inline size_t _pa_pool_requested(const pa_pool_impl_t *p) {
    return p->zone[PA_ZONE_SLAB].requested + p->zone[PA_ZONE_BUDDY].requested +
           p->zone[PA_ZONE_LARGE].requested + p->learn.live_req;
}

static inline size_t _pa_pool_allocated(const pa_pool_impl_t *p) {
    return p->zone[PA_ZONE_SLAB].allocated + p->zone[PA_ZONE_BUDDY].allocated +
           p->zone[PA_ZONE_LARGE].allocated + p->learn.live_bytes;
}

/* pool.c: lock `h` and return its pool, or NULL (unlocked) with *st set
 * (PA_ERR_INVALID for NULL, PA_ERR_STATE once destroyed); _pa_pool_leave
 * releases it.  For the read-only views of pool_inspect.c. */
pa_pool_impl_t *_pa_pool_enter(pa_pool_t *h, pa_status_t *st);
void _pa_pool_leave(pa_pool_t *h);

#endif /* PA_POOL_INTERNAL_H */
