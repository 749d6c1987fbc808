/* kernels/pooling_nhwc.c -- max and average pooling in NHWC: channel
 * vectors of 8 floats reduced over the window.
 *
 * A pixel's channels are contiguous, so each tap is one vector load per
 * 8 channels.  The channel tail (c not a multiple of 8) is one more
 * vector overlapping the one before it (channels c - 8 .. c - 1: a
 * maximum or a mean written twice is the same value), so no scalar
 * loop; under 8 channels the pixel goes through an 8-float stack vector.
 * BlazeFace's 2x2 stride-2 max pools over 28-88 channels took 2.1-2.3x
 * the TFLite interpreter's time with a loop over a run-time channel
 * count, which GCC leaves scalar at -O2.  Four channel vectors go
 * through the window side by side (32 channels and more): one vector's
 * NaN-propagating maximum is a chain of compare-and-select steps, each
 * waiting on the one before, and four independent chains fill the
 * pipeline (a 3x3 stride-2 pool over 112x112x64: 0.12 ms instead of 0.26;
 * the taps of each channel still in window order, so the same bits).
 * Window geometry (taps inside
 * the image, the divisor of an average) is the NCHW kernels' (inline in
 * internal.h): interior columns use all kw taps, border columns
 * ask _pa_pool_axis().  Threads split the output rows.  No workspace.
 */
#include "internal.h"

typedef float pa_pv8 __attribute__((vector_size(32)));
typedef int32_t pa_pi8 __attribute__((vector_size(32)));

#define PV8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_pv8))
#define PV8_STORE(p, src) memcpy((p), &(src), sizeof(pa_pv8))
#define PV8_SPLAT(a) ((pa_pv8){(a), (a), (a), (a), (a), (a), (a), (a)})

typedef struct {
    const pa_pool2d_t *p;
    const float *x;
    float *y;
    int64_t ow_lo, ow_hi;   /* interior output columns */
} pool_nhwc_job_t;

/* a = max(a, b) lane by lane, NaN propagating: b where b is NaN, a
 * where a is (pooling.c's `b > a || b != b ? b : a` on one value).  A
 * macro: a vector returned by value from a function compiled without AVX
 * changes the ABI (-Wpsabi). */
#define PV8_MAX_INTO(a, b)                                                  \
    do {                                                                    \
        pa_pi8 m_ = ((b) > (a)) | ((b) != (b));                             \
        (a) = (pa_pv8)(((pa_pi8)(b) & m_) | ((pa_pi8)(a) & ~m_));           \
    } while (0)
/* acc = reduce(acc, v): the maximum, or the sum */
#define PV8_REDUCE(acc, v, is_max)                                          \
    do {                                                                    \
        if (is_max)                                                         \
            PV8_MAX_INTO(acc, v);                                           \
        else                                                                \
            (acc) += (v);                                                   \
    } while (0)

/* Output pixel yp: the window's rows [ilo, ihi) x columns [jlo, jhi)
 * starting at xw (rows rs floats apart, columns C), reduced per channel;
 * an average times `scale`. */
PA_INLINE void pool_pixel(const float *xw, int64_t rs, int64_t C, int64_t ilo, int64_t ihi,
                          int64_t jlo, int64_t jhi, float *yp, int is_max, float scale) {
    const pa_pv8 init = PV8_SPLAT(is_max ? -__builtin_inff() : 0.0f);
    if (C < 8) {            /* one vector through the stack */
        float t[8];
        pa_pv8 acc = init, v;
        for (int64_t i = ilo; i < ihi; i++)
            for (int64_t jj = jlo; jj < jhi; jj++) {
                memcpy(t, &init, sizeof t);
                memcpy(t, xw + i * rs + jj * C, (size_t)C * sizeof *t);
                PV8_LOAD(v, t);
                PV8_REDUCE(acc, v, is_max);
            }
        if (!is_max)
            acc *= PV8_SPLAT(scale);
        memcpy(t, &acc, sizeof t);
        memcpy(yp, t, (size_t)C * sizeof *yp);
        return;
    }
    int64_t c0 = 0;
    /* four channel vectors at a time: four independent chains of maxima
     * (one chain waits on each compare-and-select) */
    for (; c0 + 32 <= C; c0 += 32) {
        pa_pv8 a0 = init, a1 = init, a2 = init, a3 = init, v0, v1, v2, v3;
        for (int64_t i = ilo; i < ihi; i++) {
            const float *xr = xw + i * rs + c0;
            for (int64_t jj = jlo; jj < jhi; jj++) {
                PV8_LOAD(v0, xr + jj * C);
                PV8_LOAD(v1, xr + jj * C + 8);
                PV8_LOAD(v2, xr + jj * C + 16);
                PV8_LOAD(v3, xr + jj * C + 24);
                PV8_REDUCE(a0, v0, is_max);
                PV8_REDUCE(a1, v1, is_max);
                PV8_REDUCE(a2, v2, is_max);
                PV8_REDUCE(a3, v3, is_max);
            }
        }
        if (!is_max) {
            const pa_pv8 s = PV8_SPLAT(scale);
            a0 *= s, a1 *= s, a2 *= s, a3 *= s;
        }
        PV8_STORE(yp + c0, a0);
        PV8_STORE(yp + c0 + 8, a1);
        PV8_STORE(yp + c0 + 16, a2);
        PV8_STORE(yp + c0 + 24, a3);
    }
    for (; c0 < C; c0 += 8) {
        const int64_t c = c0 + 8 <= C ? c0 : C - 8;
        pa_pv8 acc = init, v;
        for (int64_t i = ilo; i < ihi; i++) {
            const float *xr = xw + i * rs + c;
            for (int64_t jj = jlo; jj < jhi; jj++) {
                PV8_LOAD(v, xr + jj * C);
                PV8_REDUCE(acc, v, is_max);
            }
        }
        if (!is_max)
            acc *= PV8_SPLAT(scale);
        PV8_STORE(yp + c, acc);
    }
}

