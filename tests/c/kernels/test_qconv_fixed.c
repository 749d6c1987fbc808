/* test_qconv_fixed.c -- TFLite's fixed-point requantization fused into the
 * 8-bit convolution's epilogue (pa_qconv2d_t.requant, PA_QREQ_FIXED and
 * PA_QREQ_FIXED_SINGLE): on random NHWC convolutions (1x1 over one pixel
 * and many, im2col, grouped, depthwise; 1 to 80 output channels) with
 * random multipliers and shifts (the extremes -31 and 30, multipliers 0 and
 * 2^31 - 1 among them), the fused run on the portable tile and on the
 * VNNI one must give the bytes of the int32 run (PA_Q_S32) followed by
 * pa_qrequant; and the descriptors and tables the fused mode refuses. */
#include "pyarena.h"
#include "kernels/qconv.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;
static int64_t upto(int64_t n) { return (int64_t)(pa_rand(&seed) % (uint64_t)n); }

/* A random NHWC geometry (kind 0: 1x1 over one pixel, 1: 1x1 over many,
 * 2: k x k with padding and groups, 3: depthwise); 0 when it does not fit. */
static int random_geometry(pa_qconv2d_t *q, int kind) {
    memset(q, 0, sizeof *q);
    pa_conv2d_t *c = &q->conv;
    c->layout = PA_LAYOUT_NHWC;
    c->n = 1 + upto(2);
    c->sh = c->sw = c->dh = c->dw = 1;
    c->groups = 1;
    if (kind <= 1) {
        c->kh = c->kw = 1;
        c->h = kind == 0 ? 1 : 1 + upto(9), c->w = kind == 0 ? 1 : 1 + upto(9);
        c->c_in = 1 + upto(100), c->c_out = 1 + upto(80);
    } else if (kind == 2) {
        c->kh = 1 + upto(3), c->kw = 1 + upto(3);
        c->sh = 1 + upto(2), c->sw = 1 + upto(2);
        c->groups = 1 + upto(2);
        c->c_in = c->groups * (1 + upto(12)), c->c_out = c->groups * (1 + upto(40));
        c->pad_top = upto(c->kh), c->pad_left = upto(c->kw);
        c->h = 1 + upto(8), c->w = 1 + upto(8);
    } else {
        c->kh = 1 + upto(4), c->kw = 1 + upto(3);
        c->dh = 1 + upto(2);
        c->c_in = c->c_out = c->groups = 2 + upto(79);
        c->pad_top = upto(c->kh), c->pad_left = upto(c->kw);
        c->h = 1 + upto(8), c->w = 1 + upto(8);
    }
    int64_t eh = c->h + 2 * c->pad_top - (c->kh - 1) * c->dh - 1;
    int64_t ew = c->w + 2 * c->pad_left - (c->kw - 1) * c->dw - 1;
    if (eh < 0 || ew < 0)
        return 0;
    c->h_out = eh / c->sh + 1, c->w_out = ew / c->sw + 1;
    q->x_type = upto(2) ? PA_Q_U8 : PA_Q_S8;
    q->w_type = upto(4) ? PA_Q_S8 : PA_Q_U8;
    q->x_zp = (q->x_type == PA_Q_S8 ? -128 : 0) + (int32_t)upto(256);
    return 1;
}

/* A channel's multiplier and shift: mostly the range of real models (a
 * significand in [2^30, 2^31) and shifts -12 .. 0), else anything the
 * kernels take, the extremes included. */
static void random_fixed(int32_t *m, int32_t *s) {
    switch (upto(6)) {
    case 0: *m = (int32_t)upto(INT64_C(1) << 31); *s = (int32_t)upto(62) - 31; break;
    case 1: *m = INT32_MAX; *s = upto(2) ? 30 : -31; break;
    case 2: *m = (int32_t)upto(3); *s = (int32_t)upto(62) - 31; break;
    case 3: *m = (int32_t)((INT64_C(1) << 30) + upto(INT64_C(1) << 30)); *s = upto(2) ? -31 : 30;
        break;
    default:
        *m = (int32_t)((INT64_C(1) << 30) + upto(INT64_C(1) << 30));
        *s = -(int32_t)upto(13);
    }
}

