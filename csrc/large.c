/* large.c -- the page heap under every zone, and the large-block zone.
 *
 * All OS memory of a pool comes in chunks from its pa_backend_t.  Chunks
 * are cut into spans: runs of 4 KiB pages described by pa_span_t records
 * kept OUTSIDE the memory (so decommitted or user-scribbled memory never
 * corrupts the allocator).  A span is free, a large block, a slab or a
 * buddy region.  This file is the page heap: best-fit allocation of page
 * runs with splitting, immediate coalescing with free neighbours in the
 * same chunk on free, growth by new chunks (PA_GROW_*), and release of
 * fully free chunks (unmap, or decommit and keep as a spare).  Large
 * blocks (over the large threshold) are simply spans of their own.
 *
 * Design choices:
 *  - Free spans of 1..127 pages sit in exact-size LIFO lists with a
 *    bitmap (smallest fitting list in O(1)); bigger ones in one list
 *    searched for the best fit (lowest address on ties).  Large blocks
 *    are few, so the scan is short; the front-end caches absorb repeats.
 *  - A two-level page map (address >> 12 -> span) answers "which span
 *    holds this address" in two loads, without reading pool memory, so
 *    foreign, interior and stale pointers are recognised safely.  Free
 *    and large spans register their first and last page (enough for
 *    neighbour coalescing and for exact-start checks); slabs and buddy
 *    regions register every page (one-block slabs and regions only their
 *    first and last).  A stale entry may point to a recycled descriptor:
 *    every lookup checks that the span really covers the address, and
 *    descriptors are only returned to libc at destroy.  Slab and region
 *    pages hold their slab / region pointer tagged in the low bits (one
 *    load less on free); released slabs and regions leave them stale
 *    (their metadata is recycled, see pool_internal.h).
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
#include "pool_internal.h"

#include <stdlib.h>
#include <string.h>

#define DESC_BLOCK 256

/* ---- page map --------------------------------------------------------- */

static pa_span_t **map_slot(const pa_pool_impl_t *p, uintptr_t addr) {
    uintptr_t pg = addr >> PA_PAGE_SHIFT;
    pa_span_t **leaf = p->map[pg >> PA_MAP_L2_BITS];
    return leaf ? &leaf[pg & (((uintptr_t)1 << PA_MAP_L2_BITS) - 1)] : NULL;
}

static pa_span_t *map_span_at(const pa_pool_impl_t *p, uintptr_t addr) {
    return _pa_map_decode(_pa_map_entry(p, addr));
}

void _pa_map_set_owner(pa_pool_impl_t *p, pa_span_t *s, uintptr_t tagged, int all_pages) {
    uintptr_t last = s->start + ((s->npages - 1) << PA_PAGE_SHIFT);
    if (!all_pages) {
        *map_slot(p, s->start) = (pa_span_t *)tagged;
        *map_slot(p, last) = (pa_span_t *)tagged;
        return;
    }
    for (uintptr_t a = s->start; a <= last; a += PA_PAGE_SIZE) *map_slot(p, a) = (pa_span_t *)tagged;
}

int _pa_map_set_range(pa_pool_impl_t *p, pa_span_t *s, int all_pages) {
    uintptr_t last = s->start + ((s->npages - 1) << PA_PAGE_SHIFT);
    if (!all_pages) {
        *map_slot(p, s->start) = s;
        *map_slot(p, last) = s;
        return 0;
    }
    for (uintptr_t a = s->start; a <= last; a += PA_PAGE_SIZE) *map_slot(p, a) = s;
    return 0;
}

static int map_ensure_leaves(pa_pool_impl_t *p, uintptr_t base, size_t size) {
    uintptr_t first = (base >> PA_PAGE_SHIFT) >> PA_MAP_L2_BITS;
    uintptr_t last = ((base + size - 1) >> PA_PAGE_SHIFT) >> PA_MAP_L2_BITS;
    for (uintptr_t i = first; i <= last; i++) {
        if (p->map[i]) continue;
        p->map[i] = calloc((size_t)1 << PA_MAP_L2_BITS, sizeof(pa_span_t *));
        if (!p->map[i]) return -1;
    }
    return 0;
}

/* ---- span descriptors ---------------------------------------------------- */

