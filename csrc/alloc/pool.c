/* alloc/pool.c -- the dynamic work pool: front end.
 *
 * Owns the lock and the handle, routes each request to a zone (slab
 * classes, buddy orders, large spans: slab.c, buddy.c, large.c), serves it
 * from the deferred caches first (cache.c), keeps the per-zone counters
 * and decides where a zone's new span comes from (the span source).
 * Statistics, the consistency check and the walk are in pool_inspect.c
 * (which takes the lock through _pa_pool_enter / _pa_pool_leave);
 * learned steps (pa_pool_step, planned offsets) in pool_learn.c, reached
 * from here through three hooks: alloc, free and the step.
 *
 * Design choices:
 *  - Growth happens only after the heap and a flush of the caches failed,
 *    so the reserved footprint tracks the live peak.  When reserved bytes
 *    exceed the high watermark after a growth, the pool trims down to the
 *    low watermark (fully free chunks go back to the backend).
 *  - The zones never call back into this file: they get their spans from
 *    a span source (zone.h) installed at create, so the policy above
 *    stays here and the dependencies run one way.
 *  - One lock per pool (pool_lock.h): a test-and-set spinlock that yields
 *    the CPU after a short spin, biased to the thread that keeps taking
 *    it (that thread enters with plain loads and stores; another thread
 *    revokes the bias first, with membarrier).  Every public call holds it
 *    for O(1) work on the fast path (a table lookup and a stack push or
 *    pop); cffi releases the GIL around calls, so Python threads really
 *    contend.  Finer locks (per class) were weighed and rejected: the
 *    pool-wide peaks need one serialisation point, and one uncontended
 *    lock per call is cheaper than the two or three a split design needs.
 *  - Use after destroy: the handle (struct pa_pool: the lock and a pointer
 *    to the pool proper) is never freed.  pa_pool_destroy() frees the pool
 *    proper, clears the pointer under the lock and keeps the handle on a
 *    global list of tombstones (reachable, so leak checkers stay quiet);
 *    every later call sees the NULL and returns PA_ERR_STATE.  Cost: 72
 *    bytes per destroyed pool for the life of the process.
 *  - fork(): a child has only the thread that forked, so a pool lock held
 *    by any other thread at that moment would stay locked in the child for
 *    ever.  Every live handle is on a registry; pthread_atfork handlers
 *    take the registry mutex and then every pool lock (revoking its bias)
 *    before the fork
 *    (each holder finishes its O(1)..O(pool) call first) and release them
 *    in the parent and the child, so the child's pools are consistent and
 *    unlocked whatever the other threads were doing.  Lock order, here and
 *    everywhere: registry mutex, then a pool lock (pa_pool_destroy too);
 *    no pool call takes the registry mutex while holding a pool lock.
 *    Forking from inside a pa_pool_walk() callback would deadlock (the
 *    forking thread already holds that pool's lock); pyarena never does.
 */
#define _POSIX_C_SOURCE 200809L
#include "pool_internal.h"
#include "page_heap_ops.h"
#include "pool_lock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK ((size_t)1 << 20)
#define DEFAULT_BUDGET ((size_t)16 << 20)
#define MAX_REQUEST ((size_t)1 << 47)

/* ---- lock and handle ------------------------------------------------------ */

struct pa_pool {
    pa_lock_t lock;           /* guards everything reachable from `p`   */
    pa_pool_impl_t *p;        /* NULL once destroyed (read under lock)  */
    /* Links guarded by registry_lock: on the live list while p != NULL,
       then on the tombstone list (next only). */
    struct pa_pool *next, *prev;
};

/* The registry: live handles (for the fork handlers) and tombstones
 * (destroyed handles, kept reachable).  registry_lock is taken before any
 * pool lock, never after one. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pa_pool *live_pools;
static struct pa_pool *tombstones;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int atfork_status; /* pthread_atfork's result, set once */

/* Before fork(): hold every pool, so no pool is mid-update in the child. */
static void fork_prepare(void) {
    pthread_mutex_lock(&registry_lock);
    for (struct pa_pool *h = live_pools; h; h = h->next) _pa_lock_exclusive(&h->lock);
}

static void fork_release(void) {
    for (struct pa_pool *h = live_pools; h; h = h->next) _pa_lock_release_exclusive(&h->lock);
    pthread_mutex_unlock(&registry_lock);
}

/* The child may have to register membarrier again before it grants a
 * bias (pool_lock.c). */
static void fork_child(void) {
    _pa_lock_setup();
    fork_release();
}

/* In the child the forking thread owns every lock taken in prepare (the
 * other threads are gone): releasing them is all it takes. */
static void register_atfork(void) {
    _pa_lock_setup();
    atfork_status = pthread_atfork(fork_prepare, fork_release, fork_child);
}

/* Lock `h` and return its pool, or NULL (unlocked) with *st set. */
static inline pa_pool_impl_t *enter(pa_pool_t *h, pa_status_t *st) {
    if (pa_unlikely(!h)) {
        *st = PA_ERR_INVALID;
        return NULL;
    }
    _pa_lock_acquire(&h->lock);
    pa_pool_impl_t *p = h->p;
    if (pa_unlikely(!p)) {
        _pa_lock_release(&h->lock);
        *st = PA_ERR_STATE;
    }
    return p;
}

/* enter / the lock's release for the read-only views (pool_inspect.c). */
pa_pool_impl_t *_pa_pool_enter(pa_pool_t *h, pa_status_t *st) { return enter(h, st); }

void _pa_pool_leave(pa_pool_t *h) { _pa_lock_release(&h->lock); }

/* ---- routing ------------------------------------------------------------------ */

typedef struct {
    pa_zone_t zone;
    size_t bin;     /* cache bin                                          */
    size_t bsize;   /* block bytes                                        */
    size_t idx;     /* slab class, buddy order or page count             */
} route_t;

/* The pages of a large block of `size` bytes. */
static inline size_t pages_of(size_t size) {
    return (size + PA_PAGE_SIZE - 1) >> PA_PAGE_SHIFT;
}

