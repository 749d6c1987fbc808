/* kernels/dwconv_avx512.c -- the depthwise convolution's AVX-512 tiles:
 * for the NHWC rows, and for NCHW the channel blocks and the bands
 * (sections at the end).
 *
 * Only the tiles are here: the walks that call them (which rows, bands
 * and blocks, their tap tables and band copies) are dwconv.h's, shared
 * with the portable tiles, and dwconv.c picks this file's table where
 * the compiler built it (PA_AVX512_BUILT) and the processor has AVX-512F
 * (_pa_avx512_usable, isa.h).
 *
 * The portable NHWC rows (dwconv.c) hold a tile of 4 output
 * pixels x 16 channels in pairs of 8-float vectors, and GCC's AVX-512
 * clone of them still computes 8 floats per instruction.  Here a channel
 * block is one 16-float register and a tile is 4 pixels x 32 channels (8
 * accumulators), then 4 x 16, then a last block of fewer than 16
 * channels under a mask (its loads and stores masked: no read past the
 * tensor); each tap loads the block's weight vectors once for the 4
 * pixels.  Border columns (some taps outside the image) run one pixel at
 * a time, skipping the outside taps, 16 channels at a time.
 *
 * The sums are the portable rows': the bias, then per tap in the row's
 * tap order a product and an add (no FMA: the portable file is not
 * contracted), so the results are the same bits.  ReLU and clip are
 * applied in the registers (max / min keeping a NaN, as the portable
 * compares do), the other activations through a 16-float stack array and
 * _pa_act_block.  No workspace but the stack.
 */
#include "dwconv.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

#define DW512 __attribute__((target("avx512f")))
#define DW512_INLINE static inline __attribute__((always_inline, target("avx512f")))
_Static_assert(PA_DW_MR == 4, "dw512_tile holds PA_DW_MR = 4 pixels");

/* The blocks' stack tile (input band + output band, pixel-major PA_VEC
 * channels) and the widest output rows they take. */
#define PA_DW512_TILE_FLOATS 8192
#ifndef PA_DW512_BLOCK_MAX_W
#define PA_DW512_BLOCK_MAX_W 28
#endif

static inline __mmask16 dw512_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* A block's lanes from p: all 16, or those of mask m (the rest 0). */
DW512_INLINE __m512 dw512_load(const float *p, __mmask16 m, int masked) {
    return masked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
}

/* act(acc) stored to y under mask m (all 16 lanes unless masked). */
DW512_INLINE void dw512_out(__m512 acc, float *y, __mmask16 m, int masked,
                            const pa_act_params_t *act) {
    switch (act->kind) {
    case PA_ACT_NONE:
        break;
    case PA_ACT_RELU:           /* max(0, acc) keeps a NaN and -0 in acc */
        acc = _mm512_max_ps(_mm512_setzero_ps(), acc);
        break;
    case PA_ACT_CLIP:
        acc = _mm512_max_ps(_mm512_set1_ps(act->alpha), acc);
        acc = _mm512_min_ps(_mm512_set1_ps(act->beta), acc);
        break;
    default: {
        float t[16];
        _mm512_storeu_ps(t, acc);
        _pa_act_block(t, 16, act);
        acc = _mm512_loadu_ps(t);
    }
    }
    if (masked)
        _mm512_mask_storeu_ps(y, m, acc);
    else
        _mm512_storeu_ps(y, acc);
}

/* PA_DW_MR interior pixels (ps floats apart) x NV blocks of 16 channels
 * from channel c0: x and y at the first pixel's channel c0, w and bias
 * at channel c0 (packed rows: no mask needed); the last block's lanes
 * under m where masked. */
