/* alloc/buddy.c -- the buddy allocator for medium blocks.
 *
 * Medium requests are rounded up to a power of two and served from buddy
 * regions: spans of 2^order bytes (default 1 MiB) taken from the page
 * heap.  A block is split in halves until it has the right order; on
 * release it merges with its buddy (offset XOR size) while the buddy is
 * free and of the same order, and a region that becomes one free block
 * goes back to the page heap.
 *
 * Design choices:
 *  - The state of every block lives in a side table per region: one byte
 *    per minimum-size unit at a block start (order | state << 6), zero
 *    inside a block.  Freeing validates the pointer against it (block
 *    start? live?) before touching anything; merging reads the buddy's
 *    byte, never the buddy's memory.
 *  - Free blocks of each order form a doubly-linked list threaded through
 *    the free blocks themselves (the only in-band data of the pool; a
 *    free block is pool memory no one may use), with a bitmap of nonempty
 *    orders: finding the smallest block that fits is one ctz.
 *  - The free lists are shared by all regions; a block's region is found
 *    through the page map.  Requests above the region size (buddy-only
 *    mode) get a dedicated region holding one block, with a one-unit
 *    side table (only its first and last page in the page map).
 *  - One empty default region is kept as a spare (its whole block on the
 *    free list) instead of going back to the heap at once: buddy-only
 *    mode churned regions (heap call, page-map pass, metadata) on every
 *    cache flush.  It goes back on pa_pool_reclaim, trims and before the
 *    pool grows.  Region metadata is recycled per order; a released
 *    region's tags are all zero already, so reuse needs no clearing.
 */
#include "buddy.h"

#include <stdlib.h>
#include <string.h>

int _pa_buddy_init(pa_buddy_zone_t *z, const pa_pool_config_t *cfg, pa_pool_mode_t mode,
                   unsigned granularity_shift, size_t slab_max, pa_page_heap_t *heap,
                   pa_span_source_t source) {
    z->heap = heap;
    z->source = source;
    size_t region = cfg->buddy_region ? cfg->buddy_region : (size_t)1 << 20;
    if (!_pa_is_pow2(region) || region < ((size_t)64 << 10) || region > ((size_t)1 << 30))
        return -1;
    z->region_order = _pa_log2_floor(region);
    size_t thr = cfg->large_threshold ? cfg->large_threshold : (size_t)16 << 10;
    switch (mode) {
    case PA_POOL_BUDDY_ONLY:
        z->min_order = granularity_shift;
        z->max_size = PA_ZONE_BLOCK_MAX;
        break;
    case PA_POOL_SLAB_ONLY:
        z->min_order = z->region_order;
        z->max_size = slab_max; /* nothing above the slabs */
        break;
    default:
        z->min_order = _pa_log2_ceil(slab_max + 1);
        if (z->min_order < granularity_shift) z->min_order = granularity_shift;
        if (thr > region) thr = region;
        z->max_size = thr;
        if (z->min_order > z->region_order || thr <= slab_max) {
            z->min_order = z->region_order;
            z->max_size = slab_max; /* no buddy zone */
        }
    }
    /* A free block holds its list node: never split below the node size
     * (at alignment 8, buddy-only would otherwise hand out 8-byte blocks
     * whose free-list links overwrite the neighbour). */
    while (((size_t)1 << z->min_order) < sizeof(pa_buddy_node_t)) z->min_order++;
    return 0;
}

static pa_buddy_node_t *node_at(uintptr_t a) { return (pa_buddy_node_t *)a; }

static void free_block_push(pa_buddy_zone_t *z, pa_buddy_region_t *r, uintptr_t off, unsigned k) {
    pa_buddy_node_t *n = node_at(r->base + off);
    n->prev = NULL;
    n->next = z->free_lists[k];
    if (n->next) n->next->prev = n;
    z->free_lists[k] = n;
    z->free_mask |= 1ull << k;
    r->tags[off >> r->unit_shift] = PA_TAG(k, PA_TAG_STATE_FREE);
    r->free_bytes += (size_t)1 << k;
}

