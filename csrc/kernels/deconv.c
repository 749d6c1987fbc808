/* kernels/deconv.c -- a transposed 2-D convolution whose taps do not
 * overlap (stride = kernel size, no dilation, no padding, groups 1): the
 * 2x2 stride-2 upsampling layers of segmentation heads (PP-OCR's text
 * detector, U-Nets).
 *
 * Every output pixel then takes exactly one tap of one input pixel:
 *     y[n, o, h kh + i, w kw + j] = bias[o] + sum_c x[n, c, h, w] W[c, o, i, j]
 * (NCHW; ONNX's weight layout [c_in][c_out][kh][kw]).  The NumPy path
 * computes the columns W^T x into scratch and adds each tap's columns into
 * the output (a strided pass per tap); here each output row is written
 * once, from registers, with the bias and the activation fused.
 *
 * Work is split by input row (n, h): the row's c_in x w inputs stay in
 * cache while every block of output channels and tap row i reads them.
 * The tile is 4 output channels (1 when c_out < 4) x kw taps x 32 input
 * pixels, summed over the input channels in order (one multiply-add per
 * channel, contracted to FMA where the target clone has it: the
 * reduction's rounding differs from BLAS's only in the order and
 * fusing of the same products), then the bias is added and the kw taps'
 * vectors interleaved into the output row (kw = 2: two shuffles; other
 * kw: stored lane by lane).  Input pixels past the row's end are read as
 * zeros from a copy and never stored.  The vectors are GNU C vectors of
 * 16 floats: one zmm register each in the AVX-512 clone (x86-64-v4), two
 * ymm / four xmm in the others (the portable fallback).  No workspace.
 */
#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

typedef float pa_dv __attribute__((vector_size(64)));

#define DV_LANES 16
#define DV_PIX 32       /* input pixels per tile: two vectors */
#define DV_OB 4         /* output channels per block */
#define DV_MAX_K 16     /* the largest kh and kw taken (taps per block row) */

/* Output channels per block: DV_OB, or 1 for fewer output channels. */
static int64_t deconv_ob(const pa_deconv2d_t *d) { return d->c_out >= DV_OB ? DV_OB : 1; }

static int deconv_valid(const pa_deconv2d_t *d) {
    if (!d || d->layout != PA_LAYOUT_NCHW || d->n < 1 || d->c_in < 1 || d->h < 1 ||
        d->w < 1 || d->c_out < 1 || d->kh < 1 || d->kw < 1 || d->kh > DV_MAX_K ||
        d->kw > DV_MAX_K || (unsigned)d->act.kind > PA_ACT_GELU)
        return 0;
    const int64_t lim = (int64_t)1 << 40;
    int64_t t;
    if (__builtin_mul_overflow(d->n, d->h, &t) || __builtin_mul_overflow(t, d->w, &t) ||
        __builtin_mul_overflow(t, d->kh * d->kw, &t) ||
        __builtin_mul_overflow(t, d->c_in > d->c_out ? d->c_in : d->c_out, &t) || t > lim)
        return 0;
    if (__builtin_mul_overflow(d->c_in, d->c_out + DV_OB, &t) ||
        __builtin_mul_overflow(t, d->kh * d->kw, &t) || t > lim)
        return 0;
    return 1;
}

/* Blocks of output channels (the last may be short). */
static int64_t deconv_blocks(const pa_deconv2d_t *d) {
    int64_t ob = deconv_ob(d);
    return (d->c_out + ob - 1) / ob;
}

size_t pa_deconv2d_packed_size(const pa_deconv2d_t *d) {
    if (!deconv_valid(d))
        return 0;
    int64_t ob = deconv_ob(d), nb = deconv_blocks(d);
    return (size_t)(nb * d->kh * d->c_in * ob * d->kw + nb * ob);
}

/* packed: per block b, tap row i, input channel c, the block's ob x kw
 * weights W[c][b ob + l][i][j] at [(b kh + i) c_in + c][l kw + j] (zero past
 * c_out), then the bias padded to nb * ob floats. */
pa_status_t pa_deconv2d_pack(const pa_deconv2d_t *d, const float *weight, const float *bias,
                             float *packed, size_t packed_size) {
    size_t need = pa_deconv2d_packed_size(d);
    if (need == 0 || !weight || !packed || packed_size < need)
        return PA_ERR_INVALID;
    const int64_t ob = deconv_ob(d), nb = deconv_blocks(d), kh = d->kh, kw = d->kw;
    const int64_t C = d->c_in, O = d->c_out;
    float *p = packed;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t l = 0; l < ob; l++)
                    for (int64_t j = 0; j < kw; j++) {
                        int64_t o = b * ob + l;
                        *p++ = o < O ? weight[((c * O + o) * kh + i) * kw + j] : 0.0f;
                    }
    for (int64_t o = 0; o < nb * ob; o++)
        *p++ = bias && o < O ? bias[o] : 0.0f;
    return PA_OK;
}

