/* test_qconv.c -- the 8-bit convolution (pa_qconv2d_*): random geometry,
 * types and zero points against a plain int64 reference with
 * onnxruntime's requantization, on the portable tile and on the VNNI one
 * where the processor has it (the two must agree bit for bit); a zero
 * point changed between runs; and bad descriptors and arguments refused.
 * Buffers are allocated with exactly the bytes a case needs, so ASan
 * reports any access past them. */
#include "pyarena.h"
#include "kernels/qconv.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x243F6A8885A308D3ULL;
static int64_t upto(int64_t n) { return (int64_t)(pa_rand(&seed) % (uint64_t)n); }

static int32_t lo_of(pa_qtype_t t) { return t == PA_Q_S8 ? -128 : 0; }

static int32_t value(const void *a, pa_qtype_t t, int64_t i) {
    return t == PA_Q_S8 ? ((const int8_t *)a)[i] : ((const uint8_t *)a)[i];
}

/* The convolution in int64, then MlasRequantizeOutput's arithmetic
 * (written with nearbyintf here, as the spec says: round half to even). */
static void reference(const pa_qconv2d_t *q, const void *x, const void *w, const int32_t *wzp,
                      const int32_t *bias, const float *scale, int64_t *out) {
    const pa_conv2d_t *c = &q->conv;
    int64_t cg = c->c_in / c->groups, cog = c->c_out / c->groups;
    int nhwc = c->layout == PA_LAYOUT_NHWC;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t o = 0; o < c->c_out; o++)
            for (int64_t oh = 0; oh < c->h_out; oh++)
                for (int64_t ow = 0; ow < c->w_out; ow++) {
                    int64_t acc = bias[o], g = o / cog;
                    for (int64_t i = 0; i < c->kh; i++)
                        for (int64_t j = 0; j < c->kw; j++)
                            for (int64_t ch = 0; ch < cg; ch++) {
                                int64_t ih = oh * c->sh - c->pad_top + i * c->dh;
                                int64_t iw = ow * c->sw - c->pad_left + j * c->dw;
                                if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w)
                                    continue;
                                int64_t ci = g * cg + ch;
                                int64_t xi = nhwc ? ((n * c->h + ih) * c->w + iw) * c->c_in + ci
                                                  : ((n * c->c_in + ci) * c->h + ih) * c->w + iw;
                                int64_t wi = ((o * c->kh + i) * c->kw + j) * cg + ch;
                                acc += (int64_t)(value(x, q->x_type, xi) - q->x_zp) *
                                       (value(w, q->w_type, wi) - wzp[o]);
                            }
                    int64_t yi = nhwc ? ((n * c->h_out + oh) * c->w_out + ow) * c->c_out + o
                                      : ((n * c->c_out + o) * c->h_out + oh) * c->w_out + ow;
                    if (q->y_type == PA_Q_S32) {
                        out[yi] = acc;
                        continue;
                    }
                    float f = (float)(int32_t)acc * scale[o];
                    f = nearbyintf(f) + (float)q->y_zp;
                    f = f < (float)q->y_lo ? (float)q->y_lo : f > (float)q->y_hi ? (float)q->y_hi : f;
                    out[yi] = (int64_t)f;
                }
}

static int64_t out_at(const void *y, pa_qtype_t t, int64_t i) {
    return t == PA_Q_S32 ? ((const int32_t *)y)[i] : value(y, t, i);
}