DW512_INLINE void dw512_tile(const dw_taps_t *t, const float *x, int64_t ps, const float *w,
                             const float *bias, float *y, int64_t C,
                             const pa_act_params_t *act, const int NV, __mmask16 m,
                             const int masked) {
    const __m512 b0 = _mm512_loadu_ps(bias);
    const __m512 b1 = NV == 2 ? _mm512_loadu_ps(bias + 16) : b0;
    __m512 a0 = b0, a1 = b0, a2 = b0, a3 = b0, e0 = b1, e1 = b1, e2 = b1, e3 = b1;
    const int m0 = NV == 1 && masked;       /* the first block masked */
    for (int64_t k = 0; k < t->n; k++) {
        const float *xq = x + t->xoff[k];
        const float *wv = w + t->woff[k];
        const __m512 w0 = _mm512_loadu_ps(wv);
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(dw512_load(xq, m, m0), w0));
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(dw512_load(xq + ps, m, m0), w0));
        a2 = _mm512_add_ps(a2, _mm512_mul_ps(dw512_load(xq + 2 * ps, m, m0), w0));
        a3 = _mm512_add_ps(a3, _mm512_mul_ps(dw512_load(xq + 3 * ps, m, m0), w0));
        if (NV == 2) {
            const __m512 w1 = _mm512_loadu_ps(wv + 16);
            e0 = _mm512_add_ps(e0, _mm512_mul_ps(dw512_load(xq + 16, m, masked), w1));
            e1 = _mm512_add_ps(e1, _mm512_mul_ps(dw512_load(xq + ps + 16, m, masked), w1));
            e2 = _mm512_add_ps(e2, _mm512_mul_ps(dw512_load(xq + 2 * ps + 16, m, masked), w1));
            e3 = _mm512_add_ps(e3, _mm512_mul_ps(dw512_load(xq + 3 * ps + 16, m, masked), w1));
        }
    }
    dw512_out(a0, y, m, m0, act);
    dw512_out(a1, y + C, m, m0, act);
    dw512_out(a2, y + 2 * C, m, m0, act);
    dw512_out(a3, y + 3 * C, m, m0, act);
    if (NV == 2) {
        dw512_out(e0, y + 16, m, masked, act);
        dw512_out(e1, y + C + 16, m, masked, act);
        dw512_out(e2, y + 2 * C + 16, m, masked, act);
        dw512_out(e3, y + 3 * C + 16, m, masked, act);
    }
}

/* One pixel anywhere, 16 channels from c0 (lanes of m): the taps whose
 * column iw0 + col is outside the row are skipped. */
DW512_INLINE void dw512_pixel(const dw_taps_t *t, const float *xrow0, int64_t iw0, int64_t W,
                              const float *w, const float *bias, float *y, int64_t C,
                              const pa_act_params_t *act, __mmask16 m, const int masked) {
    __m512 acc = _mm512_loadu_ps(bias);
    for (int64_t k = 0; k < t->n; k++) {
        int64_t iw = iw0 + t->col[k];
        if (iw < 0 || iw >= W)
            continue;
        const float *xq = xrow0 + (t->xoff[k] + iw0 * C);
        acc = _mm512_add_ps(acc, _mm512_mul_ps(dw512_load(xq, m, masked),
                                               _mm512_loadu_ps(w + t->woff[k])));
    }
    dw512_out(acc, y, m, masked, act);
}

/* Every channel of one pixel (tile = 0) or of a tile of PA_DW_MR pixels
 * at output column ow. */
DW512_INLINE void dw512_channels(const dw_job_t *j, const dw_taps_t *t, const float *xrow0,
                                 float *y, int64_t ow, int tile) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in, iw0 = ow * c->sw - c->pad_left, ps = c->sw * C;
    const __mmask16 all = (__mmask16)0xFFFF, m = dw512_mask(C % 16);
    int64_t c0 = 0;
    if (tile) {
        const float *x = xrow0 + iw0 * C;
        for (; c0 + 32 <= C; c0 += 32)
            dw512_tile(t, x + c0, ps, j->w + c0, j->bias + c0, y + c0, C, &c->act, 2, all, 0);
        if (c0 + 16 < C)      /* 17..31 channels left: a full block and a masked one */
            dw512_tile(t, x + c0, ps, j->w + c0, j->bias + c0, y + c0, C, &c->act, 2, m, 1);
        else if (c0 + 16 == C)
            dw512_tile(t, x + c0, ps, j->w + c0, j->bias + c0, y + c0, C, &c->act, 1, all, 0);
        else if (c0 < C)
            dw512_tile(t, x + c0, ps, j->w + c0, j->bias + c0, y + c0, C, &c->act, 1, m, 1);
        return;
    }
    for (; c0 + 16 <= C; c0 += 16)
        dw512_pixel(t, xrow0 + c0, iw0, c->w, j->w + c0, j->bias + c0, y + c0, C, &c->act,
                    all, 0);
    if (c0 < C)
        dw512_pixel(t, xrow0 + c0, iw0, c->w, j->w + c0, j->bias + c0, y + c0, C, &c->act,
                    m, 1);
}

