/* test_zones.c -- the work pool's internal accessors, one layer at a time
 * (page map, slab / buddy / large block state, cache bin layout), on
 * hand-built descriptors: the contracts pool.c and cache.c rely on when
 * they change a block's state without touching the zone's fields. */
#include "alloc/cache.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

#define PAGE ((uintptr_t)PA_PAGE_SIZE)
#define BASE ((uintptr_t)0x7f0012340000) /* never dereferenced */

static void test_page_map(void) {
    pa_page_map_t m;
    CHECK_EQ(_pa_page_map_init(&m), 0);
    CHECK_EQ(_pa_page_map_ensure(&m, BASE, 64 * PAGE), 0);
    pa_span_t s;
    memset(&s, 0, sizeof(s));
    s.start = BASE + 4 * PAGE;
    s.npages = 8;
    /* ends only: first and last page; interior pages keep no entry */
    _pa_page_map_register(&m, &s, (uintptr_t)&s, 0);
    CHECK(_pa_page_map_lookup(&m, s.start) == &s);
    CHECK(_pa_page_map_lookup(&m, s.start + 7 * PAGE + 100) == &s);
    CHECK(_pa_page_map_lookup(&m, s.start + 3 * PAGE) == NULL);
    CHECK(_pa_page_map_lookup(&m, BASE) == NULL);
    CHECK_EQ(_pa_page_map_entry(&m, (uintptr_t)1 << PA_ADDR_BITS), 0u);
    /* every page, tagged: the owner's first member leads to the span */
    struct {
        pa_span_t *span;
        int payload;
    } owner = {&s, 42};
    uintptr_t tagged = (uintptr_t)&owner | PA_MAP_TAG_REGION;
    _pa_page_map_register(&m, &s, tagged, 1);
    for (uintptr_t pg = 0; pg < 8; pg++) {
        uintptr_t e = _pa_page_map_entry(&m, s.start + pg * PAGE);
        CHECK_EQ(e, tagged);
        CHECK(_pa_page_map_owner(e) == (void *)&owner);
        CHECK(_pa_page_map_decode(e) == &s);
        CHECK(_pa_page_map_lookup(&m, s.start + pg * PAGE + 8) == &s);
    }
    /* a stale entry (span moved on) validates nothing: range checked */
    s.start += PAGE;
    s.npages = 1;
    CHECK(_pa_page_map_lookup(&m, s.start + 3 * PAGE) == NULL);
    CHECK(_pa_page_map_span_at(&m, s.start + 3 * PAGE) == &s);
    _pa_page_map_destroy(&m);
    CHECK(m.leaves == NULL);
}

static void test_slab_accessors(void) {
    enum { N = 10 };
    uint32_t slot[N] = {0};
    uint16_t stack[N];
    pa_span_t span;
    memset(&span, 0, sizeof(span));
    span.start = BASE;
    span.npages = 1;
    pa_slab_t s;
    memset(&s, 0, sizeof(s));
    s.span = &span;
    s.start = BASE;
    s.class_index = 3;
    s.nblocks = N;
    s.size = 192;
    s.div_magic = ((uint64_t)1 << 40) / 192 + 1;
    s.slot = slot;
    s.free_stack = stack;
    CHECK(_pa_owner_span(&s) == &span);
    int exact;
    CHECK_EQ(_pa_slab_index(&s, BASE + 5 * 192, &exact), 5u);
    CHECK(exact);
    _pa_slab_index(&s, BASE + 5 * 192 + 8, &exact);
    CHECK(!exact);
    _pa_slab_index(&s, BASE + N * 192, &exact); /* past the last slot */
    CHECK(!exact);

    pa_block_ref_t b;
    uintptr_t a = BASE + 2 * 192;
    CHECK_EQ(_pa_slab_find_live(&s, a, &b), PA_ERR_DOUBLE_FREE); /* FREE */
    slot[2] = PA_SLOT(PA_BLOCK_LIVE, 150);
    CHECK_EQ(_pa_slab_find_live(&s, a, &b), PA_OK);
    CHECK(b.zone == PA_ZONE_SLAB && b.owner == &s && b.unit == 2);
    CHECK_EQ(b.bsize, 192u);
    CHECK_EQ(b.requested, 150u);
    CHECK_EQ(_pa_slab_find_live(&s, a + 64, &b), PA_ERR_FOREIGN);
    _pa_slab_set_requested(&s, 2, 190);
    CHECK_EQ(PA_SLOT_REQ(slot[2]), 190u);
    CHECK_EQ(_pa_slab_mark_cached(&s, 2), 3u); /* its class: the cache bin */
    CHECK_EQ(PA_SLOT_STATE(slot[2]), PA_BLOCK_CACHED);
    CHECK_EQ(_pa_slab_find_live(&s, a, &b), PA_ERR_DOUBLE_FREE);
    _pa_slab_reuse_cached(&s, (void *)a, 77);
    CHECK_EQ(slot[2], PA_SLOT(PA_BLOCK_LIVE, 77));
    /* recycled metadata: nblocks 0, so a stale tagged entry is foreign */
    s.nblocks = 0;
    CHECK_EQ(_pa_slab_find_live(&s, a, &b), PA_ERR_FOREIGN);
}