/* A random case; returns 0 when its geometry does not fit. */
static int random_case(pa_qconv2d_t *q) {
    memset(q, 0, sizeof *q);
    pa_conv2d_t *c = &q->conv;
    c->layout = upto(2) ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
    int dw = upto(3) == 0;
    c->groups = dw ? 2 + upto(20) : 1 + upto(3);
    int64_t cg = dw ? 1 : 1 + upto(12), cog = dw ? 1 : 1 + upto(40);
    c->c_in = c->groups * cg, c->c_out = c->groups * cog;
    c->n = 1 + upto(2);
    c->kh = 1 + upto(4), c->kw = 1 + upto(4);
    c->sh = 1 + upto(2), c->sw = 1 + upto(2), c->dh = 1 + upto(2), c->dw = 1 + upto(2);
    c->pad_top = upto(c->kh), c->pad_left = upto(c->kw);
    int64_t pb = upto(c->kh), pr = upto(c->kw);
    c->h = 1 + upto(11), c->w = 1 + upto(11);
    c->h_out = (c->h + c->pad_top + pb - (c->kh - 1) * c->dh - 1) / c->sh + 1;
    c->w_out = (c->w + c->pad_left + pr - (c->kw - 1) * c->dw - 1) / c->sw + 1;
    if (c->h + c->pad_top + pb < (c->kh - 1) * c->dh + 1 ||
        c->w + c->pad_left + pr < (c->kw - 1) * c->dw + 1)
        return 0;
    q->x_type = upto(2) ? PA_Q_U8 : PA_Q_S8;
    q->w_type = upto(2) ? PA_Q_U8 : PA_Q_S8;
    q->y_type = (pa_qtype_t)upto(3);
    q->x_zp = lo_of(q->x_type) + (int32_t)upto(256);
    if (q->y_type != PA_Q_S32) {
        int32_t lo = lo_of(q->y_type);
        q->y_zp = lo + (int32_t)upto(256);
        q->y_lo = lo + (int32_t)upto(40);
        q->y_hi = lo + 255 - (int32_t)upto(40);
    }
    return 1;
}

/* Case q with random data against the reference, on each tile and on the
 * public run; adds 1 to *vnni where the VNNI tile ran. */
static void check_case(const pa_qconv2d_t *qc, int t, int *vnni) {
    pa_qconv2d_t q = *qc;
    const pa_conv2d_t *c = &q.conv;
    int64_t nx = c->n * c->c_in * c->h * c->w, ny = c->n * c->c_out * c->h_out * c->w_out;
    int64_t nw = c->c_out * c->kh * c->kw * (c->c_in / c->groups);
    uint8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw);
    int32_t *wzp = malloc((size_t)c->c_out * 4), *bias = malloc((size_t)c->c_out * 4);
    float *scale = malloc((size_t)c->c_out * 4);
    int64_t *ref = malloc((size_t)ny * 8);
    int esize = q.y_type == PA_Q_S32 ? 4 : 1;
    void *y = malloc((size_t)(ny * esize));
    for (int64_t i = 0; i < nx; i++) x[i] = (uint8_t)upto(256);
    for (int64_t i = 0; i < nw; i++) w[i] = (uint8_t)upto(256);
    int per_channel_zp = (int)upto(2);
    for (int64_t o = 0; o < c->c_out; o++) {
        wzp[o] = per_channel_zp ? lo_of(q.w_type) + (int32_t)upto(256) : 0;
        bias[o] = (int32_t)upto(40001) - 20000;
        scale[o] = (float)(upto(1000) + 1) * 1e-5f;
    }
    size_t psize = pa_qconv2d_packed_size(&q), ssize = pa_qconv2d_scratch_size(&q);
    CHECK(psize > 0 && ssize != (size_t)-1);
    void *packed = malloc(psize), *scratch = ssize ? malloc(ssize) : NULL;
    CHECK(pa_qconv2d_pack(&q, w, wzp, bias, scale, packed, psize) == PA_OK);
    reference(&q, x, w, wzp, bias, scale, ref);
    for (int isa = 0; isa < 2; isa++) {
        memset(y, 0xA5, (size_t)(ny * esize));
        pa_status_t st = _pa_qconv2d_run_isa(&q, packed, x, y, scratch, ssize, isa);
        if (isa == 1 && st == PA_ERR_STATE)
            continue;
        CHECK(st == PA_OK);
        *vnni += isa;
        int64_t bad = 0;
        for (int64_t i = 0; i < ny; i++)
            bad += out_at(y, q.y_type, i) != ref[i];
        CHECK(bad == 0);
        if (bad)
            fprintf(stderr, "case %d isa %d: %lld of %lld differ\n", t, isa,
                    (long long)bad, (long long)ny);
    }
    /* the public run: the same */
    CHECK(pa_qconv2d_run(&q, packed, x, y, scratch, ssize, NULL) == PA_OK);
    for (int64_t i = 0; i < ny; i++)
        if (out_at(y, q.y_type, i) != ref[i]) {
            CHECK(0);
            break;
        }
    free(x), free(w), free(wzp), free(bias), free(scale), free(ref), free(y);
    free(packed), free(scratch);
}

