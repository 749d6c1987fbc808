/* kernels_dwconv.c -- depthwise 2-D convolution (groups = c_in = c_out),
 * any stride, padding and dilation, bias and activation fused, no
 * workspace.
 *
 * A depthwise layer does few multiply-adds per value it reads, so the
 * kernels are built around loads.  NHWC vectorises over channels: a tile
 * of PA_DW_MR output pixels times PA_VEC channels stays in registers while
 * the taps stream past, each tap's weight vector loaded once for the whole
 * tile.  NCHW vectorises along an output row of one channel plane, PA_VEC
 * columns at a time, each tap's weight a scalar.  Padding is handled by
 * geometry, not by copies: the taps whose rows fall outside the image are
 * skipped per output row, the columns whose taps all fall inside (the
 * interior) run the branch-free tile, and the few border columns run a
 * one-pixel loop that skips the outside taps.  Packed weights: bias then
 * one row per tap, each c_in rounded up to PA_VEC floats, zero-filled.
 */
#include "kernels_internal.h"

#define PA_DW_MR 4

typedef struct {
    const pa_conv2d_t *c;
    const float *bias, *w, *x;
    float *y;
    int64_t cp;                 /* channels rounded up to PA_VEC (packed row) */
    int64_t ow_lo, ow_hi;       /* interior output columns [lo, hi)          */
} dw_job_t;

static int64_t round_vec(int64_t c) { return (c + PA_VEC - 1) / PA_VEC * PA_VEC; }

size_t _pa_dwconv_packed_size(const pa_conv2d_t *c) {
    return (size_t)(round_vec(c->c_in) * (c->kh * c->kw + 1));
}

pa_status_t _pa_dwconv_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                            float *packed) {
    int64_t cp = round_vec(c->c_in), taps = c->kh * c->kw;
    for (int64_t ch = 0; ch < cp; ch++) {
        packed[ch] = (ch < c->c_in && bias) ? bias[ch] : 0.0f;
        for (int64_t t = 0; t < taps; t++)
            packed[cp + t * cp + ch] = ch < c->c_in ? weight[ch * taps + t] : 0.0f;
    }
    return PA_OK;
}

/* Taps i in [*lo, *hi) whose input row oh * sh - pad + i * dh is inside. */
static void valid_taps(int64_t o, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n,
                       int64_t *lo, int64_t *hi) {
    int64_t i0 = o * s - pad;
    int64_t a = i0 >= 0 ? 0 : (-i0 + d - 1) / d;
    int64_t b = i0 > n - 1 ? 0 : (n - 1 - i0) / d + 1;
    *lo = a < k ? a : k;
    *hi = b < k ? b : k;
    if (*hi < *lo)
        *hi = *lo;
}

/* Output columns whose every tap column is inside: [lo, hi), maybe empty. */
static void interior(int64_t n_out, int64_t s, int64_t pad, int64_t k, int64_t d, int64_t n,
                     int64_t *lo, int64_t *hi) {
    int64_t a = (pad + s - 1) / s;
    int64_t last = n - 1 - (k - 1) * d + pad;       /* o * s <= last */
    int64_t b = last < 0 ? 0 : last / s + 1;
    *lo = a < n_out ? a : n_out;
    *hi = b < n_out ? b : n_out;
    if (*hi < *lo)
        *hi = *lo;
}

/* -- NHWC: channel vectors ------------------------------------------------- */

/* PA_DW_MR interior pixels from ow0, channels [c0, c0 + nv). */
PA_INLINE void nhwc_tile(const dw_job_t *j, const float *ximg, float *yrow, int64_t oh,
                         int64_t ow0, int64_t ilo, int64_t ihi, int64_t c0, int64_t nv) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in, ps = c->sw * C;
    float acc[PA_DW_MR][PA_VEC];
    for (int p = 0; p < PA_DW_MR; p++)
        for (int v = 0; v < PA_VEC; v++)
            acc[p][v] = j->bias[c0 + v];
    int64_t iw0 = ow0 * c->sw - c->pad_left;
    for (int64_t i = ilo; i < ihi; i++) {
        const float *xr = ximg + ((oh * c->sh - c->pad_top + i * c->dh) * c->w + iw0) * C + c0;
        const float *wr = j->w + i * c->kw * j->cp + c0;
        for (int64_t jj = 0; jj < c->kw; jj++) {
            const float *restrict wv = wr + jj * j->cp;
            const float *restrict xq = xr + jj * c->dw * C;
            for (int64_t v = 0; v < nv; v++) {
                acc[0][v] += xq[v] * wv[v];
                acc[1][v] += xq[ps + v] * wv[v];
                acc[2][v] += xq[2 * ps + v] * wv[v];
                acc[3][v] += xq[3 * ps + v] * wv[v];
            }
        }
    }
    _pa_act_block(&acc[0][0], PA_DW_MR * PA_VEC, &c->act);
    for (int p = 0; p < PA_DW_MR; p++)
        for (int64_t v = 0; v < nv; v++)
            yrow[(ow0 + p) * C + c0 + v] = acc[p][v];
}