static void free_block_remove(pa_buddy_zone_t *z, pa_buddy_region_t *r, uintptr_t off, unsigned k) {
    pa_buddy_node_t *n = node_at(r->base + off);
    if (n->prev) n->prev->next = n->next;
    else z->free_lists[k] = n->next;
    if (n->next) n->next->prev = n->prev;
    if (!z->free_lists[k]) z->free_mask &= ~(1ull << k);
    r->tags[off >> r->unit_shift] = 0;
    r->free_bytes -= (size_t)1 << k;
}

static void region_unlink(pa_buddy_zone_t *z, pa_buddy_region_t *r) {
    if (r->prev) r->prev->next = r->next;
    else z->regions = r->next;
    if (r->next) r->next->prev = r->prev;
    z->nregions--;
    z->reserved -= (size_t)1 << r->order;
}

/* Metadata of a released region: recycled, never freed before destroy,
 * and unable to validate any pointer (base 0, unit 2^63). */
static void region_recycle(pa_buddy_zone_t *z, pa_buddy_region_t *r) {
    unsigned order = r->order;
    r->span = NULL;
    r->base = 0;
    r->unit_shift = 63;
    r->free_bytes = 0;
    r->prev = NULL;
    r->next = z->recycled_regions[order];
    z->recycled_regions[order] = r;
}

static pa_buddy_region_t *region_new(pa_buddy_zone_t *z, unsigned order, pa_status_t *st) {
    unsigned unit_shift = order > z->region_order ? order : z->min_order;
    size_t units = (size_t)1 << (order - unit_shift);
    pa_buddy_region_t *r = z->recycled_regions[order];
    if (r) {
        z->recycled_regions[order] = r->next; /* its tags are all 0 again */
    } else {
        r = calloc(1, sizeof(*r) + units * sizeof(uint64_t));
        if (!r) {
            *st = PA_ERR_NOMEM;
            return NULL;
        }
        r->tags = (uint64_t *)(r + 1);
        r->order = order;
        r->unit_shift = 63;
    }
    pa_span_t *sp = z->source.get(z->source.ctx, ((size_t)1 << order) >> PA_PAGE_SHIFT, st);
    if (!sp) {
        region_recycle(z, r);
        return NULL;
    }
    r->span = sp;
    r->base = sp->start;
    r->order = order;
    r->unit_shift = unit_shift;
    r->free_bytes = 0;
    sp->kind = PA_SPAN_BUDDY;
    sp->owner = r;
    /* a one-block region needs its first and last page only */
    _pa_page_map_register(&z->heap->map, sp, (uintptr_t)r | PA_MAP_TAG_REGION, units > 1);
    r->next = z->regions;
    if (r->next) r->next->prev = r;
    z->regions = r;
    z->nregions++;
    z->reserved += (size_t)1 << order;
    return r;
}

static void region_free(pa_buddy_zone_t *z, pa_buddy_region_t *r) {
    pa_span_t *sp = r->span;
    region_unlink(z, r);
    region_recycle(z, r); /* interior page-map entries stay stale */
    _pa_heap_free(z->heap, sp);
}

void _pa_buddy_drop_spare(pa_buddy_zone_t *z) {
    pa_buddy_region_t *r = z->spare_region;
    if (!r) return;
    z->spare_region = NULL;
    free_block_remove(z, r, 0, r->order);
    region_free(z, r);
}

void *_pa_buddy_alloc(pa_buddy_zone_t *z, unsigned k, size_t req, pa_buddy_region_t **region,
                      pa_status_t *st) {
    pa_buddy_region_t *r;
    uintptr_t off;
    if (k > z->region_order) {
        r = region_new(z, k, st);
        if (!r) return NULL;
        off = 0;
    } else {
        uint64_t m = z->free_mask >> k;
        unsigned j;
        if (!m) {
            /* carve from the new region itself (a reclaim inside
             * region_new may have freed other blocks, but a fresh region
             * left whole would be an empty region nobody releases) */
            r = region_new(z, z->region_order, st);
            if (!r) return NULL;
            j = z->region_order;
            off = 0;
        } else {
            j = k + (unsigned)__builtin_ctzll(m);
            uintptr_t a = (uintptr_t)z->free_lists[j];
            r = _pa_page_map_owner(_pa_page_map_entry(&z->heap->map, a));
            if (pa_unlikely(r == z->spare_region)) z->spare_region = NULL;
            off = a - r->base;
            free_block_remove(z, r, off, j);
        }
        while (j > k) {
            j--;
            free_block_push(z, r, off + ((uintptr_t)1 << j), j);
        }
    }
    r->tags[off >> r->unit_shift] = PA_TAG_LIVE(k, req);
    *region = r;
    return (void *)(r->base + off);
}

