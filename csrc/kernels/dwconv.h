/* kernels/dwconv.h -- what the depthwise convolution's portable kernels
 * (dwconv.c) share with its AVX-512 kernels (dwconv_avx512.c);
 * not installed. */
#ifndef PYARENA_KERNELS_DWCONV_H
#define PYARENA_KERNELS_DWCONV_H

#include "internal.h"

/* The NCHW stack tiles: 16 KiB per thread. */
#define PA_DW_TILE_FLOATS 4096

/* One layer's run: packed bias and weights (rows of cp floats, one per
 * tap), the tensors, and the interior columns (every tap inside). */
typedef struct {
    const pa_conv2d_t *c;
    const float *bias, *w, *x;
    float *y;
    int64_t cp;                 /* channels rounded up to PA_VEC (packed row) */
    int64_t ow_lo, ow_hi;       /* interior output columns [lo, hi)          */
} dw_job_t;

/* The taps of one output row whose input row is inside the image: offsets
 * (in floats, from the input position of tap (0, 0)), weight rows, and
 * the column index j for the border check.  Built once per output row, so
 * the inner loops walk one flat list whatever the kernel size. */
typedef struct {
    int64_t n;
    int64_t xoff[PA_DW_MAX_TAPS];
    int64_t woff[PA_DW_MAX_TAPS];
    int64_t col[PA_DW_MAX_TAPS];
} dw_taps_t;

/* The taps of output row oh; px: floats between horizontally adjacent
 * input pixels (C for NHWC, 1 for NCHW); wstep: floats between the packed
 * rows of two taps. */
void _pa_dw_row_taps(const pa_conv2d_t *c, int64_t oh, int64_t px, int64_t wstep,
                     dw_taps_t *t);

/* NCHW small planes by channel blocks: a band of output rows of PA_VEC
 * channels per item (dwconv.c, "blocks of PA_VEC channels"). */
typedef struct {
    const dw_job_t *j;
    int64_t band;               /* output rows per band */
    int64_t nbands, nblocks;    /* per image: bands, channel blocks */
} dw_block_job_t;

/* The AVX-512 blocks' stack tile (input band + output band, pixel-major
 * PA_VEC channels) and the widest output rows they take. */
#define PA_DW512_TILE_FLOATS 8192
#ifndef PA_DW512_BLOCK_MAX_W
#define PA_DW512_BLOCK_MAX_W 28
#endif

/* Output rows per band of a block job whose input band and output band fit
 * tile_floats floats; 0: not even one row. */
int64_t _pa_dw_block_band_rows(const pa_conv2d_t *c, int64_t tile_floats);

/* NCHW block items [begin, end) of job ctx (a dw_block_job_t whose band
 * fits PA_DW512_TILE_FLOATS) on the AVX-512 registers: the portable
 * blocks' sums, bit for bit.  Only where _pa_avx512_usable(). */
void _pa_dw_nchw512_blocks(void *ctx, int64_t begin, int64_t end);

/* NCHW bands of a zero-padded plane, stride 1 or 2 (dwconv.c,
 * "bands of a zero-padded plane"): item = plane * nbands + band. */
typedef struct {
    const dw_job_t *j;
    int64_t band, nbands;       /* output rows per band, bands per plane */
} dw_band_job_t;

/* NCHW band items [begin, end) of job ctx (a dw_band_job_t) on the
 * AVX-512 registers, 4 output rows at once: the portable bands' sums, bit
 * for bit.  Only where _pa_avx512_usable(). */
void _pa_dw_nchw512_bands(void *ctx, int64_t begin, int64_t end);

/* NHWC output rows [begin, end) of job ctx (a dw_job_t) on the AVX-512
 * registers: the portable rows' sums (a product then an add per tap, in
 * tap order), bit for bit.  Only where _pa_avx512_usable(). */
void _pa_dw_nhwc512_rows(void *ctx, int64_t begin, int64_t end);

#endif
