/* test_pool_mlas.c -- pa_avgpool2d_ordered (kernels/pool_mlas.c): MLAS's
 * summation orders against one-output-at-a-time references written from
 * the banner's description, bit for bit (memcmp), on random geometry (pads,
 * strides, ceil-mode overhang, count_include_pad), both layouts, values of
 * many magnitudes and -0.0; the call records (PA_CALL_AVGPOOL_ORDERED,
 * PA_CALL_QAVGPOOL) give their kernel's bytes; bad input refused. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;

static int32_t irand(int32_t lo, int32_t hi) {
    return lo + (int32_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

/* Values of many magnitudes, 1 in 10 -0.0f, 1 in 20 +0.0f. */
static void fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int k = irand(0, 19);
        float m = (float)irand(-1000000, 1000000) / 1000.0f;
        x[i] = k < 2 ? -0.0f : k == 2 ? 0.0f : m * powf(10.0f, (float)irand(-3, 3));
    }
}

static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p0, int64_t p1, int ceil) {
    int64_t span = n + p0 + p1 - k;
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    return ceil && (o - 1) * s >= n + p0 ? o - 1 : o;
}

static int64_t at(const pa_pool2d_t *p, int64_t n, int64_t c, int64_t r, int64_t q, int64_t h,
                  int64_t w) {
    return p->layout == PA_LAYOUT_NHWC ? ((n * h + r) * w + q) * p->c + c
                                       : ((n * p->c + c) * h + r) * w + q;
}

/* The taps of output (oh, ow) of channel c, in order, from the first. */
static float ref_taps(const pa_pool2d_t *p, const float *x, int64_t n, int64_t c, int64_t oh,
                      int64_t ow) {
    float acc = 0.0f;
    for (int64_t i = 0; i < p->kh; i++)
        for (int64_t j = 0; j < p->kw; j++) {
            int64_t r = oh * p->sh - p->pad_top + i, q = ow * p->sw - p->pad_left + j;
            float v = r >= 0 && r < p->h && q >= 0 && q < p->w ? x[at(p, n, c, r, q, p->h, p->w)]
                                                               : 0.0f;
            acc = i == 0 && j == 0 ? v : acc + v;
        }
    int64_t ch = 0, cw = 0;
    for (int64_t i = 0; i < p->kh; i++) {
        int64_t r = oh * p->sh - p->pad_top + i;
        ch += p->count_include_pad ? (r >= -p->pad_top && r < p->h + p->pad_bottom)
                                   : (r >= 0 && r < p->h);
    }
    for (int64_t j = 0; j < p->kw; j++) {
        int64_t q = ow * p->sw - p->pad_left + j;
        cw += p->count_include_pad ? (q >= -p->pad_left && q < p->w + p->pad_right)
                                   : (q >= 0 && q < p->w);
    }
    return acc / (float)(ch * cw > 0 ? ch * cw : 1);
}

static float ref_lanes(const pa_pool2d_t *p, const float *x, int64_t n, int64_t c) {
    const int64_t hw = p->h * p->w, n4 = hw / 4 * 4;
    float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t i = 0; i < n4; i++) {
        float v = x[at(p, n, c, i / p->w, i % p->w, p->h, p->w)];
        l[i % 4] = i < 4 ? v : l[i % 4] + v;
    }
    float s = (l[0] + l[2]) + (l[1] + l[3]);
    for (int64_t i = n4; i < hw; i++)
        s = s + x[at(p, n, c, i / p->w, i % p->w, p->h, p->w)];
    return s / (float)hw;
}

