/* test_kernels.c -- the native float32 kernels against naive references
 * (no Python): convolution over many random geometries (strides, pads,
 * dilations, groups, depthwise, both layouts, every activation), the
 * element-wise chains, pooling and resize; one and three threads must give
 * the same bits; bad arguments are refused.  Run plain and under
 * ASan + UBSan (make -C csrc sanitize), which also catches any read past a
 * tensor's end.  The NHWC pointwise tiles (AVX-512 where the processor
 * has it, the portable one) must give the same bits. */
#include "kernels/gemm_nhwc.h"
#include "kernels/internal.h"
#include "kernels/isa.h"
#include "kernels/qconv.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;

static int64_t rnd(int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static float frand(void) { return (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0 * 2 - 1); }

/* a malloc'ed buffer of exactly n floats, so ASan sees any overrun */
static float *fbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

static double act_ref(double v, const pa_act_params_t *a) {
    switch (a->kind) {
    case PA_ACT_RELU: return v < 0 ? 0 : v;
    case PA_ACT_CLIP: return v < a->alpha ? a->alpha : (v > a->beta ? a->beta : v);
    case PA_ACT_SIGMOID: return 1 / (1 + exp(-v));
    case PA_ACT_SILU: return v / (1 + exp(-v));
    case PA_ACT_HARDSWISH: return v * fmin(fmax(v + 3, 0), 6) / 6;
    case PA_ACT_HARDSIGMOID: return fmin(fmax(a->alpha * v + a->beta, 0), 1);
    case PA_ACT_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    default: return v;
    }
}

static pa_act_params_t random_act(void) {
    pa_act_params_t a = {(pa_act_t)rnd(0, 7), 0.0f, 6.0f};
    if (a.kind == PA_ACT_CLIP)
        a.alpha = -0.5f, a.beta = 0.75f;
    if (a.kind == PA_ACT_HARDSIGMOID)
        a.alpha = 0.2f, a.beta = 0.5f;
    return a;
}

static int64_t xidx(const pa_conv2d_t *c, int64_t n, int64_t ch, int64_t h, int64_t w) {
    return c->layout == PA_LAYOUT_NHWC ? ((n * c->h + h) * c->w + w) * c->c_in + ch
                                       : ((n * c->c_in + ch) * c->h + h) * c->w + w;
}

static int64_t yidx(const pa_conv2d_t *c, int64_t n, int64_t ch, int64_t h, int64_t w) {
    return c->layout == PA_LAYOUT_NHWC ? ((n * c->h_out + h) * c->w_out + w) * c->c_out + ch
                                       : ((n * c->c_out + ch) * c->h_out + h) * c->w_out + w;
}

/* Naive convolution in double; weight OHWI per group. Returns max |err|
 * relative to the magnitude of the terms. */
static double conv_check(const pa_conv2d_t *c, const float *x, const float *wt,
                         const float *b, const float *y) {
    int64_t cg = c->c_in / c->groups, cog = c->c_out / c->groups;
    double worst = 0;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t co = 0; co < c->c_out; co++)
            for (int64_t oh = 0; oh < c->h_out; oh++)
                for (int64_t ow = 0; ow < c->w_out; ow++) {
                    double s = b ? b[co] : 0, mag = fabs(s);
                    int64_t g = co / cog;
                    for (int64_t i = 0; i < c->kh; i++)
                        for (int64_t j = 0; j < c->kw; j++)
                            for (int64_t ci = 0; ci < cg; ci++) {
                                int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
                                int64_t iw = ow * c->sw - c->pad_left + j * c->dw;
                                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w)
                                    continue;
                                double t = (double)x[xidx(c, n, g * cg + ci, ih, iw)] *
                                           wt[((co * c->kh + i) * c->kw + j) * cg + ci];
                                s += t;
                                mag += fabs(t);
                            }
                    double want = act_ref(s, &c->act);
                    double err = fabs(want - y[yidx(c, n, co, oh, ow)]) / (mag + 1.0);
                    if (err > worst)
                        worst = err;
                }
    return worst;
}

static pa_conv2d_t random_conv(int depthwise) {
    pa_conv2d_t c;
    memset(&c, 0, sizeof c);
    c.layout = rnd(0, 1) ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
    c.n = rnd(1, 2);
    c.groups = depthwise ? rnd(2, 40) : (rnd(0, 3) ? 1 : rnd(2, 4));
    c.c_in = depthwise ? c.groups : c.groups * rnd(1, 9);
    c.c_out = depthwise ? c.groups : c.groups * rnd(1, 20);
    c.kh = rnd(1, 5), c.kw = rnd(1, 5);
    c.sh = rnd(1, 3), c.sw = rnd(1, 3);
    c.dh = rnd(1, 2), c.dw = rnd(1, 2);
    c.h = rnd(1, 19), c.w = rnd(1, 37);
    c.pad_top = rnd(0, 2), c.pad_left = rnd(0, 2);
    int64_t pb = rnd(0, 2), pr = rnd(0, 2);
    int64_t eh = c.h + c.pad_top + pb - (c.kh - 1) * c.dh - 1;
    int64_t ew = c.w + c.pad_left + pr - (c.kw - 1) * c.dw - 1;
    if (eh < 0)
        c.h += -eh, eh = 0;
    if (ew < 0)
        c.w += -ew, ew = 0;
    c.h_out = eh / c.sh + 1, c.w_out = ew / c.sw + 1;
    c.act = random_act();
    return c;
}

static void run_conv_case(pa_conv2d_t c, pa_workers_t *pool, double *worst) {
    size_t nx = (size_t)(c.n * c.c_in * c.h * c.w), ny = (size_t)(c.n * c.c_out * c.h_out * c.w_out);
    size_t nw = (size_t)(c.c_out * c.kh * c.kw * (c.c_in / c.groups));
    float *x = fbuf(nx), *wt = fbuf(nw), *b = rnd(0, 3) ? fbuf((size_t)c.c_out) : NULL;
    float *y = fbuf(ny), *y2 = fbuf(ny);
    size_t np = pa_conv2d_packed_size(&c);
    CHECK(np > 0);
    float *pk = fbuf(np);
    CHECK_EQ(pa_conv2d_pack(&c, wt, b, pk, np), PA_OK);
    CHECK_EQ(pa_conv2d_run(&c, pk, x, y, NULL), PA_OK);
    double e = conv_check(&c, x, wt, b, y);
    if (e > *worst)
        *worst = e;
    if (e > 1e-5)
        fprintf(stderr, "conv %s n%lld c%lld->%lld g%lld %lldx%lld s%lld,%lld d%lld,%lld p%lld,%lld "
                "%lldx%lld->%lldx%lld act %d: err %g\n",
                c.layout ? "NHWC" : "NCHW", (long long)c.n, (long long)c.c_in,
                (long long)c.c_out, (long long)c.groups, (long long)c.kh, (long long)c.kw,
                (long long)c.sh, (long long)c.sw, (long long)c.dh, (long long)c.dw,
                (long long)c.pad_top, (long long)c.pad_left, (long long)c.h, (long long)c.w,
                (long long)c.h_out, (long long)c.w_out, (int)c.act.kind, e);
    CHECK_EQ(pa_conv2d_run(&c, pk, x, y2, pool), PA_OK);
    CHECK(memcmp(y, y2, ny * sizeof *y) == 0);
    free(x), free(wt), free(b), free(y), free(y2), free(pk);
}