void _pa_buddy_release(pa_buddy_zone_t *z, pa_buddy_region_t *r, uintptr_t addr) {
    uintptr_t off = addr - r->base;
    unsigned k = PA_TAG_ORDER(r->tags[off >> r->unit_shift]);
    r->tags[off >> r->unit_shift] = 0;
    while (k < r->order) {
        uintptr_t boff = off ^ ((uintptr_t)1 << k);
        if (r->tags[boff >> r->unit_shift] != PA_TAG(k, PA_TAG_STATE_FREE)) break;
        free_block_remove(z, r, boff, k);
        if (boff < off) off = boff;
        k++;
    }
    if (k == r->order) {
        if (r->order == z->region_order && !z->spare_region) {
            /* keep one empty region: the next carve needs no heap call,
             * page-map pass or metadata */
            z->spare_region = r;
            free_block_push(z, r, 0, k);
            return;
        }
        region_free(z, r);
        return;
    }
    free_block_push(z, r, off, k);
}

size_t _pa_buddy_largest_free(const pa_buddy_zone_t *z) {
    return z->free_mask ? (size_t)1 << _pa_log2_floor((size_t)z->free_mask) : 0;
}

void _pa_buddy_destroy(pa_buddy_zone_t *z) {
    for (pa_buddy_region_t *r = z->regions; r;) {
        pa_buddy_region_t *n = r->next;
        free(r);
        r = n;
    }
    z->regions = NULL;
    z->nregions = 0;
    z->spare_region = NULL;
    for (unsigned k = 0; k < PA_BUDDY_ORDERS; k++) {
        for (pa_buddy_region_t *r = z->recycled_regions[k]; r;) {
            pa_buddy_region_t *n = r->next;
            free(r);
            r = n;
        }
        z->recycled_regions[k] = NULL;
    }
    memset(z->free_lists, 0, sizeof(z->free_lists));
    z->free_mask = 0;
}

size_t _pa_buddy_check_region(const pa_buddy_zone_t *z, const pa_buddy_region_t *r,
                              pa_check_tally_t *t) {
    size_t broken = 0, units = (size_t)1 << (r->order - r->unit_shift), free_bytes = 0;
    if ((r->span->npages << PA_PAGE_SHIFT) != ((size_t)1 << r->order)) broken++;
    if (r->base != r->span->start) broken++;
    for (size_t pg = 0; pg < r->span->npages; pg++)
        if ((units > 1 || pg == 0 || pg + 1 == r->span->npages) &&
            _pa_page_map_entry(&z->heap->map, r->base + (pg << PA_PAGE_SHIFT)) != ((uintptr_t)r | PA_MAP_TAG_REGION))
            broken++;
    size_t u = 0;
    while (u < units) {
        uint64_t word = r->tags[u];
        uint8_t tg = (uint8_t)word;
        unsigned k = PA_TAG_ORDER(tg);
        int stt = PA_TAG_STATE(tg);
        uintptr_t off = (uintptr_t)u << r->unit_shift;
        if (tg == 0 || k < r->unit_shift || k > r->order || (off & (((uintptr_t)1 << k) - 1))) {
            return broken + 1; /* cannot walk on */
        }
        size_t bytes = (size_t)1 << k;
        size_t span_units = (size_t)1 << (k - r->unit_shift);
        for (size_t i = 1; i < span_units; i++)
            if (r->tags[u + i]) broken++;
        if (stt == PA_BLOCK_LIVE) {
            t->live++;
            t->allocated += bytes;
            t->requested += PA_TAG_REQ(word);
            if (PA_TAG_REQ(word) > bytes) broken++;
        } else if (stt == PA_BLOCK_CACHED) {
            if (word != tg) broken++;
            t->cached += bytes;
            t->ncached++;
        } else if (stt == PA_TAG_STATE_FREE) {
            free_bytes += bytes;
            if (bytes > t->largest_free) t->largest_free = bytes;
            uintptr_t boff = off ^ bytes;
            if (k < r->order && r->tags[boff >> r->unit_shift] == PA_TAG(k, PA_TAG_STATE_FREE))
                broken++; /* free buddies not merged */
        } else {
            broken++;
        }
        u += span_units;
    }
    if (free_bytes != r->free_bytes) broken++;
    /* empty regions go, but the spare */
    if ((free_bytes == ((size_t)1 << r->order)) != (r == z->spare_region)) broken++;
    t->free_bytes += free_bytes;
    return broken;
}

