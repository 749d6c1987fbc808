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
 * count, which GCC leaves scalar at -O2.  Window geometry (taps inside
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
    for (int64_t c0 = 0; c0 < C; c0 += 8) {
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

void _pa_pool_nhwc_run(const pa_pool2d_t *p, const float *x, float *y, pa_workers_t *w,
                       int is_max, int64_t ow_lo, int64_t ow_hi) {
    pool_nhwc_job_t j = {p, x, y, ow_lo, ow_hi};
    _pa_parallel(w, p->n * p->h_out, is_max ? pool_nhwc_max_rows : pool_nhwc_avg_rows, &j);
}