static void test_conv_random(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    double worst = 0;
    for (int k = 0; k < 400; k++)
        run_conv_case(random_conv(k % 2), pool, &worst);
    for (int k = 0; k < 40; k++) {   /* wide rows: the per-row depthwise paths */
        pa_conv2d_t c = random_conv(1);
        c.w = rnd(70, 150);
        c.w_out = (c.w + c.pad_left - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 16; k++) {   /* NCHW stride 2: split rows, and too wide to split */
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NCHW;
        c.sw = 2;
        c.w = k % 2 ? rnd(1500, 2100) : rnd(40, 300);
        c.w_out = (c.w + c.pad_left - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 16; k++) {   /* NCHW wide rows padded on the right: border taps past w */
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NCHW;
        c.sw = 1 + k % 2;
        c.w = k % 4 < 2 ? rnd(40, 300) : rnd(1500, 2100);
        c.w_out = (c.w + c.pad_left + rnd(1, 2) - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 24; k++) {   /* NCHW many channels, short rows: channel blocks, bands */
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NCHW;
        c.groups = c.c_in = c.c_out = rnd(16, 70);
        c.h = rnd(20, 60), c.w = rnd(9, 34);
        c.h_out = (c.h + c.pad_top - (c.kh - 1) * c.dh - 1) / c.sh + 1;
        c.w_out = (c.w + c.pad_left - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 24; k++) {   /* NCHW rows under 16 columns: 4 rows per span + tail */
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NCHW;
        c.sh = rnd(1, 2), c.sw = rnd(1, 2);
        c.h = rnd(9, 30), c.w = rnd(c.kw * c.dw, 15);
        c.h_out = (c.h + c.pad_top - (c.kh - 1) * c.dh - 1) / c.sh + 1;
        c.w_out = (c.w + c.pad_left - (c.kw - 1) * c.dw - 1) / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 40; k++) {   /* NHWC, 1-4 output channels: the dot-product kernel */
        pa_conv2d_t c = random_conv(0);
        c.layout = PA_LAYOUT_NHWC;
        c.groups = 1, c.dw = 1;
        c.c_out = rnd(1, 4);
        c.w = rnd(1, 60);
        int64_t ew = c.w + c.pad_left - (c.kw - 1) - 1;
        if (ew < 0)
            c.w += -ew, ew = 0;
        c.w_out = ew / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    for (int k = 0; k < 60; k++) {   /* 1-4 input channels: the stack-tile kernel */
        pa_conv2d_t c = random_conv(0);
        c.groups = 1, c.dw = 1;
        c.c_in = rnd(1, 4), c.c_out = rnd(1, 40);
        c.sw = rnd(1, 2);
        c.w = k % 3 ? rnd(1, 60) : rnd(100, 250);
        int64_t ew = c.w + c.pad_left + rnd(0, 2) - (c.kw - 1) - 1;
        if (ew < 0)
            c.w += -ew, ew = 0;
        c.w_out = ew / c.sw + 1;
        run_conv_case(c, pool, &worst);
    }
    CHECK(worst < 1e-5);
    printf("     conv: worst relative error %.3g over 620 geometries\n", worst);
    pa_workers_destroy(pool);
}

/* A pointwise convolution (1x1, stride 1, unpadded, groups 1: the packed
 * SGEMM) of random sizes: row and column tails of every length, planes
 * narrower than a column tile (NCHW reads past a row only inside the
 * input), reductions past the tail panel's rows, dilations (ignored). */
static pa_conv2d_t random_pointwise(void) {
    pa_conv2d_t c;
    memset(&c, 0, sizeof c);
    c.layout = rnd(0, 1) ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
    c.n = rnd(1, 3);
    c.c_in = rnd(0, 4) ? rnd(1, 40) : rnd(60, 200);
    c.c_out = rnd(1, 50);
    c.h = rnd(1, 9), c.w = rnd(1, 21);
    c.h_out = c.h, c.w_out = c.w;
    c.kh = c.kw = c.sh = c.sw = 1;
    c.dh = rnd(1, 2), c.dw = rnd(1, 2);
    c.groups = 1;
    c.act = random_act();
    return c;
}

static void test_conv_pointwise(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    double worst = 0;
    for (int k = 0; k < 300; k++)
        run_conv_case(random_pointwise(), pool, &worst);
    /* the mobile shapes: 7x7 and 14x14 planes, many channels */
    static const int64_t shapes[][3] = {{960, 160, 7}, {160, 960, 7}, {576, 96, 14},
                                        {32, 16, 112}, {16, 96, 20}, {40, 7, 13}, {3, 5, 1},
                                        {200, 1, 1}};
    for (int s = 0; s < 8; s++)
        for (int layout = 0; layout < 2; layout++) {
            pa_conv2d_t c = {layout ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW, 1, shapes[s][0],
                             shapes[s][2], shapes[s][2], shapes[s][1], shapes[s][2],
                             shapes[s][2], 1, 1, 1, 1, 1, 1, 0, 0, 1, {PA_ACT_CLIP, 0, 6}};
            run_conv_case(c, pool, &worst);
        }
    CHECK(worst < 1e-5);
    printf("     pointwise: worst relative error %.3g over 316 geometries\n", worst);
    pa_workers_destroy(pool);
}

/* Equal bits where GCC built both tiles with optimisation (its clones of
 * the portable tile contract to FMA as the AVX-512 one does; at -O0 GCC
 * contracts nothing); clang's clone choice and contraction differ, so
 * there within rounding (relative 1e-5). */
static int same_floats(const float *a, const float *b, size_t n) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
    /* the same bits, but for a NaN's sign and payload (any NaN is a NaN) */
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (!(isnan(a[i]) && isnan(b[i])))
                return 0;
        } else if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
            return 0;
        }
    }
    return 1;
#else
    /* a NaN only where the other has one, infinities of the same sign */
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (!(isnan(a[i]) && isnan(b[i])))
                return 0;
        } else if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i])
                return 0;
        } else if (fabsf(a[i] - b[i]) > 1e-5f * (1.0f + fabsf(a[i]))) {
            return 0;
        }
    }
    return 1;
#endif
}

/* A NaN, +Inf and -Inf at random places of x[0..n): what an activation
 * must pass through (ReLU / clip keep a NaN, as NumPy and onnxruntime do). */
static void plant_specials(float *x, int64_t n) {
    x[rnd(0, n - 1)] = NAN;
    x[rnd(0, n - 1)] = INFINITY;
    x[rnd(0, n - 1)] = -INFINITY;
}

/* The SGEMM's pixel tiles (_pa_gemm_pixel_tiles): with tiles of mr - 1
 * rows allowed, every pixel count of at least (mr - 1)^2 is covered
 * exactly (7x7 = 49 pixels: seven tiles of 7), below it the tiles of mr
 * cover it with less than one tile to spare; without them ceil(m / mr)
 * tiles of mr.  Then the AVX-512 tile on such counts (7x7, 13x13 and
 * 14x14 maps: pointwise with a residual, 3x3 padded windows) against the
 * portable tile, bit for bit. */
static void test_gemm_pixel_tiles(void) {
    for (int64_t mr = 6; mr <= 8; mr += 2)
        for (int64_t m = 1; m <= 400; m++)
            for (int s = 0; s < 2; s++) {
                int64_t mf = -1, mt = _pa_gemm_pixel_tiles(m, mr, s, &mf);
                int64_t rows = mf * mr + (mt - mf) * (mr - 1);
                CHECK(mf >= 0 && mf <= mt);
                CHECK(rows >= m && rows - m < mr);
                CHECK(rows - (mt > mf ? mr - 1 : mr) < m);  /* no tile wholly past m */
                if (!s)
                    CHECK(mt == mf && mt == (m + mr - 1) / mr);
                if (s && m >= (mr - 1) * (mr - 1))
                    CHECK_EQ(rows, m);
            }
    if (!_pa_avx512_usable())
        return;
    static const int64_t sides[][2] = {{7, 7}, {13, 13}, {14, 14}, {6, 9}};
    for (int t = 0; t < 16; t++) {
        pa_conv2d_t c;
        memset(&c, 0, sizeof c);
        c.layout = PA_LAYOUT_NHWC, c.groups = 1, c.dh = c.dw = 1, c.sh = c.sw = 1;
        c.n = 1 + t % 2, c.h = c.h_out = sides[t / 4][0], c.w = c.w_out = sides[t / 4][1];
        c.c_in = rnd(5, 40), c.c_out = 16 * rnd(1, 3) + rnd(-2, 2);
        c.kh = c.kw = t % 4 < 2 ? 1 : 3;
        c.pad_top = c.pad_left = c.kh / 2;
        c.act = random_act();
        int64_t m = c.n * c.h_out * c.w_out, c_res = c.kh == 1 && t % 2 ? rnd(1, c.c_out) : 0;
        CHECK(_pa_conv2d_is_pointwise(&c) || _pa_conv2d_is_padded_window(&c));
        size_t np = _pa_gemm_packed_size(&c);
        float *w = fbuf((size_t)(c.c_out * c.kh * c.kw * c.c_in)), *b = fbuf((size_t)c.c_out);
        float *packed = fbuf(np), *x = fbuf((size_t)(c.n * c.h * c.w * c.c_in));
        float *r = c_res ? fbuf((size_t)(m * c_res)) : NULL;
        float *y0 = fbuf((size_t)(m * c.c_out)), *y1 = fbuf((size_t)(m * c.c_out));
        CHECK_EQ(_pa_gemm_pack(&c, w, b, packed), PA_OK);
        CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, r, c_res, y0, NULL, 0), PA_OK);
        CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, r, c_res, y1, NULL, 1), PA_OK);
        CHECK(same_floats(y0, y1, (size_t)(m * c.c_out)));
        free(w), free(b), free(packed), free(x), free(r), free(y0), free(y1);
    }
}

/* The AVX-512 tile's SiLU in registers (its own exp on 16 lanes) against
 * the portable tile's spilled _pa_act_block, bit for bit, over a wide
 * range: a 1 -> 16 channel 1x1 convolution whose weights are powers of
 * two (exact products), so output channel o is x * 2^(o - 8) for 2^16
 * inputs spread over [-96, 96] with NaN, +-Inf and +-0 among them. */
static void test_gemm_nhwc512_silu_bits(void) {
    if (!_pa_avx512_usable())
        return;
    pa_conv2d_t c;
    memset(&c, 0, sizeof c);
    c.layout = PA_LAYOUT_NHWC, c.groups = 1, c.n = 1, c.c_in = 1, c.c_out = 16;
    c.h = c.h_out = 256, c.w = c.w_out = 256, c.kh = c.kw = c.sh = c.sw = c.dh = c.dw = 1;
    c.act.kind = PA_ACT_SILU;
    const int64_t m = c.h * c.w;
    float w[16], b[16] = {0};
    for (int o = 0; o < 16; o++)
        w[o] = ldexpf(1.0f, o - 8);
    float *packed = fbuf(_pa_gemm_packed_size(&c)), *x = fbuf((size_t)m);
    float *y0 = fbuf((size_t)(m * 16)), *y1 = fbuf((size_t)(m * 16));
    for (int64_t i = 0; i < m; i++)
        x[i] = (float)((double)(i * 2654435761u % 1000003u) / 1000003.0 * 192.0 - 96.0);
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 0.0f, x[4] = -0.0f;
    CHECK_EQ(_pa_gemm_pack(&c, w, b, packed), PA_OK);
    CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, NULL, 0, y0, NULL, 0), PA_OK);
    CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, NULL, 0, y1, NULL, 1), PA_OK);
    CHECK(same_floats(y0, y1, (size_t)(m * 16)));
    free(packed), free(x), free(y0), free(y1);
}

/* The NHWC pointwise (and patch: unpadded windows read in place)
 * convolution's AVX-512 tile (8 pixels x 32 channels) against the
 * portable 6 x 16 tile on the same packed weights: the same
 * sums in the same order, so the same bits (GCC) -- any pixel count (last
 * tiles of 1-11 pixels), c_out around the 16 / 32 channel blocks, a
 * residual of c_res <= c_out channels or none, every activation, one and
 * three threads.  Skipped where the processor has no AVX-512. */
