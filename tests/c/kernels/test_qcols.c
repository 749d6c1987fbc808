/* test_qcols.c -- the few-columns 8-bit matrix product (pa_qcols_pack,
 * pa_qcols_run; kernels/qcols.c) against an int64 reference: random m
 * (1-4 rows and runs of several tiles), k and n
 * (odd: tails of the 64-byte steps of k), int8 and uint8
 * weights with and without zero points, the extreme values (a_zp 0 and
 * 255 against weights -128 / 127 / 255).  Both tiles, the portable one
 * and the VNNI one (where the processor has it), bit for bit, and the
 * public run; bad arguments refused.  Run plain and under ASan + UBSan. */
#include "pyarena.h"
#include "kernels/qcols.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x51ED27A9C3B1F00DULL;

static int64_t rnd(int64_t lo, int64_t hi) {
    return lo + (int64_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static int vnni_cases;

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
    for (int64_t i = 0; i < m; i++)             /* the reference */
        for (int64_t j = 0; j < n; j++) {
            int64_t ref = 0;
            for (int64_t q = 0; q < k; q++) {
                int64_t wv = s8 ? (int8_t)w[q * n + j] : w[q * n + j];
                ref += ((int64_t)a[i * k + q] - a_zp) * (wv - zp[j]);
            }
            y[i * n + j] = (int32_t)ref;
        }
    size_t psize = pa_qcols_packed_size(k, n);
    int32_t *packed = malloc(psize), *y2 = malloc((size_t)(m * n + 1) * sizeof *y2);
    CHECK_EQ(pa_qcols_pack(w, s8 ? PA_Q_S8 : PA_Q_U8, with_zp ? zp : NULL, k, n, packed, psize),
             PA_OK);
    for (int isa = 0; isa < 2; isa++) {
        memset(y2, 0xA5, (size_t)(m * n) * sizeof *y2);
        pa_status_t st = _pa_qcols_run_isa(packed, a, m, a_zp, y2, isa);
        if (isa == 1 && st == PA_ERR_STATE)
            continue;               /* no VNNI here */
        CHECK_EQ(st, PA_OK);
        vnni_cases += isa;
        CHECK(memcmp(y, y2, (size_t)(m * n) * sizeof *y) == 0);
    }
    CHECK_EQ(pa_qcols_run(packed, a, m, a_zp, y2), PA_OK);
    CHECK(memcmp(y, y2, (size_t)(m * n) * sizeof *y) == 0);
    free(packed), free(y2);
    free(a), free(w), free(zp), free(y);
}

static void test_random(void) {
    for (int it = 0; it < 300; it++)
        check_case(rnd(1, it % 4 ? 9 : 20), rnd(0, it % 10 ? 200 : 1000),
                   rnd(1, it % 7 ? 4 : 40), it % 2, it % 3 == 0, it % 5 == 0);
    check_case(5, 32768, 2, 1, 1, 1);      /* the longest k: sums near 2^30 */
    check_case(3, 32768, 1, 0, 1, 1);
    printf("    %d cases on the VNNI tile\n", vnni_cases);
}

static void test_invalid(void) {
    uint8_t a[4] = {0}, w[8] = {0};
    int32_t y[8], zp[2] = {0, 300}, packed[512];
    CHECK(pa_qcols_packed_size(-1, 2) == 0 && pa_qcols_packed_size(40000, 2) == 0);
    CHECK(pa_qcols_packed_size(2, 2) > 0);
    size_t size = pa_qcols_packed_size(2, 2);
    CHECK_EQ(pa_qcols_pack(w, PA_Q_U8, NULL, 2, 2, packed, size - 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_pack(w, PA_Q_S32, NULL, 2, 2, packed, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_pack(w, PA_Q_U8, zp, 2, 2, packed, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_pack(w, PA_Q_U8, NULL, 2, 2, (uint8_t *)packed + 1, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_pack(NULL, PA_Q_U8, NULL, 2, 2, packed, size), PA_ERR_INVALID);
    memset(packed, 0, sizeof packed);
    CHECK_EQ(pa_qcols_run(packed, a, 1, 0, y), PA_ERR_INVALID);     /* not packed yet */
    CHECK_EQ(pa_qcols_pack(w, PA_Q_U8, NULL, 2, 2, packed, size), PA_OK);
    CHECK_EQ(pa_qcols_run(packed, a, 1, 0, y), PA_OK);
    CHECK_EQ(pa_qcols_run(packed, a, 0, 0, NULL), PA_OK);
    CHECK_EQ(pa_qcols_run(packed, a, 1, 256, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_run(packed, NULL, 1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_run(packed, a, 1, 0, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_run(packed, a, -1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_run(packed, (uint8_t *)y, 1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qcols_run(packed, a, 1, 0, packed + 20), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_random);
    RUN(test_invalid);
    return pa_test_report();
}
