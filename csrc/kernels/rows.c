/* kernels/rows.c -- the normalisations of a transformer over the last
 * axis: softmax and layer normalisation of rows of n floats.
 *
 * NumPy spends a full pass over memory per ufunc (softmax: max, subtract,
 * exp, sum, divide; layer normalisation: mean, subtract, square, mean,
 * add, sqrt, divide, scale, shift).  Here each row is read while it stays
 * in L1: statistics in one pass (double accumulators), the result in the
 * next, the exponential branch-free (internal.h) so the loops vectorise.
 * Rows are shared out to the worker pool in blocks.
 */
#include "internal.h"

#include <math.h>

#define PA_ROWS_BLOCK 16384     /* floats per item given to a worker */

typedef struct {
    const float *x, *gamma, *beta;
    float *y;
    int64_t n, rows;
    float eps;
} rows_job_t;

static int64_t rows_per_item(int64_t n) {
    return PA_ROWS_BLOCK / n > 0 ? PA_ROWS_BLOCK / n : 1;
}

/* The largest of x[0..n), n >= 1: PA_VEC running maxima (the loop
 * vectorises), then theirs. */
PA_INLINE float row_max(const float *restrict x, size_t n) {
    float m[PA_VEC];
    for (size_t j = 0; j < PA_VEC; j++)
        m[j] = x[0];
    size_t i0 = 0;
    for (; i0 + PA_VEC <= n; i0 += PA_VEC)
        for (size_t j = 0; j < PA_VEC; j++)
            m[j] = x[i0 + j] > m[j] ? x[i0 + j] : m[j];
    float top = x[0];
    for (size_t j = 0; j < PA_VEC; j++)
        top = m[j] > top ? m[j] : top;
    for (size_t i = i0; i < n; i++)
        top = x[i] > top ? x[i] : top;
    return top;
}

/* sum of x[0..n) (shift 0) or of (x - shift)^2 (squares), in PA_VEC double
 * partial sums: rows of thousands of terms stay within a few ulp. */
PA_INLINE double row_sum(const float *restrict x, size_t n, float shift, int squares) {
    double s[PA_VEC] = {0};
    size_t i0 = 0;
    for (; i0 + PA_VEC <= n; i0 += PA_VEC)
        for (size_t j = 0; j < PA_VEC; j++) {
            const double d = (double)(x[i0 + j] - shift);
            s[j] += squares ? d * d : d;
        }
    double t = 0.0;
    for (size_t j = 0; j < PA_VEC; j++)
        t += s[j];
    for (size_t i = i0; i < n; i++) {
        const double d = (double)(x[i] - shift);
        t += squares ? d * d : d;
    }
    return t;
}

/* y = exp(x - max) / sum: a row whose values are all -inf gives NaN
 * (-inf - -inf), as NumPy and onnxruntime do; a logit more than 87 below
 * the row's largest gives 0 (where the clamped exponential would give
 * 1e-38: a masked key contributes nothing, as in NumPy).  Inline into
 * two clones: x and y disjoint, or one array (restrict holds in both). */
PA_INLINE void softmax_row(const float *x, float *y, size_t n) {
    const float top = row_max(x, n);
    PA_MAP(y, n, i, x[i] - top < -87.0f ? 0.0f : _pa_expf(x[i] - top));
    const float inv = (float)(1.0 / row_sum(y, n, 0.0f, 0));
    PA_MAP(y, n, i, y[i] * inv);
}

PA_MULTIVERSION
static void pa_rows_softmax(const float *restrict x, float *restrict y, size_t n) {
    softmax_row(x, y, n);
}

PA_MULTIVERSION
static void pa_rows_softmax_inplace(float *restrict v, size_t n) {
    softmax_row(v, v, n);
}