typedef struct {
    const pa_deconv2d_t *d;
    const float *packed, *x;
    float *y;
} deconv_job_t;

/* The interleave of kw = 2: lanes (a0, b0, a1, b1, ...) of a then b. */
PA_INLINE void store_pairs(float *dst, const pa_dv *pa, const pa_dv *pb) {
    const pa_dv a = *pa, b = *pb;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
    pa_dv lo = __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                       7, 23);
    pa_dv hi = __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                       30, 15, 31);
    memcpy(dst, &lo, sizeof lo);
    memcpy(dst + DV_LANES, &hi, sizeof hi);
#else
    for (int t = 0; t < DV_LANES; t++) {
        dst[2 * t] = a[t];
        dst[2 * t + 1] = b[t];
    }
#endif
}

/* Input pixels w0 .. w0 + np - 1 of one channel row into two vectors:
 * loaded whole (np = DV_PIX), or copied with zeros past np. */
PA_INLINE void load_px(const float *xs, int64_t np, pa_dv *x0, pa_dv *x1) {
    if (np == DV_PIX) {
        memcpy(x0, xs, sizeof *x0);
        memcpy(x1, xs + DV_LANES, sizeof *x1);
        return;
    }
    *x0 = *x1 = (pa_dv){0};
    memcpy(x0, xs, (size_t)(np < DV_LANES ? np : DV_LANES) * sizeof(float));
    if (np > DV_LANES)
        memcpy(x1, xs + DV_LANES, (size_t)(np - DV_LANES) * sizeof(float));
}

/* One tile of kw = 2: output channels o0 .. o0 + OB - 1 of a block (OB =
 * DV_OB or 1; the first nl stored), tap row i, input pixels w0 .. w0 + np
 * - 1 of row (n, h), np <= DV_PIX.  xs: the row's pixel w0 of channel 0,
 * channels `plane` floats apart; wp: the block's packed weights of tap row
 * i; ys: output row h kh + i of channel o0 from column 2 w0, channels
 * ystride floats apart. */
/* The tile's accumulators are named variables, a<l><j><v> for channel l
 * of the block, tap j, vector v (with an array GCC kept them on the
 * stack): DV_CH(X) names the block's channels. */
#define DV_DECL(l) pa_dv a##l##00 = {0}, a##l##01 = {0}, a##l##10 = {0}, a##l##11 = {0};
#define DV_STEP(l)                                                                        \
    {                                                                                     \
        pa_dv w0 = (pa_dv){0} + wc[2 * (l)], w1 = (pa_dv){0} + wc[2 * (l) + 1];            \
        a##l##00 += w0 * x0;                                                              \
        a##l##01 += w0 * x1;                                                              \
        a##l##10 += w1 * x0;                                                              \
        a##l##11 += w1 * x1;                                                              \
    }
