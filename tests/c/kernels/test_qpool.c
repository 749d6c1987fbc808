/* test_qpool.c -- QLinearSoftmax (kernels/qsoftmax.c) and
 * QLinearAveragePool (kernels/qavgpool.c; and its 8-bit MaxPool) against one-element-at-a-time
 * references of onnxruntime's formulas (the kernels' banners), on random
 * shapes, axes, layouts, pads, strides and both 8-bit types; values worked
 * out by hand; bad input refused with PA_ERR_INVALID.  TFLite's integer
 * average (kernels/qavgpool_int.c) against its reference kernel's C. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x2545F4914F6CDD1DULL;

static int32_t irand(int32_t lo, int32_t hi) {
    return lo + (int32_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static float frand(float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0);
}

static int32_t get(const void *p, int64_t i, int s8) {
    return s8 ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

static void fill(void *p, int64_t n, int s8) {
    for (int64_t i = 0; i < n; i++) {
        if (s8)
            ((int8_t *)p)[i] = (int8_t)irand(-128, 127);
        else
            ((uint8_t *)p)[i] = (uint8_t)irand(0, 255);
    }
}

/* -- softmax ---------------------------------------------------------- */

/* One element of row (o, j) of x (outer, n, inner), onnxruntime's way. */
static int32_t ref_softmax(const void *x, int64_t o, int64_t k, int64_t j, int64_t n,
                           int64_t inner, const float *tab, float y_scale, int32_t zp,
                           int s8) {
    int32_t m = -1000;
    for (int64_t t = 0; t < n; t++) {
        int32_t v = get(x, (o * n + t) * inner + j, s8);
        m = v > m ? v : m;
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n; t++)
        sum += tab[m - get(x, (o * n + t) * inner + j, s8)];
    float ys = floorf(1.0f / y_scale);
    float q = tab[m - get(x, (o * n + k) * inner + j, s8)] / sum;
    q = q * ys;
    int32_t v = (int32_t)nearbyintf(q) + zp;
    int32_t hi = s8 ? 127 : 255;
    return v > hi ? hi : v;
}

static void test_softmax_matches_reference(void) {
    float tab[256];
    for (int round = 0; round < 120; round++) {
        int s8 = round & 1;
        int64_t outer = irand(1, 4), n = irand(1, round % 5 ? 20 : 300),
                inner = round % 3 ? irand(1, 6) : (round % 7 ? 1 : irand(250, 270));
        float xs = frand(0.001f, 0.5f), ys = round % 4 ? frand(0.001f, 0.3f) : 1.0f / 256;
        int32_t zp = s8 ? irand(-128, 127) : irand(0, 255);
        int64_t total = outer * n * inner;
        void *x = malloc((size_t)total), *y = malloc((size_t)total);
        fill(x, total, s8);
        CHECK_EQ(pa_qsoftmax_table(xs, n, tab), PA_OK);
        CHECK_EQ(pa_qsoftmax(s8 ? PA_Q_S8 : PA_Q_U8, tab, x, y, outer, n, inner, ys, zp),
                 PA_OK);
        int bad = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < n; k++)
                for (int64_t j = 0; j < inner; j++)
                    bad += get(y, (o * n + k) * inner + j, s8) !=
                           ref_softmax(x, o, k, j, n, inner, tab, ys, zp, s8);
        CHECK_EQ(bad, 0);
        free(x);
        free(y);
    }
}