static pa_pool2d_t rand_pool(int round, int global) {
    pa_pool2d_t p;
    memset(&p, 0, sizeof p);
    p.layout = round % 2 ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
    p.n = irand(1, 2);
    p.c = round % 9 ? irand(1, 20) : irand(250, 300);
    p.h = irand(1, 12);
    p.w = irand(1, round % 13 ? 14 : 700);
    if (global) {
        p.kh = p.h;
        p.kw = p.w;
        p.sh = p.sw = 1;
        p.h_out = p.w_out = 1;
        return p;
    }
    p.kh = irand(1, (int32_t)p.h);
    p.kw = irand(1, (int32_t)(p.w < 9 ? p.w : 9));
    p.pad_top = irand(0, (int32_t)p.kh - 1);
    p.pad_bottom = irand(0, (int32_t)p.kh - 1);
    p.pad_left = irand(0, (int32_t)p.kw - 1);
    p.pad_right = irand(0, (int32_t)p.kw - 1);
    p.sh = irand(1, 3);
    p.sw = irand(1, 3);
    int ceil = irand(0, 1);
    p.h_out = out_size(p.h, p.kh, p.sh, p.pad_top, p.pad_bottom, ceil);
    p.w_out = out_size(p.w, p.kw, p.sw, p.pad_left, p.pad_right, ceil);
    p.count_include_pad = irand(0, 1);
    return p;
}

static void check_order(pa_pool_order_t order, int rounds) {
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
        pa_pool2d_t p = rand_pool(round, order == PA_POOL_ORDER_LANES);
        int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.h_out * p.w_out;
        float *x = malloc((size_t)nx * sizeof *x), *y = malloc((size_t)ny * sizeof *y);
        fill(x, nx);
        CHECK_EQ(pa_avgpool2d_ordered(&p, order, x, y, NULL), PA_OK);
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t c = 0; c < p.c; c++)
                for (int64_t r = 0; r < p.h_out; r++)
                    for (int64_t q = 0; q < p.w_out; q++) {
                        float ref = order == PA_POOL_ORDER_LANES ? ref_lanes(&p, x, n, c)
                                                                 : ref_taps(&p, x, n, c, r, q);
                        float got = y[at(&p, n, c, r, q, p.h_out, p.w_out)];
                        bad += memcmp(&ref, &got, sizeof ref) != 0;
                    }
        free(x);
        free(y);
    }
    CHECK_EQ(bad, 0);
}

static void test_taps_match_reference(void) { check_order(PA_POOL_ORDER_TAPS, 300); }

static void test_lanes_match_reference(void) { check_order(PA_POOL_ORDER_LANES, 200); }

static void test_by_hand(void) {
    /* lanes: (1e8 + -1e8) + (1 + 1) = 2, + 3 = 5, / 5 = 1; the taps in
     * order lose the first 1: 1e8 + 1 = 1e8, - 1e8 = 0, + 1 + 3 = 4, / 5 */
    float x[5] = {1e8f, 1.0f, -1e8f, 1.0f, 3.0f}, y[2];
    pa_pool2d_t g = {PA_LAYOUT_NCHW, 1, 1, 1, 5, 1, 1, 1, 5, 1, 1, 0, 0, 0, 0, 0};
    CHECK_EQ(pa_avgpool2d_ordered(&g, PA_POOL_ORDER_LANES, x, y, NULL), PA_OK);
    CHECK(y[0] == 1.0f);
    CHECK_EQ(pa_avgpool2d_ordered(&g, PA_POOL_ORDER_TAPS, x, y, NULL), PA_OK);
    CHECK(y[0] == 0.8f);
    /* taps: -0.0 stays -0.0 without pads, a pad makes it +0.0 */
    float z[2] = {-0.0f, -0.0f};
    pa_pool2d_t t = {PA_LAYOUT_NCHW, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    CHECK_EQ(pa_avgpool2d_ordered(&t, PA_POOL_ORDER_TAPS, z, y, NULL), PA_OK);
    CHECK(signbit(y[0]) && signbit(y[1]));
    t.w_out = 3;
    t.kw = 2;
    t.pad_left = t.pad_right = 1;
    float y3[3];
    CHECK_EQ(pa_avgpool2d_ordered(&t, PA_POOL_ORDER_TAPS, z, y3, NULL), PA_OK);
    CHECK(!signbit(y3[0]) && signbit(y3[1]) && !signbit(y3[2]));
}

static void test_refuses_bad_input(void) {
    float x[16] = {0}, y[16];
    pa_pool2d_t p = {PA_LAYOUT_NCHW, 1, 1, 4, 4, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0};
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_TAPS, x, y, NULL), PA_OK);
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_KERNEL, x, y, NULL), PA_OK);
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_LANES, x, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_avgpool2d_ordered(&p, (pa_pool_order_t)3, x, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_avgpool2d_ordered(&p, (pa_pool_order_t)-1, x, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_avgpool2d_ordered(NULL, PA_POOL_ORDER_TAPS, x, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_TAPS, NULL, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_TAPS, x, NULL, NULL), PA_ERR_INVALID);
    pa_pool2d_t q = p;
    q.sh = 0;
    CHECK_EQ(pa_avgpool2d_ordered(&q, PA_POOL_ORDER_TAPS, x, y, NULL), PA_ERR_INVALID);
    q = p;
    q.kw = 3000;        /* an NCHW row past the block's buffer */
    q.w = 3000;
    q.w_out = 1;
    float *wide = calloc(4 * 3000, sizeof *wide);
    CHECK_EQ(pa_avgpool2d_ordered(&q, PA_POOL_ORDER_TAPS, wide, y, NULL), PA_ERR_INVALID);
    q.layout = PA_LAYOUT_NHWC;
    CHECK_EQ(pa_avgpool2d_ordered(&q, PA_POOL_ORDER_TAPS, wide, y, NULL), PA_OK);
    free(wide);
    q = p;
    q.h_out = q.w_out = 1;
    q.kh = q.kw = 4;
    q.pad_top = 1;      /* a global window with a pad */
    CHECK_EQ(pa_avgpool2d_ordered(&q, PA_POOL_ORDER_LANES, x, y, NULL), PA_ERR_INVALID);
}