PA_INLINE void pool_nhwc_row(const pool_nhwc_job_t *j, int64_t r, int is_max) {
    const pa_pool2d_t *p = j->p;
    const int64_t C = p->c, rs = p->w * C;
    const int64_t img = r / p->h_out, oh = r % p->h_out;
    int64_t ilo, ihi, hcnt, jlo, jhi, wcnt;
    _pa_pool_axis(p, 0, oh, &ilo, &ihi, &hcnt);
    /* pointers start at the window's first tap inside the image (a window
     * row or column 2^40 pads away is no address) */
    const float *xrow = j->x + (img * p->h + (ihi > ilo ? oh * p->sh - p->pad_top + ilo : 0)) * rs;
    float *yrow = j->y + r * p->w_out * C;
    for (int64_t ow = 0; ow < p->w_out; ow++) {
        if (ow >= j->ow_lo && ow < j->ow_hi) {
            jlo = 0, jhi = p->kw, wcnt = p->kw;
        } else {
            _pa_pool_axis(p, 1, ow, &jlo, &jhi, &wcnt);
        }
        const int64_t cnt = hcnt * wcnt;
        const float *xw = jhi > jlo ? xrow + (ow * p->sw - p->pad_left + jlo) * C : xrow;
        pool_pixel(xw, rs, C, 0, ihi - ilo, 0, jhi - jlo, yrow + ow * C, is_max,
                   1.0f / (float)(cnt > 0 ? cnt : 1));
    }
}

PA_MULTIVERSION
static void pool_nhwc_max_rows(void *ctx, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++)
        pool_nhwc_row(ctx, r, 1);
}

PA_MULTIVERSION
static void pool_nhwc_avg_rows(void *ctx, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r++)
        pool_nhwc_row(ctx, r, 0);
}

/* -- separable max pooling ------------------------------------------------
 *
 * A large max window (YOLO's SPP: 5x5, 9x9, 13x13 at stride 1) reduced
 * tap by tap costs kh * kw vector maxima per output pixel.  Here each
 * input row's horizontal maxima (a window row's kw taps per output
 * column) are taken once into a stack tile and every output row folds
 * its kh rows of them: kw + kh maxima per pixel.  Both folds keep the
 * tap walk's order -- the row-major window cut into its rows -- and the
 * maximum above keeps the first of equal taps and the last NaN, so the
 * bits are the tap walk's (+0 / -0 and NaN payloads included).  A work
 * item is one image x 8 channels x a band of output rows whose input rows
 * fit the tile; the channel groups of a band are consecutive items, so a
 * band's input rows are read from L2 by all of them (band-major, each
 * group streamed the whole image again: ResNet-50's 3x3 stride-2 pool
 * over 112x112x64, 3.2 MiB, read 8 times).  It pays only where it saves
 * most of the maxima: about kw * sh + kh per output pixel against the
 * tap walk's kh * kw, and one channel vector per item against the tap
 * walk's four side by side; it runs where that is at most half (SPP's 5x5
 * and larger).  A 3x3 pool -- stride 2 (the same count) or 1 (6 against
 * 9) -- walks its taps: ResNet-50's and Inception's stride-2 pools took
 * 0.26-0.40 ms separable, 0.12 tap by tap. */
#define SEP_VECS 512    /* horizontal maxima on the stack: 16 KiB per thread */