static void test_softmax_by_hand(void) {
    /* equal values: each 1/4 of Ys = floor(1 / (1/256)) = 256 -> 64 */
    float tab[256];
    CHECK_EQ(pa_qsoftmax_table(0.1f, 4, tab), PA_OK);
    CHECK(tab[0] >= 1.0f);
    for (int d = 1; d < 256; d++)
        CHECK(tab[d] <= tab[d - 1]);
    uint8_t x[4] = {7, 7, 7, 7}, y[4];
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, x, y, 1, 4, 1, 1.0f / 256, 0), PA_OK);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(y[i], 64);
    /* one dominant int8 value: 256 / (1 + tiny) rounds to 256, + (-128)
     * saturates at 127; the others give 0 + (-128) */
    int8_t sx[3] = {-100, -90, 127}, sy[3];
    CHECK_EQ(pa_qsoftmax_table(0.5f, 3, tab), PA_OK);
    CHECK_EQ(pa_qsoftmax(PA_Q_S8, tab, sx, sy, 1, 3, 1, 1.0f / 256, -128), PA_OK);
    CHECK_EQ(sy[2], 127);
    CHECK_EQ(sy[0], -128);
    /* a softmax over the inner axis: columns are rows */
    uint8_t cx[6] = {0, 200, 0, 200, 0, 200}, cy[6];   /* (1, 3, 2): per column equal */
    CHECK_EQ(pa_qsoftmax_table(0.1f, 3, tab), PA_OK);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, cx, cy, 1, 3, 2, 1.0f / 255, 0), PA_OK);
    for (int i = 0; i < 6; i++)
        CHECK_EQ(cy[i], 85);     /* floor(255.0000x) = 254 or 255; /3 -> 85 */
}

static void test_softmax_refuses_bad_input(void) {
    float tab[256];
    uint8_t x[4] = {0}, y[4];
    CHECK_EQ(pa_qsoftmax_table(0.0f, 4, tab), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax_table(NAN, 4, tab), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax_table(0.1f, 0, tab), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax_table(0.1f, 4, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax_table(0.1f, 4, tab), PA_OK);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, NULL, x, y, 1, 4, 1, 0.1f, 0), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, NULL, y, 1, 4, 1, 0.1f, 0), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_S32, tab, x, y, 1, 4, 1, 0.1f, 0), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, x, y, -1, 4, 1, 0.1f, 0), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, x, y, 1, 4, 1, -0.1f, 0), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, x, y, 1, 4, 1, 0.1f, 256), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_S8, tab, x, y, 1, 4, 1, 0.1f, 128), PA_ERR_INVALID);
    CHECK_EQ(pa_qsoftmax(PA_Q_U8, tab, x, y, 0, 4, 1, 0.1f, 0), PA_OK);
}

/* -- average pool ----------------------------------------------------- */

static int32_t ref_round_clamp(float t, int32_t lo, int32_t hi) {
    if (!(t < 2147483648.0f) || !(t > -2147483648.0f))
        return lo;
    int32_t v = (int32_t)nearbyintf(t);
    return v < lo ? lo : v > hi ? hi : v;
}

static int64_t xi(const pa_qavgpool_t *p, int64_t n, int64_t c, int64_t r, int64_t q) {
    return p->layout == PA_LAYOUT_NHWC ? ((n * p->h + r) * p->w + q) * p->c + c
                                       : ((n * p->c + c) * p->h + r) * p->w + q;
}

static int32_t ref_pool(const pa_qavgpool_t *p, const void *x, int64_t n, int64_t c,
                        int64_t oh, int64_t ow, int s8) {
    int32_t lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    if (p->kernel_h == p->h && p->kernel_w == p->w && !p->pad_top && !p->pad_left &&
        !p->pad_bottom && !p->pad_right) {
        int32_t sum = 0;
        for (int64_t r = 0; r < p->h; r++)
            for (int64_t q = 0; q < p->w; q++)
                sum += get(x, xi(p, n, c, r, q), s8) - p->x_zero_point;
        float scale = p->x_scale / (p->y_scale * (float)(p->h * p->w));
        float t = (float)sum * scale;
        return ref_round_clamp(t + 0.0f, lo - p->y_zero_point, hi - p->y_zero_point) +
               p->y_zero_point;
    }
    int64_t hs = oh * p->stride_h - p->pad_top, ws = ow * p->stride_w - p->pad_left;
    int64_t he = hs + p->kernel_h < p->h ? hs + p->kernel_h : p->h;
    int64_t we = ws + p->kernel_w < p->w ? ws + p->kernel_w : p->w;
    hs = hs > 0 ? hs : 0;
    ws = ws > 0 ? ws : 0;
    float sum = 0.0f;
    for (int64_t r = hs; r < he; r++)
        for (int64_t q = ws; q < we; q++)
            sum += p->x_scale * (float)(get(x, xi(p, n, c, r, q), s8) - p->x_zero_point);
    int64_t cnt = p->count_include_pad ? p->kernel_h * p->kernel_w : (he - hs) * (we - ws);
    float avg = sum / (float)cnt;
    return ref_round_clamp(avg / p->y_scale + (float)p->y_zero_point, lo, hi);
}

