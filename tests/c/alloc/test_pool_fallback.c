/* test_pool_fallback.c -- a learning pool never costs more than the plain
 * pool.  An idle learned region makes room before the zones grow
 * (_pa_learn_yield_region), so their peaks do not add up; and a pool whose
 * plans do not pay falls back to the plain pool (judge()): the counter,
 * the plans and region given back, nothing served from a plan during the
 * plain pool's turn, learning afresh after it, a healthy loop never
 * falling back, and a fuzz of steps that mostly diverge with blocks kept
 * across the fallback.  Every block is filled with a pattern when handed
 * out and verified when freed; live blocks are checked for overlap after
 * every step. */
#define PA_WORLD_SLOTS 16
#include "pool_world.h"

#define JUDGE 64 /* PA_LEARN_JUDGE */

/* A learning pool that plans these steps: slabs to 4 KiB, so their 5-9 KB
 * blocks are buddy blocks (a step with at most one block above the slab
 * sizes is left to the zones: test_pool_learn.c, test_small_steps). */
static pa_pool_t *pool_new(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 4096;
    return pa_pool_create(&cfg, NULL);
}

/* One step: three blocks, the third `last` bytes; all freed. */
static void step3(world_t *w, size_t last) {
    A(w, 0, 4000);
    A(w, 1, 9000);
    F(w, 0);
    A(w, 2, last);
    F(w, 1);
    F(w, 2);
    pa_pool_step(w->pool);
}

/* Two identical steps make a plan; every later step starts like it and
 * diverges at its third request: learning never pays, the pool falls back
 * at the first judgement, gives the plans and the region back, and serves
 * nothing from a plan during its turn. */
