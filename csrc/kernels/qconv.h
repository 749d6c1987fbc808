/* kernels/qconv.h -- what the 8-bit convolution's driver (qconv.c) and its
 * instruction-set tiles (qconv.c's portable one, qconv_vnni.c's AVX-512
 * VNNI one) share; not installed.
 *
 * The product is computed on unsigned activations and signed weights, as
 * the VNNI instruction (vpdpbusd: four u8 x s8 products added to an int32)
 * takes them: a signed input byte is flipped to unsigned by XOR 0x80 (its
 * value plus 128; the zero point moves with it), unsigned weights are
 * stored minus 128 (their zero points too).  A tile multiplies up to
 * QC_MR rows of activations (one output pixel's K bytes each, anywhere in
 * memory) by one or two blocks of QC_NR output channels of packed weights
 * ([kq][QC_NR][4] bytes per block, kq = ceil(K / 4), zeros past K and past
 * the group's channels) into int32 accumulators.  The zero-point terms and
 * the requantization are the driver's (qconv.c), shared by the tiles, so
 * every variant gives the same bits. */
#ifndef PYARENA_KERNELS_QCONV_H
#define PYARENA_KERNELS_QCONV_H

#include "internal.h"

#define QC_MR 6     /* pixels per tile          */
#define QC_NR 16    /* channels per weight block */

/* acc[r][l] = sum over k < K of (rows[r][k] ^ xo) * w[block l / QC_NR][k][l % QC_NR]
 * for r < mr, l < QC_NR * nb (nb 1 or 2; the second block follows the
 * first, kq * QC_NR * 4 bytes on).  Rows past mr are not read. */
typedef void (*_pa_qc_tile_fn)(const uint8_t *const *rows, int mr, int64_t k,
                               const int8_t *w, int64_t kq, int nb, uint8_t xo,
                               int32_t acc[QC_MR][2 * QC_NR]);

/* acc[ow] += sum over r < nr, j < kw of (x - zp) * w[r * kw + j], x the
 * byte (signed where sgn) at rows[r][ow * sw + shift + j * dw], for the
 * interior columns ow in [lo, hi) of an NCHW depthwise output row (every
 * byte read inside its row); sw 1 or 2.  Sums modulo 2^32. */
typedef void (*_pa_qc_dw_fn)(int32_t *acc, const uint8_t *const *rows, const int32_t *w,
                             int64_t nr, int64_t kw, int64_t dw, int64_t sw, int64_t shift,
                             int64_t lo, int64_t hi, int32_t zp, int sgn);

/* qconv_vnni.c: the AVX-512 VNNI tile and depthwise interior (NULL where
 * not built). */
extern const _pa_qc_tile_fn _pa_qc_tile_vnni;
extern const _pa_qc_dw_fn _pa_qc_dw_vnni;

/* cpu.c: 1 where the AVX-512 variants are usable (_pa_avx512_usable) and
 * the processor has AVX512-VNNI. */
int _pa_avx512vnni_usable(void);

/* qconv.c: pa_qconv2d_run with the portable tile (isa 0) or the VNNI one
 * (isa 1: PA_ERR_STATE where it is not usable), for the tests that
 * compare them. */
pa_status_t _pa_qconv2d_run_isa(const pa_qconv2d_t *q, const void *packed, const void *x,
                                void *y, void *scratch, size_t scratch_size, int isa);

#endif /* PYARENA_KERNELS_QCONV_H */
