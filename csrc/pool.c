/* pool.c -- the dynamic work pool: front end.
 *
 * Routes each request to a zone (slab classes, buddy orders, large spans;
 * see slab.c, buddy.c, large.c), keeps the deferred-reclamation caches,
 * the watermarks, the statistics and the lock.
 *
 * Design choices:
 *  - Deferred reclamation: a freed block is not merged at once; it is
 *    pushed on the LIFO cache of its bin (slab class, buddy order, or a
 *    large size class) and the next request of that bin gets it back, so
 *    the hottest memory is reused.  The caches are flushed into their
 *    zones (slots freed, buddies merged, spans coalesced) by
 *    pa_pool_reclaim() (step boundary), by trims, when a request would
 *    otherwise need a new chunk, and in part when they exceed the budget.
 *  - Growth happens only after the heap and a flush of the caches failed,
 *    so the reserved footprint tracks the live peak.  When reserved bytes
 *    exceed the high watermark after a growth, the pool trims down to the
 *    low watermark (fully free chunks go back to the backend).
 *  - One lock per pool, a test-and-set spinlock that yields the CPU after
 *    a short spin.  Every public call holds it for O(1) work on the fast
 *    path (a table lookup and a stack push or pop); cffi releases the GIL
 *    around calls, so Python threads really contend.  Finer locks (per
 *    class) were weighed and rejected: the pool-wide peaks need one
 *    serialisation point, and one uncontended atomic exchange per call is
 *    cheaper than the two or three a split design needs.
 *  - Use after destroy: the handle (struct pa_pool: the lock and a pointer
 *    to the pool proper) is never freed.  pa_pool_destroy() frees the pool
 *    proper, clears the pointer under the lock and keeps the handle on a
 *    global list of tombstones (reachable, so leak checkers stay quiet);
 *    every later call sees the NULL and returns PA_ERR_STATE.  Cost: 32
 *    bytes per destroyed pool for the life of the process.
 */
#define _POSIX_C_SOURCE 200809L
#include "pool_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK ((size_t)1 << 20)
#define DEFAULT_BUDGET ((size_t)16 << 20)
#define MAX_REQUEST ((size_t)1 << 47)

/* ---- lock and handle ------------------------------------------------------ */

typedef struct {
    atomic_int v;
} spin_t;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void spin_lock_slow(spin_t *l) {
    unsigned n = 0;
    for (;;) {
        while (atomic_load_explicit(&l->v, memory_order_relaxed)) {
            if (++n < 100) cpu_relax();
            else sched_yield();
        }
        if (!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)) return;
    }
}

static inline void spin_lock(spin_t *l) {
    if (pa_likely(!atomic_exchange_explicit(&l->v, 1, memory_order_acquire))) return;
    spin_lock_slow(l);
}

static inline void spin_unlock(spin_t *l) {
    atomic_store_explicit(&l->v, 0, memory_order_release);
}

struct pa_pool {
    spin_t lock;              /* guards everything reachable from `p`   */
    pa_pool_impl_t *p;        /* NULL once destroyed (read under lock)  */
    struct pa_pool *next_tombstone; /* guarded by tombstone_lock                  */
};

static pthread_mutex_t tombstone_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pa_pool *tombstones; /* destroyed handles, kept reachable      */

/* ---- bins and routing -------------------------------------------------------- */

typedef struct {
    int zone;
    size_t bin;
    size_t bsize;   /* block bytes                                        */
    size_t idx;     /* slab class, buddy order or page count             */
} route_t;

static inline size_t large_bin_of_pages(size_t np) {
    unsigned lg = _pa_log2_floor(np);
    size_t sub = lg >= 2 ? (np >> (lg - 2)) & 3 : 0;
    return (size_t)lg * 4 + sub;
}

static inline pa_status_t route(const pa_pool_impl_t *p, size_t size, route_t *r) {
    if (size == 0) size = 1;
    if (pa_likely(size <= p->slab_max)) {
        size_t c = _pa_slab_class_of(p, size);
        r->zone = PA_ZONE_SLAB;
        r->bin = c;
        r->idx = c;
        r->bsize = p->classes[c].size;
        return PA_OK;
    }
    if (size <= p->buddy_max) {
        unsigned k = _pa_log2_ceil(size);
        if (k < p->buddy_min_order) k = p->buddy_min_order;
        r->zone = PA_ZONE_BUDDY;
        r->bin = p->first_buddy_bin + k;
        r->idx = k;
        r->bsize = (size_t)1 << k;
        return PA_OK;
    }
    if (size > MAX_REQUEST) return PA_ERR_OVERFLOW;
    size_t np = (size + PA_PAGE_SIZE - 1) >> PA_PAGE_SHIFT;
    r->zone = PA_ZONE_LARGE;
    r->bin = p->first_large_bin + large_bin_of_pages(np);
    r->idx = np;
    r->bsize = np << PA_PAGE_SHIFT;
    return PA_OK;
}

static inline int bin_zone(const pa_pool_impl_t *p, size_t b) {
    return b < p->first_buddy_bin ? PA_ZONE_SLAB
           : b < p->first_large_bin ? PA_ZONE_BUDDY : PA_ZONE_LARGE;
}

