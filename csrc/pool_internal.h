/* pool_internal.h -- structures shared by the work pool's files (pool.c,
 * slab.c, buddy.c, large.c).  Not installed; names start with _pa_.
 *
 * Lock rule: every structure below belongs to one pool and is guarded by
 * that pool's lock (struct pa_pool.lock in pool.c).  Functions declared
 * here are called with the lock held and never take it themselves.
 */
#ifndef PA_POOL_INTERNAL_H
#define PA_POOL_INTERNAL_H

#include "internal.h"

/* The page heap works in 4 KiB pages (PA_PAGE_SIZE, internal.h); the pool
 * granularity is at most one page so every span start is aligned for any
 * block. */
#define PA_ADDR_BITS 48 /* user-space addresses the page map covers */
#define PA_MAP_L2_BITS 18
#define PA_MAP_L1_BITS (PA_ADDR_BITS - PA_PAGE_SHIFT - PA_MAP_L2_BITS)
#define PA_HEAP_EXACT_PAGES 128 /* exact free lists for spans of 1..127 pages */
#define PA_BUDDY_ORDERS 48
#define PA_LARGE_BINS 192 /* 4 cache bins per doubling of the page count */
#define PA_ZONE_BLOCK_MAX ((size_t)1 << 31) /* slab / buddy blocks stay below */

enum { PA_SPAN_UNUSED = 0, PA_SPAN_FREE, PA_SPAN_LARGE, PA_SPAN_SLAB, PA_SPAN_BUDDY };

struct pa_heap_chunk;

/* A run of pages inside one chunk.  Descriptors are recycled but never
 * returned to libc before the pool dies, so a stale page-map entry always
 * points to readable memory; lookups check the range. */
typedef struct pa_span {
    uintptr_t start;         /* first byte (page aligned)                */
    size_t npages;           /* 0 while the descriptor is unused         */
    struct pa_span *next;    /* FREE: heap free list; UNUSED: desc list  */
    struct pa_span *prev;
    struct pa_heap_chunk *chunk; /* the chunk the span lies in               */
    void *owner;             /* SLAB: pa_slab_t*, BUDDY: pa_buddy_region_t*    */
    size_t requested;        /* LARGE + LIVE: bytes asked for            */
    uint8_t kind;            /* PA_SPAN_*                                */
    uint8_t state;           /* LARGE: PA_BLOCK_LIVE / PA_BLOCK_CACHED   */
} pa_span_t;

/* One mapping obtained from the backend, or the pool's reservation. */
typedef struct pa_heap_chunk {
    uintptr_t base;
    size_t size;              /* bytes mapped (multiple of PA_PAGE_SIZE); for the
                                 reservation: the committed prefix         */
    struct pa_heap_chunk *next, *prev;
    int decommitted;          /* on the spare list (RELEASE_DECOMMIT)     */
    int is_reservation;       /* the reservation (p->reservation)         */
    size_t address_space;     /* reservation: bytes of address space      */
} pa_heap_chunk_t;

/* A slab: one span cut into equal slots of one size class. */
typedef struct pa_slab {
    uintptr_t start;          /* == span->start (one load less per use)  */
    pa_span_t *span;
    struct pa_slab *next, *prev; /* the class's partial list              */
    uint32_t class_index;
    uint32_t nblocks;
    uint32_t nfree;           /* FREE slots == entries on `free_stack`    */
    uint32_t nlive;           /* LIVE slots (CACHED = the rest)           */
    int in_partial;
    uint64_t div_magic;       /* == class div_magic / size: no class    */
    size_t size;              /* load on the free path                  */
    uint32_t *slot;           /* per slot: PA_SLOT(state, requested): one
                                 word, one cache line per access          */
    uint16_t *free_stack;     /* LIFO of FREE slot indices                */
} pa_slab_t;

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

