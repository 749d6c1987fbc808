/* alloc/arena.c -- the bump arena for long-lived data (the "global pool").
 *
 * Weights and constants are allocated once at model load and never freed
 * one by one, so the cheapest allocator wins: bump a pointer inside the
 * current chunk.  Every address is aligned absolutely (not relative to the
 * chunk), so per-allocation alignments larger than the granularity work in
 * any chunk; every block is padded to the granularity so the next starts
 * aligned, and the skipped bytes are counted as padding.
 *
 * Design choices:
 *  - The chunk header of an owned chunk lives at the END of its mapping, so
 *    the chunk base keeps the full alignment of the mapping (a header in
 *    front would cost a page per chunk to keep the base aligned).
 *  - When a request does not fit, a new chunk is mapped (growth policy) and
 *    the tail of the old chunk is abandoned: a bump arena never looks back.
 *  - Rewind and reset keep the chunks begun after the target position as
 *    spares: the next growth reuses them instead of mapping again (the
 *    per-inference mark/rewind loop costs no system calls), and a stale
 *    pointer reads reused memory instead of faulting.  pa_arena_trim()
 *    gives spares back to the OS.
 *  - Over caller-provided memory (pa_arena_init_static) the arena is one
 *    fixed chunk and maps nothing.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define PA_MAX_ALIGNMENT ((size_t)1 << 30)
#define PA_DEFAULT_CHUNK ((size_t)64 << 10)

typedef struct pa_arena_chunk {
    struct pa_arena_chunk *prev; /* older chunk, NULL for the first            */
    char *base;            /* first usable byte, aligned                  */
    size_t size;           /* usable bytes from base                      */
    size_t top;            /* bytes consumed from base                    */
    size_t index;          /* 0 for the first chunk                       */
    void *map;             /* what the backend returned (NULL: caller's)  */
    size_t map_size;       /* bytes mapped                                */
} pa_arena_chunk_t;

struct pa_arena {
    pa_backend_t backend;  /* copied: the caller's struct may go away    */
    size_t alignment;      /* granularity                                 */
    size_t chunk_size;     /* first chunk size                            */
    size_t capacity;       /* limit on reserved, 0 = none                 */
    pa_growth_t growth;
    int owned;             /* 1 if created by pa_arena_create             */
    pa_arena_chunk_t *cur;       /* newest chunk                                */
    pa_arena_chunk_t *spare;     /* chunks released by rewind/reset, via prev   */
    size_t spare_bytes;
    size_t nchunks;
    size_t reserved;       /* mapped (or caller) bytes                    */
    size_t used_before;    /* sum of `top` over chunks older than cur     */
    size_t requested;
    size_t count;
    size_t peak;
    uint64_t epoch;        /* bumped by reset: marks from before are stale */
    pa_arena_chunk_t static_chunk; /* the single chunk of a static arena        */
};

static bool valid_alignment(size_t a) {
    return _pa_is_pow2(a) && a >= PA_MIN_ALIGNMENT && a <= PA_MAX_ALIGNMENT;
}

pa_status_t pa_arena_config_default(pa_arena_config_t *cfg) {
    if (!cfg) return PA_ERR_INVALID;
    cfg->alignment = PA_DEFAULT_ALIGNMENT;
    cfg->chunk_size = PA_DEFAULT_CHUNK;
    cfg->capacity = 0;
    cfg->growth = PA_GROW_POW2;
    cfg->backend = NULL;
    return PA_OK;
}

/* Store `st` where the caller asked (status may be NULL) and return NULL:
 * the one failure exit of every allocating call here. */
static void *fail(pa_status_t *status, pa_status_t st) {
    if (status) *status = st;
    return NULL;
}