static void test_buddy_accessors(void) {
    /* a 64 KiB region of 4 KiB units: a LIVE 8 KiB block at unit 2 */
    uint64_t tags[16] = {0};
    pa_span_t span;
    memset(&span, 0, sizeof(span));
    pa_buddy_region_t r;
    memset(&r, 0, sizeof(r));
    r.span = &span;
    r.base = BASE;
    r.order = 16;
    r.unit_shift = 12;
    r.tags = tags;
    CHECK(_pa_owner_span(&r) == &span);
    uintptr_t a = BASE + 2 * PAGE;
    tags[2] = PA_TAG_LIVE(13, 5000);
    pa_block_ref_t b;
    CHECK_EQ(_pa_buddy_find_live(&r, a, &b), PA_OK);
    CHECK(b.zone == PA_ZONE_BUDDY && b.owner == &r && b.unit == 2);
    CHECK_EQ(b.bsize, (size_t)1 << 13);
    CHECK_EQ(b.requested, 5000u);
    CHECK_EQ(_pa_buddy_find_live(&r, a + 16, &b), PA_ERR_FOREIGN);    /* in a unit */
    CHECK_EQ(_pa_buddy_find_live(&r, a + PAGE, &b), PA_ERR_FOREIGN);  /* in a block */
    CHECK_EQ(_pa_buddy_find_live(&r, BASE + 16 * PAGE, &b), PA_ERR_FOREIGN); /* past */
    _pa_buddy_set_requested(&r, 2, 8000);
    CHECK_EQ(PA_TAG_REQ(tags[2]), 8000u);
    CHECK_EQ(PA_TAG_ORDER(tags[2]), 13u);
    CHECK_EQ(_pa_buddy_mark_cached(&r, 2), 13u); /* its order: the cache bin */
    CHECK_EQ(tags[2], (uint64_t)PA_TAG(13, PA_BLOCK_CACHED));
    CHECK_EQ(_pa_buddy_find_live(&r, a, &b), PA_ERR_DOUBLE_FREE);
    _pa_buddy_reuse_cached(&r, (void *)a, 13, 6000);
    CHECK_EQ(tags[2], PA_TAG_LIVE(13, 6000));
    tags[4] = PA_TAG(12, PA_TAG_STATE_FREE);
    CHECK_EQ(_pa_buddy_find_live(&r, BASE + 4 * PAGE, &b), PA_ERR_DOUBLE_FREE);
}

static void test_large_accessors(void) {
    pa_span_t s;
    memset(&s, 0, sizeof(s));
    s.start = BASE;
    s.npages = 5;
    s.kind = PA_SPAN_LARGE;
    s.state = PA_BLOCK_LIVE;
    s.requested = 5 * PAGE - 100;
    pa_block_ref_t b;
    CHECK_EQ(_pa_large_find_live(&s, BASE, &b), PA_OK);
    CHECK(b.zone == PA_ZONE_LARGE && b.owner == &s && b.unit == 0);
    CHECK_EQ(b.bsize, 5 * PAGE);
    CHECK_EQ(_pa_large_find_live(&s, BASE + PAGE, &b), PA_ERR_FOREIGN);
    CHECK_EQ(_pa_large_find_live(&s, BASE + 5 * PAGE, &b), PA_ERR_FOREIGN);
    CHECK_EQ(_pa_large_find_live(NULL, BASE, &b), PA_ERR_FOREIGN);
    _pa_large_set_requested(&s, 4 * PAGE + 1);
    CHECK_EQ(s.requested, 4 * PAGE + 1);
    _pa_large_mark_cached(&s);
    CHECK(s.state == PA_BLOCK_CACHED && s.requested == 0);
    CHECK_EQ(_pa_large_find_live(&s, BASE, &b), PA_ERR_DOUBLE_FREE);
    s.kind = PA_SPAN_FREE;
    CHECK_EQ(_pa_large_find_live(&s, BASE, &b), PA_ERR_DOUBLE_FREE);
    CHECK_EQ(_pa_large_find_live(&s, BASE + PAGE, &b), PA_ERR_FOREIGN);
    s.kind = PA_SPAN_SLAB;
    CHECK_EQ(_pa_large_find_live(&s, BASE, &b), PA_ERR_FOREIGN);
}

static void test_cache_bins(void) {
    /* 4 large bins per doubling, nondecreasing, all inside PA_LARGE_BINS */
    size_t prev = 0;
    for (size_t np = 1; np < ((size_t)1 << 20); np += np / 7 + 1) {
        size_t bin = _pa_large_bin_of_pages(np);
        CHECK(bin >= prev && bin < PA_LARGE_BINS);
        prev = bin;
    }
    CHECK_EQ(_pa_large_bin_of_pages(64), 24u);
    CHECK_EQ(_pa_large_bin_of_pages(80), 25u);
    CHECK_EQ(_pa_large_bin_of_pages(127), 27u);
    CHECK_EQ(_pa_large_bin_of_pages(128), 28u);
    /* slab classes, then buddy orders, then large classes */
    pa_cache_t c;
    memset(&c, 0, sizeof(c));
    c.first_buddy_bin = 20;
    c.first_large_bin = 20 + PA_BUDDY_ORDERS;
    CHECK_EQ(_pa_cache_slab_bin(&c, 7), 7u);
    CHECK_EQ(_pa_cache_buddy_bin(&c, 13), 33u);
    CHECK_EQ(_pa_cache_large_bin(&c, 64), c.first_large_bin + 24);
    CHECK(_pa_cache_bin_zone(&c, 19) == PA_ZONE_SLAB);
    CHECK(_pa_cache_bin_zone(&c, 20) == PA_ZONE_BUDDY);
    CHECK(_pa_cache_bin_zone(&c, c.first_large_bin - 1) == PA_ZONE_BUDDY);
    CHECK(_pa_cache_bin_zone(&c, c.first_large_bin) == PA_ZONE_LARGE);
}

int main(void) {
    RUN(test_page_map);
    RUN(test_slab_accessors);
    RUN(test_buddy_accessors);
    RUN(test_large_accessors);
    RUN(test_cache_bins);
    return pa_test_report();
}
