/* page_heap_ops.h -- the page heap's hot operations, inline: best fit,
 * split, the free lists, coalescing (page_heap.c has the rest).  The
 * pool's large fast paths (pool.c) take and give spans here directly.
 * Not installed; names start with _pa_ (helpers are static to each
 * includer).  Lock rule as page_heap.h.
 */
#ifndef PA_PAGE_HEAP_OPS_H
#define PA_PAGE_HEAP_OPS_H

#include "page_heap.h"

/* The paths every large block takes (take a span, split it, coalesce on
 * free) are inlined into their two callers and store as little as they
 * can: on random traffic each store queues behind the caller's stores to
 * cold blocks (stores retire in order), so every store saved counts. */

/* A free or large span registers its first and last page as itself. */
PA_HOT void _pa_heap_register(pa_page_heap_t *h, pa_span_t *s) {
    _pa_page_map_register(&h->map, s, (uintptr_t)s, 0);
}

/* Point the last page of `s` at it (its first page already does). */
PA_HOT void _pa_heap_register_last(pa_page_heap_t *h, pa_span_t *s) {
    const uintptr_t low = ((uintptr_t)1 << PA_MAP_L2_BITS) - 1;
    uintptr_t last = (s->start >> PA_PAGE_SHIFT) + s->npages - 1;
    h->map.leaves[last >> PA_MAP_L2_BITS][last & low] = s;
}

/* ---- span descriptors ---------------------------------------------------- */

/* More unused descriptors (DESC_BLOCK at a time); -1 when out of memory. */
int _pa_heap_desc_refill(pa_page_heap_t *h);

/* A descriptor whose fields are the caller's to set (an unused one has
 * npages 0 and kind UNUSED; the rest is stale). */
PA_HOT pa_span_t *_pa_heap_desc_pop(pa_page_heap_t *h) {
    if (pa_unlikely(!h->unused_descs) && _pa_heap_desc_refill(h) != 0) return NULL;
    pa_span_t *s = h->unused_descs;
    h->unused_descs = s->next;
    return s;
}

/* Back to the unused list.  npages 0 makes every range check fail for a
 * stale page-map entry that still names it; kind UNUSED keeps coalescing
 * away from it. */
PA_HOT void _pa_heap_desc_release(pa_page_heap_t *h, pa_span_t *s) {
    s->npages = 0;
    s->kind = PA_SPAN_UNUSED;
    s->next = h->unused_descs;
    h->unused_descs = s;
}

/* ---- free lists ----------------------------------------------------------- */

PA_HOT pa_span_t **_pa_heap_free_list(pa_page_heap_t *h, size_t np) {
    return np < PA_HEAP_EXACT_PAGES ? &h->free_by_pages[np] : &h->free_big;
}

/* File / unfile `s` on its free list; free_bytes is the caller's. */
PA_HOT void _pa_heap_link(pa_page_heap_t *h, pa_span_t *s) {
    pa_span_t **head = _pa_heap_free_list(h, s->npages);
    pa_span_t *first = *head;
    s->kind = PA_SPAN_FREE;
    s->prev = NULL;
    s->next = first;
    if (first) first->prev = s;
    else if (s->npages < PA_HEAP_EXACT_PAGES)
        h->free_by_pages_mask[s->npages >> 6] |= 1ull << (s->npages & 63);
    *head = s;
}

PA_HOT void _pa_heap_unlink(pa_page_heap_t *h, pa_span_t *s) {
    pa_span_t *next = s->next;
    if (s->prev) {
        s->prev->next = next;
    } else {
        pa_span_t **head = _pa_heap_free_list(h, s->npages);
        *head = next;
        if (!next && s->npages < PA_HEAP_EXACT_PAGES)
            h->free_by_pages_mask[s->npages >> 6] &= ~(1ull << (s->npages & 63));
    }
    if (next) next->prev = s->prev;
}

PA_HOT void _pa_heap_insert(pa_page_heap_t *h, pa_span_t *s) {
    _pa_heap_link(h, s);
    h->free_bytes += s->npages << PA_PAGE_SHIFT;
}

PA_HOT void _pa_heap_remove(pa_page_heap_t *h, pa_span_t *s) {
    _pa_heap_unlink(h, s);
    h->free_bytes -= s->npages << PA_PAGE_SHIFT;
}

