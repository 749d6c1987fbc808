/* kernels/gemm_nhwc_avx512.c -- the NHWC pointwise convolution's AVX-512 tile.
 *
 * The same product as gemm_nhwc.c (out[HW, C_out] = in[HW, C_in]
 * x W^T over the weights packed by gemm.c: per block of
 * PA_GEMM_NR = 16 output channels its bias, then [c_in][16]), for a
 * machine with AVX-512.  There a block is one 16-float register, and the
 * portable tile (6 pixels x one block in pairs of 8-float vectors: 12
 * accumulators of 8 floats) uses half of each register and 12 of the 32:
 * GCC's AVX-512 clone of it still computes 8 floats per instruction.
 * Here a tile is NHWC512_MR = 8 pixels x two blocks (32 channels): 16
 * accumulators of 16 floats; each reduction step loads the two blocks'
 * weight vectors and broadcasts one input value per pixel (the broadcast
 * folded into the multiply-add), 10 loads for 16 multiply-adds of 16
 * floats.  A last block of at most 16 channels runs a one-block tile;
 * channels past c_out are masked off at the store (the packed weights
 * there are zeros).
 *
 * Each output is its bias plus the products in reduction order, one
 * fused multiply-add each: the additions of gemm_nhwc.c's AVX2
 * and AVX-512 clones (FMA contracted there), in the same order, so the
 * results are theirs bit for bit.  The epilogue (a residual of c_res
 * channels, ReLU / clip, the store) runs from the registers; the other
 * activations go through a stack array and _pa_act_block.
 *
 * Only the tile is here: the walk over the tiles and the run are
 * gemm_nhwc.c's (gemm_nhwc.h, isa.h), which take this file's table where
 * the compiler can build it (PA_AVX512_BUILT: x86-64, GCC >= 11 or
 * clang) and the processor has AVX-512F at run time (_pa_avx512_usable,
 * cpu.c: unless the environment variable PA_DISABLE_AVX512 is set to other
 * than 0, for side-by-side timings); otherwise the portable tile runs.  No
 * workspace but the stack.
 */
#include "gemm_nhwc.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

/* as gemm_nhwc.c: the spilled epilogue's activations contracted
 * alike (hard-sigmoid's x * alpha + beta one FMA there too) */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#define NHWC512 __attribute__((target("avx512f,fma")))
#define NHWC512_INLINE static inline __attribute__((always_inline, target("avx512f,fma")))
#define NHWC512_MR 8
#define NHWC512_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
_Static_assert(PA_GEMM_NR == 16, "one AVX-512 register per packed block");

/* The first n (0..16) lanes. */
static inline __mmask16 nhwc512_mask(int64_t n) {
    return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* Valid floats of block b of a row whose valid part is n floats past
 * the tile's first channel. */
static inline int64_t nhwc512_part(int64_t n, int b) {
    int64_t q = n - 16 * b;
    return q < 0 ? 0 : (q < 16 ? q : 16);
}

/* _pa_expf (internal.h) on 16 lanes, its steps as GCC builds them under
 * this file's contraction (each a * b + c one fused multiply-add, x - n * c
 * one negated), so its bits: the clamps as min(hi, x) / max(lo, x),
 * which keep a NaN in x as `x > hi ? hi : x` does. */
NHWC512_INLINE __m512 nhwc512_expf(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-87.3f), x);
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic);
    const __m512 n = _mm512_sub_ps(t, magic);
    const __m512i k = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(magic));
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(k, _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* _pa_act_silu on 16 lanes: x / (1 + exp(-x)), the same steps. */
NHWC512_INLINE __m512 nhwc512_silu(__m512 x) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);      /* -x: the sign flipped */
    const __m512 e = nhwc512_expf(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign)));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* One accumulator out: + the residual's masked lanes (only those: the
 * spilled epilogue's additions), ReLU / clip / SiLU (kind), stored under
 * ym. */