static void test_gemm_nhwc512(void) {
    if (!_pa_avx512_usable()) {
        printf("     (no AVX-512 here: the portable tile only)\n");
        return;
    }
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    for (int t = 0; t < 200; t++) {
        pa_conv2d_t c = random_pointwise();
        c.layout = PA_LAYOUT_NHWC;
        c.dh = c.dw = 1;
        if (t % 4 == 0)
            c.c_out = 16 * rnd(1, 4) + rnd(-1, 1);
        if (t % 3 == 1) {       /* a patch convolution: windows read in place */
            c.kh = rnd(1, 3), c.kw = rnd(1, 3), c.sh = rnd(1, 3), c.sw = rnd(1, 3);
            c.h += c.kh, c.w += c.kw;
            c.h_out = (c.h - c.kh) / c.sh + 1, c.w_out = (c.w - c.kw) / c.sw + 1;
            c.c_in = rnd(1, 40);
        }
        CHECK(_pa_conv2d_is_pointwise(&c) || _pa_conv2d_is_disjoint(&c));
        int64_t m = c.n * c.h_out * c.w_out, nx = c.n * c.h * c.w * c.c_in;
        int64_t c_res = rnd(0, 2) || !_pa_conv2d_is_pointwise(&c) ? 0 : rnd(1, c.c_out);
        size_t np = _pa_gemm_packed_size(&c);
        float *w = fbuf((size_t)(c.c_out * c.kh * c.kw * c.c_in)), *b = fbuf((size_t)c.c_out);
        float *packed = fbuf(np), *x = fbuf((size_t)nx);
        float *r = c_res ? fbuf((size_t)(m * c_res)) : NULL;
        float *y0 = fbuf((size_t)(m * c.c_out)), *y1 = fbuf((size_t)(m * c.c_out));
        CHECK_EQ(_pa_gemm_pack(&c, w, b, packed), PA_OK);
        if (t % 5 == 2)
            plant_specials(x, nx);
        pa_workers_t *wk = t % 2 ? pool : NULL;
        CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, r, c_res, y0, wk, 0), PA_OK);
        CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, r, c_res, y1, wk, 1), PA_OK);
        if (!same_floats(y0, y1, (size_t)(m * c.c_out))) {
            printf("     differs: m %lld c_in %lld c_out %lld c_res %lld act %d\n",
                   (long long)m, (long long)c.c_in, (long long)c.c_out, (long long)c_res,
                   (int)c.act.kind);
            CHECK(0);
            t = 200;
        }
        free(w), free(b), free(packed), free(x), free(r), free(y0), free(y1);
    }
    pa_workers_destroy(pool);
}

/* The one-pixel walk (a matrix-vector product: a decode step's linear
 * layer, gemm_nhwc.c and gemm_nhwc_avx512.c's rows) against the tile on
 * the same weights: one pixel run alone, then twice over (two equal
 * pixels take the tile) -- the same sums in the same order, so the same
 * bits (GCC), on each variant: reductions 1-300, c_out around the
 * groups of four 16-channel blocks (a short last group, a last block of
 * 1-15 channels), no residual or a whole one, every activation, NaN and
 * infinities in x, one and three threads. */
static void test_gemm_row(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    static const int64_t outs[] = {1, 7, 16, 17, 40, 63, 64, 65, 100, 129, 256};
    for (int t = 0; t < 120; t++) {
        pa_conv2d_t c = random_pointwise();
        c.layout = PA_LAYOUT_NHWC;
        c.n = 1, c.h = c.h_out = 1, c.w = c.w_out = 2;
        c.dh = c.dw = 1;
        c.c_in = t % 3 ? rnd(1, 40) : rnd(100, 300);
        c.c_out = outs[t % (int)(sizeof outs / sizeof outs[0])];
        int64_t c_res = rnd(0, 1) ? c.c_out : 0;
        float *w = fbuf((size_t)(c.c_out * c.c_in)), *b = fbuf((size_t)c.c_out);
        float *packed = fbuf(_pa_gemm_packed_size(&c)), *x = fbuf((size_t)(2 * c.c_in));
        float *r = fbuf((size_t)(2 * c.c_out)), *y2 = fbuf((size_t)(2 * c.c_out));
        float *y1 = fbuf((size_t)c.c_out);
        CHECK_EQ(_pa_gemm_pack(&c, w, b, packed), PA_OK);
        if (t % 4 == 1)
            plant_specials(x, c.c_in);
        memcpy(x + c.c_in, x, (size_t)c.c_in * sizeof *x);
        memcpy(r + c.c_out, r, (size_t)c.c_out * sizeof *r);
        pa_workers_t *wk = t % 2 ? pool : NULL;
        for (int avx = 0; avx < 2; avx++) {
            pa_conv2d_t one = c;
            one.w = one.w_out = 1;
            CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, c_res ? r : NULL, c_res, y2, wk, avx),
                     PA_OK);
            CHECK_EQ(_pa_gemm_nhwc_run_isa(&one, packed, x, c_res ? r : NULL, c_res, y1, wk,
                                           avx), PA_OK);
            if (!same_floats(y1, y2, (size_t)c.c_out) ||
                !same_floats(y1, y2 + c.c_out, (size_t)c.c_out)) {
                printf("     differs: avx512 %d c_in %lld c_out %lld c_res %lld act %d\n", avx,
                       (long long)c.c_in, (long long)c.c_out, (long long)c_res,
                       (int)c.act.kind);
                CHECK(0);
                t = 120;
            }
        }
        free(w), free(b), free(packed), free(x), free(r), free(y1), free(y2);
    }
    pa_workers_destroy(pool);
}

/* A full NHWC convolution whose windows reach into the padding
 * (_pa_conv2d_is_padded_window: the packed SGEMM, taps in the padding read
 * from a zero row): random kernels, strides and pads on every side (a
 * window may also hang past the bottom / right edge), 5-70 channels.  The
 * same bits as the unpadded (disjoint-window) convolution over a
 * zero-padded copy of the input -- the band path it replaces -- on both
 * tiles and at one and three threads; the naive reference within 1e-5;
 * the portable and AVX-512 tiles the same bits (GCC); and past
 * PA_GEMM_PAD_MAX_CIN input channels the direct kernel instead. */
static void test_conv_padded_window(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    double worst = 0;
    int done = 0;
    for (int t = 0; t < 120; t++) {
        pa_conv2d_t c;
        memset(&c, 0, sizeof c);
        c.layout = PA_LAYOUT_NHWC, c.groups = 1, c.dh = c.dw = 1;
        c.n = rnd(1, 2);
        c.c_in = rnd(5, 70), c.c_out = rnd(5, 70);
        c.kh = rnd(1, 5), c.kw = rnd(1, 5), c.sh = rnd(1, 3), c.sw = rnd(1, 3);
        c.h = rnd(1, 14), c.w = rnd(1, 30);
        c.pad_top = rnd(0, c.kh - 1), c.pad_left = rnd(0, c.kw - 1);
        if (c.pad_top + c.pad_left == 0)
            c.pad_top = c.kh > 1 ? 1 : 0, c.pad_left = c.kh > 1 ? 0 : (c.kw > 1 ? 1 : 0);
        int64_t pb = rnd(0, c.kh), pr = rnd(0, c.kw);   /* past kh - 1: a window hangs over */
        int64_t hp = c.h + c.pad_top + pb, wp = c.w + c.pad_left + pr;
        if (hp < c.kh)
            pb += c.kh - hp, hp = c.kh;
        if (wp < c.kw)
            pr += c.kw - wp, wp = c.kw;
        c.h_out = (hp - c.kh) / c.sh + 1, c.w_out = (wp - c.kw) / c.sw + 1;
        c.act = random_act();
        if (c.pad_top + c.pad_left + pb + pr == 0 || c.c_out <= 4)
            continue;
        if (_pa_conv2d_is_disjoint(&c) || _pa_conv2d_is_pointwise(&c))
            continue;       /* the windows all inside: not this path */
        CHECK(_pa_conv2d_is_padded_window(&c));
        run_conv_case(c, pool, &worst);
        /* the zero-padded copy, unpadded: a disjoint-window convolution
         * (a pointwise one for a 1 x 1 window, stride 1, padded below or
         * to the right only) */
        pa_conv2d_t u = c;
        u.h = hp, u.w = wp, u.pad_top = u.pad_left = 0;
        CHECK(_pa_conv2d_is_disjoint(&u) || _pa_conv2d_is_pointwise(&u));
        int64_t m = c.n * c.h_out * c.w_out;
        size_t np = _pa_gemm_packed_size(&c);
        CHECK_EQ((int64_t)np, (int64_t)_pa_gemm_packed_size(&u));
        CHECK_EQ((int64_t)np, (int64_t)pa_conv2d_packed_size(&c));
        float *w = fbuf((size_t)(c.c_out * c.kh * c.kw * c.c_in)), *b = fbuf((size_t)c.c_out);
        float *packed = fbuf(np), *x = fbuf((size_t)(c.n * c.h * c.w * c.c_in));
        float *xp = calloc((size_t)(c.n * hp * wp * c.c_in), sizeof *xp);
        float *y0 = fbuf((size_t)(m * c.c_out)), *y1 = fbuf((size_t)(m * c.c_out));
        CHECK(xp != NULL);
        for (int64_t n = 0; n < c.n; n++)
            for (int64_t h = 0; h < c.h; h++)
                memcpy(xp + ((n * hp + h + c.pad_top) * wp + c.pad_left) * c.c_in,
                       x + (n * c.h + h) * c.w * c.c_in, (size_t)(c.w * c.c_in) * sizeof *x);
        CHECK_EQ(_pa_gemm_pack(&c, w, b, packed), PA_OK);
        for (int avx = 0; avx < 2; avx++) {
            pa_workers_t *wk = (t + avx) % 2 ? pool : NULL;
            CHECK_EQ(_pa_gemm_nhwc_run_isa(&u, packed, xp, NULL, 0, y0, NULL, avx), PA_OK);
            CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, NULL, 0, y1, wk, avx), PA_OK);
            CHECK(memcmp(y0, y1, (size_t)(m * c.c_out) * sizeof *y0) == 0);
        }
        if (_pa_avx512_usable()) {  /* y1: the AVX-512 tile's */
            CHECK_EQ(_pa_gemm_nhwc_run_isa(&c, packed, x, NULL, 0, y0, pool, 0), PA_OK);
            CHECK(same_floats(y0, y1, (size_t)(m * c.c_out)));
        }
        free(w), free(b), free(packed), free(x), free(xp), free(y0), free(y1);
        done++;
    }
    CHECK(worst < 1e-5);
    CHECK(done > 60);
    printf("     padded windows: worst relative error %.3g over %d geometries\n", worst, done);
    pa_conv2d_t big = {PA_LAYOUT_NHWC, 1, PA_GEMM_PAD_MAX_CIN + 1, 3, 3, 8, 3, 3,
                       3, 3, 1, 1, 1, 1, 1, 1, 1, {PA_ACT_NONE, 0, 0}};
    CHECK(!_pa_conv2d_is_padded_window(&big));
    big.c_in = PA_GEMM_PAD_MAX_CIN;
    CHECK(_pa_conv2d_is_padded_window(&big));
    pa_workers_destroy(pool);
}