/* A buddy region: one span of 2^order bytes. */
typedef struct pa_buddy_region {
    pa_span_t *span;
    uintptr_t base;
    unsigned order;
    unsigned unit_shift;      /* log2 of the tag unit (a dedicated region
                                 holding one block has a single unit)    */
    size_t free_bytes;        /* bytes in FREE blocks                     */
    uint64_t *tags;           /* per unit at a block start: order |
                                 state << 6, and for a LIVE block the
                                 requested bytes << 32; 0 inside a block  */
    struct pa_buddy_region *next, *prev;
} pa_buddy_region_t;

/* In-band node of a FREE buddy block. */
typedef struct pa_buddy_node {
    struct pa_buddy_node *next, *prev;
} pa_buddy_node_t;

#define PA_TAG(order, state) ((uint8_t)((order) | ((state) << 6)))
#define PA_TAG_ORDER(t) ((unsigned)((t) & 63))
#define PA_TAG_STATE(t) ((int)((t) >> 6))
#define PA_TAG_STATE_FREE 3 /* state value of a FREE buddy block in a tag      */
#define PA_TAG_LIVE(order, req) (PA_TAG(order, PA_BLOCK_LIVE) | ((uint64_t)(req) << 32))
#define PA_TAG_REQ(t) ((uint32_t)((t) >> 32))

typedef struct pa_cache_entry {
    void *ptr;
    void *owner;              /* slab: pa_slab_t*, buddy: pa_buddy_region_t*,
                                 large: pa_span_t*                        */
    size_t size;              /* block bytes                              */
} pa_cache_entry_t;

/* A deferred-reclamation cache: a LIFO stack per bin. */
typedef struct pa_cache_bin {
    pa_cache_entry_t *entries;
    uint32_t count, cap;
} pa_cache_bin_t;

typedef struct pa_zone_counters {
    size_t requested, allocated, reserved, cached;
    size_t peak_requested, peak_allocated; /* live = allocs - frees:
                                 alloc and free write disjoint counters */
    uint64_t allocs, frees, cache_hits;
} pa_zone_counters_t;

typedef struct pa_pool_impl {
    /* configuration (fixed after create except limit / watermarks) */
    size_t granularity;
    unsigned granularity_shift;
    pa_pool_mode_t mode;
    pa_growth_t growth;
    pa_release_t release;
    size_t chunk_size, limit, high_watermark, low_watermark, cache_budget;
    size_t slab_max;          /* largest size served by slabs             */
    size_t buddy_max;         /* largest size served by the buddy zone    */
    pa_backend_t backend;

    /* page map: address >> 12 -> span (two levels, leaves on demand) */
    pa_span_t ***map;

    /* page heap */
    pa_span_t *free_by_pages[PA_HEAP_EXACT_PAGES];
    uint64_t free_by_pages_mask[PA_HEAP_EXACT_PAGES / 64];
    pa_span_t *free_big;      /* free spans of >= PA_HEAP_EXACT_PAGES pages */
    pa_heap_chunk_t *chunks;      /* committed chunks                         */
    pa_heap_chunk_t *spares;      /* decommitted chunks (RELEASE_DECOMMIT)    */
    pa_heap_chunk_t *reservation; /* one reserved range grown at its end (on
                                 p->chunks while its committed size > 0);
                                 NULL: separate chunks only               */
    size_t nchunks, heap_free_bytes, last_grow;
    size_t reserved, peak_reserved;
    pa_span_t *unused_descs;  /* unused span descriptors                  */
    void **desc_arrays;       /* malloc'd descriptor arrays               */
    size_t ndesc_arrays, desc_arrays_cap;

    /* slab zone */
    pa_slab_class_t *classes;
    size_t nclasses;
    uint16_t *class_of;       /* (size-1) >> granularity_shift -> class   */
    size_t nspare_slabs;      /* classes holding a spare empty slab       */
    size_t class_of_len;

    /* buddy zone */
    pa_buddy_node_t *buddy_free[PA_BUDDY_ORDERS];
    uint64_t buddy_free_mask; /* bit k: buddy_free[k] nonempty            */
    unsigned buddy_min_order; /* log2 of the smallest block               */
    unsigned region_order;    /* log2 of a default region                 */
    pa_buddy_region_t *regions;
    size_t nregions;
    pa_buddy_region_t *spare_region; /* one empty default region kept (its
                                 whole block on buddy_free[region_order]) */
    pa_buddy_region_t *recycled_regions[PA_BUDDY_ORDERS]; /* by order     */

    /* deferred caches: slab classes, then buddy orders, then large */
    pa_cache_bin_t *bins;
    size_t nbins, first_buddy_bin, first_large_bin;
    size_t cached;
    uint64_t *nonempty_bins;  /* bit b set: bins[b] holds entries         */

    /* statistics */
    pa_zone_counters_t zone[PA_ZONE_COUNT];
    size_t requested, allocated;      /* live/allocs/frees: zone sums  */
    size_t peak_requested, peak_allocated;
    uint64_t failures, trims, grows, reclaims;
} pa_pool_impl_t;

