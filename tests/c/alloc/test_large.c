/* test_large.c -- the page heap and the large-block zone: best fit,
 * splitting, coalescing, growth policies, spares. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include "counting_backend.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

static pa_pool_t *make(counting_t *cnt, pa_backend_t *be, int growth, size_t chunk) {
    *be = counting_backend(cnt);
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = be;
    cfg.growth = growth;
    cfg.chunk_size = chunk;
    return pa_pool_create(&cfg, NULL);
}

static void test_page_granularity(void) {
    counting_t cnt;
    pa_backend_t be;
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 8 * MB);
    char *a = pa_pool_alloc(p, 300 * KB + 1, NULL);
    CHECK_EQ(pa_pool_block_size(p, a), 304 * KB);
    CHECK(((uintptr_t)a & 4095) == 0);
    char *b = pa_pool_alloc(p, 1 * MB, NULL);
    CHECK_EQ(pa_pool_block_size(p, b), 1 * MB);
    /* carved one after the other from the first chunk */
    CHECK(b == a + 304 * KB);
    CHECK_EQ(cnt.maps, 1);
    pa_pool_destroy(p);
}

static void test_best_fit_and_coalesce(void) {
    counting_t cnt;
    pa_backend_t be;
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 16 * MB);
    char *v[6];
    size_t sz[6] = {1 * MB, 512 * KB, 2 * MB, 300 * KB, 1 * MB, 400 * KB};
    for (int i = 0; i < 6; i++) v[i] = pa_pool_alloc(p, sz[i], NULL);
    for (int i = 1; i < 6; i++) CHECK(v[i] == v[i - 1] + sz[i - 1]);
    /* holes of 512K (v1) and 300K (v3); best fit for 290K is v3's hole */
    pa_pool_free(p, v[1]);
    pa_pool_free(p, v[3]);
    pa_pool_reclaim(p);
    char *x = pa_pool_alloc(p, 290 * KB, NULL);
    CHECK(x == v[3]);
    char *y = pa_pool_alloc(p, 500 * KB, NULL);
    CHECK(y == v[1]);
    /* freeing three neighbours merges them: 1M + 512K(ish) + 2M fits */
    pa_pool_free(p, v[0]);
    pa_pool_free(p, y);
    pa_pool_free(p, v[2]);
    pa_pool_reclaim(p);
    CHECK_EQ(pa_pool_check(p), 0u);
    char *z = pa_pool_alloc(p, 3 * MB + 500 * KB, NULL);
    CHECK(z == v[0]);
    CHECK_EQ(cnt.maps, 1);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_cache_cut_to_size(void) {
    counting_t cnt;
    pa_backend_t be;
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 8 * MB);
    char *a = pa_pool_alloc(p, 1 * MB, NULL);
    pa_pool_free(p, a);
    /* a smaller request of the same size class reuses the cached block,
     * cut down: the tail goes back to the heap */
    char *b = pa_pool_alloc(p, 900 * KB, NULL);
    CHECK(b == a);
    CHECK_EQ(pa_pool_block_size(p, b), 900 * KB);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].cache_hits, 1u);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].reserved, 900 * KB);
    char *c = pa_pool_alloc(p, 124 * KB + 1 + 256 * KB, NULL); /* > threshold */
    CHECK(c == b + 900 * KB);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* A cached large block is reused only when it is at least as big as the
 * request: a block of another page count in the same cache bin (4 bins
 * per doubling: 66 and 70 pages share one) must not be handed out for a
 * bigger request.  Every pair (cached pages, requested pages) on a fresh
 * pool; the block after the cached one keeps it from coalescing. */
