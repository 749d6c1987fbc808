/* kernels/gemm.c -- pointwise convolution (1x1, stride 1, unpadded,
 * groups 1) as a packed SGEMM with the bias, a residual and the
 * activation fused.
 *
 * A pointwise convolution is one matrix product per image: NCHW
 * out[C_out, HW] = W[C_out, C_in] x in[C_in, HW], NHWC out[HW, C_out] =
 * in[HW, C_in] x W^T.  OpenBLAS does it well on large planes, but on the
 * 7x7 and 14x14 planes of mobile networks its call, its packing of both
 * operands and the separate bias + activation pass cost as much as the
 * arithmetic.  Here the weights are packed once (pa_conv2d_pack, at bind
 * time), and the bias, the residual of a following Add (with a channel
 * Pad of it: channels past c_res add nothing) and the activation are
 * applied to the register tile before it is stored: the output is
 * written once.
 *
 * The register tile is PA_GEMM_MR rows x PA_GEMM_NR columns, accumulated
 * over the reduction, each step broadcasting one value per row against
 * PA_GEMM_NR contiguous floats of the column operand: 12 vector
 * accumulators, which the 16 AVX2 registers hold.
 *
 *   - pixel tiles (NHWC; NCHW planes of at most PA_GEMM_PX_MAX pixels):
 *     rows are pixels, read in place (one pointer each; a tile past the
 *     last pixel repeats it, computed, not stored), columns are output
 *     channels from the packed weights ([c_in][PA_GEMM_NR] per block,
 *     zero-filled past c_out); NCHW stores the tile transposed.  Small
 *     weights: pixel tile outer, so each output row is written whole;
 *     large ones (past PA_GEMM_L2 bytes): block outer, so each block's
 *     weights come from memory once.  NHWC runs in gemm_nhwc.c
 *     (this packing, its epilogue in registers; conv.c picks the
 *     file by layout).
 *   - NCHW strips (larger planes): rows are output channels from the
 *     packed weights ([c_in][PA_GEMM_MR] per block); columns are a strip
 *     of pixels (PA_GEMM_NR, or up to PA_GEMM_STRIP_MAX times that when
 *     the reduction is short), copied PA_GEMM_KC input channels at a time
 *     to a 16 KiB stack panel of column tiles (zero-padded past the plane:
 *     no tail reads, contiguous loads) that every block of output
 *     channels then reuses; partial sums of a long reduction go through
 *     the output itself.
 *
 * The accumulators are GNU C vectors of 8 floats (GCC and clang): with
 * plain arrays GCC keeps the tile in memory and reloads it every step.
 * The vector code is the same in every target_clones clone (AVX2 and
 * AVX-512 use one ymm register per vector, SSE2 two xmm).  Unlike the
 * other kernels this file lets the compiler contract a * b + c into FMA
 * where the clone has it: on AVX2 the separate multiply and add cost
 * 10-20% (issue width), and OpenBLAS, the path this one replaces, uses
 * FMA too; the SSE2 build differs by rounding only.  No workspace but
 * the stack; threads split pixel tiles or strips.
 */
#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#define PA_GEMM_KC 256                   /* input channels per NCHW panel */
#define PA_GEMM_PANEL (PA_GEMM_KC * PA_GEMM_NR) /* NCHW panel: 16 KiB */
#define PA_GEMM_STRIP_MAX 16             /* NCHW: column tiles per strip  */
#ifndef PA_GEMM_PX_MAX
#define PA_GEMM_PX_MAX 64
#endif

typedef float pa_v8 __attribute__((vector_size(32)));

/* Macros, not functions: a vector returned by value from a function
 * compiled without AVX changes the ABI (GCC's -Wpsabi), even inlined. */
#define V8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_v8))
#define V8_SPLAT(a) ((pa_v8){(a), (a), (a), (a), (a), (a), (a), (a)})

