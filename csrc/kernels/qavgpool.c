/* kernels/qavgpool.c -- com.microsoft QLinearAveragePool (1-D and 2-D
 * windows, NCHW or NHWC) with onnxruntime's arithmetic, so its bytes; and
 * MaxPool of an 8-bit tensor (pa_qmaxpool, the same geometry: exact).
 *
 * onnxruntime (contrib_ops/cpu/quantization/qlinear_pool.cc,
 * QLinearPool2DTask / QLinearPoolNhwc2DTask and their 1-D twins)
 * dequantizes the input, x_scale * (float)(x - x_zero_point), then for
 * each output sums its window's values in float32 with one accumulator,
 * rows then columns, from 0.0f; the window is clipped to the input
 * (hstart = oh * stride - pad_top, hend = min(hstart + k, H), hstart =
 * max(hstart, 0)), and
 *
 *   avg = sum / (float)(count_include_pad ? kh * kw
 *                                         : (hend - hstart) * (wend - wstart))
 *   y   = clamp((int32)rint(avg / y_scale + (float)y_zero_point))
 *
 * -- ceil_mode's extra outputs divide by the whole kernel too under
 * count_include_pad.  Padding adds nothing here, which is the same sum:
 * an accumulator that starts at +0.0f is never -0.0f, and adding +0.0f
 * leaves any other value as it is.  When the window is the whole image
 * and no pad is set, onnxruntime runs its global average pool instead
 * (MLAS qlgavgpool.cpp, the SSE2 kernel): an exact integer sum,
 *
 *   scale = x_scale / (y_scale * (float)HW)
 *   y     = clamp(rint((float)(sum - x_zero_point * HW) * scale) + y_zero_point)
 *
 * and so does this kernel.  An out-of-range float becomes the type's lowest
 * value (the x86 conversion gives INT32_MIN, then the clamp).
 * TFLite's integer average (integer_average): qavgpool_int.c.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

/* The accumulators of one run: outputs (NCHW) or channels (NHWC); the
 * NCHW row buffer: a chunk's input columns, dequantized, zero outside. */
#define PA_QAP_CHUNK 256
#define PA_QAP_ROW 2048

/* rint(avg / y_scale + zp), saturated; huge or NaN gives lo (the x86
 * conversion's INT32_MIN, then the clamp), [2^22, 2^31) hi.  Branch-free
 * so that PA_MAP vectorises. */
PA_INLINE int32_t qap_out(float sum, float count, float y_scale, float zp, int32_t lo,
                          int32_t hi) {
    float avg = sum / count;
    float t = avg / y_scale;
    t = t + zp;
    float c = t > -4194304.0f ? t : -4194304.0f;
    c = c < 4194304.0f ? c : 4194304.0f;
    int32_t v = _pa_round_half_even(c);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return t < 2147483648.0f ? v : lo;
}

PA_INLINE int32_t qap_global_out(int32_t sum, float scale, int32_t zp, int32_t lo,
                                 int32_t hi) {
    float t = (float)sum * scale;
    t = t > (float)(lo - zp) ? t : (float)(lo - zp);
    t = t < (float)(hi - zp) ? t : (float)(hi - zp);
    return _pa_round_half_even(t) + zp;
}

typedef struct qap_geom {
    int64_t h, w, oh, ow, kh, kw, sh, sw, pt, pl;
} qap_geom_t;

/* The clipped [start, end) of output o along an axis of size n. */
PA_INLINE void qap_span(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *a,
                        int64_t *b) {
    int64_t st = o * s - p;
    int64_t en = st + k < n ? st + k : n;
    *a = st > 0 ? st : 0;
    *b = en;
}