static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p0, int64_t p1, int ceil) {
    int64_t span = n + p0 + p1 - k;
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    return ceil && (o - 1) * s >= n + p0 ? o - 1 : o;
}

static void test_avgpool_matches_reference(void) {
    for (int round = 0; round < 200; round++) {
        int s8 = round & 1;
        pa_qavgpool_t p;
        memset(&p, 0, sizeof p);
        p.type = s8 ? PA_Q_S8 : PA_Q_U8;
        p.layout = round % 3 ? PA_LAYOUT_NCHW : PA_LAYOUT_NHWC;
        p.n = irand(1, 2);
        p.c = round % 11 ? irand(1, 9) : irand(250, 300);
        p.h = irand(1, 9);
        p.w = irand(1, round % 13 ? 12 : 600);
        p.kernel_h = irand(1, (int32_t)p.h);
        p.kernel_w = irand(1, (int32_t)(p.w < 9 ? p.w : 9));
        if (round % 10 == 0) {
            p.kernel_h = p.h;
            p.kernel_w = p.w;
        } else {
            p.pad_top = irand(0, (int32_t)p.kernel_h - 1);
            p.pad_bottom = irand(0, (int32_t)p.kernel_h - 1);
            p.pad_left = irand(0, (int32_t)p.kernel_w - 1);
            p.pad_right = irand(0, (int32_t)p.kernel_w - 1);
        }
        p.stride_h = irand(1, 3);
        p.stride_w = irand(1, 3);
        int ceil = irand(0, 1);
        p.out_h = out_size(p.h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil);
        p.out_w = out_size(p.w, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil);
        p.count_include_pad = irand(0, 1);
        p.x_scale = frand(0.001f, 0.5f);
        p.y_scale = frand(0.001f, 0.5f);
        p.x_zero_point = s8 ? irand(-128, 127) : irand(0, 255);
        p.y_zero_point = s8 ? irand(-128, 127) : irand(0, 255);
        int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.out_h * p.out_w;
        void *x = malloc((size_t)nx), *y = malloc((size_t)ny);
        fill(x, nx, s8);
        CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
        int bad = 0;
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t c = 0; c < p.c; c++)
                for (int64_t r = 0; r < p.out_h; r++)
                    for (int64_t q = 0; q < p.out_w; q++) {
                        int64_t yi = p.layout == PA_LAYOUT_NHWC
                                         ? ((n * p.out_h + r) * p.out_w + q) * p.c + c
                                         : ((n * p.c + c) * p.out_h + r) * p.out_w + q;
                        bad += get(y, yi, s8) != ref_pool(&p, x, n, c, r, q, s8);
                    }
        CHECK_EQ(bad, 0);
        free(x);
        free(y);
    }
}

/* TFLite's AVERAGE_POOL_2D as its reference kernel writes it
 * (reference_integer_ops/pooling.h): raw values, C's division. */
