/* kernels/qsoftmax.c -- com.microsoft QLinearSoftmax with onnxruntime's
 * arithmetic, so its bytes.
 *
 * onnxruntime (contrib_ops/cpu/quantization/qlinear_softmax.cc; the row
 * kernel MlasQuantizeSoftmax*KernelNaive of core/mlas/lib/qsoftmax.cpp and
 * qsoftmax_kernel_naive.cpp) never dequantizes: it builds a table of 256
 * exponentials once,
 *
 *   shift = max(0, log(FLT_MAX / (float)D) - 5) / x_scale        (double)
 *   T[i]  = (float)exp(((double)i - 255 + shift) * x_scale), i = 0..255
 *
 * (D the length of a softmax row), and for each row with maximum m gives
 * an element x the entry T[255 - (m - x)]: here table[d] with d = m - x,
 * so one table serves both 8-bit types.  Then, in float32,
 *
 *   sum = e_0 + e_1 + ... + e_{D-1}         (one accumulator, in order)
 *   Ys  = floor(1 / y_scale)
 *   y   = clamp(rint((e / sum) * Ys) + y_zero_point)
 *
 * x_zero_point plays no part (a softmax does not see a shift).  The
 * division's place was measured against onnxruntime 1.32 on x86-64, on
 * inputs where the candidate orders give different bytes: (e / sum) * Ys
 * matched every one, the source's (e * Ys) / sum about half (it also
 * overflows for one-element rows), the AVX2 / AVX-512 kernels' e * (Ys /
 * sum) + zp (qsoftmax_kernel_avx2.cpp, _avx512.cpp) fewer; the zero point
 * is added after rounding, int8 results saturate at 127
 * (tests/runtime/test_qsoftmax_pool.py holds the cases).
 * A softmax over an inner axis (opset 13, onnxruntime transposes it last)
 * is the same arithmetic on strided rows: here `inner` rows at a time, one
 * accumulator per row, each summed in row order.
 */
#include "internal.h"

#include <float.h>
#include <math.h>

pa_status_t pa_qsoftmax_table(float x_scale, int64_t reduce_len, float *table) {
    if (!table || reduce_len < 1 || !(x_scale > 0.0f) || !isfinite(x_scale))
        return PA_ERR_INVALID;
    double shift = log((double)(FLT_MAX / (float)reduce_len));
    shift = (shift - 5.0 > 0.0 ? shift - 5.0 : 0.0) / (double)x_scale;
    for (int d = 0; d < 256; d++) {
        int i = 255 - d;
        table[d] = (float)exp(((double)i - 255 + shift) * (double)x_scale);
    }
    return PA_OK;
}

/* rint((e / sum) * ys) + zp, saturated to [lo, hi] (t >= 0; NaN or
 * huge: the type's highest value), branch-free so that PA_MAP vectorises. */