size_t _pa_buddy_check_lists(const pa_buddy_zone_t *z) {
    size_t broken = 0, n = 0, region_free = 0, listed = 0;
    for (const pa_buddy_region_t *r = z->regions; r; r = r->next) {
        region_free += r->free_bytes;
        if (++n > z->nregions) return broken + 1;
    }
    if (n != z->nregions) broken++;
    if (z->spare_region && (z->spare_region->order != z->region_order || !z->spare_region->span)) broken++;
    for (unsigned k = 0; k < PA_BUDDY_ORDERS; k++) {
        size_t m = 0;
        for (const pa_buddy_region_t *r = z->recycled_regions[k]; r; r = r->next) {
            if (r->span || r->order != k || r->unit_shift != 63) broken++;
            if (++m > ((size_t)1 << 32)) return broken + 1;
        }
    }
    for (unsigned k = 0; k < PA_BUDDY_ORDERS; k++) {
        if (!!(z->free_mask & (1ull << k)) != (z->free_lists[k] != NULL)) broken++;
        const pa_buddy_node_t *prev = NULL;
        size_t count = 0;
        for (const pa_buddy_node_t *b = z->free_lists[k]; b; prev = b, b = b->next) {
            if (b->prev != prev) broken++;
            pa_span_t *sp = _pa_page_map_lookup(&z->heap->map, (uintptr_t)b);
            if (!sp || sp->kind != PA_SPAN_BUDDY) return broken + 1;
            const pa_buddy_region_t *r = sp->owner;
            uintptr_t off = (uintptr_t)b - r->base;
            if (r->tags[off >> r->unit_shift] != PA_TAG(k, PA_TAG_STATE_FREE)) broken++;
            listed += (size_t)1 << k;
            if (++count > (size_t)1 << 30) return broken + 1;
        }
    }
    if (listed != region_free) broken++;
    return broken;
}

size_t _pa_buddy_check_cached(const pa_buddy_region_t *r, const pa_span_t *sp,
                              uintptr_t ptr, unsigned order, size_t size) {
    if (sp->kind != PA_SPAN_BUDDY || sp->owner != r) return 1;
    uintptr_t off = ptr - r->base;
    return r->tags[off >> r->unit_shift] != PA_TAG(order, PA_BLOCK_CACHED) ||
           size != (size_t)1 << order;
}

int _pa_buddy_walk(const pa_buddy_region_t *r, pa_pool_walker_t fn, void *ctx) {
    size_t units = (size_t)1 << (r->order - r->unit_shift), u = 0;
    while (u < units) {
        uint64_t word = r->tags[u];
        uint8_t tg = (uint8_t)word;
        unsigned k = PA_TAG_ORDER(tg);
        if (tg == 0 || k < r->unit_shift) return 0; /* corrupt: pa_pool_check says so */
        pa_pool_block_t b;
        b.ptr = (void *)(r->base + ((uintptr_t)u << r->unit_shift));
        b.size = (size_t)1 << k;
        b.state = PA_TAG_STATE(tg) == PA_TAG_STATE_FREE ? PA_BLOCK_FREE : PA_TAG_STATE(tg);
        b.requested = b.state == PA_BLOCK_LIVE ? PA_TAG_REQ(word) : 0;
        b.zone = PA_ZONE_BUDDY;
        if (fn(&b, ctx)) return 1;
        u += (size_t)1 << (k - r->unit_shift);
    }
    return 0;
}
