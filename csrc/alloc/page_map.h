/* alloc/page_map.h -- the work pool's page map: address -> span, in two loads.
 * Not installed; names start with _pa_.  Everything here is inline: the
 * lookups sit on the free path of every zone.
 *
 * A two-level table (address >> 30, then the 4 KiB page) maps an address
 * to the span holding it without reading pool memory, so foreign,
 * interior and stale pointers are recognised safely.  The map holds the
 * span's descriptor (pa_span_t, kept OUTSIDE the pool memory) or, for the
 * pages of a slab or a buddy region, the slab / region itself tagged in
 * the low bits, so a free reaches the slot state in one load less.
 *
 * Leaves are created when a chunk is mapped (_pa_page_map_ensure), so
 * registering a span later never fails for lack of metadata memory.
 *
 * Lock rule: a page map belongs to one pool's page heap and is guarded by
 * that pool's lock (see pool_internal.h).
 */
#ifndef PA_PAGE_MAP_H
#define PA_PAGE_MAP_H

#include "internal.h"

#include <stdlib.h>

#define PA_ADDR_BITS 48 /* user-space addresses the page map covers */
#define PA_MAP_L2_BITS 18
#define PA_MAP_L1_BITS (PA_ADDR_BITS - PA_PAGE_SHIFT - PA_MAP_L2_BITS)

/* What a span is used for. */
typedef enum pa_span_kind {
    PA_SPAN_UNUSED = 0, /* descriptor on the heap's unused list        */
    PA_SPAN_FREE,       /* free pages on a heap free list              */
    PA_SPAN_LARGE,      /* one large block (large.c)                   */
    PA_SPAN_SLAB,       /* a slab (slab.c); owner: its pa_slab_t       */
    PA_SPAN_BUDDY       /* a buddy region (buddy.c); owner: its region */
} pa_span_kind_t;

struct pa_heap_chunk;

/* A run of pages inside one chunk.  Descriptors are recycled but never
 * returned to libc before the pool dies, so a stale page-map entry always
 * points to readable memory; lookups check the range. */
typedef struct pa_span {
    uintptr_t start;         /* first byte (page aligned)                */
    size_t npages;           /* 0 while the descriptor is unused         */
    struct pa_span *next;    /* FREE: heap free list; UNUSED: desc list  */
    struct pa_span *prev;
    struct pa_heap_chunk *chunk; /* the chunk the span lies in           */
    void *owner;             /* SLAB: pa_slab_t*, BUDDY: pa_buddy_region_t* */
    size_t requested;        /* LARGE + LIVE: bytes asked for            */
    uint8_t kind;            /* pa_span_kind_t                           */
    uint8_t state;           /* LARGE: PA_BLOCK_LIVE / PA_BLOCK_CACHED   */
} pa_span_t;

/* Page-map entries: a span pointer, or -- for every page of a slab or a
 * buddy region -- the slab / region pointer tagged in its low bits.  A
 * tagged owner begins with its `pa_span_t *span` (slab.h and buddy.h
 * assert it), which is how _pa_page_map_decode reaches the span without
 * knowing the zones.  Released slabs and regions leave their interior
 * entries stale (no second pass over the pages): their metadata is
 * recycled, never returned to libc before the pool dies, and a recycled
 * slab / region has nblocks 0 / is checked by range, so a stale tagged
 * entry never validates a pointer. */
#define PA_MAP_TAG_SLAB ((uintptr_t)1)
#define PA_MAP_TAG_REGION ((uintptr_t)2)
#define PA_MAP_TAG_MASK ((uintptr_t)3)

typedef struct pa_page_map {
    pa_span_t ***leaves;     /* 2^PA_MAP_L1_BITS leaf pointers, leaves of
                                2^PA_MAP_L2_BITS entries made on demand */
} pa_page_map_t;

/* Allocate the first level; -1 when out of memory. */
static inline int _pa_page_map_init(pa_page_map_t *m) {
    m->leaves = calloc((size_t)1 << PA_MAP_L1_BITS, sizeof(pa_span_t **));
    return m->leaves ? 0 : -1;
}

