/* test_ort_approx.c -- onnxruntime's logistic and tanh approximations
 * (kernels/ort_approx.c) against double references (no Python; the bits
 * against onnxruntime itself: tests/runtime/test_ort_approx.py): within
 * 4e-7 of 1 / (1 + exp(-x)) and tanh(x) over random values of every
 * magnitude, the same bits in place and not and for every length (the
 * clones' vector bodies and their scalar tails), odd in x for tanh, NaN
 * through, bad arguments refused.  Run plain and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;

static float frand(float scale) {
    return (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0 * 2 - 1) * scale;
}

static void test_against_double(void) {
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *t = malloc(N * sizeof *t);
    double worst_l = 0, worst_t = 0;
    for (int it = 0; it < 40; it++) {
        float scale = it % 4 == 0 ? 0.01f : it % 4 == 1 ? 3.0f : it % 4 == 2 ? 12.0f : 40.0f;
        for (int i = 0; i < N; i++)
            x[i] = frand(scale);
        CHECK_EQ(pa_ort_logistic(x, y, N), PA_OK);
        CHECK_EQ(pa_ort_tanh(x, t, N), PA_OK);
        for (int i = 0; i < N; i++) {
            double l = 1 / (1 + exp(-(double)x[i])), h = tanh((double)x[i]);
            worst_l = fmax(worst_l, fabs(y[i] - l));
            worst_t = fmax(worst_t, fabs(t[i] - h));
            CHECK(y[i] >= 0.0f && y[i] <= 1.0f);
        }
    }
    CHECK(worst_l < 4e-7);
    CHECK(worst_t < 4e-7);
    free(x), free(y), free(t);
}

static void test_lengths_in_place_and_odd(void) {
    enum { N = 70 };
    float x[N], neg[N], a[N], b[N], c[N];
    for (int i = 0; i < N; i++) {
        x[i] = frand(6.0f);
        neg[i] = -x[i];
    }
    CHECK_EQ(pa_ort_logistic(x, a, N), PA_OK);
    CHECK_EQ(pa_ort_tanh(x, c, N), PA_OK);
    for (size_t n = 1; n <= N; n++) {        /* every tail length: the same bits */
        float part[N];
        CHECK_EQ(pa_ort_logistic(x + N - n, part, n), PA_OK);
        CHECK(memcmp(part, a + N - n, n * sizeof *part) == 0);
        CHECK_EQ(pa_ort_tanh(x + N - n, part, n), PA_OK);
        CHECK(memcmp(part, c + N - n, n * sizeof *part) == 0);
    }
    memcpy(b, x, sizeof b);
    CHECK_EQ(pa_ort_logistic(b, b, N), PA_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    memcpy(b, x, sizeof b);
    CHECK_EQ(pa_ort_tanh(b, b, N), PA_OK);
    CHECK(memcmp(c, b, sizeof c) == 0);
    CHECK_EQ(pa_ort_tanh(neg, b, N), PA_OK);
    for (int i = 0; i < N; i++)
        CHECK(b[i] == -c[i]);
}

static void test_special_values(void) {
    float x[6] = {NAN, INFINITY, -INFINITY, 0.0f, 1e30f, -1e30f}, y[6], t[6];
    CHECK_EQ(pa_ort_logistic(x, y, 6), PA_OK);
    CHECK_EQ(pa_ort_tanh(x, t, 6), PA_OK);
    CHECK(isnan(y[0]) && isnan(t[0]));
    CHECK(y[1] > 0.9999f && y[1] <= 1.0f && y[2] >= 0.0f && y[2] < 1e-6f);
    CHECK(y[3] == 0.5f && t[3] == 0.0f);
    CHECK(t[1] > 0.9999f && t[1] <= 1.0f && t[2] == -t[1] && t[4] == t[1] && t[5] == t[2]);
}

static void test_invalid(void) {
    float x[8] = {0}, y[8];
    CHECK_EQ(pa_ort_logistic(NULL, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_ort_tanh(x, NULL, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_ort_logistic(NULL, NULL, 0), PA_OK);
    CHECK_EQ(pa_ort_tanh(x, x + 1, 4), PA_ERR_INVALID);     /* partly overlapping */
    CHECK_EQ(pa_ort_logistic(x + 2, x, 4), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_against_double);
    RUN(test_lengths_in_place_and_odd);
    RUN(test_special_values);
    RUN(test_invalid);
    return pa_test_report();
}
