/* alloc/slab.c -- size classes for small blocks.
 *
 * Small requests are rounded up to a size class; each class carves slabs
 * (spans of `slab_size` bytes from the page heap) into equal slots.  The
 * class table is generated with a configurable spacing (1, 2, 4 or 8
 * classes per power of two, as jemalloc and mimalloc do, never finer than
 * the granularity) or given explicitly in the config.
 *
 * Design choices:
 *  - O(1) everywhere: the class of a size is one table load for sizes up
 *    to 64 KiB (binary search above, only in slab-only mode); a slab keeps
 *    a LIFO stack of free slot indices, so the most recently released slot
 *    is handed out first (hot memory), and a class keeps a list of slabs
 *    with free slots.
 *  - All metadata (slot states, requested sizes, the free stack) lives
 *    beside the slab, not in it: a scribbling user cannot corrupt it, and
 *    a pointer is validated (slot start, state) before anything is trusted.
 *    The slot of an address is found by a multiply-shift (no division).
 *  - A slab whose slots are all free goes back to the page heap (this
 *    only happens when caches are flushed: the front-end caches (cache.c)
 *    are the hysteresis that keep hot slabs alive between steps), except
 *    one empty slab per class kept as a spare, so a budget flush does not
 *    make the next allocation of the class rebuild a slab (big classes in
 *    slab-only mode churned: a heap operation and a page-map store per
 *    page each time).  Spares go back on pa_pool_reclaim, trims and
 *    before the pool grows.  Released metadata is recycled per class.
 */
#include "slab.h"

#include <stdlib.h>
#include <string.h>

#define TABLE_MAX ((size_t)64 << 10)

static int add_class(size_t *sizes, size_t *n, size_t cap, size_t v) {
    if (*n && sizes[*n - 1] >= v) return 0;
    if (*n == cap) return -1;
    sizes[(*n)++] = v;
    return 0;
}

int _pa_slab_init(pa_slab_zone_t *z, const pa_pool_config_t *cfg, pa_pool_mode_t mode,
                  size_t granularity, pa_page_heap_t *heap, pa_span_source_t source) {
    size_t sizes[512], n = 0;
    z->granularity = granularity;
    z->granularity_shift = _pa_log2_floor(granularity);
    z->heap = heap;
    z->source = source;
    size_t slab_size = cfg->slab_size ? cfg->slab_size : (size_t)64 << 10;
    if (slab_size % PA_PAGE_SIZE || slab_size > ((size_t)512 << 10)) return -1;
    if (mode == PA_POOL_BUDDY_ONLY) {
        z->max_size = 0;
        z->nclasses = 0;
        return 0;
    }
    if (cfg->num_classes) {
        if (cfg->num_classes > PA_POOL_MAX_CLASSES) return -1;
        for (size_t i = 0; i < cfg->num_classes; i++) {
            size_t v = cfg->classes[i];
            if (v == 0 || v % z->granularity || v > PA_SLOT_MAX_REQ) return -1;
            if (i && v <= cfg->classes[i - 1]) return -1;
            sizes[n++] = v;
        }
    } else {
        unsigned per = cfg->classes_per_doubling ? cfg->classes_per_doubling : 4;
        if (per != 1 && per != 2 && per != 4 && per != 8) return -1;
        size_t max = mode == PA_POOL_SLAB_ONLY ? (size_t)PA_SLOT_MAX_REQ / 2 + 1
                     : (cfg->slab_max ? cfg->slab_max : (size_t)16 << 10);
        if (max < z->granularity) max = z->granularity;
        for (size_t pw = z->granularity; pw <= max; pw *= 2) {
            size_t step = pw / per < z->granularity ? z->granularity : pw / per;
            for (size_t v = pw; v < 2 * pw && v <= max; v += step)
                if (add_class(sizes, &n, 512, v) != 0) return -1;
        }
        /* a slab_max between classes becomes the last class */
        if (n && sizes[n - 1] < max) {
            size_t top;
            if (!_pa_align_up(max, z->granularity, &top) || add_class(sizes, &n, 512, top) != 0)
                return -1;
        }
    }
    z->classes = calloc(n, sizeof(pa_slab_class_t));
    if (!z->classes) return -1;
    z->nclasses = n;
    for (size_t i = 0; i < n; i++) {
        pa_slab_class_t *c = &z->classes[i];
        c->size = sizes[i];
        size_t nb = slab_size / c->size;
        if (nb == 0) nb = 1;
        if (nb > 65535) nb = 65535;
        c->nblocks = (uint32_t)nb;
        if (!_pa_align_up(nb * c->size, PA_PAGE_SIZE, &c->slab_bytes)) return -1;
        c->div_magic = nb > 1 ? ((uint64_t)1 << 40) / c->size + 1 : 0;
    }
    z->max_size = sizes[n - 1];
    size_t tmax = z->max_size < TABLE_MAX ? z->max_size : TABLE_MAX;
    z->class_of_len = tmax >> z->granularity_shift;
    z->class_of = malloc(z->class_of_len * sizeof(uint16_t));
    if (!z->class_of) return -1;
    size_t k = 0;
    for (size_t i = 0; i < z->class_of_len; i++) {
        size_t sz = (i + 1) << z->granularity_shift;
        while (z->classes[k].size < sz) k++;
        z->class_of[i] = (uint16_t)k;
    }
    return 0;
}

