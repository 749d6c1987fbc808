/* test_pool_learn.c -- the pool's learned steps (pool_learn.c):
 * pa_pool_step, planned offsets after warm-up, divergence, relearning,
 * several sequences in one region, carries across a step, frees and
 * checks of planned blocks, the policy switches.  Every block is filled
 * with a pattern when handed out and verified when freed; live blocks are
 * checked for overlap after every operation. */
#include "counting_backend.h"
#include "pool_world.h"

/* The learning pools here: slabs to 1 KiB, so the models' blocks are
 * mostly buddy blocks (a step with at most one block above the slab sizes
 * is left to the zones: test_small_steps). */
#define SLAB_MAX 1024

static pa_pool_t *pool_new(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    return pa_pool_create(&cfg, NULL);
}

/* A small "model": x -> a -> b (x freed) -> c with a scratch, all freed
 * by the end; `scale` varies the sizes. */
static void model(world_t *w, size_t scale) {
    A(w, 0, 1000 * scale);  /* input */
    A(w, 1, 3000 * scale);  /* a */
    A(w, 2, 500 * scale);   /* scratch */
    F(w, 2);
    F(w, 0);
    A(w, 3, 2000 * scale);  /* b */
    F(w, 1);
    A(w, 4, 4000 * scale);  /* c */
    F(w, 3);
    F(w, 4);
}

/* `times` steps of `fn`, each ended with a mark and its data checked. */
static void steps_ok(world_t *w, void (*fn)(world_t *, size_t), size_t scale, int times) {
    for (int r = 0; r < times; r++) {
        fn(w, scale);
        CHECK_EQ(pa_pool_step(w->pool), PA_OK);
        world_ok(w);
    }
}

