/* alloc/page_heap.h -- the page heap under every zone of the work pool: chunks,
 * the reservation, spans of 4 KiB pages, best fit (page_heap.c).
 * Not installed; names start with _pa_.
 *
 * Lock rule: a page heap belongs to one pool and is guarded by that pool's
 * lock (see pool_internal.h); these functions are called with it held.
 */
#ifndef PA_PAGE_HEAP_H
#define PA_PAGE_HEAP_H

#include "page_map.h"

#define PA_HEAP_EXACT_PAGES 512 /* exact free lists for spans of 1..511 pages */

/* One mapping obtained from the backend, or the pool's reservation. */
typedef struct pa_heap_chunk {
    uintptr_t base;
    size_t size;              /* bytes mapped (multiple of PA_PAGE_SIZE); for
                                 the reservation: the committed prefix    */
    struct pa_heap_chunk *next, *prev;
    int decommitted;          /* on the spare list (RELEASE_DECOMMIT)     */
    int is_reservation;       /* the reservation (heap->reservation)      */
    size_t address_space;     /* reservation: bytes of address space      */
    uintptr_t huge_end;       /* reservation: 0 = not marked for huge
                                 pages; else the segments below were
                                 collapsed (or tried)                     */
} pa_heap_chunk_t;

typedef struct pa_page_heap {
    /* configuration, set before _pa_heap_init(); `limit` may change */
    pa_growth_t growth;
    pa_release_t release;
    size_t chunk_size;        /* first chunk / growth unit                */
    size_t limit;             /* hard limit on `reserved`; 0 = none       */
    pa_backend_t backend;
    int huge;                 /* huge pages past HUGE_FROM (page_heap.c)  */

    pa_page_map_t map;        /* address -> span                          */

    /* free spans */
    pa_span_t *free_by_pages[PA_HEAP_EXACT_PAGES]; /* exact sizes, LIFO  */
    uint64_t free_by_pages_mask[PA_HEAP_EXACT_PAGES / 64]; /* nonempty   */
    pa_span_t *free_big;      /* free spans of >= PA_HEAP_EXACT_PAGES pages */
    size_t free_bytes;        /* bytes in free spans                      */

    /* chunks */
    pa_heap_chunk_t *chunks;  /* committed chunks                         */
    pa_heap_chunk_t *spares;  /* decommitted chunks (RELEASE_DECOMMIT)    */
    pa_heap_chunk_t *reservation; /* one reserved range grown at its end
                                 (on `chunks` while its committed size is
                                 > 0); NULL: separate chunks only         */
    size_t nchunks, last_grow;
    size_t reserved, peak_reserved; /* committed bytes (spares excluded);
                                 the peak and the limit count `outside` too */
    size_t outside;           /* bytes the pool reserved beside the heap
                                 (the learned region, pool_learn.c)       */
    uint64_t grows;           /* growth steps after create                */

    /* span descriptors: recycled, freed only at destroy */
    pa_span_t *unused_descs;
    void **desc_arrays;       /* malloc'd descriptor arrays               */
    size_t ndesc_arrays, desc_arrays_cap;
} pa_page_heap_t;

/* Map the first chunk (reserving the address range when the default
 * backend may grow); -1 when out of memory.  Call _pa_heap_destroy()
 * either way. */
int _pa_heap_init(pa_page_heap_t *h);
/* Unmap every chunk and free every descriptor and page-map leaf. */
void _pa_heap_destroy(pa_page_heap_t *h);

/* A span of exactly `npages` (kind PA_SPAN_UNUSED: the caller sets it),
 * best fit, split; NULL with *st = PA_ERR_NOMEM if no free span fits. */
pa_span_t *_pa_heap_alloc(pa_page_heap_t *h, size_t npages, pa_status_t *st);
/* Give `s` back, coalesced at once with free neighbours in its chunk. */
void _pa_heap_free(pa_page_heap_t *h, pa_span_t *s);
/* Pages of the free span _pa_heap_alloc would pick for `npages`; 0 if none. */
size_t _pa_heap_fit_pages(pa_page_heap_t *h, size_t npages);
/* Cut `s` (not free) down to `npages`, the tail going back to the heap. */
void _pa_heap_shrink(pa_page_heap_t *h, pa_span_t *s, size_t npages);
/* Grow by at least `npages` (growth policy, limit); -1 if impossible. */
int _pa_heap_grow(pa_page_heap_t *h, size_t npages);
/* Give fully free chunks (and the reservation's free tail) back until
 * reserved <= target; returns the bytes given back. */
size_t _pa_heap_release(pa_page_heap_t *h, size_t target);
/* Bytes of the largest free span. */
size_t _pa_heap_largest_free(const pa_page_heap_t *h);
/* Number of broken invariants of chunks, spans and free lists. */
size_t _pa_heap_check(const pa_page_heap_t *h);

/* Span descriptors (span_desc.c): more unused ones on h->unused_descs
 * (DESC_BLOCK at a time), -1 when out of memory; _pa_heap_desc_destroy
 * frees every one (the heap's last step at destroy). */
int _pa_heap_desc_refill(pa_page_heap_t *h);
void _pa_heap_desc_destroy(pa_page_heap_t *h);

/* Visiting every span of the committed chunks, in address order within a
 * chunk: start with {h->chunks, 0} (or _pa_heap_span_iter()). */
typedef struct pa_span_iter {
    const pa_heap_chunk_t *chunk;
    uintptr_t addr;           /* next span start in `chunk`; 0: its base */
} pa_span_iter_t;

static inline pa_span_iter_t _pa_heap_span_iter(const pa_page_heap_t *h) {
    pa_span_iter_t it = {h->chunks, 0};
    return it;
}
/* The next span, or NULL at the end.  A chunk whose page map does not
 * lead from span to span is left at the break, and *broken (may be NULL)
 * counts it. */
pa_span_t *_pa_heap_next_span(const pa_page_heap_t *h, pa_span_iter_t *it,
                              size_t *broken);

#endif /* PA_PAGE_HEAP_H */
