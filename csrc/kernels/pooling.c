/* kernels/pooling.c -- max and average pooling over 2-D windows, NCHW or
 * NHWC, no workspace.
 *
 * The same shape as the depthwise kernels (a pooling window is a depthwise
 * tap set with weights 1): NHWC reduces channel vectors
 * (pooling_nhwc.c), NCHW reduces PA_VEC output columns of one plane
 * at a time; rows outside the image are
 * skipped per output row, interior columns run branch-free and border
 * columns skip their outside taps.  Padding never wins a maximum, a NaN
 * tap always does (the result is NaN, on every path); the
 * average divides by the taps inside the image, or with
 * count_include_pad by those inside the explicitly padded image (ONNX:
 * the ceil-mode overhang never counts).
 */
#include "internal.h"

typedef struct {
    const pa_pool2d_t *p;
    const float *x;
    float *y;
    int64_t ow_lo, ow_hi;   /* interior output columns                    */
    int is_max;
} pool_job_t;

int _pa_pool_valid(const pa_pool2d_t *p) {
    if (!p || (p->layout != PA_LAYOUT_NCHW && p->layout != PA_LAYOUT_NHWC))
        return 0;
    if (p->n < 1 || p->c < 1 || p->h < 1 || p->w < 1 || p->h_out < 1 || p->w_out < 1 ||
        p->kh < 1 || p->kw < 1 || p->sh < 1 || p->sw < 1 || p->pad_top < 0 ||
        p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0)
        return 0;
    const int64_t lim = (int64_t)1 << 40;
    int64_t t;
    if (__builtin_mul_overflow(p->n, p->c, &t) || __builtin_mul_overflow(t, p->h, &t) ||
        __builtin_mul_overflow(t, p->w, &t) || t > lim)
        return 0;
    if (__builtin_mul_overflow(p->n * p->c, p->h_out, &t) ||
        __builtin_mul_overflow(t, p->w_out, &t) || t > lim)
        return 0;
    /* the bottom and right pads too: an average's divisor counts up to
     * h + pad_top + pad_bottom */
    return p->kh < lim && p->kw < lim && p->h_out < lim / p->sh && p->w_out < lim / p->sw &&
           p->pad_top < lim && p->pad_left < lim && p->pad_bottom < lim && p->pad_right < lim;
}

/* NaN propagates through a maximum: a NaN tap makes the window's result
 * NaN wherever it sits (a NaN accumulator stays, as `b > NaN` is false),
 * as the NumPy path's np.max and onnxruntime's Max / Relu / Clip do --
 * a NaN is never hidden behind the window's other taps. */
PA_INLINE float reduce2(float a, float b, int is_max) {
    return is_max ? (b > a || b != b ? b : a) : a + b;
}

/* -- NCHW ------------------------------------------------------------------ */

/* Interior columns [ow0, ow0 + nv) of output row oh, column stride SW. */
PA_INLINE void nchw_span(const pool_job_t *j, const float *plane, float *yrow, int64_t oh,
                         int64_t ow0, int64_t nv, int64_t SW, int is_max) {
    const pa_pool2d_t *p = j->p;
    int64_t ilo, ihi;
    _pa_pool_taps_in(oh, p->sh, p->pad_top, p->kh, p->h, &ilo, &ihi);
    float acc[PA_VEC];
    for (int v = 0; v < PA_VEC; v++)
        acc[v] = is_max ? -__builtin_inff() : 0.0f;
    for (int64_t i = ilo; i < ihi; i++) {
        const float *xr = plane + (oh * p->sh - p->pad_top + i) * p->w + ow0 * SW - p->pad_left;
        for (int64_t jj = 0; jj < p->kw; jj++) {
            const float *restrict xq = xr + jj;
            for (int64_t v = 0; v < nv; v++)
                acc[v] = reduce2(acc[v], xq[v * SW], is_max);
        }
    }
    float scale = 1.0f;
    if (!is_max) {
        int64_t cnt = _pa_pool_axis_count(p, oh, p->sh, p->pad_top, p->pad_bottom, p->kh, p->h) *
                      _pa_pool_axis_count(p, ow0, p->sw, p->pad_left, p->pad_right, p->kw, p->w);
        scale = 1.0f / (float)(cnt > 0 ? cnt : 1);
    }
    for (int64_t v = 0; v < nv; v++)
        yrow[ow0 + v] = is_max ? acc[v] : acc[v] * scale;
}