/* Tallies gathered by the check functions. */
typedef struct pa_check_tally {
    size_t live, allocated, requested, cached, ncached, free_bytes, largest_free;
} pa_check_tally_t;

/* pool.c: a span of `npages` for a zone: heap, else reclaim, else grow. */
pa_span_t *_pa_pool_get_span(pa_pool_impl_t *p, size_t npages, pa_status_t *st);

/* large.c: page map, page heap */
int _pa_heap_init(pa_pool_impl_t *p);
void _pa_heap_destroy(pa_pool_impl_t *p);
int _pa_map_set_range(pa_pool_impl_t *p, pa_span_t *s, int all_pages);
/* Point every page of `s` (all_pages 0: first and last) at `tagged` (a
 * tagged slab / region). */
void _pa_map_set_owner(pa_pool_impl_t *p, pa_span_t *s, uintptr_t tagged, int all_pages);
pa_span_t *_pa_heap_alloc(pa_pool_impl_t *p, size_t npages, pa_status_t *st);
void _pa_heap_free(pa_pool_impl_t *p, pa_span_t *s);
/* Pages of the free span best_fit would pick for `npages`; 0 if none. */
size_t _pa_heap_fit_pages(pa_pool_impl_t *p, size_t npages);
/* Cut `s` (not free) down to `npages`, the tail going back to the heap. */
void _pa_heap_shrink(pa_pool_impl_t *p, pa_span_t *s, size_t npages);
int _pa_heap_grow(pa_pool_impl_t *p, size_t npages);
size_t _pa_heap_release(pa_pool_impl_t *p, size_t target);
size_t _pa_heap_largest_free(const pa_pool_impl_t *p);
size_t _pa_heap_check(const pa_pool_impl_t *p);

/* slab.c */
int _pa_slab_init(pa_pool_impl_t *p, const pa_pool_config_t *cfg);
void _pa_slab_destroy(pa_pool_impl_t *p);
size_t _pa_slab_class_search(const pa_pool_impl_t *p, size_t size);
void *_pa_slab_alloc(pa_pool_impl_t *p, size_t class_index, size_t req, pa_slab_t **slab,
                     pa_status_t *st);
void _pa_slab_release(pa_pool_impl_t *p, pa_slab_t *s, uint32_t idx);
/* Give every class's spare empty slab back to the page heap. */
void _pa_slab_drop_spares(pa_pool_impl_t *p);
size_t _pa_slab_check_slab(const pa_pool_impl_t *p, const pa_slab_t *s, pa_check_tally_t *t);
size_t _pa_slab_check_classes(const pa_pool_impl_t *p);
int _pa_slab_walk(const pa_pool_impl_t *p, const pa_slab_t *s, pa_pool_walker_t fn,
                  void *ctx);

/* buddy.c */
int _pa_buddy_init(pa_pool_impl_t *p, const pa_pool_config_t *cfg);
void _pa_buddy_destroy(pa_pool_impl_t *p);
void *_pa_buddy_alloc(pa_pool_impl_t *p, unsigned order, size_t req,
                      pa_buddy_region_t **region, pa_status_t *st);
