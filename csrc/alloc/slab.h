/* alloc/slab.h -- the slab zone of the work pool: size classes for small blocks
 * (slab.c).  Not installed; names start with _pa_.
 *
 * The slot words and the slab counters are this zone's alone: the pool
 * and the caches change a block's state only through the inline accessors
 * below.  Lock rule: guarded by the owning pool's lock (pool_internal.h).
 */
#ifndef PA_SLAB_H
#define PA_SLAB_H

#include "zone.h"

#include <stddef.h>

/* A slab: one span cut into equal slots of one size class. */
typedef struct pa_slab {
    pa_span_t *span;          /* first: the page map reaches it from a
                                 tagged entry (page_map.h)                */
    uintptr_t start;          /* == span->start (one load less per use)  */
    struct pa_slab *next, *prev; /* the class's partial list              */
    uint32_t class_index;
    uint32_t nblocks;         /* 0 while the metadata is recycled         */
    uint32_t nfree;           /* FREE slots == entries on `free_stack`    */
    int in_partial;
    uint64_t div_magic;       /* == the class's div_magic / size: no      */
    size_t size;              /* class load on the free path              */
    uint32_t *slot;           /* per slot: PA_SLOT(state, requested): one
                                 word, one cache line per access          */
    uint16_t *free_stack;     /* LIFO of FREE slot indices                */
} pa_slab_t;

_Static_assert(offsetof(pa_slab_t, span) == 0, "page_map.h reads the span first");

#define PA_SLOT_MAX_REQ ((uint32_t)0x3FFFFFFF) /* slab classes stay below */
#define PA_SLOT(state, req) (((uint32_t)(state) << 30) | (uint32_t)(req))
#define PA_SLOT_STATE(w) ((int)((w) >> 30))
#define PA_SLOT_REQ(w) ((w) & PA_SLOT_MAX_REQ)

typedef struct pa_slab_class {
    size_t size;              /* slot bytes                               */
    size_t slab_bytes;        /* span bytes per slab                      */
    uint32_t nblocks;         /* slots per slab                           */
    uint64_t div_magic;       /* offset * div_magic >> 40 == offset / size */
    pa_slab_t *partial;       /* slabs with FREE slots (not the spare)    */
    pa_slab_t *spare;         /* one empty slab kept (NULL: none)         */
    pa_slab_t *recycled;      /* recycled metadata of released slabs      */
    size_t nslabs;
} pa_slab_class_t;

typedef struct pa_slab_zone {
    size_t granularity;
    unsigned granularity_shift;
    size_t max_size;          /* largest size served by slabs (0: none)   */
    pa_slab_class_t *classes;
    size_t nclasses;
    uint16_t *class_of;       /* (size-1) >> granularity_shift -> class   */
    size_t class_of_len;
    size_t nspare_slabs;      /* classes holding a spare empty slab       */
    size_t reserved;          /* bytes of the slabs' spans                */
    pa_page_heap_t *heap;     /* where empty slabs go back                */
    pa_span_source_t source;  /* where new slabs come from                */
} pa_slab_zone_t;

/* Build the class table from `cfg` (none in buddy-only mode); -1 on a bad
 * config or out of memory.  Call _pa_slab_destroy() either way. */
int _pa_slab_init(pa_slab_zone_t *z, const pa_pool_config_t *cfg, pa_pool_mode_t mode,
                  size_t granularity, pa_page_heap_t *heap, pa_span_source_t source);
/* Free every slab's metadata (live slabs are found through the heap's
 * spans, so call it before _pa_heap_destroy()) and the class tables. */
void _pa_slab_destroy(pa_slab_zone_t *z);
/* The class of `size` by binary search (sizes past the lookup table). */
size_t _pa_slab_class_search(const pa_slab_zone_t *z, size_t size);
/* A LIVE slot of class `class_index` holding `req` bytes, its slab in
 * *slab; NULL with *st set when no span can be had. */