/* One depthwise geometry run by _pa_dwconv_run_isa without and with the
 * AVX-512 paths on the same packed weights and input: 1 if the outputs
 * agree (same_floats), else 0 after printing the geometry. */
static int dw_isa_agree(const pa_conv2d_t *c, pa_workers_t *wk) {
    int64_t taps = c->kh * c->kw, nx = c->n * c->h * c->w * c->c_in;
    int64_t ny = c->n * c->h_out * c->w_out * c->c_out;
    float *w = fbuf((size_t)(c->c_in * taps)), *b = fbuf((size_t)c->c_in);
    float *packed = fbuf(_pa_dwconv_packed_size(c)), *x = fbuf((size_t)nx);
    float *y0 = fbuf((size_t)ny), *y1 = fbuf((size_t)ny);
    CHECK_EQ(_pa_dwconv_pack(c, w, b, packed), PA_OK);
    CHECK_EQ(_pa_dwconv_run_isa(c, packed, x, y0, wk, 0), PA_OK);
    CHECK_EQ(_pa_dwconv_run_isa(c, packed, x, y1, wk, 1), PA_OK);
    int same = same_floats(y0, y1, (size_t)ny);
    if (!same)
        printf("     differs: %s c %lld %lldx%lld -> %lldx%lld k %lldx%lld s %lld,%lld "
               "d %lld,%lld p %lld,%lld act %d\n",
               c->layout == PA_LAYOUT_NHWC ? "NHWC" : "NCHW", (long long)c->c_in,
               (long long)c->h, (long long)c->w, (long long)c->h_out, (long long)c->w_out,
               (long long)c->kh, (long long)c->kw, (long long)c->sh, (long long)c->sw,
               (long long)c->dh, (long long)c->dw, (long long)c->pad_top,
               (long long)c->pad_left, (int)c->act.kind);
    free(w), free(b), free(packed), free(x), free(y0), free(y1);
    return same;
}

/* The NHWC depthwise rows on AVX-512 (4 pixels x 32 channels, masked
 * last blocks) against the portable rows on the same packed weights:
 * random geometries (strides, dilations, pads, kernels up to 5x5) with
 * 2-80 channels (around the 16 / 32 blocks), every activation, one and
 * three threads: the same bits (GCC).  Skipped without AVX-512. */
static void test_dwconv_nhwc512(void) {
    if (!_pa_avx512_usable()) {
        printf("     (no AVX-512 here: the portable rows only)\n");
        return;
    }
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    for (int t = 0; t < 300; t++) {
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NHWC;
        if (t % 3 == 0)
            c.groups = c.c_in = c.c_out = 16 * rnd(1, 4) + rnd(-1, 1);
        if (!dw_isa_agree(&c, t % 2 ? pool : NULL)) {
            CHECK(0);
            t = 300;
        }
    }
    pa_workers_destroy(pool);
}

/* The NCHW depthwise channel blocks on AVX-512 (16 x 16 transposes in
 * and out, 8 pixels a tile, rows up to PA_DW512_BLOCK_MAX_W columns)
 * against the portable NCHW paths (blocks, bands or planes) on the same
 * packed weights: random geometries (strides, dilations, pads, kernels up
 * to 5x5, planes up to 19 x 37 and some 28 x 28 / 56 x 56 ones) with 15-80
 * channels, every activation, one and three threads: the same bits.
 * Skipped without AVX-512. */
static void test_dwconv_nchw512(void) {
    if (!_pa_avx512_usable()) {
        printf("     (no AVX-512 here: the portable paths only)\n");
        return;
    }
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    for (int t = 0; t < 300; t++) {
        pa_conv2d_t c = random_conv(1);
        c.layout = PA_LAYOUT_NCHW;
        c.groups = c.c_in = c.c_out = 16 * rnd(1, 5) + rnd(-1, 1);
        if (t % 10 == 0) {      /* MobileNets' 3x3 layers, 28 and 56 columns in */
            c.h = c.w = 28 * rnd(1, 2), c.kh = c.kw = 3, c.sh = c.sw = rnd(1, 2);
            c.dh = c.dw = 1, c.pad_top = c.pad_left = 1;
            c.h_out = (c.h + 1 - 3) / c.sh + 1 + (c.sh == 1);
            c.w_out = c.h_out;
        }
        if (!dw_isa_agree(&c, t % 2 ? pool : NULL)) {
            CHECK(0);
            t = 300;
        }
    }
    pa_workers_destroy(pool);
}

/* pa_conv2d_run_residual: act(conv + bias + r) against act(z + r) where z
 * is the plain run without activation (checked above), r of c_res <= c_out
 * channels (the rest zero-padded); one and three threads alike. */
static void test_conv_residual(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    double worst = 0;
    for (int k = 0; k < 200; k++) {
        pa_conv2d_t c = random_pointwise();
        if (k % 4 == 0)        /* NCHW planes past the pixel tiles: strips */
            c.layout = PA_LAYOUT_NCHW, c.h = rnd(9, 14), c.w = rnd(8, 19), c.h_out = c.h,
            c.w_out = c.w;
        pa_act_params_t act = c.act;
        int64_t c_res = rnd(1, c.c_out), hw = c.h * c.w;
        size_t nx = (size_t)(c.n * c.c_in * hw), ny = (size_t)(c.n * c.c_out * hw);
        size_t nr = (size_t)(c.n * c_res * hw);
        float *x = fbuf(nx), *wt = fbuf((size_t)(c.c_out * c.c_in)), *b = fbuf((size_t)c.c_out);
        float *r = fbuf(nr), *z = fbuf(ny), *y = fbuf(ny), *y2 = fbuf(ny);
        size_t np = pa_conv2d_packed_size(&c);
        float *pk = fbuf(np);
        c.act.kind = PA_ACT_NONE;
        CHECK_EQ(pa_conv2d_pack(&c, wt, b, pk, np), PA_OK);
        CHECK_EQ(pa_conv2d_run(&c, pk, x, z, NULL), PA_OK);
        c.act = act;
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, r, c_res, y, NULL), PA_OK);
        for (int64_t n = 0; n < c.n; n++)
            for (int64_t co = 0; co < c.c_out; co++)
                for (int64_t p = 0; p < hw; p++) {
                    int64_t yi = c.layout == PA_LAYOUT_NHWC ? (n * hw + p) * c.c_out + co
                                                            : (n * c.c_out + co) * hw + p;
                    int64_t ri = c.layout == PA_LAYOUT_NHWC ? (n * hw + p) * c_res + co
                                                            : (n * c_res + co) * hw + p;
                    double want = act_ref((double)z[yi] + (co < c_res ? r[ri] : 0.0), &act);
                    double e = fabs(want - y[yi]) / (fabs(want) + 1.0);
                    worst = e > worst ? e : worst;
                }
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, r, c_res, y2, pool), PA_OK);
        CHECK(memcmp(y, y2, ny * sizeof *y) == 0);
        /* bad residuals; not pointwise */
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, r, 0, y, NULL), PA_ERR_INVALID);
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, r, c.c_out + 1, y, NULL), PA_ERR_INVALID);
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, NULL, c_res, y, NULL), PA_ERR_INVALID);
        c.kh = 3;
        CHECK_EQ(pa_conv2d_run_residual(&c, pk, x, r, c_res, y, NULL), PA_ERR_INVALID);
        free(x), free(wt), free(b), free(r), free(z), free(y), free(y2), free(pk);
    }
    CHECK(worst < 1e-5);
    printf("     residual: worst relative error %.3g over 200 geometries\n", worst);
    pa_workers_destroy(pool);
}

/* Big enough that the pool really splits the work. */
static void test_conv_threads(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    double worst = 0;
    for (int dw = 0; dw < 2; dw++)
        for (int layout = 0; layout < 2; layout++) {
            pa_conv2d_t c = {layout ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW, 1, 32, 40, 40, 32, 40, 40,
                             3, 3, 1, 1, 1, 1, 1, 1, dw ? 32 : 1, {PA_ACT_SILU, 0, 0}};
            run_conv_case(c, pool, &worst);
        }
    CHECK(worst < 1e-5);
    pa_workers_destroy(pool);
}