/* Map a chunk with at least `usable` bytes, aligned to `align`. */
static pa_arena_chunk_t *chunk_map(pa_arena_t *a, size_t usable, size_t align) {
    size_t total;
    if (usable > SIZE_MAX - sizeof(pa_arena_chunk_t) - 64) return NULL;
    if (!_pa_align_up(usable + sizeof(pa_arena_chunk_t) + 64, PA_PAGE_SIZE, &total))
        return NULL;
    if (a->capacity && (total > a->capacity || a->reserved > a->capacity - total))
        return NULL;
    char *m = _pa_backend_map(&a->backend, total, align);
    if (!m) return NULL;
    /* header at the end, aligned for the struct */
    uintptr_t h = ((uintptr_t)m + total - sizeof(pa_arena_chunk_t)) & ~(uintptr_t)63;
    pa_arena_chunk_t *c = (pa_arena_chunk_t *)h;
    c->prev = NULL;
    c->base = m;
    c->size = (size_t)((char *)c - m);
    c->top = 0;
    c->index = 0;
    c->map = m;
    c->map_size = total;
    a->reserved += total;
    return c;
}

static void chunk_unmap(pa_arena_t *a, pa_arena_chunk_t *c) {
    if (!c->map) return;
    a->reserved -= c->map_size;
    _pa_backend_unmap(&a->backend, c->map, c->map_size);
}

pa_arena_t *pa_arena_create(const pa_arena_config_t *cfg, pa_status_t *status) {
    pa_arena_config_t def;
    if (!cfg) {
        pa_arena_config_default(&def);
        cfg = &def;
    }
    if (!valid_alignment(cfg->alignment)) return fail(status, PA_ERR_ALIGN);
    /* unsigned: a negative value from a binding is out of range too */
    if ((unsigned)cfg->growth > PA_GROW_NONE) return fail(status, PA_ERR_INVALID);
    const pa_backend_t *be = cfg->backend ? cfg->backend : pa_backend_default();
    if (!be->map || !be->unmap) return fail(status, PA_ERR_INVALID);
    pa_arena_t *a = calloc(1, sizeof(*a));
    if (!a) return fail(status, PA_ERR_NOMEM);
    a->backend = *be;
    a->alignment = cfg->alignment;
    a->chunk_size = cfg->chunk_size ? cfg->chunk_size : PA_DEFAULT_CHUNK;
    a->capacity = cfg->capacity;
    a->growth = cfg->growth;
    a->owned = 1;
    /* A fixed-capacity arena maps its whole capacity up front. */
    size_t first = a->chunk_size;
    if (a->growth == PA_GROW_NONE && a->capacity) first = a->capacity;
    if (a->capacity && first > a->capacity) first = a->capacity;
    /* the chunk header lives inside `first` bytes: a one-page capacity
     * is one page mapped, not two refused */
    size_t usable = first > sizeof(pa_arena_chunk_t) + 64
                        ? first - sizeof(pa_arena_chunk_t) - 64
                        : PA_PAGE_SIZE;
    pa_arena_chunk_t *c = chunk_map(a, usable, a->alignment);
    if (!c) {
        free(a);
        return fail(status, PA_ERR_NOMEM);
    }
    a->cur = c;
    a->nchunks = 1;
    a->epoch = 1;
    if (status) *status = PA_OK;
    return a;
}

size_t pa_arena_metadata_size(void) { return sizeof(pa_arena_t); }