void _pa_buddy_release(pa_pool_impl_t *p, pa_buddy_region_t *r, uintptr_t addr);
/* Give the spare empty region back to the page heap. */
void _pa_buddy_drop_spare(pa_pool_impl_t *p);
size_t _pa_buddy_largest_free(const pa_pool_impl_t *p);
size_t _pa_buddy_check_region(const pa_pool_impl_t *p, const pa_buddy_region_t *r,
                              pa_check_tally_t *t);
size_t _pa_buddy_check_lists(const pa_pool_impl_t *p);
int _pa_buddy_walk(const pa_pool_impl_t *p, const pa_buddy_region_t *r, pa_pool_walker_t fn,
                   void *ctx);

static inline unsigned _pa_log2_floor(size_t x) {
    return (unsigned)(63 - __builtin_clzll((unsigned long long)x));
}
static inline unsigned _pa_log2_ceil(size_t x) {
    return x <= 1 ? 0 : _pa_log2_floor(x - 1) + 1;
}

/* Page-map entries: a span pointer, or -- for every page of a slab or a
 * buddy region -- the slab / region pointer tagged in its low bits, so a
 * free reaches the slot state in one load less.  Released slabs and
 * regions leave their interior entries stale (no second pass over the
 * pages): their metadata is recycled, never returned to libc before the
 * pool dies, and a recycled slab / region has nblocks 0 / is checked by
 * range, so a stale tagged entry never validates a pointer. */
#define PA_MAP_TAG_SLAB ((uintptr_t)1)
#define PA_MAP_TAG_REGION ((uintptr_t)2)
#define PA_MAP_TAG_MASK ((uintptr_t)3)

static inline uintptr_t _pa_map_entry(const pa_pool_impl_t *p, uintptr_t addr) {
    if (pa_unlikely(addr >> PA_ADDR_BITS)) return 0;
    uintptr_t pg = addr >> PA_PAGE_SHIFT;
    pa_span_t **leaf = p->map[pg >> PA_MAP_L2_BITS];
    if (pa_unlikely(!leaf)) return 0;
    return (uintptr_t)leaf[pg & (((uintptr_t)1 << PA_MAP_L2_BITS) - 1)];
}

static inline pa_span_t *_pa_map_decode(uintptr_t e) {
    switch (e & PA_MAP_TAG_MASK) {
    case PA_MAP_TAG_SLAB: return ((pa_slab_t *)(e & ~PA_MAP_TAG_MASK))->span;
    case PA_MAP_TAG_REGION: return ((pa_buddy_region_t *)(e & ~PA_MAP_TAG_MASK))->span;
    default: return (pa_span_t *)e;
    }
}

/* The span covering addr (checked against the span's range), or NULL.
 * Reads only the page map and descriptors: safe for any address. */
static inline pa_span_t *_pa_map_lookup(const pa_pool_impl_t *p, uintptr_t addr) {
    pa_span_t *s = _pa_map_decode(_pa_map_entry(p, addr));
    if (!s || addr < s->start || ((addr - s->start) >> PA_PAGE_SHIFT) >= s->npages) return NULL;
    return s;
}

/* Slot index of addr in s; *exact = 1 if addr is a slot start. */
static inline uint32_t _pa_slab_index(const pa_pool_impl_t *p, const pa_slab_t *s,
                                      uintptr_t addr, int *exact) {
    (void)p;
    uint64_t off = addr - s->start;
    uint64_t idx = s->div_magic ? (off * s->div_magic) >> 40 : 0;
    *exact = idx < s->nblocks && idx * s->size == off;
    return (uint32_t)idx;
}

/* The slab class of a size in (0, slab_max]. */
static inline size_t _pa_slab_class_of(const pa_pool_impl_t *p, size_t size) {
    size_t i = (size - 1) >> p->granularity_shift;
    if (pa_likely(i < p->class_of_len)) return p->class_of[i];
    return _pa_slab_class_search(p, size);
}

#endif