typedef pa_v8 gemm_acc_t[PA_GEMM_MR][PA_GEMM_NV];

/* The reduction: kh * kw * c_in (c_in for a pointwise convolution). */
static int64_t gemm_k(const pa_conv2d_t *c) { return c->kh * c->kw * c->c_in; }

/* 1: tiles of pixels x output channels (NHWC: gemm_nhwc.c, and
 * NCHW planes of at most PA_GEMM_PX_MAX pixels, stored transposed);
 * 0: NCHW strips. */
static int gemm_pixel_tiles(const pa_conv2d_t *c) {
    return c->layout == PA_LAYOUT_NHWC || c->h * c->w <= PA_GEMM_PX_MAX;
}

/* Output channels per packed block: columns or rows of the tile. */
static int64_t gemm_block(const pa_conv2d_t *c) {
    return gemm_pixel_tiles(c) ? PA_GEMM_NR : PA_GEMM_MR;
}

size_t _pa_gemm_packed_size(const pa_conv2d_t *c) {
    int64_t bl = gemm_block(c), nb = (c->c_out + bl - 1) / bl;
    return (size_t)(nb * bl * (1 + gemm_k(c)));
}

/* Per block of output channels: its bias, then [c_in][block] weights. */
pa_status_t _pa_gemm_pack(const pa_conv2d_t *c, const float *weight, const float *bias,
                          float *packed) {
    _pa_pack_blocks(packed, weight, bias, c->c_out, gemm_k(c), gemm_block(c));
    return PA_OK;
}

/* -- the register tile ----------------------------------------------------- */

typedef struct {
    const pa_conv2d_t *c;
    const float *packed, *x;
    float *y;
    int64_t m, k;          /* pixels of a plane, input channels          */
    int64_t mt, nt;        /* pixel tiles: pixel tiles, channel blocks;
                              strips: channel blocks, pixel strips        */
    int block_outer;       /* pixel tiles: channel block outer loop      */
    int64_t xps, xks, yps, ycs, xis, yis; /* strides: pixel, channel, image */
    const float *r;        /* the residual added before the activation,  */
    int64_t c_res;         /* of c_res channels (NULL, 0: none)          */
    int64_t strip;         /* NCHW strips: pixels per strip               */
} gemm_job_t;

/* acc[i][v] += sum over kk < kn of a_i[kk * as] * b[kk * bs + v], where
 * a_i = a[i] (as apart) or a0 + i (packed: a[] NULL). */
PA_INLINE void gemm_micro(const float *const *a, const float *a0, int64_t as,
                          const float *b, int64_t bs, int64_t kn, gemm_acc_t acc) {
    const float *p0 = a ? a[0] : a0, *p1 = a ? a[1] : a0 + 1, *p2 = a ? a[2] : a0 + 2;
    const float *p3 = a ? a[3] : a0 + 3, *p4 = a ? a[4] : a0 + 4, *p5 = a ? a[5] : a0 + 5;
    for (int64_t kk = 0; kk < kn; kk++) {
        pa_v8 b0, b1, s;
        V8_LOAD(b0, b);
        V8_LOAD(b1, b + 8);
        s = V8_SPLAT(*p0);
        acc[0][0] += s * b0, acc[0][1] += s * b1;
        s = V8_SPLAT(*p1);
        acc[1][0] += s * b0, acc[1][1] += s * b1;
        s = V8_SPLAT(*p2);
        acc[2][0] += s * b0, acc[2][1] += s * b1;
        s = V8_SPLAT(*p3);
        acc[3][0] += s * b0, acc[3][1] += s * b1;
        s = V8_SPLAT(*p4);
        acc[4][0] += s * b0, acc[4][1] += s * b1;
        s = V8_SPLAT(*p5);
        acc[5][0] += s * b0, acc[5][1] += s * b1;
        p0 += as, p1 += as, p2 += as, p3 += as, p4 += as, p5 += as;
        b += bs;
    }
}