static void test_qconv_matches_reference(void) {
    int cases = 0, vnni = 0;
    for (int t = 0; t < 600; t++) {
        pa_qconv2d_t q;
        if (!random_case(&q))
            continue;
        check_case(&q, t, &vnni);
        cases++;
    }
    CHECK(cases > 300);
    printf("    %d cases, %d on the VNNI tile\n", cases, vnni);
}

/* One output pixel (a matrix-vector product: the one-row VNNI tile, its
 * four chains of K steps and a last 1-3 bytes) over long and odd K: 1x1
 * of one pixel in both layouts, a 3x1 window over a 3x1 image (the
 * im2col row), every output type, one or two blocks of 16 channels. */
static void test_qconv_one_pixel(void) {
    const int64_t ks[] = {1, 3, 4, 15, 16, 17, 63, 64, 960, 963};
    const int64_t couts[] = {1, 17, 40};
    int vnni = 0, cases = 0;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (size_t j = 0; j < sizeof couts / sizeof couts[0]; j++)
            for (int form = 0; form < 3; form++) {
                pa_qconv2d_t q;
                memset(&q, 0, sizeof q);
                pa_conv2d_t *c = &q.conv;
                c->layout = form == 1 ? PA_LAYOUT_NCHW : PA_LAYOUT_NHWC;
                c->groups = 1, c->n = 1, c->c_in = ks[i], c->c_out = couts[j];
                c->kh = form == 2 ? 3 : 1, c->kw = 1, c->h = c->kh, c->w = 1;
                c->h_out = c->w_out = 1;
                c->sh = c->sw = c->dh = c->dw = 1;
                q.x_type = (i + j) % 2 ? PA_Q_U8 : PA_Q_S8;
                q.w_type = PA_Q_S8;
                q.y_type = (pa_qtype_t)((i + j + (size_t)form) % 3);
                q.x_zp = lo_of(q.x_type) + (int32_t)upto(256);
                if (q.y_type != PA_Q_S32) {
                    q.y_zp = lo_of(q.y_type) + (int32_t)upto(256);
                    q.y_lo = lo_of(q.y_type), q.y_hi = lo_of(q.y_type) + 255;
                }
                check_case(&q, (int)(i * 100 + j * 10) + form, &vnni);
                cases++;
            }
    printf("    %d cases, %d on the VNNI tile\n", cases, vnni);
}

/* Depthwise geometries the small random cases do not reach: NCHW rows wide
 * enough for the row path (few channels), images taller than one band,
 * channel counts past one and several blocks of 16 with a tail, a
 * dilation too large for the band path (the pixel paths), in both
 * layouts and every output type. */