#define PA_QAP_BODIES(T, NAME)                                                          \
    /* NCHW: one plane, outputs of row `orow` from column o0, cnt of them;  \
     * each window row is dequantized once into buf (zero outside the       \
     * input: adding +0.0f changes no sum), then every tap is a strided     \
     * float load. */                                                        \
    PA_INLINE void qap_nchw_##NAME(const T *restrict x, T *restrict y,                  \
                                   const qap_geom_t *g, const pa_qavgpool_t *p,         \
                                   int64_t orow, int64_t o0, size_t cnt, int32_t lo,     \
                                   int32_t hi) {                                         \
        float acc[PA_QAP_CHUNK], cntf[PA_QAP_CHUNK], buf[PA_QAP_ROW];                    \
        const float xs = p->x_scale;                                                     \
        const int32_t xz = p->x_zero_point;                                              \
        const int64_t sw = g->sw, c0 = o0 * sw - g->pl;  /* buf[0]'s column */           \
        const int64_t span = ((int64_t)cnt - 1) * sw + g->kw;                            \
        int64_t a = c0 < 0 ? -c0 : 0;                    /* buf[a, b): the input */      \
        int64_t b = c0 + span < g->w ? span : g->w - c0;                                 \
        a = a < span ? a : span;                                                         \
        b = b > a ? b : a;                                                               \
        PA_MAP(acc, cnt, j, 0.0f);                                                       \
        for (int64_t i = 0; i < a; i++)                                                  \
            buf[i] = 0.0f;                                                               \
        for (int64_t i = b; i < span; i++)                                               \
            buf[i] = 0.0f;                                                               \
        int64_t h0, h1;                                                                  \
        qap_span(orow, g->sh, g->pt, g->kh, g->h, &h0, &h1);                             \
        for (int64_t r = h0; r < h1; r++) {                                              \
            const T *xr = x + r * g->w + c0;                                             \
            float *bb = buf + a;                                                         \
            const T *xa = xr + a;                                                        \
            PA_MAP(bb, (size_t)(b - a), i, xs * (float)((int32_t)xa[i] - xz));           \
            for (int64_t kx = 0; kx < g->kw; kx++) {                                     \
                const float *src = buf + kx;                                             \
                if (sw == 1)                                                             \
                    PA_MAP(acc, cnt, j, acc[j] + src[j]);                                \
                else if (sw == 2)                                                        \
                    PA_MAP(acc, cnt, j, acc[j] + src[2 * j]);                            \
                else                                                                     \
                    PA_MAP(acc, cnt, j, acc[j] + src[(int64_t)j * sw]);                  \
            }                                                                            \
        }                                                                                \
        for (size_t j = 0; j < cnt; j++) {                                               \
            int64_t w0, w1;                                                              \
            qap_span(o0 + (int64_t)j, sw, g->pl, g->kw, g->w, &w0, &w1);                 \
            cntf[j] = (float)(p->count_include_pad ? g->kh * g->kw : (h1 - h0) * (w1 - w0)); \
        }                                                                                \
        const float ysc = p->y_scale, yzp = (float)p->y_zero_point;                      \
        PA_MAP(y, cnt, j, (T)qap_out(acc[j], cntf[j], ysc, yzp, lo, hi));                \
    }                                                                                    \
    /* NHWC: output (orow, ocol), channels c0 .. c0 + cnt. */                           \
    PA_INLINE void qap_nhwc_##NAME(const T *restrict x, T *restrict y,                  \
                                   const qap_geom_t *g, const pa_qavgpool_t *p,         \
                                   int64_t orow, int64_t ocol, int64_t c0, size_t cnt,   \
                                   int32_t lo, int32_t hi) {                             \
        float acc[PA_QAP_CHUNK];                                                         \
        const float xs = p->x_scale;                                                     \
        const int32_t xz = p->x_zero_point;                                              \
        const int64_t c = p->c;                                                          \
        PA_MAP(acc, cnt, j, 0.0f);                                                       \
        int64_t h0, h1, w0, w1;                                                          \
        qap_span(orow, g->sh, g->pt, g->kh, g->h, &h0, &h1);                             \
        qap_span(ocol, g->sw, g->pl, g->kw, g->w, &w0, &w1);                             \
        for (int64_t r = h0; r < h1; r++)                                                \
            for (int64_t q = w0; q < w1; q++) {                                          \
                const T *px = x + (r * g->w + q) * c + c0;                               \
                PA_MAP(acc, cnt, j, acc[j] + xs * (float)((int32_t)px[j] - xz));         \
            }                                                                            \
        const float count = (float)(p->count_include_pad ? g->kh * g->kw                 \
                                                         : (h1 - h0) * (w1 - w0));       \
        const float ysc = p->y_scale, yzp = (float)p->y_zero_point;                      \
        T *py = y + (orow * g->ow + ocol) * c + c0;                                      \
        PA_MAP(py, cnt, j, (T)qap_out(acc[j], count, ysc, yzp, lo, hi));                 \
    }                                                                                    \
    /* The global pool (see the banner): one plane or one NHWC image. */                \
    PA_INLINE void qap_global_##NAME(const T *restrict x, T *restrict y, int64_t hw,    \
                                     int64_t c, int nhwc, float scale, int32_t bias,     \
                                     int32_t zp, int32_t lo, int32_t hi) {               \
        if (!nhwc) {                                                                     \
            for (int64_t ch = 0; ch < c; ch++) {                                         \
                int32_t s = 0;                                                           \
                for (int64_t i = 0; i < hw; i++)                                         \
                    s += x[ch * hw + i];                                                 \
                y[ch] = (T)qap_global_out(s + bias, scale, zp, lo, hi);                  \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        for (int64_t c0 = 0; c0 < c; c0 += PA_QAP_CHUNK) {                               \
            int64_t cnt = c - c0 < PA_QAP_CHUNK ? c - c0 : PA_QAP_CHUNK;                 \
            int32_t s[PA_QAP_CHUNK];                                                     \
            for (int64_t j = 0; j < cnt; j++)                                            \
                s[j] = 0;                                                                \
            for (int64_t i = 0; i < hw; i++)                                             \
                for (int64_t j = 0; j < cnt; j++)                                        \
                    s[j] += x[i * c + c0 + j];                                           \
            for (int64_t j = 0; j < cnt; j++)                                            \
                y[c0 + j] = (T)qap_global_out(s[j] + bias, scale, zp, lo, hi);           \
        }                                                                                \
    }                                                                                    \
    PA_INLINE void qap_run_##NAME(const pa_qavgpool_t *p, const qap_geom_t *g,          \
                                  const T *x, T *y, int32_t lo, int32_t hi) {            \
        const int nhwc = p->layout == PA_LAYOUT_NHWC;                                    \
        const int64_t xplane = g->h * g->w, yplane = g->oh * g->ow;                      \
        if (g->kh == g->h && g->kw == g->w && !p->pad_top && !p->pad_left &&             \
            !p->pad_bottom && !p->pad_right) {                                           \
            float scale = p->x_scale / (p->y_scale * (float)xplane);                     \
            int32_t bias = -p->x_zero_point * (int32_t)xplane;                           \
            for (int64_t n = 0; n < p->n; n++) {                                         \
                if (nhwc)                                                                \
                    qap_global_##NAME(x + n * xplane * p->c, y + n * p->c, xplane, p->c, 1, \
                                      scale, bias, p->y_zero_point, lo, hi);             \
                else                                                                     \
                    qap_global_##NAME(x + n * xplane * p->c, y + n * p->c, xplane, p->c, 0, \
                                      scale, bias, p->y_zero_point, lo, hi);             \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
        /* outputs per NCHW chunk: their input columns fit the row buffer */         \
        int64_t chunk = (PA_QAP_ROW - g->kw) / g->sw + 1;                                \
        chunk = chunk < PA_QAP_CHUNK ? chunk : PA_QAP_CHUNK;                             \
        for (int64_t n = 0; n < p->n; n++) {                                             \
            const T *xn = x + n * xplane * p->c;                                         \
            T *yn = y + n * yplane * p->c;                                               \
            if (nhwc) {                                                                  \
                for (int64_t r = 0; r < g->oh; r++)                                      \
                    for (int64_t q = 0; q < g->ow; q++)                                  \
                        for (int64_t c0 = 0; c0 < p->c; c0 += PA_QAP_CHUNK)              \
                            qap_nhwc_##NAME(xn, yn, g, p, r, q, c0,                      \
                                            (size_t)(p->c - c0 < PA_QAP_CHUNK ? p->c - c0 \
                                                                     : PA_QAP_CHUNK),    \
                                            lo, hi);                                     \
                continue;                                                                \
            }                                                                            \
            for (int64_t ch = 0; ch < p->c; ch++)                                        \
                for (int64_t r = 0; r < g->oh; r++)                                      \
                    for (int64_t o0 = 0; o0 < g->ow; o0 += chunk)                        \
                        qap_nchw_##NAME(xn + ch * xplane, yn + ch * yplane + r * g->ow + o0, \
                                        g, p, r, o0,                                     \
                                        (size_t)(g->ow - o0 < chunk ? g->ow - o0 : chunk), \
                                        lo, hi);                                         \
        }                                                                                \
    }

