/* test_deconv.c -- pa_deconv2d (kernels/deconv.c), the transposed
 * convolution of disjoint taps: equal within float32 rounding to a
 * double-precision reference over random geometries (1 to 33 input
 * channels, 1 to 9 output channels: whole blocks of 4, a short last
 * block and the one-channel tile; rows of 1 to 70 pixels: short tiles,
 * whole ones and both; kernels 1x1 to 3x3, kw = 2 on the shuffle tile and
 * the others lane by lane), with and without a bias, with an activation,
 * on one and three threads; nothing past the output is written; bad
 * descriptors and arguments are refused; a PA_CALL_DECONV2D record runs
 * the same call. */
#include "kernels/internal.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x243F6A8885A308D3ULL;

static float rndf(void) { return (float)((pa_rand(&seed) >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f; }

static float *fbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = rndf();
    return p;
}

static double ref_act(double v, pa_act_t kind) {
    if (kind == PA_ACT_RELU)
        return v < 0 ? 0 : v;
    if (kind == PA_ACT_SIGMOID)
        return 1.0 / (1.0 + exp(-v));
    return v;
}

#define GUARD 64

static int check_case(const pa_deconv2d_t *d, int with_bias, pa_workers_t *pool) {
    const int64_t n = d->n, C = d->c_in, H = d->h, W = d->w, O = d->c_out, kh = d->kh,
                  kw = d->kw, Ho = H * kh, Wo = W * kw;
    const size_t nx = (size_t)(n * C * H * W), ny = (size_t)(n * O * Ho * Wo);
    float *x = fbuf(nx), *w = fbuf((size_t)(C * O * kh * kw)), *b = fbuf((size_t)O);
    float *y = malloc((ny + GUARD) * sizeof *y);
    for (size_t i = 0; i < ny + GUARD; i++)
        y[i] = 1234.5f;
    size_t np = pa_deconv2d_packed_size(d);
    float *packed = malloc((np ? np : 1) * sizeof *packed);
    int bad = 0;
    CHECK(np > 0);
    CHECK_EQ(pa_deconv2d_pack(d, w, with_bias ? b : NULL, packed, np), PA_OK);
    CHECK_EQ(pa_deconv2d_run(d, packed, x, y, pool), PA_OK);
    for (int64_t img = 0; img < n; img++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    const int64_t h = oh / kh, i = oh % kh, v = ow / kw, j = ow % kw;
                    double s = 0, mag = 0;
                    for (int64_t c = 0; c < C; c++) {
                        double p = (double)x[((img * C + c) * H + h) * W + v] *
                                   (double)w[((c * O + o) * kh + i) * kw + j];
                        s += p;
                        mag += fabs(p);
                    }
                    if (with_bias) {
                        s += b[o];
                        mag += fabs(b[o]);
                    }
                    double want = ref_act(s, d->act.kind);
                    double got = y[((img * O + o) * Ho + oh) * Wo + ow];
                    if (!(fabs(got - want) <= 1e-6 * (mag + 1.0)))
                        bad++;
                }
    for (size_t i = ny; i < ny + GUARD; i++)
        if (y[i] != 1234.5f)
            bad++;
    CHECK_EQ(bad, 0);
    free(x), free(w), free(b), free(y), free(packed);
    return bad;
}

static void test_deconv_matches_the_reference(void) {
    static const int64_t widths[] = {1, 5, 15, 16, 17, 31, 32, 33, 47, 70};
    pa_status_t st;
    pa_workers_t *three = pa_workers_create(3, &st);
    CHECK(three != NULL);
    for (int t = 0; t < 160; t++) {
        pa_deconv2d_t d = {PA_LAYOUT_NCHW, 0, 0, 0, 0, 0, 0, 0, {PA_ACT_NONE, 0, 0}};
        d.n = 1 + (int64_t)(pa_rand(&seed) % 2);
        d.c_in = 1 + (int64_t)(pa_rand(&seed) % 33);
        d.c_out = 1 + (int64_t)(pa_rand(&seed) % 9);
        d.h = 1 + (int64_t)(pa_rand(&seed) % 3);
        d.w = widths[pa_rand(&seed) % (sizeof widths / sizeof *widths)];
        d.kh = 1 + (int64_t)(pa_rand(&seed) % 3);
        d.kw = t % 3 ? 2 : 1 + (int64_t)(pa_rand(&seed) % 3);
        d.act.kind = (pa_act_t[]){PA_ACT_NONE, PA_ACT_RELU, PA_ACT_SIGMOID}[t % 3];
        if (check_case(&d, t % 4 != 0, t % 2 ? three : NULL))
            fprintf(stderr, "case %d: n %lld c_in %lld c_out %lld h %lld w %lld k %lldx%lld\n",
                    t, (long long)d.n, (long long)d.c_in, (long long)d.c_out, (long long)d.h,
                    (long long)d.w, (long long)d.kh, (long long)d.kw);
    }
    pa_workers_destroy(three);
}

static void test_deconv_refuses_bad_arguments(void) {
    const pa_deconv2d_t ok = {PA_LAYOUT_NCHW, 1, 3, 2, 5, 4, 2, 2, {PA_ACT_NONE, 0, 0}};
    float x[64] = {0}, y[256], w[64] = {0};
    size_t np = pa_deconv2d_packed_size(&ok);
    CHECK(np > 0 && np < 128);
    float packed[128];
    CHECK_EQ(pa_deconv2d_pack(&ok, w, NULL, packed, np), PA_OK);
    CHECK_EQ(pa_deconv2d_pack(&ok, w, NULL, packed, np - 1), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_pack(&ok, NULL, NULL, packed, np), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_pack(&ok, w, NULL, NULL, np), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_pack(NULL, w, NULL, packed, np), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_run(&ok, packed, x, y, NULL), PA_OK);
    CHECK_EQ(pa_deconv2d_run(&ok, NULL, x, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_run(&ok, packed, NULL, y, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_run(&ok, packed, x, NULL, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_deconv2d_run(NULL, packed, x, y, NULL), PA_ERR_INVALID);
    for (int field = 0; field < 11; field++) {
        pa_deconv2d_t d = ok;
        switch (field) {
        case 0: d.layout = PA_LAYOUT_NHWC; break;
        case 1: d.n = 0; break;
        case 2: d.c_in = -1; break;
        case 3: d.h = 0; break;
        case 4: d.w = 0; break;
        case 5: d.c_out = 0; break;
        case 6: d.kh = 17; break;
        case 7: d.kw = 0; break;
        case 8: d.act.kind = (pa_act_t)99; break;
        case 9: d.h = (int64_t)1 << 40; break;
        default: d.c_in = INT64_MAX / 2; break;
        }
        CHECK_EQ(pa_deconv2d_packed_size(&d), 0);
        CHECK_EQ(pa_deconv2d_pack(&d, w, NULL, packed, 128), PA_ERR_INVALID);
        CHECK_EQ(pa_deconv2d_run(&d, packed, x, y, NULL), PA_ERR_INVALID);
    }
}

/* A PA_CALL_DECONV2D record in a call list: the bits of the direct call. */
static void test_deconv_as_a_call_record(void) {
    const pa_deconv2d_t d = {PA_LAYOUT_NCHW, 1, 5, 3, 37, 6, 2, 2, {PA_ACT_RELU, 0, 0}};
    const size_t nx = 5 * 3 * 37, ny = 6 * 6 * 74, np = pa_deconv2d_packed_size(&d);
    float *x = fbuf(nx), *w = fbuf(5 * 6 * 4), *b = fbuf(6), *packed = malloc(np * sizeof *packed);
    float *want = malloc(ny * sizeof *want), *got = malloc(ny * sizeof *got);
    CHECK_EQ(pa_deconv2d_pack(&d, w, b, packed, np), PA_OK);
    CHECK_EQ(pa_deconv2d_run(&d, packed, x, want, NULL), PA_OK);
    pa_call_t call;
    memset(&call, 0, sizeof call);
    call.kind = PA_CALL_DECONV2D;
    call.params = &d, call.w = packed, call.a = x, call.y = got;
    size_t failed = 99;
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_OK);
    CHECK_EQ(failed, 1);
    CHECK(memcmp(want, got, ny * sizeof *got) == 0);
    call.w = NULL;          /* the kernel's own refusal, at that call's index */
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_ERR_INVALID);
    CHECK_EQ(failed, 0);
    free(x), free(w), free(b), free(packed), free(want), free(got);
}

int main(void) {
    RUN(test_deconv_matches_the_reference);
    RUN(test_deconv_refuses_bad_arguments);
    RUN(test_deconv_as_a_call_record);
    return pa_test_report();
}