static void test_call_records(void) {
    pa_pool2d_t p = rand_pool(3, 0);
    int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.h_out * p.w_out;
    float *x = malloc((size_t)nx * sizeof *x), *y = malloc((size_t)ny * sizeof *y),
          *y2 = malloc((size_t)ny * sizeof *y2);
    fill(x, nx);
    CHECK_EQ(pa_avgpool2d_ordered(&p, PA_POOL_ORDER_TAPS, x, y, NULL), PA_OK);
    pa_call_t call;
    memset(&call, 0, sizeof call);
    call.kind = PA_CALL_AVGPOOL_ORDERED;
    call.params = &p;
    call.a = x;
    call.y = y2;
    call.i[0] = PA_POOL_ORDER_TAPS;
    size_t failed = 9;
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_OK);
    CHECK_EQ(failed, 1);
    CHECK(memcmp(y, y2, (size_t)ny * sizeof *y) == 0);
    call.i[0] = 7;
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_ERR_INVALID);
    /* the 8-bit average pool's record */
    pa_qavgpool_t q;
    memset(&q, 0, sizeof q);
    q.type = PA_Q_S8;
    q.layout = PA_LAYOUT_NHWC;
    q.n = 1;
    q.c = 3;
    q.h = q.w = 4;
    q.out_h = q.out_w = 2;
    q.kernel_h = q.kernel_w = q.stride_h = q.stride_w = 2;
    q.x_scale = q.y_scale = 1.0f;
    q.integer_average = 1;
    q.y_min = -128;
    q.y_max = 127;
    int8_t qx[48], qy[12], qy2[12];
    for (int i = 0; i < 48; i++)
        qx[i] = (int8_t)irand(-128, 127);
    CHECK_EQ(pa_qavgpool(&q, qx, qy), PA_OK);
    memset(&call, 0, sizeof call);
    call.kind = PA_CALL_QAVGPOOL;
    call.params = &q;
    call.a = qx;
    call.y = qy2;
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_OK);
    CHECK(memcmp(qy, qy2, sizeof qy) == 0);
    free(x);
    free(y);
    free(y2);
}

int main(void) {
    RUN(test_taps_match_reference);
    RUN(test_lanes_match_reference);
    RUN(test_by_hand);
    RUN(test_refuses_bad_input);
    RUN(test_call_records);
    return pa_test_report();
}