/* One border column: the taps outside the image are skipped. */
static void nchw_border(const pool_job_t *j, const float *plane, float *yrow, int64_t oh,
                        int64_t ow, int is_max) {
    const pa_pool2d_t *p = j->p;
    int64_t ilo, ihi, jlo, jhi;
    _pa_pool_taps_in(oh, p->sh, p->pad_top, p->kh, p->h, &ilo, &ihi);
    _pa_pool_taps_in(ow, p->sw, p->pad_left, p->kw, p->w, &jlo, &jhi);
    int64_t ih0 = oh * p->sh - p->pad_top, iw0 = ow * p->sw - p->pad_left;
    float acc = is_max ? -__builtin_inff() : 0.0f;
    for (int64_t i = ilo; i < ihi; i++)
        for (int64_t jj = jlo; jj < jhi; jj++)
            acc = reduce2(acc, plane[(ih0 + i) * p->w + iw0 + jj], is_max);
    if (!is_max) {
        int64_t cnt = _pa_pool_axis_count(p, oh, p->sh, p->pad_top, p->pad_bottom, p->kh, p->h) *
                      _pa_pool_axis_count(p, ow, p->sw, p->pad_left, p->pad_right, p->kw, p->w);
        acc *= 1.0f / (float)(cnt > 0 ? cnt : 1);
    }
    yrow[ow] = acc;
}

PA_INLINE void nchw_row(const pool_job_t *j, const float *plane, float *yrow, int64_t oh,
                        int64_t SW, int is_max) {
    const pa_pool2d_t *p = j->p;
    int64_t ow = j->ow_lo;
    for (; ow + PA_VEC <= j->ow_hi; ow += PA_VEC)
        nchw_span(j, plane, yrow, oh, ow, PA_VEC, SW, is_max);
    if (ow < j->ow_hi)
        nchw_span(j, plane, yrow, oh, ow, j->ow_hi - ow, SW, is_max);
    for (int64_t b = 0; b < j->ow_lo; b++)
        nchw_border(j, plane, yrow, oh, b, is_max);
    for (int64_t b = j->ow_hi; b < p->w_out; b++)
        nchw_border(j, plane, yrow, oh, b, is_max);
}

PA_MULTIVERSION
static void pool_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const pool_job_t *j = ctx;
    const pa_pool2d_t *p = j->p;
    for (int64_t r = begin; r < end; r++) {
        int64_t pl = r / p->h_out, oh = r % p->h_out;
        const float *plane = j->x + pl * p->h * p->w;
        float *yrow = j->y + r * p->w_out;
        if (j->is_max && p->sw == 1)
            nchw_row(j, plane, yrow, oh, 1, 1);
        else if (j->is_max && p->sw == 2)
            nchw_row(j, plane, yrow, oh, 2, 1);
        else if (j->is_max)
            nchw_row(j, plane, yrow, oh, p->sw, 1);
        else if (p->sw == 1)
            nchw_row(j, plane, yrow, oh, 1, 0);
        else if (p->sw == 2)
            nchw_row(j, plane, yrow, oh, 2, 0);
        else
            nchw_row(j, plane, yrow, oh, p->sw, 0);
    }
}

/* -- NCHW max pool, stride 1 or 2: bands of a -inf-padded plane ------------ */

/* As the depthwise bands of dwconv.c: a band of input rows is
 * copied once into a stack tile, padded with -inf (which never wins a
 * maximum), stride-2 rows split into even and odd columns, so every
 * output column is interior and every tap a contiguous load (ShuffleNet's
 * 3x3 stride-2 max pool over 112x112 planes ran 5-10x slower than
 * onnxruntime on the per-row kernel's strided loads and border columns).
 * Average pools too, padded with +0 and each column divided by its own
 * count: ShuffleNet's four 0.39 -> 0.21 ms, the same bits (pool_band). */