PA_QAP_BODIES(uint8_t, u8)
PA_QAP_BODIES(int8_t, s8)

PA_MULTIVERSION
static void qavgpool_run(const pa_qavgpool_t *p, const qap_geom_t *g, const void *x,
                         void *y) {
    if (p->type == PA_Q_S8)
        qap_run_s8(p, g, x, y, -128, 127);
    else
        qap_run_u8(p, g, x, y, 0, 255);
}

/* The geometry checks both pools share (see pyarena.h). */
static int qpool_geometry_ok(const pa_qavgpool_t *p, const void *x, const void *y) {
    if (!p || !x || !y || (p->type != PA_Q_U8 && p->type != PA_Q_S8) ||
        (p->layout != PA_LAYOUT_NCHW && p->layout != PA_LAYOUT_NHWC))
        return 0;
    if (p->n < 0 || p->c < 0 || p->h < 1 || p->w < 1 || p->out_h < 0 || p->out_w < 0 ||
        p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 1 || p->stride_w < 1 ||
        p->pad_top < 0 || p->pad_left < 0 || p->pad_bottom < 0 || p->pad_right < 0 ||
        p->pad_top >= p->kernel_h || p->pad_left >= p->kernel_w)
        return 0;
    /* every window must hold an input value (else onnxruntime divides by 0) */
    if (p->out_h > 0 && (p->out_h - 1) * p->stride_h - p->pad_top >= p->h)
        return 0;
    if (p->out_w > 0 && (p->out_w - 1) * p->stride_w - p->pad_left >= p->w)
        return 0;
    return p->h * p->w < (1 << 23);
}

