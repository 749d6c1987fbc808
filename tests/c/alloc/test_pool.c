/* test_pool.c -- C tests for the work pool front end: bad input, limits,
 * injected backend failures, watermarks, caches, stats, realloc/calloc. */
#include "counting_backend.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

static pa_pool_stats_t stats(pa_pool_t *p) {
    pa_pool_stats_t st;
    memset(&st, 0xff, sizeof st);
    CHECK_EQ(pa_pool_stats(p, &st), PA_OK);
    return st;
}

static void test_basic(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    CHECK(p != NULL);
    pa_status_t s;
    char *a = pa_pool_alloc(p, 100, &s);
    CHECK(a != NULL && s == PA_OK);
    CHECK(((uintptr_t)a & 63) == 0);
    memset(a, 1, 100);
    CHECK(pa_pool_block_size(p, a) >= 100);
    CHECK(pa_pool_block_size(p, a + 64) == 0);
    pa_pool_stats_t st = stats(p);
    CHECK_EQ(st.requested, 100u);
    CHECK_EQ(st.allocated, pa_pool_block_size(p, a));
    CHECK_EQ(st.live, 1u);
    CHECK_EQ(st.alignment, 64u);
    CHECK(st.reserved >= st.allocated);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    CHECK_EQ(pa_pool_free(p, NULL), PA_OK);
    st = stats(p);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.cached, pa_pool_block_size(p, a) ? 0u : 128u); /* a is dead: 0 */
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_destroy(p), PA_OK);
}

