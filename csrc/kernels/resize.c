/* kernels/resize.c -- separable 2-D nearest / bilinear resampling in one
 * pass, no intermediate.
 *
 * The coordinate rules (ONNX's half_pixel, align_corners, asymmetric ...,
 * TFLite's half_pixel_centers) stay in Python, which turns them into
 * per-axis tables once: two source indices and the weight of the second
 * for every output row and column.  Each output value then blends four
 * inputs in registers (nearest: weights 0, so one), where NumPy's
 * take / multiply / add chain wrote the whole tensor several times and
 * needed the intermediate as scratch.  NHWC blends channel vectors; NCHW
 * blends along output rows.
 *
 * The blend is the NumPy path's, operation for operation, so both give the
 * same bits (Inf and NaN included): rows first, then columns, each
 * a * (1 - t) + b * t in float32 with no contraction.  That weighted sum is
 * onnxruntime's (UpsampleBilinear, onnxruntime/core/providers/cpu/tensor/
 * upsample.cc, sums dx * dy * X over the four taps): an Inf on a tap of
 * weight 0 gives 0 * Inf = NaN, and an Inf blended with a finite value
 * stays Inf, where a + (b - a) t made NaN of both.  A tap pair on one
 * pixel (nearest, an axis not resized, the clamped edge) is a copy.  In
 * NHWC a pixel whose pairs both lie on one pixel is copied as a block,
 * and a nearest row the same as the row before it (an upsampling by 2 or
 * more) copies that row whole.
 */
#include "internal.h"

typedef struct {
    int64_t n, c, h, w, h_out, w_out;
    const int32_t *r0, *r1, *c0, *c1;
    const float *rw, *cw, *x;
    float *y;
    int nhwc;
    int cols_one;           /* every column's tap pair on one pixel (nearest) */
} resize_job_t;

/* a (1 - t) + b t, or a when both taps are one pixel (`same`).  Two
 * statements: clang contracts a * w + p within one expression only, and
 * GCC not at all in ISO C, so no FMA changes the bits NumPy gets. */
PA_INLINE float blend(float a, float b, float t, int same) {
    float p = a * (1.0f - t);
    float q = b * t;
    float m = p + q;
    return same ? a : m;
}

PA_MULTIVERSION
static void resize_nhwc_rows(void *ctx, int64_t begin, int64_t end) {
    const resize_job_t *j = ctx;
    const int64_t C = j->c;
    for (int64_t r = begin; r < end; r++) {
        int64_t img = r / j->h_out, oh = r % j->h_out;
        const float *xa = j->x + (img * j->h + j->r0[oh]) * j->w * C;
        const float *xb = j->x + (img * j->h + j->r1[oh]) * j->w * C;
        const float t = j->rw[oh];
        const int sr = j->r0[oh] == j->r1[oh];
        float *restrict yr = j->y + r * j->w_out * C;
        /* a row of copies (nearest) the same as the row before it, which
         * this call wrote (an upsampling's repeated rows): copied whole */
        if (sr && j->cols_one && r > begin && oh > 0 && j->r0[oh] == j->r0[oh - 1] &&
            j->r1[oh - 1] == j->r0[oh]) {
            memcpy(yr, yr - j->w_out * C, (size_t)(j->w_out * C) * sizeof *yr);
            continue;
        }
        for (int64_t ow = 0; ow < j->w_out; ow++) {
            const float *a0 = xa + j->c0[ow] * C, *a1 = xa + j->c1[ow] * C;
            const float *b0 = xb + j->c0[ow] * C, *b1 = xb + j->c1[ow] * C;
            const float u = j->cw[ow];
            const int sc = j->c0[ow] == j->c1[ow];
            float *restrict yp = yr + ow * C;
            if (sr && sc) {         /* one pixel: blend gives a0's values */
                memcpy(yp, a0, (size_t)C * sizeof *yp);
                continue;
            }
            PA_MAP(yp, (size_t)C, ch,
                   blend(blend(a0[ch], b0[ch], t, sr), blend(a1[ch], b1[ch], t, sr), u, sc));
        }
    }
}

PA_MULTIVERSION
static void resize_nchw_rows(void *ctx, int64_t begin, int64_t end) {
    const resize_job_t *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t plane = r / j->h_out, oh = r % j->h_out;
        const float *xa = j->x + (plane * j->h + j->r0[oh]) * j->w;
        const float *xb = j->x + (plane * j->h + j->r1[oh]) * j->w;
        const float t = j->rw[oh];
        const int sr = j->r0[oh] == j->r1[oh];
        float *restrict yr = j->y + r * j->w_out;
        for (int64_t ow = 0; ow < j->w_out; ow++) {
            int32_t i0 = j->c0[ow], i1 = j->c1[ow];
            const float u = j->cw[ow];
            yr[ow] = blend(blend(xa[i0], xb[i0], t, sr), blend(xa[i1], xb[i1], t, sr), u, i0 == i1);
        }
    }
}

static int table_ok(const int32_t *i0, const int32_t *i1, const float *wt, int64_t n_out,
                    int64_t n) {
    if (!i0 || !i1 || !wt)
        return 0;
    for (int64_t i = 0; i < n_out; i++)
        if (i0[i] < 0 || i0[i] >= n || i1[i] < 0 || i1[i] >= n)
            return 0;
    return 1;
}

pa_status_t pa_resize2d(pa_layout_t layout, int64_t n, int64_t c, int64_t h, int64_t w,
                        int64_t h_out, int64_t w_out, const int32_t *r0, const int32_t *r1,
                        const float *rw, const int32_t *c0, const int32_t *c1,
                        const float *cw, const float *x, float *y, pa_workers_t *workers) {
    if ((layout != PA_LAYOUT_NCHW && layout != PA_LAYOUT_NHWC) || n < 1 || c < 1 || h < 1 ||
        w < 1 || h_out < 1 || w_out < 1 || !x || !y)
        return PA_ERR_INVALID;
    int64_t t;
    const int64_t lim = (int64_t)1 << 40;
    if (__builtin_mul_overflow(n, c, &t) || __builtin_mul_overflow(t, h > h_out ? h : h_out, &t) ||
        __builtin_mul_overflow(t, w > w_out ? w : w_out, &t) || t > lim || h > INT32_MAX ||
        w > INT32_MAX)
        return PA_ERR_INVALID;
    if (!table_ok(r0, r1, rw, h_out, h) || !table_ok(c0, c1, cw, w_out, w))
        return PA_ERR_INVALID;
    resize_job_t j = {n, c, h, w, h_out, w_out, r0, r1, c0, c1, rw, cw, x, y,
                      layout == PA_LAYOUT_NHWC, 1};
    for (int64_t i = 0; i < w_out; i++)
        j.cols_one &= c0[i] == c1[i];
    pa_workers_t *pool = _pa_workers_for(workers, (double)n * (double)c * (double)h_out *
                                                       (double)w_out * 4.0);
    if (j.nhwc)
        _pa_parallel(pool, n * h_out, resize_nhwc_rows, &j);
    else
        _pa_parallel(pool, n * c * h_out, resize_nchw_rows, &j);
    return PA_OK;
}