static inline pa_status_t route(const pa_pool_impl_t *p, size_t size, route_t *r) {
    if (size == 0) size = 1;
    if (pa_likely(size <= p->slab.max_size)) {
        size_t c = _pa_slab_class_of(&p->slab, size);
        r->zone = PA_ZONE_SLAB;
        r->bin = _pa_cache_slab_bin(&p->cache, c);
        r->idx = c;
        r->bsize = p->slab.classes[c].size;
        return PA_OK;
    }
    if (size <= p->buddy.max_size) {
        unsigned k = _pa_log2_ceil(size);
        if (k < p->buddy.min_order) k = p->buddy.min_order;
        r->zone = PA_ZONE_BUDDY;
        r->bin = _pa_cache_buddy_bin(&p->cache, k);
        r->idx = k;
        r->bsize = (size_t)1 << k;
        return PA_OK;
    }
    if (size > MAX_REQUEST) return PA_ERR_OVERFLOW;
    size_t np = pages_of(size);
    r->zone = PA_ZONE_LARGE;
    r->bin = _pa_cache_large_bin(&p->cache, np);
    r->idx = np;
    r->bsize = np << PA_PAGE_SHIFT;
    return PA_OK;
}

/* ---- spans for the zones -------------------------------------------------------- */

/* Empty slabs / regions kept as spares go back to the page heap. */
static void drop_spares(pa_pool_impl_t *p) {
    if (p->slab.nspare_slabs) _pa_slab_drop_spares(&p->slab);
    _pa_buddy_drop_spare(&p->buddy);
}

static size_t trim_locked(pa_pool_impl_t *p, size_t target) {
    _pa_cache_flush_all(&p->cache);
    drop_spares(p);
    p->trims++;
    return _pa_heap_release(&p->heap, target);
}

/* Must caches go back to the heap before it places a span?  (get_span) */
static inline int flush_due(const pa_pool_impl_t *p) {
    const pa_cache_t *c = &p->cache;
    return c->zone_cached[PA_ZONE_LARGE] ||
           (p->mode == PA_POOL_HYBRID &&
            c->zone_cached[PA_ZONE_BUDDY] >= ((size_t)1 << p->buddy.region_order));
}

/* The zones' span source: a span of `np` pages from the heap, else after
 * a flush of the caches, else after dropping the spares, else by growing. */
static pa_span_t *get_span(void *ctx, size_t np, pa_status_t *st) {
    pa_pool_impl_t *p = ctx;
    pa_cache_t *c = &p->cache;
    /* The heap places this span best-fit; it can only choose well if it
     * sees every free span, so cached large blocks (whole spans) and
     * cached buddy blocks (which pin whole regions) go back first.
     * Leaving the large ones cached made the heap fill the wrong holes
     * and grow (peak reserved / peak live 2.8 instead of 1.57 on the
     * pool-bench ResNet-50 trace); flushing the buddy bins too took
     * MobileNetV2 from 1.36 to 1.13 and log-uniform from 1.29 to 1.23, for
     * ~10 % more time per pair on the inference traces (hybrid mode only:
     * in buddy-only mode every block is a buddy block).  The buddy bins
     * go back only once they hold a region's worth (1 MiB by default):
     * below that they pin at most about one region, and flushing them on
     * every span request merged and split 8 / 16 KiB blocks for nothing
     * (log-uniform: ~6 % of the instructions per pair; peak reserved /
     * requested 1.133 -> 1.135).  The slab caches are flushed only if the
     * heap still cannot serve (flushing them costs their hot blocks). */
    if (flush_due(p))
        _pa_cache_flush_from(c, p->mode == PA_POOL_HYBRID ? c->first_buddy_bin
                                                          : c->first_large_bin);
    pa_span_t *s = _pa_heap_alloc(&p->heap, np, st);
    if (s) return s;
    if (_pa_cache_total(c)) {
        _pa_cache_flush_all(c);
        s = _pa_heap_alloc(&p->heap, np, st);
        if (s) return s;
    }
    drop_spares(p);
    s = _pa_heap_alloc(&p->heap, np, st);
    if (s) return s;
    _pa_learn_yield_region(&p->learn); /* an idle region makes room first */
    if (_pa_heap_grow(&p->heap, np) != 0) {
        *st = PA_ERR_NOMEM;
        return NULL;
    }
    s = _pa_heap_alloc(&p->heap, np, st);
    if (s && p->high_watermark && p->heap.reserved > p->high_watermark) {
        /* watermark: trim with this span already taken */
        trim_locked(p, p->low_watermark);
    }
    return s;
}

/* ---- accounting ------------------------------------------------------------------ */

/* The pool's peaks after its live bytes grew. */
static inline void track_peaks(pa_pool_impl_t *p) {
    size_t req = _pa_pool_requested(p), alloc = _pa_pool_allocated(p);
    if (req > p->peak_requested) p->peak_requested = req;
    if (alloc > p->peak_allocated) p->peak_allocated = alloc;
}

static inline void account_alloc(pa_pool_impl_t *p, pa_zone_t zone, size_t req, size_t bsize) {
    pa_zone_counters_t *z = &p->zone[zone];
    z->requested += req;
    z->allocated += bsize;
    z->allocs++;
    if (z->requested > z->peak_requested) z->peak_requested = z->requested;
    if (z->allocated > z->peak_allocated) z->peak_allocated = z->allocated;
    track_peaks(p);
}

static inline void account_free(pa_pool_impl_t *p, pa_zone_t zone, size_t req, size_t bsize) {
    pa_zone_counters_t *z = &p->zone[zone];
    z->requested -= req;
    z->allocated -= bsize;
    z->frees++;
}

/* A live block resized in place: only its requested bytes change. */
static void account_resize(pa_pool_impl_t *p, pa_zone_t zone, size_t old_req, size_t req) {
    pa_zone_counters_t *z = &p->zone[zone];
    z->requested = z->requested - old_req + req;
    if (z->requested > z->peak_requested) z->peak_requested = z->requested;
    track_peaks(p);
}

/* ---- allocation and free --------------------------------------------------------- */

