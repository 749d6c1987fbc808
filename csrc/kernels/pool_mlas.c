/* kernels/pool_mlas.c -- average pools that sum in onnxruntime MLAS's
 * order (pa_avgpool2d_ordered), so its float32 bits.
 *
 * A QDQ file runs some float pools between a DequantizeLinear and a
 * QuantizeLinear (a float island onnxruntime leaves unfused); the next
 * QuantizeLinear turns a sum rounded in another order into another quantum
 * now and then.  The orders (pyarena/importers/onnx_qdq.py marks the pools,
 * pyarena/runtime/kernels/pooling.py's NumPy paths are the reference the
 * tests compare these with, bit for bit):
 *
 *   PA_POOL_ORDER_TAPS (AveragePool; MLAS's NCHWc pooling kernels,
 *   mlas/lib/snchwc.cpp): every tap of the padded window, rows then
 *   columns, a pad reading +0.0f, the sum starting from the first tap
 *   (not from 0.0f: a first tap of -0.0f stays so), then
 *   sum / (float)count, count the taps inside the image (or inside the
 *   explicitly padded image with count_include_pad), at least 1.
 *
 *   PA_POOL_ORDER_LANES (GlobalAveragePool; MlasPoolGlobalKernel,
 *   mlas/lib/pooling.cpp): four lanes over a plane of n values, lane k
 *   from x[k] on adding x[4i + k] in order (while 4i + 3 < n; lanes of
 *   +0.0f when n < 4), MlasReduceAddFloat32x4's (l0 + l2) + (l1 + l3), the
 *   tail x[4 * (n / 4) ...] added one by one, then / (float)n.
 *
 * No reassociation anywhere (ISO C, no -ffast-math): each sum is the
 * chain written.  The loops run across independent sums (output columns
 * or channels), which vectorizes without reordering any one of them.
 */
#include "internal.h"

#define PA_PM_CHUNK 256     /* outputs (NCHW) or channels (NHWC) per block */
#define PA_PM_ROW 2048      /* an NCHW block's input columns               */

/* PA_MAP for short rows (an NCHW output row of 14 columns): blocks of 8,
 * then of 4, then one by one -- each block a fixed count, vectorized. */