static void test_cache_never_hands_out_a_smaller_block(void) {
    static const size_t pairs[][2] = {{66, 70}, {66, 79}, {70, 66}, {80, 70}, {65, 66},
                                      {100, 81}, {127, 128}, {90, 95}, {70, 70}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        counting_t cnt;
        pa_backend_t be;
        pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 8 * MB);
        size_t cached = pairs[i][0] * 4 * KB, want = pairs[i][1] * 4 * KB - 100;
        char *a = pa_pool_alloc(p, cached, NULL);
        char *pin = pa_pool_alloc(p, 300 * KB, NULL);
        CHECK(a != NULL && pin != NULL);
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        char *b = pa_pool_alloc(p, want, NULL);
        CHECK(b != NULL);
        size_t got = pa_pool_block_size(p, b);
        CHECK(got >= want);
        if (got < want) fprintf(stderr, "  cached %zu pages, asked %zu bytes: block of %zu\n",
                                pairs[i][0], want, got);
        memset(b, 0x5a, want);
        memset(pin, 0xa5, 300 * KB);
        CHECK((unsigned char)b[want - 1] == 0x5a && (unsigned char)pin[0] == 0xa5);
        CHECK_EQ(pa_pool_check(p), 0u);
        pa_pool_destroy(p);
    }
}

/* A free span one page larger than a request is split, not handed out
 * whole: the block has exactly the pages asked for. */
static void test_split_leaves_no_slack(void) {
    counting_t cnt;
    pa_backend_t be;
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 8 * MB);
    char *a = pa_pool_alloc(p, 100 * 4 * KB, NULL);
    char *pin = pa_pool_alloc(p, 300 * KB, NULL);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK); /* a: a free span of 100 pages */
    char *b = pa_pool_alloc(p, 99 * 4 * KB, NULL);
    CHECK(b == a);
    CHECK_EQ(pa_pool_block_size(p, b), 99 * 4 * KB);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].reserved, 99 * 4 * KB + 300 * KB);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_free(p, b);
    pa_pool_free(p, pin);
    pa_pool_destroy(p);
}

/* A backend whose chunks are adjacent in memory, each just above the
 * previous one (carved from one region): spans of different chunks may
 * touch, and must still never merge. */
typedef struct {
    char *region;
    size_t size, used;
} adjacent_t;

static void *adj_map(size_t size, size_t align, void *ctx) {
    adjacent_t *a = ctx;
    (void)align; /* the region is page aligned and sizes are pages */
    if (size > a->size - a->used) return NULL;
    void *p = a->region + a->used;
    a->used += size;
    return p;
}

static void adj_unmap(void *p, size_t size, void *ctx) {
    (void)p;
    (void)size;
    (void)ctx; /* the region goes at the end of the test */
}

static void test_adjacent_chunks_never_merge(void) {
    static adjacent_t adj;
    pa_backend_t *def = (pa_backend_t *)pa_backend_default();
    adj.size = 8 * MB;
    adj.used = 0;
    adj.region = def->map(adj.size, 4 * KB, NULL);
    CHECK(adj.region != NULL);
    pa_backend_t be = {adj_map, adj_unmap, NULL, &adj};
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.backend = &be;
    cfg.growth = PA_GROW_REQUESTED;
    cfg.chunk_size = 1 * MB;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    char *a = pa_pool_alloc(p, 1 * MB, NULL); /* all of chunk 1 */
    char *b = pa_pool_alloc(p, 1 * MB, NULL); /* all of chunk 2, right above */
    CHECK(a != NULL && b == a + 1 * MB);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK); /* chunk 1: one free span */
    CHECK_EQ(pa_pool_free(p, b), PA_OK);
    CHECK_EQ(pa_pool_reclaim(p), PA_OK); /* chunk 2 too: its left neighbour is chunk 1's */
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 2u);
    size_t released = 0;
    CHECK_EQ(pa_pool_trim(p, 0, &released), PA_OK); /* whole free chunks go back */
    CHECK_EQ(released, 2 * MB);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    def->unmap(adj.region, adj.size, NULL);
}

