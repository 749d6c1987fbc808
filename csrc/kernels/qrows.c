/* kernels/qrows.c -- an 8-bit matrix product for a few rows of A: the
 * recurrent step of a dynamically quantized LSTM (one row of h per batch
 * entry against R), and its input product over a whole sequence.
 *
 *   y[i][j] = sum_k (a[i][k] - a_zp) * (w[k][j] - w_zp[j])      (int32, exact)
 *
 * W is packed once (pa_qrows_pack) as the VNNI instruction reads it: for
 * each 4 consecutive k, a column's 4 signed bytes side by side (qrows.h),
 * so that one vpdpbusd adds 4 products into each of 16 columns.  The run
 * takes qrows_vnni.c's tile where the processor has it, else the portable
 * tile below, which reads the same layout and makes the same sums; the
 * zero points and the uint8 offset come out at the end from the row and
 * column sums.  Every sum is exact in int32 (|a - a_zp| <= 255, |w| <=
 * 255, k <= 2^15).
 *
 * A time step of text2tashkeel's BiLSTMs (256 x 1024) took 27 us with W
 * read in place (16-bit products), 3.3 us packed on the VNNI tile; the
 * recurrence is then bound by the bytes of R streamed from L2 per step. */
#include "qrows.h"

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
    if (!_pa_q8_pack_args_ok(w, w_type, w_zp, k, n, packed, size, need))
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

/* sum_k a[k], in blocks of PA_VEC (vectorised) then the tail. */
PA_MULTIVERSION
static uint32_t row_sum(const uint8_t *a, int64_t k) {
    uint32_t part[PA_VEC] = {0}, s = 0;
    int64_t q = 0;
    for (; q + PA_VEC <= k; q += PA_VEC)
        for (int64_t t = 0; t < PA_VEC; t++)
            part[t] += a[q + t];
    for (; q < k; q++)
        s += a[q];
    for (int64_t t = 0; t < PA_VEC; t++)
        s += part[t];
    return s;
}

/* y[c] = acc[c] + off A - a_zp colsum[c] - zp[c] S for c < nc: exact, the
 * sum fits int32 (its parts wrap in uint32).  A whole group in place (a
 * fixed trip, vectorised), then the nc columns that exist copied out. */
PA_MULTIVERSION
static void finish(int32_t *restrict acc, uint32_t suma, uint32_t sums, uint32_t a_zp,
                   const int32_t *restrict colsum, const int32_t *restrict zp,
                   int32_t *restrict y, int64_t nc) {
    uint32_t cs[QR_NC] = {0}, z[QR_NC] = {0};
    memcpy(cs, colsum, (size_t)nc * sizeof *cs);
    memcpy(z, zp, (size_t)nc * sizeof *z);
    for (int64_t c = 0; c < QR_NC; c++)
        acc[c] = (int32_t)((uint32_t)acc[c] + suma - a_zp * cs[c] - z[c] * sums);
    memcpy(y, acc, (size_t)nc * sizeof *y);
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
    if (!_pa_q8_run_args_ok(a, m, h.k, h.n, y, packed, pa_qrows_packed_size(h.k, h.n)))
        return PA_ERR_INVALID;
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
            uint32_t s = row_sum(rows[r], h.k);
            suma[r] = s * (uint32_t)h.off;
            sums[r] = s - (uint32_t)h.k * (uint32_t)a_zp;
        }
        for (int64_t cg = 0; cg < h.ncg; cg++) {
            tile(rows, mr, h.k, wp + cg * h.kq * QR_NC * 4, acc);
            int64_t j0 = cg * QR_NC, nc = h.n - j0 < QR_NC ? h.n - j0 : QR_NC;
            for (int r = 0; r < mr; r++)
                finish(acc[r], suma[r], sums[r], (uint32_t)a_zp, colsum + j0, zp + j0,
                       y + (i + r) * h.n + j0, nc);
        }
    }
    return PA_OK;
}

pa_status_t pa_qrows_run(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                         int32_t *y) {
    return _pa_qrows_run_isa(packed, a, m, a_zp, y, _pa_avx512vnni_usable() ? 1 : 0);
}