PA_INLINE int32_t qsoftmax_out(float e, float ys, float sum, int32_t zp, int32_t lo,
                               int32_t hi) {
    float t = e / sum;
    t = t * ys;
    t = t < 4194304.0f ? t : 4194304.0f;
    int32_t v = _pa_round_half_even(t) + zp;
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* Rows of n elements `inner` apart, `cnt` <= PA_QSM_CHUNK of them side by
 * side (row j starts at x + j); PA_MAP's fixed-length blocks vectorise
 * across the rows, each row's sum still in its own order. */
#define PA_QSM_CHUNK 256

#define PA_QSM_ROWS(T, NAME)                                                          \
    PA_INLINE void qsm_rows_##NAME(const T *restrict x, T *restrict y, int64_t n,       \
                                   int64_t inner, size_t cnt, const float *restrict tab, \
                                   float ys, int32_t zp, int32_t lo, int32_t hi) {      \
        int32_t mx[PA_QSM_CHUNK];                                                       \
        float sum[PA_QSM_CHUNK];                                                        \
        PA_MAP(mx, cnt, j, (int32_t)x[j]);                                              \
        for (int64_t k = 1; k < n; k++) {                                               \
            const T *xk = x + k * inner;                                                \
            PA_MAP(mx, cnt, j, (int32_t)xk[j] > mx[j] ? (int32_t)xk[j] : mx[j]);        \
        }                                                                               \
        PA_MAP(sum, cnt, j, 0.0f);                                                      \
        for (int64_t k = 0; k < n; k++) {                                               \
            const T *xk = x + k * inner;                                                \
            PA_MAP(sum, cnt, j, sum[j] + tab[mx[j] - (int32_t)xk[j]]);                  \
        }                                                                               \
        for (int64_t k = 0; k < n; k++) {                                               \
            const T *xk = x + k * inner;                                                \
            T *yk = y + k * inner;                                                      \
            PA_MAP(yk, cnt, j, (T)qsoftmax_out(tab[mx[j] - (int32_t)xk[j]], ys, sum[j],  \
                                               zp, lo, hi));                            \
        }                                                                               \
    }                                                                                   \
    PA_INLINE void qsm_row_##NAME(const T *restrict x, T *restrict y, int64_t n,        \
                                  const float *restrict tab, float ys, int32_t zp,      \
                                  int32_t lo, int32_t hi) {                             \
        int32_t lanes[PA_VEC];                                                          \
        for (int l = 0; l < PA_VEC; l++)                                                \
            lanes[l] = -128;                                                            \
        int64_t k = 0;                                                                  \
        for (; k + PA_VEC <= n; k += PA_VEC)                                            \
            for (int l = 0; l < PA_VEC; l++)                                            \
                lanes[l] = (int32_t)x[k + l] > lanes[l] ? (int32_t)x[k + l] : lanes[l]; \
        int32_t m = x[0];                                                               \
        for (int l = 0; l < PA_VEC; l++)                                                \
            m = lanes[l] > m ? lanes[l] : m;                                            \
        for (; k < n; k++)                                                              \
            m = x[k] > m ? x[k] : m;                                                    \
        float sum = 0.0f;                                                               \
        for (k = 0; k < n; k++)                                                         \
            sum += tab[m - (int32_t)x[k]];                                              \
        PA_MAP(y, (size_t)n, i, (T)qsoftmax_out(tab[m - (int32_t)x[i]], ys, sum, zp, lo, hi)); \
    }                                                                                   \
    PA_INLINE void qsm_run_##NAME(const T *x, T *y, int64_t outer, int64_t n,           \
                                  int64_t inner, const float *tab, float ys, int32_t zp,\
                                  int32_t lo, int32_t hi) {                             \
        for (int64_t o = 0; o < outer; o++) {                                           \
            const T *xo = x + o * n * inner;                                            \
            T *yo = y + o * n * inner;                                                  \
            if (inner == 1) {                                                           \
                qsm_row_##NAME(xo, yo, n, tab, ys, zp, lo, hi);                         \
                continue;                                                               \
            }                                                                           \
            for (int64_t j0 = 0; j0 < inner; j0 += PA_QSM_CHUNK) {                      \
                int64_t cnt = inner - j0 < PA_QSM_CHUNK ? inner - j0 : PA_QSM_CHUNK;    \
                qsm_rows_##NAME(xo + j0, yo + j0, n, inner, (size_t)cnt, tab, ys, zp, lo, \
                                hi);                                                    \
            }                                                                           \
        }                                                                               \
    }

PA_QSM_ROWS(uint8_t, u8)
PA_QSM_ROWS(int8_t, s8)

PA_MULTIVERSION
static void qsoftmax_run(int s8, const void *x, void *y, int64_t outer, int64_t n,
                         int64_t inner, const float *tab, float ys, int32_t zp) {
    if (s8)
        qsm_run_s8(x, y, outer, n, inner, tab, ys, zp, -128, 127);
    else
        qsm_run_u8(x, y, outer, n, inner, tab, ys, zp, 0, 255);
}

pa_status_t pa_qsoftmax(pa_qtype_t type, const float *table, const void *x, void *y,
                        int64_t outer, int64_t n, int64_t inner, float y_scale,
                        int32_t y_zero_point) {
    if (!table || !x || !y || (type != PA_Q_U8 && type != PA_Q_S8) || outer < 0 || n < 0 ||
        inner < 0 || !(y_scale > 0.0f) || !isfinite(y_scale))
        return PA_ERR_INVALID;
    const int s8 = type == PA_Q_S8;
    if (y_zero_point < (s8 ? -128 : 0) || y_zero_point > (s8 ? 127 : 255))
        return PA_ERR_INVALID;
    if (outer == 0 || n == 0 || inner == 0)
        return PA_OK;
    float ys = floorf(1.0f / y_scale);
    qsoftmax_run(s8, x, y, outer, n, inner, table, ys, y_zero_point);
    return PA_OK;
}