static void test_growth_policies(void) {
    counting_t cnt;
    pa_backend_t be;
    /* REQUESTED: a new chunk exactly as large as the request */
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 1 * MB);
    void *a = pa_pool_alloc(p, 3 * MB + 5, NULL);
    CHECK(a != NULL);
    CHECK_EQ(cnt.last_map, 3 * MB + 4 * KB);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    /* the first chunk was free and too small: given back before mapping */
    CHECK_EQ(st.reserved, 3 * MB + 4 * KB);
    CHECK_EQ(cnt.unmaps, 1);
    CHECK_EQ(st.grows, 1u);
    /* a used chunk stays */
    void *a2 = pa_pool_alloc(p, 100, NULL);
    void *a3 = pa_pool_alloc(p, 2 * MB, NULL);
    CHECK(a2 && a3);
    CHECK_EQ(cnt.unmaps, 1);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    /* POW2: doubling chunks */
    p = make(&cnt, &be, PA_GROW_POW2, 1 * MB);
    a = pa_pool_alloc(p, 1 * MB, NULL);   /* fits the first chunk */
    void *b = pa_pool_alloc(p, 300 * KB, NULL); /* grows: 2 MiB */
    CHECK_EQ(cnt.last_map, 2 * MB);
    void *c = pa_pool_alloc(p, 1800 * KB, NULL); /* grows: 4 MiB */
    CHECK_EQ(cnt.last_map, 4 * MB);
    void *d = pa_pool_alloc(p, 9 * MB, NULL); /* next pow2 of the request: 16 MiB */
    CHECK_EQ(cnt.last_map, 16 * MB);
    CHECK(a && b && c && d);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 4u);
    CHECK_EQ(st.grows, 3u);
    CHECK_EQ(st.reserved, cnt.live_bytes);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
}

static void test_chunks_not_merged(void) {
    /* adjacent mappings must never be coalesced across chunks */
    counting_t cnt;
    pa_backend_t be;
    pa_pool_t *p = make(&cnt, &be, PA_GROW_REQUESTED, 1 * MB);
    void *v[8];
    for (int i = 0; i < 8; i++) v[i] = pa_pool_alloc(p, 1 * MB, NULL);
    for (int i = 0; i < 8; i++) pa_pool_free(p, v[i]);
    pa_pool_reclaim(p);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.largest_free, 1 * MB);
    CHECK_EQ(st.chunks, 8u);
    CHECK(st.frag_external > 0.8); /* 8 separate 1 MiB pieces */
    size_t rel = 0;
    CHECK_EQ(pa_pool_trim(p, 3 * MB, &rel), PA_OK);
    CHECK_EQ(rel, 5 * MB);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 3u);
    CHECK_EQ(cnt.unmaps, 5);
    pa_pool_destroy(p);
}

static pa_pool_t *make_default(int growth, size_t limit) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.growth = growth;
    cfg.chunk_size = 1 * MB;
    cfg.limit = limit;
    return pa_pool_create(&cfg, NULL);
}

static void test_reservation_contiguous(void) {
    /* default backend: growth extends one reserved range, so new pages
     * merge with the free tail and blocks span former growth steps */
    pa_pool_t *p = make_default(PA_GROW_REQUESTED, 0);
    char *a = pa_pool_alloc(p, 700 * KB, NULL);
    char *b = pa_pool_alloc(p, 2 * MB, NULL); /* 324 KiB tail + 1724 KiB new */
    CHECK(a && b);
    CHECK(b == a + 700 * KB);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 1u);
    CHECK_EQ(st.grows, 1u);
    CHECK_EQ(st.reserved, 2 * MB + 700 * KB);
    memset(b, 7, 2 * MB);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    CHECK_EQ(pa_pool_free(p, b), PA_OK);
    pa_pool_reclaim(p);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.largest_free, st.reserved); /* one free span */
    CHECK_EQ(pa_pool_check(p), 0u);
    char *c = pa_pool_alloc(p, 2 * MB + 700 * KB, NULL);
    CHECK(c == a);
    pa_pool_free(p, c);
    /* trimming gives the free tail back; the range grows again later */
    size_t rel = 0;
    CHECK_EQ(pa_pool_trim(p, 1 * MB, &rel), PA_OK);
    CHECK_EQ(rel, 1 * MB + 700 * KB);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 1 * MB);
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 0u);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    char *d = pa_pool_alloc(p, 3 * MB, NULL);
    CHECK(d == a); /* the same range, committed again */
    CHECK_EQ(d[12345], 0); /* given-back pages read back as zeros */
    memset(d, 1, 3 * MB);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 3 * MB);
    CHECK_EQ(st.chunks, 1u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* 1 if this kernel backs a touched, aligned anonymous range with a huge
 * page on request (THP on, MADV_COLLAPSE known): a probe of our own. */
static int thp_collapse_works(void) {
    size_t span = 4 * MB;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 0;
    char *p = (char *)(((uintptr_t)raw + 2 * MB - 1) & ~(uintptr_t)(2 * MB - 1));
    memset(p, 1, 2 * MB);
    int ok = madvise(p, 2 * MB, 25 /* MADV_COLLAPSE */) == 0;
    munmap(raw, span);
    return ok;
}

/* kB of huge pages in the mapping that holds `addr` (/proc/self/smaps). */
static long huge_kb_at(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        } else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

/* A default-backend pool past 16 MiB committed, 600 KiB blocks b[0..n)
 * each filled with its index + 1. */
static pa_pool_t *grown_pool(int huge, unsigned char **b, int n) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.huge_pages = huge;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    for (int i = 0; i < n; i++) {
        b[i] = pa_pool_alloc(p, 600 * KB, NULL);
        CHECK(b[i] != NULL);
        memset(b[i], i + 1, 600 * KB);
    }
    return p;
}