#define PA_POOL_TILE_FLOATS 4096

static int64_t pool_row_floats(const pa_pool2d_t *p) {
    int64_t wp = (p->w_out - 1) * p->sw + p->kw;
    return p->sw == 2 ? 2 * ((wp + 1) / 2) : wp;
}

/* Output rows per band (at most h_out); 0: no band fits or another stride. */
static int64_t pool_band_rows(const pa_pool2d_t *p) {
    if (p->sw != 1 && p->sw != 2)
        return 0;
    int64_t in_max = PA_POOL_TILE_FLOATS / pool_row_floats(p);
    if (in_max < p->kh)
        return 0;
    int64_t r = (in_max - p->kh) / p->sh + 1;
    return r < p->h_out ? r : p->h_out;
}

typedef struct {
    const pool_job_t *j;
    int64_t band, nbands;
} pool_band_job_t;

/* The maximum or average of NV output columns from ow of one output row
 * whose window rows start at base (tile rows rf floats apart); an
 * average divides column q's sum by ch * cw[q] taps. */
PA_INLINE void band_span(const pa_pool2d_t *p, const float *base, int64_t rf, int64_t half,
                         int64_t S, float *yrow, int64_t ow, int NV, int is_max, int64_t ch,
                         const int64_t *cw) {
    float acc[PA_VEC];
    for (int v = 0; v < NV; v++)
        acc[v] = is_max ? -__builtin_inff() : 0.0f;
    for (int64_t i = 0; i < p->kh; i++)
        for (int64_t jj = 0; jj < p->kw; jj++) {
            const float *restrict xq =
                base + i * rf + (S == 2 ? (jj & 1) * half + (jj >> 1) : jj) + ow;
            for (int v = 0; v < NV; v++)
                acc[v] = reduce2(acc[v], xq[v], is_max);
        }
    if (is_max) {
        for (int v = 0; v < NV; v++)
            yrow[ow + v] = acc[v];
        return;
    }
    for (int v = 0; v < NV; v++) {
        int64_t cnt = ch * cw[ow + v];
        yrow[ow + v] = acc[v] * (1.0f / (float)(cnt > 0 ? cnt : 1));
    }
}

/* One band of output rows of one plane: its input rows copied into the
 * tile, padded with -inf (a maximum) or +0 (a sum: the taps are added
 * from +0, so the sum is never -0 and adding +0 changes no bit -- the
 * per-row walk's sums of the inside taps). */
PA_INLINE void pool_band(const pool_band_job_t *bj, int64_t item, int64_t S, int is_max) {
    const pool_job_t *j = bj->j;
    const pa_pool2d_t *p = j->p;
    int64_t plane = item / bj->nbands, oh0 = item % bj->nbands * bj->band;
    int64_t nr = p->h_out - oh0 < bj->band ? p->h_out - oh0 : bj->band;
    const int64_t wp = (p->w_out - 1) * p->sw + p->kw, rf = pool_row_floats(p), half = rf / 2;
    const int64_t in_rows = (nr - 1) * p->sh + p->kh;
    float tile[PA_POOL_TILE_FLOATS];
    int64_t cw[PA_POOL_TILE_FLOATS];    /* an average's divisor per column (w_out < rf) */
    _pa_band_fill(tile, j->x + plane * p->h * p->w, oh0 * p->sh - p->pad_top, in_rows, p->h,
                  p->w, p->pad_left, wp, rf, S, is_max ? -__builtin_inff() : 0.0f);
    const int64_t W = p->w_out;
    if (!is_max)
        for (int64_t ow = 0; ow < W; ow++)
            cw[ow] = _pa_pool_axis_count(p, ow, p->sw, p->pad_left, p->pad_right, p->kw, p->w);
    for (int64_t r = 0; r < nr; r++) {
        const float *base = tile + r * p->sh * rf;
        float *yrow = j->y + (plane * p->h_out + oh0 + r) * W;
        const int64_t ch = is_max ? 0 : _pa_pool_axis_count(p, oh0 + r, p->sh, p->pad_top,
                                                             p->pad_bottom, p->kh, p->h);
        /* spans of 16; the rest as one more span overlapping the previous
         * (a value written twice is the same); narrow rows 8 or 4 wide */
        if (W >= PA_VEC) {
            int64_t ow = 0;
            for (; ow + PA_VEC <= W; ow += PA_VEC)
                band_span(p, base, rf, half, S, yrow, ow, PA_VEC, is_max, ch, cw);
            if (ow < W)
                band_span(p, base, rf, half, S, yrow, W - PA_VEC, PA_VEC, is_max, ch, cw);
        } else if (W >= 8) {
            band_span(p, base, rf, half, S, yrow, 0, 8, is_max, ch, cw);
            band_span(p, base, rf, half, S, yrow, W - 8, 8, is_max, ch, cw);
        } else if (W >= 4) {
            band_span(p, base, rf, half, S, yrow, 0, 4, is_max, ch, cw);
            band_span(p, base, rf, half, S, yrow, W - 4, 4, is_max, ch, cw);
        } else {
            for (int64_t ow = 0; ow < W; ow++)
                band_span(p, base, rf, half, S, yrow, ow, 1, is_max, ch, cw);
        }
    }
}

