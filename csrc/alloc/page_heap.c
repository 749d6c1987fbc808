/* alloc/page_heap.c -- the page heap under every zone of the work pool.
 *
 * All OS memory of a pool comes in chunks from its pa_backend_t.  Chunks
 * are cut into spans: runs of 4 KiB pages described by pa_span_t records
 * kept OUTSIDE the memory (so decommitted or user-scribbled memory never
 * corrupts the allocator).  A span is free, a large block, a slab or a
 * buddy region; the zones (large.c, slab.c, buddy.c) take spans from here
 * and give them back.  This file is the page heap: best-fit allocation of
 * page runs with splitting, immediate coalescing with free neighbours in
 * the same chunk on free, growth by new chunks (PA_GROW_*), and release of
 * fully free chunks (unmap, or decommit and keep as a spare).
 *
 * Design choices:
 *  - Free spans of 1..127 pages sit in exact-size LIFO lists with a
 *    bitmap (smallest fitting list in O(1)); bigger ones in one list
 *    searched for the best fit (lowest address on ties).  Big spans are
 *    few, so the scan is short; the front-end caches absorb repeats.
 *  - The page map (page_map.h) answers "which span holds this address":
 *    free and large spans register their first and last page (enough for
 *    neighbour coalescing and for exact-start checks); slabs and buddy
 *    regions register every page (one-block slabs and regions only their
 *    first and last).  A stale entry may point to a recycled descriptor:
 *    every lookup checks that the span really covers the address, and
 *    descriptors are only returned to libc at destroy.
 *  - Leaves of the page map are created when a chunk is mapped, so
 *    nothing after that can fail for lack of metadata memory.
 *  - Contiguous growth: with the default backend the pool reserves one
 *    large address range up front (PROT_NONE, MAP_NORESERVE: no memory
 *    and no commit charge; `limit` bytes when a limit is set) and grows
 *    by committing the range's end (mprotect read/write), so the free
 *    tail merges with the new pages and a block may span earlier growth
 *    steps.  Separately mapped chunks could
 *    not merge: POW2 reserved 1+2+4+8+16 MiB for a 5.7 MiB peak.  Trims
 *    decommit the free tail.  Custom backends (whose map() may hand out
 *    committed memory) and a refused or exhausted range fall back to
 *    separate chunks.
 */
#include "page_heap_ops.h"

#include <stdlib.h>
#include <string.h>

/* A zeroed descriptor (cold paths: chunks, the reservation). */
static pa_span_t *span_desc_new(pa_page_heap_t *h) {
    pa_span_t *s = _pa_heap_desc_pop(h);
    if (s) memset(s, 0, sizeof(*s));
    return s;
}

size_t _pa_heap_fit_pages(pa_page_heap_t *h, size_t np) {
    pa_span_t *s = _pa_heap_best_fit(h, np);
    return s ? s->npages : 0;
}

/* ---- heap ------------------------------------------------------------------ */

pa_span_t *_pa_heap_alloc(pa_page_heap_t *h, size_t np, pa_status_t *st) {
    return _pa_heap_take(h, np, st);
}

void _pa_heap_free(pa_page_heap_t *h, pa_span_t *s) {
    _pa_heap_give(h, s, 0);
}

void _pa_heap_shrink(pa_page_heap_t *h, pa_span_t *s, size_t np) {
    if (s->npages <= np) return;
    pa_span_t *t = span_desc_new(h);
    if (!t) return; /* keep it whole: still correct, just larger */
    _pa_heap_cut_tail(s, np, t);
    _pa_heap_register(h, s);
    _pa_heap_free(h, t);
}

static void chunk_link(pa_heap_chunk_t **head, pa_heap_chunk_t *c) {
    c->prev = NULL;
    c->next = *head;
    if (*head) (*head)->prev = c;
    *head = c;
}

