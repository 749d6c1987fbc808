/* test_pool_fuzz.c -- random operation sequences on the work pool.
 *
 * Sizes from 1 B to several MiB (log-uniform), every block filled with a
 * pattern derived from its address and checked until it is freed, and
 * pa_pool_check() == 0 after every step, for each mode and growth policy. */
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

#define SLOTS 96

typedef struct {
    unsigned char *p;
    size_t n;
    unsigned char tag;
} slot_t;

static unsigned char pat(const slot_t *s, size_t i) {
    return (unsigned char)(s->tag + i * 7 + (i >> 8));
}

static void fill(slot_t *s) {
    /* write the whole block sparsely: first/last 256 bytes and a stride */
    size_t step = s->n > 4096 ? 997 : 1;
    for (size_t i = 0; i < s->n; i += (i < 256 || i + 256 >= s->n) ? 1 : step)
        s->p[i] = pat(s, i);
}

static int verify(const slot_t *s) {
    size_t step = s->n > 4096 ? 997 : 1;
    for (size_t i = 0; i < s->n; i += (i < 256 || i + 256 >= s->n) ? 1 : step)
        if (s->p[i] != pat(s, i)) return 0;
    return 1;
}

static size_t rand_size(unsigned long long *r, size_t max_log2) {
    size_t lg = pa_rand(r) % (max_log2 + 1);
    size_t lo = (size_t)1 << lg;
    return lo + pa_rand(r) % lo - (lg == 0 ? 0 : 0);
}

typedef struct {
    size_t live, bytes, requested;
    int bad;
} walk_t;

static int walker(const pa_pool_block_t *b, void *ctx) {
    walk_t *w = ctx;
    if (b->state == PA_BLOCK_LIVE) {
        w->live++;
        w->bytes += b->size;
        w->requested += b->requested;
    }
    if (b->state < 0 || b->state > 2 || b->size == 0) w->bad++;
    return 0;
}

static void run_cfg(int mode, int growth, size_t limit, unsigned long long seed, int steps,
                    int marks) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = mode;
    cfg.growth = growth;
    cfg.limit = limit;
    cfg.cache_budget = (size_t)4 << 20;
    if (growth == PA_GROW_NONE) cfg.chunk_size = limit;
    if (marks) {
        /* watermarks low enough to trim often; decommitted spares */
        cfg.high_watermark = (size_t)12 << 20;
        cfg.low_watermark = (size_t)4 << 20;
        cfg.release = PA_RELEASE_DECOMMIT;
    }
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    if (!p) return;
    slot_t s[SLOTS];
    memset(s, 0, sizeof s);
    unsigned long long r = seed;
    size_t fails = 0, broken_steps = 0, pattern_bad = 0, stat_bad = 0;
    for (int step = 0; step < steps; step++) {
        size_t i = pa_rand(&r) % SLOTS;
        unsigned op = (unsigned)(pa_rand(&r) % 100);
        if (op < 3) {
            CHECK_EQ(pa_pool_reclaim(p), PA_OK);
        } else if (op < 4) {
            size_t rel;
            CHECK_EQ(pa_pool_trim(p, 0, &rel), PA_OK);
        } else if (op < 10 && s[i].p) {
            /* realloc keeps the prefix */
            size_t n = rand_size(&r, 21);
            pa_status_t st;
            unsigned char *q = pa_pool_realloc(p, s[i].p, n, &st);
            if (q) {
                size_t keep = n < s[i].n ? n : s[i].n;
                for (size_t k = 0; k < keep && k < 256; k++)
                    if (q[k] != pat(&s[i], k)) pattern_bad++;
                s[i].p = q;
                s[i].n = n;
                s[i].tag = (unsigned char)pa_rand(&r);
                fill(&s[i]);
            } else {
                CHECK_EQ(st, PA_ERR_NOMEM);
                CHECK(verify(&s[i]));
            }
        } else if (s[i].p) {
            if (!verify(&s[i])) pattern_bad++;
            CHECK(pa_pool_block_size(p, s[i].p) >= s[i].n);
            CHECK_EQ(pa_pool_free(p, s[i].p), PA_OK);
            if (op < 20) {
                /* DOUBLE_FREE while cached; a flushed block may have been
                 * merged into a bigger free one: then FOREIGN */
                pa_status_t again = pa_pool_free(p, s[i].p);
                CHECK(again == PA_ERR_DOUBLE_FREE || again == PA_ERR_FOREIGN);
            }
            if (op >= 20 && op < 25 && s[i].n > 64)
                CHECK(pa_pool_free(p, s[i].p + 8) != PA_OK);
            s[i].p = NULL;
        } else {
            size_t n = op < 50 ? pa_rand(&r) % 100 : rand_size(&r, op < 95 ? 20 : 23);
            pa_status_t st;
            unsigned char *q = pa_pool_alloc(p, n, &st);
            if (!q) {
                CHECK(limit != 0);
                CHECK_EQ(st, PA_ERR_NOMEM);
                fails++;
            } else {
                CHECK_EQ(st, PA_OK);
                CHECK(((uintptr_t)q & 63) == 0);
                CHECK(pa_pool_block_size(p, q) >= n);
                s[i].p = q;
                s[i].n = n;
                s[i].tag = (unsigned char)pa_rand(&r);
                fill(&s[i]);
            }
        }
        if (pa_pool_check(p) != 0) {
            if (!broken_steps) fprintf(stderr, "mode %d growth %d: broken at step %d op %u\n", mode, growth, step, op);
            broken_steps++;
        }
        pa_pool_stats_t st;
        pa_pool_stats(p, &st);
        size_t live = 0, req = 0;
        for (size_t k = 0; k < SLOTS; k++)
            if (s[k].p) {
                live++;
                req += s[k].n;
            }
        if (st.live != live || st.requested != req) stat_bad++;
        if (limit && st.reserved > limit) stat_bad++;
        if (st.allocated + st.cached > st.reserved) stat_bad++;
    }
    CHECK_EQ(broken_steps, 0u);
    CHECK_EQ(pattern_bad, 0u);
    CHECK_EQ(stat_bad, 0u);
    walk_t w = {0, 0, 0, 0};
    CHECK_EQ(pa_pool_walk(p, walker, &w), PA_OK);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(w.live, st.live);
    CHECK_EQ(w.bytes, st.allocated);
    CHECK_EQ(w.requested, st.requested);
    CHECK_EQ(w.bad, 0);
    for (size_t k = 0; k < SLOTS; k++)
        if (s[k].p) CHECK_EQ(pa_pool_free(p, s[k].p), PA_OK);
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    pa_pool_stats(p, &st);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.allocated, 0u);
    CHECK_EQ(st.cached, 0u);
    if (growth != PA_GROW_NONE) CHECK_EQ(st.reserved, 0u);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_destroy(p), PA_OK);
    (void)fails;
}

