/* kernels/dwconv.h -- the depthwise convolution's driver, shared by its
 * portable tiles (dwconv.c) and its AVX-512 tiles (dwconv_avx512.c): the
 * jobs, the tap tables and the three walks (NHWC rows, NCHW channel
 * blocks, NCHW bands) that call a variant's tile; not installed.  isa.h
 * says how they divide the work. */
#ifndef PYARENA_KERNELS_DWCONV_H
#define PYARENA_KERNELS_DWCONV_H

#include "internal.h"

/* The NCHW stack tiles: 16 KiB per thread. */
#define PA_DW_TILE_FLOATS 4096
/* Interior pixels per NHWC register tile. */
#define PA_DW_MR 4

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
 * (in floats, from column 0 of input row row0), weight rows, and
 * the column index j for the border check.  Built once per output row, so
 * the inner loops walk one flat list whatever the kernel size. */
typedef struct {
    int64_t n;
    int64_t row0;               /* the input row the offsets count from: the
                                   first one inside (0 when none is), so no
                                   pointer is formed outside the image */
    int64_t xoff[PA_DW_MAX_TAPS];
    int64_t woff[PA_DW_MAX_TAPS];
    int64_t col[PA_DW_MAX_TAPS];
} dw_taps_t;

/* dwconv_taps.c: the taps of output row oh; px: floats between
 * horizontally adjacent input pixels (C for NHWC, 1 for NCHW); wstep:
 * floats between the packed rows of two taps. */
void _pa_dw_row_taps(const pa_conv2d_t *c, int64_t oh, int64_t px, int64_t wstep,
                     dw_taps_t *t);

/* -- NHWC: output rows ------------------------------------------------------ */

/* Defines the task NAME (a _pa_task_fn over a dw_job_t), the NHWC walk:
 * output rows [begin, end) (all images counted), per row its tap table,
 * the left border pixels one by one, the interior in tiles of PA_DW_MR
 * (the last one overlapping the one before, the same values written
 * twice), the right border pixels.  PIXELS is the variant's tile,
 *   void PIXELS(const dw_job_t *j, const dw_taps_t *t, const float *xrow0,
 *               float *y, int64_t ow, int tile)
 * every channel of one pixel anywhere (tile 0: the taps whose column is
 * outside the row skipped) or of PA_DW_MR interior pixels (tile 1) at
 * output column ow (xrow0: input row t->row0, inside the image; y: the
 * output at column ow).  The variant puts its target
 * attribute before it.  A macro, as the walks below: the tile is called
 * by name, so it is inlined as a direct call is (a tile passed as a
 * function pointer, even a constant one, compiles to other code: the
 * AVX-512 rows of stride-2 layers ran 2-4% slower). */
#define PA_DW_NHWC_TASK(NAME, PIXELS)                                                     \
    static void NAME(void *ctx, int64_t begin, int64_t end) {                             \
        const dw_job_t *j_ = ctx;                                                         \
        const pa_conv2d_t *c_ = j_->c;                                                    \
        const int64_t C_ = c_->c_in;                                                      \
        dw_taps_t t_;                                                                     \
        for (int64_t r_ = begin; r_ < end; r_++) {                                        \
            int64_t img_ = r_ / c_->h_out, oh_ = r_ % c_->h_out;                          \
            _pa_dw_row_taps(c_, oh_, C_, j_->cp, &t_);                                    \
            /* the row the taps count from (inside: a pad of 2^40 rows above the     \
             * image would put a pointer to tap row 0 outside the address space) */    \
            const float *xrow0_ = j_->x + (img_ * c_->h + t_.row0) * c_->w * C_;          \
            float *yrow_ = j_->y + r_ * c_->w_out * C_;                                   \
            int64_t ow_ = 0;                                                              \
            for (; ow_ < j_->ow_lo; ow_++)                                                \
                PIXELS(j_, &t_, xrow0_, yrow_ + ow_ * C_, ow_, 0);                        \
            for (; ow_ + PA_DW_MR <= j_->ow_hi; ow_ += PA_DW_MR)                          \
                PIXELS(j_, &t_, xrow0_, yrow_ + ow_ * C_, ow_, 1);                        \
            if (ow_ < j_->ow_hi && j_->ow_hi - j_->ow_lo >= PA_DW_MR) { /* overlapping */ \
                PIXELS(j_, &t_, xrow0_, yrow_ + (j_->ow_hi - PA_DW_MR) * C_,              \
                       j_->ow_hi - PA_DW_MR, 1);                                          \
                ow_ = j_->ow_hi;                                                          \
            }                                                                             \
            for (; ow_ < c_->w_out; ow_++)                                                \
                PIXELS(j_, &t_, xrow0_, yrow_ + ow_ * C_, ow_, 0);                        \
        }                                                                                 \
    }