static void test_zero_size(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    void *z[10];
    for (int i = 0; i < 10; i++) {
        z[i] = pa_pool_alloc(p, 0, NULL);
        CHECK(z[i] != NULL);
        CHECK(((uintptr_t)z[i] & 63) == 0);
        CHECK(pa_pool_block_size(p, z[i]) >= 64);
        for (int j = 0; j < i; j++) CHECK(z[i] != z[j]);
    }
    CHECK_EQ(stats(p).requested, 0u);
    CHECK_EQ(stats(p).live, 10u);
    for (int i = 0; i < 10; i++) CHECK_EQ(pa_pool_free(p, z[i]), PA_OK);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_absurd_sizes(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    pa_status_t s;
    CHECK(pa_pool_alloc(p, SIZE_MAX, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    CHECK(pa_pool_alloc(p, SIZE_MAX - 4095, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    CHECK(pa_pool_alloc(p, ((size_t)1 << 47) + 1, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    /* mmap refuses 2^46 bytes on this machine or it is over no limit:
     * either way no crash and a clear status */
    void *huge = pa_pool_alloc(p, (size_t)1 << 46, &s);
    CHECK(huge == NULL ? s == PA_ERR_NOMEM : s == PA_OK);
    if (huge) CHECK_EQ(pa_pool_free(p, huge), PA_OK);
    CHECK(pa_pool_calloc(p, SIZE_MAX / 2, 4, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    CHECK(pa_pool_alloc(p, SIZE_MAX, NULL) == NULL);
    CHECK(stats(p).failures >= 4);
    CHECK_EQ(stats(p).live, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_bad_pointers(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    pa_pool_t *q = pa_pool_create(NULL, NULL);
    size_t sizes[] = {24, 3000, 20000, 200000, 3 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char *a = pa_pool_alloc(p, sizes[k], NULL);
        char *b = pa_pool_alloc(p, sizes[k], NULL);
        CHECK(a && b);
        /* interior pointers: never freed, block stays live */
        CHECK_EQ(pa_pool_free(p, a + 8), PA_ERR_FOREIGN);
        if (sizes[k] > 128) CHECK_EQ(pa_pool_free(p, a + 64), PA_ERR_FOREIGN);
        CHECK_EQ(pa_pool_free(p, a + sizes[k] - 1), PA_ERR_FOREIGN);
        /* another pool's pointer */
        CHECK_EQ(pa_pool_free(q, a), PA_ERR_FOREIGN);
        CHECK(pa_pool_block_size(p, a) >= sizes[k]);
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        CHECK_EQ(pa_pool_free(p, a), PA_ERR_DOUBLE_FREE);
        CHECK_EQ(pa_pool_block_size(p, a), 0u);
        CHECK_EQ(pa_pool_free(p, b), PA_OK);
        CHECK_EQ(pa_pool_free(p, b), PA_ERR_DOUBLE_FREE);
        CHECK_EQ(pa_pool_check(p), 0u);
    }
    int local;
    static int global;
    CHECK_EQ(pa_pool_free(p, &local), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, &global), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, (void *)(uintptr_t)0x1000), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, (void *)UINTPTR_MAX), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_block_size(p, &local), 0u);
    /* pointers into free memory of the pool: after reclaim, the freed
     * blocks are free memory; interior ones are foreign */
    char *c = pa_pool_alloc(p, 500000, NULL);
    CHECK_EQ(pa_pool_free(p, c), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    CHECK(pa_pool_free(p, c) != PA_OK);
    CHECK_EQ(pa_pool_free(p, c + 4096), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_free(p, c + 100), PA_ERR_FOREIGN);
    CHECK_EQ(stats(p).live, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    /* realloc of a bad pointer leaves everything alone */
    pa_status_t s;
    CHECK(pa_pool_realloc(p, &local, 10, &s) == NULL);
    CHECK_EQ(s, PA_ERR_FOREIGN);
    pa_pool_destroy(p);
    pa_pool_destroy(q);
}

static void test_null_and_destroyed(void) {
    pa_status_t s;
    pa_pool_stats_t st;
    CHECK(pa_pool_alloc(NULL, 10, NULL) == NULL);
    CHECK(pa_pool_alloc(NULL, 10, &s) == NULL);
    CHECK_EQ(s, PA_ERR_INVALID);
    CHECK_EQ(pa_pool_free(NULL, &s), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_destroy(NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_config_default(NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_stats(NULL, &st), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_check(NULL), 1u);
    CHECK_EQ(pa_pool_block_size(NULL, &s), 0u);

    pa_pool_t *p = pa_pool_create(NULL, NULL);
    void *a = pa_pool_alloc(p, 1000, NULL);
    void *b = pa_pool_alloc(p, 1 << 20, NULL);
    CHECK(a && b);
    CHECK_EQ(pa_pool_stats(p, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_walk(p, NULL, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_destroy(p), PA_OK);
    /* every call on the tombstone: PA_ERR_STATE, nothing touched */
    CHECK_EQ(pa_pool_free(p, a), PA_ERR_STATE);
    CHECK_EQ(pa_pool_free(p, NULL), PA_ERR_STATE);
    CHECK(pa_pool_alloc(p, 10, &s) == NULL);
    CHECK_EQ(s, PA_ERR_STATE);
    CHECK(pa_pool_alloc(p, 10, NULL) == NULL);
    CHECK(pa_pool_calloc(p, 2, 10, &s) == NULL);
    CHECK_EQ(s, PA_ERR_STATE);
    CHECK(pa_pool_realloc(p, a, 10, &s) == NULL);
    CHECK_EQ(s, PA_ERR_STATE);
    CHECK_EQ(pa_pool_block_size(p, a), 0u);
    CHECK_EQ(pa_pool_reclaim(p), PA_ERR_STATE);
    CHECK_EQ(pa_pool_trim(p, 0, NULL), PA_ERR_STATE);
    CHECK_EQ(pa_pool_free_all(p), PA_ERR_STATE);
    CHECK_EQ(pa_pool_set_limit(p, 1 << 20), PA_ERR_STATE);
    CHECK_EQ(pa_pool_set_watermarks(p, 2, 1), PA_ERR_STATE);
    CHECK_EQ(pa_pool_stats(p, &st), PA_ERR_STATE);
    CHECK_EQ(pa_pool_reset_peak(p), PA_ERR_STATE);
    CHECK_EQ(pa_pool_check(p), 1u);
    CHECK_EQ(pa_pool_destroy(p), PA_ERR_STATE);
}

static void test_config_validation(void) {
    pa_pool_config_t cfg;
    pa_status_t s;
    size_t bad_align[] = {3, 4, 48, 8192};
    for (size_t i = 0; i < 4; i++) {
        pa_pool_config_default(&cfg);
        cfg.alignment = bad_align[i];
        CHECK(pa_pool_create(&cfg, &s) == NULL);
        CHECK_EQ(s, PA_ERR_ALIGN);
    }
    struct {
        int field;
        long long value;
    } bad[] = {{0, 7}, {0, -1}, {1, 9}, {1, -1}, {2, 5}, {2, -1}, {3, 3}, {4, 3 << 10},
               {5, 1 << 20}, {6, 1000}, {7, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pa_pool_config_default(&cfg);
        switch (bad[i].field) {
        case 0: cfg.mode = (pa_pool_mode_t)bad[i].value; break;
        case 1: cfg.growth = (pa_growth_t)bad[i].value; break;
        case 2: cfg.release = (pa_release_t)bad[i].value; break;
        case 3: cfg.classes_per_doubling = (unsigned)bad[i].value; break;
        case 4: cfg.slab_size = (size_t)bad[i].value; break;     /* not pages */
        case 5: cfg.low_watermark = (size_t)bad[i].value; break; /* > high */
        case 6: cfg.buddy_region = (size_t)bad[i].value; break;
        case 7: cfg.growth = PA_GROW_NONE; cfg.chunk_size = 0; break;
        }
        CHECK(pa_pool_create(&cfg, &s) == NULL);
        CHECK_EQ(s, PA_ERR_INVALID);
    }
    /* custom classes: must increase and be multiples of the granularity */
    pa_pool_config_default(&cfg);
    cfg.num_classes = 3;
    cfg.classes[0] = 64;
    cfg.classes[1] = 64;
    cfg.classes[2] = 128;
    CHECK(pa_pool_create(&cfg, NULL) == NULL);
    cfg.classes[1] = 100;
    CHECK(pa_pool_create(&cfg, NULL) == NULL);
    cfg.num_classes = PA_POOL_MAX_CLASSES + 1;
    CHECK(pa_pool_create(&cfg, NULL) == NULL);
    /* granularities 8 .. 4096 work */
    for (size_t g = 8; g <= 4096; g *= 8) {
        pa_pool_config_default(&cfg);
        cfg.alignment = g;
        pa_pool_t *p = pa_pool_create(&cfg, &s);
        CHECK(p != NULL && s == PA_OK);
        for (size_t n = 1; n < 3000000; n = n * 3 + 1) {
            void *a = pa_pool_alloc(p, n, NULL);
            CHECK(a && ((uintptr_t)a % g) == 0);
            CHECK(pa_pool_block_size(p, a) >= n);
        }
        CHECK_EQ(stats(p).alignment, g);
        CHECK_EQ(pa_pool_check(p), 0u);
        pa_pool_destroy(p);
    }
}

static void test_cache_lifo(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    /* the block freed last is the next one handed out (hot reuse) */
    size_t sizes[] = {100, 5000, 100000, 400000};
    for (size_t k = 0; k < 4; k++) {
        void *a = pa_pool_alloc(p, sizes[k], NULL);
        void *b = pa_pool_alloc(p, sizes[k], NULL);
        void *c = pa_pool_alloc(p, sizes[k], NULL);
        pa_pool_free(p, a);
        pa_pool_free(p, c);
        CHECK(pa_pool_alloc(p, sizes[k], NULL) == c);
        CHECK(pa_pool_alloc(p, sizes[k], NULL) == a);
        pa_pool_free(p, a);
        pa_pool_free(p, b);
        pa_pool_free(p, c);
    }
    pa_pool_stats_t st = stats(p);
    CHECK(st.cached > 0);
    CHECK_EQ(st.zone[0].cache_hits + st.zone[1].cache_hits + st.zone[2].cache_hits, 8u);
    /* reclaim empties the caches; free_all also gives the chunks back */
    uint64_t reclaims = st.reclaims;
    CHECK_EQ(pa_pool_reclaim(p), PA_OK);
    st = stats(p);
    CHECK_EQ(st.cached, 0u);
    CHECK_EQ(st.reclaims, reclaims + 1);
    CHECK(st.reserved > 0);
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    st = stats(p);
    CHECK_EQ(st.reserved, 0u);
    CHECK_EQ(st.chunks, 0u);
    CHECK(st.peak_reserved > 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    /* and the pool still works after giving everything back */
    void *a = pa_pool_alloc(p, 777, NULL);
    CHECK(a != NULL);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    pa_pool_destroy(p);
}

static void test_cache_budget(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.cache_budget = 1 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    void *v[64];
    for (int i = 0; i < 64; i++) v[i] = pa_pool_alloc(p, 100000, NULL); /* 128 KiB buddy */
    for (int i = 0; i < 64; i++) {
        CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
        CHECK(stats(p).cached <= (1u << 20));
    }
    CHECK(stats(p).cached > 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* The slab fast path respects the budget too: frees of slab blocks never
 * leave more than cache_budget bytes cached. */
/* 200 blocks of `size` bytes freed one by one into a 64 KiB cache budget:
 * the caches never pass it, and `zone` keeps some. */
static void check_cache_budget(size_t size, pa_zone_t zone, size_t slab_max) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.cache_budget = 64 << 10;
    if (slab_max) cfg.slab_max = slab_max;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    void *v[200];
    for (int i = 0; i < 200; i++) v[i] = pa_pool_alloc(p, size, NULL);
    for (int i = 0; i < 200; i++) {
        CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
        CHECK(stats(p).cached <= (64u << 10));
    }
    CHECK(stats(p).zone[zone].cached > 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_cache_budget_slab(void) {
    check_cache_budget(1000, PA_ZONE_SLAB, 0); /* 1 KiB class */
}

static void test_cache_budget_buddy(void) {
    check_cache_budget(6000, PA_ZONE_BUDDY, 4096); /* 8 KiB buddy blocks */
}

static void test_limit(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cfg.limit = 8 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    pa_status_t s;
    CHECK(pa_pool_alloc(p, 9 << 20, &s) == NULL);
    CHECK_EQ(s, PA_ERR_NOMEM);
    void *v[16];
    int n = 0;
    while (n < 16 && (v[n] = pa_pool_alloc(p, 1 << 20, &s)) != NULL) n++;
    CHECK_EQ(s, PA_ERR_NOMEM);
    CHECK(n >= 6 && n <= 8);
    pa_pool_stats_t st = stats(p);
    CHECK(st.reserved <= (8u << 20));
    CHECK_EQ(st.reserved, cnt.live_bytes);
    /* limit below what live blocks need: refused, limit unchanged */
    CHECK_EQ(pa_pool_set_limit(p, 2 << 20), PA_ERR_INVALID);
    CHECK_EQ(stats(p).limit, 8u << 20);
    /* free some, then a lower limit works (trims first) */
    for (int i = 2; i < n; i++) pa_pool_free(p, v[i]);
    CHECK_EQ(pa_pool_set_limit(p, 4 << 20), PA_OK);
    st = stats(p);
    CHECK_EQ(st.limit, 4u << 20);
    CHECK(st.reserved <= (4u << 20));
    CHECK_EQ(st.reserved, cnt.live_bytes);
    CHECK_EQ(pa_pool_set_limit(p, 0), PA_OK);
    void *big = pa_pool_alloc(p, 20 << 20, NULL);
    CHECK(big != NULL);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
    CHECK_EQ(cnt.maps, cnt.unmaps);
}

static void test_backend_failures(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cnt.fail_after = 0;
    pa_status_t s;
    CHECK(pa_pool_create(&cfg, &s) == NULL);
    CHECK_EQ(s, PA_ERR_NOMEM);
    /* first chunk works, growth fails: every zone reports NOMEM cleanly */
    cnt.fail_after = 1;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    size_t got = 0;
    void *v[4096];
    size_t n = 0;
    while (n < 4096 && (v[n] = pa_pool_alloc(p, 3000, &s)) != NULL) {
        got += 3000;
        n++;
    }
    CHECK_EQ(s, PA_ERR_NOMEM);
    CHECK(got > 500000); /* most of the 1 MiB chunk */
    CHECK(pa_pool_alloc(p, 100000, &s) == NULL);
    CHECK_EQ(s, PA_ERR_NOMEM);
    CHECK(pa_pool_alloc(p, 5 << 20, &s) == NULL);
    CHECK_EQ(s, PA_ERR_NOMEM);
    CHECK(stats(p).failures >= 3);
    CHECK_EQ(pa_pool_check(p), 0u);
    /* memory comes back: freed blocks serve new requests without the OS */
    for (size_t i = 0; i < n; i++) CHECK_EQ(pa_pool_free(p, v[i]), PA_OK);
    void *m = pa_pool_alloc(p, 100000, &s);
    CHECK(m != NULL && s == PA_OK);
    CHECK_EQ(cnt.maps, 1);
    /* the backend recovers: growth works again */
    cnt.fail_after = -1;
    void *big = pa_pool_alloc(p, 5 << 20, NULL);
    CHECK(big != NULL);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
}

static void test_watermarks(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cfg.growth = PA_GROW_POW2;
    cfg.chunk_size = 1 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    /* 1 MiB blocks: the first fits the initial 1 MiB chunk, then chunks of
     * 2 MiB (two blocks) and 4 MiB: reserved 7 MiB in 3 maps */
    void *v[4];
    for (int i = 0; i < 4; i++) v[i] = pa_pool_alloc(p, 1 << 20, NULL);
    CHECK_EQ(cnt.maps, 3);
    CHECK_EQ(stats(p).reserved, 7u << 20);
    for (int i = 0; i < 4; i++) pa_pool_free(p, v[i]);
    /* below the high watermark: setting it trims nothing */
    CHECK_EQ(pa_pool_set_watermarks(p, 8 << 20, 2 << 20), PA_OK);
    CHECK_EQ(stats(p).trims, 0u);
    CHECK_EQ(cnt.unmaps, 0);
    /* 5 MiB fits no free chunk: an 8 MiB chunk is mapped, reserved 15 MiB
     * is above high, so the pool trims toward low: the three free chunks
     * go back (the new one holds the live block and stays) */
    char *big = pa_pool_alloc(p, 5 << 20, NULL);
    CHECK(big != NULL);
    pa_pool_stats_t st = stats(p);
    CHECK_EQ(st.trims, 1u);
    CHECK_EQ(cnt.maps, 4);
    CHECK_EQ(cnt.unmaps, 3);
    CHECK_EQ(st.reserved, 8u << 20);
    CHECK_EQ(st.reserved, cnt.live_bytes);
    CHECK_EQ(st.peak_reserved, 15u << 20);
    CHECK(pa_pool_block_size(p, big) >= (5u << 20));
    memset(big, 5, 5 << 20);
    CHECK_EQ(pa_pool_check(p), 0u);
    /* watermarks can change; low > high is refused */
    CHECK_EQ(pa_pool_set_watermarks(p, 1, 2), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_set_watermarks(p, 0, 0), PA_OK);
    /* explicit trim to a target */
    pa_pool_free(p, big);
    size_t rel = 0;
    CHECK_EQ(pa_pool_trim(p, 0, &rel), PA_OK);
    CHECK_EQ(rel, 8u << 20);
    CHECK_EQ(stats(p).reserved, 0u);
    CHECK_EQ(cnt.live_bytes, 0u);
    pa_pool_destroy(p);
}

static void test_decommit(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cfg.growth = PA_GROW_REQUESTED;
    cfg.release = PA_RELEASE_DECOMMIT;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    char *a = pa_pool_alloc(p, 4 << 20, NULL);
    memset(a, 1, 4 << 20);
    pa_pool_free(p, a);
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    CHECK(cnt.decommits >= 1);
    CHECK_EQ(cnt.unmaps, 0);
    CHECK_EQ(stats(p).reserved, 0u); /* decommitted chunks are not reserved */
    int maps = cnt.maps;
    char *b = pa_pool_alloc(p, 4 << 20, NULL); /* reuses the spare: no map */
    CHECK(b != NULL);
    CHECK_EQ(cnt.maps, maps);
    CHECK_EQ(stats(p).reserved, 4u << 20);
    CHECK_EQ(b[100], 0); /* decommitted pages read back as zeros */
    CHECK_EQ(pa_pool_check(p), 0u);
    /* a failing decommit falls back to unmapping */
    pa_pool_free(p, b);
    cnt.fail_decommit = 1;
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    CHECK(cnt.unmaps >= 1);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
}

static void test_grow_none(void) {
    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cfg.growth = PA_GROW_NONE;
    cfg.chunk_size = 0;
    cfg.limit = 4 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    CHECK_EQ(cnt.maps, 1);
    CHECK_EQ(cnt.live_bytes, 4u << 20);
    void *v[100];
    int n = 0;
    while (n < 100 && (v[n] = pa_pool_alloc(p, 300000, NULL)) != NULL) n++;
    CHECK(n >= 12 && n <= 14);
    CHECK_EQ(cnt.maps, 1);
    CHECK_EQ(pa_pool_free_all(p), PA_OK); /* a fixed pool keeps its chunk */
    CHECK_EQ(cnt.unmaps, 0);
    for (int i = 0; i < n; i++) pa_pool_free(p, v[i]);
    CHECK(pa_pool_alloc(p, 3 << 20, NULL) != NULL); /* coalesced back */
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
}

static void test_stats_fragmentation(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 4096; /* a buddy zone from 4 KiB: every zone in use */
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    pa_pool_stats_t st = stats(p);
    CHECK(st.frag_internal == 0.0 && st.frag_external == 0.0);
    void *a = pa_pool_alloc(p, 65, NULL);   /* 80-byte class */
    void *b = pa_pool_alloc(p, 5000, NULL); /* 8 KiB buddy block */
    void *c = pa_pool_alloc(p, 300000, NULL);
    st = stats(p);
    CHECK_EQ(st.requested, 65u + 5000u + 300000u);
    CHECK_EQ(st.zone[PA_ZONE_SLAB].allocated, 128u); /* 64 B granularity */
    CHECK_EQ(st.zone[PA_ZONE_BUDDY].allocated, 8192u);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].allocated, 300000u + 4096u - 300000u % 4096u);
    CHECK_EQ(st.allocated, st.zone[0].allocated + st.zone[1].allocated + st.zone[2].allocated);
    double fi = 1.0 - (double)st.requested / (double)st.allocated;
    CHECK(st.frag_internal > fi - 1e-12 && st.frag_internal < fi + 1e-12);
    double fo = 1.0 - (double)st.requested / (double)st.reserved;
    CHECK(st.frag_overall > fo - 1e-12 && st.frag_overall < fo + 1e-12);
    CHECK_EQ(st.total_free, st.reserved - st.allocated);
    CHECK(st.largest_free <= st.total_free);
    CHECK(st.frag_external >= 0.0 && st.frag_external < 1.0);
    CHECK_EQ(st.allocs, 3u);
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    pa_pool_free(p, c);
    st = stats(p);
    CHECK_EQ(st.frees, 3u);
    CHECK_EQ(st.peak_requested, 65u + 5000u + 300000u);
    CHECK_EQ(st.cached, 128u + 8192u + 303104u);
    CHECK_EQ(pa_pool_reset_peak(p), PA_OK);
    CHECK_EQ(stats(p).peak_requested, 0u);
    pa_pool_destroy(p);
}

static void test_realloc_calloc(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    pa_status_t s;
    unsigned char *a = pa_pool_realloc(p, NULL, 100, &s);
    CHECK(a != NULL && s == PA_OK);
    for (int i = 0; i < 100; i++) a[i] = (unsigned char)i;
    /* same class: in place */
    CHECK(pa_pool_realloc(p, a, 120, &s) == a);
    CHECK_EQ(stats(p).requested, 120u);
    /* growth moves through every zone, keeping the prefix */
    size_t sizes[] = {3000, 70000, 900000, 5 << 20, 50};
    for (size_t k = 0; k < 5; k++) {
        unsigned char *b = pa_pool_realloc(p, a, sizes[k], &s);
        CHECK(b != NULL && s == PA_OK);
        for (int i = 0; i < 50; i++) CHECK_EQ(b[i], (unsigned char)i);
        CHECK(pa_pool_block_size(p, b) >= sizes[k]);
        CHECK_EQ(stats(p).live, 1u);
        CHECK_EQ(stats(p).requested, sizes[k]);
        a = b;
    }
    /* failure leaves the block alone */
    CHECK(pa_pool_realloc(p, a, SIZE_MAX, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    CHECK(pa_pool_block_size(p, a) >= 50);
    CHECK_EQ(a[7], 7);
    pa_pool_free(p, a);
    /* calloc zeroes recycled memory */
    unsigned char *d = pa_pool_alloc(p, 4000, NULL);
    memset(d, 0xAB, 4000);
    pa_pool_free(p, d);
    unsigned char *e = pa_pool_calloc(p, 100, 40, &s);
    CHECK(e == d && s == PA_OK);
    int nz = 0;
    for (int i = 0; i < 4000; i++) nz += e[i] != 0;
    CHECK_EQ(nz, 0);
    CHECK(pa_pool_calloc(p, 0, 0, &s) != NULL);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

typedef struct {
    int n, stop_at;
    size_t live_bytes;
} wctx_t;

static int count_walker(const pa_pool_block_t *b, void *ctx) {
    wctx_t *w = ctx;
    w->n++;
    if (b->state == PA_BLOCK_LIVE) w->live_bytes += b->size;
    return w->stop_at && w->n >= w->stop_at;
}

static void test_walk(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    void *a = pa_pool_alloc(p, 100, NULL), *b = pa_pool_alloc(p, 10000, NULL), *c = pa_pool_alloc(p, 1 << 20, NULL);
    wctx_t w = {0, 0, 0};
    CHECK_EQ(pa_pool_walk(p, count_walker, &w), PA_OK);
    CHECK_EQ(w.live_bytes, stats(p).allocated);
    CHECK(w.n > 3);
    wctx_t w2 = {0, 2, 0};
    CHECK_EQ(pa_pool_walk(p, count_walker, &w2), PA_OK);
    CHECK_EQ(w2.n, 2);
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    pa_pool_free(p, c);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_basic);
    RUN(test_zero_size);
    RUN(test_absurd_sizes);
    RUN(test_bad_pointers);
    RUN(test_null_and_destroyed);
    RUN(test_config_validation);
    RUN(test_cache_lifo);
    RUN(test_cache_budget);
    RUN(test_cache_budget_slab);
    RUN(test_cache_budget_buddy);
    RUN(test_limit);
    RUN(test_backend_failures);
    RUN(test_watermarks);
    RUN(test_decommit);
    RUN(test_grow_none);
    RUN(test_stats_fragmentation);
    RUN(test_realloc_calloc);
    RUN(test_walk);
    return pa_test_report();
}