/* t[i][v] += r[i * ri + v * rv] for i < mv, v < nv (a residual). */
PA_INLINE void gemm_residual(float t[PA_GEMM_MR][PA_GEMM_NR], const float *r, int64_t ri,
                             int64_t rv, int64_t mv, int64_t nv) {
    for (int64_t i = 0; i < mv; i++)
        for (int64_t v = 0; v < nv; v++)
            t[i][v] += r[i * ri + v * rv];
}

/* Rows [0, mv) x columns [0, nv) of the tile to y (rows ys apart), after
 * the residual (rows [0, rm) x columns [0, rn) of r, rows ri apart) and
 * the activation when `act`. */
PA_INLINE void gemm_store(gemm_acc_t acc, const pa_act_params_t *act, int64_t mv, int64_t nv,
                          float *y, int64_t ys, const float *r, int64_t ri, int64_t rm,
                          int64_t rn) {
    float t[PA_GEMM_MR][PA_GEMM_NR];
    memcpy(t, acc, sizeof t);
    if (r)
        gemm_residual(t, r, ri, 1, rm, rn);
    if (act)
        _pa_act_block(&t[0][0], PA_GEMM_MR * PA_GEMM_NR, act);
    if (nv == PA_GEMM_NR) {
        for (int64_t i = 0; i < mv; i++)
            memcpy(y + i * ys, t[i], sizeof t[i]);
        return;
    }
    for (int64_t i = 0; i < mv; i++)
        for (int64_t v = 0; v < nv; v++)
            y[i * ys + v] = t[i][v];
}

/* Channels [c0, c0 + n) that lie below c_res: how many (0 or more). */
static inline int64_t gemm_res_count(int64_t c_res, int64_t c0, int64_t n) {
    int64_t k = c_res - c0;
    return k < 0 ? 0 : (k < n ? k : n);
}

/* The tile's partial sums back from y (zeros outside [0, mv) x [0, nv)). */
PA_INLINE void gemm_reload(gemm_acc_t acc, int64_t mv, int64_t nv, const float *y, int64_t ys) {
    float t[PA_GEMM_MR][PA_GEMM_NR];
    memset(t, 0, sizeof t);
    for (int64_t i = 0; i < mv; i++)
        for (int64_t v = 0; v < nv; v++)
            t[i][v] = y[i * ys + v];
    memcpy(acc, t, sizeof t);
}

/* Pixel tile: pixels i0.. of image img x output channels of block jb. */
PA_INLINE void gemm_tile_px(const gemm_job_t *j, int64_t img, int64_t i0, int64_t jb) {
    const pa_conv2d_t *c = j->c;
    const float *pk = j->packed + jb * PA_GEMM_NR * (1 + j->k);
    gemm_acc_t acc;
    for (int i = 0; i < PA_GEMM_MR; i++)
        for (int v = 0; v < PA_GEMM_NV; v++)
            V8_LOAD(acc[i][v], pk + 8 * v);
    const float *x = j->x + img * j->xis;
    const float *a[PA_GEMM_MR];
    for (int i = 0; i < PA_GEMM_MR; i++)
        a[i] = x + (i0 + i < j->m ? i0 + i : j->m - 1) * j->xps;
    gemm_micro(a, NULL, j->xks, pk + PA_GEMM_NR, PA_GEMM_NR, j->k, acc);
    int64_t mv = j->m - i0 < PA_GEMM_MR ? j->m - i0 : PA_GEMM_MR;
    int64_t nv = c->c_out - jb * PA_GEMM_NR < PA_GEMM_NR ? c->c_out - jb * PA_GEMM_NR
                                                          : PA_GEMM_NR;
    float *y = j->y + img * j->yis + i0 * j->yps + jb * PA_GEMM_NR * j->ycs;
    const int64_t rn = j->r ? gemm_res_count(j->c_res, jb * PA_GEMM_NR, nv) : 0;
    float t[PA_GEMM_MR][PA_GEMM_NR];
    memcpy(t, acc, sizeof t);
    if (rn)                               /* NCHW: residual planes */
        gemm_residual(t, j->r + img * j->c_res * j->m + jb * PA_GEMM_NR * j->m + i0, 1, j->m,
                      mv, rn);
    _pa_act_block(&t[0][0], PA_GEMM_MR * PA_GEMM_NR, &c->act);
    for (int64_t v = 0; v < nv; v++)
        for (int64_t i = 0; i < mv; i++)
            y[v * j->ycs + i] = t[i][v];
}

