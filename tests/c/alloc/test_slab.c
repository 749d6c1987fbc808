/* test_slab.c -- the slab size classes, through the public pool API. */
#include "counting_backend.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

static size_t bsize(pa_pool_t *p, size_t n) {
    void *a = pa_pool_alloc(p, n, NULL);
    size_t s = pa_pool_block_size(p, a);
    pa_pool_free(p, a);
    return s;
}

static void test_class_spacing(void) {
    /* classes per doubling 1, 2, 4, 8: the rounding waste is bounded by
     * the spacing, and class sizes are multiples of the granularity */
    unsigned per[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        pa_pool_config_t cfg;
        pa_pool_config_default(&cfg);
        cfg.classes_per_doubling = per[k];
        cfg.alignment = 16;
        pa_pool_t *p = pa_pool_create(&cfg, NULL);
        CHECK(p != NULL);
        size_t worst_num = 0, worst_den = 1;
        for (size_t n = 1; n <= 4096; n++) {
            size_t b = bsize(p, n);
            CHECK(b >= n && b % 16 == 0);
            if (n > 16 * per[k] && (b - n) * worst_den > worst_num * n) {
                worst_num = b - n;
                worst_den = n;
            }
        }
        /* waste/n < 1/per (plus granularity effects excluded above) */
        CHECK(worst_num * per[k] < worst_den);
        pa_pool_stats_t st;
        pa_pool_stats(p, &st);
        CHECK_EQ(st.zone[PA_ZONE_SLAB].allocs, 4096u);
        CHECK_EQ(st.zone[PA_ZONE_BUDDY].allocs, 0u);
        CHECK_EQ(pa_pool_check(p), 0u);
        pa_pool_destroy(p);
    }
    /* the default spacing: 64, 128, 192, 256, 320, ... (four per doubling
     * at 64 B granularity) */
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    CHECK_EQ(bsize(p, 1), 64u);
    CHECK_EQ(bsize(p, 65), 128u);
    CHECK_EQ(bsize(p, 129), 192u);
    CHECK_EQ(bsize(p, 257), 320u);
    CHECK_EQ(bsize(p, 513), 640u);
    CHECK_EQ(bsize(p, 3073), 3584u);
    CHECK_EQ(bsize(p, 4096), 4096u);
    CHECK_EQ(bsize(p, 4097), 5120u);
    CHECK_EQ(bsize(p, 12289), 14336u);
    CHECK_EQ(bsize(p, 16384), 16384u); /* the default slab_max */
    CHECK_EQ(bsize(p, 16385), 20480u); /* large: whole pages */
    pa_pool_destroy(p);
}

static void test_custom_classes(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    size_t cls[] = {64, 256, 1024, 4096};
    cfg.num_classes = 4;
    memcpy(cfg.classes, cls, sizeof cls);
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    CHECK_EQ(bsize(p, 1), 64u);
    CHECK_EQ(bsize(p, 65), 256u);
    CHECK_EQ(bsize(p, 257), 1024u);
    CHECK_EQ(bsize(p, 1025), 4096u);
    CHECK_EQ(bsize(p, 4096), 4096u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_slab_fill_and_release(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    /* 64 KiB slabs of 256 B slots: 256 per slab; 1000 blocks = 4 slabs */
    enum { N = 1000 };
    static unsigned char *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = pa_pool_alloc(p, 256, NULL);
        CHECK(v[i] != NULL);
        memset(v[i], i & 0xff, 256);
    }
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].reserved, 4u * 65536u);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].allocated, (size_t)N * 256u);
    /* blocks are distinct and do not overlap: patterns intact */
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 256; j++) bad += v[i][j] != (i & 0xff);
    CHECK_EQ(bad, 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    for (int i = 0; i < N; i++) CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].cached, (size_t)N * 256u);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].reserved, 4u * 65536u); /* deferred */
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].reserved, 0u); /* empty slabs went back */
    CHECK_EQ(st.zone[PA_ZONE_SLAB].cached, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(cnt.maps, 1); /* all inside the first chunk */
    pa_pool_destroy(p);
}

