/* test_nbits.c -- MatMulNBits from its packed blocks (kernels/nbits.c)
 * against a reference built from the definition: every value unpacked by
 * its bit position, W = (q - zero point) * scale; 2, 4 and 8 bits, zero
 * points packed, float or absent, K not a multiple of the block.  The
 * panel is W exactly (the same float32 arithmetic per value); the rows'
 * products within float32 summation error.  Bad arguments refused.  Run
 * plain and under ASan + UBSan. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0xA24BAED4963EE407ULL;

static double urand(void) { return (double)(pa_rand(&seed) >> 11) / 9007199254740992.0; }

/* The value at bit position `bit` of a little-endian bit stream. */
static int field(const uint8_t *p, int64_t bit, int bits) {
    return (p[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

static void test_rows_and_panel(void) {
    static const int BITS[3] = {2, 4, 8};
    for (int it = 0; it < 90; it++) {
        int bits = BITS[it % 3], zmode = (it / 3) % 3;    /* 0 none, 1 packed, 2 float */
        int64_t block = (int64_t)16 << (int)(urand() * 3), k = 1 + (int64_t)(urand() * 150);
        int64_t n = 1 + (int64_t)(urand() * 12), m = 1 + (int64_t)(urand() * 5);
        int64_t blocks = (k + block - 1) / block, rb = block * bits / 8;
        int64_t zb = (blocks * bits + 7) / 8;
        uint8_t *b = malloc((size_t)(n * blocks * rb)), *zu = malloc((size_t)(n * zb));
        float *sc = malloc((size_t)(n * blocks) * sizeof *sc), *zf = malloc((size_t)(n * blocks) * sizeof *zf);
        float *a = malloc((size_t)(m * k) * sizeof *a), *bias = malloc((size_t)n * sizeof *bias);
        float *y = malloc((size_t)(m * n) * sizeof *y), *p = malloc((size_t)(k * n) * sizeof *p);
        float *w = malloc((size_t)(n * k) * sizeof *w);
        for (int64_t i = 0; i < n * blocks * rb; i++)
            b[i] = (uint8_t)(urand() * 256);
        for (int64_t i = 0; i < n * zb; i++)
            zu[i] = (uint8_t)(urand() * 256);
        for (int64_t i = 0; i < n * blocks; i++)
            sc[i] = (float)(urand() * 0.2), zf[i] = (float)(urand() * 6 - 3);
        for (int64_t i = 0; i < m * k; i++)
            a[i] = (float)(urand() * 2 - 1);
        for (int64_t j = 0; j < n; j++)
            bias[j] = (float)(urand() - 0.5);
        for (int64_t j = 0; j < n; j++)         /* the reference W */
            for (int64_t t = 0; t < k; t++) {
                int64_t bi = t / block;
                float q = (float)field(b + (j * blocks + bi) * rb, (t % block) * bits, bits);
                float z = zmode == 2 ? zf[j * blocks + bi]
                          : zmode == 1 ? (float)field(zu + j * zb, bi * bits, bits)
                                       : (float)(1 << (bits - 1));
                w[j * k + t] = (q - z) * sc[j * blocks + bi];
            }
        const uint8_t *zpu = zmode == 1 ? zu : NULL;
        const float *zpf = zmode == 2 ? zf : NULL;
        int with_bias = it % 2;
        float *ws = malloc((size_t)(m * blocks * block) * sizeof *ws);
        CHECK_EQ(pa_nbits_rows(a, m, k, b, bits, block, sc, zpu, zpf, n, with_bias ? bias : NULL,
                               y, ws), PA_OK);
        free(ws);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double want = with_bias ? bias[j] : 0, mag = 0;
                for (int64_t t = 0; t < k; t++) {
                    want += (double)a[i * k + t] * w[j * k + t];
                    mag += fabs((double)a[i * k + t] * w[j * k + t]);
                }
                CHECK(fabs(want - y[i * n + j]) <= 1e-6 * (mag + 1));
            }
        /* a panel of some middle columns: W's rows exactly */
        int64_t n0 = (int64_t)(urand() * n), n1 = n0 + 1 + (int64_t)(urand() * (n - n0));
        CHECK_EQ(pa_nbits_panel(b, bits, block, k, sc, zpu, zpf, n, n0, n1, p), PA_OK);
        int same = memcmp(p, w + n0 * k, (size_t)((n1 - n0) * k) * sizeof(float)) == 0;
        CHECK(same);
        free(b), free(zu), free(sc), free(zf), free(a), free(bias), free(y), free(p), free(w);
    }
}

static void test_invalid(void) {
    float f[256] = {0};
    uint8_t u[256] = {0};
    CHECK_EQ(pa_nbits_rows(f, 1, 16, u, 3, 16, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(f, 1, 16, u, 4, 24, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(f, 1, 16, u, 4, 8, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(f, 65, 16, u, 4, 16, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(f, 1, 16, u, 4, 16, f, u, f, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(f, 1, 16, NULL, 4, 16, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(NULL, 1, 16, u, 4, 16, f, NULL, NULL, 1, NULL, f, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_rows(NULL, 0, 16, u, 4, 16, f, NULL, NULL, 1, NULL, NULL, f), PA_OK);
    CHECK_EQ(pa_nbits_rows(f, 1, 16, u, 4, 16, f, NULL, NULL, 1, NULL, f, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_panel(u, 4, 16, 16, f, NULL, NULL, 4, 3, 2, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_panel(u, 4, 16, 16, f, NULL, NULL, 4, 0, 5, f), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_panel(u, 4, 16, 16, f, NULL, NULL, 4, 0, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_nbits_panel(u, 4, 16, 0, f, NULL, NULL, 4, 0, 4, f), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_rows_and_panel);
    RUN(test_invalid);
    return pa_test_report();
}