static pa_span_t *span_desc_new(pa_pool_impl_t *p) {
    if (!p->unused_descs) {
        if (p->ndesc_arrays == p->desc_arrays_cap) {
            size_t nc = p->desc_arrays_cap ? p->desc_arrays_cap * 2 : 16;
            void **nb = realloc(p->desc_arrays, nc * sizeof(void *));
            if (!nb) return NULL;
            p->desc_arrays = nb;
            p->desc_arrays_cap = nc;
        }
        pa_span_t *blk = calloc(DESC_BLOCK, sizeof(pa_span_t));
        if (!blk) return NULL;
        p->desc_arrays[p->ndesc_arrays++] = blk;
        for (size_t i = 0; i < DESC_BLOCK; i++) {
            blk[i].next = p->unused_descs;
            p->unused_descs = &blk[i];
        }
    }
    pa_span_t *s = p->unused_descs;
    p->unused_descs = s->next;
    memset(s, 0, sizeof(*s));
    return s;
}

static void span_desc_release(pa_pool_impl_t *p, pa_span_t *s) {
    s->start = 0;
    s->npages = 0;
    s->kind = PA_SPAN_UNUSED;
    s->owner = NULL;
    s->next = p->unused_descs;
    p->unused_descs = s;
}

/* ---- free lists ----------------------------------------------------------- */

static pa_span_t **free_list_for(pa_pool_impl_t *p, size_t np) {
    return np < PA_HEAP_EXACT_PAGES ? &p->free_by_pages[np] : &p->free_big;
}

static void free_span_insert(pa_pool_impl_t *p, pa_span_t *s) {
    pa_span_t **head = free_list_for(p, s->npages);
    s->kind = PA_SPAN_FREE;
    s->prev = NULL;
    s->next = *head;
    if (*head) (*head)->prev = s;
    *head = s;
    if (s->npages < PA_HEAP_EXACT_PAGES) p->free_by_pages_mask[s->npages >> 6] |= 1ull << (s->npages & 63);
    p->heap_free_bytes += s->npages << PA_PAGE_SHIFT;
}

static void free_span_remove(pa_pool_impl_t *p, pa_span_t *s) {
    pa_span_t **head = free_list_for(p, s->npages);
    if (s->prev) s->prev->next = s->next;
    else *head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
    if (s->npages < PA_HEAP_EXACT_PAGES && !*head)
        p->free_by_pages_mask[s->npages >> 6] &= ~(1ull << (s->npages & 63));
    p->heap_free_bytes -= s->npages << PA_PAGE_SHIFT;
}

static pa_span_t *best_fit(pa_pool_impl_t *p, size_t np) {
    if (np < PA_HEAP_EXACT_PAGES) {
        for (size_t w = np >> 6; w < PA_HEAP_EXACT_PAGES / 64; w++) {
            uint64_t m = p->free_by_pages_mask[w];
            if (w == (np >> 6)) m &= ~0ull << (np & 63);
            if (m) return p->free_by_pages[w * 64 + (size_t)__builtin_ctzll(m)];
        }
    }
    pa_span_t *best = NULL;
    for (pa_span_t *s = p->free_big; s; s = s->next) {
        if (s->npages < np) continue;
        if (!best || s->npages < best->npages ||
            (s->npages == best->npages && s->start < best->start))
            best = s;
        if (best->npages == np) break;
    }
    return best;
}

size_t _pa_heap_fit_pages(pa_pool_impl_t *p, size_t np) {
    pa_span_t *s = best_fit(p, np);
    return s ? s->npages : 0;
}

/* ---- heap ------------------------------------------------------------------ */

pa_span_t *_pa_heap_alloc(pa_pool_impl_t *p, size_t np, pa_status_t *st) {
    pa_span_t *s = best_fit(p, np);
    if (!s) {
        *st = PA_ERR_NOMEM;
        return NULL;
    }
    pa_span_t *tail = NULL;
    if (s->npages > np) {
        tail = span_desc_new(p);
        if (!tail) {
            *st = PA_ERR_NOMEM;
            return NULL;
        }
    }
    free_span_remove(p, s);
    if (tail) {
        tail->start = s->start + (np << PA_PAGE_SHIFT);
        tail->npages = s->npages - np;
        tail->chunk = s->chunk;
        s->npages = np;
        _pa_map_set_range(p, tail, 0);
        free_span_insert(p, tail);
    }
    _pa_map_set_range(p, s, 0);
    s->kind = PA_SPAN_UNUSED; /* the caller sets the kind */
    s->owner = NULL;
    s->requested = 0;
    s->state = 0;
    return s;
}