DW512 PA_DW_NHWC_TASK(dw512_nhwc_rows, dw512_channels)


/* -- NCHW small planes: blocks of 16 channels ----------------------------- */

/* The portable blocks (dwconv.c) move a band of 16 channel planes
 * into a pixel-major tile and back one float at a time, and run the NHWC
 * tile 8 floats wide.  Here both moves are 16 x 16 transposes in the
 * registers (16 rows of one plane in, 16 pixel vectors out, and back),
 * and the pixels of the whole band, row ends included, run 8 at a time,
 * one 16-float register each (an offset table maps a pixel to its input
 * window), so a 7-column row wastes no lanes; the last 8 overlap the
 * previous ones.  The tile is PA_DW512_TILE_FLOATS floats (32 KiB). */

/* r[0..15] transposed in place: r[i][k] becomes r[k][i]. */
DW512_INLINE void dw512_transpose(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* t[i], t[i + 1]: rows i, i + 1 interleaved per 128-bit lane */
#pragma GCC unroll 4
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    /* r[4g + j], lane k: column 4k + j of rows 4g .. 4g + 3 */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        __m512 u1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        __m512 u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
        r[i] = t[i];
}

/* in[r][q][v] = padded input row ih0 + r (in_rows of them), column q (wp
 * of them), channel v of the nc planes from x (hw floats apart); zeros
 * outside the image and past nc. */
DW512_INLINE void nchw512_gather(const pa_conv2d_t *c, const float *x, int64_t ih0,
                                 int64_t in_rows, int64_t wp, int64_t nc, float *in) {
    const int64_t hw = c->h * c->w;
    memset(in, 0, (size_t)(in_rows * wp * 16) * sizeof *in);
    for (int64_t r = 0; r < in_rows; r++) {
        int64_t ih = ih0 + r;
        if (ih < 0 || ih >= c->h)
            continue;
        for (int64_t q = 0; q < c->w; q += 16) {
            int64_t n = c->w - q < 16 ? c->w - q : 16;
            if (n > wp - c->pad_left - q)        /* columns no window reads */
                n = wp - c->pad_left - q;
            if (n <= 0)
                break;
            const __mmask16 m = dw512_mask(n);
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                v[i] = i < nc ? _mm512_maskz_loadu_ps(m, x + i * hw + ih * c->w + q)
                              : _mm512_setzero_ps();
            dw512_transpose(v);
            float *d = in + (r * wp + c->pad_left + q) * 16;
            for (int64_t i = 0; i < n; i++)
                _mm512_storeu_ps(d + i * 16, v[i]);
        }
    }
}

/* The npix pixels of out (16 channels each) back to the nc planes from y
 * (plane floats apart). */