PA_MULTIVERSION
static void pool_nchw_max_bands(void *ctx, int64_t begin, int64_t end) {
    const pool_band_job_t *bj = ctx;
    for (int64_t item = begin; item < end; item++) {
        if (bj->j->p->sw == 1)
            pool_band(bj, item, 1, 1);
        else
            pool_band(bj, item, 2, 1);
    }
}

PA_MULTIVERSION
static void pool_nchw_avg_bands(void *ctx, int64_t begin, int64_t end) {
    const pool_band_job_t *bj = ctx;
    for (int64_t item = begin; item < end; item++) {
        if (bj->j->p->sw == 1)
            pool_band(bj, item, 1, 0);
        else
            pool_band(bj, item, 2, 0);
    }
}

static pa_status_t pool_run(const pa_pool2d_t *p, const float *x, float *y,
                            pa_workers_t *workers, int is_max) {
    if (!_pa_pool_valid(p) || !x || !y)
        return PA_ERR_INVALID;
    pool_job_t j = {p, x, y, 0, 0, is_max};
    /* interior: every window column inside [0, w) */
    int64_t a = (p->pad_left + p->sw - 1) / p->sw;
    int64_t last = p->w - p->kw + p->pad_left;
    int64_t b = last < 0 ? 0 : last / p->sw + 1;
    j.ow_lo = a < p->w_out ? a : p->w_out;
    j.ow_hi = b < p->w_out ? b : p->w_out;
    if (j.ow_hi < j.ow_lo)
        j.ow_hi = j.ow_lo;
    double work = (double)p->n * (double)p->c * (double)p->h_out * (double)p->w_out *
                  (double)p->kh * (double)p->kw;
    pa_workers_t *w = _pa_workers_for(workers, work);
    pool_band_job_t bj = {&j, p->layout == PA_LAYOUT_NCHW ? pool_band_rows(p) : 0, 0};
    if (p->layout == PA_LAYOUT_NHWC) {     /* pooling_nhwc.c */
        _pa_pool_nhwc_run(p, x, y, w, is_max, j.ow_lo, j.ow_hi);
    } else if (bj.band > 0) {
        bj.nbands = (p->h_out + bj.band - 1) / bj.band;
        _pa_parallel(w, p->n * p->c * bj.nbands, is_max ? pool_nchw_max_bands
                                                        : pool_nchw_avg_bands, &bj);
    } else
        _pa_parallel(w, p->n * p->c * p->h_out, pool_nchw_rows, &j);
    return PA_OK;
}

pa_status_t pa_maxpool2d(const pa_pool2d_t *p, const float *x, float *y,
                         pa_workers_t *workers) {
    return pool_run(p, x, y, workers, 1);
}

pa_status_t pa_avgpool2d(const pa_pool2d_t *p, const float *x, float *y,
                         pa_workers_t *workers) {
    return pool_run(p, x, y, workers, 0);
}