/* A first layer over RGB in NHWC (3 -> c_out, the few-input-channel
 * kernel) computes 16 output channels at once: the bits of the same
 * convolution split into 8-channel convolutions (one block each), every
 * activation, stride 1 and 2, c_out 16, 24 and 14 (a pair and a single
 * block, a partial pair), one and three threads. */
static void test_fewin_pairs_equal_single_blocks(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    static const pa_act_t acts[] = {PA_ACT_NONE, PA_ACT_RELU, PA_ACT_SILU, PA_ACT_SIGMOID};
    static const int64_t couts[] = {16, 24, 14};     /* parts of 5+ channels: the few- */
                                                      /* input kernel (4: a dot product) */
    int bad = 0;
    for (int k = 0; k < 12; k++) {
        const int64_t co = couts[k % 3], S = 1 + k % 2, cin = 3 - (k / 6);
        pa_conv2d_t c = {PA_LAYOUT_NHWC, 2, cin, 21, 26, co, 0, 0, 3, 3, S, S, 1, 1, 1, 1, 1,
                         {acts[k % 4], 0, 0}};
        c.h_out = (c.h + 2 - 3) / S + 1, c.w_out = (c.w + 2 - 3) / S + 1;
        const int64_t taps = 9 * cin, px = c.n * c.h_out * c.w_out;
        float *x = fbuf((size_t)(c.n * c.h * c.w * cin)), *wt = fbuf((size_t)(co * taps));
        float *b = fbuf((size_t)co), *y = fbuf((size_t)(px * co)), *y3 = fbuf((size_t)(px * co));
        float *pk = malloc(pa_conv2d_packed_size(&c) * sizeof *pk);
        CHECK_EQ(pa_conv2d_pack(&c, wt, b, pk, pa_conv2d_packed_size(&c)), PA_OK);
        CHECK_EQ(pa_conv2d_run(&c, pk, x, y, NULL), PA_OK);
        CHECK_EQ(pa_conv2d_run(&c, pk, x, y3, pool), PA_OK);
        CHECK(memcmp(y, y3, (size_t)(px * co) * sizeof *y) == 0);
        for (int64_t c0 = 0; c0 < co; c0 += 8) {    /* channels c0.. as a conv of their own */
            pa_conv2d_t one = c;
            one.c_out = co - c0 < 8 ? co - c0 : 8;
            float *p1 = malloc(pa_conv2d_packed_size(&one) * sizeof *p1);
            float *y1 = fbuf((size_t)(px * one.c_out));
            CHECK_EQ(pa_conv2d_pack(&one, wt + c0 * taps, b + c0, p1,
                                    pa_conv2d_packed_size(&one)), PA_OK);
            CHECK_EQ(pa_conv2d_run(&one, p1, x, y1, NULL), PA_OK);
            for (int64_t i = 0; i < px; i++)
                bad += memcmp(y + i * co + c0, y1 + i * one.c_out,
                              (size_t)one.c_out * sizeof *y) != 0;
            free(p1), free(y1);
        }
        free(x), free(wt), free(b), free(y), free(y3), free(pk);
    }
    CHECK_EQ(bad, 0);
    pa_workers_destroy(pool);
}

static void test_conv_invalid(void) {
    pa_conv2d_t c = {PA_LAYOUT_NCHW, 1, 4, 5, 5, 6, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0}};
    float buf[1024] = {0};
    CHECK(pa_conv2d_packed_size(&c) > 0);
    CHECK_EQ(pa_conv2d_packed_size(NULL), 0u);
    pa_conv2d_t bad = c;
    bad.groups = 3;                       /* does not divide 4 */
    CHECK_EQ(pa_conv2d_packed_size(&bad), 0u);
    CHECK_EQ(pa_conv2d_run(&bad, buf, buf, buf, NULL), PA_ERR_INVALID);
    bad = c, bad.sh = 0;
    CHECK_EQ(pa_conv2d_run(&bad, buf, buf, buf, NULL), PA_ERR_INVALID);
    bad = c, bad.act.kind = (pa_act_t)99;
    CHECK_EQ(pa_conv2d_run(&bad, buf, buf, buf, NULL), PA_ERR_INVALID);
    bad = c, bad.h = (int64_t)1 << 62;
    CHECK_EQ(pa_conv2d_packed_size(&bad), 0u);
    CHECK_EQ(pa_conv2d_pack(&c, buf, NULL, buf, 3), PA_ERR_INVALID);  /* too small */
    CHECK_EQ(pa_conv2d_pack(&c, NULL, NULL, buf, 1024), PA_ERR_INVALID);
    CHECK_EQ(pa_conv2d_run(&c, buf, NULL, buf, NULL), PA_ERR_INVALID);
}