/* One case: the fused run (both tiles) against S32 then pa_qrequant. */
static int check_case(const pa_qconv2d_t *geo, int single, int *vnni) {
    pa_qconv2d_t q32 = *geo, qf = *geo;
    const pa_conv2d_t *c = &geo->conv;
    const int64_t cout = c->c_out;
    int64_t nx = c->n * c->c_in * c->h * c->w, ny = c->n * cout * c->h_out * c->w_out;
    int64_t nw = cout * c->kh * c->kw * (c->c_in / c->groups);
    q32.y_type = PA_Q_S32;
    qf.y_type = upto(2) ? PA_Q_S8 : PA_Q_U8;
    int32_t tlo = qf.y_type == PA_Q_S8 ? -128 : 0;
    qf.y_zp = tlo + (int32_t)upto(256);
    qf.y_lo = tlo + (int32_t)upto(30), qf.y_hi = tlo + 255 - (int32_t)upto(30);
    qf.requant = single ? PA_QREQ_FIXED_SINGLE : PA_QREQ_FIXED;
    uint8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw);
    int32_t *wzp = malloc((size_t)cout * 4), *bias = malloc((size_t)cout * 4);
    int32_t *ms = malloc((size_t)cout * 8), *acc = malloc((size_t)ny * 4);
    uint8_t *ref = malloc((size_t)ny), *y = malloc((size_t)ny);
    for (int64_t i = 0; i < nx; i++) x[i] = (uint8_t)upto(256);
    for (int64_t i = 0; i < nw; i++) w[i] = (uint8_t)upto(256);
    int per_channel_zp = (int)upto(3) == 0;
    for (int64_t o = 0; o < cout; o++) {
        wzp[o] = per_channel_zp ? (geo->w_type == PA_Q_S8 ? -128 : 0) + (int32_t)upto(256) : 0;
        bias[o] = (int32_t)upto(200001) - 100000;
        random_fixed(&ms[o], &ms[cout + o]);
    }
    size_t p32 = pa_qconv2d_packed_size(&q32), pf = pa_qconv2d_packed_size(&qf);
    size_t s32 = pa_qconv2d_scratch_size(&q32), sf = pa_qconv2d_scratch_size(&qf);
    CHECK(p32 > 0 && pf > p32 && s32 == sf && sf != (size_t)-1);
    void *packed32 = malloc(p32), *packedf = malloc(pf), *scratch = sf ? malloc(sf) : NULL;
    CHECK(pa_qconv2d_pack(&q32, w, wzp, bias, NULL, packed32, p32) == PA_OK);
    CHECK(pa_qconv2d_pack_fixed(&qf, w, wzp, bias, ms, packedf, pf) == PA_OK);
    CHECK(_pa_qconv2d_run_isa(&q32, packed32, x, acc, scratch, s32, 0) == PA_OK);
    pa_qrequant_t rp = {qf.y_type, cout, qf.y_zp, qf.y_lo, qf.y_hi, single};
    CHECK(_pa_qrequant_isa(&rp, ms, acc, ref, ny, 0) == PA_OK);
    int64_t bad = 0;
    for (int isa = 0; isa < 2; isa++) {
        memset(y, 0xA5, (size_t)ny);
        pa_status_t st = _pa_qconv2d_run_isa(&qf, packedf, x, y, scratch, sf, isa);
        if (isa == 1 && st == PA_ERR_STATE)
            continue;
        CHECK(st == PA_OK);
        *vnni += isa;
        for (int64_t i = 0; i < ny; i++)
            bad += y[i] != ref[i];
    }
    CHECK(pa_qconv2d_run(&qf, packedf, x, y, scratch, sf, NULL) == PA_OK);
    bad += memcmp(y, ref, (size_t)ny) != 0;
    free(x), free(w), free(wzp), free(bias), free(ms), free(acc), free(ref), free(y);
    free(packed32), free(packedf), free(scratch);
    return bad == 0;
}

static void test_qconv_fixed_matches_conv_then_qrequant(void) {
    int cases = 0, vnni = 0, failed = 0;
    for (int t = 0; t < 800; t++) {
        pa_qconv2d_t q;
        if (!random_geometry(&q, t % 4))
            continue;
        int ok = check_case(&q, (t / 4) % 2, &vnni);
        CHECK(ok);
        failed += !ok;
        if (!ok && failed < 5)
            fprintf(stderr, "case %d (kind %d, single %d, c_out %lld) differs\n", t, t % 4,
                    (t / 4) % 2, (long long)q.conv.c_out);
        cases++;
    }
    CHECK(cases > 600);
    CHECK(vnni > 0 || !_pa_avx512vnni_usable());
}