DW512_INLINE void nchw512_scatter(const float *out, int64_t npix, int64_t nc, float *y,
                                  int64_t plane) {
    for (int64_t p = 0; p < npix; p += 16) {
        int64_t n = npix - p < 16 ? npix - p : 16;
        const __mmask16 m = dw512_mask(n);
        __m512 v[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            v[i] = i < n ? _mm512_loadu_ps(out + (p + i) * 16) : _mm512_setzero_ps();
        dw512_transpose(v);
        for (int64_t i = 0; i < nc; i++)
            _mm512_mask_storeu_ps(y + i * plane + p, m, v[i]);
    }
}

/* Pixels p0 .. p0 + 7 of the band (input windows at in + off[p]) into out. */
DW512_INLINE void nchw512_tile8(const dw_taps_t *t, const float *in, const int32_t *off,
                                int64_t p0, const float *w, const float *bias, float *out,
                                const pa_act_params_t *act) {
    const __m512 b = _mm512_loadu_ps(bias);
    __m512 a0 = b, a1 = b, a2 = b, a3 = b, a4 = b, a5 = b, a6 = b, a7 = b;
    const float *x0 = in + off[p0], *x1 = in + off[p0 + 1], *x2 = in + off[p0 + 2];
    const float *x3 = in + off[p0 + 3], *x4 = in + off[p0 + 4], *x5 = in + off[p0 + 5];
    const float *x6 = in + off[p0 + 6], *x7 = in + off[p0 + 7];
    for (int64_t k = 0; k < t->n; k++) {
        const int64_t o = t->xoff[k];
        const __m512 wv = _mm512_loadu_ps(w + t->woff[k]);
        a0 = _mm512_add_ps(a0, _mm512_mul_ps(_mm512_loadu_ps(x0 + o), wv));
        a1 = _mm512_add_ps(a1, _mm512_mul_ps(_mm512_loadu_ps(x1 + o), wv));
        a2 = _mm512_add_ps(a2, _mm512_mul_ps(_mm512_loadu_ps(x2 + o), wv));
        a3 = _mm512_add_ps(a3, _mm512_mul_ps(_mm512_loadu_ps(x3 + o), wv));
        a4 = _mm512_add_ps(a4, _mm512_mul_ps(_mm512_loadu_ps(x4 + o), wv));
        a5 = _mm512_add_ps(a5, _mm512_mul_ps(_mm512_loadu_ps(x5 + o), wv));
        a6 = _mm512_add_ps(a6, _mm512_mul_ps(_mm512_loadu_ps(x6 + o), wv));
        a7 = _mm512_add_ps(a7, _mm512_mul_ps(_mm512_loadu_ps(x7 + o), wv));
    }
    float *y = out + p0 * 16;
    const __mmask16 all = (__mmask16)0xFFFF;
    dw512_out(a0, y, all, 0, act), dw512_out(a1, y + 16, all, 0, act);
    dw512_out(a2, y + 32, all, 0, act), dw512_out(a3, y + 48, all, 0, act);
    dw512_out(a4, y + 64, all, 0, act), dw512_out(a5, y + 80, all, 0, act);
    dw512_out(a6, y + 96, all, 0, act), dw512_out(a7, y + 112, all, 0, act);
}

/* One pixel of the band (fewer than 8 in all). */
DW512_INLINE void nchw512_pixel(const dw_taps_t *t, const float *x, const float *w,
                                const float *bias, float *y, const pa_act_params_t *act) {
    __m512 acc = _mm512_loadu_ps(bias);
    for (int64_t k = 0; k < t->n; k++)
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(x + t->xoff[k]),
                                               _mm512_loadu_ps(w + t->woff[k])));
    dw512_out(acc, y, (__mmask16)0xFFFF, 0, act);
}

/* One item of the blocks' walk (dwconv.h). */
DW512 static void nchw512_block_band(const dw_block_job_t *bj, const dw_block_t *b,
                                     const dw_taps_t *t) {
    const dw_job_t *j = bj->j;
    const pa_conv2d_t *c = j->c;
    const int64_t wp = bj->wp, img = b->img, c0 = b->c0, nc = b->nc, oh0 = b->oh0;
    const int64_t nr = b->nr, in_rows = b->in_rows;
    float tile[PA_DW512_TILE_FLOATS];
    int32_t off[PA_DW512_TILE_FLOATS / 16];
    float *in = tile, *out = tile + in_rows * wp * 16;
    nchw512_gather(c, j->x + (img * c->c_in + c0) * c->h * c->w, oh0 * c->sh - c->pad_top,
                   in_rows, wp, nc, in);
    const int64_t npix = nr * c->w_out;
    for (int64_t r = 0, p = 0; r < nr; r++)
        for (int64_t ow = 0; ow < c->w_out; ow++)
            off[p++] = (int32_t)((r * c->sh * wp + ow * c->sw) * 16);
    const float *w = j->w + c0, *bias = j->bias + c0;
    if (npix >= 8) {
        int64_t p = 0;
        for (; p + 8 <= npix; p += 8)
            nchw512_tile8(t, in, off, p, w, bias, out, &c->act);
        if (p < npix)                           /* overlapping last tile */
            nchw512_tile8(t, in, off, npix - 8, w, bias, out, &c->act);
    } else {
        for (int64_t p = 0; p < npix; p++)
            nchw512_pixel(t, in + off[p], w, bias, out + p * 16, &c->act);
    }
    nchw512_scatter(out, npix, nc,
                    j->y + ((img * c->c_in + c0) * c->h_out + oh0) * c->w_out,
                    c->h_out * c->w_out);
}