pa_arena_t *pa_arena_init_static(void *meta, size_t meta_size, void *buffer,
                                 size_t size, size_t alignment,
                                 pa_status_t *status) {
    if (!meta || meta_size < sizeof(pa_arena_t) || !buffer) return fail(status, PA_ERR_INVALID);
    if (((uintptr_t)meta & (_Alignof(pa_arena_t) - 1)) != 0) return fail(status, PA_ERR_INVALID);
    if (alignment == 0) alignment = PA_DEFAULT_ALIGNMENT;
    if (!valid_alignment(alignment)) return fail(status, PA_ERR_ALIGN);
    uintptr_t b = (uintptr_t)buffer;
    if (b > UINTPTR_MAX - alignment) return fail(status, PA_ERR_INVALID);
    uintptr_t base = _pa_align_ptr(b, alignment);
    size_t skip = (size_t)(base - b);
    if (skip >= size || size - skip < alignment) /* not one block */
        return fail(status, PA_ERR_INVALID);
    pa_arena_t *a = meta;
    memset(a, 0, sizeof(*a));
    a->backend = *pa_backend_default();
    a->alignment = alignment;
    a->chunk_size = size;
    a->capacity = size;
    a->growth = PA_GROW_NONE;
    a->owned = 0;
    pa_arena_chunk_t *c = &a->static_chunk;
    c->base = (char *)base;
    c->size = size - skip;
    c->map = NULL;
    a->cur = c;
    a->nchunks = 1;
    a->reserved = size;
    a->epoch = 1;
    if (status) *status = PA_OK;
    return a;
}

/* Move chunks newer than `keep` (which becomes current) to the spares. */
static void drop_chunks_after(pa_arena_t *a, size_t keep) {
    while (a->cur->index > keep) {
        pa_arena_chunk_t *c = a->cur;
        a->cur = c->prev;
        a->nchunks--;
        a->used_before -= a->cur->top;
        c->prev = a->spare;
        c->top = 0;
        a->spare = c;
        a->spare_bytes += c->map_size;
    }
}

/* Unmap every spare chunk; returns the bytes given back. */
static size_t unmap_spares(pa_arena_t *a) {
    size_t freed = 0;
    while (a->spare) {
        pa_arena_chunk_t *c = a->spare;
        a->spare = c->prev;
        freed += c->map_size;
        chunk_unmap(a, c);
    }
    a->spare_bytes = 0;
    return freed;
}

pa_status_t pa_arena_trim(pa_arena_t *a, size_t *released) {
    if (released) *released = 0;
    if (!a) return PA_ERR_INVALID;
    size_t freed = unmap_spares(a);
    if (released) *released = freed;
    return PA_OK;
}

pa_status_t pa_arena_destroy(pa_arena_t *a) {
    if (!a) return PA_ERR_INVALID;
    drop_chunks_after(a, 0);
    unmap_spares(a);
    chunk_unmap(a, a->cur);
    if (a->owned) free(a);
    return PA_OK;
}

/* A spare chunk that can hold `bsize` bytes at `align`, unlinked. */
static pa_arena_chunk_t *take_spare(pa_arena_t *a, size_t bsize, size_t align) {
    for (pa_arena_chunk_t **pp = &a->spare; *pp; pp = &(*pp)->prev) {
        pa_arena_chunk_t *c = *pp;
        uintptr_t p = _pa_align_ptr((uintptr_t)c->base, align);
        size_t off = (size_t)(p - (uintptr_t)c->base);
        if (off <= c->size && bsize <= c->size - off) {
            *pp = c->prev;
            a->spare_bytes -= c->map_size;
            return c;
        }
    }
    return NULL;
}

/* Hand out bsize bytes at offset `off` of chunk `c` for a request of
 * `size`: the one place the arena's counters move on allocation. */
static inline void *commit(pa_arena_t *a, pa_arena_chunk_t *c, size_t off, size_t bsize,
                           size_t size, pa_status_t *status) {
    c->top = off + bsize;
    a->requested += size;
    a->count++;
    size_t used = a->used_before + c->top;
    if (used > a->peak) a->peak = used;
    if (status) *status = PA_OK;
    return (void *)((uintptr_t)c->base + off);
}