static void test_reservation_huge_pages(void) {
    /* with huge_pages, a heap past 16 MiB committed gets transparent huge
     * pages: the range is 2 MiB aligned, the segments growth completes
     * are collapsed (their contents kept), a trim that cuts one and the
     * growth after it stay consistent; without it (the default), none */
    enum { N = 48 };
    unsigned char *b[N];
    int thp = thp_collapse_works();
    pa_pool_t *p = grown_pool(0, b, N);
    CHECK((uintptr_t)b[0] % (2 * MB) == 0);
    if (thp) CHECK_EQ(huge_kb_at(b[0]), 0);
    pa_pool_destroy(p);
    p = grown_pool(1, b, N);
    CHECK((uintptr_t)b[0] % (2 * MB) == 0); /* the range's base */
    int intact = 1;
    for (int i = 0; i < N; i++)
        if (b[i][0] != i + 1 || b[i][600 * KB - 1] != i + 1 || b[i][300 * KB] != i + 1) intact = 0;
    CHECK(intact);
    if (thp) CHECK(huge_kb_at(b[0]) >= 2048);
    CHECK_EQ(pa_pool_check(p), 0u);
    for (int i = 10; i < N; i++) pa_pool_free(p, b[i]);
    size_t rel = 0;
    CHECK_EQ(pa_pool_trim(p, 6 * MB + 100 * KB, &rel), PA_OK); /* mid-segment */
    CHECK(rel > 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    for (int i = 10; i < N; i++) {
        b[i] = pa_pool_alloc(p, 600 * KB, NULL);
        CHECK(b[i] != NULL);
        memset(b[i], i + 1, 600 * KB);
    }
    intact = 1;
    for (int i = 0; i < N; i++)
        if (b[i][0] != i + 1 || b[i][600 * KB - 1] != i + 1) intact = 0;
    CHECK(intact);
    CHECK_EQ(pa_pool_check(p), 0u);
    for (int i = 0; i < N; i++) pa_pool_free(p, b[i]);
    pa_pool_destroy(p);
}

static void test_reservation_pow2_and_limit(void) {
    /* POW2 inside the range: the committed size doubles, one chunk */
    pa_pool_t *p = make_default(PA_GROW_POW2, 0);
    void *v[5];
    for (int i = 0; i < 5; i++) v[i] = pa_pool_alloc(p, 1 * MB, NULL);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 1u);
    CHECK_EQ(st.reserved, 8 * MB); /* 1 -> 2 -> 4 -> 8 MiB */
    for (int i = 1; i < 5; i++) CHECK((char *)v[i] == (char *)v[i - 1] + 1 * MB);
    for (int i = 0; i < 5; i++) pa_pool_free(p, v[i]);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
    /* a limit bounds the range: reserved never exceeds it */
    p = make_default(PA_GROW_REQUESTED, 4 * MB);
    char *a = pa_pool_alloc(p, 3 * MB, NULL);
    CHECK(a != NULL);
    pa_status_t s = PA_OK;
    CHECK(pa_pool_alloc(p, 2 * MB, &s) == NULL);
    CHECK_EQ(s, PA_ERR_NOMEM);
    char *b = pa_pool_alloc(p, 1 * MB, NULL);
    CHECK(b == a + 3 * MB);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 4 * MB);
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    char *c = pa_pool_alloc(p, 4 * MB, NULL);
    CHECK(c == a);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* A limit lowered below the reserved range still bounds growth inside it. */
