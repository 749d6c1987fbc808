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

/* The NCHW panel path (qconv_nchw.c): a block of output pixels' rows laid
 * out as a panel of tiles of QC_PX pixels, [kq][QC_PX][4] bytes per tile
 * (pixel i's 4 bytes of k in 4 * g .. 4 * g + 3 at (g * QC_PX + i) * 4),
 * multiplied by QC_PMR output channels of a packed weight block at a time
 * (channel r's 4 weights of step g at w[(g * QC_NR + r) * 4]): the
 * activations are the vector operand, each weight word broadcast. */
#define QC_PX 48
#define QC_PMR 8

/* acc[r][i] = sum over g < kq, t < 4 of panel[(g * QC_PX + i) * 4 + t] *
 * w[(g * QC_NR + r) * 4 + t] for r < mr (1..QC_PMR), i < npx (1..QC_PX);
 * the other entries are not defined. */
typedef void (*_pa_qc_ptile_fn)(const uint8_t *panel, int64_t kq, const int8_t *w, int mr,
                                int npx, int32_t acc[QC_PMR][QC_PX]);

/* The NCHW depthwise plane path: per channel and band of output rows,
 * the input rows it reads as int16 values x - x_zp with the padding as 0
 * (wp columns, rows_in rows, then QC_DW_SLACK values a vector may read
 * past the last), so each output row is runs of 16 columns summing their
 * taps with no bounds test, requantized in registers; stride 1 or 2. */
#define QC_DW_SLACK 64
typedef struct _pa_qc_plane {
    int64_t wp, rows, rows_in;
} _pa_qc_plane_t;

/* y (NCHW) = the depthwise convolution of x over plane geometry g; wc,
 * bias, scale: the packed depthwise weights (qconv.c); buf: rows_in * wp
 * + QC_DW_SLACK int16 values. */
typedef void (*_pa_qc_dwplane_fn)(const pa_qconv2d_t *q, const _pa_qc_plane_t *g,
                                  const int16_t *wc, const int32_t *bias, const float *scale,
                                  const uint8_t *x, void *y, int16_t *buf);

/* qconv_vnni.c: the AVX-512 VNNI tiles and depthwise interior (NULL where
 * not built). */
extern const _pa_qc_tile_fn _pa_qc_tile_vnni;
extern const _pa_qc_ptile_fn _pa_qc_ptile_vnni;
extern const _pa_qc_dw_fn _pa_qc_dw_vnni;
extern const _pa_qc_dwplane_fn _pa_qc_dwplane_vnni;

/* What qconv.c's GEMM driver hands the NCHW panel path: the geometry's
 * counts, the packed arrays (qconv.c, pa_qconv2d_pack), the activations'
 * flip and zero point, and the output's clamp (zero point taken off). */
typedef struct _pa_qc_gemm {
    const pa_qconv2d_t *q;
    int64_t K, kq, G, cog, nbk, hwo;
    const int8_t *w;
    const int32_t *bias, *colsum, *zp;
    const float *scale;
    uint8_t xo, zu;
    int need_rs;
    pa_qtype_t y_type;
    float lo, hi;
    int32_t y_zp;
} _pa_qc_gemm_t;

/* MlasRequantizeOutput's arithmetic for one value (qconv.c's top). */
PA_INLINE int32_t _pa_qc_requant(int32_t acc, float scale, float lo, float hi, int32_t zp) {
    float f = (float)acc * scale;
    f = f < lo ? lo : f;
    f = f > hi ? hi : f;
    return _pa_round_half_even(f) + zp;
}

/* qconv_nchw.c: whether the NCHW panel path takes q (an NCHW convolution,
 * not depthwise, whose rows are short or 1x1), the scratch it needs, and
 * the run (portable tile: isa 0; VNNI: 1). */
int _pa_qc_nchw_takes(const pa_qconv2d_t *q);
size_t _pa_qc_nchw_scratch(const pa_qconv2d_t *q);
void _pa_qc_nchw_run(const _pa_qc_gemm_t *R, const uint8_t *x, void *y, void *scratch,
                     int isa);

/* cpu.c: 1 where the AVX-512 variants are usable (_pa_avx512_usable) and
 * the processor has AVX512-VNNI. */
int _pa_avx512vnni_usable(void);

/* qconv.c: pa_qconv2d_run with the portable tile (isa 0) or the VNNI one
 * (isa 1: PA_ERR_STATE where it is not usable), for the tests that
 * compare them. */
pa_status_t _pa_qconv2d_run_isa(const pa_qconv2d_t *q, const void *packed, const void *x,
                                void *y, void *scratch, size_t scratch_size, int isa);

#endif /* PYARENA_KERNELS_QCONV_H */