/* Every output channel count 1 .. 80 of a one-pixel 1x1 layer (a
 * streaming model's step: the one-row tile), both roundings. */
static void test_qconv_fixed_channel_counts_and_shifts(void) {
    int vnni = 0, failed = 0;
    for (int64_t co = 1; co <= 80; co++) {
        pa_qconv2d_t q;
        random_geometry(&q, 0);
        q.conv.n = 1, q.conv.c_out = co;
        failed += !check_case(&q, (int)(co % 2), &vnni);
    }
    CHECK(failed == 0);
}

static void test_qconv_fixed_refuses_bad_input(void) {
    pa_qconv2d_t ok = {{PA_LAYOUT_NHWC, 1, 4, 3, 3, 8, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, 1,
                        {PA_ACT_NONE, 0, 0}}, PA_Q_S8, PA_Q_S8, PA_Q_S8, 0, 0, -128, 127,
                        PA_QREQ_FIXED};
    int8_t w[8 * 4] = {0}, x[36] = {0}, y[72];
    memset(y, 0x55, sizeof y);
    int32_t ms[16], bias[8] = {0};
    float scale[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int o = 0; o < 8; o++)
        ms[o] = 1 << 30, ms[8 + o] = -3;
    size_t psize = pa_qconv2d_packed_size(&ok);
    CHECK(psize > 0);
    void *packed = malloc(psize);
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize) == PA_OK);
    size_t ssize = pa_qconv2d_scratch_size(&ok);
    void *scratch = malloc(ssize);
    CHECK(pa_qconv2d_run(&ok, packed, x, y, scratch, ssize, NULL) == PA_OK);
    for (int i = 0; i < 72; i++)        /* zero weights and bias: the zero point */
        CHECK(y[i] == 0);
    free(scratch);
    CHECK(pa_qconv2d_pack(&ok, w, NULL, bias, scale, packed, psize) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, NULL, packed, psize) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize - 1) == PA_ERR_INVALID);
    ms[3] = -1;
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize) == PA_ERR_INVALID);
    ms[3] = 1 << 30, ms[8 + 5] = 31;
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize) == PA_ERR_INVALID);
    ms[8 + 5] = -32;
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize) == PA_ERR_INVALID);
    ms[8 + 5] = -31;
    CHECK(pa_qconv2d_pack_fixed(&ok, w, NULL, bias, ms, packed, psize) == PA_OK);
    pa_qconv2d_t q = ok;
    q.requant = PA_QREQ_FLOAT;      /* a float descriptor: pack_fixed refuses it */
    CHECK(pa_qconv2d_pack_fixed(&q, w, NULL, bias, ms, packed, psize) == PA_ERR_INVALID);
    q = ok, q.requant = (pa_qrequant_mode_t)3;
    CHECK(pa_qconv2d_packed_size(&q) == 0);
    q = ok, q.y_type = PA_Q_S32;
    CHECK(pa_qconv2d_packed_size(&q) == 0);
    q = ok, q.conv.layout = PA_LAYOUT_NCHW;
    CHECK(pa_qconv2d_packed_size(&q) == 0);
    CHECK(pa_qconv2d_scratch_size(&q) == (size_t)-1);
    free(packed);
}

/* A one-pixel NHWC depthwise layer takes the pixel path: its scratch
 * holds c_in int32 accumulators (the band path's int16 rows of a 1x1
 * kernel would be half that), in both requant modes. */
static void test_qconv_dw_pixel_path_scratch(void) {
    for (int mode = 0; mode < 2; mode++)
        for (int64_t taps = 1; taps <= 3; taps++) {
            pa_qconv2d_t q = {{PA_LAYOUT_NHWC, 1, 48, taps, 1, 48, 1, 1, taps, 1, 1, 1, 1, 1, 0, 0,
                               48, {PA_ACT_NONE, 0, 0}}, PA_Q_S8, PA_Q_S8, PA_Q_S8, 0, 0, -128,
                              127, mode ? PA_QREQ_FIXED : PA_QREQ_FLOAT};
            size_t ss = pa_qconv2d_scratch_size(&q);
            CHECK(ss != (size_t)-1 && ss >= 48 * 4);
        }
}

int main(void) {
    RUN(test_qconv_dw_pixel_path_scratch);
    RUN(test_qconv_fixed_matches_conv_then_qrequant);
    RUN(test_qconv_fixed_channel_counts_and_shifts);
    RUN(test_qconv_fixed_refuses_bad_input);
    return pa_test_report();
}