static int32_t ref_int_pool(const pa_qavgpool_t *p, const void *x, int64_t n, int64_t c,
                            int64_t oh, int64_t ow, int s8) {
    int64_t hs = oh * p->stride_h - p->pad_top, ws = ow * p->stride_w - p->pad_left;
    int32_t acc = 0, cnt = 0;
    for (int64_t r = hs; r < hs + p->kernel_h; r++)
        for (int64_t q = ws; q < ws + p->kernel_w; q++)
            if (r >= 0 && r < p->h && q >= 0 && q < p->w) {
                acc += get(x, xi(p, n, c, r, q), s8);
                cnt++;
            }
    acc = acc > 0 ? (acc + cnt / 2) / cnt : (acc - cnt / 2) / cnt;
    acc = acc < p->y_min ? p->y_min : acc;
    return acc > p->y_max ? p->y_max : acc;
}

static void test_avgpool_integer_matches_reference(void) {
    for (int round = 0; round < 300; round++) {
        int s8 = round & 1;
        pa_qavgpool_t p;
        memset(&p, 0, sizeof p);
        p.type = s8 ? PA_Q_S8 : PA_Q_U8;
        p.layout = round % 3 ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
        p.n = irand(1, 2);
        p.c = round % 7 ? irand(1, 20) : irand(250, 600);
        p.h = irand(1, 9);
        p.w = irand(1, round % 13 ? 12 : 300);
        p.kernel_h = irand(1, (int32_t)p.h);
        p.kernel_w = irand(1, (int32_t)(p.w < 9 ? p.w : 9));
        if (round % 10 == 0) {
            p.kernel_h = p.h;   /* whole image: still the integer average */
            p.kernel_w = p.w;
        } else {
            p.pad_top = irand(0, (int32_t)p.kernel_h - 1);
            p.pad_bottom = irand(0, (int32_t)p.kernel_h - 1);
            p.pad_left = irand(0, (int32_t)p.kernel_w - 1);
            p.pad_right = irand(0, (int32_t)p.kernel_w - 1);
        }
        p.stride_h = irand(1, 3);
        p.stride_w = irand(1, 3);
        int ceil = irand(0, 1);
        p.out_h = out_size(p.h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil);
        p.out_w = out_size(p.w, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil);
        p.count_include_pad = irand(0, 1);      /* (not read) */
        p.x_scale = frand(0.001f, 0.5f);
        p.y_scale = frand(0.001f, 0.5f);
        p.integer_average = 1;
        int32_t lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
        p.y_min = round % 4 ? lo : irand(lo, hi);
        p.y_max = round % 5 ? hi : irand(p.y_min, hi);
        int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.out_h * p.out_w;
        void *x = malloc((size_t)nx), *y = malloc((size_t)ny);
        fill(x, nx, s8);
        CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
        int bad = 0;
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t c = 0; c < p.c; c++)
                for (int64_t r = 0; r < p.out_h; r++)
                    for (int64_t q = 0; q < p.out_w; q++) {
                        int64_t yi = p.layout == PA_LAYOUT_NHWC
                                         ? ((n * p.out_h + r) * p.out_w + q) * p.c + c
                                         : ((n * p.c + c) * p.out_h + r) * p.out_w + q;
                        bad += get(y, yi, s8) != ref_int_pool(&p, x, n, c, r, q, s8);
                    }
        CHECK_EQ(bad, 0);
        free(x);
        free(y);
    }
}

static void test_avgpool_integer_by_hand(void) {
    /* windows of two: -5 / 2 = -2.5 -> -3, 3 / 2 = 1.5 -> 2, -1 / 2 -> -1 */
    pa_qavgpool_t p;
    memset(&p, 0, sizeof p);
    p.type = PA_Q_S8;
    p.layout = PA_LAYOUT_NHWC;
    p.n = p.c = p.h = 1;
    p.w = 8;
    p.out_h = 1;
    p.out_w = 4;
    p.kernel_h = 1;
    p.kernel_w = p.stride_w = 2;
    p.stride_h = 1;
    p.x_scale = p.y_scale = 1.0f;
    p.integer_average = 1;
    p.y_min = -128;
    p.y_max = 127;
    int8_t x[8] = {-3, -2, 1, 2, -128, 127, 5, 6}, y[4];
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[0], -3);
    CHECK_EQ(y[1], 2);
    CHECK_EQ(y[2], -1);
    CHECK_EQ(y[3], 6);
    p.y_max = 1;                    /* a fused activation's clamp */
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[1], 1);
    CHECK_EQ(y[3], 1);
    p.y_min = 2;                    /* refused: empty range */
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p.y_min = -129;                 /* outside the type */
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p.y_min = -128;
    p.integer_average = 2;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
}