#define DV_STORE(l)                                                                       \
    if ((l) < nl) {                                                                       \
        pa_dv b = (pa_dv){0} + bias[l];                                                   \
        a##l##00 += b, a##l##01 += b, a##l##10 += b, a##l##11 += b;                       \
        store_row(ys + (l) * ystride, np, &a##l##00, &a##l##10, &a##l##01, &a##l##11);    \
    }

/* The 2 np outputs of one channel: taps 0 and 1 of pixels 0-15 (v0,
 * v1) then 16-31 (u0, u1), interleaved. */
PA_INLINE void store_row(float *yo, int64_t np, const pa_dv *v0, const pa_dv *v1,
                         const pa_dv *u0, const pa_dv *u1) {
    if (np == DV_PIX) {
        store_pairs(yo, v0, v1);
        store_pairs(yo + 2 * DV_LANES, u0, u1);
        return;
    }
    float t[2 * DV_PIX];
    store_pairs(t, v0, v1);
    store_pairs(t + 2 * DV_LANES, u0, u1);
    memcpy(yo, t, (size_t)(2 * np) * sizeof *yo);
}

/* One tile of kw = 2: output channels o0 .. o0 + OB - 1 of a block (OB =
 * DV_OB or 1; the first nl stored), tap row i, input pixels w0 .. w0 + np
 * - 1 of row (n, h), np <= DV_PIX.  xs: the row's pixel w0 of channel 0,
 * channels `plane` floats apart; wp: the block's packed weights of tap row
 * i; ys: output row h kh + i of channel o0 from column 2 w0, channels
 * ystride floats apart. */
#define DECONV_TILE(NAME, OB, CH)                                                         \
    PA_INLINE void NAME(const float *xs, int64_t plane, int64_t C, const float *wp,         \
                        const float *bias, float *ys, int64_t ystride, int64_t np,         \
                        int64_t nl) {                                                     \
        CH(DV_DECL)                                                                       \
        for (int64_t c = 0; c < C; c++) {                                                 \
            pa_dv x0, x1;                                                                 \
            load_px(xs + c * plane, np, &x0, &x1);                                        \
            const float *wc = wp + c * ((OB) * 2);                                        \
            CH(DV_STEP)                                                                   \
        }                                                                                 \
        CH(DV_STORE)                                                                      \
    }

#define DV_CH4(X) X(0) X(1) X(2) X(3)
#define DV_CH1(X) X(0)
_Static_assert(DV_OB == 4, "DV_CH4 names DV_OB channels");
DECONV_TILE(tile4_k2, DV_OB, DV_CH4)
DECONV_TILE(tile1_k2, 1, DV_CH1)

/* Any kw, one output channel (l of a block of ob): each tap's vectors
 * summed over the channels, then stored lane by lane, kw floats apart. */
PA_INLINE void tile_any(const float *xs, int64_t plane, int64_t C, const float *wp, int64_t ob,
                        int64_t l, int64_t kw, float bias, float *yo, int64_t np) {
    for (int64_t j = 0; j < kw; j++) {
        pa_dv a0 = {0}, a1 = {0};
        for (int64_t c = 0; c < C; c++) {
            pa_dv x0, x1;
            load_px(xs + c * plane, np, &x0, &x1);
            pa_dv wv = (pa_dv){0} + wp[(c * ob + l) * kw + j];
            a0 += wv * x0;
            a1 += wv * x1;
        }
        a0 += bias;
        a1 += bias;
        for (int64_t t = 0; t < np; t++)
            yo[t * kw + j] = t < DV_LANES ? a0[t] : a1[t - DV_LANES];
    }
}

/* Input rows [begin, end) of the n * h, every output row they make. */
PA_MULTIVERSION
static void deconv_rows(void *ctx, int64_t begin, int64_t end) {
    const deconv_job_t *jb = ctx;
    const pa_deconv2d_t *d = jb->d;
    const int64_t C = d->c_in, H = d->h, W = d->w, O = d->c_out, kh = d->kh, kw = d->kw;
    const int64_t ob = deconv_ob(d), nb = deconv_blocks(d), Wo = W * kw, Ho = H * kh;
    const int64_t plane = H * W, ystride = Ho * Wo;
    const float *bias = jb->packed + nb * kh * C * ob * kw;
    for (int64_t r = begin; r < end; r++) {
        const int64_t n = r / H, h = r % H;
        const float *xr = jb->x + (n * C * H + h) * W;
        for (int64_t b = 0; b < nb; b++) {
            const int64_t nl = O - b * ob < ob ? O - b * ob : ob;
            for (int64_t i = 0; i < kh; i++) {
                const float *wp = jb->packed + (b * kh + i) * C * ob * kw;
                float *yr = jb->y + ((n * O + b * ob) * Ho + h * kh + i) * Wo;
                for (int64_t w0 = 0; w0 < W; w0 += DV_PIX) {
                    const int64_t np = W - w0 < DV_PIX ? W - w0 : DV_PIX;
                    if (kw == 2 && ob == DV_OB)
                        tile4_k2(xr + w0, plane, C, wp, bias + b * ob, yr + w0 * 2, ystride,
                                 np, nl);
                    else if (kw == 2)
                        tile1_k2(xr + w0, plane, C, wp, bias + b * ob, yr + w0 * 2, ystride,
                                 np, nl);
                    else
                        for (int64_t l = 0; l < nl; l++)
                            tile_any(xr + w0, plane, C, wp, ob, l, kw, bias[b * ob + l],
                                     yr + l * ystride + w0 * kw, np);
                }
                if (d->act.kind != PA_ACT_NONE)
                    for (int64_t l = 0; l < nl; l++)
                        _pa_act_block(yr + l * ystride, (size_t)Wo, &d->act);
            }
        }
    }
}

pa_status_t pa_deconv2d_run(const pa_deconv2d_t *d, const float *packed, const float *x,
                            float *y, pa_workers_t *workers) {
    if (!deconv_valid(d) || !packed || !x || !y)
        return PA_ERR_INVALID;
    deconv_job_t j = {d, packed, x, y};
    double macs = (double)d->n * (double)d->h * (double)d->w * (double)d->c_in *
                  (double)d->c_out * (double)(d->kh * d->kw);
    _pa_parallel(_pa_workers_for(workers, macs), d->n * d->h, deconv_rows, &j);
    return PA_OK;
}
