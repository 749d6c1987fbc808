/* test_qrows.c -- the few-rows 8-bit matrix product (kernels/qrows.c)
 * against an int64 reference: random m, k, n (tails of the 16-lane loop
 * and of the four-row unroll), int8 and uint8 weights with and without
 * zero points, the extreme values (a_zp 0 and 255 against weights -128 /
 * 127 / 255), bad arguments refused.  Run plain and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>

static unsigned long long seed = 0x51ED27A9C3B1F00DULL;

static int64_t rnd(int64_t lo, int64_t hi) {
    return lo + (int64_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static void check_case(int64_t m, int64_t k, int64_t n, int s8, int with_zp, int extreme) {
    uint8_t *a = malloc((size_t)(m * k + 1));
    uint8_t *w = malloc((size_t)(k * n + 1));
    int32_t *zp = malloc((size_t)(n + 1) * sizeof *zp), *y = malloc((size_t)(m * n + 1) * sizeof *y);
    int32_t a_zp = extreme ? (int32_t)(rnd(0, 1) * 255) : (int32_t)rnd(0, 255);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = extreme ? (uint8_t)(rnd(0, 1) * 255) : (uint8_t)rnd(0, 255);
    for (int64_t i = 0; i < k * n; i++)
        w[i] = extreme ? (uint8_t)(s8 ? (rnd(0, 1) ? 0x80 : 0x7F) : 255 * rnd(0, 1))
                       : (uint8_t)rnd(0, 255);
    for (int64_t j = 0; j < n; j++)
        zp[j] = with_zp ? (int32_t)(s8 ? rnd(-128, 127) : rnd(0, 255)) : 0;
    CHECK_EQ(pa_qmatmul_rows(a, m, k, a_zp, w, s8 ? PA_Q_S8 : PA_Q_U8, with_zp ? zp : NULL, n, y),
             PA_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t ref = 0;
            for (int64_t q = 0; q < k; q++) {
                int64_t wv = s8 ? (int8_t)w[q * n + j] : w[q * n + j];
                ref += ((int64_t)a[i * k + q] - a_zp) * (wv - zp[j]);
            }
            CHECK(y[i * n + j] == ref);
        }
    free(a), free(w), free(zp), free(y);
}

static void test_random(void) {
    for (int it = 0; it < 300; it++)
        check_case(rnd(1, 5), rnd(0, it % 10 ? 70 : 600), rnd(1, it % 7 ? 50 : 300), it % 2,
                   it % 3 == 0, it % 5 == 0);
}

static void test_invalid(void) {
    uint8_t a[4] = {0}, w[4] = {0};
    int32_t y[4], zp[2] = {0, 300};
    CHECK_EQ(pa_qmatmul_rows(a, 1, 2, 0, w, PA_Q_S32, NULL, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, -1, 2, 0, w, PA_Q_U8, NULL, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, 1, 2, 256, w, PA_Q_U8, NULL, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, 1, 2, 0, w, PA_Q_U8, zp, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(NULL, 1, 2, 0, w, PA_Q_U8, NULL, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, 1, 2, 0, w, PA_Q_U8, NULL, 2, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, 1, 40000, 0, w, PA_Q_U8, NULL, 2, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmatmul_rows(a, 0, 2, 0, w, PA_Q_U8, NULL, 2, y), PA_OK);
    CHECK_EQ(pa_qmatmul_rows((uint8_t *)y, 1, 2, 0, w, PA_Q_U8, NULL, 2, y), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_random);
    RUN(test_invalid);
    return pa_test_report();
}