static void *zone_alloc_locked(pa_pool_impl_t *p, size_t size, pa_status_t *st) {
    route_t r;
    pa_status_t s = route(p, size, &r);
    if (pa_unlikely(s != PA_OK)) {
        *st = s;
        p->failures++;
        return NULL;
    }
    size_t bsize = r.bsize;
    void *ptr = _pa_cache_pop(&p->cache, r.zone, r.bin, r.idx, size, &bsize);
    if (pa_likely(ptr != NULL)) {
        account_alloc(p, r.zone, size, bsize);
        *st = PA_OK;
        return ptr;
    }
    if (p->heap.limit && r.bsize > p->heap.limit) {
        *st = PA_ERR_NOMEM;
        p->failures++;
        return NULL;
    }
    s = PA_OK;
    if (r.zone == PA_ZONE_SLAB) {
        pa_slab_t *slab;
        ptr = _pa_slab_alloc(&p->slab, r.idx, size, &slab, &s);
    } else if (r.zone == PA_ZONE_BUDDY) {
        pa_buddy_region_t *region;
        ptr = _pa_buddy_alloc(&p->buddy, (unsigned)r.idx, size, &region, &s);
    } else {
        ptr = _pa_large_alloc(&p->large, r.idx, size, &s);
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

/* The zones' fast paths (below): a cached slab or buddy block, or a large
 * span placed directly; NULL leaves the request to zone_alloc_locked. */
PA_HOT void *slab_pop_locked(pa_pool_impl_t *p, size_t size);
PA_HOT void *buddy_pop_locked(pa_pool_impl_t *p, size_t size);
PA_HOT void *large_take_locked(pa_pool_impl_t *p, size_t size);

PA_HOT void *zone_fast_locked(pa_pool_impl_t *p, size_t size) {
    void *r = slab_pop_locked(p, size);
    if (!r && size > p->slab.max_size)
        r = size <= p->buddy.max_size ? buddy_pop_locked(p, size) : large_take_locked(p, size);
    return r;
}

/* A learned plan's block (pool_learn.c) when the step repeats one, else a
 * zone block, recorded for learning. */
static void *learn_alloc_locked(pa_pool_impl_t *p, size_t size, pa_status_t *st) {
    size_t bsize;
    void *ptr = _pa_learn_alloc(&p->learn, size, &bsize);
    if (ptr) { /* counted by the learned region (live_req, live_bytes) */
        (void)bsize;
        track_peaks(p);
        *st = PA_OK;
        return ptr;
    }
    ptr = zone_fast_locked(p, size); /* the zones' fast paths, then the general one */
    if (ptr) *st = PA_OK;
    else ptr = zone_alloc_locked(p, size, st);
    if (ptr) _pa_learn_note_alloc(&p->learn, ptr, size);
    return ptr;
}

static inline void *alloc_locked(pa_pool_impl_t *p, size_t size, pa_status_t *st) {
    if (pa_unlikely(p->learn.hot)) return learn_alloc_locked(p, size, st);
    return zone_alloc_locked(p, size, st);
}

/* End a step: learn from it; a new plan gives the warm-up memory back
 * (and the region grows if the plan needs it); learning that does not pay
 * gives the region back.
 *
 * A plan made (or a step served after the zones grew) trims the zones:
 * what the warm-up took there now has a place in the region.  Not when
 * the region is under 1/TRIM_REGION_SHARE of the zones' memory: the zones
 * still serve nearly everything, and a trim (all caches flushed, every
 * free chunk unmapped) only makes them fault it in again (a 4 KiB plan in
 * the irregular trace: 3 trims, 12 grows and 8x the plain pool's time per
 * pair over that replay). */
#define TRIM_REGION_SHARE 16

static void step_locked(pa_pool_impl_t *p) {
    if (_pa_learn_step(&p->learn, _pa_pool_requested(p))) {
        /* fallen back: the region goes back, the zones keep what they
         * hold (as the plain pool would: trimming them only faulted it in
         * again) */
        if (!p->learn.rest && p->learn.want >= p->heap.reserved / TRIM_REGION_SHARE)
            trim_locked(p, 0);
        _pa_learn_map_region(&p->learn, p->learn.rest != 0);
    }
}

/* Describe the live block at `ptr`, or say why it is not one.  The page
 * map says which zone's side table to ask; nothing is read from the
 * block itself. */
static inline pa_status_t find_live_at(uintptr_t ent, const void *ptr, pa_block_ref_t *b) {
    uintptr_t a = (uintptr_t)ptr;
    if (pa_likely(ent & PA_MAP_TAG_SLAB)) return _pa_slab_find_live(_pa_page_map_owner(ent), a, b);
    if (ent & PA_MAP_TAG_REGION) return _pa_buddy_find_live(_pa_page_map_owner(ent), a, b);
    return _pa_large_find_live((pa_span_t *)ent, a, b);
}

static pa_status_t find_live(const pa_pool_impl_t *p, const void *ptr, pa_block_ref_t *b) {
    return find_live_at(_pa_page_map_entry(&p->heap.map, (uintptr_t)ptr), ptr, b);
}

/* Free `ptr`, whose page-map entry is `ent`. */
static pa_status_t free_locked_at(pa_pool_impl_t *p, void *ptr, uintptr_t ent) {
    pa_block_ref_t b;
    pa_status_t s;
    if (pa_unlikely(_pa_learn_owns(&p->learn, ptr))) {
        s = _pa_learn_free(&p->learn, ptr, &b.requested, &b.bsize);
        if (s != PA_OK) return s;
        goto done; /* counted by the learned region */
    }
    s = find_live_at(ent, ptr, &b);
    if (s != PA_OK) return s;
    if (pa_unlikely(p->learn.hot)) _pa_learn_note_free(&p->learn, ptr);
    size_t bin;
    if (b.zone == PA_ZONE_SLAB) {
        bin = _pa_cache_slab_bin(&p->cache, _pa_slab_mark_cached(b.owner, b.unit));
    } else if (b.zone == PA_ZONE_BUDDY) {
        bin = _pa_cache_buddy_bin(&p->cache, _pa_buddy_mark_cached(b.owner, b.unit));
    } else if (_pa_cache_wants_large(&p->cache, p->zone[PA_ZONE_LARGE].frees + 1)) {
        _pa_large_mark_cached(b.owner);
        bin = _pa_cache_large_bin(&p->cache, ((pa_span_t *)b.owner)->npages);
    } else { /* large requests keep missing the caches: the heap takes it */
        account_free(p, b.zone, b.requested, b.bsize);
        _pa_large_release(&p->large, b.owner);
        goto done;
    }
    account_free(p, b.zone, b.requested, b.bsize);
    _pa_cache_put(&p->cache, b.zone, bin, ptr, b.owner, b.bsize);
done:
    if (pa_unlikely(p->learn.auto_step) && _pa_pool_requested(p) == p->learn.base_requested &&
        p->learn.nalloc)
        step_locked(p);
    return PA_OK;
}

static pa_status_t free_locked(pa_pool_impl_t *p, void *ptr) {
    return free_locked_at(p, ptr, _pa_page_map_entry(&p->heap.map, (uintptr_t)ptr));
}

/* ---- the slab fast paths ------------------------------------------------------------- */

/* The common case, in two small leaf functions tried before the general
 * paths: a slab-class request served from its cache bin, a slab block
 * freed into its bin.  They do what zone_alloc_locked / free_locked do for
 * that case, minus the routing record, the zone switches and the calls
 * (callgrind, log-uniform 64 B .. 4 KiB: ~330 -> ~250 instructions per
 * pair); anything else (a miss, a full bin, the budget, a bad pointer;
 * on the free side also learning, which must record the free) returns
 * NULL / 0 and the general path runs from the start, so every check and
 * status stays in one place.  A step being learned allocates through
 * learn_alloc_locked, which tries these pops itself and records the
 * block. */
/* A slab-class request's cached block off its bin (*ptr, its slab in
 * *slab; *status, if given, PA_OK): 1, else 0 (not a slab class, or the
 * bin is empty; nothing changed). */
PA_HOT int slab_take_locked(pa_pool_impl_t *p, size_t size, void **ptr, void **slab,
                            pa_status_t *status) {
    const pa_slab_zone_t *z = &p->slab;
    if (size - 1 >= z->max_size) return 0; /* size 0 too */
    size_t i = (size - 1) >> z->granularity_shift;
    if (pa_unlikely(i >= z->class_of_len)) return 0;
    size_t b = _pa_cache_slab_bin(&p->cache, z->class_of[i]);
    if (!p->cache.bins[b].count) return 0;
    if (status) *status = PA_OK; /* a hit cannot fail: one value less live */
    return _pa_cache_take(&p->cache, b, ptr, slab);
}

/* The block slab_take_locked took, live and counted (a cache hit). */
PA_HOT void slab_reuse_locked(pa_pool_impl_t *p, void *ptr, pa_slab_t *slab, size_t size) {
    _pa_cache_hit(&p->cache, PA_ZONE_SLAB, slab->size);
    _pa_slab_reuse_cached(slab, ptr, size);
    account_alloc(p, PA_ZONE_SLAB, size, slab->size);
}

PA_HOT void *slab_pop_locked(pa_pool_impl_t *p, size_t size) {
    void *ptr, *slab;
    if (!slab_take_locked(p, size, &ptr, &slab, NULL)) return NULL;
    slab_reuse_locked(p, ptr, slab, size);
    return ptr;
}

/* Room on cache bin `bin_index` for a block of `bsize` bytes: the bin not
 * full and the budget not passed (else free_locked_at flushes). */
PA_HOT int cache_room_locked(pa_pool_impl_t *p, size_t bin_index, size_t bsize) {
    pa_cache_t *c = &p->cache;
    const pa_cache_bin_t *bin = &c->bins[bin_index];
    return pa_likely(bin->count != bin->cap && _pa_cache_total(c) + bsize <= c->budget);
}

/* Bin `bin_index`, about to receive its first block, in the nonempty
 * bitmap. */
PA_HOT void cache_mark_locked(pa_pool_impl_t *p, size_t bin_index) {
    if (!p->cache.bins[bin_index].count) _pa_cache_mark_nonempty(&p->cache, bin_index);
}

/* The live slab or buddy block `b` at `ptr` onto bin `bin_index` (with
 * room: cache_room_locked); the caller keeps the nonempty bitmap. */
PA_HOT void cache_put_locked(pa_pool_impl_t *p, const pa_block_ref_t *b, size_t bin_index,
                             void *ptr) {
    pa_cache_t *c = &p->cache;
    pa_cache_bin_t *bin = &c->bins[bin_index];
    if (b->zone == PA_ZONE_SLAB) _pa_slab_mark_cached(b->owner, b->unit);
    else _pa_buddy_mark_cached(b->owner, b->unit);
    account_free(p, b->zone, b->requested, b->bsize);
    c->zone_cached[b->zone] += b->bsize;
    bin->entries[bin->count++] = (pa_cache_entry_t){ptr, b->owner, b->bsize};
}

/* The live slab or buddy block `b` at `ptr` goes on cache bin `bin_index`
 * as free_locked_at would put it there: 1, or 0 (nothing changed) when the
 * bin is full or the budget would be passed (free_locked_at then flushes). */
PA_HOT int cache_push_locked(pa_pool_impl_t *p, const pa_block_ref_t *b, size_t bin_index,
                             void *ptr) {
    if (!cache_room_locked(p, bin_index, b->bsize)) return 0;
    cache_put_locked(p, b, bin_index, ptr);
    if (p->cache.bins[bin_index].count == 1) _pa_cache_mark_nonempty(&p->cache, bin_index);
    return 1;
}

/* 1 if `ptr` (page-map entry `ent`, tagged as a slab's) was a live slab
 * block and is now cached, else 0 (nothing changed). */
PA_HOT int slab_push_locked(pa_pool_impl_t *p, void *ptr, uintptr_t ent) {
    /* learning records frees while hot -- always, with auto_step (which
     * ends steps in free_locked_at): the general path then */
    if (pa_unlikely(p->learn.hot) || _pa_learn_owns(&p->learn, ptr)) return 0;
    pa_block_ref_t b;
    if (_pa_slab_find_live(_pa_page_map_owner(ent), (uintptr_t)ptr, &b) != PA_OK) return 0;
    pa_slab_t *slab = b.owner;
    return cache_push_locked(p, &b, _pa_cache_slab_bin(&p->cache, slab->class_index), ptr);
}

/* ---- the buddy fast paths ------------------------------------------------------------ */

/* A buddy-order request (slab max < size <= buddy max) served from its
 * cache bin, as zone_alloc_locked does, minus the routing record and the
 * calls; NULL (nothing changed) when the bin is empty. */
PA_HOT void *buddy_pop_locked(pa_pool_impl_t *p, size_t size) {
    unsigned k = _pa_log2_ceil(size);
    if (k < p->buddy.min_order) k = p->buddy.min_order;
    size_t bsize;
    void *ptr = _pa_cache_pop(&p->cache, PA_ZONE_BUDDY, _pa_cache_buddy_bin(&p->cache, k), k,
                              size, &bsize);
    if (ptr) account_alloc(p, PA_ZONE_BUDDY, size, bsize);
    return ptr;
}

/* 1 if `ptr` (page-map entry `ent`, tagged as a region's) was a live
 * buddy block and is now cached, else 0 (nothing changed). */
PA_HOT int buddy_push_locked(pa_pool_impl_t *p, void *ptr, uintptr_t ent) {
    if (pa_unlikely(p->learn.hot || p->learn.auto_step) || _pa_learn_owns(&p->learn, ptr))
        return 0;
    pa_block_ref_t b;
    pa_buddy_region_t *r = _pa_page_map_owner(ent);
    if (_pa_buddy_find_live(r, (uintptr_t)ptr, &b) != PA_OK) return 0;
    return cache_push_locked(p, &b, _pa_cache_buddy_bin(&p->cache, PA_TAG_ORDER(r->tags[b.unit])),
                             ptr);
}

/* ---- the large fast paths ------------------------------------------------------------ */

/* May the page heap place a large request directly, as get_span would
 * with nothing to flush first?  Nothing large cached, the buddy caches
 * under a region, no limit, an unused span descriptor at hand (no refill
 * call: the fast path saves no registers). */
PA_HOT int large_fast_ok(pa_pool_impl_t *p, size_t size) {
    return size <= MAX_REQUEST && !p->heap.limit && !flush_due(p) && p->heap.unused_descs;
}

/* The span large_take_locked placed for `size` bytes, live and counted. */
PA_HOT void large_set_live_locked(pa_pool_impl_t *p, pa_span_t *s, size_t size) {
    _pa_large_set_live(s, size);
    account_alloc(p, PA_ZONE_LARGE, size, s->npages << PA_PAGE_SHIFT);
}

/* A large request served by the page heap directly (large_fast_ok; the
 * callers check learning).  NULL (nothing changed) sends it down the
 * general path, which flushes, grows, trims and reports. */
PA_HOT void *large_take_locked(pa_pool_impl_t *p, size_t size) {
    if (!large_fast_ok(p, size)) return NULL;
    pa_span_t *s = _pa_heap_take_ready(&p->heap, pages_of(size));
    if (!s) return NULL;
    large_set_live_locked(p, s, size);
    return (void *)s->start;
}

/* The live large span `ptr` starts (page-map entry `ent`, untagged), now
 * counted as freed, if it may go straight back to the page heap, as
 * free_locked_at gives it while large requests keep missing the caches;
 * else NULL, nothing changed. */
PA_HOT pa_span_t *large_give_begin(pa_pool_impl_t *p, void *ptr, uintptr_t ent) {
    pa_span_t *s = (pa_span_t *)ent;
    if (!s || s->start != (uintptr_t)ptr || s->kind != PA_SPAN_LARGE ||
        s->state != PA_BLOCK_LIVE || pa_unlikely(p->learn.hot || p->learn.auto_step) ||
        _pa_learn_owns(&p->learn, ptr) ||
        _pa_cache_wants_large(&p->cache, p->zone[PA_ZONE_LARGE].frees + 1))
        return NULL; /* a probe, a cache, learning or an error: the general path */
    account_free(p, PA_ZONE_LARGE, s->requested, s->npages << PA_PAGE_SHIFT);
    return s;
}

/* 1 if `ptr` (page-map entry `ent`, untagged) was a live large block and
 * went straight back to the page heap; else 0, nothing changed. */
PA_HOT int large_give_locked(pa_pool_impl_t *p, void *ptr, uintptr_t ent) {
    pa_span_t *s = large_give_begin(p, ptr, ent);
    if (!s) return 0;
    _pa_heap_give(&p->heap, s, 1); /* a large span: its ends name it */
    return 1;
}

/* ---- create and destroy ----------------------------------------------------------- */

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
    cfg->slab_max = 16384;
    cfg->slab_size = (size_t)64 << 10;
    cfg->buddy_region = (size_t)1 << 20;
    cfg->large_threshold = (size_t)16 << 10;
    cfg->learn = 1;
    return PA_OK;
}

/* Free the pool proper, whatever part of it pa_pool_create got to build. */
static void impl_free(pa_pool_impl_t *p) {
    if (p->learn.heap) _pa_learn_destroy(&p->learn);
    _pa_cache_destroy(&p->cache);
    _pa_slab_destroy(&p->slab); /* finds live slabs through the heap */
    _pa_buddy_destroy(&p->buddy);
    _pa_heap_destroy(&p->heap);
    free(p);
}

/* PA_OK if `cfg` (granularity `gran`) describes a pool, else why not. */
static pa_status_t config_check(const pa_pool_config_t *cfg, size_t gran) {
    if (!_pa_is_pow2(gran) || gran < PA_MIN_ALIGNMENT || gran > PA_PAGE_SIZE)
        return PA_ERR_ALIGN;
    /* unsigned: a negative value from a binding is out of range too */
    if ((unsigned)cfg->mode > PA_POOL_BUDDY_ONLY) return PA_ERR_INVALID;
    if ((unsigned)cfg->growth > PA_GROW_NONE) return PA_ERR_INVALID;
    if ((unsigned)cfg->release > PA_RELEASE_DECOMMIT) return PA_ERR_INVALID;
    if (cfg->low_watermark > cfg->high_watermark) return PA_ERR_INVALID;
    if (cfg->growth == PA_GROW_NONE && !cfg->chunk_size && !cfg->limit) return PA_ERR_INVALID;
    const pa_backend_t *be = cfg->backend ? cfg->backend : pa_backend_default();
    if (!be->map || !be->unmap) return PA_ERR_INVALID;
    return PA_OK;
}

/* Build the layers of `p` bottom up (the heap maps its first chunk last,
 * after everything that can fail on a bad config). */
static pa_status_t impl_init(pa_pool_impl_t *p, const pa_pool_config_t *cfg, size_t gran) {
    pa_page_heap_t *heap = &p->heap;
    p->granularity = gran;
    p->mode = cfg->mode;
    p->high_watermark = cfg->high_watermark;
    p->low_watermark = cfg->low_watermark;
    heap->growth = cfg->growth;
    heap->huge = cfg->huge_pages != 0;
    heap->release = cfg->release;
    heap->chunk_size = cfg->chunk_size ? cfg->chunk_size
                       : (cfg->growth == PA_GROW_NONE ? cfg->limit : DEFAULT_CHUNK);
    heap->limit = cfg->limit;
    heap->backend = cfg->backend ? *cfg->backend : *pa_backend_default();
    pa_span_source_t source = {get_span, p};
    if (_pa_slab_init(&p->slab, cfg, p->mode, gran, heap, source) != 0 ||
        _pa_buddy_init(&p->buddy, cfg, p->mode, _pa_log2_floor(gran), p->slab.max_size, heap,
                       source) != 0)
        return PA_ERR_INVALID;
    _pa_large_init(&p->large, heap, source);
    size_t budget = cfg->cache_budget ? cfg->cache_budget : DEFAULT_BUDGET;
    if (_pa_cache_init(&p->cache, budget, &p->slab, &p->buddy, &p->large) != 0 ||
        _pa_heap_init(heap) != 0)
        return PA_ERR_NOMEM;
    _pa_learn_init(&p->learn, cfg, gran, heap);
    /* slab-sized blocks: the slab caches' fast path is a plan's match */
    p->learn.small_max = p->mode == PA_POOL_HYBRID ? p->slab.max_size : 0;
    return PA_OK;
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
    *status = config_check(cfg, gran);
    if (*status != PA_OK) return NULL;
    pa_pool_impl_t *p = calloc(1, sizeof(*p));
    struct pa_pool *h = calloc(1, sizeof(*h));
    if (!p || !h) {
        free(p);
        free(h);
        *status = PA_ERR_NOMEM;
        return NULL;
    }
    pthread_once(&atfork_once, register_atfork);
    *status = atfork_status == 0 ? impl_init(p, cfg, gran) : PA_ERR_NOMEM;
    if (*status != PA_OK) {
        impl_free(p);
        free(h);
        return NULL;
    }
    _pa_lock_init(&h->lock);
    h->p = p;
    pthread_mutex_lock(&registry_lock);
    h->next = live_pools;
    if (live_pools) live_pools->prev = h;
    live_pools = h;
    pthread_mutex_unlock(&registry_lock);
    return h;
}

pa_status_t pa_pool_destroy(pa_pool_t *h) {
    if (!h) return PA_ERR_INVALID;
    pthread_mutex_lock(&registry_lock);
    _pa_lock_exclusive(&h->lock);
    pa_pool_impl_t *p = h->p;
    h->p = NULL;
    _pa_lock_release_exclusive(&h->lock);
    if (p) { /* live -> tombstone; a second destroy finds p NULL */
        if (h->prev) h->prev->next = h->next;
        else live_pools = h->next;
        if (h->next) h->next->prev = h->prev;
        h->prev = NULL;
        h->next = tombstones;
        tombstones = h;
    }
    pthread_mutex_unlock(&registry_lock);
    if (!p) return PA_ERR_STATE;
    impl_free(p);
    return PA_OK;
}

/* ---- public API --------------------------------------------------------------------- */

/* pa_pool_alloc while the pool learns a step (the lock held): a planned
 * block, or a zone block recorded; the lock is released here. */
static __attribute__((noinline)) void *alloc_learning(pa_pool_t *h, pa_pool_impl_t *p,
                                                      size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    void *r = learn_alloc_locked(p, size, status);
    _pa_lock_release(&h->lock);
    return r;
}

/* pa_pool_free of a block in the learned region (the lock held). */
static __attribute__((noinline)) pa_status_t free_learned(pa_pool_t *h, pa_pool_impl_t *p,
                                                          void *ptr) {
    pa_status_t st = free_locked_at(p, ptr, 0);
    _pa_lock_release(&h->lock);
    return st;
}

/* pa_pool_alloc past its fast path (the lock already held if `held`). */
static __attribute__((noinline)) void *alloc_general(pa_pool_t *h, size_t size,
                                                     pa_status_t *status, int held) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    pa_pool_impl_t *p = held ? h->p : enter(h, status);
    if (!p) return NULL;
    void *r = pa_likely(!p->learn.hot) ? zone_fast_locked(p, size) : NULL;
    if (pa_likely(r != NULL)) *status = PA_OK;
    else r = alloc_locked(p, size, status);
    _pa_lock_release(&h->lock);
    return r;
}