void _pa_heap_free(pa_pool_impl_t *p, pa_span_t *s) {
    s->owner = NULL;
    s->requested = 0;
    s->state = 0;
    s->kind = PA_SPAN_FREE;
    pa_heap_chunk_t *c = s->chunk;
    if (s->start > c->base) {
        pa_span_t *l = map_span_at(p, s->start - 1);
        if (l && l->kind == PA_SPAN_FREE && l->chunk == c &&
            l->start + (l->npages << PA_PAGE_SHIFT) == s->start) {
            free_span_remove(p, l);
            l->npages += s->npages;
            span_desc_release(p, s);
            s = l;
        }
    }
    uintptr_t end = s->start + (s->npages << PA_PAGE_SHIFT);
    if (end < c->base + c->size) {
        pa_span_t *r = map_span_at(p, end);
        if (r && r->kind == PA_SPAN_FREE && r->chunk == c && r->start == end) {
            free_span_remove(p, r);
            s->npages += r->npages;
            span_desc_release(p, r);
        }
    }
    _pa_map_set_range(p, s, 0);
    free_span_insert(p, s);
}

void _pa_heap_shrink(pa_pool_impl_t *p, pa_span_t *s, size_t np) {
    if (s->npages <= np) return;
    pa_span_t *t = span_desc_new(p);
    if (!t) return; /* keep it whole: still correct, just larger */
    t->start = s->start + (np << PA_PAGE_SHIFT);
    t->npages = s->npages - np;
    t->chunk = s->chunk;
    s->npages = np;
    _pa_map_set_range(p, s, 0);
    _pa_heap_free(p, t);
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
static int chunk_add_span(pa_pool_impl_t *p, pa_heap_chunk_t *c) {
    pa_span_t *s = span_desc_new(p);
    if (!s) return -1;
    s->start = c->base;
    s->npages = c->size >> PA_PAGE_SHIFT;
    s->chunk = c;
    _pa_map_set_range(p, s, 0);
    free_span_insert(p, s);
    return 0;
}

static size_t room_under_limit(const pa_pool_impl_t *p) {
    if (!p->limit) return SIZE_MAX;
    return p->limit > p->reserved ? p->limit - p->reserved : 0;
}

static void track_peak_reserved(pa_pool_impl_t *p) {
    if (p->reserved > p->peak_reserved) p->peak_reserved = p->reserved;
}

/* Map a new chunk of `size` bytes (or take a spare); 0 on success. */
static int map_new_chunk(pa_pool_impl_t *p, size_t size, size_t need) {
    /* a decommitted spare that fits: the smallest */
    pa_heap_chunk_t *best = NULL;
    for (pa_heap_chunk_t *c = p->spares; c; c = c->next)
        if (c->size >= need && c->size <= room_under_limit(p) && (!best || c->size < best->size))
            best = c;
    if (best) {
        chunk_unlink(&p->spares, best);
        chunk_link(&p->chunks, best);
        best->decommitted = 0;
        if (chunk_add_span(p, best) != 0) {
            chunk_unlink(&p->chunks, best);
            chunk_link(&p->spares, best);
            best->decommitted = 1;
            return -1;
        }
        p->nchunks++;
        p->reserved += best->size;
        track_peak_reserved(p);
        return 0;
    }
    if (size > room_under_limit(p)) return -1;
    pa_heap_chunk_t *c = calloc(1, sizeof(*c));
    if (!c) return -1;
    void *m = _pa_backend_map(&p->backend, size, PA_PAGE_SIZE);
    if (!m) {
        free(c);
        return -1;
    }
    c->base = (uintptr_t)m;
    c->size = size;
    if (((c->base + size - 1) >> PA_ADDR_BITS) || map_ensure_leaves(p, c->base, size) != 0) {
        _pa_backend_unmap(&p->backend, m, size);
        free(c);
        return -1;
    }
    chunk_link(&p->chunks, c);
    if (chunk_add_span(p, c) != 0) {
        chunk_unlink(&p->chunks, c);
        _pa_backend_unmap(&p->backend, m, size);
        free(c);
        return -1;
    }
    p->nchunks++;
    p->reserved += size;
    track_peak_reserved(p);
    return 0;
}

/* ---- the reservation ------------------------------------------------------ */

#define RESERVATION_MAX ((size_t)64 << 30) /* address space asked for without a limit */
#define RESERVATION_MIN ((size_t)1 << 30)  /* ...halved down to this when refused       */
#define GROW_CAP ((size_t)1 << 30)

/* Reserve the pool's address range (default backend, growth allowed):
 * `limit` bytes, or RESERVATION_MAX.  Leaves p->reservation NULL when refused. */
static void reservation_init(pa_pool_impl_t *p) {
    if (p->growth == PA_GROW_NONE || !_pa_backend_is_default(&p->backend)) return;
    size_t cap = RESERVATION_MAX;
    if (p->limit && !_pa_align_up(p->limit, PA_PAGE_SIZE, &cap)) return;
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
        _pa_backend_unmap(&p->backend, m, cap);
        return;
    }
    c->base = (uintptr_t)m;
    c->address_space = cap;
    c->is_reservation = 1;
    p->reservation = c;
}