PA_HOT pa_span_t *_pa_heap_best_fit(pa_page_heap_t *h, size_t np) {
    if (np < PA_HEAP_EXACT_PAGES) {
        for (size_t w = np >> 6; w < PA_HEAP_EXACT_PAGES / 64; w++) {
            uint64_t m = h->free_by_pages_mask[w];
            if (w == (np >> 6)) m &= ~0ull << (np & 63);
            if (m) return h->free_by_pages[w * 64 + (size_t)__builtin_ctzll(m)];
        }
    }
    pa_span_t *best = NULL;
    for (pa_span_t *s = h->free_big; s; s = s->next) {
        if (s->npages < np) continue;
        if (!best || s->npages < best->npages ||
            (s->npages == best->npages && s->start < best->start))
            best = s;
        if (best->npages == np) break;
    }
    return best;
}

/* Keep the first `np` pages in `s`; `tail` (a fresh descriptor) describes
 * the rest.  The caller registers and files both. */
PA_HOT void _pa_heap_cut_tail(pa_span_t *s, size_t np, pa_span_t *tail) {
    tail->start = s->start + (np << PA_PAGE_SHIFT);
    tail->npages = s->npages - np;
    tail->chunk = s->chunk;
    s->npages = np;
}

/* _pa_heap_alloc, inline (the pool's large fast path takes spans here). */
PA_HOT pa_span_t *_pa_heap_take(pa_page_heap_t *h, size_t np, pa_status_t *st) {
    pa_span_t *s = _pa_heap_best_fit(h, np);
    if (!s) {
        *st = PA_ERR_NOMEM;
        return NULL;
    }
    if (s->npages > np) {
        pa_span_t *tail = _pa_heap_desc_pop(h);
        if (!tail) {
            *st = PA_ERR_NOMEM;
            return NULL;
        }
        _pa_heap_unlink(h, s);
        _pa_heap_cut_tail(s, np, tail);
        _pa_heap_register(h, tail);
        _pa_heap_link(h, tail);
        _pa_heap_register_last(h, s); /* its first page names it already */
    } else {
        _pa_heap_unlink(h, s); /* a free span registers both ends */
    }
    h->free_bytes -= np << PA_PAGE_SHIFT;
    /* the caller sets the kind and what that kind uses (owner, state,
       requested) */
    s->kind = PA_SPAN_UNUSED;
    return s;
}

/* _pa_heap_free, inline.  A span given back: FREE, coalesced with free neighbours of its chunk.
 * Only kind, npages and the list links matter for a free span.
 * `ends_named`: the span's first and last page already name it (a large
 * span's do), so only a merge changes what its ends must say: the merged
 * span's first page is its left part's (which names it already), its
 * last page is registered again.  Else (a slab's or a region's tagged
 * pages, a new span) both ends are registered. */
PA_HOT void _pa_heap_give(pa_page_heap_t *h, pa_span_t *s, int ends_named) {
    pa_heap_chunk_t *c = s->chunk;
    size_t gained = s->npages << PA_PAGE_SHIFT;
    int merged = 0;
    if (s->start > c->base) {
        pa_span_t *l = _pa_page_map_span_at(&h->map, s->start - 1);
        if (l && l->kind == PA_SPAN_FREE && l->chunk == c &&
            l->start + (l->npages << PA_PAGE_SHIFT) == s->start) {
            _pa_heap_unlink(h, l);
            l->npages += s->npages;
            _pa_heap_desc_release(h, s);
            s = l;
            merged = 1;
        }
    }
    uintptr_t end = s->start + (s->npages << PA_PAGE_SHIFT);
    if (end < c->base + c->size) {
        pa_span_t *r = _pa_page_map_span_at(&h->map, end);
        if (r && r->kind == PA_SPAN_FREE && r->chunk == c && r->start == end) {
            _pa_heap_unlink(h, r);
            s->npages += r->npages;
            _pa_heap_desc_release(h, r);
            merged = 1;
        }
    }
    if (!ends_named) _pa_heap_register(h, s);
    else if (merged) _pa_heap_register_last(h, s);
    _pa_heap_link(h, s);
    h->free_bytes += gained;
}

#endif /* PA_PAGE_HEAP_OPS_H */