size_t _pa_slab_class_search(const pa_slab_zone_t *z, size_t size) {
    size_t lo = 0, hi = z->nclasses - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (z->classes[mid].size < size) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void partial_insert(pa_slab_class_t *c, pa_slab_t *s) {
    s->prev = NULL;
    s->next = c->partial;
    if (c->partial) c->partial->prev = s;
    c->partial = s;
    s->in_partial = 1;
}

static void partial_remove(pa_slab_class_t *c, pa_slab_t *s) {
    if (s->prev) s->prev->next = s->next;
    else c->partial = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
    s->in_partial = 0;
}

static pa_slab_t *slab_new(pa_slab_zone_t *z, size_t class_index, pa_status_t *st) {
    pa_slab_class_t *c = &z->classes[class_index];
    size_t nb = c->nblocks;
    pa_slab_t *s = c->recycled;
    if (s) {
        /* recycled: every slot is FREE (0) and the stack holds every
         * index (any order is a valid LIFO) */
        c->recycled = s->next;
    } else {
        s = malloc(sizeof(*s) + nb * (sizeof(uint32_t) + sizeof(uint16_t)));
        if (!s) {
            *st = PA_ERR_NOMEM;
            return NULL;
        }
        s->slot = (uint32_t *)(s + 1);
        s->free_stack = (uint16_t *)(s->slot + nb);
        memset(s->slot, 0, nb * sizeof(uint32_t)); /* PA_SLOT(FREE, 0) */
        for (size_t i = 0; i < nb; i++) s->free_stack[i] = (uint16_t)(nb - 1 - i);
    }
    s->class_index = (uint32_t)class_index;
    s->nblocks = 0; /* not a slab until it has a span */
    s->span = NULL;
    pa_span_t *sp = z->source.get(z->source.ctx, c->slab_bytes >> PA_PAGE_SHIFT, st);
    if (!sp) {
        s->next = c->recycled;
        c->recycled = s;
        return NULL;
    }
    s->span = sp;
    s->start = sp->start;
    s->div_magic = c->div_magic;
    s->size = c->size;
    s->nblocks = (uint32_t)nb;
    s->nfree = (uint32_t)nb;
    sp->kind = PA_SPAN_SLAB;
    sp->owner = s;
    /* a one-slot slab needs only its first page (the block start) and
     * last page (coalescing) in the page map: interior pointers are
     * foreign whatever stale entry their page holds */
    _pa_page_map_register(&z->heap->map, sp, (uintptr_t)s | PA_MAP_TAG_SLAB, nb > 1);
    partial_insert(c, s);
    c->nslabs++;
    z->reserved += c->slab_bytes;
    return s;
}

void *_pa_slab_alloc(pa_slab_zone_t *z, size_t class_index, size_t req, pa_slab_t **slab,
                     pa_status_t *st) {
    pa_slab_class_t *c = &z->classes[class_index];
    pa_slab_t *s = c->partial;
    if (!s) {
        s = c->spare;
        if (s) {
            c->spare = NULL;
            z->nspare_slabs--;
            partial_insert(c, s);
        } else {
            s = slab_new(z, class_index, st);
            if (!s) return NULL;
        }
    }
    uint32_t idx = s->free_stack[--s->nfree];
    s->slot[idx] = PA_SLOT(PA_BLOCK_LIVE, req);
    if (s->nfree == 0) partial_remove(c, s);
    *slab = s;
    return (void *)(s->start + (size_t)idx * c->size);
}

/* An empty slab goes back to the heap; its metadata to the recycle list
 * (interior page-map entries stay stale: see page_map.h). */
static void slab_free(pa_slab_zone_t *z, pa_slab_t *s) {
    pa_slab_class_t *c = &z->classes[s->class_index];
    pa_span_t *sp = s->span;
    if (s->in_partial) partial_remove(c, s);
    c->nslabs--;
    z->reserved -= c->slab_bytes;
    s->nblocks = 0; /* a stale tagged entry validates nothing */
    s->span = NULL;
    s->next = c->recycled;
    c->recycled = s;
    _pa_heap_free(z->heap, sp);
}

void _pa_slab_release(pa_slab_zone_t *z, pa_slab_t *s, uintptr_t addr) {
    pa_slab_class_t *c = &z->classes[s->class_index];
    int exact;
    uint32_t idx = _pa_slab_index(s, addr, &exact);
    s->slot[idx] = PA_SLOT(PA_BLOCK_FREE, 0);
    s->free_stack[s->nfree++] = (uint16_t)idx;
    if (s->nfree == s->nblocks) {
        if (!c->spare) {
            if (s->in_partial) partial_remove(c, s);
            c->spare = s;
            z->nspare_slabs++;
            return;
        }
        slab_free(z, s);
        return;
    }
    if (!s->in_partial) partial_insert(c, s);
}

void _pa_slab_drop_spares(pa_slab_zone_t *z) {
    for (size_t k = 0; k < z->nclasses && z->nspare_slabs; k++) {
        pa_slab_t *s = z->classes[k].spare;
        if (s) {
            z->classes[k].spare = NULL;
            z->nspare_slabs--;
            slab_free(z, s);
        }
    }
}

size_t _pa_slab_largest_free(const pa_slab_zone_t *z) {
    for (size_t k = z->nclasses; k-- > 0;)
        if (z->classes[k].partial) return z->classes[k].size;
    return 0;
}

void _pa_slab_destroy(pa_slab_zone_t *z) {
    /* slabs with a span (the spares too) are found through the heap's
     * chunks; the others sit on the recycle lists */
    pa_span_iter_t it = _pa_heap_span_iter(z->heap);
    for (pa_span_t *sp; (sp = _pa_heap_next_span(z->heap, &it, NULL)) != NULL;)
        if (sp->kind == PA_SPAN_SLAB) free(sp->owner);
    for (size_t k = 0; k < z->nclasses; k++) {
        for (pa_slab_t *s = z->classes[k].recycled; s;) {
            pa_slab_t *n = s->next;
            free(s);
            s = n;
        }
        z->classes[k].recycled = NULL;
    }
    free(z->classes);
    free(z->class_of);
    z->classes = NULL;
    z->class_of = NULL;
    z->nclasses = 0;
}

size_t _pa_slab_check_slab(const pa_slab_zone_t *z, const pa_slab_t *s, pa_check_tally_t *t) {
    size_t broken = 0;
    if (s->class_index >= z->nclasses) return 1;
    const pa_slab_class_t *c = &z->classes[s->class_index];
    if (s->nblocks != c->nblocks || (s->span->npages << PA_PAGE_SHIFT) != c->slab_bytes ||
        s->start != s->span->start || s->size != c->size || s->div_magic != c->div_magic)
        broken++;
    for (size_t pg = 0; pg < s->span->npages; pg++)
        if ((s->nblocks > 1 || pg == 0 || pg + 1 == s->span->npages) &&
            _pa_page_map_entry(&z->heap->map, s->start + (pg << PA_PAGE_SHIFT)) != ((uintptr_t)s | PA_MAP_TAG_SLAB))
            broken++;
    size_t nfree = 0;
    for (uint32_t i = 0; i < s->nblocks; i++) {
        uint32_t req = PA_SLOT_REQ(s->slot[i]);
        switch (PA_SLOT_STATE(s->slot[i])) {
        case PA_BLOCK_FREE:
            nfree++;
            if (req) broken++;
            break;
        case PA_BLOCK_LIVE:
            t->live++;
            t->allocated += c->size;
            t->requested += req;
            if (req > c->size) broken++;
            break;
        case PA_BLOCK_CACHED:
            t->cached += c->size;
            t->ncached++;
            break;
        default: broken++;
        }
    }
    t->free_bytes += nfree * c->size;
    if (nfree && c->size > t->largest_free) t->largest_free = c->size;
    if (nfree != s->nfree) broken++; /* LIVE slots: the zone's counters (pool_inspect.c) */
    if (s->nfree == s->nblocks) { /* empty slabs are released, but one */
        if (c->spare != s || s->in_partial) broken++;
    } else if (c->spare == s || !!s->in_partial != (s->nfree > 0)) {
        broken++;
    }
    for (uint32_t i = 0; i < s->nfree && i < s->nblocks; i++)
        if (s->free_stack[i] >= s->nblocks || PA_SLOT_STATE(s->slot[s->free_stack[i]]) != PA_BLOCK_FREE)
            broken++;
    return broken;
}

size_t _pa_slab_check_classes(const pa_slab_zone_t *z) {
    size_t broken = 0, spares = 0;
    for (size_t k = 0; k < z->nclasses; k++) {
        const pa_slab_class_t *c = &z->classes[k];
        size_t n = 0;
        const pa_slab_t *prev = NULL;
        for (const pa_slab_t *s = c->partial; s; prev = s, s = s->next) {
            if (s->class_index != k || !s->in_partial || s->prev != prev || s->nfree == 0) broken++;
            if (++n > c->nslabs) return broken + 1;
        }
        spares += c->spare != NULL;
        if (c->spare && (c->spare->class_index != k || c->spare->in_partial ||
                         c->spare->nfree != c->spare->nblocks || !c->spare->span ||
                         c->spare->span->owner != c->spare))
            broken++;
        size_t m = 0;
        for (const pa_slab_t *s = c->recycled; s; s = s->next) {
            if (s->nblocks != 0 || s->class_index != k || s->span) broken++;
            if (++m > ((size_t)1 << 32)) return broken + 1;
        }
        if (k && c->size <= z->classes[k - 1].size) broken++;
        if (c->size % z->granularity) broken++;
    }
    if (spares != z->nspare_slabs) broken++;
    return broken;
}

size_t _pa_slab_check_cached(const pa_slab_zone_t *z, const pa_slab_t *s, const pa_span_t *sp,
                             uintptr_t ptr, size_t class_index, size_t size) {
    if (sp->kind != PA_SPAN_SLAB || sp->owner != s) return 1;
    int exact;
    uint32_t idx = _pa_slab_index(s, ptr, &exact);
    return !exact || s->class_index != class_index ||
           PA_SLOT_STATE(s->slot[idx]) != PA_BLOCK_CACHED || size != z->classes[class_index].size;
}

int _pa_slab_walk(const pa_slab_zone_t *z, const pa_slab_t *s, pa_pool_walker_t fn,
                  void *ctx) {
    const pa_slab_class_t *c = &z->classes[s->class_index];
    for (uint32_t i = 0; i < s->nblocks; i++) {
        pa_pool_block_t b;
        b.ptr = (void *)(s->span->start + (size_t)i * c->size);
        b.size = c->size;
        b.state = PA_SLOT_STATE(s->slot[i]);
        b.requested = b.state == PA_BLOCK_LIVE ? PA_SLOT_REQ(s->slot[i]) : 0;
        b.zone = PA_ZONE_SLAB;
        if (fn(&b, ctx)) return 1;
    }
    return 0;
}