static void test_qconv_depthwise_paths(void) {
    static const int64_t geo[][8] = {
        /* C, h, w, k, stride, dilation, pad; 1: NCHW takes the row path */
        {16, 9, 60, 3, 1, 1, 1, 1},   /* NCHW: the row path */
        {8, 6, 101, 3, 2, 1, 1, 1},   /* the row path at stride 2 */
        {12, 5, 64, 3, 1, 2, 2, 1},   /* the row path, dilated */
        {40, 7, 50, 5, 1, 1, 2, 0},   /* 32+ channels: the band path, a tail of 8 */
        {37, 70, 70, 3, 2, 1, 1, 0},  /* taller than one band (256 KiB) */
        {200, 2, 96, 5, 1, 1, 2, 0},  /* two rows, most taps in the padding */
        {24, 30, 30, 3, 1, 1, 1, 0},
        {3, 300, 130, 3, 1, 1, 1, 0}, /* NCHW on VNNI: two bands of the plane path */
        {2, 1001, 70, 5, 2, 1, 2, 0}, /* ... three at stride 2 */
        {18, 5, 6, 3, 1, 5000, 5000, 0},  /* rows of 10^4 pixels of 18 channels
                                             x 3 kernel rows: past 16 MiB */
    };
    int vnni = 0, t = 0;
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++)
        for (int layout = 0; layout < 2; layout++)
            for (int yt = 0; yt < 3; yt++, t++) {
                pa_qconv2d_t q;
                memset(&q, 0, sizeof q);
                pa_conv2d_t *c = &q.conv;
                c->layout = layout ? PA_LAYOUT_NHWC : PA_LAYOUT_NCHW;
                c->n = 2, c->groups = c->c_in = c->c_out = geo[g][0];
                c->h = geo[g][1], c->w = geo[g][2], c->kh = c->kw = geo[g][3];
                c->sh = c->sw = geo[g][4], c->dh = c->dw = geo[g][5];
                c->pad_top = c->pad_left = geo[g][6];
                c->h_out = (c->h + 2 * c->pad_top - (c->kh - 1) * c->dh - 1) / c->sh + 1;
                c->w_out = (c->w + 2 * c->pad_left - (c->kw - 1) * c->dw - 1) / c->sw + 1;
                q.x_type = t % 2 ? PA_Q_S8 : PA_Q_U8;
                q.w_type = t % 3 ? PA_Q_S8 : PA_Q_U8;
                q.y_type = (pa_qtype_t)yt;
                q.x_zp = lo_of(q.x_type) + (int32_t)upto(256);
                if (q.y_type != PA_Q_S32) {
                    q.y_zp = lo_of(q.y_type) + (int32_t)upto(256);
                    q.y_lo = lo_of(q.y_type) + (int32_t)upto(40);
                    q.y_hi = lo_of(q.y_type) + 255 - (int32_t)upto(40);
                }
                check_case(&q, t, &vnni);
            }
}

/* An NCHW depthwise layer whose input rows the VNNI plane path refuses
 * (a 3x1 kernel dilated by 2000: 4001 rows of 2100 columns, past 16 MiB
 * of int16) runs on the row path, its interior columns on the VNNI
 * interior kernel (a last tile of 4 columns), in every output type. */
static void test_qconv_depthwise_row_interior(void) {
    int vnni = 0;
    for (int yt = 0; yt < 3; yt++) {
        pa_qconv2d_t q;
        memset(&q, 0, sizeof q);
        pa_conv2d_t *c = &q.conv;
        c->layout = PA_LAYOUT_NCHW;
        c->n = 1, c->groups = c->c_in = c->c_out = 2;
        c->h = 4003, c->w = 2100, c->kh = 3, c->kw = 1, c->sh = c->sw = 1;
        c->dh = 2000, c->dw = 1;
        c->h_out = 3, c->w_out = 2100;
        q.x_type = yt == 1 ? PA_Q_S8 : PA_Q_U8;
        q.w_type = PA_Q_S8;
        q.y_type = (pa_qtype_t)yt;
        q.x_zp = lo_of(q.x_type) + (int32_t)upto(256);
        if (q.y_type != PA_Q_S32) {
            q.y_zp = lo_of(q.y_type) + (int32_t)upto(256);
            q.y_lo = lo_of(q.y_type);
            q.y_hi = lo_of(q.y_type) + 255;
        }
        check_case(&q, 900 + yt, &vnni);
    }
}

/* NCHW geometries of the panel path (qconv_nchw.c): 1x1 layers read from
 * the planes (one group and several, channels not a multiple of 4, output
 * channels past one tile of 8 with a tail), 1x1 at stride 2, short-row
 * KxK windows (3 input channels at stride 2, dilated, grouped), images of
 * several pixel blocks with a tail tile, each in every type. */