/* Give a cached block back to its zone. */
static void release_entry(pa_pool_impl_t *p, int zone, const pa_cache_entry_t *e) {
    p->cached -= e->size;
    p->zone[zone].cached -= e->size;
    if (zone == PA_ZONE_SLAB) {
        int exact;
        pa_slab_t *s = e->owner;
        uint32_t idx = _pa_slab_index(p, s, (uintptr_t)e->ptr, &exact);
        _pa_slab_release(p, s, idx);
    } else if (zone == PA_ZONE_BUDDY) {
        _pa_buddy_release(p, e->owner, (uintptr_t)e->ptr);
    } else {
        pa_span_t *sp = e->owner;
        p->zone[PA_ZONE_LARGE].reserved -= sp->npages << PA_PAGE_SHIFT;
        _pa_heap_free(p, sp);
    }
}

static inline void bin_set_nonempty(pa_pool_impl_t *p, size_t b) {
    p->nonempty_bins[b >> 6] |= 1ull << (b & 63);
}

static inline void bin_clear_nonempty(pa_pool_impl_t *p, size_t b) {
    p->nonempty_bins[b >> 6] &= ~(1ull << (b & 63));
}

/* Release the `count` oldest entries of bin `b`. */
static void flush_bin(pa_pool_impl_t *p, size_t b, uint32_t count) {
    pa_cache_bin_t *bin = &p->bins[b];
    int zone = bin_zone(p, b);
    if (count > bin->count) count = bin->count;
    for (uint32_t i = 0; i < count; i++) release_entry(p, zone, &bin->entries[i]);
    memmove(bin->entries, bin->entries + count, (bin->count - count) * sizeof(pa_cache_entry_t));
    bin->count -= count;
    if (!bin->count) bin_clear_nonempty(p, b);
}

/* Flush every nonempty bin from `from` on (found through the bitmap, not
 * by scanning a few hundred bins). */
static void flush_from(pa_pool_impl_t *p, size_t from) {
    size_t nw = (p->nbins + 63) >> 6;
    for (size_t w = from >> 6; w < nw; w++) {
        uint64_t m = p->nonempty_bins[w];
        if (w == (from >> 6)) m &= ~0ull << (from & 63);
        while (m) {
            size_t b = w * 64 + (size_t)__builtin_ctzll(m);
            m &= m - 1;
            flush_bin(p, b, p->bins[b].count);
        }
    }
}


static void flush_all(pa_pool_impl_t *p) {
    flush_from(p, 0);
    p->reclaims++;
}

/* Empty slabs / regions kept as spares go back to the page heap. */
static void drop_spares(pa_pool_impl_t *p) {
    if (p->nspare_slabs) _pa_slab_drop_spares(p);
    _pa_buddy_drop_spare(p);
}

static size_t trim_locked(pa_pool_impl_t *p, size_t target) {
    flush_all(p);
    drop_spares(p);
    p->trims++;
    return _pa_heap_release(p, target);
}

pa_span_t *_pa_pool_get_span(pa_pool_impl_t *p, size_t np, pa_status_t *st) {
    /* The heap places this span best-fit; it can only choose well if it
     * sees every free span, so cached large blocks (whole spans) and
     * cached buddy blocks (which pin whole regions) go back first.
     * Leaving the large ones cached made the heap fill the wrong holes
     * and grow (peak reserved / peak live 2.8 instead of 1.57 on the
     * pool-bench ResNet-50 trace); flushing the buddy bins too took
     * MobileNetV2 from 1.36 to 1.13 and log-uniform from 1.29 to 1.23, for
     * ~10 % more time per pair on the inference traces (hybrid mode only:
     * in buddy-only mode every block is a buddy block).  The slab caches
     * are flushed only if the heap still cannot serve (flushing them costs
     * their hot blocks). */
    if (p->zone[PA_ZONE_LARGE].cached || (p->mode == PA_POOL_HYBRID && p->zone[PA_ZONE_BUDDY].cached))
        flush_from(p, p->mode == PA_POOL_HYBRID ? p->first_buddy_bin : p->first_large_bin);
    pa_span_t *s = _pa_heap_alloc(p, np, st);
    if (s) return s;
    if (p->cached) {
        flush_all(p);
        s = _pa_heap_alloc(p, np, st);
        if (s) return s;
    }
    drop_spares(p);
    s = _pa_heap_alloc(p, np, st);
    if (s) return s;
    if (_pa_heap_grow(p, np) != 0) {
        *st = PA_ERR_NOMEM;
        return NULL;
    }
    s = _pa_heap_alloc(p, np, st);
    if (s && p->high_watermark && p->reserved > p->high_watermark) {
        /* watermark: trim with this span already taken */
        trim_locked(p, p->low_watermark);
    }
    return s;
}

/* ---- accounting ------------------------------------------------------------------ */

static inline void account_alloc(pa_pool_impl_t *p, int zone, size_t req, size_t bsize) {
    pa_zone_counters_t *z = &p->zone[zone];
    z->requested += req;
    z->allocated += bsize;
    z->allocs++;
    if (z->requested > z->peak_requested) z->peak_requested = z->requested;
    if (z->allocated > z->peak_allocated) z->peak_allocated = z->allocated;
    p->requested += req;
    p->allocated += bsize;
    if (p->requested > p->peak_requested) p->peak_requested = p->requested;
    if (p->allocated > p->peak_allocated) p->peak_allocated = p->allocated;
}