/* The buddy and large fast paths, each behind one small call from the
 * biased fast path of pa_pool_alloc / pa_pool_free (fewer registers to
 * save than the general entry's); a miss goes on to the general entry. */
static __attribute__((noinline)) void *alloc_buddy(pa_pool_t *h, pa_pool_impl_t *p, size_t size,
                                                   pa_status_t *status) {
    void *r = buddy_pop_locked(p, size);
    if (!r) return alloc_general(h, size, status, 1);
    _pa_lock_leave_biased(&h->lock);
    if (status) *status = PA_OK;
    return r;
}

/* A slab cache hit, its second stage (as free_large is split, see there):
 * the block live and counted, the lock left. */
static __attribute__((noinline)) void *alloc_slab_hit(pa_pool_t *h, pa_pool_impl_t *p, void *ptr,
                                                      pa_slab_t *slab, size_t size) {
    slab_reuse_locked(p, ptr, slab, size);
    _pa_lock_leave_biased(&h->lock);
    return ptr;
}

/* alloc_large is large_take_locked in stages joined by tail calls (see
 * free_large): the best fit; the split; filing the rest; the accounting
 * and the lock.  None can fail once the span is chosen, so the status is
 * set first: one argument less to carry. */
static __attribute__((noinline)) void *alloc_large_live(pa_pool_t *h, pa_pool_impl_t *p,
                                                        pa_span_t *s, size_t size) {
    _pa_heap_taken(&p->heap, s);
    large_set_live_locked(p, s, size);
    _pa_lock_leave_biased(&h->lock);
    return (void *)s->start;
}

