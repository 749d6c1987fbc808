/* test_buddy.c -- the buddy zone (split, coalesce, regions), through the
 * public pool API and its walker. */
#include "counting_backend.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

typedef struct {
    size_t free_blocks, free_bytes, live, cached;
    size_t sizes_ok;
} bw_t;

static int buddy_walker(const pa_pool_block_t *b, void *ctx) {
    bw_t *w = ctx;
    if (b->zone != PA_ZONE_BUDDY) return 0;
    if ((b->size & (b->size - 1)) == 0 && ((uintptr_t)b->ptr % 4096 == 0 || b->size < 4096))
        w->sizes_ok++;
    if (b->state == PA_BLOCK_FREE) {
        w->free_blocks++;
        w->free_bytes += b->size;
    } else if (b->state == PA_BLOCK_LIVE) {
        w->live++;
    } else {
        w->cached++;
    }
    return 0;
}

static bw_t walk(pa_pool_t *p) {
    bw_t w;
    memset(&w, 0, sizeof w);
    pa_pool_walk(p, buddy_walker, &w);
    return w;
}

/* A hybrid pool whose buddy zone serves (4 KiB, large_threshold]: the
 * default slab_max (16 KiB) equals the default threshold, which leaves the
 * buddy zone empty. */
static pa_pool_t *buddy_hybrid(size_t large_threshold) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 4096;
    if (large_threshold) cfg.large_threshold = large_threshold;
    return pa_pool_create(&cfg, NULL);
}