static inline void _pa_page_map_destroy(pa_page_map_t *m) {
    if (!m->leaves) return;
    for (size_t i = 0; i < ((size_t)1 << PA_MAP_L1_BITS); i++) free(m->leaves[i]);
    free(m->leaves);
    m->leaves = NULL;
}

/* Create the leaves covering [base, base + size); -1 when out of memory. */
static inline int _pa_page_map_ensure(pa_page_map_t *m, uintptr_t base, size_t size) {
    uintptr_t first = (base >> PA_PAGE_SHIFT) >> PA_MAP_L2_BITS;
    uintptr_t last = ((base + size - 1) >> PA_PAGE_SHIFT) >> PA_MAP_L2_BITS;
    for (uintptr_t i = first; i <= last; i++) {
        if (m->leaves[i]) continue;
        m->leaves[i] = calloc((size_t)1 << PA_MAP_L2_BITS, sizeof(pa_span_t *));
        if (!m->leaves[i]) return -1;
    }
    return 0;
}

/* The raw entry of addr's page (0 if none): a span or a tagged owner. */
static inline uintptr_t _pa_page_map_entry(const pa_page_map_t *m, uintptr_t addr) {
    if (pa_unlikely(addr >> PA_ADDR_BITS)) return 0;
    uintptr_t pg = addr >> PA_PAGE_SHIFT;
    pa_span_t **leaf = m->leaves[pg >> PA_MAP_L2_BITS];
    if (pa_unlikely(!leaf)) return 0;
    return (uintptr_t)leaf[pg & (((uintptr_t)1 << PA_MAP_L2_BITS) - 1)];
}

/* The slab / region of a tagged entry. */
static inline void *_pa_page_map_owner(uintptr_t entry) {
    return (void *)(entry & ~PA_MAP_TAG_MASK);
}

/* The span a slab / region records as its own (its first member). */
static inline pa_span_t *_pa_owner_span(const void *owner) {
    return *(pa_span_t *const *)owner;
}

/* The span of an entry, tagged or not (NULL for 0). */
static inline pa_span_t *_pa_page_map_decode(uintptr_t entry) {
    if (entry & PA_MAP_TAG_MASK) return _pa_owner_span(_pa_page_map_owner(entry));
    return (pa_span_t *)entry;
}

/* The span whose descriptor the entry of addr's page names, unchecked:
 * it may be stale and not cover addr (the heap checks neighbours itself). */
static inline pa_span_t *_pa_page_map_span_at(const pa_page_map_t *m, uintptr_t addr) {
    return _pa_page_map_decode(_pa_page_map_entry(m, addr));
}

/* The span covering addr (checked against the span's range), or NULL.
 * Reads only the page map and descriptors: safe for any address. */
static inline pa_span_t *_pa_page_map_lookup(const pa_page_map_t *m, uintptr_t addr) {
    pa_span_t *s = _pa_page_map_span_at(m, addr);
    if (!s || addr < s->start || ((addr - s->start) >> PA_PAGE_SHIFT) >= s->npages) return NULL;
    return s;
}

/* Point the pages of `s` at `entry` (the span itself, or its tagged slab /
 * region): every page, or (all_pages 0) the first and last only -- enough
 * for neighbour coalescing and exact-start checks.  The leaves exist. */
static inline void _pa_page_map_register(pa_page_map_t *m, const pa_span_t *s,
                                         uintptr_t entry, int all_pages) {
    const uintptr_t low = ((uintptr_t)1 << PA_MAP_L2_BITS) - 1;
    uintptr_t first = s->start >> PA_PAGE_SHIFT, last = first + s->npages - 1;
    if (!all_pages) {
        m->leaves[first >> PA_MAP_L2_BITS][first & low] = (pa_span_t *)entry;
        m->leaves[last >> PA_MAP_L2_BITS][last & low] = (pa_span_t *)entry;
        return;
    }
    for (uintptr_t pg = first; pg <= last; pg++)
        m->leaves[pg >> PA_MAP_L2_BITS][pg & low] = (pa_span_t *)entry;
}

#endif /* PA_PAGE_MAP_H */