/* One pixel anywhere (border columns), channels [c0, c0 + nv). */
PA_INLINE void nhwc_pixel(const dw_job_t *j, const float *ximg, float *yrow, int64_t oh,
                          int64_t ow, int64_t ilo, int64_t ihi, int64_t c0, int64_t nv) {
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in;
    float acc[PA_VEC];
    for (int v = 0; v < PA_VEC; v++)
        acc[v] = j->bias[c0 + v];
    int64_t iw0 = ow * c->sw - c->pad_left;
    for (int64_t i = ilo; i < ihi; i++) {
        const float *xr = ximg + (oh * c->sh - c->pad_top + i * c->dh) * c->w * C + c0;
        for (int64_t jj = 0; jj < c->kw; jj++) {
            int64_t iw = iw0 + jj * c->dw;
            if (iw < 0 || iw >= c->w)
                continue;
            const float *restrict wv = j->w + (i * c->kw + jj) * j->cp + c0;
            const float *restrict xq = xr + iw * C;
            for (int64_t v = 0; v < nv; v++)
                acc[v] += xq[v] * wv[v];
        }
    }
    _pa_act_block(acc, PA_VEC, &c->act);
    for (int64_t v = 0; v < nv; v++)
        yrow[ow * C + c0 + v] = acc[v];
}

/* All channels of pixels [ow, ow + 1) or of the tile at ow. */
PA_INLINE void nhwc_columns(const dw_job_t *j, const float *ximg, float *yrow, int64_t oh,
                            int64_t ow, int64_t ilo, int64_t ihi, int tile) {
    const int64_t C = j->c->c_in;
    int64_t c0 = 0;
    for (; c0 + PA_VEC <= C; c0 += PA_VEC) {
        if (tile)
            nhwc_tile(j, ximg, yrow, oh, ow, ilo, ihi, c0, PA_VEC);
        else
            nhwc_pixel(j, ximg, yrow, oh, ow, ilo, ihi, c0, PA_VEC);
    }
    if (c0 < C) {
        if (tile)
            nhwc_tile(j, ximg, yrow, oh, ow, ilo, ihi, c0, C - c0);
        else
            nhwc_pixel(j, ximg, yrow, oh, ow, ilo, ihi, c0, C - c0);
    }
}

PA_MULTIVERSION
static void dw_nhwc_rows(void *ctx, int64_t begin, int64_t end) {
    const dw_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    const int64_t C = c->c_in;
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / c->h_out, oh = r % c->h_out, ilo, ihi;
        valid_taps(oh, c->sh, c->pad_top, c->kh, c->dh, c->h, &ilo, &ihi);
        const float *ximg = j->x + img * c->h * c->w * C;
        float *yrow = j->y + r * c->w_out * C;
        int64_t ow = 0;
        for (; ow < j->ow_lo; ow++)
            nhwc_columns(j, ximg, yrow, oh, ow, ilo, ihi, 0);
        for (; ow + PA_DW_MR <= j->ow_hi; ow += PA_DW_MR)
            nhwc_columns(j, ximg, yrow, oh, ow, ilo, ihi, 1);
        for (; ow < c->w_out; ow++)
            nhwc_columns(j, ximg, yrow, oh, ow, ilo, ihi, 0);
    }
}

/* -- NCHW: row vectors ------------------------------------------------------ */

/* Interior columns [ow0, ow0 + nv) of one output row, column stride SW
 * (a constant in the callers, so strided loads vectorise). */