DW512 PA_DW_BLOCKS_TASK(dw512_nchw_blocks, nchw512_block_band)


/* -- NCHW, stride 1 or 2: bands of a zero-padded plane --------------------- */

/* The portable bands (dwconv.c) run rows of 16 columns or more one
 * row at a time: one chain of dependent adds per span of 16.  Here 4
 * output rows run at once (4 independent accumulators, a register each),
 * each tap's weight broadcast once for the 4, and the last span of a row
 * is masked instead of overlapping.  The tile is the portable bands'
 * (_pa_band_fill, stride-2 rows split into even and odd columns). */

/* Columns [0, wo) of R output rows (input rows xrs floats apart in the
 * tile from x, output rows wo floats apart from y). */
DW512_INLINE void nchw512_band_rows(const dw_taps_t *t, const float *wt, const float *x,
                                    int64_t xrs, float *y, int64_t wo, float b,
                                    const pa_act_params_t *act, const int R) {
    for (int64_t ow = 0; ow < wo; ow += 16) {
        const __mmask16 m = dw512_mask(wo - ow);
        const int masked = wo - ow < 16;
        __m512 a0 = _mm512_set1_ps(b), a1 = a0, a2 = a0, a3 = a0;
        const float *xb = x + ow;
        for (int64_t k = 0; k < t->n; k++) {
            const __m512 wv = _mm512_set1_ps(wt[k]);
            const float *xq = xb + t->xoff[k];
            a0 = _mm512_add_ps(a0, _mm512_mul_ps(dw512_load(xq, m, masked), wv));
            if (R > 1) {
                a1 = _mm512_add_ps(a1, _mm512_mul_ps(dw512_load(xq + xrs, m, masked), wv));
                a2 = _mm512_add_ps(a2, _mm512_mul_ps(dw512_load(xq + 2 * xrs, m, masked), wv));
                a3 = _mm512_add_ps(a3, _mm512_mul_ps(dw512_load(xq + 3 * xrs, m, masked), wv));
            }
        }
        dw512_out(a0, y + ow, m, masked, act);
        if (R > 1) {
            dw512_out(a1, y + wo + ow, m, masked, act);
            dw512_out(a2, y + 2 * wo + ow, m, masked, act);
            dw512_out(a3, y + 3 * wo + ow, m, masked, act);
        }
    }
}

/* The band rows of the walk (dwconv.h): 4 at a time, then one by one. */
DW512_INLINE void nchw512_band_tile_rows(const dw_taps_t *t, const float *wt,
                                         const float *tile, int64_t xrs, float *y, int64_t nr,
                                         float b, const pa_conv2d_t *c) {
    const int64_t wo = c->w_out;
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4)
        nchw512_band_rows(t, wt, tile + r * xrs, xrs, y + r * wo, wo, b, &c->act, 4);
    for (; r < nr; r++)
        nchw512_band_rows(t, wt, tile + r * xrs, xrs, y + r * wo, wo, b, &c->act, 1);
}

DW512 PA_DW_BANDS_TASK(dw512_nchw_bands, nchw512_band_tile_rows)

const pa_dw_isa_t _pa_dw_avx512 = {dw512_nhwc_rows, dw512_nchw_blocks, PA_DW512_TILE_FLOATS,
                                   PA_DW512_BLOCK_MAX_W, dw512_nchw_bands};

#else

const pa_dw_isa_t _pa_dw_avx512 = {NULL, NULL, 0, 0, NULL};

#endif