static __attribute__((noinline)) void *alloc_large_last(pa_pool_t *h, pa_pool_impl_t *p,
                                                        pa_span_t *s, size_t size) {
    _pa_heap_register_last(&p->heap, s); /* its first page names it already */
    return alloc_large_live(h, p, s, size);
}

static __attribute__((noinline)) void *alloc_large_link(pa_pool_t *h, pa_pool_impl_t *p,
                                                        pa_span_t *s, size_t size,
                                                        pa_span_t *tail) {
    _pa_heap_link(&p->heap, tail);
    return alloc_large_last(h, p, s, size);
}

static __attribute__((noinline)) void *alloc_large_file(pa_pool_t *h, pa_pool_impl_t *p,
                                                        pa_span_t *s, size_t size,
                                                        pa_span_t *tail) {
    _pa_heap_register(&p->heap, tail); /* the rest: a free span */
    return alloc_large_link(h, p, s, size, tail);
}

static __attribute__((noinline)) void *alloc_large_rest(pa_pool_t *h, pa_pool_impl_t *p,
                                                        pa_span_t *s, size_t size) {
    size_t np = pages_of(size);
    if (s->npages == np) return alloc_large_live(h, p, s, size);
    return alloc_large_file(h, p, s, size, _pa_heap_cut_off(&p->heap, s, np));
}