PA_INLINE void nchw_span(const dw_job_t *j, const float *plane, float *yrow, int64_t ch,
                         int64_t oh, int64_t ow0, int64_t nv, int64_t ilo, int64_t ihi,
                         int64_t SW) {
    const pa_conv2d_t *c = j->c;
    float acc[PA_VEC];
    for (int v = 0; v < PA_VEC; v++)
        acc[v] = j->bias[ch];
    for (int64_t i = ilo; i < ihi; i++) {
        const float *xr = plane + (oh * c->sh - c->pad_top + i * c->dh) * c->w +
                          ow0 * SW - c->pad_left;
        for (int64_t jj = 0; jj < c->kw; jj++) {
            const float wv = j->w[(i * c->kw + jj) * j->cp + ch];
            const float *restrict xq = xr + jj * c->dw;
            for (int64_t v = 0; v < nv; v++)
                acc[v] += xq[v * SW] * wv;
        }
    }
    _pa_act_block(acc, PA_VEC, &c->act);
    for (int64_t v = 0; v < nv; v++)
        yrow[ow0 + v] = acc[v];
}

/* One border column of one output row. */
static void nchw_pixel(const dw_job_t *j, const float *plane, float *yrow, int64_t ch,
                       int64_t oh, int64_t ow, int64_t ilo, int64_t ihi) {
    const pa_conv2d_t *c = j->c;
    float acc = j->bias[ch];
    int64_t iw0 = ow * c->sw - c->pad_left;
    for (int64_t i = ilo; i < ihi; i++) {
        const float *xr = plane + (oh * c->sh - c->pad_top + i * c->dh) * c->w;
        for (int64_t jj = 0; jj < c->kw; jj++) {
            int64_t iw = iw0 + jj * c->dw;
            if (iw >= 0 && iw < c->w)
                acc += xr[iw] * j->w[(i * c->kw + jj) * j->cp + ch];
        }
    }
    _pa_act_block(&acc, 1, &c->act);
    yrow[ow] = acc;
}

PA_INLINE void nchw_interior(const dw_job_t *j, const float *plane, float *yrow, int64_t ch,
                             int64_t oh, int64_t ilo, int64_t ihi, int64_t SW) {
    int64_t ow = j->ow_lo;
    for (; ow + PA_VEC <= j->ow_hi; ow += PA_VEC)
        nchw_span(j, plane, yrow, ch, oh, ow, PA_VEC, ilo, ihi, SW);
    if (ow < j->ow_hi)
        nchw_span(j, plane, yrow, ch, oh, ow, j->ow_hi - ow, ilo, ihi, SW);
}

PA_MULTIVERSION
static void dw_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const dw_job_t *j = ctx;
    const pa_conv2d_t *c = j->c;
    for (int64_t r = begin; r < end; r++) {
        int64_t plane_i = r / c->h_out, oh = r % c->h_out, ilo, ihi;
        int64_t ch = plane_i % c->c_in;
        valid_taps(oh, c->sh, c->pad_top, c->kh, c->dh, c->h, &ilo, &ihi);
        const float *plane = j->x + plane_i * c->h * c->w;
        float *yrow = j->y + r * c->w_out;
        for (int64_t ow = 0; ow < j->ow_lo; ow++)
            nchw_pixel(j, plane, yrow, ch, oh, ow, ilo, ihi);
        if (c->sw == 1)
            nchw_interior(j, plane, yrow, ch, oh, ilo, ihi, 1);
        else if (c->sw == 2)
            nchw_interior(j, plane, yrow, ch, oh, ilo, ihi, 2);
        else
            nchw_interior(j, plane, yrow, ch, oh, ilo, ihi, c->sw);
        for (int64_t ow = j->ow_hi; ow < c->w_out; ow++)
            nchw_pixel(j, plane, yrow, ch, oh, ow, ilo, ihi);
    }
}

pa_status_t _pa_dwconv_run(const pa_conv2d_t *c, const float *packed, const float *x,
                           float *y, pa_workers_t *workers) {
    dw_job_t j = {c, packed, NULL, x, y, round_vec(c->c_in), 0, 0};
    j.w = packed + j.cp;
    interior(c->w_out, c->sw, c->pad_left, c->kw, c->dw, c->w, &j.ow_lo, &j.ow_hi);
    double work = (double)c->n * (double)c->c_in * (double)c->h_out * (double)c->w_out *
                  (double)(c->kh * c->kw);
    pa_workers_t *w = _pa_workers_for(workers, work);
    if (c->layout == PA_LAYOUT_NHWC)
        _pa_parallel(w, c->n * c->h_out, dw_nhwc_rows, &j);
    else
        _pa_parallel(w, c->n * c->c_in * c->h_out, dw_nchw_rows, &j);
    return PA_OK;
}