static void test_learn_and_hit(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    CHECK_EQ(pa_pool_step(p), PA_OK); /* first mark: recording starts */
    model(&w, 1);
    CHECK_EQ(pa_pool_step(p), PA_OK);
    CHECK_EQ(stats(p).learned_sequences, 0u); /* seen once */
    model(&w, 1);
    CHECK_EQ(pa_pool_step(p), PA_OK); /* seen twice: planned */
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK(s.planned_bytes >= 4000 + 2048);   /* c and b overlap in time */
    CHECK(s.planned_bytes < 10500);          /* not the naive sum */
    CHECK_EQ(s.plan_hits, 0u);
    uint64_t allocs = s.allocs;
    steps_ok(&w, model, 1, 5);
    s = stats(p);
    CHECK_EQ(s.plan_hits, 25u);
    CHECK_EQ(s.plan_steps, 5u);
    CHECK_EQ(s.plan_misses, 0u);
    CHECK_EQ(s.allocs - allocs, 25u);
    CHECK_EQ(s.live, 0u);
    CHECK_EQ(s.requested, 0u);
    CHECK_EQ(s.planned_live, 0u);
    CHECK(s.reserved >= s.planned_bytes);
    CHECK(s.peak_reserved >= s.reserved);
    world_ok(&w);
    CHECK_EQ(pa_pool_reset_peak(p), PA_OK); /* the region stays in the peak */
    CHECK_EQ(stats(p).peak_reserved, stats(p).reserved);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* The same model with buddy blocks (slab_max 4 KiB: its 6000 and 8000
 * byte blocks are 8 KiB buddy blocks): their frees, taken by the buddy
 * fast path, are recorded while a step is learned, so the step is planned
 * and then served by the plan. */
static void test_learn_buddy_blocks(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 4096;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    CHECK_EQ(pa_pool_step(p), PA_OK);
    steps_ok(&w, model, 2, 2);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    uint64_t buddy = s.zone[PA_ZONE_BUDDY].allocs;
    CHECK_EQ(buddy, 4u); /* two per step */
    steps_ok(&w, model, 2, 5);
    s = stats(p);
    CHECK_EQ(s.plan_hits, 25u);
    CHECK_EQ(s.plan_misses, 0u);
    CHECK_EQ(s.zone[PA_ZONE_BUDDY].allocs, buddy); /* the plan serves them now */
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* The planned blocks are where the plan says: inside one region, and the
 * same addresses every step. */
static void test_same_addresses(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int r = 0; r < 2; r++) {
        model(&w, 1);
        pa_pool_step(p);
    }
    unsigned char *seen[2][5];
    for (int r = 0; r < 2; r++) {
        int k = 0;
        A(&w, 0, 1000);
        seen[r][k++] = w.ptr[0];
        A(&w, 1, 3000);
        seen[r][k++] = w.ptr[1];
        A(&w, 2, 500);
        seen[r][k++] = w.ptr[2];
        F(&w, 2);
        F(&w, 0);
        A(&w, 3, 2000);
        seen[r][k++] = w.ptr[3];
        F(&w, 1);
        A(&w, 4, 4000);
        seen[r][k++] = w.ptr[4];
        F(&w, 3);
        F(&w, 4);
        pa_pool_step(p);
    }
    pa_pool_stats_t s = stats(p);
    unsigned char *lo = seen[0][0], *hi = seen[0][0];
    for (int k = 0; k < 5; k++) {
        CHECK(seen[0][k] == seen[1][k]);
        if (seen[0][k] < lo) lo = seen[0][k];
        if (seen[0][k] > hi) hi = seen[0][k];
    }
    CHECK((size_t)(hi - lo) < s.planned_bytes);
    CHECK_EQ(s.plan_hits, 10u);
    world_ok(&w);
    pa_pool_destroy(p);
}

static void warm(world_t *w, void (*fn)(world_t *, size_t), size_t scale, int times) {
    for (int r = 0; r < times; r++) {
        fn(w, scale);
        pa_pool_step(w->pool);
    }
}

/* Another size mid-step: the rest of the step comes from the zones, the
 * blocks already handed out stay valid, the plan stays. */
static void test_divergence_size(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    uint64_t hits = stats(p).plan_hits;
    CHECK(hits > 0);
    hits = stats(p).plan_hits;
    A(&w, 0, 1000);
    A(&w, 1, 3000);
    A(&w, 2, 777);           /* diverges */
    A(&w, 5, 3000);          /* extra block: must not land on a or x */
    F(&w, 2);
    F(&w, 0);
    A(&w, 3, 2000);
    F(&w, 1);
    A(&w, 4, 4000);
    F(&w, 3);
    world_ok(&w);
    F(&w, 4);
    F(&w, 5);
    pa_pool_step(p);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.plan_hits - hits, 2u);
    CHECK_EQ(s.plan_misses, 1u);
    CHECK_EQ(s.learned_sequences, 1u);
    model(&w, 1);               /* the plan serves again */
    pa_pool_step(p);
    CHECK_EQ(stats(p).plan_hits - s.plan_hits, 5u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A free out of order: b's planned place overlaps x, which is still live,
 * so b must not be served from the plan. */
static void test_divergence_order(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    A(&w, 0, 1000);
    A(&w, 1, 3000);
    A(&w, 2, 500);
    F(&w, 2);
    /* x (slot 0) is not freed here */
    A(&w, 3, 2000);
    A(&w, 4, 4000);
    world_ok(&w);
    F(&w, 0);
    F(&w, 1);
    F(&w, 3);
    F(&w, 4);
    pa_pool_step(p);
    CHECK_EQ(stats(p).plan_misses, 1u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A planned block kept past the step end blocks the region for the next
 * step (served by the zones), and everything resumes once it is freed. */
static void test_block_kept_then_freed(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    A(&w, 10, 1000);
    A(&w, 11, 3000);
    pa_pool_step(p);
    uint64_t hits = stats(p).plan_hits;
    model(&w, 1);
    world_ok(&w);
    pa_pool_step(p);
    CHECK_EQ(stats(p).plan_hits, hits); /* region busy: zones */
    F(&w, 10);
    F(&w, 11);
    model(&w, 1);
    pa_pool_step(p);
    model(&w, 1);
    pa_pool_step(p);
    CHECK(stats(p).plan_hits >= hits + 5);
    CHECK_EQ(stats(p).planned_live, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Repeated divergence relearns: a new sequence seen twice is planned as
 * a second sequence, in the same region. */
static void test_relearn(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    CHECK_EQ(stats(p).learned_sequences, 1u);
    warm(&w, model, 2, 3);      /* other sizes (another first size) */
    CHECK_EQ(stats(p).learned_sequences, 2u);
    uint64_t hits = stats(p).plan_hits;
    warm(&w, model, 2, 2);
    warm(&w, model, 1, 2);
    CHECK_EQ(stats(p).plan_hits - hits, 20u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Same first request, different continuation: the divergent step is
 * learned as its own sequence and the two alternate without misses once
 * the predictor has seen the alternation. */
static void model_b(world_t *w, size_t scale) {
    A(w, 0, 1000 * scale);
    A(w, 1, 6000 * scale);
    F(w, 0);
    A(w, 2, 1500 * scale);
    F(w, 1);
    F(w, 2);
}

static void test_alternating(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int r = 0; r < 6; r++) {
        model(&w, 1);
        pa_pool_step(p);
        model_b(&w, 1);
        pa_pool_step(p);
    }
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 2u);
    uint64_t misses = s.plan_misses, steps = s.plan_steps;
    for (int r = 0; r < 4; r++) {
        model(&w, 1);
        pa_pool_step(p);
        model_b(&w, 1);
        pa_pool_step(p);
    }
    s = stats(p);
    CHECK_EQ(s.plan_misses, misses);
    CHECK_EQ(s.plan_steps - steps, 8u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Two sequences with the same first size whose first block dies before
 * the second request: the first block comes from the zones, the second
 * request picks the plan, and the early free still counts for it. */
static void early_a(world_t *w, size_t scale) {
    (void)scale;
    A(w, 0, 2000);
    F(w, 0);
    A(w, 1, 3000);
    A(w, 2, 1000);
    F(w, 1);
    F(w, 2);
}

static void early_b(world_t *w, size_t scale) {
    (void)scale;
    A(w, 0, 2000);
    F(w, 0);
    A(w, 1, 5000);
    F(w, 1);
}

static void test_same_first_size(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, early_a, 1, 3);
    warm(&w, early_b, 1, 3);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 2u);
    uint64_t misses = s.plan_misses, steps = s.plan_steps, hits = s.plan_hits;
    unsigned long long seed = 7;
    for (int r = 0; r < 20; r++) warm(&w, pa_rand(&seed) % 2 ? early_a : early_b, 1, 1);
    s = stats(p);
    CHECK_EQ(s.plan_misses, misses);
    CHECK_EQ(s.plan_steps - steps, 20u);
    CHECK(s.plan_hits - hits >= 20u); /* all but each step's first block */
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Same first size, and the first block still lives when the second
 * request comes: both plans place it at one offset, so it is served from
 * the region at once (on the plan the predictor expects) and its record
 * moves to the plan the second request picks.  Nothing comes from the
 * zones after warm-up, and the shared region stays the larger plan's. */
static unsigned char *wide_first; /* where the last first block went */

static void wide_a(world_t *w, size_t scale) {
    (void)scale;
    wide_first = A(w, 0, 3000);
    A(w, 1, 8000);
    A(w, 2, 2000);
    F(w, 0);
    F(w, 2);
    A(w, 3, 5000);
    F(w, 1);
    F(w, 3);
}

static void wide_b(world_t *w, size_t scale) {
    (void)scale;
    wide_first = A(w, 0, 3000);
    A(w, 1, 4000);
    A(w, 2, 9000);
    F(w, 1);
    F(w, 0);
    A(w, 3, 1000);
    F(w, 2);
    F(w, 3);
}

static uint64_t zone_allocs(const pa_pool_stats_t *s) {
    return s->zone[PA_ZONE_SLAB].allocs + s->zone[PA_ZONE_BUDDY].allocs +
           s->zone[PA_ZONE_LARGE].allocs;
}

static size_t learned_region(void (*fn)(world_t *, size_t), size_t scale);

static void test_first_block_shared(void) {
    size_t ra = learned_region(wide_a, 1), rb = learned_region(wide_b, 1);
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, wide_a, 1, 3);
    warm(&w, wide_b, 1, 3);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 2u);
    CHECK_EQ(s.planned_bytes, ra > rb ? ra : rb);
    uint64_t misses = s.plan_misses, steps = s.plan_steps, hits = s.plan_hits;
    uint64_t zones = zone_allocs(&s);
    unsigned char *first = NULL;
    int same = 0, as = 0;
    unsigned long long seed = 11;
    for (int r = 0; r < 20; r++) {
        int a = (int)(pa_rand(&seed) % 2);
        warm(&w, a ? wide_a : wide_b, 1, 1);
        if (!first) first = wide_first;
        same += wide_first == first;
        as += a;
    }
    s = stats(p);
    CHECK(as > 2 && as < 18); /* the guess is wrong now and then */
    CHECK_EQ(same, 20);       /* one offset for both plans */
    CHECK_EQ(s.plan_misses, misses);
    CHECK_EQ(s.plan_steps - steps, 20u);
    CHECK_EQ(s.plan_hits - hits, 80u); /* every block, the first ones too */
    CHECK_EQ(zone_allocs(&s), zones);
    CHECK_EQ(s.planned_bytes, ra > rb ? ra : rb);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Same first size, the first block kept for two steps (left to the zones
 * by the plans): it cannot share an offset, so it comes from the zones and
 * the second request picks the plan, as before. */
static int kept_turn;
static void kept_a(world_t *w, size_t scale) {
    (void)scale;
    int slot = 40 + kept_turn % 3;
    F(w, 40 + (kept_turn + 1) % 3); /* the one from two steps ago */
    kept_turn++;
    A(w, slot, 2500);
    A(w, 1, 6000);
    A(w, 2, 1000);
    F(w, 1);
    F(w, 2);
}

static void kept_b(world_t *w, size_t scale) {
    (void)scale;
    int slot = 40 + kept_turn % 3;
    F(w, 40 + (kept_turn + 1) % 3);
    kept_turn++;
    A(w, slot, 2500);
    A(w, 1, 3000);
    F(w, 1);
}

static void test_first_block_kept(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, kept_a, 1, 4);
    warm(&w, kept_b, 1, 4);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 2u);
    uint64_t misses = s.plan_misses, steps = s.plan_steps, hits = s.plan_hits;
    uint64_t zones = zone_allocs(&s);
    unsigned long long seed = 5;
    for (int r = 0; r < 20; r++) warm(&w, pa_rand(&seed) % 2 ? kept_a : kept_b, 1, 1);
    s = stats(p);
    CHECK_EQ(s.plan_misses, misses);
    CHECK_EQ(s.plan_steps - steps, 20u);
    CHECK_EQ(zone_allocs(&s) - zones, 20u);          /* the kept blocks */
    CHECK(s.plan_hits - hits >= 20u);
    for (int i = 40; i < 43; i++) F(&w, i);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Several sequences share one region sized to the largest. */
static size_t learned_region(void (*fn)(world_t *, size_t), size_t scale) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, fn, scale, 3);
    size_t r = stats(p).planned_bytes;
    pa_pool_destroy(p);
    return r;
}

static void test_shared_region(void) {
    size_t r1 = learned_region(model, 1), r4 = learned_region(model, 4);
    size_t rb = learned_region(model_b, 2);
    CHECK(r1 > 0 && r4 > r1);
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    warm(&w, model, 4, 3);
    warm(&w, model_b, 2, 3);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 3u);
    size_t mx = r4 > rb ? r4 : rb;
    CHECK_EQ(s.planned_bytes, mx);
    CHECK(s.planned_bytes < r1 + r4 + rb);
    uint64_t hits = s.plan_hits;
    warm(&w, model, 1, 1);
    warm(&w, model_b, 2, 1);
    warm(&w, model, 4, 1);
    CHECK_EQ(stats(p).plan_hits - hits, 13u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A loop variable rebound every iteration: allocated in one step, freed
 * in the next after its successor exists (double-buffered carry). */
static int carry_flip;
static void loop_carry(world_t *w, size_t scale) {
    int cur = 20 + carry_flip, old = 21 - carry_flip;
    A(w, cur, 5000 * scale);   /* y = f(x): new y while the old lives */
    A(w, 30, 1800 * scale);    /* temporary */
    F(w, 30);
    F(w, old);                 /* the old y dies */
    carry_flip ^= 1;
}

static void test_carry(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    carry_flip = 0;
    pa_pool_step(p);
    warm(&w, loop_carry, 1, 4);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    uint64_t hits = s.plan_hits;
    warm(&w, loop_carry, 1, 6);
    s = stats(p);
    CHECK_EQ(s.plan_hits - hits, 12u);
    CHECK_EQ(s.plan_misses, 0u);
    CHECK(s.planned_live > 0); /* the current y */
    world_ok(&w);
    F(&w, 20);
    F(&w, 21);
    CHECK_EQ(stats(p).live, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* Planned blocks through the rest of the API: block_size, double free,
 * interior pointers, realloc. */
static void test_planned_api(void) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    uint64_t hits = stats(p).plan_hits;
    A(&w, 0, 1000);
    CHECK_EQ(stats(p).plan_hits, hits + 1);
    unsigned char *x = w.ptr[0];
    CHECK_EQ(pa_pool_block_size(p, x), 1024u);
    CHECK_EQ(pa_pool_block_size(p, x + 64), 0u);
    CHECK_EQ(pa_pool_free(p, x + 64), PA_ERR_FOREIGN);
    CHECK_EQ(stats(p).planned_live, 1024u);
    pa_status_t st;
    unsigned char *y = pa_pool_realloc(p, x, 5000, &st);
    CHECK(y != NULL && st == PA_OK && y != x);
    CHECK(intact(y, 1000, w.tag[0]));
    CHECK_EQ(pa_pool_free(p, x), PA_ERR_DOUBLE_FREE);
    uint64_t failures = stats(p).failures;
    CHECK(pa_pool_realloc(p, x, 10, &st) == NULL && st == PA_ERR_DOUBLE_FREE);
    CHECK_EQ(stats(p).failures, failures + 1);
    CHECK_EQ(stats(p).planned_live, 0u);
    CHECK_EQ(pa_pool_free(p, y), PA_OK);
    w.ptr[0] = NULL;
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_step(p);
    /* free_all with an empty region gives it back; the next step maps it */
    CHECK_EQ(pa_pool_free_all(p), PA_OK);
    CHECK_EQ(stats(p).planned_bytes, 0u);
    pa_pool_step(p);
    CHECK(stats(p).planned_bytes > 0);
    hits = stats(p).plan_hits;
    warm(&w, model, 1, 1);
    CHECK_EQ(stats(p).plan_hits - hits, 5u);
    world_ok(&w);
    pa_pool_destroy(p);
}

static void test_learning_off(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    CHECK_EQ(cfg.learn, 1);
    cfg.learn = 0;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 6);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 0u);
    CHECK_EQ(s.plan_hits, 0u);
    CHECK_EQ(s.planned_bytes, 0u);
    CHECK_EQ(s.steps, 7u);
    world_ok(&w);
    pa_pool_destroy(p);
    CHECK_EQ(pa_pool_step(NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_pool_step(p), PA_ERR_STATE);
}

static void test_repeats_and_events(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.learn_repeats = 4;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 3);
    CHECK_EQ(stats(p).learned_sequences, 0u);
    warm(&w, model, 1, 1);
    CHECK_EQ(stats(p).learned_sequences, 1u);
    pa_pool_destroy(p);

    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.learn_max_events = 9; /* model() has 10 events */
    p = pa_pool_create(&cfg, NULL);
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 5);
    CHECK_EQ(stats(p).learned_sequences, 0u);
    warm(&w, model_b, 1, 3);  /* 6 events */
    CHECK_EQ(stats(p).learned_sequences, 1u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* At most learn_sequences plans; the least recently used goes. */
static void test_sequences_kept(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.learn_sequences = 2;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (size_t sc = 1; sc <= 4; sc++) warm(&w, model, sc, 3);
    CHECK_EQ(stats(p).learned_sequences, 2u);
    uint64_t hits = stats(p).plan_hits;
    warm(&w, model, 4, 1);
    CHECK_EQ(stats(p).plan_hits - hits, 5u);
    warm(&w, model, 1, 1);    /* evicted */
    CHECK_EQ(stats(p).plan_hits - hits, 5u);
    world_ok(&w);
    pa_pool_destroy(p);
}

static void *small_maps_fail(size_t size, size_t align, void *ctx) {
    return size < ((size_t)64 << 10) ? NULL : cnt_map(size, align, ctx);
}

/* Under a limit the region counts as reserved; if it cannot fit, the
 * plans are not used and everything still works. */
static void test_limit(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.limit = 8 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 64, 4);    /* ~640 KiB per step: fits */
    pa_pool_stats_t s = stats(p);
    CHECK(s.plan_hits > 0);
    CHECK(s.reserved <= cfg.limit);
    CHECK(s.peak_reserved <= cfg.limit);
    pa_pool_destroy(p);

    counting_t cnt;
    pa_backend_t be = counting_backend(&cnt);
    be.map = small_maps_fail; /* the region (a few pages) cannot be had */
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.backend = &be;
    p = pa_pool_create(&cfg, NULL);
    world_init(&w, p);
    pa_pool_step(p);
    warm(&w, model, 1, 5);
    s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK_EQ(s.planned_bytes, 0u);
    CHECK_EQ(s.plan_hits, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
    CHECK_EQ(cnt.live_bytes, 0u);
}

/* auto_step: live bytes back at the step's starting level is a boundary. */
static void test_auto_step(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = SLAB_MAX;
    cfg.auto_step = 1;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    world_t w;
    world_init(&w, p);
    for (int r = 0; r < 6; r++) model(&w, 1);
    pa_pool_stats_t s = stats(p);
    CHECK_EQ(s.learned_sequences, 1u);
    CHECK_EQ(s.plan_hits, 20u);
    CHECK_EQ(s.steps, 6u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* `quiet` steps that never repeat (`nblk` random blocks each), then the
 * model until the pool has learned it (at most `limit` steps), which is
 * then served; returns the model steps the learning took. */
static int learn_after_noise(int quiet, int nblk, unsigned long long seed, int limit) {
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    for (int r = 0; r < quiet; r++) {
        for (int i = 0; i < nblk; i++) A(&w, i, 64 + pa_rand(&seed) % 50000);
        for (int i = 0; i < nblk; i++) F(&w, i);
        pa_pool_step(p);
    }
    CHECK_EQ(stats(p).learned_sequences, 0u);
    int r = 0;
    while (stats(p).learned_sequences == 0 && r < limit) {
        model(&w, 1);
        pa_pool_step(p);
        r++;
    }
    uint64_t hits = stats(p).plan_hits;
    warm(&w, model, 1, 3);
    CHECK_EQ(stats(p).plan_hits - hits, 15u);
    world_ok(&w);
    pa_pool_destroy(p);
    return r;
}

/* Traffic that never repeats makes the pool record only some steps; a
 * loop that starts repeating afterwards is still learned, and served. */
static void test_quiet_then_learn(void) {
    CHECK(learn_after_noise(40, 6, 99, 40) <= 17); /* within two recorded steps */
}

/* Long random traffic is recorded ever more rarely (one step in 64 at
 * last), yet a sequence that starts to repeat is learned within two such
 * periods and then served. */
static void test_long_quiet_then_learn(void) {
    int r = learn_after_noise(2600, 3, 7, 300);
    CHECK(r > 17);   /* the period did grow past 8 */
    CHECK(r <= 129); /* within two periods of 64 */
}

/* Random steps: a few step shapes repeated with random divergences
 * (another size, a skipped or extra block, a block kept), pool checked
 * and data verified after every step. */
static void test_fuzz(void) {
    unsigned long long seed = 0xC0FFEEull;
    pa_pool_t *p = pool_new();
    world_t w;
    world_init(&w, p);
    pa_pool_step(p);
    size_t shape[3][12];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 12; i++) shape[k][i] = 64 + pa_rand(&seed) % 20000;
    for (int step = 0; step < 600; step++) {
        int k = (int)(pa_rand(&seed) % 3);
        int diverge = pa_rand(&seed) % 6 == 0;
        int at = (int)(pa_rand(&seed) % 12);
        for (int i = 0; i < 12; i++) {
            size_t sz = shape[k][i];
            if (diverge && i == at) sz += 64;
            F(&w, i);                         /* kept from the last step */
            A(&w, i, sz);
            if (i >= 2) F(&w, i - 2);       /* two live at a time */
            if (diverge && i == at && pa_rand(&seed) % 2 && !w.ptr[40 + i % 8])
                A(&w, 40 + i % 8, 1000);
        }
        F(&w, 10);
        if (!(diverge && pa_rand(&seed) % 3 == 0)) F(&w, 11); /* sometimes kept */
        for (int j = 40; j < 48; j++)
            if (pa_rand(&seed) % 3 == 0) F(&w, j);
        pa_pool_step(p);
        world_ok(&w);
    }
    for (int i = 0; i < SLOTS; i++) F(&w, i);
    pa_pool_stats_t s = stats(p);
    CHECK(s.plan_hits > 1000);
    CHECK(s.plan_misses > 0);
    CHECK_EQ(s.live, 0u);
    CHECK_EQ(s.requested, 0u);
    world_ok(&w);
    pa_pool_destroy(p);
}

/* A loop step of small blocks and `big` blocks above the slab sizes (the
 * shipped NumPy loop's shape: ten small temporaries and one 256 KiB
 * block), with the default slab sizes (16 KiB). */
static int small_big;
static void small_step(world_t *w, size_t scale) {
    for (int i = 0; i < 10; i++) {
        A(w, 0, 8 + 100 * (size_t)i * scale);
        if (i == 4)
            for (int k = 0; k < small_big; k++) A(w, 1 + k, 65536 * (size_t)(k + 1) * scale);
        F(w, 0);
    }
    for (int k = 0; k < small_big; k++) F(w, 1 + k);
}

/* A step with at most one block above the slab sizes is never planned:
 * no plan, no region, nothing served, and the judgement gives the plain
 * pool its turn; with two such blocks the same loop is planned and
 * served.  The blocks stay intact either way. */
static void test_small_steps(void) {
    for (small_big = 0; small_big <= 2; small_big++) {
        pa_pool_t *p = pa_pool_create(NULL, NULL);
        world_t w;
        world_init(&w, p);
        pa_pool_step(p);
        warm(&w, small_step, 1, 8);
        pa_pool_stats_t s = stats(p);
        if (small_big <= 1) {
            CHECK_EQ(s.learned_sequences, 0u);
            CHECK_EQ(s.planned_bytes, 0u);
            CHECK_EQ(s.plan_hits, 0u);
            warm(&w, small_step, 1, 64);
            s = stats(p);
            CHECK_EQ(s.learn_fallbacks, 1u);
            CHECK_EQ(s.plan_hits, 0u);
        } else {
            CHECK_EQ(s.learned_sequences, 1u);
            uint64_t hits = s.plan_hits;
            warm(&w, small_step, 1, 4);
            CHECK_EQ(stats(p).plan_hits - hits, 4u * 12u);
            CHECK_EQ(stats(p).learn_fallbacks, 0u);
        }
        world_ok(&w);
        CHECK_EQ(pa_pool_check(p), 0u);
        pa_pool_destroy(p);
    }
}

int main(void) {
    RUN(test_learn_and_hit);
    RUN(test_small_steps);
    RUN(test_learn_buddy_blocks);
    RUN(test_same_addresses);
    RUN(test_divergence_size);
    RUN(test_divergence_order);
    RUN(test_block_kept_then_freed);
    RUN(test_relearn);
    RUN(test_alternating);
    RUN(test_shared_region);
    RUN(test_same_first_size);
    RUN(test_first_block_shared);
    RUN(test_first_block_kept);
    RUN(test_carry);
    RUN(test_planned_api);
    RUN(test_learning_off);
    RUN(test_repeats_and_events);
    RUN(test_sequences_kept);
    RUN(test_limit);
    RUN(test_auto_step);
    RUN(test_quiet_then_learn);
    RUN(test_long_quiet_then_learn);
    RUN(test_fuzz);
    return pa_test_report();
}