/* Slow path: map a new chunk for a block of `bsize` bytes at `align`. */
static void *grow_and_alloc(pa_arena_t *a, size_t size, size_t bsize, size_t align,
                            pa_status_t *status) {
    if (a->growth == PA_GROW_NONE) return fail(status, PA_ERR_NOMEM);
    size_t chunk_align = align > a->alignment ? align : a->alignment;
    size_t want = bsize;
    if (a->growth == PA_GROW_POW2) {
        size_t p = _pa_next_pow2(bsize + sizeof(pa_arena_chunk_t) + 64);
        size_t prev = a->cur->map ? a->cur->map_size : a->chunk_size;
        size_t dbl = prev <= SIZE_MAX / 2 ? prev * 2 : prev;
        if (p == 0) p = bsize; /* too big for a power of two: exact size */
        want = p > dbl ? p : dbl;
        if (want > sizeof(pa_arena_chunk_t) + 64) want -= sizeof(pa_arena_chunk_t) + 64;
        if (want < bsize) want = bsize;
        /* Under a capacity, fall back to the exact size when the doubled
         * chunk would not fit. */
        if (a->capacity) {
            size_t room = a->capacity > a->reserved ? a->capacity - a->reserved : 0;
            if (want > room) want = bsize;
        }
    }
    pa_arena_chunk_t *c = take_spare(a, bsize, align);
    if (!c) c = chunk_map(a, want, chunk_align);
    if (!c && want > bsize) c = chunk_map(a, bsize, chunk_align);
    if (!c && a->spare) {
        /* Spares too small for this request are dead weight under a
         * capacity: give them back and try once more. */
        unmap_spares(a);
        c = chunk_map(a, want, chunk_align);
        if (!c && want > bsize) c = chunk_map(a, bsize, chunk_align);
    }
    if (!c) return fail(status, PA_ERR_NOMEM);
    c->prev = a->cur;
    c->index = a->cur->index + 1;
    a->used_before += a->cur->top;
    a->cur = c;
    a->nchunks++;
    uintptr_t p = _pa_align_ptr((uintptr_t)c->base, align);
    return commit(a, c, (size_t)(p - (uintptr_t)c->base), bsize, size, status);
}

void *pa_arena_alloc(pa_arena_t *a, size_t size, size_t align, pa_status_t *status) {
    if (pa_unlikely(!a)) return fail(status, PA_ERR_INVALID);
    if (align <= a->alignment) {
        if (pa_unlikely(align & (align - 1))) return fail(status, PA_ERR_ALIGN);
        align = a->alignment;
    } else if (pa_unlikely(!_pa_is_pow2(align) || align > PA_MAX_ALIGNMENT)) {
        return fail(status, PA_ERR_ALIGN);
    }
    size_t bsize;
    if (size == 0) {
        bsize = a->alignment;
    } else if (pa_unlikely(!_pa_align_up(size, a->alignment, &bsize))) {
        return fail(status, PA_ERR_OVERFLOW);
    }
    pa_arena_chunk_t *c = a->cur;
    uintptr_t start = (uintptr_t)c->base + c->top;
    uintptr_t p = _pa_align_ptr(start, align);
    size_t off = (size_t)(p - (uintptr_t)c->base);
    if (pa_unlikely(p < start || off > c->size || bsize > c->size - off))
        return grow_and_alloc(a, size, bsize, align, status);
    commit(a, c, off, bsize, size, status);
    pa_assert_internal((p & (align - 1)) == 0 && (c->top & (a->alignment - 1)) == 0);
    pa_assert_expensive(pa_arena_check(a) == 0);
    return (void *)p;
}

pa_status_t pa_arena_mark(const pa_arena_t *a, pa_arena_mark_t *m) {
    if (!a || !m) return PA_ERR_INVALID;
    m->epoch = a->epoch;
    m->chunk = a->cur->index;
    m->offset = a->cur->top;
    m->requested = a->requested;
    m->count = a->count;
    return PA_OK;
}