static void test_act(void) {
    size_t n = 50000;
    float *x = fbuf(n), *y = fbuf(n);
    for (size_t i = 0; i < n; i++)
        x[i] *= 30.0f;            /* exp's whole useful range and beyond */
    x[0] = 200.0f, x[1] = -200.0f, x[2] = 0.0f;
    pa_workers_t *pool = pa_workers_create(2, NULL);
    for (int k = 0; k <= 7; k++) {
        pa_act_params_t a = {(pa_act_t)k, -0.5f, 0.75f};
        if (k == PA_ACT_HARDSIGMOID)
            a.alpha = 0.2f, a.beta = 0.5f;
        CHECK_EQ(pa_act(&a, x, y, n, k % 2 ? pool : NULL), PA_OK);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double want = act_ref(x[i], &a);
            /* a few ulp of the result, or of the input where the result
             * cancels (hardsigmoid near its zero) */
            double err = fabs(want - y[i]) / (fabs(want) + 0.15 * (1 + fabs(x[i])));
            if (err > worst)
                worst = err;
        }
        /* a few ulp; GELU: its erf approximation's 4.2e-7 times |x| / 2,
         * over the 0.15 |x| floor of the denominator */
        double bound = k == PA_ACT_GELU ? 1.5e-6 : 4e-7;
        if (worst > bound)
            fprintf(stderr, "act %d: relative error %g\n", k, worst);
        CHECK(worst <= bound);
        if (k == PA_ACT_SIGMOID)   /* exp(200) clamps: sigmoid(-200) is a tiny positive */
            CHECK(y[1] >= 0.0f && y[1] < 1e-30f && y[0] == 1.0f);
    }
    /* in place, with a bias per channel in both layouts */
    float bias[3] = {1.0f, -2.0f, 0.5f};
    pa_act_params_t relu = {PA_ACT_RELU, 0, 0};
    float v[2 * 3 * 4], w[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        v[i] = w[i] = (float)(i % 7) - 3.0f;
    CHECK_EQ(pa_bias_act(PA_LAYOUT_NCHW, 2, 3, 4, v, bias, v, &relu, NULL), PA_OK);
    CHECK_EQ(pa_bias_act(PA_LAYOUT_NHWC, 2, 3, 4, w, bias, w, &relu, pool), PA_OK);
    int ok = 1;
    for (int i = 0; i < 24; i++) {
        float in = (float)(i % 7) - 3.0f;
        ok &= v[i] == fmaxf(in + bias[(i / 4) % 3], 0.0f);
        ok &= w[i] == fmaxf(in + bias[i % 3], 0.0f);
    }
    CHECK(ok);
    /* PRelu: a slope per channel, both layouts, in place and not */
    float sl[3] = {0.5f, -1.0f, 2.0f}, pv[24], pw[24], pz[24];
    for (int i = 0; i < 24; i++)
        pv[i] = pw[i] = (float)(i % 5) - 2.0f;
    CHECK_EQ(pa_prelu(PA_LAYOUT_NCHW, 2, 3, 4, pv, sl, pz, pool), PA_OK);
    CHECK_EQ(pa_prelu(PA_LAYOUT_NCHW, 2, 3, 4, pv, sl, pv, NULL), PA_OK);
    CHECK_EQ(pa_prelu(PA_LAYOUT_NHWC, 2, 3, 4, pw, sl, pw, pool), PA_OK);
    ok = 1;
    for (int i = 0; i < 24; i++) {
        float in = (float)(i % 5) - 2.0f;
        ok &= pv[i] == (in < 0 ? in * sl[(i / 4) % 3] : in) && pz[i] == pv[i];
        ok &= pw[i] == (in < 0 ? in * sl[i % 3] : in);
    }
    CHECK(ok);
    CHECK_EQ(pa_prelu(PA_LAYOUT_NHWC, 1, 0, 3, pw, sl, pw, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_prelu(PA_LAYOUT_NHWC, 1, 3, 3, pw, NULL, pw, NULL), PA_ERR_INVALID);
    pa_act_params_t bad = {(pa_act_t)8, 0, 0};
    CHECK_EQ(pa_act(&bad, x, y, n, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_act(&relu, NULL, y, n, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_act(&relu, NULL, NULL, 0, NULL), PA_OK);
    CHECK_EQ(pa_bias_act(PA_LAYOUT_NCHW, 1, 0, 4, v, NULL, v, &relu, NULL), PA_ERR_INVALID);
    pa_workers_destroy(pool);
    free(x), free(y);
}

/* pa_scale_bias_act: act(x * s[c] + b[c]) in both layouts, in place and
 * not, one and two threads, against the scalar formula (to float
 * rounding: the product and sum may be one fused multiply-add); refusals. */
static void test_scale_bias_act(void) {
    pa_workers_t *pool = pa_workers_create(2, NULL);
    enum { N = 2, C = 19, S = 37, T = N * C * S };
    float s[C], b[C], *x = fbuf(T), *y = fbuf(T), *v = fbuf(T);
    for (int i = 0; i < C; i++)
        s[i] = 0.25f + 0.125f * (float)i, b[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < T; i++)
        x[i] = (float)((i * 37) % 23) * 0.25f - 3.0f;
    pa_act_params_t acts[2] = {{PA_ACT_RELU, 0, 0}, {PA_ACT_CLIP, -1.0f, 2.5f}};
    int bad = 0;
    for (int lay = 0; lay < 2; lay++)
        for (int k = 0; k < 2; k++)
            for (int ip = 0; ip < 2; ip++) {
                float *out = ip ? v : y;
                memcpy(v, x, sizeof(float) * T);
                CHECK_EQ(pa_scale_bias_act((pa_layout_t)lay, N, C, S, ip ? v : x, s, b, out,
                                           &acts[k], ip ? pool : NULL), PA_OK);
                for (int i = 0; i < T; i++) {
                    int c = lay == PA_LAYOUT_NCHW ? (i / S) % C : i % C;
                    float want = x[i] * s[c] + b[c];
                    want = k ? fminf(fmaxf(want, -1.0f), 2.5f) : fmaxf(want, 0.0f);
                    bad += fabsf(out[i] - want) > 1e-5f * (1.0f + fabsf(want));
                }
            }
    CHECK_EQ(bad, 0);
    CHECK_EQ(pa_scale_bias_act(PA_LAYOUT_NCHW, 1, C, S, x, NULL, b, y, &acts[0], NULL),
             PA_ERR_INVALID);
    CHECK_EQ(pa_scale_bias_act(PA_LAYOUT_NHWC, 1, C, S, x, s, NULL, y, &acts[0], NULL),
             PA_ERR_INVALID);
    CHECK_EQ(pa_scale_bias_act(PA_LAYOUT_NHWC, 1, 0, S, x, s, b, y, &acts[0], NULL),
             PA_ERR_INVALID);
    CHECK_EQ(pa_scale_bias_act(PA_LAYOUT_NHWC, 0, C, S, x, s, b, y, &acts[0], NULL), PA_OK);
    pa_workers_destroy(pool);
    free(x), free(y), free(v);
}

/* The tap walk's maximum (pooling.c): the first of equal taps, the last
 * NaN. */
static float max_walk(float a, float b) {
    return b > a || b != b ? b : a;
}

/* NHWC max pools of large windows (SPP's 5x5 / 9x9 / 13x13, asymmetric,
 * strided, tall images in several bands; the separable path) against
 * the tap walk bit for bit, NaNs of distinct payloads and signed zeros
 * among the inputs, one and three threads. */
static void test_maxpool_nhwc_large_windows(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    static const int64_t geo[][8] = {   /* c, h, w, kh, kw, sh, sw, pad */
        {192, 13, 13, 13, 13, 1, 1, 6}, {128, 10, 10, 5, 5, 1, 1, 2}, {20, 13, 13, 9, 9, 1, 1, 4},
        {12, 40, 37, 5, 3, 1, 1, 1}, {9, 30, 60, 3, 5, 2, 1, 2}, {16, 25, 21, 7, 7, 3, 2, 0},
        {8, 9, 120, 4, 3, 1, 3, 1}, {24, 6, 7, 13, 13, 1, 1, 6},
        /* separable, strided and asymmetric in several bands */
        {16, 60, 21, 7, 7, 2, 2, 3}, {12, 40, 37, 9, 5, 1, 1, 2}, {8, 9, 120, 5, 5, 1, 3, 2},
        /* tap by tap, four channel vectors at a time and a tail */
        {40, 20, 20, 3, 3, 2, 2, 1}, {72, 15, 15, 3, 3, 1, 1, 1}, {64, 11, 9, 3, 3, 2, 2, 0}};
    int bad = 0;
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        pa_pool2d_t p = {PA_LAYOUT_NHWC, 2, geo[g][0], geo[g][1], geo[g][2], 0, 0,
                         geo[g][3], geo[g][4], geo[g][5], geo[g][6],
                         geo[g][7], geo[g][7], geo[g][7], geo[g][7] / 2, 0};
        p.h_out = (p.h + p.pad_top + p.pad_bottom - p.kh) / p.sh + 1;
        p.w_out = (p.w + p.pad_left + p.pad_right - p.kw) / p.sw + 1;
        size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * p.h_out * p.w_out);
        float *x = fbuf(nx), *y = fbuf(ny), *y3 = fbuf(ny);
        for (size_t i = 0; i < nx; i++) {       /* ties, signed zeros, NaN payloads */
            x[i] = (float)((int)(x[i] * 4.0f)) * 0.25f;
            if (i % 7 == 0)
                x[i] = i % 2 ? 0.0f : -0.0f;
            if (i % 97 == 5) {
                uint32_t u = 0x7fc00000u | (uint32_t)(i % 1000) | (i % 3 ? 0x80000000u : 0);
                memcpy(&x[i], &u, sizeof u);
            }
        }
        CHECK_EQ(pa_maxpool2d(&p, x, y, NULL), PA_OK);
        CHECK_EQ(pa_maxpool2d(&p, x, y3, pool), PA_OK);
        CHECK(memcmp(y, y3, ny * sizeof *y) == 0);
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t oh = 0; oh < p.h_out; oh++)
                for (int64_t ow = 0; ow < p.w_out; ow++)
                    for (int64_t c = 0; c < p.c; c++) {
                        float s = -INFINITY;
                        for (int64_t i = 0; i < p.kh; i++)
                            for (int64_t j = 0; j < p.kw; j++) {
                                int64_t ih = oh * p.sh - p.pad_top + i;
                                int64_t iw = ow * p.sw - p.pad_left + j;
                                if (ih >= 0 && iw >= 0 && ih < p.h && iw < p.w)
                                    s = max_walk(s, x[((n * p.h + ih) * p.w + iw) * p.c + c]);
                            }
                        float got = y[((n * p.h_out + oh) * p.w_out + ow) * p.c + c];
                        bad += memcmp(&got, &s, sizeof s) != 0;
                    }
        free(x), free(y), free(y3);
    }
    CHECK_EQ(bad, 0);
    pa_workers_destroy(pool);
}

/* NCHW average pools of stride 1 and 2 (the +0-padded band tile) against
 * the per-row walk's arithmetic bit for bit: a float sum of the taps
 * inside the image from +0 in row-major order, times 1 / count (with and
 * without count_include_pad); -0, infinities and NaNs among the inputs,
 * one and three threads. */
static void test_avgpool_nchw_bands_bits(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    int bad = 0;
    for (int k = 0; k < 120; k++) {
        pa_pool2d_t p = {PA_LAYOUT_NCHW, rnd(1, 2), rnd(1, 9), rnd(1, 30), rnd(1, 40), 0, 0,
                         rnd(1, 7), rnd(1, 7), rnd(1, 2), rnd(1, 2), 0, 0, 0, 0, (int)rnd(0, 1)};
        p.pad_top = rnd(0, p.kh - 1), p.pad_left = rnd(0, p.kw - 1);
        p.pad_bottom = rnd(0, p.kh - 1), p.pad_right = rnd(0, p.kw - 1);
        if (p.h + p.pad_top + p.pad_bottom < p.kh) p.h = p.kh;
        if (p.w + p.pad_left + p.pad_right < p.kw) p.w = p.kw;
        p.h_out = (p.h + p.pad_top + p.pad_bottom - p.kh) / p.sh + 1;
        p.w_out = (p.w + p.pad_left + p.pad_right - p.kw) / p.sw + 1;
        size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * p.h_out * p.w_out);
        float *x = fbuf(nx), *y = fbuf(ny), *y3 = fbuf(ny);
        for (size_t i = 0; i < nx; i++) {
            if (i % 5 == 0)
                x[i] = -0.0f;
            if (i % 89 == 7)
                x[i] = i % 2 ? INFINITY : -INFINITY;
            if (i % 211 == 3)
                x[i] = NAN;
        }
        CHECK_EQ(pa_avgpool2d(&p, x, y, NULL), PA_OK);
        CHECK_EQ(pa_avgpool2d(&p, x, y3, pool), PA_OK);
        CHECK(memcmp(y, y3, ny * sizeof *y) == 0);
        for (int64_t pl = 0; pl < p.n * p.c; pl++)
            for (int64_t oh = 0; oh < p.h_out; oh++)
                for (int64_t ow = 0; ow < p.w_out; ow++) {
                    float s = 0.0f;
                    int64_t ch = 0, cw = 0;
                    for (int64_t i = 0; i < p.kh; i++) {
                        int64_t ih = oh * p.sh - p.pad_top + i;
                        ch += p.count_include_pad ? ih < p.h + p.pad_bottom : ih >= 0 && ih < p.h;
                    }
                    for (int64_t j = 0; j < p.kw; j++) {
                        int64_t iw = ow * p.sw - p.pad_left + j;
                        cw += p.count_include_pad ? iw < p.w + p.pad_right : iw >= 0 && iw < p.w;
                    }
                    for (int64_t i = 0; i < p.kh; i++)
                        for (int64_t j = 0; j < p.kw; j++) {
                            int64_t ih = oh * p.sh - p.pad_top + i;
                            int64_t iw = ow * p.sw - p.pad_left + j;
                            if (ih >= 0 && iw >= 0 && ih < p.h && iw < p.w)
                                s += x[(pl * p.h + ih) * p.w + iw];
                        }
                    s *= 1.0f / (float)(ch * cw > 0 ? ch * cw : 1);
                    float got = y[(pl * p.h_out + oh) * p.w_out + ow];
                    bad += memcmp(&got, &s, sizeof s) != 0 && !(s != s && got != got);
                }
        free(x), free(y), free(y3);
    }
    CHECK_EQ(bad, 0);
    pa_workers_destroy(pool);
}

