/* test_pool_threads.c -- several threads allocating, writing, verifying
 * and freeing concurrently in one pool (and reclaiming, trimming, reading
 * stats and checking from another thread).  Run under TSan too by
 * `make -C csrc tsan`. */
#include "pyarena.h"
#include "../testhelper.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define THREADS 4
#define SLOTS 64
#define STEPS 4000

typedef struct {
    pa_pool_t *pool;
    unsigned long long seed;
    int errors;
    int bad_status;
} worker_t;

static void *worker(void *arg) {
    worker_t *w = arg;
    unsigned char *blk[SLOTS];
    size_t len[SLOTS];
    unsigned char tag[SLOTS];
    memset(blk, 0, sizeof blk);
    for (int s = 0; s < STEPS; s++) {
        int i = (int)(pa_rand(&w->seed) % SLOTS);
        if (blk[i]) {
            for (size_t k = 0; k < len[i]; k += (len[i] > 4096 ? 509 : 1))
                if (blk[i][k] != (unsigned char)(tag[i] + k)) w->errors++;
            if (pa_pool_free(w->pool, blk[i]) != PA_OK) w->bad_status++;
            blk[i] = NULL;
        } else {
            unsigned lg = (unsigned)(pa_rand(&w->seed) % 21);
            size_t n = ((size_t)1 << lg) + pa_rand(&w->seed) % ((size_t)1 << lg);
            pa_status_t st;
            blk[i] = pa_pool_alloc(w->pool, n, &st);
            if (!blk[i]) {
                w->bad_status++;
                continue;
            }
            len[i] = n;
            tag[i] = (unsigned char)pa_rand(&w->seed);
            for (size_t k = 0; k < n; k += (n > 4096 ? 509 : 1))
                blk[i][k] = (unsigned char)(tag[i] + k);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (blk[i] && pa_pool_free(w->pool, blk[i]) != PA_OK) w->bad_status++;
    return NULL;
}

typedef struct {
    pa_pool_t *pool;
    atomic_int stop;
    size_t broken;
    int rounds;
} janitor_t;

static void *janitor(void *arg) {
    janitor_t *j = arg;
    while (!atomic_load(&j->stop)) {
        pa_pool_stats_t st;
        pa_pool_stats(j->pool, &st);
        if (st.allocated + st.cached > st.reserved) j->broken++;
        switch (j->rounds++ % 4) {
        case 0: pa_pool_reclaim(j->pool); break;
        case 1: pa_pool_trim(j->pool, 0, NULL); break;
        case 2: j->broken += pa_pool_check(j->pool); break;
        default: break;
        }
    }
    return NULL;
}

static void run(int mode) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.mode = mode;
    cfg.cache_budget = 2 << 20;
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    pthread_t th[THREADS], jt;
    worker_t w[THREADS];
    janitor_t j;
    j.pool = p;
    atomic_init(&j.stop, 0);
    j.broken = 0;
    j.rounds = 0;
    pthread_create(&jt, NULL, janitor, &j);
    for (int t = 0; t < THREADS; t++) {
        w[t].pool = p;
        w[t].seed = 0x9E3779B97F4A7C15ull * (unsigned)(t + 1 + mode * 10);
        w[t].errors = 0;
        w[t].bad_status = 0;
        pthread_create(&th[t], NULL, worker, &w[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    atomic_store(&j.stop, 1);
    pthread_join(jt, NULL);
    for (int t = 0; t < THREADS; t++) {
        CHECK_EQ(w[t].errors, 0);
        CHECK_EQ(w[t].bad_status, 0);
    }
    CHECK_EQ(j.broken, 0u);
    CHECK(j.rounds > 0);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

static void test_threads_hybrid(void) { run(PA_POOL_HYBRID); }
static void test_threads_slab_only(void) { run(PA_POOL_SLAB_ONLY); }
static void test_threads_buddy_only(void) { run(PA_POOL_BUDDY_ONLY); }

/* destroy racing with users: they get PA_ERR_STATE or success, never a
 * crash */
typedef struct {
    pa_pool_t *pool;
    int ok, state, other;
} racer_t;

static void *racer(void *arg) {
    racer_t *r = arg;
    /* until the pool is seen destroyed, then a few more rounds */
    for (long i = 0, after = 0; after < 100 && i < 100000000L; i++) {
        if (r->state) after++;
        pa_status_t st;
        void *b = pa_pool_alloc(r->pool, 100, &st);
        if (b) {
            st = pa_pool_free(r->pool, b);
            if (st == PA_OK) r->ok++;
            else if (st == PA_ERR_STATE) r->state++;
            else r->other++;
        } else if (st == PA_ERR_STATE) {
            r->state++;
        } else {
            r->other++;
        }
    }
    return NULL;
}

static void test_destroy_race(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    racer_t r[2] = {{p, 0, 0, 0}, {p, 0, 0, 0}};
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, racer, &r[t]);
    for (volatile int spin = 0; spin < 100000; spin++) {
    }
    CHECK_EQ(pa_pool_destroy(p), PA_OK);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        CHECK_EQ(r[t].other, 0);
        CHECK(r[t].state > 0);
    }
}

/* A learning pool shared by threads: one thread runs a repeated step
 * (learned single-threaded first, then served while the random workers
 * and the janitor run), verifying its blocks; pa_pool_step, planned
 * blocks and their frees go through the same lock. */
typedef struct {
    pa_pool_t *pool;
    int steps, errors, bad_status;
} stepper_t;

static void one_step(stepper_t *s, int round) {
    static const size_t sizes[6] = {4000, 12000, 700, 30000, 2000, 9000};
    unsigned char *b[6];
    for (int i = 0; i < 6; i++) {
        b[i] = pa_pool_alloc(s->pool, sizes[i], NULL);
        if (!b[i]) {
            s->bad_status++;
            continue;
        }
        memset(b[i], (unsigned char)(round + i), sizes[i]);
        if (i >= 2 && b[i - 2]) {
            for (size_t k = 0; k < sizes[i - 2]; k += 97)
                if (b[i - 2][k] != (unsigned char)(round + i - 2)) s->errors++;
            if (pa_pool_free(s->pool, b[i - 2]) != PA_OK) s->bad_status++;
        }
    }
    for (int i = 4; i < 6; i++)
        if (b[i] && pa_pool_free(s->pool, b[i]) != PA_OK) s->bad_status++;
    if (pa_pool_step(s->pool) != PA_OK) s->bad_status++;
}

static void *stepper(void *arg) {
    stepper_t *s = arg;
    for (int r = 0; r < s->steps; r++) one_step(s, r);
    return NULL;
}

static void test_threads_learning(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 1024; /* its blocks above the slab sizes: planned */
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    stepper_t s = {p, 4, 0, 0};
    pa_pool_step(p);
    stepper(&s);                               /* learned alone */
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.learned_sequences, 1u);
    uint64_t hits = st.plan_hits;
    s.steps = 3000;
    pthread_t th[THREADS], jt, stt;
    worker_t w[THREADS - 1];
    janitor_t j;
    j.pool = p;
    atomic_init(&j.stop, 0);
    j.broken = 0;
    j.rounds = 0;
    pthread_create(&jt, NULL, janitor, &j);
    pthread_create(&stt, NULL, stepper, &s);
    for (int t = 0; t < THREADS - 1; t++) {
        w[t].pool = p;
        w[t].seed = 0xD1B54A32D192ED03ull * (unsigned)(t + 7);
        w[t].errors = 0;
        w[t].bad_status = 0;
        pthread_create(&th[t], NULL, worker, &w[t]);
    }
    for (int t = 0; t < THREADS - 1; t++) pthread_join(th[t], NULL);
    pthread_join(stt, NULL);
    atomic_store(&j.stop, 1);
    pthread_join(jt, NULL);
    for (int t = 0; t < THREADS - 1; t++) {
        CHECK_EQ(w[t].errors, 0);
        CHECK_EQ(w[t].bad_status, 0);
    }
    CHECK_EQ(s.errors, 0);
    CHECK_EQ(s.bad_status, 0);
    CHECK_EQ(j.broken, 0u);
    pa_pool_stats(p, &st);
    CHECK(st.plan_hits > hits);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

/* Blocks freed by another thread than the one that allocated them: a
 * producer allocates log-uniform sizes (64 B .. 1 MiB: slab, buddy and
 * large blocks, the large caches going in and out of bypass) and hands
 * them over a ring to a consumer that verifies and frees them, while the
 * janitor checks, reclaims and trims. */
#define RING 256
#define HANDOFFS 6000

typedef struct {
    pa_pool_t *pool;
    unsigned char *ring[RING];
    size_t len[RING];
    atomic_size_t head, tail; /* producer writes head, consumer tail */
    int errors, bad_status;
} handoff_t;

static void *producer(void *arg) {
    handoff_t *h = arg;
    unsigned long long seed = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < HANDOFFS; i++) {
        while (atomic_load(&h->head) - atomic_load(&h->tail) == RING) sched_yield();
        unsigned lg = 6 + (unsigned)(pa_rand(&seed) % 14);
        size_t n = ((size_t)1 << lg) + pa_rand(&seed) % ((size_t)1 << lg);
        unsigned char *b = pa_pool_alloc(h->pool, n, NULL);
        if (!b) {
            h->bad_status++;
            n = 0;
        } else {
            b[0] = (unsigned char)n;
            b[n - 1] = (unsigned char)(n >> 3);
        }
        h->ring[i % RING] = b;
        h->len[i % RING] = n;
        atomic_store(&h->head, i + 1);
    }
    return NULL;
}

static void *consumer(void *arg) {
    handoff_t *h = arg;
    for (size_t i = 0; i < HANDOFFS; i++) {
        while (atomic_load(&h->head) == i) sched_yield();
        unsigned char *b = h->ring[i % RING];
        size_t n = h->len[i % RING];
        if (b) {
            if (b[0] != (unsigned char)n || b[n - 1] != (unsigned char)(n >> 3)) h->errors++;
            if (pa_pool_free(h->pool, b) != PA_OK) h->bad_status++;
        }
        atomic_store(&h->tail, i + 1);
    }
    return NULL;
}

static void test_free_from_other_thread(void) {
    pa_pool_t *p = pa_pool_create(NULL, NULL);
    static handoff_t h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    janitor_t j;
    j.pool = p;
    atomic_init(&j.stop, 0);
    j.broken = 0;
    j.rounds = 0;
    pthread_t pt, ct, jt;
    pthread_create(&jt, NULL, janitor, &j);
    pthread_create(&pt, NULL, producer, &h);
    pthread_create(&ct, NULL, consumer, &h);
    pthread_join(pt, NULL);
    pthread_join(ct, NULL);
    atomic_store(&j.stop, 1);
    pthread_join(jt, NULL);
    CHECK_EQ(h.errors, 0);
    CHECK_EQ(h.bad_status, 0);
    CHECK_EQ(j.broken, 0u);
    pa_pool_stats_t st;
    pa_pool_stats(p, &st);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.allocs, (uint64_t)HANDOFFS);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_threads_hybrid);
    RUN(test_threads_slab_only);
    RUN(test_threads_buddy_only);
    RUN(test_threads_learning);
    RUN(test_destroy_race);
    RUN(test_free_from_other_thread);
    return pa_test_report();
}
