/* test_dqlstm.c -- one DynamicQuantizeLSTM step (kernels/dqlstm.c) against
 * a double reference built from its definition: h quantized by
 * pa_dynamic_quantize (its own test checks it), the exact integer product,
 * the gates with exact sigmoid / tanh in double -- within 2e-6 (MLAS's
 * approximations and the float32 roundings); in place (c_out = c, h_out =
 * h) the same bits; bad arguments refused.  Run plain and under ASan +
 * UBSan. */
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
        CHECK_EQ(pa_dqlstm_step(h, c, xw, it % 4 ? bias : NULL, r, s8 ? PA_Q_S8 : PA_Q_U8,
                                zp ? rzp : NULL, scale, n, H, g, co, ho, hq, acc, mult), PA_OK);
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
        CHECK_EQ(pa_dqlstm_step(h2, c2, xw, it % 4 ? bias : NULL, r, s8 ? PA_Q_S8 : PA_Q_U8,
                                zp ? rzp : NULL, scale, n, H, g, c2, h2, hq, acc, mult), PA_OK);
        CHECK(memcmp(c2, co, (size_t)(n * H) * sizeof *c2) == 0);
        CHECK(memcmp(h2, ho, (size_t)(n * H) * sizeof *h2) == 0);
        free(h), free(c), free(xw), free(bias), free(scale), free(g), free(co), free(ho);
        free(mult), free(r), free(hq), free(acc), free(rzp), free(q), free(c2), free(h2);
    }
}

static void test_step_invalid(void) {
    float f[64] = {0};
    uint8_t b[64] = {0};
    int32_t a[64];
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, b, PA_Q_S8, NULL, f, -1, 2, f, f, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, b, PA_Q_S8, NULL, f, 1, 0, f, f, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, NULL, PA_Q_S8, NULL, f, 1, 2, f, f, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(f, f, f, NULL, b, PA_Q_S32, NULL, f, 1, 2, f, f, f, b, a, f),
             PA_ERR_INVALID);
    CHECK_EQ(pa_dqlstm_step(NULL, NULL, NULL, NULL, NULL, PA_Q_S8, NULL, NULL, 0, 2, NULL, NULL,
                            NULL, NULL, NULL, NULL), PA_OK);
}

int main(void) {
    RUN(test_step_random);
    RUN(test_step_invalid);
    return pa_test_report();
}