static void test_pool_random(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    int bad = 0;
    for (int k = 0; k < 300; k++) {
        /* every eighth: 32-72 channels (the NHWC pools' four vectors at a time) */
        pa_pool2d_t p = {rnd(0, 1) ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW, rnd(1, 2),
                         k % 8 == 7 ? rnd(32, 72) : rnd(1, 20),
                         rnd(1, 17), rnd(1, 40), 0, 0, rnd(1, 5), rnd(1, 5), rnd(1, 3), rnd(1, 3),
                         0, 0, 0, 0, (int)rnd(0, 1)};
        p.pad_top = rnd(0, p.kh - 1), p.pad_left = rnd(0, p.kw - 1);
        p.pad_bottom = rnd(0, p.kh - 1), p.pad_right = rnd(0, p.kw - 1);
        if (k % 6 >= 4)     /* tall and wide: NCHW max pools in several bands */
            p.h = rnd(40, 90), p.w = rnd(60, 300);
        if (p.h + p.pad_top + p.pad_bottom < p.kh) p.h = p.kh;
        if (p.w + p.pad_left + p.pad_right < p.kw) p.w = p.kw;
        p.h_out = (p.h + p.pad_top + p.pad_bottom - p.kh) / p.sh + 1;
        p.w_out = (p.w + p.pad_left + p.pad_right - p.kw) / p.sw + 1;
        int nhwc = p.layout == PA_LAYOUT_NHWC;
        size_t nx = (size_t)(p.n * p.c * p.h * p.w), ny = (size_t)(p.n * p.c * p.h_out * p.w_out);
        float *x = fbuf(nx), *y = fbuf(ny), *y2 = fbuf(ny);
        int is_max = k % 2;
        CHECK_EQ((is_max ? pa_maxpool2d : pa_avgpool2d)(&p, x, y, NULL), PA_OK);
        CHECK_EQ((is_max ? pa_maxpool2d : pa_avgpool2d)(&p, x, y2, pool), PA_OK);
        CHECK(memcmp(y, y2, ny * sizeof *y) == 0);
        for (int64_t n = 0; n < p.n; n++)
            for (int64_t c = 0; c < p.c; c++)
                for (int64_t oh = 0; oh < p.h_out; oh++)
                    for (int64_t ow = 0; ow < p.w_out; ow++) {
                        double s = is_max ? -INFINITY : 0;
                        int64_t cnt = 0, cntp = 0;
                        for (int64_t i = 0; i < p.kh; i++)
                            for (int64_t j = 0; j < p.kw; j++) {
                                int64_t ih = oh * p.sh - p.pad_top + i, iw = ow * p.sw - p.pad_left + j;
                                if (ih < p.h + p.pad_bottom && iw < p.w + p.pad_right)
                                    cntp++;
                                if (ih < 0 || iw < 0 || ih >= p.h || iw >= p.w)
                                    continue;
                                float v = x[nhwc ? ((n * p.h + ih) * p.w + iw) * p.c + c
                                                 : ((n * p.c + c) * p.h + ih) * p.w + iw];
                                s = is_max ? fmax(s, v) : s + v;
                                cnt++;
                            }
                        if (!is_max)
                            s /= (p.count_include_pad ? cntp : cnt) ? (p.count_include_pad ? cntp : cnt) : 1;
                        float got = y[nhwc ? ((n * p.h_out + oh) * p.w_out + ow) * p.c + c
                                           : ((n * p.c + c) * p.h_out + oh) * p.w_out + ow];
                        bad += fabs(got - s) > 1e-6 * (1 + fabs(s));
                    }
        free(x), free(y), free(y2);
    }
    CHECK_EQ(bad, 0);
    pa_pool2d_t p = {PA_LAYOUT_NCHW, 1, 1, 4, 4, 2, 2, 2, 2, 0, 2, 0, 0, 0, 0, 0};
    float buf[16];
    CHECK_EQ(pa_maxpool2d(&p, buf, buf, NULL), PA_ERR_INVALID);   /* stride 0 */
    pa_workers_destroy(pool);
}

static void test_resize(void) {
    int bad = 0;
    for (int k = 0; k < 100; k++) {
        int nhwc = (int)rnd(0, 1);
        int64_t n = rnd(1, 2), c = rnd(1, 19), h = rnd(1, 9), w = rnd(1, 9);
        int64_t ho = rnd(1, 20), wo = rnd(1, 20);
        int32_t *r0 = malloc(ho * sizeof *r0), *r1 = malloc(ho * sizeof *r1);
        int32_t *c0 = malloc(wo * sizeof *c0), *c1 = malloc(wo * sizeof *c1);
        float *rw = fbuf((size_t)ho), *cw = fbuf((size_t)wo);
        for (int64_t i = 0; i < ho; i++)
            r0[i] = (int32_t)rnd(0, h - 1), r1[i] = (int32_t)rnd(0, h - 1), rw[i] = fabsf(rw[i]);
        for (int64_t i = 0; i < wo; i++)
            c0[i] = (int32_t)rnd(0, w - 1), c1[i] = (int32_t)rnd(0, w - 1), cw[i] = fabsf(cw[i]);
        float *x = fbuf((size_t)(n * c * h * w)), *y = fbuf((size_t)(n * c * ho * wo));
        CHECK_EQ(pa_resize2d(nhwc, n, c, h, w, ho, wo, r0, r1, rw, c0, c1, cw, x, y, NULL), PA_OK);
#define X(nn, cc, hh, ww) x[nhwc ? (((nn) * h + (hh)) * w + (ww)) * c + (cc) : (((nn) * c + (cc)) * h + (hh)) * w + (ww)]
        for (int64_t a = 0; a < n; a++)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t i = 0; i < ho; i++)
                    for (int64_t j = 0; j < wo; j++) {
                        double top = X(a, ch, r0[i], c0[j]) * (1 - cw[j]) + X(a, ch, r0[i], c1[j]) * cw[j];
                        double bot = X(a, ch, r1[i], c0[j]) * (1 - cw[j]) + X(a, ch, r1[i], c1[j]) * cw[j];
                        double want = top * (1 - rw[i]) + bot * rw[i];
                        float got = y[nhwc ? ((a * ho + i) * wo + j) * c + ch : ((a * c + ch) * ho + i) * wo + j];
                        bad += fabs(got - want) > 1e-5;
                    }
#undef X
        r0[0] = (int32_t)h;   /* out of range: refused */
        CHECK_EQ(pa_resize2d(nhwc, n, c, h, w, ho, wo, r0, r1, rw, c0, c1, cw, x, y, NULL),
                 PA_ERR_INVALID);
        free(r0), free(r1), free(c0), free(c1), free(rw), free(cw), free(x), free(y);
    }
    CHECK_EQ(bad, 0);
}

/* Inf in the blend, worked by hand: x (1 - t) + y t, so an Inf beside a
 * finite value stays Inf and one weighted 0 gives NaN (0 * Inf, as
 * onnxruntime's bilinear); a pair on one pixel copies it, whatever t. */
static void test_resize_inf(void) {
    const float inf = INFINITY;
    const float x[3] = {inf, 2.0f, -inf};
    const int32_t r[1] = {0}, c0[5] = {0, 0, 1, 2, 1}, c1[5] = {1, 1, 2, 2, 1};
    const float rw[1] = {0.5f}, cw[5] = {0.5f, 0.0f, 0.0f, 0.7f, 0.25f};
    for (int nhwc = 0; nhwc < 2; nhwc++) {
        float y[5];
        CHECK_EQ(pa_resize2d(nhwc ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW, 1, 1, 1, 3, 1, 5, r, r, rw,
                             c0, c1, cw, x, y, NULL), PA_OK);
        CHECK(y[0] == inf && y[1] == inf && isnan(y[2]) && y[3] == -inf && y[4] == 2.0f);
    }
}

/* NHWC nearest resampling (the pixel and row copies): an upsampling by
 * 2 and by 3, 13 -> 26 rows and columns, a downsampling, and rows that
 * blend (pairs on two rows) between copied ones; bit for bit against
 * the blend worked here (a NaN's payload, -0 kept), one and three
 * threads. */
static void test_resize_nearest_nhwc(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    static const int64_t geo[][4] = {{5, 7, 2, 2}, {4, 6, 3, 3}, {13, 13, 26, 26},
                                     {9, 8, 4, 3}, {6, 5, 12, 10}};
    int bad = 0;
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        const int64_t n = 2, c = 19, h = geo[g][0], w = geo[g][1];
        const int64_t ho = h * geo[g][2] / 2 > 0 ? h * geo[g][2] / 2 : 1;
        const int64_t wo = w * geo[g][3] / 2 > 0 ? w * geo[g][3] / 2 : 1;
        int32_t *r0 = malloc(ho * sizeof *r0), *r1 = malloc(ho * sizeof *r1);
        int32_t *c0 = malloc(wo * sizeof *c0);
        float *rw = fbuf((size_t)ho), *cw = fbuf((size_t)wo);
        for (int64_t i = 0; i < ho; i++) {
            r0[i] = r1[i] = (int32_t)(i * h / ho), rw[i] = 0.0f;
            if (g == 4 && i % 5 == 4)       /* a blended row among copied ones */
                r1[i] = (int32_t)((r0[i] + 1) % h), rw[i] = 0.375f;
        }
        for (int64_t i = 0; i < wo; i++)
            c0[i] = (int32_t)(i * w / wo), cw[i] = 0.0f;
        size_t nx = (size_t)(n * c * h * w), ny = (size_t)(n * c * ho * wo);
        float *x = fbuf(nx), *y = fbuf(ny), *y3 = fbuf(ny);
        for (size_t i = 0; i < nx; i += 11) {
            uint32_t u = i % 2 ? 0x7fc00000u | (uint32_t)i : 0x80000000u;   /* NaN, -0 */
            memcpy(&x[i], &u, sizeof u);
        }
        CHECK_EQ(pa_resize2d(PA_LAYOUT_NHWC, n, c, h, w, ho, wo, r0, r1, rw, c0, c0, cw, x, y,
                             NULL), PA_OK);
        CHECK_EQ(pa_resize2d(PA_LAYOUT_NHWC, n, c, h, w, ho, wo, r0, r1, rw, c0, c0, cw, x, y3,
                             pool), PA_OK);
        CHECK(memcmp(y, y3, ny * sizeof *y) == 0);
        for (int64_t a = 0; a < n; a++)
            for (int64_t i = 0; i < ho; i++)
                for (int64_t j = 0; j < wo; j++)
                    for (int64_t ch = 0; ch < c; ch++) {
                        float va = x[((a * h + r0[i]) * w + c0[j]) * c + ch];
                        float vb = x[((a * h + r1[i]) * w + c0[j]) * c + ch];
                        float p = va * (1.0f - rw[i]), q = vb * rw[i];
                        float want = r0[i] == r1[i] ? va : p + q;
                        float got = y[((a * ho + i) * wo + j) * c + ch];
                        bad += memcmp(&got, &want, sizeof got) != 0;
                    }
        free(r0), free(r1), free(c0), free(rw), free(cw), free(x), free(y), free(y3);
    }
    CHECK_EQ(bad, 0);
    pa_workers_destroy(pool);
}