PA_MULTIVERSION
static void gemm_px(void *ctx, int64_t begin, int64_t end) {
    const gemm_job_t *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t img = t / (j->mt * j->nt), r = t % (j->mt * j->nt);
        int64_t row = j->block_outer ? r % j->mt : r / j->nt;
        int64_t col = j->block_outer ? r / j->mt : r % j->nt;
        gemm_tile_px(j, img, row * PA_GEMM_MR, col);
    }
}

/* NCHW strip width in pixels: PA_GEMM_NR times as many column tiles as
 * keep the panel (input channels of one pass x strip) within
 * PA_GEMM_PANEL floats.  A short reduction gets a wide strip: on
 * MobileNetV2's 112x112 planes (16 -> 96 channels) 16-pixel strips wrote
 * each output row 64 bytes at a time, 96 rows 50 KB apart, and took twice
 * OpenBLAS's time; 256-pixel strips write 1 KB runs. */
static int64_t gemm_strip_px(const pa_conv2d_t *c) {
    int64_t kc = c->c_in < PA_GEMM_KC ? c->c_in : PA_GEMM_KC;
    int64_t tiles = PA_GEMM_PANEL / (kc * PA_GEMM_NR);
    return PA_GEMM_NR * (tiles < 1 ? 1 : tiles > PA_GEMM_STRIP_MAX ? PA_GEMM_STRIP_MAX : tiles);
}

/* The panel of one pass: input channels [k0, k0 + kn) of pixels
 * [j0, j0 + ns), as column tiles of [kn][PA_GEMM_NR] (zeros past ns). */
PA_INLINE void gemm_fill_panel(float *panel, const float *x, int64_t hw, int64_t k0, int64_t kn,
                               int64_t ns) {
    for (int64_t s = 0; s * PA_GEMM_NR < ns; s++) {
        float *p = panel + s * kn * PA_GEMM_NR;
        const float *xs = x + s * PA_GEMM_NR;
        int64_t nv = ns - s * PA_GEMM_NR < PA_GEMM_NR ? ns - s * PA_GEMM_NR : PA_GEMM_NR;
        if (nv == PA_GEMM_NR) {
            for (int64_t kk = 0; kk < kn; kk++)
                memcpy(p + kk * PA_GEMM_NR, xs + (k0 + kk) * hw, PA_GEMM_NR * sizeof(float));
            continue;
        }
        memset(p, 0, (size_t)(kn * PA_GEMM_NR) * sizeof(float));
        for (int64_t kk = 0; kk < kn; kk++)
            for (int64_t v = 0; v < nv; v++)
                p[kk * PA_GEMM_NR + v] = xs[(k0 + kk) * hw + v];
    }
}

/* NCHW: one strip of pixels j0.. of image img, every output channel:
 * per pass of input channels, the panel, then per block of output
 * channels its column tiles left to right (the block's weights stay in
 * L1, each output row is written in runs of the strip's width). */
