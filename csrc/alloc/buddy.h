/* alloc/buddy.h -- the buddy zone of the work pool: power-of-two blocks for
 * medium sizes (buddy.c).  Not installed; names start with _pa_.
 *
 * The block tags and the free lists are this zone's alone: the pool and
 * the caches change a block's state only through the inline accessors
 * below.  Lock rule: guarded by the owning pool's lock (pool_internal.h).
 */
#ifndef PA_BUDDY_H
#define PA_BUDDY_H

#include "zone.h"

#include <stddef.h>

#define PA_BUDDY_ORDERS 48

/* A buddy region: one span of 2^order bytes. */
typedef struct pa_buddy_region {
    pa_span_t *span;          /* first: the page map reaches it from a
                                 tagged entry (page_map.h)                */
    uintptr_t base;           /* 0 while the metadata is recycled         */
    unsigned order;
    unsigned unit_shift;      /* log2 of the tag unit (a dedicated region
                                 holding one block has a single unit)    */
    size_t free_bytes;        /* bytes in FREE blocks                     */
    uint64_t *tags;           /* per unit at a block start: order |
                                 state << 6, and for a LIVE block the
                                 requested bytes << 32; 0 inside a block  */
    struct pa_buddy_region *next, *prev;
} pa_buddy_region_t;

_Static_assert(offsetof(pa_buddy_region_t, span) == 0, "page_map.h reads the span first");

/* In-band node of a FREE buddy block. */
typedef struct pa_buddy_node {
    struct pa_buddy_node *next, *prev;
} pa_buddy_node_t;

#define PA_TAG(order, state) ((uint8_t)((order) | ((state) << 6)))
#define PA_TAG_ORDER(t) ((unsigned)((t) & 63))
#define PA_TAG_STATE(t) ((int)((t) >> 6))
#define PA_TAG_STATE_FREE 3 /* state value of a FREE buddy block in a tag */
#define PA_TAG_LIVE(order, req) (PA_TAG(order, PA_BLOCK_LIVE) | ((uint64_t)(req) << 32))
#define PA_TAG_REQ(t) ((uint32_t)((t) >> 32))

typedef struct pa_buddy_zone {
    pa_buddy_node_t *free_lists[PA_BUDDY_ORDERS]; /* FREE blocks per order */
    uint64_t free_mask;       /* bit k: free_lists[k] nonempty            */
    unsigned min_order;       /* log2 of the smallest block               */
    unsigned region_order;    /* log2 of a default region                 */
    size_t max_size;          /* largest size served (<= slab max: none)  */
    pa_buddy_region_t *regions;
    size_t nregions;
    pa_buddy_region_t *spare_region; /* one empty default region kept (its
                                 whole block on free_lists[region_order]) */
    pa_buddy_region_t *recycled_regions[PA_BUDDY_ORDERS]; /* by order     */
    size_t reserved;          /* bytes of the regions' spans              */
    pa_page_heap_t *heap;     /* where empty regions go back              */
    pa_span_source_t source;  /* where new regions come from              */
} pa_buddy_zone_t;

/* Set the orders from `cfg` for `mode` (slab_max: the slab zone's largest
 * size); -1 on a bad region size.  Call _pa_buddy_destroy() either way. */
int _pa_buddy_init(pa_buddy_zone_t *z, const pa_pool_config_t *cfg, pa_pool_mode_t mode,
                   unsigned granularity_shift, size_t slab_max, pa_page_heap_t *heap,
                   pa_span_source_t source);
/* Free every region's metadata (the spans die with the heap). */
void _pa_buddy_destroy(pa_buddy_zone_t *z);
/* A LIVE block of 2^order bytes holding `req`, its region in *region;
 * NULL with *st set when no span can be had. */
void *_pa_buddy_alloc(pa_buddy_zone_t *z, unsigned order, size_t req,
                      pa_buddy_region_t **region, pa_status_t *st);
/* Free the CACHED block at `addr`, merging with free buddies; an empty
 * region becomes the spare or goes back to the heap. */
void _pa_buddy_release(pa_buddy_zone_t *z, pa_buddy_region_t *r, uintptr_t addr);
/* Give the spare empty region back to the page heap. */
void _pa_buddy_drop_spare(pa_buddy_zone_t *z);
/* Bytes of the largest FREE block (0 if none). */
size_t _pa_buddy_largest_free(const pa_buddy_zone_t *z);

/* Checks (broken-invariant counts) and the walk, for pool_check.c. */
size_t _pa_buddy_check_region(const pa_buddy_zone_t *z, const pa_buddy_region_t *r,
                              pa_check_tally_t *t);
size_t _pa_buddy_check_lists(const pa_buddy_zone_t *z);
/* Is the cache entry (ptr, size) of order `order` a CACHED block of `r`
 * in span `sp`?  0 if so, else 1. */
size_t _pa_buddy_check_cached(const pa_buddy_region_t *r, const pa_span_t *sp,
                              uintptr_t ptr, unsigned order, size_t size);
int _pa_buddy_walk(const pa_buddy_region_t *r, pa_pool_walker_t fn, void *ctx);

/* Describe the live block at `addr` of `r` (a tagged page-map entry, maybe
 * stale: the range is checked); PA_ERR_FOREIGN / PA_ERR_DOUBLE_FREE if it
 * is not one. */
static inline pa_status_t _pa_buddy_find_live(pa_buddy_region_t *r, uintptr_t addr,
                                              pa_block_ref_t *b) {
    uintptr_t off = addr - r->base;
    if ((off >> r->order) || (off & (((uintptr_t)1 << r->unit_shift) - 1)))
        return PA_ERR_FOREIGN;
    size_t u = off >> r->unit_shift;
    uint64_t word = r->tags[u];
    uint8_t tg = (uint8_t)word;
    if (!tg) return PA_ERR_FOREIGN;
    if (PA_TAG_STATE(tg) != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
    b->zone = PA_ZONE_BUDDY;
    b->owner = r;
    b->bsize = (size_t)1 << PA_TAG_ORDER(tg);
    b->requested = PA_TAG_REQ(word);
    b->unit = u;
    return PA_OK;
}

/* A freed LIVE block goes to the caches: CACHED; returns its order. */
static inline unsigned _pa_buddy_mark_cached(pa_buddy_region_t *r, size_t unit) {
    unsigned k = PA_TAG_ORDER(r->tags[unit]);
    r->tags[unit] = PA_TAG(k, PA_BLOCK_CACHED);
    return k;
}

/* A CACHED block of `order` handed out again: LIVE with `req` bytes. */
static inline void _pa_buddy_reuse_cached(pa_buddy_region_t *r, const void *ptr,
                                          unsigned order, size_t req) {
    size_t u = ((uintptr_t)ptr - r->base) >> r->unit_shift;
    r->tags[u] = PA_TAG_LIVE(order, req);
}

/* A LIVE block resized in place (realloc to the same order). */
static inline void _pa_buddy_set_requested(pa_buddy_region_t *r, size_t unit, size_t req) {
    r->tags[unit] = PA_TAG_LIVE(PA_TAG_ORDER(r->tags[unit]), req);
}

#endif /* PA_BUDDY_H */