static __attribute__((noinline)) void *alloc_large(pa_pool_t *h, pa_pool_impl_t *p, size_t size,
                                                   pa_status_t *status) {
    pa_span_t *s = large_fast_ok(p, size) ? _pa_heap_best_fit(&p->heap, pages_of(size)) : NULL;
    if (!s) return alloc_general(h, size, status, 1);
    _pa_heap_unlink(&p->heap, s);
    if (status) *status = PA_OK;
    return alloc_large_rest(h, p, s, size);
}

static __attribute__((noinline)) pa_status_t free_general(pa_pool_t *h, void *ptr, int held);

/* free_slab is slab_push_locked in stages joined by tail calls (see
 * free_large): the live slot; room in its bin; caching it. */
static __attribute__((noinline)) pa_status_t free_slab_put(pa_pool_t *h, pa_pool_impl_t *p,
                                                           void *ptr, pa_slab_t *slab,
                                                           size_t unit) {
    pa_block_ref_t b = {PA_ZONE_SLAB, slab, slab->size, PA_SLOT_REQ(slab->slot[unit]), unit};
    cache_put_locked(p, &b, _pa_cache_slab_bin(&p->cache, slab->class_index), ptr);
    _pa_lock_leave_biased(&h->lock);
    return PA_OK;
}

