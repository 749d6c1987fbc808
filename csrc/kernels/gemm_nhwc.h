/* kernels/gemm_nhwc.h -- the NHWC pointwise / disjoint-window SGEMM's driver, shared
 * by its portable tile (gemm_nhwc.c) and its AVX-512 tile
 * (gemm_nhwc_avx512.c); not installed.  isa.h says how they divide the
 * work. */
#ifndef PYARENA_KERNELS_GEMM_NHWC_H
#define PYARENA_KERNELS_GEMM_NHWC_H

#include "internal.h"

/* Where the tiles find an output pixel's input: a pointwise
 * convolution's pixel i is row i of k = c_in floats; a disjoint-window
 * convolution's (_pa_conv2d_is_disjoint) is kh runs of sl = kw * c_in floats,
 * rs floats apart, from its window's corner.  A padded-window one
 * (_pa_conv2d_is_padded_window) is read so where every window of the tile
 * lies inside the input; a tile with a window past an edge walks its
 * kh * kw taps, each c_in floats of the input or of the zero row
 * (_pa_gemm_tap): the same products in the same order as over a
 * zero-padded copy of the input, so the same bits. */
typedef struct {
    int64_t k, segs, sl, rs;        /* reduction, runs, run length, run stride */
    int64_t hw_out, w_out, h, w, sh, sw, c;
    int64_t pt, pl, kh, kw;         /* padding before the rows / columns, window */
    int disjoint, padded;
} pa_gemm_rows_t;

PA_INLINE void _pa_gemm_rows_init(pa_gemm_rows_t *g, const pa_conv2d_t *c) {
    g->disjoint = !_pa_conv2d_is_pointwise(c);
    g->padded = _pa_conv2d_is_padded_window(c);
    g->segs = g->disjoint ? c->kh : 1;
    g->sl = g->disjoint ? c->kw * c->c_in : c->c_in;
    g->k = g->segs * g->sl;
    g->rs = c->w * c->c_in;
    g->hw_out = c->h_out * c->w_out, g->w_out = c->w_out;
    g->h = c->h, g->w = c->w, g->sh = c->sh, g->sw = c->sw, g->c = c->c_in;
    g->pt = c->pad_top, g->pl = c->pad_left, g->kh = c->kh, g->kw = c->kw;
}

/* The first input float of output pixel i (all images counted); not
 * for a padded window (_pa_gemm_tile_wins). */
PA_INLINE const float *_pa_gemm_row(const float *x, const pa_gemm_rows_t *g, int64_t i) {
    if (!g->disjoint)
        return x + i * g->k;
    int64_t n = i / g->hw_out, q = i % g->hw_out, oh = q / g->w_out, ow = q % g->w_out;
    return x + ((n * g->h + oh * g->sh) * g->w + ow * g->sw) * g->c;
}

/* A pixel's window: its image's first float and its corner (input row
 * and column; negative in the padding). */
typedef struct {
    const float *img;
    int64_t ih, iw;
} pa_gemm_win_t;

/* 1 if the window lies inside the input. */
PA_INLINE int _pa_gemm_inside(const pa_gemm_rows_t *g, pa_gemm_win_t v) {
    return v.ih >= 0 && v.iw >= 0 && v.ih + g->kh <= g->h && v.iw + g->kw <= g->w;
}

/* The windows of pixels i0 .. i0 + mr - 1 into v (those past the last of
 * m: the last's), one division for the tile; 1 if all lie inside. */
PA_INLINE int _pa_gemm_tile_wins(const float *x, const pa_gemm_rows_t *g, int64_t i0,
                                 int64_t mr, int64_t m, pa_gemm_win_t *v) {
    const int64_t h_out = g->hw_out / g->w_out;
    int64_t n = i0 / g->hw_out, q = i0 % g->hw_out, oh = q / g->w_out, ow = q % g->w_out;
    int inside = 1;
    for (int64_t t = 0; t < mr; t++) {
        if (t > 0 && i0 + t < m && ++ow == g->w_out) {
            ow = 0;
            if (++oh == h_out)
                oh = 0, n++;
        }
        v[t].img = x + n * g->h * g->w * g->c;
        v[t].ih = oh * g->sh - g->pt, v[t].iw = ow * g->sw - g->pl;
        inside &= _pa_gemm_inside(g, v[t]);
    }
    return inside;
}

/* The first input float of a window inside the input. */
PA_INLINE const float *_pa_gemm_corner(const pa_gemm_rows_t *g, pa_gemm_win_t v) {
    return v.img + (v.ih * g->w + v.iw) * g->c;
}

/* The c_in input floats of tap (r, s) of window v: the input's, or the
 * zero row where the tap is in the padding. */
extern const float _pa_gemm_zeros[PA_GEMM_PAD_MAX_CIN];
PA_INLINE const float *_pa_gemm_tap(const pa_gemm_rows_t *g, pa_gemm_win_t v, int64_t r,
                                    int64_t s) {
    int64_t ih = v.ih + r, iw = v.iw + s;
    if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
        return _pa_gemm_zeros;
    return v.img + (ih * g->w + iw) * g->c;
}

/* The A side of one tile, written once for every variant (isa.h): sets
 * the row pointers p0 .. p(MR - 1) and runs the reduction RUN(len) over
 * them -- in place (pointwise rows, unpadded windows, padded windows all
 * inside the image: segs runs of sl floats, rs apart), or, for a tile with
 * a window past an edge, tap by tap (a padding tap reads the zero row).
 * ROWS(X) expands X(i) for each of the tile's MR rows; the tile's j, i0,
 * mv (valid rows: its pixels below j->m) are in scope; rows from mv on
 * repeat pixel i0 + mv - 1 (computed, not stored). */
