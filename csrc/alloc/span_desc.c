/* alloc/span_desc.c -- the page heap's span descriptors: where a pa_span_t
 * comes from and where it goes at the end.
 *
 * Descriptors live OUTSIDE the pool memory (page_heap.c says why), in
 * calloc'd arrays of DESC_BLOCK, and are recycled through the heap's
 * unused list (the inline pop and release of page_heap_ops.h): a page-map
 * entry may still name a recycled one, so none goes back to libc before
 * the heap is destroyed.  Only the refill -- a slow path of the inline
 * take -- and that final free live here, apart from page_heap.c, so the
 * inline operations its includers share call into this file and not into
 * the file that includes them.
 */
#include "page_heap.h"

#include <stdlib.h>

#define DESC_BLOCK 256

int _pa_heap_desc_refill(pa_page_heap_t *h) {
    if (h->ndesc_arrays == h->desc_arrays_cap) {
        size_t nc = h->desc_arrays_cap ? h->desc_arrays_cap * 2 : 16;
        void **nb = realloc(h->desc_arrays, nc * sizeof(void *));
        if (!nb) return -1;
        h->desc_arrays = nb;
        h->desc_arrays_cap = nc;
    }
    pa_span_t *blk = calloc(DESC_BLOCK, sizeof(pa_span_t));
    if (!blk) return -1;
    h->desc_arrays[h->ndesc_arrays++] = blk;
    for (size_t i = 0; i < DESC_BLOCK; i++) {
        blk[i].next = h->unused_descs;
        h->unused_descs = &blk[i];
    }
    return 0;
}

void _pa_heap_desc_destroy(pa_page_heap_t *h) {
    for (size_t i = 0; i < h->ndesc_arrays; i++) free(h->desc_arrays[i]);
    free(h->desc_arrays);
    h->desc_arrays = NULL;
    h->ndesc_arrays = 0;
}