pa_status_t pa_qavgpool(const pa_qavgpool_t *p, const void *x, void *y) {
    if (!qpool_geometry_ok(p, x, y) || !(p->x_scale > 0.0f) || !isfinite(p->x_scale) ||
        !(p->y_scale > 0.0f) || !isfinite(p->y_scale) ||
        (p->integer_average != 0 && p->integer_average != 1))
        return PA_ERR_INVALID;
    if (p->integer_average) {       /* TFLite's (qavgpool_int.c) */
        const int32_t tlo = p->type == PA_Q_S8 ? -128 : 0, thi = p->type == PA_Q_S8 ? 127 : 255;
        if (p->y_min < tlo || p->y_max > thi || p->y_min > p->y_max)
            return PA_ERR_INVALID;
        if (p->n > 0 && p->c > 0 && p->out_h > 0 && p->out_w > 0)
            _pa_qavgpool_integer(p, x, y);
        return PA_OK;
    }
    const int global = p->kernel_h == p->h && p->kernel_w == p->w && !p->pad_top &&
                       !p->pad_left && !p->pad_bottom && !p->pad_right;
    if (!global && p->kernel_w > PA_QAP_ROW)
        return PA_ERR_INVALID;
    const int s8 = p->type == PA_Q_S8;
    const int32_t lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    if (p->x_zero_point < lo || p->x_zero_point > hi || p->y_zero_point < lo ||
        p->y_zero_point > hi)
        return PA_ERR_INVALID;
    if (p->n == 0 || p->c == 0 || p->out_h == 0 || p->out_w == 0)
        return PA_OK;
    qap_geom_t g = {p->h, p->w, p->out_h, p->out_w, p->kernel_h, p->kernel_w,
                    p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    qavgpool_run(p, &g, x, y);
    return PA_OK;
}

/* -- MaxPool of an 8-bit tensor (exact: a maximum of integers) -------- */

#define PA_QMP_BODIES(T, NAME)                                                          \
    /* One output row's columns [o0, o0 + cnt) of one channel plane: the      \
     * window's rows reduced to one first (a contiguous maximum over the      \
     * row), then its columns; stride 2 splits that row into even and odd     \
     * columns once, so that every tap reads contiguous bytes. */             \
    PA_INLINE void qmp_nchw_##NAME(const T *restrict x, T *restrict y,                  \
                                   const qap_geom_t *g, int64_t orow, int64_t o0,        \
                                   size_t cnt, T lowest) {                               \
        T acc[PA_QAP_CHUNK], buf[PA_QAP_ROW + 1], ev[PA_QAP_ROW / 2 + 1],               \
            od[PA_QAP_ROW / 2 + 1];                                                      \
        const int64_t sw = g->sw, c0 = o0 * sw - g->pl;                                  \
        const int64_t span = ((int64_t)cnt - 1) * sw + g->kw;                            \
        int64_t a = c0 < 0 ? -c0 : 0;                                                    \
        int64_t b = c0 + span < g->w ? span : g->w - c0;                                 \
        a = a < span ? a : span;                                                         \
        b = b > a ? b : a;                                                               \
        for (int64_t i = 0; i < a; i++)                                                  \
            buf[i] = lowest;                                                             \
        for (int64_t i = b; i <= span; i++) /* (buf[span]: the odd columns' last) */    \
            buf[i] = lowest;                                                             \
        int64_t h0, h1;                                                                  \
        qap_span(orow, g->sh, g->pt, g->kh, g->h, &h0, &h1);                             \
        T *row = buf + a;                                                                \
        const size_t len = (size_t)(b - a);                                              \
        if (h0 < h1)                                                                     \
            memcpy(row, x + h0 * g->w + c0 + a, len * sizeof(T));                        \
        else                                                                             \
            PA_MAP(row, len, i, lowest);                                                 \
        for (int64_t r = h0 + 1; r < h1; r++) {                                          \
            const T *xa = x + r * g->w + c0 + a;                                         \
            PA_MAP(row, len, i, xa[i] > row[i] ? xa[i] : row[i]);                        \
        }                                                                                \
        const T *src0 = buf;                                                             \
        if (sw == 2) {                                                                   \
            const size_t half = (size_t)(span + 1) / 2;                                  \
            PA_MAP(ev, half, i, buf[2 * i]);                                             \
            PA_MAP(od, half, i, buf[2 * i + 1]);                                         \
        }                                                                                \
        PA_MAP(acc, cnt, j, lowest);                                                     \
        for (int64_t kx = 0; kx < g->kw; kx++) {                                         \
            if (sw == 2) {                                                               \
                const T *src = (kx & 1 ? od : ev) + kx / 2;                              \
                PA_MAP(acc, cnt, j, src[j] > acc[j] ? src[j] : acc[j]);                  \
            } else if (sw == 1) {                                                        \
                const T *src = src0 + kx;                                                \
                PA_MAP(acc, cnt, j, src[j] > acc[j] ? src[j] : acc[j]);                  \
            } else {                                                                     \
                const T *src = src0 + kx;                                                \
                PA_MAP(acc, cnt, j, src[(int64_t)j * sw] > acc[j] ? src[(int64_t)j * sw] \
                                                                  : acc[j]);             \
            }                                                                            \
        }                                                                                \
        PA_MAP(y, cnt, j, acc[j]);                                                       \
    }                                                                                    \
    PA_INLINE void qmp_nhwc_##NAME(const T *restrict x, T *restrict y,                  \
                                   const qap_geom_t *g, int64_t c, int64_t orow,         \
                                   int64_t ocol, int64_t c0, size_t cnt) {               \
        T acc[PA_QAP_CHUNK];                                                             \
        int64_t h0, h1, w0, w1;                                                          \
        qap_span(orow, g->sh, g->pt, g->kh, g->h, &h0, &h1);                             \
        qap_span(ocol, g->sw, g->pl, g->kw, g->w, &w0, &w1);                             \
        const T *first = x + (h0 * g->w + w0) * c + c0;                                  \
        PA_MAP(acc, cnt, j, first[j]);                                                   \
        for (int64_t r = h0; r < h1; r++)                                                \
            for (int64_t q = w0; q < w1; q++) {                                          \
                const T *px = x + (r * g->w + q) * c + c0;                               \
                PA_MAP(acc, cnt, j, px[j] > acc[j] ? px[j] : acc[j]);                    \
            }                                                                            \
        T *py = y + (orow * g->ow + ocol) * c + c0;                                      \
        PA_MAP(py, cnt, j, acc[j]);                                                      \
    }                                                                                    \
    PA_INLINE void qmp_run_##NAME(const pa_qavgpool_t *p, const qap_geom_t *g,          \
                                  const T *x, T *y, T lowest) {                          \
        const int64_t xplane = g->h * g->w, yplane = g->oh * g->ow;                      \
        int64_t chunk = (PA_QAP_ROW - g->kw) / g->sw + 1;                                \
        chunk = chunk < PA_QAP_CHUNK ? chunk : PA_QAP_CHUNK;                             \
        for (int64_t n = 0; n < p->n; n++) {                                             \
            const T *xn = x + n * xplane * p->c;                                         \
            T *yn = y + n * yplane * p->c;                                               \
            if (p->layout == PA_LAYOUT_NHWC) {                                           \
                for (int64_t r = 0; r < g->oh; r++)                                      \
                    for (int64_t q = 0; q < g->ow; q++)                                  \
                        for (int64_t c0 = 0; c0 < p->c; c0 += PA_QAP_CHUNK)              \
                            qmp_nhwc_##NAME(xn, yn, g, p->c, r, q, c0,                   \
                                            (size_t)(p->c - c0 < PA_QAP_CHUNK ? p->c - c0 \
                                                                     : PA_QAP_CHUNK));   \
                continue;                                                                \
            }                                                                            \
            for (int64_t ch = 0; ch < p->c; ch++)                                        \
                for (int64_t r = 0; r < g->oh; r++)                                      \
                    for (int64_t o0 = 0; o0 < g->ow; o0 += chunk)                        \
                        qmp_nchw_##NAME(xn + ch * xplane, yn + ch * yplane + r * g->ow + o0, \
                                        g, r, o0,                                        \
                                        (size_t)(g->ow - o0 < chunk ? g->ow - o0 : chunk), \
                                        lowest);                                         \
        }                                                                                \
    }

PA_QMP_BODIES(uint8_t, u8)
PA_QMP_BODIES(int8_t, s8)

PA_MULTIVERSION
static void qmaxpool_run(const pa_qavgpool_t *p, const qap_geom_t *g, const void *x,
                         void *y) {
    if (p->type == PA_Q_S8)
        qmp_run_s8(p, g, x, y, -128);
    else
        qmp_run_u8(p, g, x, y, 0);
}

pa_status_t pa_qmaxpool(const pa_qavgpool_t *p, const void *x, void *y) {
    if (!qpool_geometry_ok(p, x, y) || p->kernel_w > PA_QAP_ROW)
        return PA_ERR_INVALID;
    if (p->n == 0 || p->c == 0 || p->out_h == 0 || p->out_w == 0)
        return PA_OK;
    qap_geom_t g = {p->h, p->w, p->out_h, p->out_w, p->kernel_h, p->kernel_w,
                    p->stride_h, p->stride_w, p->pad_top, p->pad_left};
    qmaxpool_run(p, &g, x, y);
    return PA_OK;
}
