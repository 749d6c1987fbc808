/* plan/internal.h -- shared by plan.c, greedy.c, exact.c and
 * instance.c; declarations grouped by the file that defines them.
 *
 * The front end (plan.c) validates the buffers once and hands the back
 * ends a normalised instance: sizes already padded to the alignment, the
 * padded total known to fit in int64, lifetimes inclusive and valid.
 * Calls go one way: plan.c -> greedy.c, exact.c ->
 * instance.c (exact.c also calls nothing in greedy.c). */
#ifndef PYARENA_PLAN_INTERNAL_H
#define PYARENA_PLAN_INTERNAL_H

#include "../internal.h"

typedef struct _pa_plan_inst {
    size_t n;
    const uint64_t *size;  /* padded sizes                                */
    const uint64_t *raw;   /* requested sizes (orders ties like TFLite)   */
    const int64_t *first;  /* inclusive lifetimes, 0 <= first <= last    */
    const int64_t *last;
    uint64_t align;        /* the alignment the sizes are padded to       */
    uint64_t total;        /* sum of padded sizes (<= INT64_MAX)          */
} _pa_plan_inst_t;

/* instance.c: the clock every time limit is read from
 * (CLOCK_MONOTONIC, seconds), and time compression: a[i], b[i] = ranks of
 * first[i] and last[i] among the distinct endpoint values, *T = their
 * number.  Two lifetimes overlap iff their ranked ranges do.  false when
 * out of memory. */
double _pa_plan_now(void);
bool _pa_plan_compress(const _pa_plan_inst_t *in, uint32_t *a, uint32_t *b,
                       size_t *T);

/* Heuristics (greedy.c).  Each writes off[0..n) and *arena and
 * returns PA_OK or PA_ERR_NOMEM. */
pa_status_t _pa_plan_first_fit(const _pa_plan_inst_t *in, uint64_t *off,
                               uint64_t *arena);
pa_status_t _pa_plan_greedy_size(const _pa_plan_inst_t *in, uint64_t *off,
                                 uint64_t *arena);
pa_status_t _pa_plan_greedy_breadth(const _pa_plan_inst_t *in, uint64_t *off,
                                    uint64_t *arena);

/* Place the buffers in `order` (a permutation of 0..n-1), each into the
 * best-fitting gap (TFLite rule) when best_fit, else the lowest one. */
pa_status_t _pa_plan_place_order(const _pa_plan_inst_t *in,
                                 const uint32_t *order, int best_fit,
                                 uint64_t *off, uint64_t *arena);

/* Exact search (exact.c): find offsets with max(off + size) <=
 * capacity.  PA_OK (off written), PA_ERR_INFEASIBLE (proven impossible),
 * PA_ERR_TIMEOUT (deadline, a CLOCK_MONOTONIC time in seconds, passed) or
 * PA_ERR_NOMEM.  *nodes (may be NULL) gets the search nodes visited. */
pa_status_t _pa_plan_exact_fit(const _pa_plan_inst_t *in, uint64_t capacity,
                               double deadline, uint64_t *off,
                               uint64_t *nodes);

/* The exact solver refuses instances larger than this (its search recurses
 * once per buffer); plan.c then falls back to heuristics + search. */
#define PA_PLAN_EXACT_MAX_N 2048

/* PA_DEFINE_INLINE_SORT(name, T, LESS): `static void name(T *a, size_t n)`,
 * an in-place quicksort (median of three, recursion on the smaller side)
 * finished by insertion sort.  LESS(p, q) compares two `const T *`.  The
 * planner's hot loops sort small arrays of plain structs, where qsort's
 * indirect comparator call dominated; a macro keeps one copy of the code
 * for every element type. */
#define PA_DEFINE_INLINE_SORT(name, T, LESS)                                  \
    static void name(T *a, size_t n) {                                        \
        while (n > 16) {                                                      \
            T *m = &a[n / 2], *z = &a[n - 1], t;                              \
            if (LESS(m, &a[0])) { t = *m; *m = a[0]; a[0] = t; }              \
            if (LESS(z, &a[0])) { t = *z; *z = a[0]; a[0] = t; }              \
            if (LESS(z, m)) { t = *z; *z = *m; *m = t; }                      \
            t = *m; *m = a[0]; a[0] = t; /* the median is the pivot, a[0] */  \
            size_t i = 0, j = n;                                              \
            for (;;) {                                                        \
                do i++; while (i < n && LESS(&a[i], &a[0]));                  \
                do j--; while (LESS(&a[0], &a[j]));                           \
                if (i >= j) break;                                            \
                t = a[i]; a[i] = a[j]; a[j] = t;                              \
            }                                                                 \
            t = a[0]; a[0] = a[j]; a[j] = t;                                  \
            if (j < n - j - 1) {                                              \
                name(a, j);                                                   \
                a += j + 1;                                                   \
                n -= j + 1;                                                   \
            } else {                                                          \
                name(a + j + 1, n - j - 1);                                   \
                n = j;                                                        \
            }                                                                 \
        }                                                                     \
        for (size_t i = 1; i < n; i++) {                                      \
            T x = a[i];                                                       \
            size_t j = i;                                                     \
            while (j > 0 && LESS(&x, &a[j - 1])) {                            \
                a[j] = a[j - 1];                                              \
                j--;                                                          \
            }                                                                 \
            a[j] = x;                                                         \
        }                                                                     \
    }

#endif /* PYARENA_PLAN_INTERNAL_H */