static void test_qconv_nchw_panel_paths(void) {
    static const int64_t geo[][10] = {
        /* groups, cg, cog, h, w, k, stride, dilation, pad, n */
        {1, 16, 32, 40, 40, 1, 1, 1, 0, 1},
        {4, 6, 28, 28, 28, 1, 1, 1, 0, 2},      /* grouped, a tile tail of 4 */
        {4, 34, 34, 7, 7, 1, 1, 1, 0, 1},       /* 49 pixels: a tile of 1 */
        {2, 9, 3, 13, 11, 1, 2, 1, 0, 2},       /* 1x1 at stride 2 */
        {1, 3, 16, 33, 35, 3, 2, 1, 1, 1},      /* a first layer */
        {2, 5, 11, 12, 17, 3, 1, 2, 2, 1},      /* dilated, grouped */
        {1, 200, 9, 40, 30, 1, 1, 1, 0, 1},     /* three blocks of pixels */
        {1, 7, 5, 6, 40, 2, 1, 1, 1, 2},        /* an even kernel, padded */
    };
    int vnni = 0, t = 0;
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++)
        for (int yt = 0; yt < 3; yt++)
            for (int types = 0; types < 2; types++, t++) {
                pa_qconv2d_t q;
                memset(&q, 0, sizeof q);
                pa_conv2d_t *c = &q.conv;
                c->layout = PA_LAYOUT_NCHW;
                c->groups = geo[g][0], c->c_in = geo[g][0] * geo[g][1];
                c->c_out = geo[g][0] * geo[g][2];
                c->h = geo[g][3], c->w = geo[g][4], c->kh = c->kw = geo[g][5];
                c->sh = c->sw = geo[g][6], c->dh = c->dw = geo[g][7];
                c->pad_top = c->pad_left = geo[g][8], c->n = geo[g][9];
                c->h_out = (c->h + 2 * c->pad_top - (c->kh - 1) * c->dh - 1) / c->sh + 1;
                c->w_out = (c->w + 2 * c->pad_left - (c->kw - 1) * c->dw - 1) / c->sw + 1;
                q.x_type = (t + types) % 2 ? PA_Q_S8 : PA_Q_U8;
                q.w_type = types ? PA_Q_S8 : PA_Q_U8;
                q.y_type = (pa_qtype_t)yt;
                q.x_zp = lo_of(q.x_type) + (int32_t)upto(256);
                if (q.y_type != PA_Q_S32) {
                    q.y_zp = lo_of(q.y_type) + (int32_t)upto(256);
                    q.y_lo = lo_of(q.y_type) + (int32_t)upto(40);
                    q.y_hi = lo_of(q.y_type) + 255 - (int32_t)upto(40);
                }
                CHECK(_pa_qc_nchw_takes(&q));
                check_case(&q, t, &vnni);
            }
    printf("    %d cases, %d on the VNNI tiles\n", t, vnni);
}

static void test_qconv_zero_point_changes_between_runs(void) {
    pa_qconv2d_t q = {{PA_LAYOUT_NCHW, 1, 8, 6, 6, 20, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1,
                       {PA_ACT_NONE, 0, 0}}, PA_Q_U8, PA_Q_S8, PA_Q_S32, 0, 0, 0, 0,
                       PA_QREQ_FLOAT};
    uint8_t x[8 * 36], w[20 * 9 * 8];
    int32_t zero[20] = {0}, y[20 * 36];
    int64_t ref[20 * 36];
    for (size_t i = 0; i < sizeof x; i++) x[i] = (uint8_t)upto(256);
    for (size_t i = 0; i < sizeof w; i++) w[i] = (uint8_t)upto(256);
    size_t psize = pa_qconv2d_packed_size(&q), ssize = pa_qconv2d_scratch_size(&q);
    void *packed = malloc(psize), *scratch = malloc(ssize);
    CHECK(pa_qconv2d_pack(&q, w, NULL, NULL, NULL, packed, psize) == PA_OK);
    for (int32_t zp = 0; zp < 256; zp += 51) {
        q.x_zp = zp;
        reference(&q, x, w, zero, zero, NULL, ref);
        CHECK(pa_qconv2d_run(&q, packed, x, y, scratch, ssize, NULL) == PA_OK);
        int bad = 0;
        for (int i = 0; i < 20 * 36; i++)
            bad += y[i] != ref[i];
        CHECK(bad == 0);
    }
    free(packed), free(scratch);
}

