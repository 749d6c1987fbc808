/* kernels/gemm_nhwc.c -- the NHWC pointwise convolution's register tile
 * with its epilogue in registers.
 *
 * NHWC out[HW, C_out] = in[HW, C_in] x W^T over the weights packed by
 * gemm.c (per block of PA_GEMM_NR output channels: the bias,
 * then [c_in][PA_GEMM_NR]).  A tile is PA_GEMM_MR pixels x one block,
 * each reduction step broadcasting one input value per pixel against the
 * block's two 8-float weight vectors, as in gemm.c.  What differs
 * is the end of the tile.  Mobile networks' NHWC 1x1 layers are mostly
 * short reductions (16-96 input channels, BlazeFace's 24-96): there the
 * tile's epilogue -- the accumulators spilled to a stack array, the
 * residual and the activation applied element by element, the array
 * copied out, a scalar loop for a block's tail -- took as long as the
 * products.  Here the residual vectors are added, ReLU / clip (and
 * no activation) applied and the result stored straight from the
 * accumulators (a tail vector of fewer than 8 channels through an 8-float
 * stack buffer); the other activations (sigmoid, SiLU, hard-swish,
 * hard-sigmoid) still go through the array.  A last block of at most 8
 * channels (c_out = 24, 40, 72, 88 ...) runs a half-width tile instead of
 * multiplying zeros.
 *
 * Order (the walk of gemm_nhwc.h, which the AVX-512 tile of
 * gemm_nhwc_avx512.c runs under too): pixel tile outer, every block of it
 * inner (the tile's input rows stay in L1) unless the packed weights pass
 * PA_GEMM_L2 bytes; then block outer, so each block's weights come from
 * memory once.  Threads split the tiles.  The run below picks the variant
 * (isa.h).  No workspace but the stack.
 */
#include "gemm_nhwc.h"
#include "isa.h"

#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

typedef float pa_nv8 __attribute__((vector_size(32)));
typedef int32_t pa_ni8 __attribute__((vector_size(32)));

#define NV8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_nv8))
#define NV8_STORE(p, src) memcpy((p), &(src), sizeof(pa_nv8))
#define NV8_SPLAT(a) ((pa_nv8){(a), (a), (a), (a), (a), (a), (a), (a)})
/* lanes of a where m (all bits set), else b */
#define NV8_SELECT(m, a, b) ((pa_nv8)(((pa_ni8)(a) & (m)) | ((pa_ni8)(b) & ~(m))))

/* The tile's accumulators are named variables, row i's two vectors
 * a<i>l (channels 0-7 of the block) and a<i>h (8-15), not an array: with
 * an array GCC built the bias rows and the input pointers on the stack
 * and reloaded them (a store-forwarding stall per tile), which on a
 * reduction 24 long cost as much as the products. */
#define NHWC_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
_Static_assert(PA_GEMM_MR == 6, "NHWC_ROWS names PA_GEMM_MR rows");

/* n < 8 floats from s to d in chunks of 4, 2, 1 (constant-size copies:
 * no call to memcpy). */
PA_INLINE void nhwc_copy_part(float *d, const float *s, int64_t n) {
    int64_t q = 0;
    if (n & 4) {
        memcpy(d, s, 4 * sizeof *d);
        q = 4;
    }
    if (n & 2) {
        memcpy(d + q, s + q, 2 * sizeof *d);
        q += 2;
    }
    if (n & 1)
        d[q] = s[q];
}

/* Floats of vector v of a row whose valid part is n floats: 0..8. */
static inline int64_t nhwc_lanes(int64_t n, int v) {
    int64_t k = n - 8 * v;
    return k < 0 ? 0 : (k < 8 ? k : 8);
}

/* One accumulator vector out: + the residual's rn floats (0..8; lanes
 * past them add 0), the activation (kind: none, ReLU or clip to
 * [lo, hi]), stored as yn floats (1..8). */
PA_INLINE void nhwc_vec_out(const pa_nv8 *a, const float *r, int64_t rn, float *y,
                            int64_t yn, pa_act_t kind, const pa_nv8 *lo, const pa_nv8 *hi) {
    pa_nv8 acc = *a;
    if (rn == 8) {
        pa_nv8 t;
        NV8_LOAD(t, r);
        acc += t;
    } else if (rn > 0) {
        float t8[8] = {0};
        pa_nv8 t;
        nhwc_copy_part(t8, r, rn);
        memcpy(&t, t8, sizeof t);
        acc += t;
    }
    if (kind != PA_ACT_NONE) {
        acc = NV8_SELECT(acc < *lo, *lo, acc);
        if (kind == PA_ACT_CLIP)
            acc = NV8_SELECT(acc > *hi, *hi, acc);
    }
    if (yn == 8) {
        NV8_STORE(y, acc);
    } else {
        float t8[8];
        memcpy(t8, &acc, sizeof t8);
        nhwc_copy_part(y, t8, yn);
    }
}