static void test_reservation_respects_a_lowered_limit(void) {
    pa_pool_t *p = make_default(PA_GROW_REQUESTED, 16 * MB);
    char *a = pa_pool_alloc(p, 1 * MB, NULL);
    CHECK(a != NULL);
    CHECK_EQ(pa_pool_set_limit(p, 4 * MB), PA_OK);
    char *b = pa_pool_alloc(p, 2 * MB, NULL);
    CHECK(b != NULL);
    pa_status_t s = PA_OK;
    CHECK(pa_pool_alloc(p, 2 * MB, &s) == NULL); /* 5 MiB > 4 */
    CHECK_EQ(s, PA_ERR_NOMEM);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK(st.reserved <= 4 * MB);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_reservation_full_then_chunks(void) {
    /* the range is `limit` bytes; raising the limit later grows in
     * separate chunks beyond it */
    pa_pool_t *p = make_default(PA_GROW_REQUESTED, 2 * MB);
    char *a = pa_pool_alloc(p, 2 * MB, NULL);
    CHECK(a != NULL);
    CHECK(pa_pool_alloc(p, 1 * MB, NULL) == NULL);
    CHECK_EQ(pa_pool_set_limit(p, 16 * MB), PA_OK);
    char *b = pa_pool_alloc(p, 3 * MB, NULL);
    CHECK(b != NULL && (b >= a + 2 * MB || b + 3 * MB <= a));
    memset(b, 2, 3 * MB);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.chunks, 2u); /* the range and one separate chunk */
    CHECK_EQ(st.reserved, 5 * MB);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_free(p, a);
    pa_pool_free(p, b);
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.reserved, 0u);
    CHECK_EQ(st.chunks, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    char *c = pa_pool_alloc(p, 2 * MB, NULL); /* back inside the range */
    CHECK(c == a);
    pa_pool_destroy(p);
}

/* Large requests that keep missing the caches (every one bigger than any
 * block cached) stop caching: a freed large block goes straight back to
 * the heap; repeats of one size bring the caching back (a probe is cached
 * every 64 frees, and its hit earns credit).  pa_pool_check after every
 * step. */
static void test_large_cache_bypass_and_return(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    pa_pool_stats_t st;
    size_t broken = 0, cached_after_free = 0;
    for (int i = 0; i < 400; i++) {
        void *a = pa_pool_alloc(p, 20 * KB + (size_t)i * 4 * KB, NULL);
        CHECK(a != NULL);
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        pa_pool_stats(p, &st);
        if (i >= 300 && st.zone[PA_ZONE_LARGE].cached) cached_after_free++;
        broken += pa_pool_check(p);
    }
    /* 256 misses used the credit up: of the last 100 frees only the
     * probes (1 in 64) stayed cached */
    CHECK(cached_after_free <= 4);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].live, 0u);
    uint64_t hits0 = st.zone[PA_ZONE_LARGE].cache_hits;
    for (int i = 0; i < 400; i++) {
        void *a = pa_pool_alloc(p, 100 * KB, NULL);
        CHECK(a != NULL);
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        broken += pa_pool_check(p);
    }
    pa_pool_stats(p, &st);
    /* caching is back: most of the repeats came from the cache */
    CHECK(st.zone[PA_ZONE_LARGE].cache_hits - hits0 >= 300);
    CHECK(st.zone[PA_ZONE_LARGE].cached >= 100 * KB);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(broken, 0u);
    pa_pool_destroy(p);
}

/* A large block the page heap places (no cache hit) is exactly its pages,
 * also when the best fit is a free span one page larger (split, not handed
 * out whole): random sizes and frees, so that the large caches go quiet
 * and the fast paths place most blocks. */