static void test_qconv_refuses_bad_input(void) {
    pa_qconv2d_t ok = {{PA_LAYOUT_NHWC, 1, 4, 5, 5, 8, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1,
                        {PA_ACT_NONE, 0, 0}}, PA_Q_U8, PA_Q_S8, PA_Q_U8, 3, 7, 0, 255,
                        PA_QREQ_FLOAT};
    CHECK(pa_qconv2d_packed_size(&ok) > 0);
    CHECK(pa_qconv2d_packed_size(NULL) == 0);
    CHECK(pa_qconv2d_scratch_size(NULL) == (size_t)-1);
    pa_qconv2d_t q;
#define REFUSED(FIELD, V)                                                           \
    do {                                                                            \
        q = ok;                                                                     \
        q.FIELD = V;                                                                \
        CHECK(pa_qconv2d_packed_size(&q) == 0);                                     \
        CHECK(pa_qconv2d_scratch_size(&q) == (size_t)-1);                           \
        CHECK(pa_qconv2d_run(&q, w, x, y, s, sizeof s, NULL) == PA_ERR_INVALID);    \
    } while (0)
    uint8_t x[100], w[8 * 36], y[200], s[4096];
    memset(x, 1, sizeof x), memset(w, 1, sizeof w);
    REFUSED(x_type, PA_Q_S32);
    REFUSED(x_type, (pa_qtype_t)7);
    REFUSED(w_type, PA_Q_S32);
    REFUSED(y_type, (pa_qtype_t)-1);
    REFUSED(x_zp, 256);
    REFUSED(x_zp, -1);
    REFUSED(y_zp, 300);
    REFUSED(y_lo, -1);          /* below uint8 */
    REFUSED(y_hi, 256);
    REFUSED(conv.act.kind, PA_ACT_RELU);
    REFUSED(conv.groups, 3);
    REFUSED(conv.kh, 0);
    REFUSED(conv.c_in, 4096);   /* K = 9 * 4096 past the int32-exact limit */
#undef REFUSED
    q = ok;
    q.y_lo = 200, q.y_hi = 100; /* an empty clamp */
    CHECK(pa_qconv2d_packed_size(&q) == 0);
    size_t psize = pa_qconv2d_packed_size(&ok), ssize = pa_qconv2d_scratch_size(&ok);
    void *packed = malloc(psize);
    int32_t zp[8] = {0}, bias[8] = {0};
    float scale[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize - 1) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_pack(&ok, NULL, zp, bias, scale, packed, psize) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, NULL, packed, psize) == PA_ERR_INVALID);
    zp[3] = 128;                /* outside int8 */
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize) == PA_ERR_INVALID);
    zp[3] = 0;
    scale[2] = NAN;
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize) == PA_ERR_INVALID);
    scale[2] = -1.0f;
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize) == PA_ERR_INVALID);
    scale[2] = INFINITY;
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize) == PA_ERR_INVALID);
    scale[2] = 1.0f;
    CHECK(pa_qconv2d_pack(&ok, w, zp, bias, scale, packed, psize) == PA_OK);
    CHECK(ssize <= sizeof s);
    CHECK(pa_qconv2d_run(&ok, packed, x, y, s, ssize, NULL) == PA_OK);
    if (ssize)
        CHECK(pa_qconv2d_run(&ok, packed, x, y, s, ssize - 1, NULL) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_run(&ok, NULL, x, y, s, ssize, NULL) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_run(&ok, packed, NULL, y, s, ssize, NULL) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_run(&ok, packed, x, NULL, s, ssize, NULL) == PA_ERR_INVALID);
    CHECK(_pa_qconv2d_run_isa(&ok, packed, x, y, s, ssize, 2) == PA_ERR_INVALID);
    free(packed);
}

int main(void) {
    RUN(test_qconv_matches_reference);
    RUN(test_qconv_one_pixel);
    RUN(test_qconv_depthwise_paths);
    RUN(test_qconv_nchw_panel_paths);
    RUN(test_qconv_depthwise_row_interior);
    RUN(test_qconv_zero_point_changes_between_runs);
    RUN(test_qconv_refuses_bad_input);
    return pa_test_report();
}