static inline void account_free(pa_pool_impl_t *p, int zone, size_t req, size_t bsize) {
    pa_zone_counters_t *z = &p->zone[zone];
    z->requested -= req;
    z->allocated -= bsize;
    z->frees++;
    p->requested -= req;
    p->allocated -= bsize;
}

/* ---- allocation ------------------------------------------------------------------ */

/* Take a cached block of bin `b` fitting route `r`; NULL if none. */
static void *large_cache_pop(pa_pool_impl_t *p, const route_t *r, size_t req,
                             size_t *bsize) {
    /* Newest first in this bin and the next: an exact page count, else
     * the first block that is big enough, cut down to size when the tail
     * is over 1/8 of the request (the tail goes back to the heap), so a
     * reused block wastes at most 1/8 -- and nothing on exact repeats,
     * the common case of inference traces. */
    for (size_t b = r->bin; b <= r->bin + 1 && b < p->nbins; b++) {
        pa_cache_bin_t *bin = &p->bins[b];
        uint32_t lo = bin->count > 8 ? bin->count - 8 : 0, pick = UINT32_MAX;
        for (uint32_t i = bin->count; i-- > lo;) {
            size_t np = bin->entries[i].size >> PA_PAGE_SHIFT; /* no descriptor miss */
            if (np == r->idx) {
                pick = i;
                break;
            }
            if (pick == UINT32_MAX && np > r->idx) pick = i;
        }
        if (pick == UINT32_MAX) continue;
        size_t cnp = bin->entries[pick].size >> PA_PAGE_SHIFT;
        if (cnp != r->idx) {
            /* a bigger cached block only when it is the best fit: a
             * tighter free span in the heap wins (the heap flushes the
             * large caches and places the block there) */
            size_t h = _pa_heap_fit_pages(p, r->idx);
            if (h && h < cnp) return NULL;
        }
        pa_cache_entry_t e = bin->entries[pick];
        memmove(bin->entries + pick, bin->entries + pick + 1, (bin->count - pick - 1) * sizeof(pa_cache_entry_t));
        if (!--bin->count) bin_clear_nonempty(p, b);
        p->cached -= e.size;
        p->zone[PA_ZONE_LARGE].cached -= e.size;
        pa_span_t *sp = e.owner;
        /* cut only a tail worth a heap operation: > 1/8 of the request */
        if ((sp->npages - r->idx) * 8 > r->idx) _pa_heap_shrink(p, sp, r->idx);
        p->zone[PA_ZONE_LARGE].reserved -= e.size - (sp->npages << PA_PAGE_SHIFT);
        sp->state = PA_BLOCK_LIVE;
        sp->requested = req;
        p->zone[PA_ZONE_LARGE].cache_hits++;
        *bsize = sp->npages << PA_PAGE_SHIFT;
        return e.ptr;
    }
    return NULL;
}

/* Take a cached block of bin `b` fitting route `r`; NULL if none. */
static inline void *cache_pop(pa_pool_impl_t *p, const route_t *r, size_t req,
                              size_t *bsize) {
    pa_cache_bin_t *bin = &p->bins[r->bin];
    if (r->zone == PA_ZONE_LARGE) return large_cache_pop(p, r, req, bsize);
    if (!bin->count) return NULL;
    pa_cache_entry_t e = bin->entries[--bin->count];
    if (!bin->count) bin_clear_nonempty(p, r->bin);
    if (r->zone == PA_ZONE_SLAB) {
        pa_slab_t *s = e.owner;
        int exact;
        uint32_t idx = _pa_slab_index(p, s, (uintptr_t)e.ptr, &exact);
        s->slot[idx] = PA_SLOT(PA_BLOCK_LIVE, req);
        s->nlive++;
    } else {
        pa_buddy_region_t *rg = e.owner;
        size_t u = ((uintptr_t)e.ptr - rg->base) >> rg->unit_shift;
        rg->tags[u] = PA_TAG_LIVE(r->idx, req);
    }
    p->cached -= e.size;
    p->zone[r->zone].cached -= e.size;
    p->zone[r->zone].cache_hits++;
    *bsize = e.size;
    return e.ptr;
}

static void *alloc_locked(pa_pool_impl_t *p, size_t size, pa_status_t *st) {
    route_t r;
    pa_status_t s = route(p, size, &r);
    if (pa_unlikely(s != PA_OK)) {
        *st = s;
        p->failures++;
        return NULL;
    }
    size_t bsize = r.bsize;
    void *ptr = cache_pop(p, &r, size, &bsize);
    if (pa_likely(ptr != NULL)) {
        account_alloc(p, r.zone, size, bsize);
        *st = PA_OK;
        return ptr;
    }
    if (p->limit && r.bsize > p->limit) {
        *st = PA_ERR_NOMEM;
        p->failures++;
        return NULL;
    }
    s = PA_OK;
    if (r.zone == PA_ZONE_SLAB) {
        pa_slab_t *slab;
        ptr = _pa_slab_alloc(p, r.idx, size, &slab, &s);
    } else if (r.zone == PA_ZONE_BUDDY) {
        pa_buddy_region_t *rg;
        ptr = _pa_buddy_alloc(p, (unsigned)r.idx, size, &rg, &s);
    } else {
        pa_span_t *sp = _pa_pool_get_span(p, r.idx, &s);
        if (sp) {
            sp->kind = PA_SPAN_LARGE;
            sp->state = PA_BLOCK_LIVE;
            sp->requested = size;
            p->zone[PA_ZONE_LARGE].reserved += r.bsize;
            ptr = (void *)sp->start;
        }
    }
    if (!ptr) {
        *st = s != PA_OK ? s : PA_ERR_NOMEM;
        p->failures++;
        return NULL;
    }
    account_alloc(p, r.zone, size, r.bsize);
    *st = PA_OK;
    return ptr;
}