#define PA_GEMM_FEED_ROW(i) p##i = padded ? _pa_gemm_corner(&j->g, wv[i]) \
                              : _pa_gemm_row(j->x, &j->g, i < mv ? i0 + i : i0 + mv - 1);
#define PA_GEMM_FEED_NEXT(i) p##i += rs;
#define PA_GEMM_FEED_TAP(i) p##i = _pa_gemm_tap(&j->g, wv[i], r, t);
#define PA_GEMM_FEED(MR, ROWS, RUN)                                                          \
    do {                                                                                    \
        pa_gemm_win_t wv[MR];    /* a padded window's pixels */                             \
        const int padded = j->g.padded;                                                     \
        if (!padded || _pa_gemm_tile_wins(j->x, &j->g, i0, MR, i0 + mv, wv)) {              \
            ROWS(PA_GEMM_FEED_ROW)                                                          \
            const int64_t sl = j->g.sl, rs = j->g.rs;                                       \
            for (int64_t seg = 0; seg < j->g.segs; seg++) {  /* a window's rows (1: pointwise) */ \
                RUN(sl);                                                                    \
                ROWS(PA_GEMM_FEED_NEXT)                                                     \
            }                                                                               \
        } else {                 /* a window past an edge: tap by tap */                    \
            for (int64_t r = 0; r < j->g.kh; r++)                                           \
                for (int64_t t = 0; t < j->g.kw; t++) {                                     \
                    ROWS(PA_GEMM_FEED_TAP)                                                  \
                    RUN(j->g.c);                                                            \
                }                                                                           \
        }                                                                                   \
    } while (0)

/* Channel blocks per item of a variant's one-pixel walk (isa.h's row). */
#define PA_GEMM_ROW_BLOCKS 4

/* One layer's run: the weights as gemm.c packs them (per block of
 * PA_GEMM_NR output channels its bias, then [k][PA_GEMM_NR]), the
 * tensors, and the tiles: mt of pixels x nt of channel blocks, as many
 * blocks per tile as the variant's table says. */
typedef struct {
    const pa_conv2d_t *c;
    const float *packed, *x, *r;
    float *y;
    int64_t m, k, c_res;   /* pixels of all images, reduction, residual channels */
    int64_t nb, mt, nt;    /* channel blocks, pixel tiles, channel tiles         */
    int64_t mf;            /* pixel tiles of the variant's mr rows; the mt - mf
                              after them have mr - 1 (all pixels in full tiles) */
    int block_outer;       /* the channel tiles outer (weights past PA_GEMM_L2)   */
    pa_gemm_rows_t g;      /* where a pixel's input is                           */
} pa_gemm_nhwc_job_t;

/* Defines the task NAME (a _pa_task_fn over a pa_gemm_nhwc_job_t): the
 * walk over tiles [begin, end) in the order of the job's block_outer --
 * pixel tile outer and every channel tile of it inner (the tile's input
 * rows stay in L1), or channel tile outer (each block's weights come from
 * memory once) -- each computed by the variant's tile
 *   void TILE(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jt, int64_t rows)
 * pixels i0.. (rows of them: MR for the first mf pixel tiles, MR - 1 after;
 * past the last pixel computed, not stored) x the jt-th tile of channel
 * blocks: products, residual, activation, store.  The variant puts its
 * target attribute before it.  A macro, as dwconv.h's walks: the tile is
 * called by name, so it is inlined as a direct call is (a tile passed as a
 * function pointer, even a constant one, compiles to other code). */
#define PA_GEMM_NHWC_TILE_AT(TILE, MR, pt, jt)                                            \
    ((pt) < j->mf ? TILE(j, (pt) * (MR), jt, MR)                                          \
                  : TILE(j, j->mf * (MR) + ((pt) - j->mf) * ((MR) - 1), jt, (MR) - 1))
#define PA_GEMM_NHWC_TASK(NAME, MR, TILE)                                                 \
    static void NAME(void *ctx, int64_t begin, int64_t end) {                             \
        const pa_gemm_nhwc_job_t *j = ctx;                                                \
        if (j->block_outer) {                                                             \
            for (int64_t t = begin; t < end; t++)                                         \
                PA_GEMM_NHWC_TILE_AT(TILE, MR, t % j->mt, t / j->mt);                     \
            return;                                                                       \
        }                                                                                 \
        for (int64_t t = begin; t < end; t++)                                             \
            PA_GEMM_NHWC_TILE_AT(TILE, MR, t / j->nt, t % j->nt);                         \
    }

/* Pixel tiles of m pixels for a variant of mr rows a tile (short: 1 if it
 * has tiles of mr - 1 rows too): *mf of mr rows, then tiles of mr - 1, as
 * many as make m exactly where they can (m = mf * mr + b * (mr - 1): a 7x7
 * map's 49 pixels are 7 tiles of 7 rather than 7 of 8, the last with one
 * pixel); else ceil(m / mr) tiles of mr, the last partly past m.  Returns
 * the tiles. */
PA_INLINE int64_t _pa_gemm_pixel_tiles(int64_t m, int64_t mr, int is_short, int64_t *mf) {
    const int64_t b = is_short ? (mr - m % mr) % mr : 0;
    if (b > 0 && m >= b * (mr - 1)) {
        *mf = (m - b * (mr - 1)) / mr;
        return *mf + b;
    }
    *mf = (m + mr - 1) / mr;
    return *mf;
}

#endif /* PYARENA_KERNELS_GEMM_NHWC_H */