void *_pa_slab_alloc(pa_slab_zone_t *z, size_t class_index, size_t req, pa_slab_t **slab,
                     pa_status_t *st);
/* Free the CACHED slot at `addr`; an empty slab becomes the class's spare
 * or goes back to the heap. */
void _pa_slab_release(pa_slab_zone_t *z, pa_slab_t *s, uintptr_t addr);
/* Give every class's spare empty slab back to the page heap. */
void _pa_slab_drop_spares(pa_slab_zone_t *z);
/* The largest class with a free slot in a partial slab (0 if none). */
size_t _pa_slab_largest_free(const pa_slab_zone_t *z);

/* Checks (broken-invariant counts) and the walk, for pool_check.c. */
size_t _pa_slab_check_slab(const pa_slab_zone_t *z, const pa_slab_t *s, pa_check_tally_t *t);
size_t _pa_slab_check_classes(const pa_slab_zone_t *z);
/* Is the cache entry (ptr, size) of bin `class_index` a CACHED slot of `s`
 * in span `sp`?  0 if so, else 1. */
size_t _pa_slab_check_cached(const pa_slab_zone_t *z, const pa_slab_t *s, const pa_span_t *sp,
                             uintptr_t ptr, size_t class_index, size_t size);
int _pa_slab_walk(const pa_slab_zone_t *z, const pa_slab_t *s, pa_pool_walker_t fn,
                  void *ctx);

/* The slab class of a size in (0, max_size]. */
static inline size_t _pa_slab_class_of(const pa_slab_zone_t *z, size_t size) {
    size_t i = (size - 1) >> z->granularity_shift;
    if (pa_likely(i < z->class_of_len)) return z->class_of[i];
    return _pa_slab_class_search(z, size);
}

/* Slot index of addr in s; *exact = 1 if addr is a slot start. */
static inline uint32_t _pa_slab_index(const pa_slab_t *s, uintptr_t addr, int *exact) {
    uint64_t off = addr - s->start;
    uint64_t idx = s->div_magic ? (off * s->div_magic) >> 40 : 0;
    *exact = idx < s->nblocks && idx * s->size == off;
    return (uint32_t)idx;
}

/* Describe the live slot at `addr` of `s` (a tagged page-map entry, maybe
 * stale: the exact-slot check also checks the range, nblocks being 0
 * while recycled); PA_ERR_FOREIGN / PA_ERR_DOUBLE_FREE if it is not one. */
static inline pa_status_t _pa_slab_find_live(pa_slab_t *s, uintptr_t addr,
                                             pa_block_ref_t *b) {
    int exact;
    uint32_t idx = _pa_slab_index(s, addr, &exact);
    if (!exact) return PA_ERR_FOREIGN;
    uint32_t w = s->slot[idx];
    if (PA_SLOT_STATE(w) != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
    b->zone = PA_ZONE_SLAB;
    b->owner = s;
    b->bsize = s->size;
    b->requested = PA_SLOT_REQ(w);
    b->unit = idx;
    return PA_OK;
}

/* A freed LIVE slot goes to the caches: CACHED; returns its class. */
static inline size_t _pa_slab_mark_cached(pa_slab_t *s, size_t idx) {
    s->slot[idx] = PA_SLOT(PA_BLOCK_CACHED, 0);
    return s->class_index;
}

/* A CACHED slot handed out again from the caches: LIVE with `req` bytes. */
static inline void _pa_slab_reuse_cached(pa_slab_t *s, const void *ptr, size_t req) {
    int exact;
    uint32_t idx = _pa_slab_index(s, (uintptr_t)ptr, &exact);
    s->slot[idx] = PA_SLOT(PA_BLOCK_LIVE, req);
}

/* A LIVE slot resized in place (realloc to the same class). */
static inline void _pa_slab_set_requested(pa_slab_t *s, size_t idx, size_t req) {
    s->slot[idx] = PA_SLOT(PA_BLOCK_LIVE, req);
}

#endif /* PA_SLAB_H */
