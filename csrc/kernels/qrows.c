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
 *
 * pa_qrows_pack / pa_qrows_run: the same product from W packed once as
 * the VNNI instruction reads it (qrows.h), by qrows_vnni.c's tile where
 * the processor has it, else by the portable tile below, which reads the
 * same layout and makes the same sums.
 */
#include "qrows.h"

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

/* ---- the packed product ---- */

static int64_t qr_ncg(int64_t n) { return (n + QR_NC - 1) / QR_NC; }

size_t pa_qrows_packed_size(int64_t k, int64_t n) {
    if (k < 0 || n < 0 || k > 32768 || n > ((int64_t)1 << 24))
        return 0;
    int64_t ncg = qr_ncg(n), kq = (k + 3) / 4;
    return (size_t)(QR_HEAD + ncg * QR_NC * 8 + ncg * kq * QR_NC * 4);
}

/* The header of a packed W, or 0 where it is not one. */
static int qr_read_head(const void *packed, qr_head_t *h) {
    if (packed == NULL || (uintptr_t)packed % 4 != 0)
        return 0;
    memcpy(h, packed, sizeof *h);
    return h->magic == QR_MAGIC && h->k >= 0 && h->k <= 32768 && h->n >= 0 &&
           h->n <= ((int64_t)1 << 24) && h->kq == (h->k + 3) / 4 && h->ncg == qr_ncg(h->n) &&
           (h->off == 0 || h->off == 128);
}

pa_status_t pa_qrows_pack(const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t k,
                          int64_t n, void *packed, size_t size) {
    size_t need = pa_qrows_packed_size(k, n);
    if (need == 0 || size < need || packed == NULL || (uintptr_t)packed % 4 != 0 ||
        (w == NULL && k > 0 && n > 0) || (w_type != PA_Q_U8 && w_type != PA_Q_S8))
        return PA_ERR_INVALID;
    if (w_zp != NULL)
        for (int64_t j = 0; j < n; j++)
            if (w_zp[j] < (w_type == PA_Q_S8 ? -128 : 0) || w_zp[j] > (w_type == PA_Q_S8 ? 127 : 255))
                return PA_ERR_INVALID;
    qr_head_t h = {QR_MAGIC, k, n, (k + 3) / 4, qr_ncg(n), w_type == PA_Q_U8 ? 128 : 0};
    memset(packed, 0, need);
    memcpy(packed, &h, sizeof h);
    int32_t *colsum = (int32_t *)((uint8_t *)packed + QR_HEAD), *zp = colsum + h.ncg * QR_NC;
    int8_t *wp = (int8_t *)(zp + h.ncg * QR_NC);
    const uint8_t *wb = w;
    for (int64_t j = 0; j < n; j++) {
        int32_t sum = 0;
        int8_t *col = wp + (j / QR_NC) * h.kq * QR_NC * 4 + (j % QR_NC) * 4;
        for (int64_t q = 0; q < k; q++) {
            uint8_t b = wb[q * n + j];
            sum += w_type == PA_Q_S8 ? (int32_t)(int8_t)b : (int32_t)b;
            col[(q / 4) * QR_NC * 4 + q % 4] = (int8_t)(b ^ (w_type == PA_Q_U8 ? 0x80 : 0));
        }
        colsum[j] = sum;
        zp[j] = w_zp == NULL ? 0 : w_zp[j];
    }
    return PA_OK;
}

/* The portable tile: the VNNI tile's sums, column by column.  Each
 * column's 4 bytes are read as one 32-bit word and sign-extended by
 * shifts: a fixed trip of contiguous words the compiler vectorises. */
