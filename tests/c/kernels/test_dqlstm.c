/* test_dqlstm.c -- one DynamicQuantizeLSTM step (kernels/dqlstm.c) against
 * a double reference built from its definition: h quantized by
 * pa_dynamic_quantize (its own test checks it), the exact integer product,
 * the gates with exact sigmoid / tanh in double -- within 2e-6 (MLAS's
 * approximations and the float32 roundings); in place (c_out = c, h_out =
 * h) the same bits; pa_dqlstm_run's walk (forward and reverse, Y strided)
 * the same bits as its steps one by one; bad arguments refused.  Run plain
 * and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0xD1B54A32D192ED03ULL;

static double urand(void) { return (double)(pa_rand(&seed) >> 11) / 9007199254740992.0; }

static void test_step_random(void) {
    for (int it = 0; it < 60; it++) {
        int64_t n = 1 + (int64_t)(urand() * 4), H = 1 + (int64_t)(urand() * 40), G = 4 * H;
        int s8 = it % 2, zp = it % 3 == 0;
        float *h = malloc((size_t)(n * H) * sizeof *h), *c = malloc((size_t)(n * H) * sizeof *c);
        float *xw = malloc((size_t)(n * G) * sizeof *xw), *bias = malloc((size_t)G * sizeof *bias);
        float *scale = malloc((size_t)G * sizeof *scale), *g = malloc((size_t)(n * G) * sizeof *g);
        float *co = malloc((size_t)(n * H) * sizeof *co), *ho = malloc((size_t)(n * H) * sizeof *ho);
        float *mult = malloc((size_t)G * sizeof *mult);
        uint8_t *r = malloc((size_t)(H * G)), *hq = malloc((size_t)(n * H));
        int32_t *acc = malloc((size_t)(n * G) * sizeof *acc), *rzp = malloc((size_t)G * sizeof *rzp);
        for (int64_t i = 0; i < n * H; i++)
            h[i] = (float)(urand() * 2 - 1), c[i] = (float)(urand() * 4 - 2);
        for (int64_t i = 0; i < n * G; i++)
            xw[i] = (float)(urand() * 6 - 3);
        for (int64_t j = 0; j < G; j++) {
            bias[j] = (float)(urand() - 0.5), scale[j] = (float)(0.005 + urand() * 0.02);
            rzp[j] = zp ? (s8 ? (int32_t)(urand() * 20) - 10 : 120 + (int32_t)(urand() * 16)) : 0;
        }
        for (int64_t i = 0; i < H * G; i++)
            r[i] = (uint8_t)(urand() * 256);
        size_t psize = pa_qrows_packed_size(H, G);
        int32_t *rp = malloc(psize);
        CHECK_EQ(pa_qrows_pack(r, s8 ? PA_Q_S8 : PA_Q_U8, zp ? rzp : NULL, H, G, rp, psize),
                 PA_OK);
        CHECK_EQ(pa_dqlstm_step(h, c, xw, it % 4 ? bias : NULL, rp, scale, n, H, g, co, ho, hq,
                                acc, mult), PA_OK);
        /* the reference */
        float hs;
        uint8_t hz;
        uint8_t *q = malloc((size_t)(n * H));
        CHECK_EQ(pa_dynamic_quantize(h, (size_t)(n * H), q, &hs, &hz), PA_OK);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double gate[4 * 40];
            for (int64_t j = 0; j < G; j++) {
                int64_t sum = 0;
                for (int64_t k = 0; k < H; k++) {
                    int64_t w = s8 ? (int8_t)r[k * G + j] : r[k * G + j];
                    sum += ((int64_t)q[i * H + k] - hz) * (w - rzp[j]);
                }
                gate[j] = xw[i * G + j] + (double)sum * scale[j] * hs +
                          (it % 4 ? bias[j] : 0.0);
            }
            for (int64_t j = 0; j < H; j++) {
                double ig = 1 / (1 + exp(-gate[j])), og = 1 / (1 + exp(-gate[H + j]));
                double fg = 1 / (1 + exp(-gate[2 * H + j])), cg = tanh(gate[3 * H + j]);
                double cn = c[i * H + j] * fg + ig * cg, hn = tanh(cn) * og;
                worst = fmax(worst, fabs(cn - co[i * H + j]) / fmax(1, fabs(cn)));
                worst = fmax(worst, fabs(hn - ho[i * H + j]));
            }
        }
        CHECK(worst < 2e-6);
        /* in place: c_out = c, h_out = h: the same bits */
        float *c2 = malloc((size_t)(n * H) * sizeof *c2), *h2 = malloc((size_t)(n * H) * sizeof *h2);
        memcpy(c2, c, (size_t)(n * H) * sizeof *c2), memcpy(h2, h, (size_t)(n * H) * sizeof *h2);
        CHECK_EQ(pa_dqlstm_step(h2, c2, xw, it % 4 ? bias : NULL, rp, scale, n, H, g, c2, h2, hq,
                                acc, mult), PA_OK);
        CHECK(memcmp(c2, co, (size_t)(n * H) * sizeof *c2) == 0);
        CHECK(memcmp(h2, ho, (size_t)(n * H) * sizeof *h2) == 0);
        free(h), free(c), free(xw), free(bias), free(scale), free(g), free(co), free(ho);
        free(mult), free(r), free(hq), free(acc), free(rzp), free(q), free(c2), free(h2);
        free(rp);
    }
}