/* -- NCHW, small planes of many channels: blocks of PA_VEC channels ---------- */

/* The job: a band of output rows of PA_VEC channel planes per item
 * (dwconv.c, "blocks of PA_VEC channels"). */
typedef struct {
    const dw_job_t *j;
    int64_t band;               /* output rows per band               */
    int64_t nbands, nblocks;    /* per image: bands, channel blocks   */
    int64_t wp;                 /* columns of the zero-padded plane   */
} dw_block_job_t;

/* One item: image img, channels [c0, c0 + nc) (nc <= PA_VEC), output rows
 * [oh0, oh0 + nr), which read the padded input rows from oh0 * sh
 * (in_rows of them, bj->wp columns each). */
typedef struct {
    int64_t img, c0, nc, oh0, nr, in_rows;
} dw_block_t;

/* Defines the task NAME (a _pa_task_fn over a dw_block_job_t), the
 * blocks' walk over items [begin, end): the taps, the same for every item
 * (into a pixel-major band tile of PA_VEC channels, rows wp * PA_VEC
 * floats apart), then each item's place, run by the variant's tile
 *   void BLOCK(const dw_block_job_t *bj, const dw_block_t *b, const dw_taps_t *t)
 * which copies the band in, computes every output pixel and copies the
 * outputs back to their planes, on a stack tile of its own. */
#define PA_DW_BLOCKS_TASK(NAME, BLOCK)                                                    \
    static void NAME(void *ctx, int64_t begin, int64_t end) {                             \
        const dw_block_job_t *bj_ = ctx;                                                  \
        const pa_conv2d_t *c_ = bj_->j->c;                                                \
        dw_taps_t t_;                                                                     \
        t_.n = c_->kh * c_->kw;                                                           \
        for (int64_t i_ = 0; i_ < c_->kh; i_++)                                           \
            for (int64_t jj_ = 0; jj_ < c_->kw; jj_++) {                                  \
                t_.xoff[i_ * c_->kw + jj_] = (i_ * c_->dh * bj_->wp + jj_ * c_->dw) * PA_VEC; \
                t_.woff[i_ * c_->kw + jj_] = (i_ * c_->kw + jj_) * bj_->j->cp;            \
            }                                                                             \
        for (int64_t item_ = begin; item_ < end; item_++) {                               \
            dw_block_t b_;                                                                \
            b_.img = item_ / (bj_->nblocks * bj_->nbands);                                \
            int64_t blk_ = item_ / bj_->nbands % bj_->nblocks, band_ = item_ % bj_->nbands; \
            b_.c0 = blk_ * PA_VEC;                                                        \
            b_.nc = c_->c_in - b_.c0 < PA_VEC ? c_->c_in - b_.c0 : PA_VEC;                \
            b_.oh0 = band_ * bj_->band;                                                   \
            b_.nr = c_->h_out - b_.oh0 < bj_->band ? c_->h_out - b_.oh0 : bj_->band;      \
            b_.in_rows = (b_.nr - 1) * c_->sh + (c_->kh - 1) * c_->dh + 1;                \
            BLOCK(bj_, &b_, &t_);                                                         \
        }                                                                                 \
    }