static void test_slot_reuse_lifo(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    void *a = pa_pool_alloc(p, 100, NULL), *b = pa_pool_alloc(p, 100, NULL), *c = pa_pool_alloc(p, 100, NULL);
    CHECK((char *)b - (char *)a == 128 && (char *)c - (char *)b == 128);
    pa_pool_free(p, b);
    pa_pool_free(p, a);
    pa_pool_reclaim(p);
    /* after reclaim the slab's own LIFO stack hands out the last released */
    void *d = pa_pool_alloc(p, 100, NULL);
    CHECK(d == b || d == a);
    /* a different size in the same class reuses the cached slot */
    pa_pool_free(p, c);
    CHECK(pa_pool_alloc(p, 65, NULL) == c);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_slab_only_mode(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = PA_POOL_SLAB_ONLY;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    size_t sizes[] = {1, 5000, 70000, 300000, 3 << 20};
    void *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = pa_pool_alloc(p, sizes[i], NULL);
        CHECK(v[i] != NULL);
        size_t b = pa_pool_block_size(p, v[i]);
        CHECK(b >= sizes[i] && b <= sizes[i] + sizes[i] / 4 + 64);
        memset(v[i], 3, sizes[i]);
    }
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].live, 5u);
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].allocs + st.zone[PA_ZONE_LARGE].allocs, 0u);
    for (int i = 0; i < 5; i++) {
        /* v[0] + 64 is the start of a free slot: not live; others are
         * interior pointers */
        CHECK_EQ(pa_pool_free(p, (char *)v[i] + 64), i == 0 ? PA_ERR_DOUBLE_FREE : PA_ERR_FOREIGN);
        CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
    }
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static pa_pool_t *slab_only(size_t budget) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = PA_POOL_SLAB_ONLY;
    cfg.cache_budget = budget;
    return pa_pool_create(&cfg, NULL);
}

static void test_spare_slab_and_stale_entries(void) {
    /* budget 1: every free is flushed at once, so the slab empties */
    pa_pool_t *p = slab_only(1);
    char *a = pa_pool_alloc(p, 3000, NULL);
    CHECK(a != NULL);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.cached, 0u);
    CHECK(st.zone[PA_ZONE_SLAB].reserved > 0); /* the empty slab is kept */
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, a), PA_ERR_DOUBLE_FREE);
    char *b = pa_pool_alloc(p, 3000, NULL);
    CHECK(b == a); /* the spare serves it: no new slab */
    CHECK_EQ(pa_pool_free(p, b), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].reserved, 0u); /* reclaim drops spares */
    /* the slab's pages keep stale entries: they validate nothing */
    CHECK_EQ(pa_pool_free(p, a + 4096), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, a + 3008), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_check(p), 0u);
    /* a one-slot slab (200 KB class) registers first and last page only */
    char *x = pa_pool_alloc(p, 200000, NULL);
    CHECK(x != NULL);
    memset(x, 3, 200000);
    CHECK_EQ(pa_pool_free(p, x + 8192), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, x + 64), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_block_size(p, x + 4096), 0u);
    CHECK(pa_pool_block_size(p, x) >= 200000u);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, x), PA_OK);
    CHECK_EQ(pa_pool_free(p, x), PA_ERR_DOUBLE_FREE);
    /* a second one-slot slab of the class is not kept: two spares never */
    char *y = pa_pool_alloc(p, 200000, NULL);
    char *z = pa_pool_alloc(p, 200000, NULL);
    CHECK(y == x && z != NULL);
    pa_pool_free(p, y);
    pa_pool_free(p, z);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_free(p, z + 12288), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    CHECK_EQ(pa_pool_free(p, x + 8192), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_class_spacing);
    RUN(test_custom_classes);
    RUN(test_slab_fill_and_release);
    RUN(test_slot_reuse_lifo);
    RUN(test_slab_only_mode);
    RUN(test_spare_slab_and_stale_entries);
    return pa_test_report();
}
