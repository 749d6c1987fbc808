/* alloc/zone.h -- what the work pool's three zones (slab.c, buddy.c, large.c)
 * have in common: where their spans come from, how a live block found by
 * address is described, and the tallies the consistency check gathers.
 * Not installed; names start with _pa_.
 *
 * Dependencies run one way: pool.c and cache.c call the zones; the zones
 * call the page heap (page_heap.h) and nothing above it.  When a zone
 * needs a new span it asks its span source, a callback the pool installs
 * at create: the pool's policy (flush the caches, drop spares, grow, trim
 * at the watermark) stays in pool.c and the zone never names it.
 *
 * Lock rule: every zone belongs to one pool and is guarded by that pool's
 * lock (see pool_internal.h); zone functions are called with it held and
 * never take it.
 */
#ifndef PA_ZONE_H
#define PA_ZONE_H

#include "page_heap.h"

/* Slab and buddy blocks (and their requested sizes, stored in 30 / 32
 * bits) stay below this; bigger ones are large blocks. */
#define PA_ZONE_BLOCK_MAX ((size_t)1 << 31)

/* A span of `npages` for a zone, or NULL with *st set.  May flush the
 * pool's caches, which gives blocks back to the zones (re-entering them). */
typedef struct pa_span_source {
    pa_span_t *(*get)(void *ctx, size_t npages, pa_status_t *st);
    void *ctx;
} pa_span_source_t;

/* A live block found by address (the zones' *_find_live). */
typedef struct pa_block_ref {
    pa_zone_t zone;
    void *owner;              /* pa_slab_t*, pa_buddy_region_t* or the
                                 large block's pa_span_t*                */
    size_t bsize;             /* block bytes                             */
    size_t requested;         /* bytes asked for                         */
    size_t unit;              /* slab slot / buddy tag unit; 0 if large  */
} pa_block_ref_t;

/* Tallies gathered by the zones' check functions, per zone. */
typedef struct pa_check_tally {
    size_t live, allocated, requested, cached, ncached, free_bytes, largest_free;
} pa_check_tally_t;

#endif /* PA_ZONE_H */