/* The first block of an empty bin: the bin into the nonempty bitmap. */
static __attribute__((noinline)) pa_status_t free_slab_first(pa_pool_t *h, pa_pool_impl_t *p,
                                                             void *ptr, pa_slab_t *slab,
                                                             size_t unit) {
    cache_mark_locked(p, _pa_cache_slab_bin(&p->cache, slab->class_index));
    return free_slab_put(h, p, ptr, slab, unit);
}

static __attribute__((noinline)) pa_status_t free_slab_push(pa_pool_t *h, pa_pool_impl_t *p,
                                                            void *ptr, pa_slab_t *slab,
                                                            size_t unit) {
    size_t bin = _pa_cache_slab_bin(&p->cache, slab->class_index);
    if (!cache_room_locked(p, bin, slab->size)) return free_general(h, ptr, 1);
    if (pa_unlikely(!p->cache.bins[bin].count)) return free_slab_first(h, p, ptr, slab, unit);
    return free_slab_put(h, p, ptr, slab, unit);
}

static __attribute__((noinline)) pa_status_t free_slab(pa_pool_t *h, pa_pool_impl_t *p, void *ptr,
                                                       uintptr_t ent) {
    pa_block_ref_t b;
    if (pa_unlikely(p->learn.hot) ||
        _pa_slab_find_live(_pa_page_map_owner(ent), (uintptr_t)ptr, &b) != PA_OK)
        return free_general(h, ptr, 1); /* learning records frees; errors */
    return free_slab_push(h, p, ptr, b.owner, b.unit);
}

static __attribute__((noinline)) pa_status_t free_buddy(pa_pool_t *h, pa_pool_impl_t *p, void *ptr,
                                                        uintptr_t ent) {
    if (!buddy_push_locked(p, ptr, ent)) return free_general(h, ptr, 1);
    _pa_lock_leave_biased(&h->lock);
    return PA_OK;
}

/* free_large is large_give_locked in stages joined by tail calls: the
 * coalescing keeps more values live than the registers a function may use
 * without saving any, and saved registers are stores (see pa_pool_alloc).
 * The stages: checks and counts; the left neighbour; the right one; filing
 * the free span and leaving the lock. */
static __attribute__((noinline)) pa_status_t free_large_file(pa_pool_t *h, pa_page_heap_t *heap,
                                                             pa_span_t *s, int merged) {
    if (merged) _pa_heap_register_last(heap, s); /* its first page names it */
    _pa_heap_link(heap, s);
    _pa_lock_leave_biased(&h->lock);
    return PA_OK;
}

static __attribute__((noinline)) pa_status_t free_large_absorb(pa_pool_t *h, pa_page_heap_t *heap,
                                                               pa_span_t *s, pa_span_t *r) {
    _pa_heap_merge_right(heap, s, r);
    return free_large_file(h, heap, s, 1);
}

static __attribute__((noinline)) pa_status_t free_large_right(pa_pool_t *h, pa_page_heap_t *heap,
                                                              pa_span_t *s, int merged) {
    pa_span_t *r = _pa_heap_free_right(heap, s);
    if (r) return free_large_absorb(h, heap, s, r);
    return free_large_file(h, heap, s, merged);
}

static __attribute__((noinline)) pa_status_t free_large_join(pa_pool_t *h, pa_page_heap_t *heap,
                                                             pa_span_t *s, pa_span_t *l) {
    return free_large_right(h, heap, _pa_heap_merge_left(heap, l, s), 1);
}

static __attribute__((noinline)) pa_status_t free_large(pa_pool_t *h, pa_pool_impl_t *p, void *ptr,
                                                        uintptr_t ent) {
    pa_span_t *s = large_give_begin(p, ptr, ent);
    if (!s) return free_general(h, ptr, 1);
    pa_page_heap_t *heap = &p->heap;
    heap->free_bytes += s->npages << PA_PAGE_SHIFT;
    pa_span_t *l = _pa_heap_free_left(heap, s);
    if (l) return free_large_join(h, heap, s, l);
    return free_large_right(h, heap, s, 0);
}

/* The fast path makes no call but a tail call, so it saves no registers:
 * on random traffic its stores queue behind the caller's stores to cold
 * blocks. */