#define PM_MAP(dst, n, i, EXPR)                                          \
    do {                                                                 \
        size_t i##_0 = 0;                                                \
        for (; i##_0 + 8 <= (n); i##_0 += 8)                             \
            for (size_t i = i##_0; i < i##_0 + 8; i++)                   \
                (dst)[i] = (EXPR);                                       \
        for (; i##_0 + 4 <= (n); i##_0 += 4)                             \
            for (size_t i = i##_0; i < i##_0 + 4; i++)                   \
                (dst)[i] = (EXPR);                                       \
        for (size_t i = i##_0; i < (n); i++)                             \
            (dst)[i] = (EXPR);                                           \
    } while (0)

typedef struct pm_job {
    const pa_pool2d_t *p;
    const float *x;
    float *y;
} pm_job_t;

/* The count of an output along one axis (>= 0; the product is clamped to 1). */
PA_INLINE int64_t pm_count(const pa_pool2d_t *p, int64_t o, int axis) {
    return axis ? _pa_pool_axis_count(p, o, p->sw, p->pad_left, p->pad_right, p->kw, p->w)
                : _pa_pool_axis_count(p, o, p->sh, p->pad_top, p->pad_bottom, p->kh, p->h);
}

/* -- TAPS, NCHW: output row oh of one plane, columns [o0, o0 + cnt) -------- */

/* cntw: the block's column counts (pm_count along the columns, exact in
 * float: the products with the row count stay below 2^24). */
PA_INLINE void taps_nchw_block(const pa_pool2d_t *p, const float *restrict plane,
                               float *restrict yrow, int64_t oh, int64_t o0, size_t cnt,
                               const float *restrict cntw) {
    float acc[PA_PM_CHUNK], buf[PA_PM_ROW];
    const int64_t sw = p->sw, c0 = o0 * sw - p->pad_left;   /* buf[0]'s column */
    const int64_t span = ((int64_t)cnt - 1) * sw + p->kw;
    int64_t a = c0 < 0 ? -c0 : 0;                           /* buf[a, b): the input */
    int64_t b = c0 + span < p->w ? span : p->w - c0;
    a = a < span ? a : span;
    b = b > a ? b : a;
    for (int64_t i = 0; i < p->kh; i++) {
        const int64_t r = oh * p->sh - p->pad_top + i;
        const float *row = buf;
        if (r >= 0 && r < p->h && a == 0 && b == span) {
            row = plane + r * p->w + c0;                    /* every tap inside */
        } else if (r >= 0 && r < p->h) {
            const float *xr = plane + r * p->w + c0;
            for (int64_t q = 0; q < a; q++)
                buf[q] = 0.0f;
            for (int64_t q = a; q < b; q++)
                buf[q] = xr[q];
            for (int64_t q = b; q < span; q++)
                buf[q] = 0.0f;
        } else {
            for (int64_t q = 0; q < span; q++)
                buf[q] = 0.0f;
        }
        for (int64_t kx = 0; kx < p->kw; kx++) {
            const float *src = row + kx;
            if (i == 0 && kx == 0) {
                if (sw == 1)
                    PM_MAP(acc, cnt, j, src[j]);
                else
                    PM_MAP(acc, cnt, j, src[(int64_t)j * sw]);
            } else if (sw == 1) {
                PM_MAP(acc, cnt, j, acc[j] + src[j]);
            } else if (sw == 2) {
                PM_MAP(acc, cnt, j, acc[j] + src[2 * j]);
            } else {
                PM_MAP(acc, cnt, j, acc[j] + src[(int64_t)j * sw]);
            }
        }
    }
    const float ch = (float)pm_count(p, oh, 0);
    float *yo = yrow + o0;
    PM_MAP(yo, cnt, j, acc[j] / (ch * cntw[j] > 0.0f ? ch * cntw[j] : 1.0f));
}

/* items: (image, channel) planes, each a column block at a time */
PA_MULTIVERSION
static void taps_nchw_planes(void *ctx, int64_t begin, int64_t end) {
    const pm_job_t *jb = ctx;
    const pa_pool2d_t *p = jb->p;
    int64_t chunk = (PA_PM_ROW - p->kw) / p->sw + 1;
    float cntw[PA_PM_CHUNK];
    chunk = chunk < PA_PM_CHUNK ? chunk : PA_PM_CHUNK;
    /* one column block: its counts once for every plane */
    const int one_block = p->w_out <= chunk;
    for (int64_t j = 0; one_block && j < p->w_out; j++)
        cntw[j] = (float)pm_count(p, j, 1);
    for (int64_t it = begin; it < end; it++) {
        const float *xp = jb->x + it * p->h * p->w;
        float *yp = jb->y + it * p->h_out * p->w_out;
        for (int64_t o0 = 0; o0 < p->w_out; o0 += chunk) {
            const size_t cnt = (size_t)(p->w_out - o0 < chunk ? p->w_out - o0 : chunk);
            for (size_t j = 0; !one_block && j < cnt; j++)
                cntw[j] = (float)pm_count(p, o0 + (int64_t)j, 1);
            for (int64_t oh = 0; oh < p->h_out; oh++)
                taps_nchw_block(p, xp, yp + oh * p->w_out, oh, o0, cnt, cntw);
        }
    }
}

/* -- TAPS, NHWC: output (oh, ow) of one image, channels [c0, c0 + cnt) ----- */

PA_INLINE void taps_nhwc_pixel(const pa_pool2d_t *p, const float *restrict img,
                               float *restrict y, int64_t oh, int64_t ow, int64_t c0,
                               size_t cnt) {
    float acc[PA_PM_CHUNK];
    const int64_t C = p->c;
    for (int64_t i = 0; i < p->kh; i++) {
        const int64_t r = oh * p->sh - p->pad_top + i;
        const int row_in = r >= 0 && r < p->h;
        for (int64_t kx = 0; kx < p->kw; kx++) {
            const int64_t q = ow * p->sw - p->pad_left + kx;
            const int first = i == 0 && kx == 0;
            if (row_in && q >= 0 && q < p->w) {
                const float *px = img + (r * p->w + q) * C + c0;
                if (first)
                    PA_MAP(acc, cnt, j, px[j]);
                else
                    PA_MAP(acc, cnt, j, acc[j] + px[j]);
            } else if (first) {
                PA_MAP(acc, cnt, j, 0.0f);
            } else {
                PA_MAP(acc, cnt, j, acc[j] + 0.0f);     /* (-0.0f + 0.0f is +0.0f) */
            }
        }
    }
    int64_t c = pm_count(p, oh, 0) * pm_count(p, ow, 1);
    const float d = (float)(c > 0 ? c : 1);
    float *py = y + (oh * p->w_out + ow) * C + c0;
    PA_MAP(py, cnt, j, acc[j] / d);
}

/* items: (image, output row) */
PA_MULTIVERSION
static void taps_nhwc_rows(void *ctx, int64_t begin, int64_t end) {
    const pm_job_t *jb = ctx;
    const pa_pool2d_t *p = jb->p;
    for (int64_t it = begin; it < end; it++) {
        const int64_t n = it / p->h_out, oh = it % p->h_out;
        const float *img = jb->x + n * p->h * p->w * p->c;
        float *y = jb->y + n * p->h_out * p->w_out * p->c;
        for (int64_t ow = 0; ow < p->w_out; ow++)
            for (int64_t c0 = 0; c0 < p->c; c0 += PA_PM_CHUNK)
                taps_nhwc_pixel(p, img, y, oh, ow, c0,
                                (size_t)(p->c - c0 < PA_PM_CHUNK ? p->c - c0 : PA_PM_CHUNK));
    }
}

/* -- LANES ----------------------------------------------------------------- */

/* PA_PM_PLANES planes of n contiguous values at once (independent chains:
 * the adds of one plane wait on each other, the planes' do not). */
#define PA_PM_PLANES 4

PA_INLINE void lanes_planes(const float *restrict x, float *restrict y, int64_t n,
                            int64_t planes) {
    float l[PA_PM_PLANES][4];
    const int64_t n4 = n / 4 * 4;
    for (int64_t q = 0; q < planes; q++)
        for (int k = 0; k < 4; k++)
            l[q][k] = n4 ? x[q * n + k] : 0.0f;
    if (planes == PA_PM_PLANES) {
        for (int64_t i = 4; i < n4; i += 4)
            for (int q = 0; q < PA_PM_PLANES; q++)
                for (int k = 0; k < 4; k++)
                    l[q][k] = l[q][k] + x[q * n + i + k];
    } else {
        for (int64_t q = 0; q < planes; q++)
            for (int64_t i = 4; i < n4; i += 4)
                for (int k = 0; k < 4; k++)
                    l[q][k] = l[q][k] + x[q * n + i + k];
    }
    for (int64_t q = 0; q < planes; q++) {
        float s = (l[q][0] + l[q][2]) + (l[q][1] + l[q][3]);
        for (int64_t i = n4; i < n; i++)
            s = s + x[q * n + i];
        y[q] = s / (float)n;
    }
}

/* items: blocks of PA_PM_PLANES planes (image x channel) */
PA_MULTIVERSION
static void lanes_nchw(void *ctx, int64_t begin, int64_t end) {
    const pm_job_t *jb = ctx;
    const int64_t n = jb->p->h * jb->p->w, total = jb->p->n * jb->p->c;
    for (int64_t it = begin; it < end; it++) {
        const int64_t q0 = it * PA_PM_PLANES;
        const int64_t planes = total - q0 < PA_PM_PLANES ? total - q0 : PA_PM_PLANES;
        lanes_planes(jb->x + q0 * n, jb->y + q0, n, planes);
    }
}

/* One image's channels [c0, c0 + cnt) of n pixels (NHWC), lanes per channel. */
PA_INLINE void lanes_pixels(const float *restrict x, float *restrict y, int64_t n, int64_t C,
                            int64_t c0, size_t cnt) {
    float l0[PA_PM_CHUNK], l1[PA_PM_CHUNK], l2[PA_PM_CHUNK], l3[PA_PM_CHUNK];
    const int64_t n4 = n / 4 * 4;
    const float *b = x + c0;
    if (n4) {
        PA_MAP(l0, cnt, j, b[j]);
        PA_MAP(l1, cnt, j, b[C + (int64_t)j]);
        PA_MAP(l2, cnt, j, b[2 * C + (int64_t)j]);
        PA_MAP(l3, cnt, j, b[3 * C + (int64_t)j]);
    } else {
        PA_MAP(l0, cnt, j, 0.0f);
        PA_MAP(l1, cnt, j, 0.0f);
        PA_MAP(l2, cnt, j, 0.0f);
        PA_MAP(l3, cnt, j, 0.0f);
    }
    for (int64_t i = 4; i < n4; i += 4) {
        const float *r = b + i * C;
        PA_MAP(l0, cnt, j, l0[j] + r[j]);
        PA_MAP(l1, cnt, j, l1[j] + r[C + (int64_t)j]);
        PA_MAP(l2, cnt, j, l2[j] + r[2 * C + (int64_t)j]);
        PA_MAP(l3, cnt, j, l3[j] + r[3 * C + (int64_t)j]);
    }
    PA_MAP(l0, cnt, j, (l0[j] + l2[j]) + (l1[j] + l3[j]));
    for (int64_t i = n4; i < n; i++) {
        const float *r = b + i * C;
        PA_MAP(l0, cnt, j, l0[j] + r[j]);
    }
    const float d = (float)n;
    float *py = y + c0;
    PA_MAP(py, cnt, j, l0[j] / d);
}

/* items: (image, channel block) */
PA_MULTIVERSION
static void lanes_nhwc(void *ctx, int64_t begin, int64_t end) {
    const pm_job_t *jb = ctx;
    const pa_pool2d_t *p = jb->p;
    const int64_t n = p->h * p->w, blocks = (p->c + PA_PM_CHUNK - 1) / PA_PM_CHUNK;
    for (int64_t it = begin; it < end; it++) {
        const int64_t img = it / blocks, c0 = it % blocks * PA_PM_CHUNK;
        lanes_pixels(jb->x + img * n * p->c, jb->y + img * p->c, n, p->c, c0,
                     (size_t)(p->c - c0 < PA_PM_CHUNK ? p->c - c0 : PA_PM_CHUNK));
    }
}

pa_status_t pa_avgpool2d_ordered(const pa_pool2d_t *p, pa_pool_order_t order,
                                 const float *x, float *y, pa_workers_t *workers) {
    if (order == PA_POOL_ORDER_KERNEL)
        return pa_avgpool2d(p, x, y, workers);
    if ((order != PA_POOL_ORDER_TAPS && order != PA_POOL_ORDER_LANES) || !_pa_pool_valid(p) ||
        !x || !y)
        return PA_ERR_INVALID;
    pm_job_t jb = {p, x, y};
    const int nhwc = p->layout == PA_LAYOUT_NHWC;
    if (order == PA_POOL_ORDER_LANES) {
        if (p->kh != p->h || p->kw != p->w || p->h_out != 1 || p->w_out != 1 || p->pad_top ||
            p->pad_left || p->pad_bottom || p->pad_right)
            return PA_ERR_INVALID;
        pa_workers_t *w = _pa_workers_for(workers, (double)p->n * (double)p->c *
                                                       (double)p->h * (double)p->w);
        if (nhwc)
            _pa_parallel(w, p->n * ((p->c + PA_PM_CHUNK - 1) / PA_PM_CHUNK), lanes_nhwc, &jb);
        else
            _pa_parallel(w, (p->n * p->c + PA_PM_PLANES - 1) / PA_PM_PLANES, lanes_nchw, &jb);
        return PA_OK;
    }
    if (!nhwc && p->kw > PA_PM_ROW)
        return PA_ERR_INVALID;
    pa_workers_t *w = _pa_workers_for(workers, (double)p->n * (double)p->c *
                                                   (double)p->h_out * (double)p->w_out *
                                                   (double)p->kh * (double)p->kw);
    if (nhwc)
        _pa_parallel(w, p->n * p->h_out, taps_nhwc_rows, &jb);
    else
        _pa_parallel(w, p->n * p->c, taps_nchw_planes, &jb);
    return PA_OK;
}