/* The free span ending at the committed end of the reservation, or NULL. */
static pa_span_t *reservation_free_tail(const pa_pool_impl_t *p) {
    const pa_heap_chunk_t *c = p->reservation;
    if (!c || !c->size) return NULL;
    uintptr_t end = c->base + c->size;
    pa_span_t *s = map_span_at(p, end - 1);
    if (s && s->kind == PA_SPAN_FREE && s->chunk == c &&
        s->start + (s->npages << PA_PAGE_SHIFT) == end)
        return s;
    return NULL;
}

/* Commit `bytes` more at the end of the reservation (one mprotect; the
 * pages fault in on use): a free span that merges with a free tail. */
static int reservation_commit(pa_pool_impl_t *p, size_t bytes) {
    pa_heap_chunk_t *c = p->reservation;
    if (!bytes || bytes > c->address_space - c->size || bytes > room_under_limit(p)) return -1;
    uintptr_t at = c->base + c->size;
    if (map_ensure_leaves(p, at, bytes) != 0) return -1;
    pa_span_t *s = span_desc_new(p);
    if (!s) return -1;
    if (_pa_os_commit((void *)at, bytes, 1) != 0) {
        span_desc_release(p, s);
        return -1;
    }
    if (c->size == 0) {
        chunk_link(&p->chunks, c);
        p->nchunks++;
    }
    c->size += bytes;
    s->start = at;
    s->npages = bytes >> PA_PAGE_SHIFT;
    s->chunk = c;
    p->reserved += bytes;
    track_peak_reserved(p);
    _pa_heap_free(p, s); /* coalesces with the old free tail */
    return 0;
}

/* Give back (decommit) the free tail of the reservation, down to
 * `target` reserved bytes at most; returns the bytes given back. */
static size_t reservation_decommit_tail(pa_pool_impl_t *p, size_t target) {
    pa_heap_chunk_t *c = p->reservation;
    pa_span_t *t = reservation_free_tail(p);
    if (!t || p->reserved <= target) return 0;
    size_t bytes = t->npages << PA_PAGE_SHIFT, rel = p->reserved - target;
    if (!_pa_align_up(rel, PA_PAGE_SIZE, &rel) || rel > bytes) rel = bytes;
    uintptr_t at = c->base + c->size - rel;
    if (_pa_os_commit((void *)at, rel, 0) != 0) return 0;
    free_span_remove(p, t);
    if (rel == bytes) {
        span_desc_release(p, t);
    } else {
        t->npages -= rel >> PA_PAGE_SHIFT;
        _pa_map_set_range(p, t, 0);
        free_span_insert(p, t);
    }
    c->size -= rel;
    p->reserved -= rel;
    if (c->size == 0) {
        chunk_unlink(&p->chunks, c);
        p->nchunks--;
    }
    return rel;
}

/* Grow inside the reservation by what the free tail lacks for `need`
 * bytes (POW2: at least double the committed size). */