static void test_split_and_coalesce(void) {
    pa_pool_t *p = buddy_hybrid(0); /* buddy 8 KiB .. 16 KiB */
    /* one 8 KiB block splits a 1 MiB region into 8K,8K,16K,...,512K */
    char *a = pa_pool_alloc(p, 5000, NULL);
    CHECK_EQ(pa_pool_block_size(p, a), 8192u);
    bw_t w = walk(p);
    CHECK_EQ(w.live, 1u);
    CHECK_EQ(w.free_blocks, 7u); /* orders 13..19 */
    CHECK_EQ(w.free_bytes, (1u << 20) - 8192u);
    CHECK_EQ(w.sizes_ok, 8u);
    /* its buddy is the next 8 KiB */
    char *b = pa_pool_alloc(p, 8192, NULL);
    CHECK(b == a + 8192 || a == b + 8192);
    /* free both, reclaim: they merge back and the empty region is gone */
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    w = walk(p);
    CHECK_EQ(w.cached, 2u);
    pa_pool_reclaim(p);
    w = walk(p);
    CHECK_EQ(w.live + w.cached + w.free_blocks, 0u);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_orders(void) {
    pa_pool_t *p = buddy_hybrid((size_t)256 << 10); /* every order up to 256 KiB */
    size_t sizes[] = {4097, 8193, 16385, 40000, 65537, 131072, 200000, 262144};
    size_t expect[] = {8192, 16384, 32768, 65536, 131072, 131072, 262144, 262144};
    for (int i = 0; i < 8; i++) {
        char *a = pa_pool_alloc(p, sizes[i], NULL);
        CHECK_EQ(pa_pool_block_size(p, a), expect[i]);
        CHECK(((uintptr_t)a & 63) == 0);
        memset(a, i, sizes[i]);
    }
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].live, 8u);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].live, 0u);
    /* 262145 is over the threshold: large zone */
    void *l = pa_pool_alloc(p, 262145, NULL);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].live, 1u);
    CHECK_EQ(pa_pool_block_size(p, l), 262144u + 4096u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* The defaults: slab classes up to 16 KiB, whole pages above (log-uniform
 * sizes then need less than a power-of-two block's rounding); the buddy
 * zone serves nothing unless large_threshold is raised over slab_max. */
static void test_default_threshold(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    void *b = pa_pool_alloc(p, 16384, NULL);
    void *m = pa_pool_alloc(p, 9000, NULL);
    void *l = pa_pool_alloc(p, 16385, NULL);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].live, 2u);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].live, 0u);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].live, 1u);
    CHECK_EQ(pa_pool_block_size(p, b), 16384u);
    CHECK_EQ(pa_pool_block_size(p, m), 10240u); /* 4 classes per doubling */
    CHECK_EQ(pa_pool_block_size(p, l), 20480u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_many_random(void) {
    /* fill regions with mixed orders, free in a scrambled order with
     * reclaims in between: everything merges back to nothing */
    pa_pool_t *p = buddy_hybrid((size_t)256 << 10);
    enum { N = 300 };
    static char *v[N];
    unsigned long long r = 42;
    for (int i = 0; i < N; i++) {
        size_t n = 4097 + pa_rand(&r) % 200000;
        v[i] = pa_pool_alloc(p, n, NULL);
        CHECK(v[i] != NULL);
        v[i][0] = (char)i;
    }
    for (int i = 0; i < N; i++) {
        int j = (int)(pa_rand(&r) % N);
        char *t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
        if (i % 37 == 0) {
            pa_pool_reclaim(p);
            CHECK_EQ(pa_pool_check(p), 0u);
        }
    }
    pa_pool_reclaim(p);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, 0u);
    CHECK_EQ(walk(p).free_blocks, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_buddy_only_mode(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = PA_POOL_BUDDY_ONLY;
    cfg.buddy_region = 1 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    char *a = pa_pool_alloc(p, 1, NULL);
    CHECK_EQ(pa_pool_block_size(p, a), 64u);
    char *b = pa_pool_alloc(p, 65, NULL);
    CHECK_EQ(pa_pool_block_size(p, b), 128u);
    /* bigger than a region: a dedicated region of the next power of two */
    char *c = pa_pool_alloc(p, 3 << 20, NULL);
    CHECK_EQ(pa_pool_block_size(p, c), 4u << 20);
    memset(c, 1, 3 << 20);
    CHECK_EQ(pa_pool_free(p, c + 4096), PA_ERR_FOREIGN);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].live, 3u);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, (1u << 20) + (4u << 20));
    CHECK_EQ(st.zone[PA_ZONE_SLAB].allocs + st.zone[PA_ZONE_LARGE].allocs, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    pa_pool_free(p, c);
    CHECK_EQ(pa_pool_free(p, c), PA_ERR_DOUBLE_FREE);
    pa_pool_reclaim(p);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_spare_region_and_dedicated(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = PA_POOL_BUDDY_ONLY;
    cfg.cache_budget = 1; /* every free is flushed at once */
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    char *a = pa_pool_alloc(p, 1000, NULL);
    CHECK(a != NULL);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, 1u << 20); /* the spare */
    CHECK_EQ(pa_pool_check(p), 0u);
    char *b = pa_pool_alloc(p, 1000, NULL);
    CHECK(b == a);
    CHECK_EQ(pa_pool_free(p, b), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].reserved, 0u);
    CHECK_EQ(pa_pool_free(p, a + 4096), PA_ERR_FOREIGN); /* stale entry */
    CHECK_EQ(pa_pool_check(p), 0u);
    /* a dedicated region (3 MiB block) registers first and last page */
    char *d = pa_pool_alloc(p, 3u << 20, NULL);
    CHECK(d != NULL);
    memset(d, 1, 3u << 20);
    CHECK_EQ(pa_pool_free(p, d + 4096), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, d + (2u << 20)), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, d + 64), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_block_size(p, d), 4u << 20);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, d), PA_OK);
    CHECK_EQ(pa_pool_free(p, d + 8192), PA_ERR_FOREIGN);
    char *e = pa_pool_alloc(p, 3u << 20, NULL); /* recycled metadata */
    CHECK(e != NULL);
    CHECK_EQ(pa_pool_free(p, e + 4096), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, e), PA_OK);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* A zone's span request flushes the buddy caches only once they hold a
 * region's worth (1 MiB by default): a few cached 8 KiB blocks stay for
 * reuse, many are merged so the heap can place the span among them. */
static void test_buddy_cache_kept_below_a_region(void) {
    pa_pool_t *p = buddy_hybrid(0);
    /* free heap room first: a span request the heap cannot serve flushes
     * every cache before the pool grows */
    CHECK_EQ(pa_pool_free(p, pa_pool_alloc(p, 4 << 20, NULL)), PA_OK);
    void *v[160];
    for (int i = 0; i < 160; i++) v[i] = pa_pool_alloc(p, 8000, NULL); /* 8 KiB buddy */
    for (int i = 0; i < 8; i++) CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
    void *big = pa_pool_alloc(p, 100000, NULL); /* a large span from the heap */
    CHECK(big != NULL);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].cached, (size_t)8 * 8192);
    CHECK_EQ(pa_pool_check(p), 0u);
    for (int i = 8; i < 160; i++) CHECK_EQ(pa_pool_free(p, v[i]), PA_OK); /* 1.25 MiB */
    void *big2 = pa_pool_alloc(p, 200000, NULL);
    CHECK(big2 != NULL);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].cached, (size_t)0);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, big), PA_OK);
    CHECK_EQ(pa_pool_free(p, big2), PA_OK);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_split_and_coalesce);
    RUN(test_orders);
    RUN(test_default_threshold);
    RUN(test_many_random);
    RUN(test_buddy_only_mode);
    RUN(test_spare_region_and_dedicated);
    RUN(test_buddy_cache_kept_below_a_region);
    return pa_test_report();
}
