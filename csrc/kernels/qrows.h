/* kernels/qrows.h -- the packed layout of the few-rows 8-bit product and
 * the tiles its instruction-set variants supply (qrows.c's portable one,
 * qrows_vnni.c's AVX-512 VNNI one); not installed.
 *
 * pa_qrows_pack lays W [k][n] out once, as the VNNI instruction reads it
 * (vpdpbusd: four u8 x s8 products added to an int32): a 64-byte header,
 * then per column the sum of W's column and its zero point (int32, n
 * rounded up to QR_NC), then per group of QR_NC columns, for each 4
 * consecutive k, the QR_NC columns' 4 signed bytes each (k rounded up to
 * 4 with zeros).  uint8 weights are stored less 128 (w ^ 0x80), which the
 * run gives back as 128 * sum_k a; the zero points of A and W come out of
 * the column sums and the row sums:
 *   y[i][j] = dot(a_i, w'_j) + off * A_i - a_zp * colsum_j - w_zp_j * S_i
 * with A_i = sum_k a, S_i = A_i - k a_zp: exact in int32 (wrapping in
 * uint32 where the parts pass 2^31, the whole does not). */
#ifndef PYARENA_KERNELS_QROWS_H
#define PYARENA_KERNELS_QROWS_H

#include "internal.h"

#define QR_NC 128       /* columns per group: 8 registers of 16 int32      */
#define QR_MR 6         /* rows of A per tile, at most                     */
#define QR_HEAD 64      /* header bytes                                    */
#define QR_MAGIC 0x31574f5251415000ULL

typedef struct qr_head {
    uint64_t magic;
    int64_t k, n, kq, ncg;  /* k, n; groups of 4 k, groups of QR_NC columns */
    int32_t off;            /* 128 for uint8 weights, else 0              */
} qr_head_t;

/* acc[r][c] = sum_k a[r][k] w'[k][c] for r < mr (1..QR_MR), c < QR_NC:
 * `a` mr rows of k bytes, `w` one column group ((k + 3) / 4 groups of 4 k
 * of QR_NC columns' 4 bytes). */
typedef void (*_pa_qr_tile_fn)(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                               int32_t acc[QR_MR][QR_NC]);

/* qrows_vnni.c: the AVX-512 VNNI tile (NULL where not built). */
extern const _pa_qr_tile_fn _pa_qr_tile_vnni;

/* cpu.c (declared in qconv.h too): 1 where the VNNI tiles may run. */
int _pa_avx512vnni_usable(void);

/* qrows.c: pa_qrows_run with the portable tile (isa 0) or the VNNI one
 * (isa 1: PA_ERR_STATE where it is not usable), for the tests that
 * compare them. */
pa_status_t _pa_qrows_run_isa(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                              int32_t *y, int isa);

#endif /* PYARENA_KERNELS_QROWS_H */