/* Rows [0, mv) x the first nc floats of the tile t (spilled): the
 * residual (rn floats per row, rows ri apart), the activation, the
 * store.  The last pixel tile and the element-wise activations. */
PA_INLINE void nhwc_store_spilled(float t[PA_GEMM_MR][PA_GEMM_NR], const pa_act_params_t *act,
                                  int64_t mv, int64_t nc, const float *r, int64_t ri,
                                  int64_t rn, float *y, int64_t ys) {
    for (int64_t i = 0; i < mv; i++)
        for (int64_t q = 0; q < rn; q++)
            t[i][q] += r[i * ri + q];
    _pa_act_block(&t[0][0], PA_GEMM_MR * PA_GEMM_NR, act);
    for (int64_t i = 0; i < mv; i++)
        for (int64_t q = 0; q < nc; q++)
            y[i * ys + q] = t[i][q];
}

/* Pixels i0.. x block jb, NV vectors of it (2, or 1 for a last block
 * of at most 8 channels): products, residual, activation, store. */
PA_INLINE void nhwc_tile(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jb, const int NV) {
    const pa_conv2d_t *c = j->c;
    const int64_t c0 = jb * PA_GEMM_NR, ys = c->c_out, k = j->k, ri = j->c_res;
    const int64_t nc = c->c_out - c0 < PA_GEMM_NR ? c->c_out - c0 : PA_GEMM_NR;
    const int64_t mv = j->m - i0 < PA_GEMM_MR ? j->m - i0 : PA_GEMM_MR;
    const int64_t rn = !j->r || c0 >= ri ? 0 : ri - c0 < nc ? ri - c0 : nc;
    const float *pk = j->packed + jb * PA_GEMM_NR * (1 + k);
    pa_nv8 bl, bh = NV8_SPLAT(0.0f);
    NV8_LOAD(bl, pk);
    if (NV == 2)
        NV8_LOAD(bh, pk + 8);
    /* rows past the last pixel repeat it (computed, not stored) */
#define NHWC_ACC(i) pa_nv8 a##i##l = bl, a##i##h = bh; const float *p##i;
    NHWC_ROWS(NHWC_ACC)
#undef NHWC_ACC
    const float *w = pk + PA_GEMM_NR;
    (void)k;
    /* len reduction steps from p<i> against w, which moves past them */
#define NHWC_RUN(len)                                                                       \
    do {                                                                                    \
        const int64_t n_ = (len);                                                           \
        if (NV == 2) {                                                                      \
            for (int64_t kk = 0; kk < n_; kk++, w += PA_GEMM_NR) {                          \
                pa_nv8 w0, w1;                                                              \
                NV8_LOAD(w0, w);                                                            \
                NV8_LOAD(w1, w + 8);                                                        \
                NHWC_ROWS(NHWC_FMA2)                                                        \
            }                                                                               \
        } else {                                                                            \
            for (int64_t kk = 0; kk < n_; kk++, w += PA_GEMM_NR) {                          \
                pa_nv8 w0;                                                                  \
                NV8_LOAD(w0, w);                                                            \
                NHWC_ROWS(NHWC_FMA1)                                                        \
            }                                                                               \
        }                                                                                   \
    } while (0)
#define NHWC_FMA2(i) { pa_nv8 s = NV8_SPLAT(p##i[kk]); a##i##l += s * w0; a##i##h += s * w1; }
#define NHWC_FMA1(i) a##i##l += NV8_SPLAT(p##i[kk]) * w0;
    PA_GEMM_FEED(PA_GEMM_MR, NHWC_ROWS, NHWC_RUN);
#undef NHWC_FMA1
#undef NHWC_FMA2
#undef NHWC_RUN
    const float *r = j->r ? j->r + i0 * ri + c0 : NULL;
    float *y = j->y + i0 * ys + c0;
    const pa_act_t kind = c->act.kind;
    if (mv < PA_GEMM_MR ||
        (kind != PA_ACT_NONE && kind != PA_ACT_RELU && kind != PA_ACT_CLIP)) {
        float t[PA_GEMM_MR][PA_GEMM_NR];
#define NHWC_SPILL(i) NV8_STORE(t[i], a##i##l); NV8_STORE(t[i] + 8, a##i##h);
        NHWC_ROWS(NHWC_SPILL)
#undef NHWC_SPILL
        nhwc_store_spilled(t, &c->act, mv, nc, r, ri, rn, y, ys);
        return;
    }
    const pa_nv8 lo = NV8_SPLAT(kind == PA_ACT_CLIP ? c->act.alpha : 0.0f);
    const pa_nv8 hi = NV8_SPLAT(c->act.beta);
    const int64_t rn0 = nhwc_lanes(rn, 0), rn1 = nhwc_lanes(rn, 1);
    const int64_t yn0 = nhwc_lanes(nc, 0), yn1 = nhwc_lanes(nc, 1);
    /* no residual: r stays NULL (no offset applied to it) */
#define NHWC_R(off) (r ? r + (off) : r)
#define NHWC_OUT(i)                                                                       \
    nhwc_vec_out(&a##i##l, NHWC_R(i * ri), rn0, y + i * ys, yn0, kind, &lo, &hi);         \
    if (NV == 2)                                                                          \
        nhwc_vec_out(&a##i##h, NHWC_R(i * ri + 8), rn1, y + i * ys + 8, yn1, kind, &lo, &hi);
    NHWC_ROWS(NHWC_OUT)
#undef NHWC_OUT
#undef NHWC_R
}

/* The tile at pixels i0.. x block jb; a last block of at most 8 channels
 * runs the half-width tile. */
PA_INLINE void nhwc_tile_at(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jb,
                            int64_t rows) {
    (void)rows;     /* always PA_GEMM_MR: the portable variant has no short tiles */
    if (j->c->c_out - jb * PA_GEMM_NR > 8)
        nhwc_tile(j, i0, jb, 2);
    else
        nhwc_tile(j, i0, jb, 1);
}

/* The row a tap in the padding reads (gemm_nhwc.h). */
const float _pa_gemm_zeros[PA_GEMM_PAD_MAX_CIN];

PA_MULTIVERSION
PA_GEMM_NHWC_TASK(gemm_nhwc_tiles, PA_GEMM_MR, nhwc_tile_at)

/* One pixel's block jb out of its accumulator (acc[PA_GEMM_NR]): the
 * residual's channels below c_res, the activation, the store of the
 * block's valid channels. */
PA_INLINE void nhwc_row_out(const pa_gemm_nhwc_job_t *j, int64_t jb, float *acc) {
    const pa_conv2d_t *c = j->c;
    const int64_t c0 = jb * PA_GEMM_NR, ri = j->c_res;
    const int64_t nc = c->c_out - c0 < PA_GEMM_NR ? c->c_out - c0 : PA_GEMM_NR;
    const int64_t rn = !j->r || c0 >= ri ? 0 : ri - c0 < nc ? ri - c0 : nc;
    for (int64_t q = 0; q < rn; q++)
        acc[q] += j->r[c0 + q];
    _pa_act_block(acc, PA_GEMM_NR, &c->act);
    for (int64_t q = 0; q < nc; q++)
        j->y[c0 + q] = acc[q];
}

/* One pixel -- a matrix-vector product, a decode step's linear layer:
 * the tile would multiply five repeated rows for nothing.  Item t is the
 * blocks [4t, 4t + 4) (PA_GEMM_ROW_BLOCKS), which share each input value,
 * their accumulators independent chains held in registers (named vector
 * variables: an array of them went through the stack at every step, a
 * store-forwarding wait per block and input value -- 3-4 times slower),
 * the weights streaming from memory side by side; each block summed in
 * the tile's order from the bias, so the result rounds as the tile's
 * does; then the residual, the activation and the store.  A last group of
 * fewer than four blocks runs them one by one. */
#define NHWC_ROW_BLOCKS(X) X(0) X(1) X(2) X(3)
_Static_assert(PA_GEMM_ROW_BLOCKS == 4, "NHWC_ROW_BLOCKS names PA_GEMM_ROW_BLOCKS blocks");
PA_MULTIVERSION
static void gemm_nhwc_row(void *ctx, int64_t begin, int64_t end) {
    const pa_gemm_nhwc_job_t *j = ctx;
    const int64_t k = j->k, bs = PA_GEMM_NR * (1 + k);
    const float *restrict x = j->x;
    for (int64_t t = begin; t < end; t++) {
        const int64_t jb = t * PA_GEMM_ROW_BLOCKS;
        const float *pk = j->packed + jb * bs;
        if (j->nb - jb >= PA_GEMM_ROW_BLOCKS) {
#define NHWC_ROW_ACC(b) const float *w##b = pk + (b) * bs; pa_nv8 a##b##l, a##b##h; \
    NV8_LOAD(a##b##l, w##b); NV8_LOAD(a##b##h, w##b + 8);
            NHWC_ROW_BLOCKS(NHWC_ROW_ACC)
#undef NHWC_ROW_ACC
            for (int64_t kk = 1; kk <= k; kk++) {
                const pa_nv8 s = NV8_SPLAT(x[kk - 1]);
#define NHWC_ROW_FMA(b) { pa_nv8 v0, v1; NV8_LOAD(v0, w##b + kk * PA_GEMM_NR); \
    NV8_LOAD(v1, w##b + kk * PA_GEMM_NR + 8); a##b##l += s * v0; a##b##h += s * v1; }
                NHWC_ROW_BLOCKS(NHWC_ROW_FMA)
#undef NHWC_ROW_FMA
            }
#define NHWC_ROW_OUT(b) { float acc[PA_GEMM_NR]; NV8_STORE(acc, a##b##l); \
    NV8_STORE(acc + 8, a##b##h); nhwc_row_out(j, jb + (b), acc); }
            NHWC_ROW_BLOCKS(NHWC_ROW_OUT)
#undef NHWC_ROW_OUT
            continue;
        }
        for (int64_t b = jb; b < j->nb; b++, pk += bs) {
            pa_nv8 al, ah;
            NV8_LOAD(al, pk);
            NV8_LOAD(ah, pk + 8);
            for (int64_t kk = 1; kk <= k; kk++) {
                const pa_nv8 s = NV8_SPLAT(x[kk - 1]);
                pa_nv8 v0, v1;
                NV8_LOAD(v0, pk + kk * PA_GEMM_NR);
                NV8_LOAD(v1, pk + kk * PA_GEMM_NR + 8);
                al += s * v0;
                ah += s * v1;
            }
            float acc[PA_GEMM_NR];
            NV8_STORE(acc, al);
            NV8_STORE(acc + 8, ah);
            nhwc_row_out(j, b, acc);
        }
    }
}

/* The portable variant: PA_GEMM_MR pixels x one block per tile. */
static const pa_gemm_nhwc_isa_t nhwc_portable = {gemm_nhwc_tiles, PA_GEMM_MR, 0, 1,
                                                 gemm_nhwc_row};

pa_status_t _pa_gemm_nhwc_run_isa(const pa_conv2d_t *c, const float *packed, const float *x,
                                  const float *r, int64_t c_res, float *y,
                                  pa_workers_t *workers, int avx512) {
    const pa_gemm_nhwc_isa_t *isa =
        avx512 && _pa_avx512_usable() ? &_pa_gemm_nhwc_avx512 : &nhwc_portable;
    pa_gemm_nhwc_job_t j = {c, packed, x, r, y, c->n * c->h_out * c->w_out, 0, c_res, 0, 0, 0, 0,
                            0, {0}};
    _pa_gemm_rows_init(&j.g, c);
    j.k = j.g.k;
    j.nb = (c->c_out + PA_GEMM_NR - 1) / PA_GEMM_NR;
    j.mt = _pa_gemm_pixel_tiles(j.m, isa->mr, isa->is_short, &j.mf);
    j.nt = (j.nb + isa->nb - 1) / isa->nb;
    j.block_outer = _pa_gemm_packed_size(c) * sizeof(float) > PA_GEMM_L2;
    pa_workers_t *w = _pa_workers_for(workers, (double)j.m * (double)c->c_out * (double)j.k);
    if (j.m == 1 && !j.g.disjoint) {
        _pa_parallel(w, (j.nb + PA_GEMM_ROW_BLOCKS - 1) / PA_GEMM_ROW_BLOCKS, isa->row, &j);
        return PA_OK;
    }
    _pa_parallel(w, j.mt * j.nt, isa->tiles, &j);
    return PA_OK;
}

pa_status_t _pa_gemm_nhwc_run(const pa_conv2d_t *c, const float *packed, const float *x,
                              const float *r, int64_t c_res, float *y, pa_workers_t *workers) {
    return _pa_gemm_nhwc_run_isa(c, packed, x, r, c_res, y, workers, 1);
}