static pa_qavgpool_t small_pool(void) {
    pa_qavgpool_t p;
    memset(&p, 0, sizeof p);
    p.type = PA_Q_U8;
    p.layout = PA_LAYOUT_NCHW;
    p.n = p.c = 1;
    p.h = p.w = 3;
    p.out_h = p.out_w = 3;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 1;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.x_scale = p.y_scale = 1.0f;
    return p;
}

static void test_avgpool_by_hand(void) {
    /* 3x3 of ones, pad 1: corners average 4 values (9 with the pad counted) */
    pa_qavgpool_t p = small_pool();
    uint8_t x[9], y[9];
    for (int i = 0; i < 9; i++)
        x[i] = 9;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[0], 9);
    CHECK_EQ(y[4], 9);
    p.count_include_pad = 1;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[0], 4);       /* 36 / 9 */
    CHECK_EQ(y[1], 6);       /* 54 / 9 */
    CHECK_EQ(y[4], 9);
    /* the whole image, no pad: the global pool's formula; 2.5 rounds to 2 */
    uint8_t g[4] = {1, 2, 3, 4}, gy[1];
    pa_qavgpool_t q = small_pool();
    q.h = q.w = q.kernel_h = q.kernel_w = 2;
    q.out_h = q.out_w = 1;
    q.pad_top = q.pad_left = q.pad_bottom = q.pad_right = 0;
    CHECK_EQ(pa_qavgpool(&q, g, gy), PA_OK);
    CHECK_EQ(gy[0], 2);
}