/* ---- block lookup --------------------------------------------------------------- */

typedef struct {
    int zone;
    void *owner;    /* slab, region or span                                */
    size_t bsize, req;
    size_t unit;    /* slab slot / buddy unit                             */
} live_block_t;

/* Describe the live block at `ptr`, or say why it is not one. */
static pa_status_t find_live(const pa_pool_impl_t *p, const void *ptr, live_block_t *b) {
    uintptr_t a = (uintptr_t)ptr;
    uintptr_t ent = _pa_map_entry(p, a);
    if (pa_likely(ent & PA_MAP_TAG_SLAB)) {
        /* the entry may be stale (recycled slab): the exact-slot check
         * below also checks the range (nblocks 0 while recycled) */
        pa_slab_t *s = (pa_slab_t *)(ent & ~PA_MAP_TAG_MASK);
        int exact;
        uint32_t idx = _pa_slab_index(p, s, a, &exact);
        if (!exact) return PA_ERR_FOREIGN;
        uint32_t w = s->slot[idx];
        if (PA_SLOT_STATE(w) != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
        b->zone = PA_ZONE_SLAB;
        b->owner = s;
        b->bsize = s->size;
        b->req = PA_SLOT_REQ(w);
        b->unit = idx;
        return PA_OK;
    }
    if (ent & PA_MAP_TAG_REGION) {
        /* the entry may be stale (recycled region): check the range */
        pa_buddy_region_t *r = (pa_buddy_region_t *)(ent & ~PA_MAP_TAG_MASK);
        uintptr_t off = a - r->base;
        if ((off >> r->order) || (off & (((uintptr_t)1 << r->unit_shift) - 1))) return PA_ERR_FOREIGN;
        size_t u = off >> r->unit_shift;
        uint64_t word = r->tags[u];
        uint8_t tg = (uint8_t)word;
        if (!tg) return PA_ERR_FOREIGN;
        if (PA_TAG_STATE(tg) != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
        b->zone = PA_ZONE_BUDDY;
        b->owner = r;
        b->bsize = (size_t)1 << PA_TAG_ORDER(tg);
        b->req = PA_TAG_REQ(word);
        b->unit = u;
        return PA_OK;
    }
    pa_span_t *sp = (pa_span_t *)ent;
    if (!sp || a < sp->start || ((a - sp->start) >> PA_PAGE_SHIFT) >= sp->npages)
        return PA_ERR_FOREIGN;
    switch (sp->kind) {
    case PA_SPAN_LARGE:
        if (a != sp->start) return PA_ERR_FOREIGN;
        if (sp->state != PA_BLOCK_LIVE) return PA_ERR_DOUBLE_FREE;
        b->zone = PA_ZONE_LARGE;
        b->owner = sp;
        b->bsize = sp->npages << PA_PAGE_SHIFT;
        b->req = sp->requested;
        b->unit = 0;
        return PA_OK;
    case PA_SPAN_FREE:
        return a == sp->start ? PA_ERR_DOUBLE_FREE : PA_ERR_FOREIGN;
    default:
        return PA_ERR_FOREIGN;
    }
}

static int bin_push(pa_pool_impl_t *p, size_t b, void *ptr, void *desc, size_t bsize) {
    pa_cache_bin_t *bin = &p->bins[b];
    if (pa_unlikely(bin->count == bin->cap)) {
        uint32_t nc = bin->cap ? bin->cap * 2 : 16;
        pa_cache_entry_t *ne = realloc(bin->entries, nc * sizeof(pa_cache_entry_t));
        if (!ne) return -1;
        bin->entries = ne;
        bin->cap = nc;
    }
    bin_set_nonempty(p, b);
    pa_cache_entry_t *e = &bin->entries[bin->count++];
    e->ptr = ptr;
    e->owner = desc;
    e->size = bsize;
    return 0;
}

static pa_status_t free_locked(pa_pool_impl_t *p, void *ptr) {
    live_block_t b;
    pa_status_t s = find_live(p, ptr, &b);
    if (s != PA_OK) return s;
    size_t bin;
    if (b.zone == PA_ZONE_SLAB) {
        pa_slab_t *sl = b.owner;
        sl->slot[b.unit] = PA_SLOT(PA_BLOCK_CACHED, 0);
        sl->nlive--;
        bin = sl->class_index;
    } else if (b.zone == PA_ZONE_BUDDY) {
        pa_buddy_region_t *r = b.owner;
        unsigned k = PA_TAG_ORDER(r->tags[b.unit]);
        r->tags[b.unit] = PA_TAG(k, PA_BLOCK_CACHED);
        bin = p->first_buddy_bin + k;
    } else {
        pa_span_t *sp = b.owner;
        sp->state = PA_BLOCK_CACHED;
        sp->requested = 0;
        bin = p->first_large_bin + large_bin_of_pages(sp->npages);
    }
    account_free(p, b.zone, b.req, b.bsize);
    pa_cache_entry_t e = {ptr, b.owner, b.bsize};
    p->cached += b.bsize;
    p->zone[b.zone].cached += b.bsize;
    if (pa_unlikely(bin_push(p, bin, ptr, b.owner, b.bsize) != 0)) {
        release_entry(p, b.zone, &e); /* no room_under_limit to cache: release now */
        return PA_OK;
    }
    if (pa_unlikely(p->cached > p->cache_budget)) {
        flush_bin(p, bin, (p->bins[bin].count + 1) / 2);
        if (p->cached > p->cache_budget) flush_all(p);
    }
    return PA_OK;
}

/* ---- public API ------------------------------------------------------------------- */

pa_status_t pa_pool_config_default(pa_pool_config_t *cfg) {
    if (!cfg) return PA_ERR_INVALID;
    memset(cfg, 0, sizeof(*cfg));
    cfg->alignment = PA_DEFAULT_ALIGNMENT;
    cfg->mode = PA_POOL_HYBRID;
    cfg->growth = PA_GROW_REQUESTED;
    cfg->chunk_size = DEFAULT_CHUNK;
    cfg->cache_budget = DEFAULT_BUDGET;
    cfg->release = PA_RELEASE_UNMAP;
    cfg->classes_per_doubling = 4;
    cfg->slab_max = 4096;
    cfg->slab_size = (size_t)64 << 10;
    cfg->buddy_region = (size_t)1 << 20;
    cfg->large_threshold = (size_t)256 << 10;
    return PA_OK;
}

static void impl_free(pa_pool_impl_t *p) {
    if (p->bins)
        for (size_t b = 0; b < p->nbins; b++) free(p->bins[b].entries);
    free(p->bins);
    free(p->nonempty_bins);
    /* slab metadata: find the slabs through the chunks */
    if (p->map) {
        for (pa_heap_chunk_t *c = p->chunks; c; c = c->next) {
            uintptr_t a = c->base, end = c->base + c->size;
            while (a < end) {
                pa_span_t *sp = _pa_map_lookup(p, a);
                if (!sp || sp->start != a) break;
                if (sp->kind == PA_SPAN_SLAB) free(sp->owner);
                a += sp->npages << PA_PAGE_SHIFT;
            }
        }
    }
    _pa_buddy_destroy(p);
    _pa_slab_destroy(p);
    _pa_heap_destroy(p);
    free(p);
}

pa_pool_t *pa_pool_create(const pa_pool_config_t *cfg, pa_status_t *status) {
    pa_pool_config_t def;
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (!cfg) {
        pa_pool_config_default(&def);
        cfg = &def;
    }
    size_t gran = cfg->alignment ? cfg->alignment : PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2(gran) || gran < PA_MIN_ALIGNMENT || gran > PA_PAGE_SIZE) {
        *status = PA_ERR_ALIGN;
        return NULL;
    }
    *status = PA_ERR_INVALID;
    /* unsigned: a negative value from a binding is out of range too */
    if ((unsigned)cfg->mode > PA_POOL_BUDDY_ONLY) return NULL;
    if ((unsigned)cfg->growth > PA_GROW_NONE) return NULL;
    if ((unsigned)cfg->release > PA_RELEASE_DECOMMIT) return NULL;
    if (cfg->low_watermark > cfg->high_watermark) return NULL;
    if (cfg->growth == PA_GROW_NONE && !cfg->chunk_size && !cfg->limit) return NULL;
    const pa_backend_t *be = cfg->backend ? cfg->backend : pa_backend_default();
    if (!be->map || !be->unmap) return NULL;

    pa_pool_impl_t *p = calloc(1, sizeof(*p));
    struct pa_pool *h = calloc(1, sizeof(*h));
    if (!p || !h) {
        free(p);
        free(h);
        *status = PA_ERR_NOMEM;
        return NULL;
    }
    p->granularity = gran;
    p->granularity_shift = _pa_log2_floor(gran);
    p->mode = cfg->mode;
    p->growth = cfg->growth;
    p->release = cfg->release;
    p->chunk_size = cfg->chunk_size ? cfg->chunk_size
                    : (cfg->growth == PA_GROW_NONE ? cfg->limit : DEFAULT_CHUNK);
    p->limit = cfg->limit;
    p->high_watermark = cfg->high_watermark;
    p->low_watermark = cfg->low_watermark;
    p->cache_budget = cfg->cache_budget ? cfg->cache_budget : DEFAULT_BUDGET;
    p->backend = *be;
    if (_pa_slab_init(p, cfg) != 0 || _pa_buddy_init(p, cfg) != 0) {
        impl_free(p);
        free(h);
        return NULL;
    }
    p->first_buddy_bin = p->nclasses;
    p->first_large_bin = p->nclasses + PA_BUDDY_ORDERS;
    p->nbins = p->first_large_bin + PA_LARGE_BINS;
    p->bins = calloc(p->nbins, sizeof(pa_cache_bin_t));
    p->nonempty_bins = calloc((p->nbins + 63) / 64, sizeof(uint64_t));
    if (!p->bins || !p->nonempty_bins || _pa_heap_init(p) != 0) {
        impl_free(p);
        free(h);
        *status = PA_ERR_NOMEM;
        return NULL;
    }
    h->p = p;
    *status = PA_OK;
    return h;
}

pa_status_t pa_pool_destroy(pa_pool_t *h) {
    if (!h) return PA_ERR_INVALID;
    spin_lock(&h->lock);
    pa_pool_impl_t *p = h->p;
    h->p = NULL;
    spin_unlock(&h->lock);
    if (!p) return PA_ERR_STATE;
    impl_free(p);
    pthread_mutex_lock(&tombstone_lock);
    h->next_tombstone = tombstones;
    tombstones = h;
    pthread_mutex_unlock(&tombstone_lock);
    return PA_OK;
}

/* Lock `h` and return its pool, or NULL (unlocked) with *st set. */
static inline pa_pool_impl_t *enter(pa_pool_t *h, pa_status_t *st) {
    if (pa_unlikely(!h)) {
        *st = PA_ERR_INVALID;
        return NULL;
    }
    spin_lock(&h->lock);
    pa_pool_impl_t *p = h->p;
    if (pa_unlikely(!p)) {
        spin_unlock(&h->lock);
        *st = PA_ERR_STATE;
    }
    return p;
}

void *pa_pool_alloc(pa_pool_t *h, size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    pa_pool_impl_t *p = enter(h, status);
    if (!p) return NULL;
    void *r = alloc_locked(p, size, status);
    spin_unlock(&h->lock);
    return r;
}

void *pa_pool_calloc(pa_pool_t *h, size_t count, size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (size && count > SIZE_MAX / size) {
        *status = h ? PA_ERR_OVERFLOW : PA_ERR_INVALID;
        return NULL;
    }
    void *r = pa_pool_alloc(h, count * size, status);
    if (r) memset(r, 0, count * size);
    return r;
}

void *pa_pool_realloc(pa_pool_t *h, void *ptr, size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (!ptr) return pa_pool_alloc(h, size, status);
    pa_pool_impl_t *p = enter(h, status);
    if (!p) return NULL;
    live_block_t b;
    route_t r;
    void *out = NULL;
    pa_status_t s = find_live(p, ptr, &b);
    if (s == PA_OK) s = route(p, size, &r);
    if (s == PA_OK && r.zone == b.zone && r.bsize == b.bsize) {
        /* same block size: resize in place */
        if (b.zone == PA_ZONE_SLAB)
            ((pa_slab_t *)b.owner)->slot[b.unit] = PA_SLOT(PA_BLOCK_LIVE, size);
        else if (b.zone == PA_ZONE_BUDDY)
            ((pa_buddy_region_t *)b.owner)->tags[b.unit] = PA_TAG_LIVE(PA_TAG_ORDER(((pa_buddy_region_t *)b.owner)->tags[b.unit]), size);
        else ((pa_span_t *)b.owner)->requested = size;
        p->requested = p->requested - b.req + size;
        p->zone[b.zone].requested = p->zone[b.zone].requested - b.req + size;
        if (p->requested > p->peak_requested) p->peak_requested = p->requested;
        if (p->zone[b.zone].requested > p->zone[b.zone].peak_requested)
            p->zone[b.zone].peak_requested = p->zone[b.zone].requested;
        out = ptr;
    } else if (s == PA_OK) {
        out = alloc_locked(p, size, &s);
        if (out) {
            memcpy(out, ptr, b.req < size ? b.req : size);
            free_locked(p, ptr);
        }
    } else {
        p->failures++;
    }
    spin_unlock(&h->lock);
    *status = s;
    return out;
}

pa_status_t pa_pool_free(pa_pool_t *h, void *ptr) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    st = ptr ? free_locked(p, ptr) : PA_OK;
    spin_unlock(&h->lock);
    return st;
}