static void test_workers(void) {
    pa_status_t st = PA_OK;
    CHECK_EQ(pa_workers_create(0, &st), NULL);
    CHECK_EQ(st, PA_ERR_INVALID);
    CHECK_EQ(pa_workers_create(100000, &st), NULL);
    pa_workers_t *w = pa_workers_create(1, &st);
    CHECK(w && st == PA_OK);
    CHECK_EQ(pa_workers_count(w), 1);
    CHECK_EQ(pa_workers_count(NULL), 1);
    CHECK_EQ(pa_workers_destroy(w), PA_OK);
    CHECK_EQ(pa_workers_destroy(NULL), PA_ERR_INVALID);
    w = pa_workers_create(4, &st);
    CHECK_EQ(pa_workers_count(w), 4);
    CHECK_EQ(pa_workers_destroy(w), PA_OK);
}

/* Hostile geometry (tests/c/kernels/test_kernels_hostile.c found it): an
 * empty tensor of 2^60 images returns at once, it does not walk 2^62
 * empty planes (a hang). */
static void test_empty_bias_act_prelu(void) {
    float v[4] = {1, -1, 2, -2}, s[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    pa_act_params_t relu = {PA_ACT_RELU, 0, 0};
    const int64_t many = (int64_t)1 << 60;  /* x 4 channels: 2^62 planes */
    for (int lay = 0; lay < 2; lay++) {
        CHECK(pa_bias_act((pa_layout_t)lay, many, 4, 0, v, s, v, &relu, NULL) == PA_OK);
        CHECK(pa_prelu((pa_layout_t)lay, many, 4, 0, v, s, v, NULL) == PA_OK);
        CHECK(pa_prelu((pa_layout_t)lay, 0, many, 4, v, s, v, NULL) == PA_OK);
    }
    CHECK(v[0] == 1 && v[1] == -1);
}

/* Weights of 2^80 floats (2^40 input and output channels of one pixel,
 * each count allowed alone): refused, their packed size is 0 (it
 * overflowed int64 before). */
static void test_conv_weights_past_2_40(void) {
    pa_act_params_t none = {PA_ACT_NONE, 0, 0};
    const int64_t big = (int64_t)1 << 40;
    float t[16] = {0};
    pa_conv2d_t pw = {PA_LAYOUT_NHWC, 1, big, 1, 1, big, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, none};
    pa_conv2d_t tall = {PA_LAYOUT_NHWC, 1, 13, 11, 10, INT32_MAX, 11, 10, (int64_t)1 << 32, 1,
                        1, 1, 1, 1, 0, 0, 1, none};
    for (int k = 0; k < 2; k++) {
        const pa_conv2d_t *c = k ? &tall : &pw;
        CHECK_EQ(pa_conv2d_packed_size(c), 0);
        CHECK(pa_conv2d_pack(c, t, t, t, 16) == PA_ERR_INVALID);
        CHECK(pa_conv2d_run(c, t, t, t, NULL) == PA_ERR_INVALID);
    }
}

/* Depthwise geometry 2^40 pads or 2^31 dilations away from the image
 * (every tap outside: each output is its bias): no pointer is formed
 * outside the image and no padded-plane size overflows (UBSan reported
 * both). */
static void test_dwconv_far_taps(void) {
    pa_act_params_t none = {PA_ACT_NONE, 0, 0};
    pa_conv2d_t cases[] = {
        /* NHWC, the top pad 2^40 rows */
        {PA_LAYOUT_NHWC, 1, 13, 4, 9, 13, 9, 5, 2, 1, 1, 2, 1, 1, (int64_t)1 << 40, 0, 13, none},
        /* NCHW, a row dilation of 2^31 and a column stride near 2^31.5:
         * the padded plane's rows x columns pass 2^63 */
        {PA_LAYOUT_NCHW, 2, 6, 1, 1, 6, 3, 3, 5, 1, 1, 3037000500LL, (int64_t)1 << 31, 1, 3, 3,
         6, none},
        /* NCHW, 16 channels (the channel blocks) and the same */
        {PA_LAYOUT_NCHW, 1, 16, 1, 1, 16, 2, 2, 2, 2, 1, 1, (int64_t)1 << 39,
         (int64_t)1 << 39, 5, 5, 16, none},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const pa_conv2d_t *c = &cases[k];
        size_t nx = (size_t)(c->n * c->c_in * c->h * c->w), ny = (size_t)(c->n * c->c_out * c->h_out * c->w_out);
        size_t np = pa_conv2d_packed_size(c);
        CHECK(np > 0);
        float *w = fbuf((size_t)(c->c_out * c->kh * c->kw)), *b = fbuf((size_t)c->c_out);
        float *pk = fbuf(np), *x = fbuf(nx), *y = fbuf(ny);
        CHECK(pa_conv2d_pack(c, w, b, pk, np) == PA_OK);
        CHECK(pa_conv2d_run(c, pk, x, y, NULL) == PA_OK);
        int same = 1;
        for (size_t i = 0; i < ny; i++) {
            int64_t ch = c->layout == PA_LAYOUT_NHWC ? (int64_t)i % c->c_out
                                                     : (int64_t)i / (c->h_out * c->w_out) % c->c_out;
            same &= y[i] == b[ch];
        }
        CHECK(same);
        free(w), free(b), free(pk), free(x), free(y);
    }
}

/* Pooling windows 2^40 - 1 pads from the image (NHWC: no pointer formed
 * out there; every window empty: -inf for the maximum, 0 for the mean)
 * and bottom / right pads past 2^40 (refused: the divisor's padded extent
 * overflowed before). */
static void test_pool_far_pads(void) {
    const int64_t far = ((int64_t)1 << 40) - 1;
    pa_pool2d_t p = {PA_LAYOUT_NHWC, 1, 5, 3, 3, 2, 2, 2, 2, 1, 1, far, far, 0, 0, 0};
    float *x = fbuf(45), *y = fbuf(20);
    CHECK(pa_maxpool2d(&p, x, y, NULL) == PA_OK);
    CHECK(y[0] == -__builtin_inff() && y[19] == -__builtin_inff());
    CHECK(pa_avgpool2d(&p, x, y, NULL) == PA_OK);
    CHECK(y[0] == 0.0f && y[19] == 0.0f);
    p.pad_top = p.pad_left = 0;
    p.count_include_pad = 1;
    for (int k = 0; k < 2; k++) {
        pa_pool2d_t q = p;
        if (k)
            q.pad_right = INT64_MAX - 1;
        else
            q.pad_bottom = INT64_MAX - 1;
        CHECK(pa_avgpool2d(&q, x, y, NULL) == PA_ERR_INVALID);
        CHECK(pa_maxpool2d(&q, x, y, NULL) == PA_ERR_INVALID);
    }
    free(x), free(y);
}

/* pa_kernels_isa: the tiles' own dispatch, bit for bit; nothing with
 * PA_DISABLE_AVX512 set (make check runs this binary once that way). */
static void test_kernels_isa(void) {
    unsigned isa = pa_kernels_isa();
    CHECK_EQ(!!(isa & PA_ISA_AVX512), !!_pa_avx512_usable());
    CHECK_EQ(!!(isa & PA_ISA_AVX512_VNNI), !!_pa_avx512vnni_usable());
    CHECK(!(isa & PA_ISA_AVX512_VNNI) || (isa & PA_ISA_AVX512));
    const char *off = getenv("PA_DISABLE_AVX512");
    if (off && *off && *off != '0') CHECK_EQ(isa, 0u);
    CHECK_EQ(pa_kernels_isa(), isa); /* asked once */
}

int main(void) {
    RUN(test_kernels_isa);
    RUN(test_conv_random);
    RUN(test_conv_pointwise);
    RUN(test_gemm_nhwc512);
    RUN(test_gemm_pixel_tiles);
    RUN(test_gemm_nhwc512_silu_bits);
    RUN(test_gemm_row);
    RUN(test_conv_padded_window);
    RUN(test_dwconv_nhwc512);
    RUN(test_dwconv_nchw512);
    RUN(test_conv_residual);
    RUN(test_conv_threads);
    RUN(test_fewin_pairs_equal_single_blocks);
    RUN(test_conv_invalid);
    RUN(test_act);
    RUN(test_scale_bias_act);
    RUN(test_pool_random);
    RUN(test_avgpool_nchw_bands_bits);
    RUN(test_maxpool_nhwc_large_windows);
    RUN(test_resize);
    RUN(test_resize_inf);
    RUN(test_resize_nearest_nhwc);
    RUN(test_workers);
    RUN(test_empty_bias_act_prelu);
    RUN(test_conv_weights_past_2_40);
    RUN(test_dwconv_far_taps);
    RUN(test_pool_far_pads);
    return pa_test_report();
}