PA_INLINE void gemm_strip_nchw(const gemm_job_t *j, int64_t img, int64_t j0) {
    const pa_conv2d_t *c = j->c;
    const int64_t hw = j->m, k = j->k, sw = j->strip;
    const int64_t ns = hw - j0 < sw ? hw - j0 : sw;
    const float *x = j->x + img * k * hw + j0;
    float *y = j->y + img * c->c_out * hw + j0;
    float panel[PA_GEMM_PANEL];
    for (int64_t k0 = 0; k0 < k; k0 += PA_GEMM_KC) {
        int64_t kn = k - k0 < PA_GEMM_KC ? k - k0 : PA_GEMM_KC;
        gemm_fill_panel(panel, x, hw, k0, kn, ns);
        const int last = k0 + kn == k;
        for (int64_t ib = 0; ib < j->mt; ib++) {
            const float *pk = j->packed + ib * PA_GEMM_MR * (1 + k);
            int64_t mv = c->c_out - ib * PA_GEMM_MR;
            mv = mv < PA_GEMM_MR ? mv : PA_GEMM_MR;
            const int64_t rm = last && j->r ? gemm_res_count(j->c_res, ib * PA_GEMM_MR, mv) : 0;
            for (int64_t s = 0; s * PA_GEMM_NR < ns; s++) {
                const int64_t js = s * PA_GEMM_NR;
                const int64_t nv = ns - js < PA_GEMM_NR ? ns - js : PA_GEMM_NR;
                float *yb = y + ib * PA_GEMM_MR * hw + js;
                gemm_acc_t acc;
                if (k0 == 0) {
                    for (int i = 0; i < PA_GEMM_MR; i++)
                        for (int v = 0; v < PA_GEMM_NV; v++)
                            acc[i][v] = V8_SPLAT(pk[i]);
                } else {
                    gemm_reload(acc, mv, nv, yb, hw);
                }
                gemm_micro(NULL, pk + PA_GEMM_MR * (1 + k0), PA_GEMM_MR,
                           panel + s * kn * PA_GEMM_NR, PA_GEMM_NR, kn, acc);
                gemm_store(acc, last ? &c->act : NULL, mv, nv, yb, hw,
                           rm ? j->r + (img * j->c_res + ib * PA_GEMM_MR) * hw + j0 + js : NULL,
                           hw, rm, nv);
            }
        }
    }
}

PA_MULTIVERSION
static void gemm_nchw(void *ctx, int64_t begin, int64_t end) {
    const gemm_job_t *j = ctx;
    for (int64_t t = begin; t < end; t++)
        gemm_strip_nchw(j, t / j->nt, t % j->nt * j->strip);
}

pa_status_t _pa_gemm_nchw_run(const pa_conv2d_t *c, const float *packed, const float *x,
                              const float *r, int64_t c_res, float *y, pa_workers_t *workers) {
    gemm_job_t j = {c, packed, x, y, 0, c->c_in, 0, 0, 0, 0, 0, 0, 0, 0, 0, r, c_res, 0};
    const int64_t hw = c->h * c->w;
    pa_workers_t *w = _pa_workers_for(workers, (double)c->n * (double)hw *
                                                   (double)c->c_out * (double)c->c_in);
    if (gemm_pixel_tiles(c)) {
        const int64_t images = c->n;
        j.m = hw;
        j.xps = 1, j.xks = hw, j.yps = 1, j.ycs = hw;
        j.xis = c->c_in * hw, j.yis = c->c_out * hw;
        j.mt = (j.m + PA_GEMM_MR - 1) / PA_GEMM_MR;
        j.nt = (c->c_out + PA_GEMM_NR - 1) / PA_GEMM_NR;
        j.block_outer = _pa_gemm_packed_size(c) * sizeof(float) > PA_GEMM_L2;
        _pa_parallel(w, images * j.mt * j.nt, gemm_px, &j);
    } else {
        j.m = hw;
        j.mt = (c->c_out + PA_GEMM_MR - 1) / PA_GEMM_MR;
        j.strip = gemm_strip_px(c);
        j.nt = (hw + j.strip - 1) / j.strip;
        _pa_parallel(w, c->n * j.nt, gemm_nchw, &j);
    }
    return PA_OK;
}