size_t pa_pool_block_size(pa_pool_t *h, const void *ptr) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return 0;
    live_block_t b;
    size_t r = find_live(p, ptr, &b) == PA_OK ? b.bsize : 0;
    spin_unlock(&h->lock);
    return r;
}

pa_status_t pa_pool_reclaim(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    flush_all(p);
    drop_spares(p);
    spin_unlock(&h->lock);
    return PA_OK;
}

pa_status_t pa_pool_trim(pa_pool_t *h, size_t target, size_t *released) {
    pa_status_t st;
    if (released) *released = 0;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    size_t r = trim_locked(p, target);
    spin_unlock(&h->lock);
    if (released) *released = r;
    return PA_OK;
}

pa_status_t pa_pool_free_all(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    trim_locked(p, 0);
    spin_unlock(&h->lock);
    return PA_OK;
}

pa_status_t pa_pool_set_limit(pa_pool_t *h, size_t limit) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    st = PA_OK;
    if (limit && p->reserved > limit) trim_locked(p, limit);
    if (limit && p->reserved > limit) st = PA_ERR_INVALID;
    else p->limit = limit;
    spin_unlock(&h->lock);
    return st;
}

pa_status_t pa_pool_set_watermarks(pa_pool_t *h, size_t high, size_t low) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    if (low > high) {
        st = PA_ERR_INVALID;
    } else {
        p->high_watermark = high;
        p->low_watermark = low;
        if (high && p->reserved > high) trim_locked(p, low);
        st = PA_OK;
    }
    spin_unlock(&h->lock);
    return st;
}