/* The walk of pa_dqlstm_run against the steps called one by one: S steps
 * of n rows, Y rows spaced by `ys` floats (a direction's slice of a
 * bidirectional Y), forward and reverse. */
static void test_run_walk(void) {
    for (int it = 0; it < 16; it++) {
        int64_t n = 1 + it % 3, H = 3 + it, G = 4 * H, S = 1 + it % 5, ys = 2 * H + it % 2;
        int rev = it % 2;
        uint8_t *r = malloc((size_t)(H * G));
        float *xw = malloc((size_t)(S * n * G) * sizeof *xw), *scale = malloc((size_t)G * 4);
        float *h = malloc((size_t)(n * H) * 4), *c = malloc((size_t)(n * H) * 4);
        float *h1 = malloc((size_t)(n * H) * 4), *c1 = malloc((size_t)(n * H) * 4);
        float *y = calloc((size_t)(S * n * ys), 4), *y1 = calloc((size_t)(S * n * ys), 4);
        float *g = malloc((size_t)(n * G) * 4), *mult = malloc((size_t)G * 4);
        uint8_t *hq = malloc((size_t)(n * H));
        int32_t *acc = malloc((size_t)(n * G) * 4);
        for (int64_t i = 0; i < H * G; i++)
            r[i] = (uint8_t)(urand() * 256);
        for (int64_t i = 0; i < S * n * G; i++)
            xw[i] = (float)(urand() * 6 - 3);
        for (int64_t j = 0; j < G; j++)
            scale[j] = (float)(0.005 + urand() * 0.02);
        for (int64_t i = 0; i < n * H; i++)
            h[i] = h1[i] = (float)(urand() * 2 - 1), c[i] = c1[i] = (float)(urand() * 2 - 1);
        size_t psize = pa_qrows_packed_size(H, G);
        int32_t *rp = malloc(psize);
        CHECK_EQ(pa_qrows_pack(r, PA_Q_S8, NULL, H, G, rp, psize), PA_OK);
        CHECK_EQ(pa_dqlstm_run(xw, S, rev, NULL, rp, scale, n, H, h, c, y, n * ys, ys, g, hq,
                               acc, mult), PA_OK);
        for (int64_t s = 0; s < S; s++) {
            int64_t t = rev ? S - 1 - s : s;
            CHECK_EQ(pa_dqlstm_step(h1, c1, xw + t * n * G, NULL, rp, scale, n, H, g, c1, h1, hq,
                                    acc, mult), PA_OK);
            for (int64_t i = 0; i < n; i++)
                memcpy(y1 + t * n * ys + i * ys, h1 + i * H, (size_t)H * 4);
        }
        CHECK(memcmp(h, h1, (size_t)(n * H) * 4) == 0);
        CHECK(memcmp(c, c1, (size_t)(n * H) * 4) == 0);
        CHECK(memcmp(y, y1, (size_t)(S * n * ys) * 4) == 0);
        free(r), free(xw), free(scale), free(h), free(c), free(h1), free(c1), free(y), free(y1);
        free(g), free(mult), free(hq), free(acc), free(rp);
    }
}

static void test_step_invalid(void) {
    float f[64] = {0};
    uint8_t b[64] = {0};
    int32_t a[64], rp[512];
    CHECK_EQ(pa_qrows_pack(b, PA_Q_S8, NULL, 2, 8, rp, sizeof rp), PA_OK);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, rp, f, -1, 2, f, f, f, b, a, f), PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, rp, f, 1, 0, f, f, f, b, a, f), PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, NULL, f, 1, 2, f, f, f, b, a, f), PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, b, f, 1, 2, f, f, f, b, a, f), PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(NULL, NULL, NULL, NULL, NULL, NULL, 0, 2, NULL, NULL, NULL, NULL,
                            NULL, NULL), PA_OK);
    CHECK_EQ(pa_dqlstm_run(f, -1, 0, NULL, rp, f, 1, 2, f, f, NULL, 0, 0, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_run(f, 2, 0, NULL, rp, f, 2, 2, f, f, f, 4, 1, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_run(f, 0, 0, NULL, rp, f, 1, 2, f, f, NULL, 0, 0, f, b, a, f), PA_OK);
    CHECK_EQ(pa_dqlstm_run(NULL, 2, 0, NULL, rp, f, 1, 2, f, f, NULL, 0, 0, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_run(f, 2, 1, NULL, NULL, f, 1, 2, f, f, NULL, 0, 0, f, b, a, f),
             PA_ERR_INVALID);
}

int main(void) {
    RUN(test_step_random);
    RUN(test_run_walk);
    RUN(test_step_invalid);
    return pa_test_report();
}
