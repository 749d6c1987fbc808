/* test_qrows.c -- the few-rows 8-bit matrix product (pa_qrows_pack,
 * pa_qrows_run; kernels/qrows.c) against an int64 reference: random m
 * (1, 2 and 3-6 rows: each VNNI tile, and runs of several chunks), k and n
 * (odd: tails of the groups of 4 k and of 128 columns), int8 and uint8
 * weights with and without zero points, the extreme values (a_zp 0 and
 * 255 against weights -128 / 127 / 255).  Both tiles, the portable one
 * and the VNNI one (where the processor has it), bit for bit, and the
 * public run; bad arguments refused.  Run plain and under ASan + UBSan. */
#include "pyarena.h"
#include "kernels/qrows.h"
#include "../testhelper.h"
#include "q8_product_case.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x51ED27A9C3B1F00DULL;

static int64_t rnd(int64_t lo, int64_t hi) {
    return q8_rnd(&seed, lo, hi);
}

static const q8_product_t PRODUCT = {pa_qrows_packed_size, pa_qrows_pack, _pa_qrows_run_isa,
                                      pa_qrows_run};
static int vnni_cases;

static void check_case(int64_t m, int64_t k, int64_t n, int s8, int with_zp, int extreme) {
    vnni_cases += q8_check_case(&PRODUCT, &seed, m, k, n, s8, with_zp, extreme);
}

static void test_random(void) {
    for (int it = 0; it < 300; it++)
        check_case(rnd(1, it % 4 ? 6 : 20), rnd(0, it % 10 ? 70 : 600),
                   rnd(1, it % 7 ? 50 : 300), it % 2, it % 3 == 0, it % 5 == 0);
    printf("    %d cases on the VNNI tile\n", vnni_cases);
}

static void test_invalid(void) {
    uint8_t a[4] = {0}, w[8] = {0};
    int32_t y[8], zp[2] = {0, 300}, packed[512];
    CHECK(pa_qrows_packed_size(-1, 2) == 0 && pa_qrows_packed_size(40000, 2) == 0);
    CHECK(pa_qrows_packed_size(2, 2) > 0);
    size_t size = pa_qrows_packed_size(2, 2);
    CHECK_EQ(pa_qrows_pack(w, PA_Q_U8, NULL, 2, 2, packed, size - 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_pack(w, PA_Q_S32, NULL, 2, 2, packed, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_pack(w, PA_Q_U8, zp, 2, 2, packed, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_pack(w, PA_Q_U8, NULL, 2, 2, (uint8_t *)packed + 1, size), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_pack(NULL, PA_Q_U8, NULL, 2, 2, packed, size), PA_ERR_INVALID);
    memset(packed, 0, sizeof packed);
    CHECK_EQ(pa_qrows_run(packed, a, 1, 0, y), PA_ERR_INVALID);     /* not packed yet */
    CHECK_EQ(pa_qrows_pack(w, PA_Q_U8, NULL, 2, 2, packed, size), PA_OK);
    CHECK_EQ(pa_qrows_run(packed, a, 1, 0, y), PA_OK);
    CHECK_EQ(pa_qrows_run(packed, a, 0, 0, NULL), PA_OK);
    CHECK_EQ(pa_qrows_run(packed, a, 1, 256, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_run(packed, NULL, 1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_run(packed, a, 1, 0, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_run(packed, a, -1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_run(packed, (uint8_t *)y, 1, 0, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qrows_run(packed, a, 1, 0, packed + 20), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_random);
    RUN(test_invalid);
    return pa_test_report();
}