static size_t largest_free_locked(const pa_pool_impl_t *p) {
    size_t best = _pa_heap_largest_free(p);
    size_t b = _pa_buddy_largest_free(p);
    if (b > best) best = b;
    for (size_t k = p->nclasses; k-- > 0;)
        if (p->classes[k].partial) {
            if (p->classes[k].size > best) best = p->classes[k].size;
            break;
        }
    for (size_t i = 0; i < p->nbins; i++)
        for (uint32_t j = 0; j < p->bins[i].count; j++)
            if (p->bins[i].entries[j].size > best) best = p->bins[i].entries[j].size;
    return best;
}

pa_status_t pa_pool_stats(pa_pool_t *h, pa_pool_stats_t *out) {
    pa_status_t st;
    if (!out) return PA_ERR_INVALID;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    memset(out, 0, sizeof(*out));
    out->requested = p->requested;
    out->allocated = p->allocated;
    out->reserved = p->reserved;
    out->cached = p->cached;
    out->peak_requested = p->peak_requested;
    out->peak_allocated = p->peak_allocated;
    out->peak_reserved = p->peak_reserved;
    for (int z = 0; z < PA_ZONE_COUNT; z++) { /* pool counts: zone sums */
        out->live += (size_t)(p->zone[z].allocs - p->zone[z].frees);
        out->allocs += p->zone[z].allocs;
        out->frees += p->zone[z].frees;
    }
    out->total_free = p->reserved >= p->allocated ? p->reserved - p->allocated : 0;
    out->largest_free = largest_free_locked(p);
    out->chunks = p->nchunks;
    out->limit = p->limit;
    out->high_watermark = p->high_watermark;
    out->low_watermark = p->low_watermark;
    out->alignment = p->granularity;
    out->failures = p->failures;
    out->trims = p->trims;
    out->grows = p->grows;
    out->reclaims = p->reclaims;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        pa_pool_zone_stats_t *o = &out->zone[z];
        const pa_zone_counters_t *s = &p->zone[z];
        o->requested = s->requested;
        o->allocated = s->allocated;
        o->reserved = s->reserved;
        o->cached = s->cached;
        o->peak_requested = s->peak_requested;
        o->peak_allocated = s->peak_allocated;
        o->live = (size_t)(s->allocs - s->frees);
        o->allocs = s->allocs;
        o->frees = s->frees;
        o->cache_hits = s->cache_hits;
    }
    spin_unlock(&h->lock);
    if (out->allocated)
        out->frag_internal = 1.0 - (double)out->requested / (double)out->allocated;
    if (out->total_free)
        out->frag_external = 1.0 - (double)out->largest_free / (double)out->total_free;
    if (out->reserved)
        out->frag_overall = 1.0 - (double)out->requested / (double)out->reserved;
    return PA_OK;
}

