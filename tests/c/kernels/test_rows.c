/* test_rows.c -- softmax and layer normalisation over rows (kernels/rows.c)
 * against naive double references (no Python): random row counts and
 * lengths (1, odd, past a vector, past a worker's block), in place and
 * not, one and three threads giving the same bits, a row of -inf only
 * giving NaN, bad arguments refused.  Run plain and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x2545F4914F6CDD1DULL;

static int64_t rnd(int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static float frand(void) {
    return (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
}

static float *fbuf(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

static void test_softmax_random(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    double worst = 0;
    for (int it = 0; it < 200; it++) {
        int64_t rows = rnd(0, 40), n = it % 4 == 0 ? rnd(1, 3) : rnd(1, it % 7 ? 300 : 20000);
        size_t total = (size_t)(rows * n);
        float *x = fbuf(total, it % 3 ? 10.0f : 80.0f), *y = fbuf(total, 1), *z = fbuf(total, 1);
        if (total && it % 5 == 0)
            x[rnd(0, (int64_t)total - 1)] = -INFINITY;   /* a masked logit: exactly 0 out */
        CHECK_EQ(pa_softmax_rows(x, y, rows, n, NULL), PA_OK);
        CHECK_EQ(pa_softmax_rows(x, z, rows, n, pool), PA_OK);
        CHECK(total == 0 || memcmp(y, z, total * sizeof *y) == 0);
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * n;
            double top = -INFINITY, sum = 0;
            for (int64_t i = 0; i < n; i++)
                top = xr[i] > top ? xr[i] : top;
            for (int64_t i = 0; i < n; i++)
                sum += exp((double)xr[i] - top);
            for (int64_t i = 0; i < n; i++) {
                double want = exp((double)xr[i] - top) / sum;
                /* a few ulp, plus the rounding of x - max in float (a
                 * relative error of its size times 2^-24 in the exp) */
                double allowed = want * (1e-6 + 1.2e-7 * fabs(xr[i] - top)) + 1e-37;
                double err = fabs(want - y[r * n + i]) / allowed;
                if (isfinite(top) && err > worst)
                    worst = err;
                if (isinf(xr[i]) && isfinite(top))
                    CHECK(y[r * n + i] == 0.0f);
            }
        }
        memcpy(z, x, total * sizeof *z);        /* in place */
        CHECK_EQ(pa_softmax_rows(z, z, rows, n, NULL), PA_OK);
        CHECK(total == 0 || memcmp(y, z, total * sizeof *y) == 0);
        free(x), free(y), free(z);
    }
    if (worst > 1)
        fprintf(stderr, "softmax: error %g times the allowed\n", worst);
    CHECK(worst <= 1);
    /* the largest logit first past the vector blocks: the others 0, it 1 */
    float big[17] = {0}, got[17];
    big[16] = 200.0f;
    CHECK_EQ(pa_softmax_rows(big, got, 1, 17, NULL), PA_OK);
    CHECK(got[16] == 1.0f && got[0] == 0.0f && got[15] == 0.0f);
    float row[3] = {-INFINITY, -INFINITY, -INFINITY}, out[3];
    CHECK_EQ(pa_softmax_rows(row, out, 1, 3, NULL), PA_OK);
    CHECK(isnan(out[0]) && isnan(out[2]));
    pa_workers_destroy(pool);
}

static void test_layer_norm_random(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    double worst = 0;
    for (int it = 0; it < 200; it++) {
        int64_t rows = rnd(0, 40), n = it % 4 == 0 ? rnd(1, 3) : rnd(1, it % 7 ? 400 : 20000);
        size_t total = (size_t)(rows * n);
        float shift = it % 3 ? 0.0f : 50.0f;      /* a large mean: the variance cancels */
        float *x = fbuf(total, 4.0f), *y = fbuf(total, 1), *z = fbuf(total, 1);
        for (size_t i = 0; i < total; i++)
            x[i] += shift;
        float *g = fbuf((size_t)n, 2.0f), *b = it % 2 ? fbuf((size_t)n, 1.0f) : NULL;
        float eps = it % 2 ? 1e-5f : 1e-12f;
        CHECK_EQ(pa_layer_norm_rows(x, g, b, y, rows, n, eps, NULL), PA_OK);
        CHECK_EQ(pa_layer_norm_rows(x, g, b, z, rows, n, eps, pool), PA_OK);
        CHECK(total == 0 || memcmp(y, z, total * sizeof *y) == 0);
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * n;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < n; i++)
                mean += xr[i];
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++)
                var += (xr[i] - mean) * (xr[i] - mean);
            var /= (double)n;
            for (int64_t i = 0; i < n; i++) {
                double sd = sqrt(var + eps);
                double want = (xr[i] - mean) / sd * g[i] + (b ? b[i] : 0);
                /* a few ulp of the terms, and the mean's rounding to float
                 * (2^-24 of it) in units of the row's spread */
                double allowed = fabs(g[i]) * (1e-6 * (1 + fabs(xr[i] - mean) / sd) +
                                               1.2e-7 * fabs(mean) / sd) +
                                 1e-6 * (b ? fabs(b[i]) : 0) + 1e-30;
                double err = fabs(want - y[r * n + i]) / allowed;
                if (err > worst)
                    worst = err;
            }
        }
        memcpy(z, x, total * sizeof *z);
        CHECK_EQ(pa_layer_norm_rows(z, g, b, z, rows, n, eps, NULL), PA_OK);
        CHECK(total == 0 || memcmp(y, z, total * sizeof *y) == 0);
        free(x), free(y), free(z), free(g), free(b);
    }
    if (worst > 1)
        fprintf(stderr, "layer norm: error %g times the allowed\n", worst);
    CHECK(worst <= 1);
    pa_workers_destroy(pool);
}

static void test_rows_invalid(void) {
    float v[4] = {1, 2, 3, 4}, g[2] = {1, 1};
    CHECK_EQ(pa_softmax_rows(NULL, v, 1, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_softmax_rows(v, NULL, 1, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_softmax_rows(v, v, 1, 0, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_softmax_rows(v, v, -1, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_softmax_rows(v, v, (int64_t)1 << 40, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_softmax_rows(NULL, NULL, 0, 4, NULL), PA_OK);
    CHECK_EQ(pa_softmax_rows(v, v + 1, 1, 3, NULL), PA_ERR_INVALID);   /* partly overlapping */
    CHECK_EQ(pa_layer_norm_rows(v + 2, g, NULL, v, 1, 2, 0.0f, NULL), PA_OK);  /* adjacent */
    CHECK_EQ(pa_layer_norm_rows(v, NULL, NULL, v, 2, 2, 1e-5f, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_layer_norm_rows(v, g, NULL, v, 2, 2, -1.0f, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_layer_norm_rows(v, g, NULL, v, 2, 2, NAN, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_layer_norm_rows(v, g, NULL, NULL, 2, 2, 1e-5f, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_layer_norm_rows(v, g, NULL, v, 2, 2, 0.0f, NULL), PA_OK);
    CHECK(fabsf(v[0] + 1) < 1e-6f && fabsf(v[1] - 1) < 1e-6f);
}

int main(void) {
    RUN(test_softmax_random);
    RUN(test_layer_norm_random);
    RUN(test_rows_invalid);
    return pa_test_report();
}
