/* bench_pool_sanity.c -- sanity micro-benchmark for the work pool's fast path.
 *
 * Trace: ~1000 live blocks, sizes log-uniform in [64 B, 1 MiB]; each step
 * frees a random live block and allocates a new one in its place (the
 * first byte of every block is written).  Reports ns per alloc/free pair
 * (CPU time, median of 5) for the pool and for the C library's malloc in
 * the same run; each pool runs the trace once untimed first, as malloc
 * is warm after its first repetition.  LD_PRELOAD a tcmalloc or mimalloc
 * to compare with those.
 *   make -C csrc && cc -O2 -Icsrc tests/c/alloc/bench_pool_sanity.c csrc/build/libpyarena.a -lpthread -lm
 */
#define _POSIX_C_SOURCE 200809L
#include "pyarena.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIVE 1000
#define STEPS 2000000

static unsigned long long rng = 88172645463325252ull;
static unsigned long long xr(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); /* CPU time: robust to a shared machine */
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static size_t *sizes;
static unsigned *slots;

static double run_pool(pa_pool_t *p) {
    void **live = calloc(LIVE, sizeof(void *));
    for (int i = 0; i < LIVE; i++) {
        live[i] = pa_pool_alloc(p, sizes[i], NULL);
        *(char *)live[i] = 1;
    }
    double t0 = now();
    for (int s = 0; s < STEPS; s++) {
        unsigned i = slots[s];
        pa_pool_free(p, live[i]);
        live[i] = pa_pool_alloc(p, sizes[s], NULL);
        *(char *)live[i] = 1;
    }
    double t = now() - t0;
    for (int i = 0; i < LIVE; i++) pa_pool_free(p, live[i]);
    free(live);
    return t / STEPS * 1e9;
}

static double run_malloc(void) {
    void **live = calloc(LIVE, sizeof(void *));
    for (int i = 0; i < LIVE; i++) {
        live[i] = malloc(sizes[i]);
        *(char *)live[i] = 1;
    }
    double t0 = now();
    for (int s = 0; s < STEPS; s++) {
        unsigned i = slots[s];
        free(live[i]);
        live[i] = malloc(sizes[s]);
        *(char *)live[i] = 1;
    }
    double t = now() - t0;
    for (int i = 0; i < LIVE; i++) free(live[i]);
    free(live);
    return t / STEPS * 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    sizes = malloc(STEPS * sizeof(size_t));
    slots = malloc(STEPS * sizeof(unsigned));
    for (int s = 0; s < STEPS; s++) {
        double u = (double)(xr() % 1000000) / 1e6;
        sizes[s] = (size_t)exp(log(64.0) + u * (log(1048576.0) - log(64.0)));
        slots[s] = (unsigned)(xr() % LIVE);
    }
    const char *names[] = {"hybrid", "slab-only", "buddy-only"};
    double m[5], q[3][5];
    for (int rep = 0; rep < 5; rep++) {
        m[rep] = run_malloc();
        for (int mode = 0; mode < 3; mode++) {
            pa_pool_config_t cfg;
            pa_pool_config_default(&cfg);
            cfg.mode = mode;
            cfg.cache_budget = SIZE_MAX;
            pa_pool_t *p = pa_pool_create(&cfg, NULL);
            run_pool(p); /* warm-up: first touches of fresh chunks */
            q[mode][rep] = run_pool(p);
            if (rep == 4) {
                pa_pool_stats_t st;
                pa_pool_stats(p, &st);
                printf("%-10s peak_reserved/peak_requested %.3f  hits %llu/%llu\n", names[mode],
                       (double)st.peak_reserved / (double)st.peak_requested,
                       (unsigned long long)(st.zone[0].cache_hits + st.zone[1].cache_hits +
                                            st.zone[2].cache_hits),
                       (unsigned long long)st.allocs);
            }
            pa_pool_destroy(p);
        }
    }
    qsort(m, 5, sizeof(double), cmp);
    printf("malloc      %.1f ns/pair (median of 5)\n", m[2]);
    for (int mode = 0; mode < 3; mode++) {
        qsort(q[mode], 5, sizeof(double), cmp);
        printf("%-10s  %.1f ns/pair  ratio vs malloc %.2f\n", names[mode], q[mode][2],
               q[mode][2] / m[2]);
    }
    return 0;
}