static void chunk_unlink(pa_heap_chunk_t **head, pa_heap_chunk_t *c) {
    if (c->prev) c->prev->next = c->next;
    else *head = c->next;
    if (c->next) c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

/* Make chunk `c` (already linked as committed) one free span. */
static int chunk_add_span(pa_page_heap_t *h, pa_heap_chunk_t *c) {
    pa_span_t *s = span_desc_new(h);
    if (!s) return -1;
    s->start = c->base;
    s->npages = c->size >> PA_PAGE_SHIFT;
    s->chunk = c;
    _pa_heap_register(h, s);
    _pa_heap_insert(h, s);
    return 0;
}

static size_t room_under_limit(const pa_page_heap_t *h) {
    if (!h->limit) return SIZE_MAX;
    size_t used = h->reserved + h->outside;
    return h->limit > used ? h->limit - used : 0;
}

static void track_peak_reserved(pa_page_heap_t *h) {
    if (h->reserved + h->outside > h->peak_reserved) h->peak_reserved = h->reserved + h->outside;
}

/* Map a new chunk of `size` bytes (or take a spare); 0 on success. */
static int map_new_chunk(pa_page_heap_t *h, size_t size, size_t need) {
    /* a decommitted spare that fits: the smallest */
    pa_heap_chunk_t *best = NULL;
    for (pa_heap_chunk_t *c = h->spares; c; c = c->next)
        if (c->size >= need && c->size <= room_under_limit(h) && (!best || c->size < best->size))
            best = c;
    if (best) {
        chunk_unlink(&h->spares, best);
        chunk_link(&h->chunks, best);
        best->decommitted = 0;
        if (chunk_add_span(h, best) != 0) {
            chunk_unlink(&h->chunks, best);
            chunk_link(&h->spares, best);
            best->decommitted = 1;
            return -1;
        }
        h->nchunks++;
        h->reserved += best->size;
        track_peak_reserved(h);
        return 0;
    }
    if (size > room_under_limit(h)) return -1;
    pa_heap_chunk_t *c = calloc(1, sizeof(*c));
    if (!c) return -1;
    void *m = _pa_backend_map(&h->backend, size, PA_PAGE_SIZE);
    if (!m) {
        free(c);
        return -1;
    }
    c->base = (uintptr_t)m;
    c->size = size;
    if (((c->base + size - 1) >> PA_ADDR_BITS) || _pa_page_map_ensure(&h->map, c->base, size) != 0) {
        _pa_backend_unmap(&h->backend, m, size);
        free(c);
        return -1;
    }
    chunk_link(&h->chunks, c);
    if (chunk_add_span(h, c) != 0) {
        chunk_unlink(&h->chunks, c);
        _pa_backend_unmap(&h->backend, m, size);
        free(c);
        return -1;
    }
    h->nchunks++;
    h->reserved += size;
    track_peak_reserved(h);
    return 0;
}

/* ---- the reservation ------------------------------------------------------ */

#define RESERVATION_MAX ((size_t)64 << 30) /* address space asked for without a limit */
#define RESERVATION_MIN ((size_t)1 << 30)  /* ...halved down to this when refused       */
#define GROW_CAP ((size_t)1 << 30)

/* Reserve the pool's address range (default backend, growth allowed):
 * `limit` bytes, or RESERVATION_MAX.  Leaves h->reservation NULL when refused. */
static void reservation_init(pa_page_heap_t *h) {
    if (h->growth == PA_GROW_NONE || !_pa_backend_is_default(&h->backend)) return;
    size_t cap = RESERVATION_MAX;
    if (h->limit && !_pa_align_up(h->limit, PA_PAGE_SIZE, &cap)) return;
    void *m;
    for (;;) {
        m = _pa_os_reserve(cap);
        if (m) break;
        if (cap <= RESERVATION_MIN || cap <= PA_PAGE_SIZE) return;
        cap = (cap / 2) & ~(PA_PAGE_SIZE - 1);
    }
    pa_heap_chunk_t *c = calloc(1, sizeof(*c));
    if (!c || (((uintptr_t)m + cap - 1) >> PA_ADDR_BITS)) {
        free(c);
        _pa_backend_unmap(&h->backend, m, cap);
        return;
    }
    c->base = (uintptr_t)m;
    c->address_space = cap;
    c->is_reservation = 1;
    h->reservation = c;
}

/* Huge pages.  On random traffic over a large heap nearly every block
 * handed out lies on a page whose translation is not in the TLB (its
 * 4 KiB entries cover a few MiB), so the first touch of a block paid a
 * page walk on top of its cache misses.  With `huge` (the pool's
 * huge_pages option; off by default: the collapses cost a few ms per
 * segment while the heap grows, and the footprint follows the committed
 * rather than the touched bytes), once the committed part of the
 * reservation reaches HUGE_FROM, the whole reservation is marked for
 * transparent huge pages (a fault in a PA_HUGE_SIZE segment committed
 * whole maps a huge page), and every segment that growth completes is
 * collapsed into one (it was usually touched in 4 KiB pages while it was
 * the partial segment at the committed end).  A huge page is resident
 * whole, so the footprint follows the committed bytes (the heap's spans,
 * used or free) rather than the touched pages; the partial segment at
 * the committed end stays in 4 KiB pages.  Failures (no THP, an old
 * kernel, a segment never touched, no memory) only leave 4 KiB pages. */
#define HUGE_FROM ((size_t)16 << 20)

static void reservation_huge(pa_page_heap_t *h) {
    pa_heap_chunk_t *c = h->reservation;
    if (!h->huge || c->size < HUGE_FROM || c->base % PA_HUGE_SIZE ||
        c->address_space % PA_HUGE_SIZE)
        return;
    if (!c->huge_end) {
        if (_pa_os_huge((void *)c->base, c->address_space, 0) != 0) return;
        c->huge_end = c->base;
    }
    uintptr_t end = (c->base + c->size) & ~(uintptr_t)(PA_HUGE_SIZE - 1);
    for (; c->huge_end < end; c->huge_end += PA_HUGE_SIZE)
        (void)_pa_os_huge((void *)c->huge_end, PA_HUGE_SIZE, 1);
}

/* The free span ending at the committed end of the reservation, or NULL. */
static pa_span_t *reservation_free_tail(const pa_page_heap_t *h) {
    const pa_heap_chunk_t *c = h->reservation;
    if (!c || !c->size) return NULL;
    uintptr_t end = c->base + c->size;
    pa_span_t *s = _pa_page_map_span_at(&h->map, end - 1);
    if (s && s->kind == PA_SPAN_FREE && s->chunk == c &&
        s->start + (s->npages << PA_PAGE_SHIFT) == end)
        return s;
    return NULL;
}

/* Commit `bytes` more at the end of the reservation (one mprotect; the
 * pages fault in on use): a free span that merges with a free tail. */
static int reservation_commit(pa_page_heap_t *h, size_t bytes) {
    pa_heap_chunk_t *c = h->reservation;
    if (!bytes || bytes > c->address_space - c->size || bytes > room_under_limit(h)) return -1;
    uintptr_t at = c->base + c->size;
    if (_pa_page_map_ensure(&h->map, at, bytes) != 0) return -1;
    pa_span_t *s = span_desc_new(h);
    if (!s) return -1;
    if (_pa_os_commit((void *)at, bytes, 1) != 0) {
        _pa_heap_desc_release(h, s);
        return -1;
    }
    if (c->size == 0) {
        chunk_link(&h->chunks, c);
        h->nchunks++;
    }
    c->size += bytes;
    s->start = at;
    s->npages = bytes >> PA_PAGE_SHIFT;
    s->chunk = c;
    h->reserved += bytes;
    track_peak_reserved(h);
    _pa_heap_free(h, s); /* coalesces with the old free tail */
    reservation_huge(h);
    return 0;
}

/* Give back (decommit) the free tail of the reservation, down to
 * `target` reserved bytes at most; returns the bytes given back. */
static size_t reservation_decommit_tail(pa_page_heap_t *h, size_t target) {
    pa_heap_chunk_t *c = h->reservation;
    pa_span_t *t = reservation_free_tail(h);
    if (!t || h->reserved <= target) return 0;
    size_t bytes = t->npages << PA_PAGE_SHIFT, rel = h->reserved - target;
    if (!_pa_align_up(rel, PA_PAGE_SIZE, &rel) || rel > bytes) rel = bytes;
    uintptr_t at = c->base + c->size - rel;
    if (_pa_os_commit((void *)at, rel, 0) != 0) return 0;
    _pa_heap_remove(h, t);
    if (rel == bytes) {
        _pa_heap_desc_release(h, t);
    } else {
        t->npages -= rel >> PA_PAGE_SHIFT;
        _pa_heap_register(h, t);
        _pa_heap_insert(h, t);
    }
    c->size -= rel;
    h->reserved -= rel;
    if (c->huge_end > c->base + c->size) /* the cut segment is split now */
        c->huge_end = (c->base + c->size) & ~(uintptr_t)(PA_HUGE_SIZE - 1);
    if (c->size == 0) {
        chunk_unlink(&h->chunks, c);
        h->nchunks--;
    }
    return rel;
}

/* Grow inside the reservation by what the free tail lacks for `need`
 * bytes (POW2: at least double the committed size). */
static int reservation_grow(pa_page_heap_t *h, size_t need) {
    pa_span_t *t = reservation_free_tail(h);
    size_t have = t ? t->npages << PA_PAGE_SHIFT : 0;
    size_t lack = need > have ? need - have : need;
    size_t ext = lack;
    if (h->growth == PA_GROW_POW2) {
        size_t dbl = h->reservation->size ? h->reservation->size : h->chunk_size;
        if (dbl > GROW_CAP) dbl = GROW_CAP;
        if (!_pa_align_up(dbl, PA_PAGE_SIZE, &dbl)) dbl = lack;
        if (ext < dbl) ext = dbl;
        if (ext > room_under_limit(h) || ext > h->reservation->address_space - h->reservation->size) ext = lack;
    }
    if (reservation_commit(h, ext) != 0 && (ext == lack || reservation_commit(h, lack) != 0)) return -1;
    h->last_grow = ext;
    h->grows++;
    return 0;
}

int _pa_heap_grow(pa_page_heap_t *h, size_t np) {
    if (np > (SIZE_MAX >> PA_PAGE_SHIFT) / 2) return -1;
    size_t need = np << PA_PAGE_SHIFT;
    size_t want = need;
    if (h->growth == PA_GROW_NONE) return -1;
    /* the reservation first; separate chunks once it is exhausted */
    if (h->reservation && reservation_grow(h, need) == 0) return 0;
    if (h->growth == PA_GROW_POW2) {
        size_t w = _pa_next_pow2(need);
        size_t dbl = h->last_grow ? h->last_grow * 2 : h->chunk_size;
        if (dbl > ((size_t)1 << 30)) dbl = (size_t)1 << 30;
        if (w < dbl) w = dbl;
        if (w >= need) want = w;
    }
    if (want > room_under_limit(h)) want = need;
    if (h->growth == PA_GROW_REQUESTED) {
        /* footprint first: no fully free chunk could serve this request
         * (the heap was asked), so give them back before mapping -- on
         * the pool-bench inference traces this took peak reserved / peak
         * live from 1.57 to 1.31 (ResNet-50) and 2.05 to 1.43 (dynamic
         * shapes), at the price of more system calls */
        _pa_heap_release(h, 0);
    }
    if (need > room_under_limit(h)) {
        /* fully free chunks are dead weight under the limit */
        size_t target = h->limit > need + h->outside ? h->limit - need - h->outside : 0;
        _pa_heap_release(h, target);
        if (need > room_under_limit(h)) return -1;
    }
    if (map_new_chunk(h, want, need) != 0 && (want == need || map_new_chunk(h, need, need) != 0))
        return -1;
    h->last_grow = want;
    h->grows++;
    return 0;
}

/* Is chunk `c` one free span?  Returns it or NULL. */
static pa_span_t *chunk_free_span(const pa_page_heap_t *h, const pa_heap_chunk_t *c) {
    pa_span_t *s = _pa_page_map_span_at(&h->map, c->base);
    if (s && s->kind == PA_SPAN_FREE && s->start == c->base &&
        (s->npages << PA_PAGE_SHIFT) == c->size)
        return s;
    return NULL;
}

size_t _pa_heap_release(pa_page_heap_t *h, size_t target) {
    size_t released = 0;
    if (h->growth == PA_GROW_NONE) return 0;
    pa_heap_chunk_t *c = h->chunks;
    while (c && h->reserved > target) {
        pa_heap_chunk_t *next = c->next;
        pa_span_t *s = c->is_reservation ? NULL : chunk_free_span(h, c);
        if (s) {
            _pa_heap_remove(h, s);
            _pa_heap_desc_release(h, s);
            chunk_unlink(&h->chunks, c);
            h->nchunks--;
            h->reserved -= c->size;
            released += c->size;
            if (h->release == PA_RELEASE_DECOMMIT && h->backend.decommit &&
                h->backend.decommit((void *)c->base, c->size, h->backend.ctx) == 0) {
                c->decommitted = 1;
                chunk_link(&h->spares, c);
            } else {
                _pa_backend_unmap(&h->backend, (void *)c->base, c->size);
                free(c);
            }
        }
        c = next;
    }
    if (h->reservation) released += reservation_decommit_tail(h, target);
    return released;
}

size_t _pa_heap_largest_free(const pa_page_heap_t *h) {
    for (size_t np = PA_HEAP_EXACT_PAGES; np-- > 1;)
        if (h->free_by_pages[np]) {
            size_t best = np;
            for (pa_span_t *s = h->free_big; s; s = s->next)
                if (s->npages > best) best = s->npages;
            return best << PA_PAGE_SHIFT;
        }
    size_t best = 0;
    for (pa_span_t *s = h->free_big; s; s = s->next)
        if (s->npages > best) best = s->npages;
    return best << PA_PAGE_SHIFT;
}

int _pa_heap_init(pa_page_heap_t *h) {
    if (_pa_page_map_init(&h->map) != 0) return -1;
    size_t first = h->chunk_size;
    if (h->growth == PA_GROW_NONE && h->limit && (!first || first > h->limit))
        first = h->limit;
    if (!_pa_align_up(first, PA_PAGE_SIZE, &first)) return -1;
    if (h->limit && first > h->limit) first = h->limit & ~(PA_PAGE_SIZE - 1);
    reservation_init(h);
    if (first == 0) return 0; /* nothing to map up front */
    h->last_grow = first;
    if (h->reservation && reservation_commit(h, first) == 0) return 0;
    return map_new_chunk(h, first, first);
}

void _pa_heap_destroy(pa_page_heap_t *h) {
    pa_heap_chunk_t *lists[2] = {h->chunks, h->spares};
    for (int k = 0; k < 2; k++) {
        for (pa_heap_chunk_t *c = lists[k]; c;) {
            pa_heap_chunk_t *n = c->next;
            if (!c->is_reservation) {
                _pa_backend_unmap(&h->backend, (void *)c->base, c->size);
                free(c);
            }
            c = n;
        }
    }
    h->chunks = h->spares = NULL;
    if (h->reservation) {
        _pa_backend_unmap(&h->backend, (void *)h->reservation->base, h->reservation->address_space);
        free(h->reservation);
        h->reservation = NULL;
    }
    _pa_page_map_destroy(&h->map);
    _pa_heap_desc_destroy(h);
    h->reserved = 0;
}

size_t _pa_heap_check(const pa_page_heap_t *h) {
    size_t broken = 0, nfree_spans = 0, free_bytes = 0, reserved = 0, n = 0;
    for (const pa_heap_chunk_t *c = h->chunks; c; c = c->next, n++) {
        reserved += c->size;
        if (c->decommitted) broken++;
        if (c->is_reservation && (c != h->reservation || c->size == 0 || c->size > c->address_space)) broken++;
        uintptr_t a = c->base, end = c->base + c->size;
        int prev_free = 0;
        while (a < end) {
            pa_span_t *s = _pa_page_map_span_at(&h->map, a);
            if (!s || s->start != a || s->chunk != c || s->npages == 0 ||
                (s->npages << PA_PAGE_SHIFT) > end - a) {
                broken++;
                break;
            }
            uintptr_t last = a + ((s->npages - 1) << PA_PAGE_SHIFT);
            if (_pa_page_map_span_at(&h->map, last) != s) broken++;
            switch (s->kind) {
            case PA_SPAN_FREE:
                if (prev_free) broken++; /* not coalesced */
                nfree_spans++;
                free_bytes += s->npages << PA_PAGE_SHIFT;
                break;
            case PA_SPAN_LARGE:
                if (s->state != PA_BLOCK_LIVE && s->state != PA_BLOCK_CACHED) broken++;
                break;
            case PA_SPAN_SLAB:
            case PA_SPAN_BUDDY: /* a slab / region names its span first */
                if (!s->owner || _pa_owner_span(s->owner) != s) broken++;
                break;
            default:
                broken++;
            }
            prev_free = s->kind == PA_SPAN_FREE;
            a += s->npages << PA_PAGE_SHIFT;
        }
    }
    if (n != h->nchunks || reserved != h->reserved) broken++;
    if (h->limit && h->reserved + h->outside > h->limit) broken++;
    if (h->peak_reserved < h->reserved + h->outside) broken++;
    size_t listed = 0, listed_bytes = 0;
    for (size_t np = 0; np <= PA_HEAP_EXACT_PAGES; np++) {
        const pa_span_t *head = np < PA_HEAP_EXACT_PAGES ? h->free_by_pages[np] : h->free_big;
        if (np < PA_HEAP_EXACT_PAGES &&
            !!(h->free_by_pages_mask[np >> 6] & (1ull << (np & 63))) != (head != NULL))
            broken++;
        const pa_span_t *prev = NULL;
        for (const pa_span_t *s = head; s; prev = s, s = s->next) {
            listed++;
            listed_bytes += s->npages << PA_PAGE_SHIFT;
            if (s->kind != PA_SPAN_FREE || s->prev != prev) broken++;
            if (np < PA_HEAP_EXACT_PAGES ? s->npages != np : s->npages < PA_HEAP_EXACT_PAGES) broken++;
            if (listed > nfree_spans + 1) return broken + 1; /* cycle */
        }
    }
    if (listed != nfree_spans || listed_bytes != free_bytes || free_bytes != h->free_bytes)
        broken++;
    for (const pa_heap_chunk_t *c = h->spares; c; c = c->next)
        if (!c->decommitted) broken++;
    return broken;
}

pa_span_t *_pa_heap_next_span(const pa_page_heap_t *h, pa_span_iter_t *it,
                              size_t *broken) {
    for (; it->chunk; it->chunk = it->chunk->next, it->addr = 0) {
        const pa_heap_chunk_t *c = it->chunk;
        uintptr_t a = it->addr ? it->addr : c->base;
        if (a >= c->base + c->size) continue;
        pa_span_t *s = _pa_page_map_lookup(&h->map, a);
        if (!s || s->start != a) {
            if (broken) (*broken)++;
            continue;
        }
        it->addr = a + (s->npages << PA_PAGE_SHIFT);
        return s;
    }
    return NULL;
}
