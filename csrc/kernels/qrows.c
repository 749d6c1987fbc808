/* kernels/qrows.c -- an 8-bit matrix product for a few rows of A: the
 * recurrent step of a dynamically quantized LSTM (one row of h per batch
 * entry against R) and other products whose A has too few rows to fill
 * the integer GEMM's 6-row tile.
 *
 *   y[i][j] = sum_k (a[i][k] - a_zp) * (w[k][j] - w_zp[j])      (int32, exact)
 *
 * W is read where it lies, row-major [k][n] in its 8-bit type (the layout
 * onnxruntime's DynamicQuantizeLSTM stores W and R in): nothing is packed.
 * Each row of A walks W's rows once, adding a_k * W[k][:] into n int32
 * accumulators (the loop over n vectorises: widen, multiply, add); the
 * weight zero points come out at the end as w_zp[j] * sum_k (a - a_zp).
 * Every sum is exact in int32 (|a - a_zp| <= 255, |w| <= 255, k <= 2^15).
 */
#include "internal.h"

/* int8 weights: |(a - a_zp) w| <= 255 * 128 fits int16, so the products
 * are 16-bit multiplies (widened for the int32 sums); four rows of W per
 * pass over the accumulators. */
PA_MULTIVERSION
static void rows_s8(const uint8_t *restrict a, int64_t m, int64_t k, int32_t a_zp,
                    const int8_t *restrict w, const int32_t *restrict w_zp, int64_t n,
                    int32_t *restrict y) {
    for (int64_t i = 0; i < m; i++) {
        int32_t *yi = y + i * n;
        int32_t sum = 0;
        for (int64_t j = 0; j < n; j++)
            yi[j] = 0;
        int64_t kk = 0;
        for (; kk + 4 <= k; kk += 4) {
            int16_t v[4];
            for (int q = 0; q < 4; q++) {
                v[q] = (int16_t)((int32_t)a[i * k + kk + q] - a_zp);
                sum += v[q];
            }
            const int8_t *w0 = w + kk * n, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n;
            int64_t j = 0;
            for (; j + PA_VEC <= n; j += PA_VEC)     /* fixed trip: vectorised at -O2 */
                for (int64_t t = 0; t < PA_VEC; t++)
                    yi[j + t] += (int32_t)(int16_t)(v[0] * w0[j + t]) +
                                 (int32_t)(int16_t)(v[1] * w1[j + t]) +
                                 (int32_t)(int16_t)(v[2] * w2[j + t]) +
                                 (int32_t)(int16_t)(v[3] * w3[j + t]);
            for (; j < n; j++)
                yi[j] += v[0] * w0[j] + v[1] * w1[j] + v[2] * w2[j] + v[3] * w3[j];
        }
        for (; kk < k; kk++) {
            int32_t v = (int32_t)a[i * k + kk] - a_zp;
            sum += v;
            const int8_t *wk = w + kk * n;
            for (int64_t j = 0; j < n; j++)
                yi[j] += v * (int32_t)wk[j];
        }
        if (w_zp != NULL)
            for (int64_t j = 0; j < n; j++)
                yi[j] -= w_zp[j] * sum;
    }
}

PA_MULTIVERSION
static void rows_u8(const uint8_t *restrict a, int64_t m, int64_t k, int32_t a_zp,
                    const uint8_t *restrict w, const int32_t *restrict w_zp, int64_t n,
                    int32_t *restrict y) {
    for (int64_t i = 0; i < m; i++) {
        int32_t *yi = y + i * n;
        int32_t sum = 0;
        for (int64_t j = 0; j < n; j++)
            yi[j] = 0;
        for (int64_t kk = 0; kk < k; kk++) {
            int32_t v = (int32_t)a[i * k + kk] - a_zp;
            sum += v;
            if (v == 0)
                continue;
            const uint8_t *wk = w + kk * n;
            int64_t j = 0;
            for (; j + PA_VEC <= n; j += PA_VEC)     /* fixed trip: vectorised at -O2 */
                for (int64_t t = 0; t < PA_VEC; t++)
                    yi[j + t] += v * (int32_t)wk[j + t];
            for (; j < n; j++)
                yi[j] += v * (int32_t)wk[j];
        }
        if (w_zp != NULL)
            for (int64_t j = 0; j < n; j++)
                yi[j] -= w_zp[j] * sum;
    }
}

pa_status_t pa_qmatmul_rows(const uint8_t *a, int64_t m, int64_t k, int32_t a_zp,
                            const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t n,
                            int32_t *y) {
    if (m < 0 || k < 0 || n < 0 || k > 32768 || a_zp < 0 || a_zp > 255)
        return PA_ERR_INVALID;
    if (w_type != PA_Q_U8 && w_type != PA_Q_S8)
        return PA_ERR_INVALID;
    if (m == 0 || n == 0)
        return PA_OK;
    if (y == NULL || (k > 0 && (a == NULL || w == NULL)))
        return PA_ERR_INVALID;
    uintptr_t y0 = (uintptr_t)y, y1 = y0 + (uintptr_t)(m * n) * sizeof *y;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + (uintptr_t)(m * k);
    uintptr_t w0 = (uintptr_t)w, w1 = w0 + (uintptr_t)(k * n);
    if (k > 0 && ((y0 < a1 && a0 < y1) || (y0 < w1 && w0 < y1)))
        return PA_ERR_INVALID;      /* y overlapping what it is made of */
    if (w_zp != NULL)
        for (int64_t j = 0; j < n; j++)
            if (w_zp[j] < (w_type == PA_Q_S8 ? -128 : 0) || w_zp[j] > (w_type == PA_Q_S8 ? 127 : 255))
                return PA_ERR_INVALID;
    if (w_type == PA_Q_S8)
        rows_s8(a, m, k, a_zp, (const int8_t *)w, w_zp, n, y);
    else
        rows_u8(a, m, k, a_zp, (const uint8_t *)w, w_zp, n, y);
    return PA_OK;
}