static void run(int mode, int growth, size_t limit, unsigned long long seed, int steps) {
    run_cfg(mode, growth, limit, seed, steps, 0);
}

static void test_fuzz_watermarks(void) {
    int modes[] = {PA_POOL_HYBRID, PA_POOL_SLAB_ONLY, PA_POOL_BUDDY_ONLY};
    for (int m = 0; m < 3; m++) {
        run_cfg(modes[m], PA_GROW_REQUESTED, 0, 0x31337ull + (unsigned)m, 2000, 1);
        run_cfg(modes[m], PA_GROW_POW2, (size_t)40 << 20, 0x4242ull + (unsigned)m, 2000, 1);
    }
}

static void test_fuzz_modes(void) {
    int modes[] = {PA_POOL_HYBRID, PA_POOL_SLAB_ONLY, PA_POOL_BUDDY_ONLY};
    int growths[] = {PA_GROW_POW2, PA_GROW_REQUESTED};
    for (int m = 0; m < 3; m++)
        for (int g = 0; g < 2; g++)
            run(modes[m], growths[g], 0, 0x1234567ull + (unsigned)(m * 7 + g), 3000);
}

static void test_fuzz_limited(void) {
    int modes[] = {PA_POOL_HYBRID, PA_POOL_SLAB_ONLY, PA_POOL_BUDDY_ONLY};
    for (int m = 0; m < 3; m++) {
        run(modes[m], PA_GROW_REQUESTED, (size_t)24 << 20, 0xabcdefull + (unsigned)m, 3000);
        run(modes[m], PA_GROW_POW2, (size_t)16 << 20, 0x5555ull + (unsigned)m, 2000);
        run(modes[m], PA_GROW_NONE, (size_t)32 << 20, 0x7777ull + (unsigned)m, 2000);
    }
}

int main(void) {
    RUN(test_fuzz_modes);
    RUN(test_fuzz_limited);
    RUN(test_fuzz_watermarks);
    return pa_test_report();
}