static void test_fallback_on_misses(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    step3(&w, 5000);
    step3(&w, 5000);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK_EQ(s.learn_fallbacks, 0u);
    int i = 0;
    for (; i < 2 * JUDGE && !stats(p).learn_fallbacks; i++) {
        step3(&w, 6000 + 64 * (size_t)i); /* never twice the same */
        world_ok(&w);
    }
    s = stats(p);
    CHECK_EQ(s.learn_fallbacks, 1u);
    CHECK(i <= JUDGE);
    CHECK_EQ(s.learned_sequences, 0u);
    CHECK_EQ(s.planned_bytes, 0u);
    uint64_t hits = s.plan_hits, misses = s.plan_misses;
    /* the plain pool's turn: the sequence that was planned is not served */
    for (int k = 0; k < JUDGE - 4; k++) {
        step3(&w, 5000);
        world_ok(&w);
    }
    s = stats(p);
    CHECK_EQ(s.plan_hits, hits);
    CHECK_EQ(s.plan_misses, misses);
    CHECK_EQ(s.learned_sequences, 0u);
    /* after it, learning starts afresh and pays */
    for (int k = 0; k < 16; k++) step3(&w, 5000);
    s = stats(p);
    CHECK(s.plan_hits > hits);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK_EQ(s.learn_fallbacks, 1u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* The window is PA_LEARN_JUDGE step marks (pyarena.h, learn_fallbacks:
 * "over 64 step marks") counted after the mark that starts learning: with
 * every step after the plan diverging from it, mark 1 + JUDGE falls back
 * and none before it does. */
static void test_fallback_at_the_end_of_the_window(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p); /* mark 1: learning starts */
    step3(&w, 5000); /* marks 2 and 3: the plan */
    step3(&w, 5000);
    CHECK_EQ(stats(p).learned_sequences, 1u);
    for (int mark = 4; mark < 1 + JUDGE; mark++) {
        step3(&w, 6000 + 64 * (size_t)mark);
        CHECK_EQ(stats(p).learn_fallbacks, 0u);
    }
    step3(&w, 5000 + 64 * (size_t)(1 + JUDGE)); /* mark 1 + JUDGE */
    CHECK_EQ(stats(p).learn_fallbacks, 1u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A plan made at the last mark of a window has served nothing yet: the
 * judgement does not count it against learning (the floor of lost
 * steps), and the plan serves the steps after it. */
static void test_new_plan_at_window_end(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);                      /* learning starts */
    for (int i = 0; i < JUDGE - 2; i++) pa_pool_step(p); /* empty steps */
    step3(&w, 5000);
    step3(&w, 5000);                      /* planned at the window's last mark */
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK_EQ(s.learn_fallbacks, 0u);
    for (int i = 0; i < 4; i++) step3(&w, 5000);
    s = stats(p);
    CHECK_EQ(s.plan_steps, 4u);
    CHECK_EQ(s.learn_fallbacks, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A loop of eight signatures (batch 1..8): eight plans made and a miss at
 * most per new signature, then every step served -- it never falls back,
 * and the one region is the largest plan's, not the sum. */
static void test_no_fallback_when_paying(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int i = 0; i < 8 * JUDGE; i++) {
        size_t b = 1 + (size_t)(i % 8);
        A(&w, 0, 24576 * b);
        A(&w, 1, 65536 * b);
        F(&w, 0);
        A(&w, 2, 32768 * b);
        F(&w, 1);
        A(&w, 3, 2048 * b);
        F(&w, 2);
        F(&w, 3);
        pa_pool_step(p);
        world_ok(&w);
    }
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learn_fallbacks, 0u);
    CHECK_EQ(s.learned_sequences, 8u);
    CHECK(s.plan_steps >= 8 * JUDGE - 32);
    /* largest plan: 24 + 64 (+ 32 after the first goes) KiB x 8 */
    CHECK(s.planned_bytes <= (size_t)(24576 + 65536) * 8 + 65536);
    pa_pool_destroy(p);
}

/* A short step that repeats (two blocks: planned and served every time)
 * between big steps that never repeat (40 blocks of new sizes, each
 * recorded and tracked by pointer): no step is lost, but plans serve 2 of
 * every 42 allocations -- learning costs more than it gives, and the pool
 * falls back at the first judgement all the same. */
static void test_fallback_when_plans_serve_few_allocations(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    unsigned long long seed = 7;
    for (int step = 0; step < JUDGE; step++) {
        if (step % 2) {
            for (int i = 0; i < 40; i++) {
                A(&w, 2 + i % 8, 64 + pa_rand(&seed) % 20000);
                if (i % 8 == 7)
                    for (int k = 2; k < 10; k++) F(&w, k);
            }
        } else {
            A(&w, 0, 6000);
            A(&w, 1, 5000);
            F(&w, 0);
            F(&w, 1);
        }
        pa_pool_step(p);
        world_ok(&w);
    }
    pa_pool_stats_t s = stats(p);
    CHECK(s.plan_steps >= JUDGE / 2 - 3); /* the short step was served */
    CHECK_EQ(s.plan_misses, 0u);
    CHECK_EQ(s.learn_fallbacks, 1u);
    CHECK_EQ(s.learned_sequences, 0u); /* dropped */
    CHECK_EQ(s.live, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Random steps that mostly diverge, blocks kept across steps (and so
 * across a fallback), a few repeated sequences: the invariants hold after
 * every step, and the pool falls back and relearns more than once. */
static void test_fallback_fuzz(void) {
    unsigned long long seed = 0xFA11BACCull;
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int step = 0; step < 40 * JUDGE; step++) {
        int phase = (step / (4 * JUDGE)) % 2; /* 0: chaos, 1: a loop */
        int n = 3 + (int)(pa_rand(&seed) % 5);
        for (int i = 0; i < n; i++) {
            size_t sz = phase ? 1000 + 700 * (size_t)i : 64 + pa_rand(&seed) % 30000;
            F(&w, i);
            A(&w, i, sz);
            if (i && (phase || pa_rand(&seed) % 2)) F(&w, i - 1);
        }
        if (phase || pa_rand(&seed) % 3) F(&w, n - 1); /* sometimes kept */
        if (!phase && pa_rand(&seed) % 4 == 0) {
            int k = 12 + (int)(pa_rand(&seed) % 4);
            F(&w, k);
            A(&w, k, 3000);
        }
        if (pa_rand(&seed) % 5 == 0) F(&w, 12 + (int)(pa_rand(&seed) % 4));
        pa_pool_step(p);
        world_ok(&w);
    }
    for (int i = 0; i < SLOTS; i++) F(&w, i);
    pa_pool_stats_t s = stats(p);
    CHECK(s.learn_fallbacks >= 2);
    CHECK(s.plan_steps > 0);
    CHECK_EQ(s.live, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A served loop (region of ~1.5 MiB), then a step no plan serves that
 * needs 3 MiB of the zones: the region goes back first (planned_bytes 0
 * during that step), so the peak reserved is about the larger of the two,
 * not their sum; the next step end maps it again and the loop is served. */
static void test_region_yields(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int i = 0; i < 6; i++) {
        A(&w, 0, 1 << 20);
        A(&w, 1, 512 << 10);
        F(&w, 0);
        F(&w, 1);
        pa_pool_step(p);
    }
    pa_pool_stats_t s = stats(p);
    CHECK(s.planned_bytes >= (size_t)(1536 << 10));
    CHECK_EQ(s.plan_steps, 4u);
    pa_pool_trim(p, 0, NULL);
    pa_pool_reset_peak(p);
    A(&w, 2, 3 << 20); /* a novel step: the zones grow */
    CHECK_EQ(stats(p).planned_bytes, 0u);
    F(&w, 2);
    pa_pool_step(p);
    world_ok(&w);
    s = stats(p);
    CHECK(s.planned_bytes >= (size_t)(1536 << 10));
    CHECK(s.peak_reserved < (size_t)(3 << 20) + (1536 << 10));
    uint64_t served = s.plan_steps;
    for (int i = 0; i < 3; i++) {
        A(&w, 0, 1 << 20);
        A(&w, 1, 512 << 10);
        F(&w, 0);
        F(&w, 1);
        pa_pool_step(p);
    }
    CHECK_EQ(stats(p).plan_steps, served + 3);
    CHECK(stats(p).reserved < (size_t)(3 << 20)); /* the zones' growth went back */
    world_ok(&w);
    pa_pool_destroy(p);
}

/* The same loop with a step no plan serves every 50 steps (a loop's
 * first step, say, different each time): the first time, the region is given back
 * and the zones' growth trimmed after it, as above; once that memory has
 * come back, a periodic need keeps it -- the zones stop growing and
 * trimming every period (each round trip faulted 3 MiB in again: the
 * learning pool was 5x slower than the plain pool on such a loop). */
static void test_periodic_need_keeps_its_memory(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    uint64_t grows = 0, trims = 0;
    for (int step = 0; step < 1500; step++) {
        if (step % 50 == 49) { /* never the same twice: not learned */
            A(&w, 2, (3 << 20) - (size_t)(step / 50) * 8192);
            F(&w, 2);
        } else {
            A(&w, 0, 1 << 20);
            A(&w, 1, 512 << 10);
            F(&w, 0);
            F(&w, 1);
        }
        pa_pool_step(p);
        world_ok(&w);
        if (step == 119) { /* the first trim came and went */
            grows = stats(p).grows;
            trims = stats(p).trims;
        }
    }
    pa_pool_stats_t s = stats(p);
    CHECK(s.plan_steps > 1400);
    CHECK_EQ(s.grows, grows); /* nothing mapped again in the last 1,380 steps */
    CHECK_EQ(s.trims, trims);
    CHECK(s.planned_bytes >= (size_t)(1536 << 10)); /* the loop still served */
    CHECK(s.peak_reserved < (size_t)(6 << 20));
    world_ok(&w);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_region_yields);
    RUN(test_periodic_need_keeps_its_memory);
    RUN(test_fallback_on_misses);
    RUN(test_fallback_at_the_end_of_the_window);
    RUN(test_new_plan_at_window_end);
    RUN(test_no_fallback_when_paying);
    RUN(test_fallback_when_plans_serve_few_allocations);
    RUN(test_fallback_fuzz);
    return pa_test_report();
}
