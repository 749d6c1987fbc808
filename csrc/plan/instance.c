/* plan/instance.c -- what every planner back end shares about an instance:
 * the clock the time limits are read from, and time compression.
 *
 * plan.c builds the normalised instance (_pa_plan_inst_t, internal.h)
 * and calls the back ends; the back ends (greedy.c, exact.c)
 * need these two services and nothing else from the front.  Keeping them
 * here, below both, makes the planner's dependencies one-way:
 * plan.c -> greedy.c / exact.c -> instance.c.
 *
 * Design choice: time is compressed to the ranks of the distinct endpoint
 * values (T <= 2n points), so the back ends index arrays and segment trees
 * by step rank instead of by raw, possibly huge and sparse, step numbers. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <time.h>

double _pa_plan_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static uint32_t rank_of(const int64_t *u, size_t m, int64_t v) {
    size_t lo = 0, hi = m;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
}

bool _pa_plan_compress(const _pa_plan_inst_t *in, uint32_t *a, uint32_t *b,
                     size_t *T) {
    size_t n = in->n;
    int64_t *u = malloc(2 * n * sizeof(int64_t) + 1);
    if (!u) return false;
    for (size_t i = 0; i < n; i++) {
        u[2 * i] = in->first[i];
        u[2 * i + 1] = in->last[i];
    }
    qsort(u, 2 * n, sizeof(int64_t), cmp_i64);
    size_t m = 0;
    for (size_t i = 0; i < 2 * n; i++)
        if (m == 0 || u[m - 1] != u[i]) u[m++] = u[i];
    for (size_t i = 0; i < n; i++) {
        a[i] = rank_of(u, m, in->first[i]);
        b[i] = rank_of(u, m, in->last[i]);
    }
    free(u);
    *T = m;
    return true;
}
