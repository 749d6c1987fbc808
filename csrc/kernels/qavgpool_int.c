/* kernels/qavgpool_int.c -- TFLite's int8 / uint8 AVERAGE_POOL_2D
 * (pa_qavgpool with integer_average set; pa_qavgpool checks the
 * descriptor, then calls _pa_qavgpool_integer).
 *
 * TFLite's reference kernel (tensorflow/lite/kernels/internal/reference/
 * integer_ops/pooling.h, AveragePool; reference_ops' uint8 one is the
 * same for non-negative sums) never dequantizes:
 *
 *   acc = sum of the raw 8-bit values of the window's taps inside the
 *         input (int32; padding is not counted)
 *   n   = the number of those taps
 *   y   = clamp(acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n,
 *               activation_min, activation_max)
 *
 * C's integer division truncates toward zero, so y = sign(acc) *
 * floor((|acc| + n / 2) / n): the average rounded half away from zero.
 * The quotient is computed in double: |acc| + n / 2 < 2^31 and n < 2^23
 * are exact there, and a quotient that is not an integer lies at least
 * 1 / n below the next one, far more than a double's rounding moves a
 * value below 2^8 -- so the truncating conversion gives C's quotient, and
 * the loops vectorize (x86 has no vector integer division).
 *
 * NHWC (TFLite's layout): a pixel's channels at once, int32 accumulators.
 * NCHW: a plane's output row at a time, the same sums.
 */
#include "internal.h"

#define PA_QAI_CHUNK 256

/* C's (acc +- n / 2) / n, clamped (see the banner). */
PA_INLINE int32_t qai_div(int32_t acc, double n, int32_t half, int32_t lo, int32_t hi) {
    const int32_t mag = acc < 0 ? -acc : acc;
    int32_t q = (int32_t)((double)(mag + half) / n);
    q = acc < 0 ? -q : q;
    q = q < lo ? lo : q;
    return q > hi ? hi : q;
}

/* The clipped [start, end) of output o along an axis of size n. */
PA_INLINE void qai_span(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *a,
                        int64_t *b) {
    int64_t st = o * s - p;
    int64_t en = st + k < n ? st + k : n;
    *a = st > 0 ? st : 0;
    *b = en;
}

#define PA_QAI_BODIES(T, NAME)                                                            \
    /* NHWC: output (r, q) of one image, channels [c0, c0 + cnt). */                      \
    PA_INLINE void qai_nhwc_##NAME(const pa_qavgpool_t *p, const T *restrict x,           \
                                   T *restrict y, int64_t r, int64_t q, int64_t c0,       \
                                   size_t cnt) {                                          \
        int32_t acc[PA_QAI_CHUNK];                                                        \
        const int64_t c = p->c;                                                           \
        int64_t h0, h1, w0, w1;                                                           \
        qai_span(r, p->stride_h, p->pad_top, p->kernel_h, p->h, &h0, &h1);                \
        qai_span(q, p->stride_w, p->pad_left, p->kernel_w, p->w, &w0, &w1);               \
        PA_MAP(acc, cnt, j, 0);                                                           \
        for (int64_t i = h0; i < h1; i++)                                                 \
            for (int64_t k = w0; k < w1; k++) {                                           \
                const T *px = x + (i * p->w + k) * c + c0;                                \
                PA_MAP(acc, cnt, j, acc[j] + (int32_t)px[j]);                             \
            }                                                                             \
        const int64_t count = (h1 - h0) * (w1 - w0);                                      \
        const double n = (double)count;                                                   \
        const int32_t half = (int32_t)(count / 2), lo = p->y_min, hi = p->y_max;         \
        T *py = y + (r * p->out_w + q) * c + c0;                                          \
        PA_MAP(py, cnt, j, (T)qai_div(acc[j], n, half, lo, hi));                          \
    }                                                                                     \
    /* NCHW: output row r of one plane, columns [o0, o0 + cnt). */                        \
    PA_INLINE void qai_nchw_##NAME(const pa_qavgpool_t *p, const T *restrict x,           \
                                   T *restrict y, int64_t r, int64_t o0, size_t cnt) {    \
        int32_t acc[PA_QAI_CHUNK];                                                        \
        int64_t h0, h1;                                                                   \
        qai_span(r, p->stride_h, p->pad_top, p->kernel_h, p->h, &h0, &h1);                \
        for (size_t j = 0; j < cnt; j++) {                                                \
            int64_t w0, w1;                                                               \
            qai_span(o0 + (int64_t)j, p->stride_w, p->pad_left, p->kernel_w, p->w, &w0,   \
                     &w1);                                                                \
            int32_t s = 0;                                                                \
            for (int64_t i = h0; i < h1; i++)                                             \
                for (int64_t k = w0; k < w1; k++)                                         \
                    s += (int32_t)x[i * p->w + k];                                        \
            const int64_t count = (h1 - h0) * (w1 - w0);                                  \
            acc[j] = qai_div(s, (double)count, (int32_t)(count / 2), p->y_min, p->y_max); \
        }                                                                                 \
        PA_MAP(y, cnt, j, (T)acc[j]);                                                     \
    }                                                                                     \
    PA_INLINE void qai_run_##NAME(const pa_qavgpool_t *p, const T *x, T *y) {             \
        const int64_t xplane = p->h * p->w, yplane = p->out_h * p->out_w;                 \
        for (int64_t n = 0; n < p->n; n++) {                                              \
            const T *xn = x + n * xplane * p->c;                                          \
            T *yn = y + n * yplane * p->c;                                                \
            if (p->layout == PA_LAYOUT_NHWC) {                                            \
                for (int64_t r = 0; r < p->out_h; r++)                                    \
                    for (int64_t q = 0; q < p->out_w; q++)                                \
                        for (int64_t c0 = 0; c0 < p->c; c0 += PA_QAI_CHUNK)               \
                            qai_nhwc_##NAME(p, xn, yn, r, q, c0,                          \
                                            (size_t)(p->c - c0 < PA_QAI_CHUNK             \
                                                         ? p->c - c0 : PA_QAI_CHUNK));    \
                continue;                                                                 \
            }                                                                             \
            for (int64_t ch = 0; ch < p->c; ch++)                                         \
                for (int64_t r = 0; r < p->out_h; r++)                                    \
                    for (int64_t o0 = 0; o0 < p->out_w; o0 += PA_QAI_CHUNK)               \
                        qai_nchw_##NAME(p, xn + ch * xplane,                              \
                                        yn + ch * yplane + r * p->out_w + o0, r, o0,      \
                                        (size_t)(p->out_w - o0 < PA_QAI_CHUNK             \
                                                     ? p->out_w - o0 : PA_QAI_CHUNK));    \
        }                                                                                 \
    }

PA_QAI_BODIES(uint8_t, u8)
PA_QAI_BODIES(int8_t, s8)

PA_MULTIVERSION
static void qai_run(const pa_qavgpool_t *p, const void *x, void *y) {
    if (p->type == PA_Q_S8)
        qai_run_s8(p, x, y);
    else
        qai_run_u8(p, x, y);
}

void _pa_qavgpool_integer(const pa_qavgpool_t *p, const void *x, void *y) { qai_run(p, x, y); }
