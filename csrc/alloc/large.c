/* alloc/large.c -- the large zone: blocks above the large threshold, each a
 * span of its own.
 *
 * A large block is a run of whole pages taken from the page heap
 * (page_heap.c) and given back to it, where it coalesces with its free
 * neighbours.  Its state lives in the span descriptor, outside the
 * memory, so a large block has no header and any pointer is validated
 * through the page map alone.
 *
 * Design choices:
 *  - Freed large blocks wait in the front-end caches (cache.c), in bins
 *    of 4 per doubling of the page count, and are reused best fit: an
 *    inference step frees and asks for the same shapes again, so most
 *    requests repeat an exact page count and cost no heap operation.
 *  - A cached block bigger than the request is cut down only when the
 *    tail is worth a heap operation (over 1/8 of the request), so a
 *    reused block wastes at most 1/8 -- and nothing on exact repeats.
 */
#include "large.h"

void _pa_large_init(pa_large_zone_t *z, pa_page_heap_t *heap, pa_span_source_t source) {
    z->heap = heap;
    z->source = source;
}

void *_pa_large_alloc(pa_large_zone_t *z, size_t npages, size_t req, pa_status_t *st) {
    pa_span_t *s = z->source.get(z->source.ctx, npages, st);
    if (!s) return NULL;
    _pa_large_set_live(s, req);
    return (void *)s->start;
}

size_t _pa_large_reuse(pa_large_zone_t *z, pa_span_t *s, size_t npages, size_t req) {
    /* cut only a tail worth a heap operation: > 1/8 of the request */
    if ((s->npages - npages) * 8 > npages) _pa_heap_shrink(z->heap, s, npages);
    s->state = PA_BLOCK_LIVE;
    s->requested = req;
    return s->npages << PA_PAGE_SHIFT;
}

void _pa_large_release(pa_large_zone_t *z, pa_span_t *s) {
    _pa_heap_free(z->heap, s);
}

size_t _pa_large_check_span(const pa_span_t *s, pa_check_tally_t *t) {
    size_t bytes = s->npages << PA_PAGE_SHIFT;
    if (s->state != PA_BLOCK_LIVE) {
        t->cached += bytes;
        t->ncached++;
        return 0;
    }
    t->live++;
    t->allocated += bytes;
    t->requested += s->requested;
    /* cached blocks are cut to within 1/8 when reused */
    return s->requested > bytes || bytes - s->requested > s->requested / 8 + 2 * PA_PAGE_SIZE;
}

size_t _pa_large_check_cached(const pa_span_t *s, const void *owner, uintptr_t ptr,
                              size_t size, size_t bin) {
    return s != owner || s->kind != PA_SPAN_LARGE || s->state != PA_BLOCK_CACHED ||
           ptr != s->start || size != s->npages << PA_PAGE_SHIFT ||
           bin != _pa_large_bin_of_pages(s->npages);
}

int _pa_large_walk_span(const pa_span_t *s, pa_pool_walker_t fn, void *ctx) {
    pa_pool_block_t b;
    b.ptr = (void *)s->start;
    b.size = s->npages << PA_PAGE_SHIFT;
    b.zone = PA_ZONE_LARGE;
    b.state = s->kind == PA_SPAN_FREE ? PA_BLOCK_FREE : (pa_block_state_t)s->state;
    b.requested = b.state == PA_BLOCK_LIVE ? s->requested : 0;
    return fn(&b, ctx);
}
