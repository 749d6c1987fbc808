/* test_lstm.c -- the float32 LSTM time loop (kernels/lstm.c) against a
 * double reference built from the ONNX definition (exact sigmoid and tanh):
 * random sizes, both walking orders, with and without a bias, Y written
 * through strided views (as ONNX's layouts and directions lay it out) or
 * not at all -- within 2e-6 (MLAS's approximations and float32 sums);
 * the state with Y omitted is the same bits; bad arguments refused.  Run
 * plain and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;

static double urand(void) { return (double)(pa_rand(&seed) >> 11) / 9007199254740992.0; }

static float *randf(int64_t n, double scale) {
    float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    for (int64_t i = 0; i < n; i++)
        a[i] = (float)((urand() * 2 - 1) * scale);
    return a;
}

static double sigm(double v) { return 1 / (1 + exp(-v)); }

static void test_run_random(void) {
    for (int it = 0; it < 60; it++) {
        int64_t n = 1 + (int64_t)(urand() * 3), H = 1 + (int64_t)(urand() * 40), G = 4 * H;
        int64_t I = (int64_t)(urand() * 24), S = 1 + (int64_t)(urand() * 6);
        int rev = it % 2, with_bias = it % 3 != 0, batch_major = it % 4 >= 2;
        /* x and y as [S][n][.] (sequence-major) or [n][S][.] (batch-major) */
        int64_t xs = batch_major ? I : n * I, xr = batch_major ? S * I : I;
        int64_t pad = 3;        /* y rows padded: a strided view */
        int64_t ys = batch_major ? H + pad : n * (H + pad), yr = batch_major ? S * (H + pad) : H + pad;
        float *x = randf(S * n * I, 1.0), *wt = randf(I * G, 0.4), *rt = randf(H * G, 0.4);
        float *bias = randf(G, 0.5), *h = randf(n * H, 1.0), *c = randf(n * H, 2.0);
        float *y = calloc((size_t)(S * n * (H + pad)), sizeof *y), *g = malloc((size_t)G * sizeof *g);
        double *rh = malloc((size_t)(n * H) * sizeof *rh), *rc = malloc((size_t)(n * H) * sizeof *rc);
        double *ry = malloc((size_t)(S * n * H) * sizeof *ry), gate[160];
        for (int64_t i = 0; i < n * H; i++)
            rh[i] = h[i], rc[i] = c[i];
        float *h2 = malloc((size_t)(n * H) * sizeof *h2), *c2 = malloc((size_t)(n * H) * sizeof *c2);
        memcpy(h2, h, (size_t)(n * H) * sizeof *h2), memcpy(c2, c, (size_t)(n * H) * sizeof *c2);
        for (int64_t s = 0; s < S; s++) {
            int64_t t = rev ? S - 1 - s : s;
            for (int64_t i = 0; i < n; i++) {
                for (int64_t j = 0; j < G; j++) {
                    double v = with_bias ? bias[j] : 0;
                    for (int64_t k = 0; k < I; k++)
                        v += (double)x[t * xs + i * xr + k] * wt[k * G + j];
                    for (int64_t k = 0; k < H; k++)
                        v += rh[i * H + k] * rt[k * G + j];
                    gate[j] = v;
                }
                for (int64_t j = 0; j < H; j++) {
                    double cn = rc[i * H + j] * sigm(gate[2 * H + j]) + sigm(gate[j]) * tanh(gate[3 * H + j]);
                    rc[i * H + j] = cn;
                    rh[i * H + j] = tanh(cn) * sigm(gate[H + j]);
                    ry[(t * n + i) * H + j] = rh[i * H + j];
                }
            }
        }
        CHECK_EQ(pa_lstm_run(x, xs, xr, I, wt, with_bias ? bias : NULL, rt, n, H, S, rev, h, c, y,
                             ys, yr, g), PA_OK);
        double worst = 0;
        for (int64_t i = 0; i < n * H; i++) {
            worst = fmax(worst, fabs(rh[i] - h[i]));
            worst = fmax(worst, fabs(rc[i] - c[i]) / fmax(1, fabs(rc[i])));
        }
        for (int64_t t = 0; t < S; t++)
            for (int64_t i = 0; i < n; i++) {
                for (int64_t j = 0; j < H; j++)
                    worst = fmax(worst, fabs(ry[(t * n + i) * H + j] - y[t * ys + i * yr + j]));
                for (int64_t j = H; j < H + pad; j++)   /* the padding untouched */
                    CHECK(y[t * ys + i * yr + j] == 0.0f);
            }
        CHECK(worst < 2e-6);
        /* Y not asked for: the same final state, bit for bit */
        CHECK_EQ(pa_lstm_run(x, xs, xr, I, wt, with_bias ? bias : NULL, rt, n, H, S, rev, h2, c2,
                             NULL, 0, 0, g), PA_OK);
        CHECK(memcmp(h2, h, (size_t)(n * H) * sizeof *h) == 0);
        CHECK(memcmp(c2, c, (size_t)(n * H) * sizeof *c) == 0);
        free(x), free(wt), free(rt), free(bias), free(h), free(c), free(y), free(g);
        free(rh), free(rc), free(ry), free(h2), free(c2);
    }
}

static void test_run_invalid(void) {
    float f[64] = {0};
    CHECK_EQ(pa_lstm_run(f, 4, 4, 1, f, NULL, f, -1, 2, 1, 0, f, f, NULL, 0, 0, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_lstm_run(f, 4, 4, 1, f, NULL, f, 1, 0, 1, 0, f, f, NULL, 0, 0, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_lstm_run(f, 4, 4, -1, f, NULL, f, 1, 2, 1, 0, f, f, NULL, 0, 0, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_lstm_run(f, 4, 4, 1, f, NULL, NULL, 1, 2, 1, 0, f, f, NULL, 0, 0, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_lstm_run(f, 4, 4, 1, f, NULL, f, 1, 2, 1, 0, f, f, NULL, 0, 0, NULL),
             PA_ERR_INVALID);
    /* nothing to do: no step, no row */
    CHECK_EQ(pa_lstm_run(NULL, 0, 0, 1, NULL, NULL, NULL, 0, 2, 1, 0, NULL, NULL, NULL, 0, 0,
                         NULL), PA_OK);
    CHECK_EQ(pa_lstm_run(NULL, 0, 0, 1, NULL, NULL, NULL, 1, 2, 0, 0, NULL, NULL, NULL, 0, 0,
                         NULL), PA_OK);
}

int main(void) {
    RUN(test_run_random);
    RUN(test_run_invalid);
    return pa_test_report();
}
