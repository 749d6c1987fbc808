/* kernels/qcols.c -- an 8-bit matrix product for a few columns of W: an
 * attention's score vector (text2tashkeel's BiLSTM: 4096 rows of tanh
 * features against one column), a classifier of a few classes.
 *
 *   y[i][j] = sum_k (a[i][k] - a_zp) * (w[k][j] - w_zp[j])      (int32, exact)
 *
 * W is packed once (pa_qcols_pack) column by column (qcols.h), so that a
 * column against a row is one dot product along k, 64 bytes per vpdpbusd.
 * The 8-bit convolution's GEMM (qconv.c) pads the columns of its tiles to
 * 16 or more, 16 times the work for one column, and the few-rows product
 * (qrows.c) to 128.  The run takes qcols_vnni.c's tile where the processor
 * has it, else the portable tile below, which makes the same sums; the
 * zero points and the uint8 offset come out at the end from the row and
 * column sums.  Every sum is exact in int32 (|a| <= 255, |w'| <= 128,
 * k <= 2^15). */
#include "qcols.h"

static int64_t qc_np(int64_t n) { return (n + 15) / 16 * 16; }
static int64_t qc_kp(int64_t k) { return (k + QC_KB - 1) / QC_KB * QC_KB; }

size_t pa_qcols_packed_size(int64_t k, int64_t n) {
    if (k < 0 || n < 0 || k > 32768 || n > ((int64_t)1 << 24))
        return 0;
    return (size_t)(QC_HEAD + qc_np(n) * 8 + n * qc_kp(k));
}

/* The header of a packed W, or 0 where it is not one. */
static int qc_read_head(const void *packed, qc_head_t *h) {
    if (packed == NULL || (uintptr_t)packed % 4 != 0)
        return 0;
    memcpy(h, packed, sizeof *h);
    return h->magic == QC_MAGIC && h->k >= 0 && h->k <= 32768 && h->n >= 0 &&
           h->n <= ((int64_t)1 << 24) && h->kp == qc_kp(h->k) && h->np == qc_np(h->n) &&
           (h->off == 0 || h->off == 128);
}

pa_status_t pa_qcols_pack(const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t k,
                          int64_t n, void *packed, size_t size) {
    size_t need = pa_qcols_packed_size(k, n);
    if (!_pa_q8_pack_args_ok(w, w_type, w_zp, k, n, packed, size, need))
        return PA_ERR_INVALID;
    int s8 = w_type == PA_Q_S8;
    qc_head_t h = {QC_MAGIC, k, n, qc_kp(k), qc_np(n), s8 ? 0 : 128};
    memset(packed, 0, need);
    memcpy(packed, &h, sizeof h);
    int32_t *colsum = (int32_t *)((uint8_t *)packed + QC_HEAD), *zp = colsum + h.np;
    int8_t *wp = (int8_t *)(zp + h.np);
    const uint8_t *wb = w;
    for (int64_t j = 0; j < n; j++) {
        int32_t sum = 0;
        int8_t *col = wp + j * h.kp;
        for (int64_t q = 0; q < k; q++) {
            uint8_t b = wb[q * n + j];
            sum += s8 ? (int32_t)(int8_t)b : (int32_t)b;
            col[q] = (int8_t)(b ^ (s8 ? 0 : 0x80));
        }
        colsum[j] = sum;
        zp[j] = w_zp == NULL ? 0 : w_zp[j];
    }
    return PA_OK;
}

/* The portable tile: QC_KB lanes of products per step, a fixed trip the
 * compiler vectorises; the last step's bytes of A copied into a zeroed
 * block (the columns' bytes there are zeros anyway). */
PA_MULTIVERSION
static void cols_tile_c(const uint8_t *const *a, int mr, int64_t k, const int8_t *w, int64_t kp,
                   int nc, int32_t dot[QC_MR][QC_NT], uint32_t rsum[QC_MR]) {
    for (int r = 0; r < mr; r++) {
        int32_t part[QC_NT][QC_KB] = {{0}};
        uint32_t sum[QC_KB] = {0};
        for (int64_t q = 0; q < k; q += QC_KB) {
            uint8_t blk[QC_KB] = {0};
            memcpy(blk, a[r] + q, (size_t)(k - q < QC_KB ? k - q : QC_KB));
            for (int t = 0; t < QC_KB; t++)
                sum[t] += blk[t];
            for (int c = 0; c < nc; c++)
                for (int t = 0; t < QC_KB; t++)
                    part[c][t] += (int32_t)blk[t] * (int32_t)w[c * kp + q + t];
        }
        rsum[r] = 0;
        for (int t = 0; t < QC_KB; t++)
            rsum[r] += sum[t];
        for (int c = 0; c < nc; c++) {
            int32_t s = 0;
            for (int t = 0; t < QC_KB; t++)
                s += part[c][t];
            dot[r][c] = s;
        }
    }
}

pa_status_t _pa_qcols_run_isa(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                              int32_t *y, int isa) {
    qc_head_t h;
    if (!qc_read_head(packed, &h) || m < 0 || a_zp < 0 || a_zp > 255)
        return PA_ERR_INVALID;
    if (isa == 1 && (!_pa_avx512vnni_usable() || _pa_qcol_tile_vnni == NULL))
        return PA_ERR_STATE;
    if (m == 0 || h.n == 0)
        return PA_OK;
    if (!_pa_q8_run_args_ok(a, m, h.k, h.n, y, packed, pa_qcols_packed_size(h.k, h.n)))
        return PA_ERR_INVALID;
    _pa_qcol_tile_fn tile = isa == 1 ? _pa_qcol_tile_vnni : cols_tile_c;
    const int32_t *colsum = (const int32_t *)((const uint8_t *)packed + QC_HEAD);
    const int32_t *zp = colsum + h.np;
    const int8_t *wp = (const int8_t *)(zp + h.np);
    for (int64_t i = 0; i < m; i += QC_MR) {
        int mr = m - i < QC_MR ? (int)(m - i) : QC_MR;
        const uint8_t *rows[QC_MR];
        for (int r = 0; r < mr; r++)
            rows[r] = a + (i + r) * h.k;
        for (int64_t j = 0; j < h.n; j += QC_NT) {
            int nc = h.n - j < QC_NT ? (int)(h.n - j) : QC_NT;
            int32_t dot[QC_MR][QC_NT];
            uint32_t rsum[QC_MR];
            tile(rows, mr, h.k, wp + j * h.kp, h.kp, nc, dot, rsum);
            for (int r = 0; r < mr; r++) {
                uint32_t suma = rsum[r] * (uint32_t)h.off;
                uint32_t sums = rsum[r] - (uint32_t)h.k * (uint32_t)a_zp;
                for (int c = 0; c < nc; c++)
                    y[(i + r) * h.n + j + c] =
                        (int32_t)((uint32_t)dot[r][c] + suma -
                                  (uint32_t)a_zp * (uint32_t)colsum[j + c] -
                                  (uint32_t)zp[j + c] * sums);
            }
        }
    }
    return PA_OK;
}

pa_status_t pa_qcols_run(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                         int32_t *y) {
    return _pa_qcols_run_isa(packed, a, m, a_zp, y, _pa_avx512vnni_usable() ? 1 : 0);
}
