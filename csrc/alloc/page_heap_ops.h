/* alloc/page_heap_ops.h -- the page heap's hot operations, inline: best fit,
 * split, the free lists, coalescing (page_heap.c has the rest; new span
 * descriptors come from span_desc.c).  The
 * pool's large fast paths (pool.c) take and give spans here directly.
 * Not installed; names start with _pa_ (helpers are static to each
 * includer).  Lock rule as page_heap.h.
 */
#ifndef PA_PAGE_HEAP_OPS_H
#define PA_PAGE_HEAP_OPS_H

#include "page_heap.h"

/* The paths every large block takes (take a span, split it, coalesce on
 * free) are inlined into their callers and store as little as they can:
 * on random traffic each store queues behind the caller's stores to cold
 * blocks (stores retire in order), so every store saved counts.  They come
 * in small steps (best fit, unlink, cut off, file the rest; free left /
 * right neighbour, merge) so that the pool's fast paths can run them in
 * stages that save no registers; _pa_heap_take / _pa_heap_give compose
 * them for everyone else. */

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
        /* the sizes below np masked off in the first word only: no mask
           kept live through the loop (one register less, pool.c) */
        size_t w = np >> 6;
        uint64_t m = h->free_by_pages_mask[w] & (~0ull << (np & 63));
        while (!m && ++w < PA_HEAP_EXACT_PAGES / 64) m = h->free_by_pages_mask[w];
        if (m) return h->free_by_pages[w * 64 + (size_t)__builtin_ctzll(m)];
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

/* A span off the free lists (split to size) is the caller's: out of the
 * free bytes; the caller sets the kind and what that kind uses (owner,
 * state, requested). */
PA_HOT void _pa_heap_taken(pa_page_heap_t *h, pa_span_t *s) {
    h->free_bytes -= s->npages << PA_PAGE_SHIFT;
    s->kind = PA_SPAN_UNUSED;
}

/* Split a taken span: `s` keeps its first `np` pages, the unused
 * descriptor at hand describes the rest (returned). */
PA_HOT pa_span_t *_pa_heap_cut_off(pa_page_heap_t *h, pa_span_t *s, size_t np) {
    pa_span_t *tail = h->unused_descs;
    h->unused_descs = tail->next;
    _pa_heap_cut_tail(s, np, tail);
    return tail;
}

/* The rest cut off `s` becomes a free span; `s`'s new last page names it
 * (its first page does already). */
PA_HOT void _pa_heap_file_tail(pa_page_heap_t *h, pa_span_t *s, pa_span_t *tail) {
    _pa_heap_register(h, tail);
    _pa_heap_link(h, tail);
    _pa_heap_register_last(h, s);
}

/* The rest of a take once the free span `s` (at least `np` pages) is off
 * its list: its first `np` pages are the caller's, the others a free span
 * of their own (an unused descriptor at hand).  A free span registers both
 * ends, so an exact fit registers nothing. */
PA_HOT void _pa_heap_take_rest(pa_page_heap_t *h, pa_span_t *s, size_t np) {
    if (s->npages > np) {
        pa_span_t *tail = _pa_heap_cut_off(h, s, np);
        _pa_heap_file_tail(h, s, tail);
    }
    _pa_heap_taken(h, s);
}

/* _pa_heap_take with an unused descriptor at hand (h->unused_descs not
 * NULL): no call, so a caller that makes none either (the pool's large
 * fast path) saves no registers.  NULL: nothing fits. */
PA_HOT pa_span_t *_pa_heap_take_ready(pa_page_heap_t *h, size_t np) {
    pa_span_t *s = _pa_heap_best_fit(h, np);
    if (!s) return NULL;
    _pa_heap_unlink(h, s);
    _pa_heap_take_rest(h, s, np);
    return s;
}

/* _pa_heap_alloc, inline. */
PA_HOT pa_span_t *_pa_heap_take(pa_page_heap_t *h, size_t np, pa_status_t *st) {
    pa_span_t *s = NULL;
    if (pa_likely(h->unused_descs) || _pa_heap_desc_refill(h) == 0) s = _pa_heap_take_ready(h, np);
    if (!s) *st = PA_ERR_NOMEM;
    return s;
}

/* ---- coalescing ----------------------------------------------------------- */

/* The free span right before `s` in its chunk, or NULL. */
PA_HOT pa_span_t *_pa_heap_free_left(pa_page_heap_t *h, const pa_span_t *s) {
    const pa_heap_chunk_t *c = s->chunk;
    if (s->start <= c->base) return NULL;
    pa_span_t *l = _pa_page_map_span_at(&h->map, s->start - 1);
    return l && l->kind == PA_SPAN_FREE && l->chunk == c &&
                   l->start + (l->npages << PA_PAGE_SHIFT) == s->start
               ? l
               : NULL;
}

/* The free span right after `s` in its chunk, or NULL. */
PA_HOT pa_span_t *_pa_heap_free_right(pa_page_heap_t *h, const pa_span_t *s) {
    const pa_heap_chunk_t *c = s->chunk;
    uintptr_t end = s->start + (s->npages << PA_PAGE_SHIFT);
    if (end >= c->base + c->size) return NULL;
    pa_span_t *r = _pa_page_map_span_at(&h->map, end);
    return r && r->kind == PA_SPAN_FREE && r->chunk == c && r->start == end ? r : NULL;
}

/* `s` joins its free left neighbour `l` (off its list), which is the span
 * from now on. */
PA_HOT pa_span_t *_pa_heap_merge_left(pa_page_heap_t *h, pa_span_t *l, pa_span_t *s) {
    _pa_heap_unlink(h, l);
    l->npages += s->npages;
    _pa_heap_desc_release(h, s);
    return l;
}

/* `s` takes in its free right neighbour `r` (off its list). */
PA_HOT void _pa_heap_merge_right(pa_page_heap_t *h, pa_span_t *s, pa_span_t *r) {
    _pa_heap_unlink(h, r);
    s->npages += r->npages;
    _pa_heap_desc_release(h, r);
}

/* _pa_heap_free, inline.  A span given back: FREE, coalesced with free
 * neighbours of its chunk.  Only kind, npages and the list links matter
 * for a free span.
 * `ends_named`: the span's first and last page already name it (a large
 * span's do), so only a merge changes what its ends must say: the merged
 * span's first page is its left part's (which names it already), its
 * last page is registered again.  Else (a slab's or a region's tagged
 * pages, a new span) both ends are registered. */
PA_HOT void _pa_heap_give(pa_page_heap_t *h, pa_span_t *s, int ends_named) {
    int merged = 0;
    h->free_bytes += s->npages << PA_PAGE_SHIFT;
    pa_span_t *n = _pa_heap_free_left(h, s);
    if (n) {
        s = _pa_heap_merge_left(h, n, s);
        merged = 1;
    }
    n = _pa_heap_free_right(h, s);
    if (n) {
        _pa_heap_merge_right(h, s, n);
        merged = 1;
    }
    if (!ends_named) _pa_heap_register(h, s);
    else if (merged) _pa_heap_register_last(h, s);
    _pa_heap_link(h, s);
}

#endif /* PA_PAGE_HEAP_OPS_H */