pa_status_t pa_pool_reset_peak(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    p->peak_requested = p->requested;
    p->peak_allocated = p->allocated;
    p->peak_reserved = p->reserved;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        p->zone[z].peak_requested = p->zone[z].requested;
        p->zone[z].peak_allocated = p->zone[z].allocated;
    }
    spin_unlock(&h->lock);
    return PA_OK;
}

/* ---- check and walk ------------------------------------------------------------------ */

static size_t check_locked(const pa_pool_impl_t *p) {
    size_t broken = _pa_heap_check(p);
    pa_check_tally_t t[PA_ZONE_COUNT];
    memset(t, 0, sizeof(t));
    size_t zres[PA_ZONE_COUNT] = {0, 0, 0};
    for (const pa_heap_chunk_t *c = p->chunks; c; c = c->next) {
        uintptr_t a = c->base, end = c->base + c->size;
        while (a < end) {
            pa_span_t *sp = _pa_map_lookup(p, a);
            if (!sp || sp->start != a) {
                broken++;
                break;
            }
            size_t bytes = sp->npages << PA_PAGE_SHIFT;
            if (sp->kind == PA_SPAN_SLAB) {
                broken += _pa_slab_check_slab(p, sp->owner, &t[PA_ZONE_SLAB]);
                zres[PA_ZONE_SLAB] += bytes;
            } else if (sp->kind == PA_SPAN_BUDDY) {
                broken += _pa_buddy_check_region(p, sp->owner, &t[PA_ZONE_BUDDY]);
                zres[PA_ZONE_BUDDY] += bytes;
            } else if (sp->kind == PA_SPAN_LARGE) {
                zres[PA_ZONE_LARGE] += bytes;
                if (sp->state == PA_BLOCK_LIVE) {
                    t[PA_ZONE_LARGE].live++;
                    t[PA_ZONE_LARGE].allocated += bytes;
                    t[PA_ZONE_LARGE].requested += sp->requested;
                    if (sp->requested > bytes || bytes - sp->requested > sp->requested / 8 + 2 * PA_PAGE_SIZE)
                        broken++; /* cached blocks are cut to within 1/8 */
                } else {
                    t[PA_ZONE_LARGE].cached += bytes;
                    t[PA_ZONE_LARGE].ncached++;
                }
            }
            a += bytes;
        }
    }
    broken += _pa_slab_check_classes(p);
    broken += _pa_buddy_check_lists(p);
    /* caches: every entry is a CACHED block of its bin, counted once */
    size_t ncached = 0, cached = 0, zc[PA_ZONE_COUNT] = {0, 0, 0};
    for (size_t b = 0; b < p->nbins; b++) {
        const pa_cache_bin_t *bin = &p->bins[b];
        int zone = bin_zone(p, b);
        if (bin->count > bin->cap) broken++;
        if (!!(p->nonempty_bins[b >> 6] & (1ull << (b & 63))) != (bin->count > 0)) broken++;
        for (uint32_t i = 0; i < bin->count; i++) {
            const pa_cache_entry_t *e = &bin->entries[i];
            pa_span_t *sp = _pa_map_lookup(p, (uintptr_t)e->ptr);
            ncached++;
            cached += e->size;
            zc[zone] += e->size;
            if (!sp) {
                broken++;
                continue;
            }
            if (zone == PA_ZONE_SLAB) {
                int exact;
                pa_slab_t *s = e->owner;
                uint32_t idx = sp->owner == s ? _pa_slab_index(p, s, (uintptr_t)e->ptr, &exact) : 0;
                if (sp->kind != PA_SPAN_SLAB || sp->owner != s || !exact || s->class_index != b ||
                    PA_SLOT_STATE(s->slot[idx]) != PA_BLOCK_CACHED || e->size != p->classes[b].size)
                    broken++;
            } else if (zone == PA_ZONE_BUDDY) {
                pa_buddy_region_t *r = e->owner;
                if (sp->kind != PA_SPAN_BUDDY || sp->owner != r) {
                    broken++;
                    continue;
                }
                uintptr_t off = (uintptr_t)e->ptr - r->base;
                size_t k = b - p->first_buddy_bin;
                if (r->tags[off >> r->unit_shift] != PA_TAG(k, PA_BLOCK_CACHED) ||
                    e->size != (size_t)1 << k)
                    broken++;
            } else {
                if (sp != e->owner || sp->kind != PA_SPAN_LARGE || sp->state != PA_BLOCK_CACHED ||
                    (uintptr_t)e->ptr != sp->start || e->size != sp->npages << PA_PAGE_SHIFT ||
                    b != p->first_large_bin + large_bin_of_pages(sp->npages))
                    broken++;
            }
        }
    }
    size_t tn = 0, tc = 0, alloc = 0, req = 0;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        tn += t[z].ncached;
        tc += t[z].cached;
        alloc += t[z].allocated;
        req += t[z].requested;
        if (t[z].live != (size_t)(p->zone[z].allocs - p->zone[z].frees) || t[z].allocated != p->zone[z].allocated ||
            t[z].requested != p->zone[z].requested || t[z].cached != p->zone[z].cached ||
            zc[z] != p->zone[z].cached || zres[z] != p->zone[z].reserved)
            broken++;
        if (p->zone[z].peak_requested < p->zone[z].requested ||
            p->zone[z].peak_allocated < p->zone[z].allocated)
            broken++;
    }
    if (tn != ncached || tc != cached || cached != p->cached) broken++;
    if (alloc != p->allocated || req != p->requested) broken++;
    if (zres[0] + zres[1] + zres[2] + p->heap_free_bytes != p->reserved) broken++;
    if (p->peak_requested < p->requested || p->peak_allocated < p->allocated) broken++;
    if (p->requested > p->allocated) broken++;
    return broken;
}

