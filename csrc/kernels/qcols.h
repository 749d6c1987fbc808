/* kernels/qcols.h -- the packed layout of the few-columns 8-bit product
 * and the tiles its instruction-set variants supply (qcols.c's portable
 * one, qcols_vnni.c's AVX-512 VNNI one); not installed.
 *
 * pa_qcols_pack lays W [k][n] out once column by column, each column a
 * dot product's operand as the VNNI instruction reads it (vpdpbusd: four
 * u8 x s8 products added to an int32, 64 bytes a step): a 64-byte header,
 * the sum of each column and its zero point (int32, n rounded up to 16),
 * then each column's k signed bytes, rounded up to QC_KB with zeros.
 * uint8 weights are stored less 128 (w ^ 0x80) and the zero points come
 * out of the sums as in qrows.h:
 *   y[i][j] = dot(a_i, w'_j) + off * A_i - a_zp * colsum_j - w_zp_j * S_i
 * with A_i = sum_k a, S_i = A_i - k a_zp: exact in int32 (wrapping in
 * uint32 where the parts pass 2^31, the whole does not). */
#ifndef PYARENA_KERNELS_QCOLS_H
#define PYARENA_KERNELS_QCOLS_H

#include "internal.h"

#define QC_KB 64        /* bytes of k per step: one 512-bit register      */
#define QC_MR 4         /* rows of A per tile, at most                    */
#define QC_NT 4         /* columns per tile, at most                      */
#define QC_HEAD 64      /* header bytes                                   */
#define QC_MAGIC 0x31534c4f43415000ULL

typedef struct qc_head {
    uint64_t magic;
    int64_t k, n, kp, np;   /* k, n; k rounded up to QC_KB, n to 16         */
    int32_t off;            /* 128 for uint8 weights, else 0              */
} qc_head_t;

/* dot[r][c] = sum_k a[r][k] w'_c[k] for r < mr (1..QC_MR), c < nc
 * (1..QC_NT), and rsum[r] = sum_k a[r][k]: `a` mr rows of k bytes, `w` nc
 * packed columns kp bytes apart (zeros past k). */
typedef void (*_pa_qcol_tile_fn)(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                                 int64_t kp, int nc, int32_t dot[QC_MR][QC_NT],
                                 uint32_t rsum[QC_MR]);

/* qcols_vnni.c: the AVX-512 VNNI tile (NULL where not built). */
extern const _pa_qcol_tile_fn _pa_qcol_tile_vnni;

/* cpu.c (declared in qconv.h too): 1 where the VNNI tiles may run. */
int _pa_avx512vnni_usable(void);

/* qcols.c: pa_qcols_run with the portable tile (isa 0) or the VNNI one
 * (isa 1: PA_ERR_STATE where it is not usable), for the tests that
 * compare them. */
pa_status_t _pa_qcols_run_isa(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                              int32_t *y, int isa);

#endif /* PYARENA_KERNELS_QCOLS_H */