/* -- NCHW, stride 1 or 2: bands of a zero-padded plane ---------------------- */

/* The job: item = plane * nbands + band (dwconv.c, "bands of a
 * zero-padded plane"). */
typedef struct {
    const dw_job_t *j;
    int64_t band, nbands;       /* output rows per band, bands per plane        */
    int64_t wp, rf;             /* padded columns; floats per tile row (the
                                   padded row, or its even then odd columns)  */
} dw_band_job_t;

/* One band (item ITEM of the dw_band_job_t BJ) with column stride S: its
 * input rows copied to a stack tile of PA_DW_TILE_FLOATS (stride-2 rows
 * split into their even then odd columns, _pa_band_fill), its tap table
 * and weights, then the variant's tile
 *   void ROWS(const dw_taps_t *t, const float *wt, const float *tile, int64_t xrs,
 *             float *y, int64_t nr, float b, const pa_conv2d_t *c)
 * output rows [0, nr) of the band, every column interior, from the tile
 * (an output row's input rows xrs floats apart) into y (rows w_out
 * apart); wt: the plane's tap weights in the order of t, b its bias. */
#define PA_DW_BAND(BJ, ITEM, S, ROWS)                                                     \
    do {                                                                                  \
        const dw_job_t *j_ = (BJ)->j;                                                     \
        const pa_conv2d_t *c_ = j_->c;                                                    \
        int64_t plane_ = (ITEM) / (BJ)->nbands, oh0_ = (ITEM) % (BJ)->nbands * (BJ)->band; \
        int64_t nr_ = c_->h_out - oh0_ < (BJ)->band ? c_->h_out - oh0_ : (BJ)->band;      \
        const int64_t rf_ = (BJ)->rf, half_ = rf_ / 2;                                    \
        const int64_t in_rows_ = (nr_ - 1) * c_->sh + (c_->kh - 1) * c_->dh + 1;          \
        float tile_[PA_DW_TILE_FLOATS];                                                   \
        _pa_band_fill(tile_, j_->x + plane_ * c_->h * c_->w, oh0_ * c_->sh - c_->pad_top, \
                      in_rows_, c_->h, c_->w, c_->pad_left, (BJ)->wp, rf_, (S), 0.0f);    \
        int64_t ch_ = plane_ % c_->c_in;                                                  \
        dw_taps_t t_;                                                                     \
        float wt_[PA_DW_MAX_TAPS];                                                        \
        t_.n = c_->kh * c_->kw;                                                           \
        for (int64_t i_ = 0; i_ < c_->kh; i_++)                                           \
            for (int64_t jj_ = 0; jj_ < c_->kw; jj_++) {                                  \
                int64_t k_ = i_ * c_->kw + jj_, col_ = jj_ * c_->dw;                      \
                t_.xoff[k_] = i_ * c_->dh * rf_ +                                         \
                              ((S) == 2 ? (col_ & 1) * half_ + (col_ >> 1) : col_);       \
                wt_[k_] = j_->w[k_ * j_->cp + ch_];                                       \
            }                                                                             \
        ROWS(&t_, wt_, tile_, c_->sh * rf_, j_->y + (plane_ * c_->h_out + oh0_) * c_->w_out, \
             nr_, j_->bias[ch_], c_);                                                     \
    } while (0)

/* Defines the task NAME (a _pa_task_fn over a dw_band_job_t), the bands'
 * walk: items [begin, end), each with the column stride as a constant. */
#define PA_DW_BANDS_TASK(NAME, ROWS)                                                      \
    static void NAME(void *ctx, int64_t begin, int64_t end) {                             \
        const dw_band_job_t *bjw_ = ctx;                                                  \
        for (int64_t itw_ = begin; itw_ < end; itw_++) {                                  \
            if (bjw_->j->c->sw == 1)                                                      \
                PA_DW_BAND(bjw_, itw_, 1, ROWS);                                          \
            else                                                                          \
                PA_DW_BAND(bjw_, itw_, 2, ROWS);                                          \
        }                                                                                 \
    }

#endif
