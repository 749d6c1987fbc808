/* test_workers.c -- the native kernels' thread pool (kernels/workers.c):
 * every item of every job runs exactly once, over thousands of jobs back
 * to back and any item count; and a helper that is slow to run does not
 * hold the caller up: the caller claims the chunks the helper has not
 * (with one fixed part per thread it would have waited for the helper's
 * part). */
#define _POSIX_C_SOURCE 200809L
#include "kernels/internal.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    _Atomic int *hits;      /* per item: how many times it ran */
} count_job_t;

static void count_items(void *ctx, int64_t b, int64_t e) {
    count_job_t *j = ctx;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add_explicit(&j->hits[i], 1, memory_order_relaxed);
}

static void test_every_item_runs_once(void) {
    enum { MAX_N = 1000 };
    _Atomic int *hits = calloc(MAX_N, sizeof *hits);
    unsigned long long seed = 0x9E3779B97F4A7C15ULL;
    for (int threads = 2; threads <= 4; threads++) {
        pa_workers_t *w = pa_workers_create(threads, NULL);
        CHECK(w != NULL);
        int bad = 0;
        for (int job = 0; job < 3000; job++) {
            int64_t n = (int64_t)(pa_rand(&seed) % MAX_N) + 1;
            for (int64_t i = 0; i < n; i++)
                atomic_store(&hits[i], 0);
            count_job_t j = {hits};
            _pa_parallel(w, n, count_items, &j);
            for (int64_t i = 0; i < n; i++)
                bad += atomic_load(&hits[i]) != 1;
        }
        CHECK_EQ(bad, 0);
        pa_workers_destroy(w);
    }
    free(hits);
}

typedef struct {
    pthread_t caller;
    _Atomic int64_t by_caller, by_helpers;
    _Atomic int helper_started;
} slow_job_t;

/* Each chunk notes who ran it.  A helper's chunk takes 50 ms (a thread the
 * system runs late); the caller's first chunk waits (up to 5 s) until a
 * helper has started one, so that the helper surely holds a chunk. */
static void note_runner(void *ctx, int64_t b, int64_t e) {
    slow_job_t *j = ctx;
    if (pthread_equal(pthread_self(), j->caller)) {
        struct timespec tick = {0, 1000 * 1000};
        for (int i = 0; i < 5000 && !atomic_load(&j->helper_started); i++)
            nanosleep(&tick, NULL);
        atomic_fetch_add(&j->by_caller, e - b);
        return;
    }
    atomic_store(&j->helper_started, 1);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    atomic_fetch_add(&j->by_helpers, e - b);
}

static void test_the_caller_takes_the_chunks_a_slow_helper_has_not(void) {
    pa_workers_t *w = pa_workers_create(2, NULL);
    CHECK(w != NULL);
    enum { N = 64 };
    slow_job_t j;
    j.caller = pthread_self();
    atomic_store(&j.by_caller, 0);
    atomic_store(&j.by_helpers, 0);
    atomic_store(&j.helper_started, 0);
    _pa_parallel(w, N, note_runner, &j);
    int64_t caller = atomic_load(&j.by_caller), helpers = atomic_load(&j.by_helpers);
    CHECK_EQ(caller + helpers, N);
    CHECK(helpers > 0);
    /* 8 chunks of 8 items: the helper, 50 ms on each, runs one (two at
     * most) while the caller runs the rest; with one chunk per thread the
     * caller would run 32 */
    CHECK(caller >= N - 2 * (N / 8));
    pa_workers_destroy(w);
}

int main(void) {
    RUN(test_every_item_runs_once);
    RUN(test_the_caller_takes_the_chunks_a_slow_helper_has_not);
    return pa_test_report();
}
