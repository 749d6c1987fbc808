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
 * rs floats apart, from its window's corner. */
typedef struct {
    int64_t k, segs, sl, rs;        /* reduction, runs, run length, run stride */
    int64_t hw_out, w_out, h, w, sh, sw, c;
    int disjoint;
} pa_gemm_rows_t;

PA_INLINE void _pa_gemm_rows_init(pa_gemm_rows_t *g, const pa_conv2d_t *c) {
    g->disjoint = !_pa_conv2d_is_pointwise(c);
    g->segs = g->disjoint ? c->kh : 1;
    g->sl = g->disjoint ? c->kw * c->c_in : c->c_in;
    g->k = g->segs * g->sl;
    g->rs = c->w * c->c_in;
    g->hw_out = c->h_out * c->w_out, g->w_out = c->w_out;
    g->h = c->h, g->w = c->w, g->sh = c->sh, g->sw = c->sw, g->c = c->c_in;
}

/* The first input float of output pixel i (all images counted). */
PA_INLINE const float *_pa_gemm_row(const float *x, const pa_gemm_rows_t *g, int64_t i) {
    if (!g->disjoint)
        return x + i * g->k;
    int64_t n = i / g->hw_out, q = i % g->hw_out, oh = q / g->w_out, ow = q % g->w_out;
    return x + ((n * g->h + oh * g->sh) * g->w + ow * g->sw) * g->c;
}

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
    int block_outer;       /* the channel tiles outer (weights past PA_GEMM_L2)   */
    pa_gemm_rows_t g;      /* where a pixel's input is                           */
} pa_gemm_nhwc_job_t;

/* Defines the task NAME (a _pa_task_fn over a pa_gemm_nhwc_job_t): the
 * walk over tiles [begin, end) in the order of the job's block_outer --
 * pixel tile outer and every channel tile of it inner (the tile's input
 * rows stay in L1), or channel tile outer (each block's weights come from
 * memory once) -- each computed by the variant's tile
 *   void TILE(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jt)
 * pixels i0.. (MR of them; past the last pixel computed, not stored) x the
 * jt-th tile of channel blocks: products, residual, activation, store.
 * The variant puts its target attribute before it.  A macro, as dwconv.h's
 * walks: the tile is called by name, so it is inlined as a direct call is
 * (a tile passed as a function pointer, even a constant one, compiles to
 * other code). */
#define PA_GEMM_NHWC_TASK(NAME, MR, TILE)                                                 \
    static void NAME(void *ctx, int64_t begin, int64_t end) {                             \
        const pa_gemm_nhwc_job_t *j = ctx;                                                \
        if (j->block_outer) {                                                             \
            for (int64_t t = begin; t < end; t++)                                         \
                TILE(j, t % j->mt * (MR), t / j->mt);                                     \
            return;                                                                       \
        }                                                                                 \
        for (int64_t t = begin; t < end; t++)                                             \
            TILE(j, t / j->nt * (MR), t % j->nt);                                         \
    }

#endif /* PYARENA_KERNELS_GEMM_NHWC_H */