static int reservation_grow(pa_pool_impl_t *p, size_t need) {
    pa_span_t *t = reservation_free_tail(p);
    size_t have = t ? t->npages << PA_PAGE_SHIFT : 0;
    size_t lack = need > have ? need - have : need;
    size_t ext = lack;
    if (p->growth == PA_GROW_POW2) {
        size_t dbl = p->reservation->size ? p->reservation->size : p->chunk_size;
        if (dbl > GROW_CAP) dbl = GROW_CAP;
        if (!_pa_align_up(dbl, PA_PAGE_SIZE, &dbl)) dbl = lack;
        if (ext < dbl) ext = dbl;
        if (ext > room_under_limit(p) || ext > p->reservation->address_space - p->reservation->size) ext = lack;
    }
    if (reservation_commit(p, ext) != 0 && (ext == lack || reservation_commit(p, lack) != 0)) return -1;
    p->last_grow = ext;
    p->grows++;
    return 0;
}

int _pa_heap_grow(pa_pool_impl_t *p, size_t np) {
    if (np > (SIZE_MAX >> PA_PAGE_SHIFT) / 2) return -1;
    size_t need = np << PA_PAGE_SHIFT;
    size_t want = need;
    if (p->growth == PA_GROW_NONE) return -1;
    /* the reservation first; separate chunks once it is exhausted */
    if (p->reservation && reservation_grow(p, need) == 0) return 0;
    if (p->growth == PA_GROW_POW2) {
        size_t w = _pa_next_pow2(need);
        size_t dbl = p->last_grow ? p->last_grow * 2 : p->chunk_size;
        if (dbl > ((size_t)1 << 30)) dbl = (size_t)1 << 30;
        if (w < dbl) w = dbl;
        if (w >= need) want = w;
    }
    if (want > room_under_limit(p)) want = need;
    if (p->growth == PA_GROW_REQUESTED) {
        /* footprint first: no fully free chunk could serve this request
         * (the heap was asked), so give them back before mapping -- on
         * the pool-bench inference traces this took peak reserved / peak
         * live from 1.57 to 1.31 (ResNet-50) and 2.05 to 1.43 (dynamic
         * shapes), at the price of more system calls */
        _pa_heap_release(p, 0);
    }
    if (need > room_under_limit(p)) {
        /* fully free chunks are dead weight under the limit */
        size_t target = p->limit > need ? p->limit - need : 0;
        _pa_heap_release(p, target);
        if (need > room_under_limit(p)) return -1;
    }
    if (map_new_chunk(p, want, need) != 0 && (want == need || map_new_chunk(p, need, need) != 0))
        return -1;
    p->last_grow = want;
    p->grows++;
    return 0;
}

/* Is chunk `c` one free span?  Returns it or NULL. */
static pa_span_t *chunk_free_span(const pa_pool_impl_t *p, const pa_heap_chunk_t *c) {
    pa_span_t *s = map_span_at(p, c->base);
    if (s && s->kind == PA_SPAN_FREE && s->start == c->base &&
        (s->npages << PA_PAGE_SHIFT) == c->size)
        return s;
    return NULL;
}

size_t _pa_heap_release(pa_pool_impl_t *p, size_t target) {
    size_t released = 0;
    if (p->growth == PA_GROW_NONE) return 0;
    pa_heap_chunk_t *c = p->chunks;
    while (c && p->reserved > target) {
        pa_heap_chunk_t *next = c->next;
        pa_span_t *s = c->is_reservation ? NULL : chunk_free_span(p, c);
        if (s) {
            free_span_remove(p, s);
            span_desc_release(p, s);
            chunk_unlink(&p->chunks, c);
            p->nchunks--;
            p->reserved -= c->size;
            released += c->size;
            if (p->release == PA_RELEASE_DECOMMIT && p->backend.decommit &&
                p->backend.decommit((void *)c->base, c->size, p->backend.ctx) == 0) {
                c->decommitted = 1;
                chunk_link(&p->spares, c);
            } else {
                _pa_backend_unmap(&p->backend, (void *)c->base, c->size);
                free(c);
            }
        }
        c = next;
    }
    if (p->reservation) released += reservation_decommit_tail(p, target);
    return released;
}

size_t _pa_heap_largest_free(const pa_pool_impl_t *p) {
    for (size_t np = PA_HEAP_EXACT_PAGES; np-- > 1;)
        if (p->free_by_pages[np]) {
            size_t best = np;
            for (pa_span_t *s = p->free_big; s; s = s->next)
                if (s->npages > best) best = s->npages;
            return best << PA_PAGE_SHIFT;
        }
    size_t best = 0;
    for (pa_span_t *s = p->free_big; s; s = s->next)
        if (s->npages > best) best = s->npages;
    return best << PA_PAGE_SHIFT;
}

