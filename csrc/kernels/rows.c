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

/* y = exp(x - max) / sum: a row whose values are all -inf gives NaN
 * (-inf - -inf), as NumPy and onnxruntime do; a logit more than 87 below
 * the row's largest gives 0 (where the clamped exponential would give
 * 1e-38: a masked key contributes nothing, as in NumPy).  The sum in
 * double: rows of thousands of terms stay within a few ulp. */
static void softmax_items(void *ctx, int64_t b, int64_t e) {
    const rows_job_t *j = ctx;
    const int64_t per = rows_per_item(j->n);
    const size_t n = (size_t)j->n;
    int64_t hi = e * per < j->rows ? e * per : j->rows;
    for (int64_t r = b * per; r < hi; r++) {
        const float *restrict x = j->x + (size_t)r * n;
        float *restrict y = j->y + (size_t)r * n;
        float top = x[0];
        for (size_t i = 1; i < n; i++)
            top = x[i] > top ? x[i] : top;
        PA_MAP(y, n, i, x[i] - top < -87.0f ? 0.0f : _pa_expf(x[i] - top));
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += y[i];
        const float inv = (float)(1.0 / sum);
        PA_MAP(y, n, i, y[i] * inv);
    }
}

/* y = (x - mean) / sqrt(var + eps) * gamma + beta, the population
 * variance; beta may be NULL. */
static void layer_norm_items(void *ctx, int64_t b, int64_t e) {
    const rows_job_t *j = ctx;
    const int64_t per = rows_per_item(j->n);
    const size_t n = (size_t)j->n;
    int64_t hi = e * per < j->rows ? e * per : j->rows;
    for (int64_t r = b * per; r < hi; r++) {
        const float *restrict x = j->x + (size_t)r * n;
        float *restrict y = j->y + (size_t)r * n;
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += x[i];
        const float mean = (float)(s / (double)n);
        double q = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double d = (double)(x[i] - mean);
            q += d * d;
        }
        const float inv = (float)(1.0 / sqrt(q / (double)n + (double)j->eps));
        const float *restrict g = j->gamma;
        if (j->beta) {
            const float *restrict bt = j->beta;
            PA_MAP(y, n, i, (x[i] - mean) * inv * g[i] + bt[i]);
        } else {
            PA_MAP(y, n, i, (x[i] - mean) * inv * g[i]);
        }
    }
}

static int rows_ok(const float *x, const float *y, int64_t rows, int64_t n) {
    if (rows < 0 || n < 1 || rows > ((int64_t)1 << 40) / n)
        return 0;
    return rows == 0 || (x && y);
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