void _pa_softmax_row_inplace(float *y, size_t n) {
    pa_rows_softmax_inplace(y, n);
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta, the population
 * variance; beta may be NULL.  Clones as softmax_row's. */
PA_INLINE void layer_norm_row(const float *x, const float *restrict g,
                              const float *restrict bt, float *y, size_t n, float eps) {
    const float mean = (float)(row_sum(x, n, 0.0f, 0) / (double)n);
    const double q = row_sum(x, n, mean, 1);
    const float inv = (float)(1.0 / sqrt(q / (double)n + (double)eps));
    if (bt)
        PA_MAP(y, n, i, (x[i] - mean) * inv * g[i] + bt[i]);
    else
        PA_MAP(y, n, i, (x[i] - mean) * inv * g[i]);
}

PA_MULTIVERSION
static void pa_rows_layer_norm(const float *restrict x, const float *restrict g,
                               const float *restrict bt, float *restrict y, size_t n,
                               float eps) {
    layer_norm_row(x, g, bt, y, n, eps);
}

PA_MULTIVERSION
static void pa_rows_layer_norm_inplace(float *restrict v, const float *restrict g,
                                       const float *restrict bt, size_t n, float eps) {
    layer_norm_row(v, g, bt, v, n, eps);
}

static void softmax_items(void *ctx, int64_t b, int64_t e) {
    const rows_job_t *j = ctx;
    const int64_t per = rows_per_item(j->n);
    int64_t hi = e * per < j->rows ? e * per : j->rows;
    for (int64_t r = b * per; r < hi; r++) {
        const size_t at = (size_t)r * (size_t)j->n;
        if (j->x == j->y)
            pa_rows_softmax_inplace(j->y + at, (size_t)j->n);
        else
            pa_rows_softmax(j->x + at, j->y + at, (size_t)j->n);
    }
}

static void layer_norm_items(void *ctx, int64_t b, int64_t e) {
    const rows_job_t *j = ctx;
    const int64_t per = rows_per_item(j->n);
    int64_t hi = e * per < j->rows ? e * per : j->rows;
    for (int64_t r = b * per; r < hi; r++) {
        const size_t at = (size_t)r * (size_t)j->n;
        if (j->x == j->y)
            pa_rows_layer_norm_inplace(j->y + at, j->gamma, j->beta, (size_t)j->n, j->eps);
        else
            pa_rows_layer_norm(j->x + at, j->gamma, j->beta, j->y + at, (size_t)j->n, j->eps);
    }
}

/* Sizes in range, pointers given, x and y the same array or disjoint. */
static int rows_ok(const float *x, const float *y, int64_t rows, int64_t n) {
    if (rows < 0 || n < 1 || rows > ((int64_t)1 << 40) / n)
        return 0;
    if (rows == 0)
        return 1;
    if (!x || !y)
        return 0;
    const uintptr_t a = (uintptr_t)x, b = (uintptr_t)y, len = (uintptr_t)(rows * n) * 4u;
    return a == b || a + len <= b || b + len <= a;
}

static int64_t rows_items(int64_t rows, int64_t n) {
    return (rows + rows_per_item(n) - 1) / rows_per_item(n);
}

pa_status_t pa_softmax_rows(const float *x, float *y, int64_t rows, int64_t n,
                            pa_workers_t *workers) {
    if (!rows_ok(x, y, rows, n))
        return PA_ERR_INVALID;
    rows_job_t j = {x, NULL, NULL, y, n, rows, 0.0f};
    _pa_parallel(_pa_workers_for(workers, (double)rows * (double)n * 8), rows_items(rows, n),
                 softmax_items, &j);
    return PA_OK;
}

pa_status_t pa_layer_norm_rows(const float *x, const float *gamma, const float *beta,
                               float *y, int64_t rows, int64_t n, float eps,
                               pa_workers_t *workers) {
    if (!rows_ok(x, y, rows, n) || !gamma || !(eps >= 0.0f))
        return PA_ERR_INVALID;
    rows_job_t j = {x, gamma, beta, y, n, rows, eps};
    _pa_parallel(_pa_workers_for(workers, (double)rows * (double)n * 4), rows_items(rows, n),
                 layer_norm_items, &j);
    return PA_OK;
}