PA_MULTIVERSION
static void tile_c(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                   int32_t acc[QR_MR][QR_NC]) {
    for (int r = 0; r < mr; r++) {
        int32_t *ar = acc[r];
        for (int64_t c = 0; c < QR_NC; c++)
            ar[c] = 0;
        for (int64_t g = 0; g < (k + 3) / 4; g++) {
            int32_t v[4] = {0, 0, 0, 0};
            for (int64_t q = 0; q < 4 && 4 * g + q < k; q++)
                v[q] = a[r][4 * g + q];
            uint32_t wd[QR_NC];
            memcpy(wd, w + g * QR_NC * 4, sizeof wd);
            for (int64_t c = 0; c < QR_NC; c++)
                ar[c] += v[0] * ((int32_t)(wd[c] << 24) >> 24) +
                         v[1] * ((int32_t)(wd[c] << 16) >> 24) +
                         v[2] * ((int32_t)(wd[c] << 8) >> 24) + v[3] * ((int32_t)wd[c] >> 24);
        }
    }
}

pa_status_t _pa_qrows_run_isa(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                              int32_t *y, int isa) {
    qr_head_t h;
    if (!qr_read_head(packed, &h) || m < 0 || a_zp < 0 || a_zp > 255)
        return PA_ERR_INVALID;
    if (isa == 1 && (!_pa_avx512vnni_usable() || _pa_qr_tile_vnni == NULL))
        return PA_ERR_STATE;
    if (m == 0 || h.n == 0)
        return PA_OK;
    if (y == NULL || (h.k > 0 && a == NULL))
        return PA_ERR_INVALID;
    uintptr_t y0 = (uintptr_t)y, y1 = y0 + (uintptr_t)(m * h.n) * sizeof *y;
    uintptr_t a0 = (uintptr_t)a, a1 = a0 + (uintptr_t)(m * h.k);
    uintptr_t p0 = (uintptr_t)packed, p1 = p0 + pa_qrows_packed_size(h.k, h.n);
    if ((h.k > 0 && y0 < a1 && a0 < y1) || (y0 < p1 && p0 < y1))
        return PA_ERR_INVALID;      /* y overlapping what it is made of */
    _pa_qr_tile_fn tile = isa == 1 ? _pa_qr_tile_vnni : tile_c;
    const int32_t *colsum = (const int32_t *)((const uint8_t *)packed + QR_HEAD);
    const int32_t *zp = colsum + h.ncg * QR_NC;
    const int8_t *wp = (const int8_t *)(zp + h.ncg * QR_NC);
    int32_t acc[QR_MR][QR_NC];
    for (int64_t i = 0; i < m; i += QR_MR) {
        int mr = m - i < QR_MR ? (int)(m - i) : QR_MR;
        const uint8_t *rows[QR_MR];
        uint32_t suma[QR_MR], sums[QR_MR];
        for (int r = 0; r < mr; r++) {
            rows[r] = a + (i + r) * h.k;
            uint32_t s = 0;
            for (int64_t q = 0; q < h.k; q++)
                s += rows[r][q];
            suma[r] = s * (uint32_t)h.off;
            sums[r] = s - (uint32_t)h.k * (uint32_t)a_zp;
        }
        for (int64_t cg = 0; cg < h.ncg; cg++) {
            tile(rows, mr, h.k, wp + cg * h.kq * QR_NC * 4, acc);
            int64_t j0 = cg * QR_NC, nc = h.n - j0 < QR_NC ? h.n - j0 : QR_NC;
            for (int r = 0; r < mr; r++) {
                int32_t *yr = y + (i + r) * h.n + j0;
                for (int64_t c = 0; c < nc; c++)    /* exact: the sum fits int32 */
                    yr[c] = (int32_t)((uint32_t)acc[r][c] + suma[r] -
                                      (uint32_t)a_zp * (uint32_t)colsum[j0 + c] -
                                      (uint32_t)zp[j0 + c] * sums[r]);
            }
        }
    }
    return PA_OK;
}

pa_status_t pa_qrows_run(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                         int32_t *y) {
    return _pa_qrows_run_isa(packed, a, m, a_zp, y, _pa_avx512vnni_usable() ? 1 : 0);
}
