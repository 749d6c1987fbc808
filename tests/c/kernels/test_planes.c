/* test_planes.c -- pa_transpose_planes: NCHW <-> NHWC of 4-byte words,
 * the AVX-512 shuffles and the portable copy each equal to an index-by-
 * index reference (the bits, NaN words included), for 1 to 16 channels,
 * odd pixel counts (a short last block), several images, one and three
 * threads, and as a PA_CALL_TRANSPOSE_PLANES record; bad arguments are
 * refused. */
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x13198A2E03707344ULL;

static uint32_t *wbuf(size_t n) {
    uint32_t *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)(pa_rand(&seed) >> 32);
    return p;
}

static void check_geometry(int64_t n, int64_t c, int64_t hw, pa_workers_t *pool) {
    const size_t total = (size_t)(n * c * hw);
    uint32_t *x = wbuf(total), *want = wbuf(total), *y = wbuf(total);
    for (int to_nhwc = 0; to_nhwc < 2; to_nhwc++) {
        for (int64_t b = 0; b < n; b++)
            for (int64_t k = 0; k < c; k++)
                for (int64_t p = 0; p < hw; p++) {
                    const int64_t nchw = (b * c + k) * hw + p, nhwc = (b * hw + p) * c + k;
                    if (to_nhwc)
                        want[nhwc] = x[nchw];
                    else
                        want[nchw] = x[nhwc];
                }
        for (int avx = 0; avx < 2; avx++)
            for (int t = 0; t < 2; t++) {
                memset(y, 0xA5, total * sizeof *y);
                CHECK_EQ(_pa_transpose_planes_isa(x, y, n, c, hw, to_nhwc, t ? pool : NULL, avx),
                         PA_OK);
                CHECK(memcmp(y, want, total * sizeof *y) == 0);
            }
        memset(y, 0xA5, total * sizeof *y);
        pa_call_t call = {PA_CALL_TRANSPOSE_PLANES, NULL, NULL, x, NULL, y,
                          {n, c, hw, to_nhwc}, NULL};
        CHECK_EQ(pa_calls_run(&call, 1, pool, NULL), PA_OK);
        CHECK(memcmp(y, want, total * sizeof *y) == 0);
    }
    free(x), free(want), free(y);
}

static void test_planes_equal_the_reference(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    static const int64_t geo[][3] = {{1, 1, 7},   {1, 2, 16},  {1, 3, 17},   {2, 3, 255},
                                     {1, 4, 33},  {3, 4, 16},  {1, 3, 1},    {1, 5, 100},
                                     {1, 16, 31}, {2, 7, 513}, {1, 3, 43265}, {1, 4, 40000}};
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++)
        check_geometry(geo[g][0], geo[g][1], geo[g][2], pool);
    pa_workers_destroy(pool);
}

static void test_planes_refuse_bad_arguments(void) {
    uint32_t a[12] = {0}, b[12] = {0};
    CHECK_EQ(pa_transpose_planes(a, b, 1, 3, 4, 1, NULL), PA_OK);
    CHECK_EQ(pa_transpose_planes(a, b, -1, 3, 4, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(a, b, 1, -3, 4, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(a, b, 1, 3, -4, 0, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(a, a + 1, 1, 3, 4, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(a, b, INT64_MAX, 2, 2, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(a, b, (int64_t)1 << 40, 1 << 20, 1, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(NULL, b, 1, 3, 4, 1, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_transpose_planes(NULL, NULL, 0, 3, 4, 1, NULL), PA_OK);
    pa_call_t call = {PA_CALL_TRANSPOSE_PLANES, NULL, NULL, a, NULL, b, {1, 3, -4, 1}, NULL};
    CHECK_EQ(pa_calls_run(&call, 1, NULL, NULL), PA_ERR_INVALID);
}

/* The vector shuffles are for 2-4 channels where AVX-512 runs. */
static void test_planes_vectorised(void) {
    const int avx = PA_AVX512_BUILT && _pa_avx512_usable();
    CHECK_EQ(pa_transpose_planes_vectorised(1), 0);
    CHECK_EQ(pa_transpose_planes_vectorised(2), avx);
    CHECK_EQ(pa_transpose_planes_vectorised(3), avx);
    CHECK_EQ(pa_transpose_planes_vectorised(4), avx);
    CHECK_EQ(pa_transpose_planes_vectorised(5), 0);
    CHECK_EQ(pa_transpose_planes_vectorised(-3), 0);
}

int main(void) {
    RUN(test_planes_vectorised);
    RUN(test_planes_equal_the_reference);
    RUN(test_planes_refuse_bad_arguments);
    return pa_test_report();
}