size_t pa_pool_check(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return 1;
    size_t r = check_locked(p);
    spin_unlock(&h->lock);
    return r;
}

pa_status_t pa_pool_walk(pa_pool_t *h, pa_pool_walker_t fn, void *ctx) {
    pa_status_t st;
    if (!fn) return PA_ERR_INVALID;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    int stop = 0;
    for (const pa_heap_chunk_t *c = p->chunks; c && !stop; c = c->next) {
        uintptr_t a = c->base, end = c->base + c->size;
        while (a < end && !stop) {
            pa_span_t *sp = _pa_map_lookup(p, a);
            if (!sp || sp->start != a) break;
            if (sp->kind == PA_SPAN_SLAB) {
                stop = _pa_slab_walk(p, sp->owner, fn, ctx);
            } else if (sp->kind == PA_SPAN_BUDDY) {
                stop = _pa_buddy_walk(p, sp->owner, fn, ctx);
            } else {
                pa_pool_block_t b;
                b.ptr = (void *)sp->start;
                b.size = sp->npages << PA_PAGE_SHIFT;
                b.zone = PA_ZONE_LARGE;
                b.state = sp->kind == PA_SPAN_FREE ? PA_BLOCK_FREE : sp->state;
                b.requested = b.state == PA_BLOCK_LIVE ? sp->requested : 0;
                stop = fn(&b, ctx);
            }
            a += sp->npages << PA_PAGE_SHIFT;
        }
    }
    spin_unlock(&h->lock);
    return PA_OK;
}
