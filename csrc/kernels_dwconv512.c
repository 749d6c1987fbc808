/* kernels_dwconv512.c -- the NHWC depthwise convolution's AVX-512 rows.
 *
 * The portable NHWC rows (kernels_dwconv.c) hold a tile of 4 output
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
#include "kernels_dwconv.h"

#if defined(__x86_64__) && !defined(PA_NO_MULTIVERSION) && \
    (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11))

#include <immintrin.h>

#define DW512 __attribute__((target("avx512f")))
#define DW512_INLINE static inline __attribute__((always_inline, target("avx512f")))
#define DW512_MR 4          /* pixels per tile, as the portable PA_DW_MR */

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

/* DW512_MR interior pixels (ps floats apart) x NV blocks of 16 channels
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
        const float *xq = xrow0 + t->xoff[k] + iw0 * C;
        acc = _mm512_add_ps(acc, _mm512_mul_ps(dw512_load(xq, m, masked),
                                               _mm512_loadu_ps(w + t->woff[k])));
    }
    dw512_out(acc, y, m, masked, act);
}

/* Every channel of one pixel (tile = 0) or of a tile of DW512_MR pixels
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

DW512 void _pa_dw_nhwc512_rows(void *ctx, int64_t begin, int64_t end) {
    const dw_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in;
    dw_taps_t t;
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / c->h_out, oh = r % c->h_out;
        _pa_dw_row_taps(c, oh, C, j->cp, &t);
        /* input row of tap row 0 (maybe outside: only offsets of inside
         * rows are added to it) */
        const float *xrow0 = j->x + img * c->h * c->w * C +
                             (oh * c->sh - c->pad_top) * c->w * C;
        float *yrow = j->y + r * c->w_out * C;
        int64_t ow = 0;
        for (; ow < j->ow_lo; ow++)
            dw512_channels(j, &t, xrow0, yrow + ow * C, ow, 0);
        for (; ow + DW512_MR <= j->ow_hi; ow += DW512_MR)
            dw512_channels(j, &t, xrow0, yrow + ow * C, ow, 1);
        if (ow < j->ow_hi && j->ow_hi - j->ow_lo >= DW512_MR) {  /* overlapping tile */
            dw512_channels(j, &t, xrow0, yrow + (j->ow_hi - DW512_MR) * C,
                           j->ow_hi - DW512_MR, 1);
            ow = j->ow_hi;
        }
        for (; ow < c->w_out; ow++)
            dw512_channels(j, &t, xrow0, yrow + ow * C, ow, 0);
    }
}

#else

void _pa_dw_nhwc512_rows(void *ctx, int64_t begin, int64_t end) {
    (void)ctx, (void)begin, (void)end;      /* never called: no AVX-512 build */
}

#endif