NHWC512_INLINE void nhwc512_out(__m512 acc, const float *r, __mmask16 rm, float *y,
                                __mmask16 ym, pa_act_t kind, __m512 lo, __m512 hi) {
    if (rm)
        acc = _mm512_mask_add_ps(acc, rm, acc, _mm512_maskz_loadu_ps(rm, r));
    /* max(lo, acc) / min(hi, acc) keep a NaN in acc, as the portable
     * tile's compare-and-select does */
    if (kind == PA_ACT_SILU) {
        acc = nhwc512_silu(acc);
    } else if (kind != PA_ACT_NONE) {
        acc = _mm512_max_ps(lo, acc);
        if (kind == PA_ACT_CLIP)
            acc = _mm512_min_ps(hi, acc);
    }
    _mm512_mask_storeu_ps(y, ym, acc);
}

/* Pixels i0.. (R of them: NHWC512_MR, or one less) x blocks jb.. (NB of
 * them: 2, or 1 for a last block): products, residual, activation,
 * store.  A row from R on is not computed. */
NHWC512_INLINE void nhwc512_tile(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jb,
                                const int NB, const int R) {
    const pa_conv2d_t *c = j->c;
    const int64_t c0 = jb * PA_GEMM_NR, ys = c->c_out, k = j->k, ri = j->c_res;
    const int64_t nc = c->c_out - c0 < NB * PA_GEMM_NR ? c->c_out - c0 : NB * PA_GEMM_NR;
    const int64_t mv = j->m - i0 < R ? j->m - i0 : R;
    const int64_t rn = !j->r || c0 >= ri ? 0 : ri - c0 < nc ? ri - c0 : nc;
    const int64_t bs = PA_GEMM_NR * (1 + k);          /* floats per packed block */
    const float *w0 = j->packed + jb * bs, *w1 = NB == 2 ? w0 + bs : w0;
    /* the residual's lines of the tile, asked for before the products: read
     * only at the store, a ResNet block's input (3 MiB at 56x56x256, long
     * out of L2) stalled each tile on its misses -- ResNet-50's 64 -> 256
     * channels at 56x56 with a residual 1.47-1.59 -> 1.25 ms (1.05 without
     * one), 128 -> 512 at 28x28 1.22 -> 1.15 ms (CPU time, one thread) */
    for (int64_t i = 0; i < mv && rn; i++) {
        const float *rp = j->r + (i0 + i) * ri + c0;
        __builtin_prefetch(rp, 0, 3);
        if (rn > 16)
            __builtin_prefetch(rp + 16, 0, 3);
    }
    const __m512 b0 = _mm512_loadu_ps(w0);
    const __m512 b1 = NB == 2 ? _mm512_loadu_ps(w1) : _mm512_setzero_ps();
    /* rows past the last pixel repeat it (computed, not stored) */
#define NHWC512_ACC(i) __m512 a##i##0 = b0, a##i##1 = b1; const float *p##i;
    NHWC512_ROWS(NHWC512_ACC)
#undef NHWC512_ACC
    w0 += PA_GEMM_NR;
    w1 += PA_GEMM_NR;
    (void)k;
    /* len reduction steps from p<i> against w0 / w1, which move past them */
#define NHWC512_RUN(len)                                                                    \
    do {                                                                                    \
        const int64_t n_ = (len);                                                           \
        if (NB == 2) {                                                                      \
            for (int64_t kk = 0; kk < n_; kk++) {                                           \
                const __m512 v0 = _mm512_loadu_ps(w0 + kk * PA_GEMM_NR);                    \
                const __m512 v1 = _mm512_loadu_ps(w1 + kk * PA_GEMM_NR);                    \
                NHWC512_ROWS(NHWC512_FMA2)                                                  \
            }                                                                               \
        } else {                                                                            \
            for (int64_t kk = 0; kk < n_; kk++) {                                           \
                const __m512 v0 = _mm512_loadu_ps(w0 + kk * PA_GEMM_NR);                    \
                NHWC512_ROWS(NHWC512_FMA1)                                                  \
            }                                                                               \
        }                                                                                   \
        w0 += n_ * PA_GEMM_NR;                                                              \
        w1 += n_ * PA_GEMM_NR;                                                              \
    } while (0)
#define NHWC512_FMA2(i) if (i < R) { const __m512 s = _mm512_set1_ps(p##i[kk]); \
    a##i##0 = _mm512_fmadd_ps(s, v0, a##i##0); a##i##1 = _mm512_fmadd_ps(s, v1, a##i##1); }
#define NHWC512_FMA1(i) if (i < R) a##i##0 = _mm512_fmadd_ps(_mm512_set1_ps(p##i[kk]), v0, a##i##0);
    PA_GEMM_FEED(NHWC512_MR, NHWC512_ROWS, NHWC512_RUN);
#undef NHWC512_FMA1
#undef NHWC512_FMA2
#undef NHWC512_RUN
    const float *r = j->r ? j->r + i0 * ri + c0 : NULL;
    float *y = j->y + i0 * ys + c0;
    const pa_act_t kind = c->act.kind;
    if (kind != PA_ACT_NONE && kind != PA_ACT_RELU && kind != PA_ACT_CLIP &&
        kind != PA_ACT_SILU) {
        float t[NHWC512_MR][2 * PA_GEMM_NR];
#define NHWC512_SPILL(i) _mm512_storeu_ps(t[i], a##i##0); _mm512_storeu_ps(t[i] + 16, a##i##1);
        NHWC512_ROWS(NHWC512_SPILL)
#undef NHWC512_SPILL
        for (int64_t i = 0; i < mv; i++)
            for (int64_t q = 0; q < rn; q++)
                t[i][q] += r[i * ri + q];
        _pa_act_block(&t[0][0], sizeof t / sizeof t[0][0], &c->act);
        for (int64_t i = 0; i < mv; i++)
            memcpy(y + i * ys, t[i], (size_t)nc * sizeof(float));
        return;
    }
    const __m512 lo = _mm512_set1_ps(kind == PA_ACT_CLIP ? c->act.alpha : 0.0f);
    const __m512 hi = _mm512_set1_ps(c->act.beta);
    const __mmask16 rm0 = nhwc512_mask(nhwc512_part(rn, 0));
    const __mmask16 rm1 = nhwc512_mask(nhwc512_part(rn, 1));
    const __mmask16 ym0 = nhwc512_mask(nhwc512_part(nc, 0));
    const __mmask16 ym1 = nhwc512_mask(nhwc512_part(nc, 1));
    /* no residual: r stays NULL (no offset applied to it; its masks are 0) */
#define NHWC512_R(off) (r ? r + (off) : r)
#define NHWC512_OUT(i)                                                                  \
    if (i < mv) {                                                                       \
        nhwc512_out(a##i##0, NHWC512_R(i * ri), rm0, y + i * ys, ym0, kind, lo, hi);    \
        if (NB == 2)                                                                    \
            nhwc512_out(a##i##1, NHWC512_R(i * ri + 16), rm1, y + i * ys + 16, ym1,     \
                        kind, lo, hi);                                                  \
    }
    NHWC512_ROWS(NHWC512_OUT)
#undef NHWC512_OUT
#undef NHWC512_R
}

/* The tile at pixels i0.. (rows of them: NHWC512_MR or one less) x
 * block pair jp: two blocks, or the last one. */
NHWC512_INLINE void nhwc512_tile_at(const pa_gemm_nhwc_job_t *j, int64_t i0, int64_t jp,
                                    int64_t rows) {
    if (rows == NHWC512_MR) {
        if (2 * jp + 1 < j->nb)
            nhwc512_tile(j, i0, 2 * jp, 2, NHWC512_MR);
        else
            nhwc512_tile(j, i0, 2 * jp, 1, NHWC512_MR);
    } else if (2 * jp + 1 < j->nb) {
        nhwc512_tile(j, i0, 2 * jp, 2, NHWC512_MR - 1);
    } else {
        nhwc512_tile(j, i0, 2 * jp, 1, NHWC512_MR - 1);
    }
}

NHWC512 PA_GEMM_NHWC_TASK(gemm_nhwc512_tiles, NHWC512_MR, nhwc512_tile_at)

/* One pixel's block jb out of its accumulator: the residual's lanes
 * below rn added (only those, as gemm_nhwc.c's row walk), then the
 * activation and the store of the block's valid channels. */
NHWC512_INLINE void nhwc512_row_out(const pa_gemm_nhwc_job_t *j, int64_t jb, __m512 acc) {
    const pa_conv2d_t *c = j->c;
    const int64_t c0 = jb * PA_GEMM_NR, ri = j->c_res;
    const int64_t nc = c->c_out - c0 < PA_GEMM_NR ? c->c_out - c0 : PA_GEMM_NR;
    const int64_t rn = !j->r || c0 >= ri ? 0 : ri - c0 < nc ? ri - c0 : nc;
    const __mmask16 rm = nhwc512_mask(rn), ym = nhwc512_mask(nc);
    if (rm)
        acc = _mm512_mask_add_ps(acc, rm, acc, _mm512_maskz_loadu_ps(rm, j->r + c0));
    pa_act_t kind = c->act.kind;
    if (kind != PA_ACT_NONE && kind != PA_ACT_RELU && kind != PA_ACT_CLIP) {
        float t[PA_GEMM_NR];        /* the element-wise activations: spilled */
        _mm512_storeu_ps(t, acc);
        _pa_act_block(t, PA_GEMM_NR, &c->act);
        acc = _mm512_loadu_ps(t);
        kind = PA_ACT_NONE;
    }
    nhwc512_out(acc, NULL, 0, j->y + c0, ym, kind,
                _mm512_set1_ps(kind == PA_ACT_CLIP ? c->act.alpha : 0.0f),
                _mm512_set1_ps(c->act.beta));
}

/* One pixel -- a matrix-vector product, a decode step's linear layer
 * (gemm_nhwc.c's row walk, the same sums): item t is the blocks
 * [4t, 4t + 4), whose weights stream from memory side by side, one
 * register each, every block summed from its bias in reduction order
 * with one fused multiply-add a step (the tile's order, so its bits);
 * a last group of fewer than four blocks runs them one by one. */
NHWC512 static void gemm_nhwc512_row(void *ctx, int64_t begin, int64_t end) {
    const pa_gemm_nhwc_job_t *j = ctx;
    const int64_t k = j->k, bs = PA_GEMM_NR * (1 + k);
    const float *restrict x = j->x;
    for (int64_t t = begin; t < end; t++) {
        const int64_t jb = t * PA_GEMM_ROW_BLOCKS;
        const float *w0 = j->packed + jb * bs;
        if (j->nb - jb >= 4) {
            const float *w1 = w0 + bs, *w2 = w1 + bs, *w3 = w2 + bs;
            __m512 a0 = _mm512_loadu_ps(w0), a1 = _mm512_loadu_ps(w1);
            __m512 a2 = _mm512_loadu_ps(w2), a3 = _mm512_loadu_ps(w3);
            for (int64_t kk = 1; kk <= k; kk++) {
                const __m512 s = _mm512_set1_ps(x[kk - 1]);
                a0 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w0 + kk * PA_GEMM_NR), a0);
                a1 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w1 + kk * PA_GEMM_NR), a1);
                a2 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w2 + kk * PA_GEMM_NR), a2);
                a3 = _mm512_fmadd_ps(s, _mm512_loadu_ps(w3 + kk * PA_GEMM_NR), a3);
            }
            nhwc512_row_out(j, jb, a0);
            nhwc512_row_out(j, jb + 1, a1);
            nhwc512_row_out(j, jb + 2, a2);
            nhwc512_row_out(j, jb + 3, a3);
            continue;
        }
        for (int64_t b = jb; b < j->nb; b++, w0 += bs) {
            __m512 a = _mm512_loadu_ps(w0);
            for (int64_t kk = 1; kk <= k; kk++)
                a = _mm512_fmadd_ps(_mm512_set1_ps(x[kk - 1]),
                                    _mm512_loadu_ps(w0 + kk * PA_GEMM_NR), a);
            nhwc512_row_out(j, b, a);
        }
    }
}

const pa_gemm_nhwc_isa_t _pa_gemm_nhwc_avx512 = {gemm_nhwc512_tiles, NHWC512_MR, 1, 2,
                                                 gemm_nhwc512_row};

#else

const pa_gemm_nhwc_isa_t _pa_gemm_nhwc_avx512 = {NULL, 0, 0, 0, NULL};

#endif