typedef struct {
    const pa_pool2d_t *p;
    const float *x;
    float *y;
    int64_t ow_lo, ow_hi;   /* interior output columns */
    int64_t nch, band, nbands;
} pool_sep_job_t;

/* Input rows [r0, r1) (clipped to the image) of output rows [oh0, oh1). */
static void sep_rows(const pa_pool2d_t *p, int64_t oh0, int64_t oh1, int64_t *r0,
                     int64_t *r1) {
    int64_t a = oh0 * p->sh - p->pad_top, b = (oh1 - 1) * p->sh - p->pad_top + p->kh;
    *r0 = a < 0 ? 0 : a > p->h ? p->h : a;
    *r1 = b < *r0 ? *r0 : b > p->h ? p->h : b;
}

PA_INLINE void sep_item(const pool_sep_job_t *j, int64_t item) {
    const pa_pool2d_t *p = j->p;
    const int64_t C = p->c, W = p->w_out;
    const int64_t cc = item % j->nch, band = item / j->nch % j->nbands;
    const int64_t img = item / j->nbands / j->nch, c = cc * 8 + 8 <= C ? cc * 8 : C - 8;
    const int64_t oh0 = band * j->band;
    const int64_t oh1 = oh0 + j->band < p->h_out ? oh0 + j->band : p->h_out;
    const pa_pv8 init = PV8_SPLAT(-__builtin_inff());
    pa_pv8 hb[SEP_VECS], v;
    int64_t r0, r1, lo, hi, cnt;
    sep_rows(p, oh0, oh1, &r0, &r1);
    for (int64_t ih = r0; ih < r1; ih++) {      /* each row's horizontal maxima */
        const float *xr = j->x + ((img * p->h + ih) * p->w) * C + c;
        for (int64_t ow = 0; ow < W; ow++) {
            if (ow >= j->ow_lo && ow < j->ow_hi)
                lo = 0, hi = p->kw;
            else
                _pa_pool_axis(p, 1, ow, &lo, &hi, &cnt);
            pa_pv8 acc = init;
            const float *xw = xr + (hi > lo ? (ow * p->sw - p->pad_left + lo) * C : 0);
            for (int64_t jj = 0; jj < hi - lo; jj++) {
                PV8_LOAD(v, xw + jj * C);
                PV8_MAX_INTO(acc, v);
            }
            hb[(ih - r0) * W + ow] = acc;
        }
    }
    for (int64_t oh = oh0; oh < oh1; oh++) {    /* each output row folds its rows' */
        _pa_pool_axis(p, 0, oh, &lo, &hi, &cnt);
        const pa_pv8 *hr = hb + (hi > lo ? (oh * p->sh - p->pad_top + lo - r0) * W : 0);
        float *yr = j->y + ((img * p->h_out + oh) * W) * C + c;
        for (int64_t ow = 0; ow < W; ow++) {
            pa_pv8 acc = init;
            for (int64_t i = 0; i < hi - lo; i++)
                PV8_MAX_INTO(acc, hr[i * W + ow]);
            PV8_STORE(yr + ow * C, acc);
        }
    }
}

PA_MULTIVERSION
static void pool_sep_items(void *ctx, int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; item++)
        sep_item(ctx, item);
}

/* Output rows per band of the separable path (their input rows' maxima
 * fit SEP_VECS), or 0 where it does not run: windows under 3x3, a row
 * stride of the window's height or more (no row shared), under 8
 * channels, a tile too small for one output row, or maxima saved fewer
 * than half the tap walk's (above). */
static int64_t sep_band(const pa_pool2d_t *p) {
    if (p->kh < 3 || p->kw < 3 || p->sh >= p->kh || p->c < 8 || p->w_out > SEP_VECS / p->kh)
        return 0;
    if (2 * (p->kw * p->sh + p->kh) > p->kh * p->kw)
        return 0;
    int64_t band = (SEP_VECS / p->w_out - p->kh) / p->sh + 1;
    return band < p->h_out ? band : p->h_out;
}

void _pa_pool_nhwc_run(const pa_pool2d_t *p, const float *x, float *y, pa_workers_t *w,
                       int is_max, int64_t ow_lo, int64_t ow_hi) {
    const int64_t band = is_max ? sep_band(p) : 0;
    if (band > 0) {
        pool_sep_job_t sj = {p, x, y, ow_lo, ow_hi, (p->c + 7) / 8, band, 0};
        sj.nbands = (p->h_out + band - 1) / band;
        _pa_parallel(w, p->n * sj.nch * sj.nbands, pool_sep_items, &sj);
        return;
    }
    pool_nhwc_job_t j = {p, x, y, ow_lo, ow_hi};
    _pa_parallel(w, p->n * p->h_out, is_max ? pool_nhwc_max_rows : pool_nhwc_avg_rows, &j);
}