static void test_large_heap_blocks_exact(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    enum { N = 64 };
    void *v[N] = {0};
    unsigned long long r = 7;
    size_t wrong = 0, broken = 0, placed = 0;
    pa_pool_stats_t st;
    for (int i = 0; i < 4000; i++) {
        int k = (int)(pa_rand(&r) % N);
        if (v[k]) CHECK_EQ(pa_pool_free(p, v[k]), PA_OK);
        size_t n = 16 * KB + 1 + pa_rand(&r) % (1000 * KB);
        pa_pool_stats(p, &st);
        uint64_t hits = st.zone[PA_ZONE_LARGE].cache_hits;
        v[k] = pa_pool_alloc(p, n, NULL);
        CHECK(v[k] != NULL);
        pa_pool_stats(p, &st);
        if (st.zone[PA_ZONE_LARGE].cache_hits == hits) {
            placed++;
            wrong += pa_pool_block_size(p, v[k]) != ((n + 4095) & ~(size_t)4095);
        }
        if (i % 400 == 0) broken += pa_pool_check(p);
    }
    CHECK(placed > 3000);
    CHECK_EQ(wrong, 0u);
    for (int k = 0; k < N; k++)
        if (v[k]) CHECK_EQ(pa_pool_free(p, v[k]), PA_OK);
    CHECK_EQ(broken, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.requested, 0u);
    pa_pool_destroy(p);
}

/* The paths around the large fast ones: frees that the fast path leaves
 * to the general one (a pool ending steps on its own; a large block that
 * a probe left cached, freed again) keep the counts exact and still tell
 * a double free. */
static void test_large_bypass_general_paths(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.auto_step = 1;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    pa_pool_stats_t st;
    size_t broken = 0;
    for (int i = 0; i < 400; i++) {
        /* sizes that never come back: the caches miss, the credit runs out */
        void *a = pa_pool_alloc(p, 20 * KB + (size_t)i * 8 * KB, NULL);
        void *b = pa_pool_alloc(p, 24 * KB + (size_t)i * 8 * KB, NULL);
        CHECK(a != NULL && b != NULL);
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        CHECK_EQ(pa_pool_free(p, b), PA_OK);
        broken += pa_pool_check(p);
    }
    pa_pool_stats(p, &st);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].live, 0u);
    CHECK_EQ(st.zone[PA_ZONE_LARGE].requested, 0u);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(broken, 0u);
    pa_pool_destroy(p);

    p = pa_pool_create(NULL, NULL);
    size_t double_frees = 0;
    for (int i = 0; i < 600; i++) {
        void *a = pa_pool_alloc(p, 20 * KB + (size_t)(i % 300) * 4 * KB, NULL);
        CHECK(a != NULL);
        pa_pool_stats(p, &st);
        size_t cached = st.zone[PA_ZONE_LARGE].cached;
        CHECK_EQ(pa_pool_free(p, a), PA_OK);
        pa_pool_stats(p, &st);
        if (i >= 300 && st.zone[PA_ZONE_LARGE].cached > cached) { /* a probe kept it */
            CHECK_EQ(pa_pool_free(p, a), PA_ERR_DOUBLE_FREE);
            double_frees++;
        }
        broken += pa_pool_check(p);
    }
    CHECK(double_frees >= 2);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(broken, 0u);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_page_granularity);
    RUN(test_best_fit_and_coalesce);
    RUN(test_cache_cut_to_size);
    RUN(test_cache_never_hands_out_a_smaller_block);
    RUN(test_split_leaves_no_slack);
    RUN(test_growth_policies);
    RUN(test_chunks_not_merged);
    RUN(test_reservation_contiguous);
    RUN(test_reservation_huge_pages);
    RUN(test_reservation_pow2_and_limit);
    RUN(test_reservation_respects_a_lowered_limit);
    RUN(test_adjacent_chunks_never_merge);
    RUN(test_reservation_full_then_chunks);
    RUN(test_large_cache_bypass_and_return);
    RUN(test_large_bypass_general_paths);
    RUN(test_large_heap_blocks_exact);
    return pa_test_report();
}