static void test_avgpool_refuses_bad_input(void) {
    uint8_t x[9] = {0}, y[9];
    pa_qavgpool_t p = small_pool();
    CHECK_EQ(pa_qavgpool(NULL, x, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qavgpool(&p, NULL, y), PA_ERR_INVALID);
    p.type = PA_Q_S32;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.stride_w = 0;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.out_w = 5;             /* the last window starts past the input */
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.pad_left = -1;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.y_scale = INFINITY;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.x_zero_point = 300;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.layout = (pa_layout_t)7;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.n = 0;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
}

static int32_t ref_max(const pa_qavgpool_t *p, const void *x, int64_t n, int64_t c,
                       int64_t oh, int64_t ow, int s8) {
    int32_t m = -1000;
    for (int64_t i = 0; i < p->kernel_h; i++)
        for (int64_t j = 0; j < p->kernel_w; j++) {
            int64_t r = oh * p->stride_h - p->pad_top + i, q = ow * p->stride_w - p->pad_left + j;
            if (r >= 0 && r < p->h && q >= 0 && q < p->w) {
                int32_t v = get(x, xi(p, n, c, r, q), s8);
                m = v > m ? v : m;
            }
        }
    return m;
}

/* pa_qmaxpool: the maximum of each window's input values, random
 * geometries in both layouts (wide rows and many channels cross the
 * chunks); refusals as the average pool's. */
static void test_maxpool_matches_reference(void) {
    for (int round = 0; round < 150; round++) {
        int s8 = round & 1;
        pa_qavgpool_t p;
        memset(&p, 0, sizeof p);
        p.type = s8 ? PA_Q_S8 : PA_Q_U8;
        p.layout = round % 3 ? PA_LAYOUT_NCHW : PA_LAYOUT_NHWC;
        p.n = irand(1, 2);
        p.c = round % 11 ? irand(1, 9) : irand(250, 300);
        p.h = irand(1, 9);
        p.w = irand(1, round % 13 ? 12 : 600);
        p.kernel_h = irand(1, (int32_t)p.h);
        p.kernel_w = irand(1, (int32_t)(p.w < 9 ? p.w : 9));
        p.pad_top = irand(0, (int32_t)p.kernel_h - 1);
        p.pad_bottom = irand(0, (int32_t)p.kernel_h - 1);
        p.pad_left = irand(0, (int32_t)p.kernel_w - 1);
        p.pad_right = irand(0, (int32_t)p.kernel_w - 1);
        p.stride_h = irand(1, 3);
        p.stride_w = irand(1, 3);
        int ceil = irand(0, 1);
        p.out_h = out_size(p.h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, ceil);
        p.out_w = out_size(p.w, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, ceil);
        int64_t nx = p.n * p.c * p.h * p.w, ny = p.n * p.c * p.out_h * p.out_w;
        void *x = malloc((size_t)nx), *y = malloc((size_t)ny);
        fill(x, nx, s8);
        CHECK_EQ(pa_qmaxpool(&p, x, y), PA_OK);
        int bad = 0;
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t c = 0; c < p.c; c++)
                for (int64_t r = 0; r < p.out_h; r++)
                    for (int64_t q = 0; q < p.out_w; q++) {
                        int64_t yi = p.layout == PA_LAYOUT_NHWC
                                         ? ((n * p.out_h + r) * p.out_w + q) * p.c + c
                                         : ((n * p.c + c) * p.out_h + r) * p.out_w + q;
                        bad += get(y, yi, s8) != ref_max(&p, x, n, c, r, q, s8);
                    }
        CHECK_EQ(bad, 0);
        free(x);
        free(y);
    }
    uint8_t x[9] = {0}, y[9];
    pa_qavgpool_t p = small_pool();
    p.x_scale = -1.0f;          /* unused by the max pool */
    CHECK_EQ(pa_qmaxpool(&p, x, y), PA_OK);
    p.out_w = 5;
    CHECK_EQ(pa_qmaxpool(&p, x, y), PA_ERR_INVALID);
    p = small_pool();
    p.pad_top = 3;
    CHECK_EQ(pa_qmaxpool(&p, x, y), PA_ERR_INVALID);
    CHECK_EQ(pa_qmaxpool(NULL, x, y), PA_ERR_INVALID);
}

/* A window wider than the row buffer (2048 columns) is refused but for the
 * whole-image window, which needs no buffer. */
static void test_avgpool_wide_windows(void) {
    enum { W = 3000 };
    uint8_t *x = calloc(W, 1), y[W];
    for (int i = 0; i < W; i++)
        x[i] = (uint8_t)(i % 7);
    pa_qavgpool_t p = small_pool();
    p.h = p.kernel_h = p.out_h = 1;
    p.w = W;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
    p.kernel_w = 2100;
    p.out_w = W - 2100 + 1;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_ERR_INVALID);
    p.kernel_w = 2048;
    p.out_w = W - 2048 + 1;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[0], ref_pool(&p, x, 0, 0, 0, 0, 0));
    CHECK_EQ(y[p.out_w - 1], ref_pool(&p, x, 0, 0, 0, p.out_w - 1, 0));
    p.kernel_w = W;
    p.out_w = 1;
    CHECK_EQ(pa_qavgpool(&p, x, y), PA_OK);
    CHECK_EQ(y[0], ref_pool(&p, x, 0, 0, 0, 0, 0));
    free(x);
}

int main(void) {
    RUN(test_softmax_matches_reference);
    RUN(test_softmax_by_hand);
    RUN(test_softmax_refuses_bad_input);
    RUN(test_avgpool_matches_reference);
    RUN(test_avgpool_by_hand);
    RUN(test_avgpool_refuses_bad_input);
    RUN(test_avgpool_wide_windows);
    RUN(test_avgpool_integer_matches_reference);
    RUN(test_avgpool_integer_by_hand);
    RUN(test_maxpool_matches_reference);
    return pa_test_report();
}