void *pa_pool_alloc(pa_pool_t *h, size_t size, pa_status_t *status) {
    if (pa_likely(h != NULL) && _pa_lock_enter_biased(&h->lock)) {
        pa_pool_impl_t *p = h->p;
        if (pa_likely(p != NULL)) {
            if (pa_unlikely(p->learn.hot)) return alloc_learning(h, p, size, status);
            void *ptr, *slab;
            if (pa_likely(slab_take_locked(p, size, &ptr, &slab, status)))
                return alloc_slab_hit(h, p, ptr, slab, size);
            if (size > p->slab.max_size)
                return size <= p->buddy.max_size ? alloc_buddy(h, p, size, status)
                                                 : alloc_large(h, p, size, status);
            return alloc_general(h, size, status, 1);
        }
        _pa_lock_leave_biased(&h->lock);
    }
    return alloc_general(h, size, status, 0);
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

/* Resize block `b` (at ptr) to `size` bytes: in place when the block size
 * stays, else by alloc + copy + free; NULL with *st set on failure. */
static void *realloc_locked(pa_pool_impl_t *p, void *ptr, const pa_block_ref_t *b,
                            size_t size, pa_status_t *st) {
    route_t r;
    *st = route(p, size, &r);
    if (*st != PA_OK) {
        p->failures++;
        return NULL;
    }
    if (r.zone == b->zone && r.bsize == b->bsize) {
        if (b->zone == PA_ZONE_SLAB) _pa_slab_set_requested(b->owner, b->unit, size);
        else if (b->zone == PA_ZONE_BUDDY) _pa_buddy_set_requested(b->owner, b->unit, size);
        else _pa_large_set_requested(b->owner, size);
        account_resize(p, b->zone, b->requested, size);
        return ptr;
    }
    void *out = alloc_locked(p, size, st);
    if (out) {
        memcpy(out, ptr, b->requested < size ? b->requested : size);
        free_locked(p, ptr);
    }
    return out;
}

void *pa_pool_realloc(pa_pool_t *h, void *ptr, size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (!ptr) return pa_pool_alloc(h, size, status);
    pa_pool_impl_t *p = enter(h, status);
    if (!p) return NULL;
    pa_block_ref_t b;
    void *out = NULL;
    pa_status_t s;
    if (_pa_learn_owns(&p->learn, ptr)) {
        /* a planned block moves to wherever the next request goes */
        size_t req;
        _pa_learn_block(&p->learn, ptr, &req, &s);
        if (s == PA_OK) out = alloc_locked(p, size, &s); /* counts its failure */
        else p->failures++;
        if (out) {
            memcpy(out, ptr, req < size ? req : size);
            free_locked(p, ptr);
        }
        _pa_lock_release(&h->lock);
        *status = s;
        return out;
    }
    s = find_live(p, ptr, &b);
    if (s == PA_OK) out = realloc_locked(p, ptr, &b, size, &s);
    else p->failures++;
    _pa_lock_release(&h->lock);
    *status = s;
    return out;
}

/* pa_pool_free past its fast path (the lock already held if `held`). */
static __attribute__((noinline)) pa_status_t free_general(pa_pool_t *h, void *ptr, int held) {
    pa_status_t st = PA_OK;
    pa_pool_impl_t *p = held ? h->p : enter(h, &st);
    if (!p) return st;
    if (!ptr) {
        st = PA_OK;
    } else {
        uintptr_t ent = _pa_page_map_entry(&p->heap.map, (uintptr_t)ptr);
        int done = (ent & PA_MAP_TAG_MASK) == 0 ? large_give_locked(p, ptr, ent)
                   : (ent & PA_MAP_TAG_SLAB) ? slab_push_locked(p, ptr, ent)
                                             : buddy_push_locked(p, ptr, ent);
        st = done ? PA_OK : free_locked_at(p, ptr, ent);
    }
    _pa_lock_release(&h->lock);
    return st;
}

pa_status_t pa_pool_free(pa_pool_t *h, void *ptr) {
    if (pa_likely(h != NULL && ptr != NULL) && _pa_lock_enter_biased(&h->lock)) {
        pa_pool_impl_t *p = h->p;
        if (pa_likely(p != NULL)) {
            if (_pa_learn_owns(&p->learn, ptr)) return free_learned(h, p, ptr);
            uintptr_t ent = _pa_page_map_entry(&p->heap.map, (uintptr_t)ptr);
            if (ent & PA_MAP_TAG_SLAB) return free_slab(h, p, ptr, ent);
            return ent & PA_MAP_TAG_REGION ? free_buddy(h, p, ptr, ent)
                                           : free_large(h, p, ptr, ent);
        }
        return free_general(h, ptr, 1);
    }
    return free_general(h, ptr, 0);
}

size_t pa_pool_block_size(pa_pool_t *h, const void *ptr) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return 0;
    pa_block_ref_t b;
    size_t r = _pa_learn_owns(&p->learn, ptr) ? _pa_learn_block(&p->learn, ptr, NULL, NULL)
               : find_live(p, ptr, &b) == PA_OK ? b.bsize : 0;
    _pa_lock_release(&h->lock);
    return r;
}

pa_status_t pa_pool_reclaim(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    _pa_cache_flush_all(&p->cache);
    drop_spares(p);
    _pa_lock_release(&h->lock);
    return PA_OK;
}

pa_status_t pa_pool_trim(pa_pool_t *h, size_t target, size_t *released) {
    pa_status_t st;
    if (released) *released = 0;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    size_t r = trim_locked(p, target);
    _pa_lock_release(&h->lock);
    if (released) *released = r;
    return PA_OK;
}

pa_status_t pa_pool_free_all(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    trim_locked(p, 0);
    _pa_learn_map_region(&p->learn, 1); /* an empty region too (the plans stay) */
    _pa_lock_release(&h->lock);
    return PA_OK;
}

pa_status_t pa_pool_set_limit(pa_pool_t *h, size_t limit) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    st = PA_OK;
    if (limit && p->heap.reserved > limit) trim_locked(p, limit);
    if (limit && p->heap.reserved > limit) st = PA_ERR_INVALID;
    else p->heap.limit = limit;
    _pa_lock_release(&h->lock);
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
        if (high && p->heap.reserved > high) trim_locked(p, low);
        st = PA_OK;
    }
    _pa_lock_release(&h->lock);
    return st;
}

pa_status_t pa_pool_step(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    step_locked(p);
    _pa_lock_release(&h->lock);
    return PA_OK;
}

pa_status_t pa_pool_reset_peak(pa_pool_t *h) {
    pa_status_t st;
    pa_pool_impl_t *p = enter(h, &st);
    if (!p) return st;
    p->peak_requested = _pa_pool_requested(p);
    p->peak_allocated = _pa_pool_allocated(p);
    p->heap.peak_reserved = p->heap.reserved + p->heap.outside;
    for (int z = 0; z < PA_ZONE_COUNT; z++) {
        p->zone[z].peak_requested = p->zone[z].requested;
        p->zone[z].peak_allocated = p->zone[z].allocated;
    }
    _pa_lock_release(&h->lock);
    return PA_OK;
}