pa_status_t pa_arena_rewind(pa_arena_t *a, const pa_arena_mark_t *m) {
    if (!a || !m) return PA_ERR_INVALID;
    if (m->epoch != a->epoch || m->chunk > a->cur->index) return PA_ERR_STATE;
    if (m->chunk == a->cur->index && m->offset > a->cur->top) return PA_ERR_STATE;
    if (m->count > a->count || m->requested > a->requested) return PA_ERR_STATE;
    drop_chunks_after(a, m->chunk);
    if (m->offset > a->cur->top) return PA_ERR_STATE; /* cannot happen */
    a->cur->top = m->offset;
    a->requested = m->requested;
    a->count = m->count;
    pa_assert_expensive(pa_arena_check(a) == 0);
    return PA_OK;
}

pa_status_t pa_arena_reset(pa_arena_t *a) {
    if (!a) return PA_ERR_INVALID;
    drop_chunks_after(a, 0);
    a->cur->top = 0;
    a->used_before = 0;
    a->requested = 0;
    a->count = 0;
    a->epoch++;
    return PA_OK;
}

pa_status_t pa_arena_stats(const pa_arena_t *a, pa_arena_stats_t *out) {
    if (!a || !out) return PA_ERR_INVALID;
    out->reserved = a->reserved;
    out->used = a->used_before + a->cur->top;
    out->requested = a->requested;
    out->padding = out->used - out->requested;
    out->peak = a->peak;
    out->count = a->count;
    out->chunks = a->nchunks;
    out->spare = a->spare_bytes;
    out->capacity = a->capacity;
    out->alignment = a->alignment;
    return PA_OK;
}

pa_status_t pa_arena_reset_peak(pa_arena_t *a) {
    if (!a) return PA_ERR_INVALID;
    a->peak = a->used_before + a->cur->top;
    return PA_OK;
}

size_t pa_arena_num_chunks(const pa_arena_t *a) { return a ? a->nchunks : 0; }

pa_status_t pa_arena_chunk(const pa_arena_t *a, size_t index, void **base,
                           size_t *size) {
    if (!a || !base || !size) return PA_ERR_INVALID;
    for (pa_arena_chunk_t *c = a->cur; c; c = c->prev) {
        if (c->index == index) {
            *base = c->base;
            *size = c->size;
            return PA_OK;
        }
    }
    return PA_ERR_INVALID;
}

pa_status_t pa_arena_find(const pa_arena_t *a, const void *ptr, size_t *index,
                          void **base, size_t *size) {
    if (!a || !index || !base || !size) return PA_ERR_INVALID;
    uintptr_t p = (uintptr_t)ptr;
    for (pa_arena_chunk_t *c = a->cur; c; c = c->prev) {
        uintptr_t b = (uintptr_t)c->base;
        if (p >= b && p - b < c->size) {
            *index = c->index;
            *base = c->base;
            *size = c->size;
            return PA_OK;
        }
    }
    return PA_ERR_FOREIGN;
}

size_t pa_arena_check(const pa_arena_t *a) {
    if (!a) return 1;
    size_t broken = 0, n = 0, used = 0, reserved = 0;
    size_t expect = a->cur ? a->cur->index : 0;
    for (pa_arena_chunk_t *c = a->cur; c; c = c->prev, n++) {
        if (c->index != expect) broken++;
        expect--;
        if (c->top > c->size) broken++;
        if (((uintptr_t)c->base & (a->alignment - 1)) != 0) broken++;
        if (c != a->cur) used += c->top;
        reserved += c->map ? c->map_size : 0;
    }
    if (n != a->nchunks) broken++;
    size_t spare = 0;
    for (pa_arena_chunk_t *c = a->spare; c; c = c->prev) {
        spare += c->map_size;
        reserved += c->map_size;
        if (c->top != 0) broken++;
    }
    if (spare != a->spare_bytes) broken++;
    if (used != a->used_before) broken++;
    if (a->owned && reserved != a->reserved) broken++;
    size_t now = a->used_before + (a->cur ? a->cur->top : 0);
    if (a->requested > now) broken++;
    if (a->peak < now) broken++;
    if (a->capacity && a->reserved > a->capacity) broken++;
    return broken;
}