int _pa_heap_init(pa_pool_impl_t *p) {
    p->map = calloc((size_t)1 << PA_MAP_L1_BITS, sizeof(pa_span_t **));
    if (!p->map) return -1;
    size_t first = p->chunk_size;
    if (p->growth == PA_GROW_NONE && p->limit && (!first || first > p->limit))
        first = p->limit;
    if (!_pa_align_up(first, PA_PAGE_SIZE, &first)) return -1;
    if (p->limit && first > p->limit) first = p->limit & ~(PA_PAGE_SIZE - 1);
    reservation_init(p);
    if (first == 0) return 0; /* nothing to map up front */
    p->last_grow = first;
    if (p->reservation && reservation_commit(p, first) == 0) return 0;
    return map_new_chunk(p, first, first);
}

void _pa_heap_destroy(pa_pool_impl_t *p) {
    pa_heap_chunk_t *lists[2] = {p->chunks, p->spares};
    for (int k = 0; k < 2; k++) {
        for (pa_heap_chunk_t *c = lists[k]; c;) {
            pa_heap_chunk_t *n = c->next;
            if (!c->is_reservation) {
                _pa_backend_unmap(&p->backend, (void *)c->base, c->size);
                free(c);
            }
            c = n;
        }
    }
    p->chunks = p->spares = NULL;
    if (p->reservation) {
        _pa_backend_unmap(&p->backend, (void *)p->reservation->base, p->reservation->address_space);
        free(p->reservation);
        p->reservation = NULL;
    }
    if (p->map) {
        for (size_t i = 0; i < ((size_t)1 << PA_MAP_L1_BITS); i++) free(p->map[i]);
        free(p->map);
        p->map = NULL;
    }
    for (size_t i = 0; i < p->ndesc_arrays; i++) free(p->desc_arrays[i]);
    free(p->desc_arrays);
    p->desc_arrays = NULL;
    p->ndesc_arrays = 0;
    p->reserved = 0;
}

size_t _pa_heap_check(const pa_pool_impl_t *p) {
    size_t broken = 0, nfree_spans = 0, free_bytes = 0, reserved = 0, n = 0;
    for (const pa_heap_chunk_t *c = p->chunks; c; c = c->next, n++) {
        reserved += c->size;
        if (c->decommitted) broken++;
        if (c->is_reservation && (c != p->reservation || c->size == 0 || c->size > c->address_space)) broken++;
        uintptr_t a = c->base, end = c->base + c->size;
        int prev_free = 0;
        while (a < end) {
            pa_span_t *s = map_span_at(p, a);
            if (!s || s->start != a || s->chunk != c || s->npages == 0 ||
                (s->npages << PA_PAGE_SHIFT) > end - a) {
                broken++;
                break;
            }
            uintptr_t last = a + ((s->npages - 1) << PA_PAGE_SHIFT);
            if (map_span_at(p, last) != s) broken++;
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
                if (!s->owner || ((pa_slab_t *)s->owner)->span != s) broken++;
                break;
            case PA_SPAN_BUDDY:
                if (!s->owner || ((pa_buddy_region_t *)s->owner)->span != s) broken++;
                break;
            default:
                broken++;
            }
            prev_free = s->kind == PA_SPAN_FREE;
            a += s->npages << PA_PAGE_SHIFT;
        }
    }
    if (n != p->nchunks || reserved != p->reserved) broken++;
    if (p->limit && p->reserved > p->limit) broken++;
    if (p->peak_reserved < p->reserved) broken++;
    size_t listed = 0, listed_bytes = 0;
    for (size_t np = 0; np <= PA_HEAP_EXACT_PAGES; np++) {
        const pa_span_t *head = np < PA_HEAP_EXACT_PAGES ? p->free_by_pages[np] : p->free_big;
        if (np < PA_HEAP_EXACT_PAGES &&
            !!(p->free_by_pages_mask[np >> 6] & (1ull << (np & 63))) != (head != NULL))
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
    if (listed != nfree_spans || listed_bytes != free_bytes || free_bytes != p->heap_free_bytes)
        broken++;
    for (const pa_heap_chunk_t *c = p->spares; c; c = c->next)
        if (!c->decommitted) broken++;
    return broken;
}
