/* kernels/attention.c -- scaled dot-product attention, fused: scores,
 * scale, additive mask, softmax and the product with V in one pass per
 * query row.
 *
 * Unfused, an attention is five operators and three (batch, heads, rows,
 * keys) tensors, each written to memory and read back; for a decode step
 * (one query row) the per-operator cost and the transposed copy of the
 * keys dominate the arithmetic.  Here each query row's scores live in a
 * row of scratch that stays in L1: the dot products with the keys, then
 * the softmax in place (rows.c's row, so the rounding is the unfused
 * Softmax's), then the weighted sum of V's rows into a contiguous
 * accumulator.  Operands come as element strides, so a transposed or
 * broadcast view is read where it lies; the innermost loops run over a
 * contiguous axis when there is one (keys as rows: a dot product per key;
 * keys already transposed: an axpy over the keys per element), else a
 * scalar walk.  Only keys below `keys` -- a KV cache's live length -- and,
 * with a causal offset, those a query may see are read: a step costs
 * O(live length), not O(cache size).  (batch, head) pairs are shared out
 * to the worker pool; each part uses the scratch slot of its first pair.
 */
#include "isa.h"

/* products contracted into fused multiply-adds where the clone has them
 * (as gemm.c): faster, the results differ from the baseline build's by
 * rounding only */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

typedef struct {
    const pa_attention_t *a;
    const float *q, *k, *v, *mask;
    float *out, *scratch;
    int wide;   /* the blocked path in AVX-512 registers (_pa_avx512_usable) */
} attention_job_t;

#define ATT_R 4     /* query rows per block (the blocked path)        */
#define ATT_J 32    /* keys per score tile                             */
#define ATT_W 32    /* columns per output tile                         */
/* K^T's rows are np + ATT_SKEW floats apart: a power-of-two stride (256
 * keys: 1 KiB) puts a score tile's d rows in a few L1 sets, which then
 * evict each other on every tile */
#define ATT_SKEW 16

static int64_t att_pad(int64_t n) {
    return (n + ATT_J - 1) / ATT_J * ATT_J;
}

/* A pair's scratch: the row path's scores + query row (keys + size
 * floats) or the blocked path's K^T, scores and query block -- the
 * larger. */
static size_t slot_floats(const pa_attention_t *a) {
    const int64_t np = att_pad(a->keys);
    return (size_t)((np + ATT_SKEW) * a->size + np * ATT_R + ATT_R * a->size + a->keys +
                    a->size);
}

typedef float pa_av8 __attribute__((vector_size(32)));

#define AV8_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_av8))
#define AV8_STORE(p, src) memcpy((p), &(src), sizeof(pa_av8))
#define AV8_SPLAT(a) ((pa_av8){(a), (a), (a), (a), (a), (a), (a), (a)})

/* (by pointer: a vector passed by value changes the ABI without AVX) */
PA_INLINE float av8_sum(const pa_av8 *v) {
    float t[8];
    memcpy(t, v, sizeof t);
    return ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
}

/* sum over c < n of x[c] * y[c]: two vector accumulators (explicit
 * vectors: the compiler does not vectorise the reduction on its own). */
PA_INLINE float dot_row(const float *restrict x, const float *restrict y, int64_t n) {
    pa_av8 s0 = AV8_SPLAT(0.0f), s1 = AV8_SPLAT(0.0f), a, b;
    int64_t c = 0;
    for (; c + 16 <= n; c += 16) {
        AV8_LOAD(a, x + c);
        AV8_LOAD(b, y + c);
        s0 += a * b;
        AV8_LOAD(a, x + c + 8);
        AV8_LOAD(b, y + c + 8);
        s1 += a * b;
    }
    for (; c + 8 <= n; c += 8) {
        AV8_LOAD(a, x + c);
        AV8_LOAD(b, y + c);
        s0 += a * b;
    }
    s0 += s1;
    float t = av8_sum(&s0);
    for (; c < n; c++)
        t += x[c] * y[c];
    return t;
}

/* y[0, n) += a * x[0, n) */
PA_INLINE void axpy_row(float *restrict y, float a, const float *restrict x, int64_t n) {
    const pa_av8 av = AV8_SPLAT(a);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        pa_av8 u, w;
        AV8_LOAD(u, y + c);
        AV8_LOAD(w, x + c);
        u += av * w;
        AV8_STORE(y + c, u);
    }
    for (; c < n; c++)
        y[c] += a * x[c];
}

/* The scores of one query row (qrow contiguous) against keys [0, n). */
PA_INLINE void score_row(const pa_attention_t *a, const float *restrict qrow,
                         const float *restrict kb, float *restrict s, int64_t n) {
    const int64_t kj = a->k[2], kc = a->k[3], d = a->size;
    if (kc == 1) {                      /* keys as rows */
        for (int64_t j = 0; j < n; j++)
            s[j] = dot_row(qrow, kb + j * kj, d);
    } else if (kj == 1) {               /* keys transposed: (size, keys) */
        for (int64_t j = 0; j < n; j++)
            s[j] = 0.0f;
        for (int64_t c = 0; c < d; c++)
            axpy_row(s, qrow[c], kb + c * kc, n);
    } else {
        for (int64_t j = 0; j < n; j++) {
            float t = 0.0f;
            for (int64_t c = 0; c < d; c++)
                t += qrow[c] * kb[j * kj + c * kc];
            s[j] = t;
        }
    }
}

/* acc[0, size) = sum over j < n of p[j] * v row j: 32 floats of acc at a
 * time held in registers over every j (a sum kept in memory would wait
 * on its own store each j). */
PA_INLINE void weigh_rows(const pa_attention_t *a, const float *restrict p,
                          const float *restrict vb, float *restrict acc, int64_t n) {
    const int64_t vj = a->v[2], vc = a->v[3], d = a->size;
    if (vc != 1) {
        for (int64_t c = 0; c < d; c++) {
            float t = 0.0f;
            for (int64_t j = 0; j < n; j++)
                t += p[j] * vb[j * vj + c * vc];
            acc[c] = t;
        }
        return;
    }
    int64_t c0 = 0;
    for (; c0 + 32 <= d; c0 += 32) {
        pa_av8 s0 = AV8_SPLAT(0.0f), s1 = s0, s2 = s0, s3 = s0, w;
        for (int64_t j = 0; j < n; j++) {
            const pa_av8 pj = AV8_SPLAT(p[j]);
            const float *vr = vb + j * vj + c0;
            AV8_LOAD(w, vr);
            s0 += pj * w;
            AV8_LOAD(w, vr + 8);
            s1 += pj * w;
            AV8_LOAD(w, vr + 16);
            s2 += pj * w;
            AV8_LOAD(w, vr + 24);
            s3 += pj * w;
        }
        AV8_STORE(acc + c0, s0);
        AV8_STORE(acc + c0 + 8, s1);
        AV8_STORE(acc + c0 + 16, s2);
        AV8_STORE(acc + c0 + 24, s3);
    }
    for (; c0 + 8 <= d; c0 += 8) {
        pa_av8 s0 = AV8_SPLAT(0.0f), w;
        for (int64_t j = 0; j < n; j++) {
            AV8_LOAD(w, vb + j * vj + c0);
            s0 += AV8_SPLAT(p[j]) * w;
        }
        AV8_STORE(acc + c0, s0);
    }
    for (; c0 < d; c0++) {
        float t = 0.0f;
        for (int64_t j = 0; j < n; j++)
            t += p[j] * vb[j * vj + c0];
        acc[c0] = t;
    }
}

/* y[0, n) *= a; y[0, n) += m[0, n): in blocks GCC -O2 vectorises (the
 * scores' scale and mask, as scalar loops a third of a 256-key block
 * path's time). */
PA_INLINE void scale_row(float *restrict y, float a, size_t n) {
    PA_MAP(y, n, j, y[j] * a);
}

PA_INLINE void add_row(float *restrict y, const float *restrict m, size_t n) {
    PA_MAP(y, n, j, y[j] + m[j]);
}

/* Keys query i sees: all, or with a causal offset those up to it. */
PA_INLINE int64_t att_seen(const pa_attention_t *a, int64_t i) {
    return a->causal >= 0 && a->causal + i + 1 < a->keys ? a->causal + i + 1 : a->keys;
}

PA_MULTIVERSION
static void pa_attention_pair(const attention_job_t *jb, int64_t pair, float *restrict s) {
    const pa_attention_t *a = jb->a;
    const int64_t b = pair / a->heads, h = pair % a->heads, d = a->size;
    float *restrict acc = s + a->keys;
    const float *qb = jb->q + b * a->q[0] + h * a->q[1];
    const float *kb = jb->k + b * a->k[0] + h * a->k[1];
    const float *vb = jb->v + b * a->v[0] + h * a->v[1];
    float *ob = jb->out + b * a->out[0] + h * a->out[1];
    for (int64_t i = 0; i < a->rows; i++) {
        const int64_t n = att_seen(a, i);
        /* the query row, contiguous, in the accumulator's place */
        const float *qi = qb + i * a->q[2];
        for (int64_t c = 0; c < d; c++)
            acc[c] = qi[c * a->q[3]];
        if (n == 0) {                   /* no keys: the sum of no rows */
            float *oz = ob + i * a->out[2];
            for (int64_t c = 0; c < d; c++)
                oz[c * a->out[3]] = 0.0f;
            continue;
        }
        score_row(a, acc, kb, s, n);
        const float scale = a->scale;
        for (int64_t j = 0; j < n; j++)
            s[j] *= scale;
        if (jb->mask) {
            const float *m = jb->mask + b * a->mask[0] + h * a->mask[1] + i * a->mask[2];
            const int64_t mj = a->mask[3];
            for (int64_t j = 0; j < n; j++)
                s[j] += m[j * mj];
        }
        _pa_softmax_row_inplace(s, (size_t)n);
        weigh_rows(a, s, vb, acc, n);
        float *oi = ob + i * a->out[2];
        for (int64_t c = 0; c < d; c++)
            oi[c * a->out[3]] = acc[c];
    }
}

/* 16 floats: one AVX-512 register in the x86-64-v4 clone, two AVX2
 * registers in the v3 one (the blocked path's tiles: each output's sum
 * takes the same terms in the same order at any width). */
typedef float pa_av16 __attribute__((vector_size(64)));

#define AV16_LOAD(dst, p) memcpy(&(dst), (p), sizeof(pa_av16))
#define AV16_STORE(p, src) memcpy((p), &(src), sizeof(pa_av16))
#define AV16_SPLAT(a) \
    ((pa_av16){(a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a), (a)})

/* S[r][j0, j0 + ATT_J) = qb[r] . kt[:, j0..] for the ATT_R rows of qb
 * (d floats each), kt d rows ldk floats apart: each key vector loaded once
 * for the block's rows. */
PA_INLINE void score_tile(const float *restrict qb, const float *restrict kt, int64_t d,
                          int64_t ldk, int64_t np, int64_t j0, float *restrict S) {
    pa_av16 a0l = AV16_SPLAT(0.0f), a0h = a0l, a1l = a0l, a1h = a0l, a2l = a0l, a2h = a0l,
            a3l = a0l, a3h = a0l, k0, k1;
    for (int64_t c = 0; c < d; c++) {
        AV16_LOAD(k0, kt + c * ldk + j0);
        AV16_LOAD(k1, kt + c * ldk + j0 + 16);
        pa_av16 q = AV16_SPLAT(qb[c]);
        a0l += q * k0, a0h += q * k1;
        q = AV16_SPLAT(qb[d + c]);
        a1l += q * k0, a1h += q * k1;
        q = AV16_SPLAT(qb[2 * d + c]);
        a2l += q * k0, a2h += q * k1;
        q = AV16_SPLAT(qb[3 * d + c]);
        a3l += q * k0, a3h += q * k1;
    }
    AV16_STORE(S + j0, a0l), AV16_STORE(S + j0 + 16, a0h);
    AV16_STORE(S + np + j0, a1l), AV16_STORE(S + np + j0 + 16, a1h);
    AV16_STORE(S + 2 * np + j0, a2l), AV16_STORE(S + 2 * np + j0 + 16, a2h);
    AV16_STORE(S + 3 * np + j0, a3l), AV16_STORE(S + 3 * np + j0 + 16, a3h);
}

/* o[r][0, ATT_W) = sum over j < n of S[r][j] * v row j, columns c0.. (V's
 * element stride 1). */
PA_INLINE void weigh_tile(const float *restrict S, int64_t np, const float *restrict vb,
                          int64_t vj, int64_t c0, int64_t n, float o[ATT_R][ATT_W]) {
    pa_av16 a0l = AV16_SPLAT(0.0f), a0h = a0l, a1l = a0l, a1h = a0l, a2l = a0l, a2h = a0l,
            a3l = a0l, a3h = a0l, v0, v1;
    for (int64_t j = 0; j < n; j++) {
        AV16_LOAD(v0, vb + j * vj + c0);
        AV16_LOAD(v1, vb + j * vj + c0 + 16);
        pa_av16 p = AV16_SPLAT(S[j]);
        a0l += p * v0, a0h += p * v1;
        p = AV16_SPLAT(S[np + j]);
        a1l += p * v0, a1h += p * v1;
        p = AV16_SPLAT(S[2 * np + j]);
        a2l += p * v0, a2h += p * v1;
        p = AV16_SPLAT(S[3 * np + j]);
        a3l += p * v0, a3h += p * v1;
    }
    AV16_STORE(o[0], a0l), AV16_STORE(o[0] + 16, a0h);
    AV16_STORE(o[1], a1l), AV16_STORE(o[1] + 16, a1h);
    AV16_STORE(o[2], a2l), AV16_STORE(o[2] + 16, a2h);
    AV16_STORE(o[3], a3l), AV16_STORE(o[3] + 16, a3h);
}

/* weigh_tile for 16 columns (a head size's remainder). */
PA_INLINE void weigh_tile16(const float *restrict S, int64_t np, const float *restrict vb,
                            int64_t vj, int64_t c0, int64_t n, float o[ATT_R][ATT_W]) {
    pa_av16 a0 = AV16_SPLAT(0.0f), a1 = a0, a2 = a0, a3 = a0, v0;
    for (int64_t j = 0; j < n; j++) {
        AV16_LOAD(v0, vb + j * vj + c0);
        a0 += AV16_SPLAT(S[j]) * v0;
        a1 += AV16_SPLAT(S[np + j]) * v0;
        a2 += AV16_SPLAT(S[2 * np + j]) * v0;
        a3 += AV16_SPLAT(S[3 * np + j]) * v0;
    }
    AV16_STORE(o[0], a0), AV16_STORE(o[1], a1), AV16_STORE(o[2], a2), AV16_STORE(o[3], a3);
}

/* The blocked path, for ATT_R query rows or more: K^T packed once per
 * pair into scratch (zero past the keys read, so a score tile needs no
 * tail), then per block of ATT_R rows (a last short block repeats its
 * last row, computed, not stored) the score tiles, the scale, mask and
 * softmax per row, and the weighted sum of V's rows in output tiles.  A
 * row's probabilities past the keys it sees are 0, so the tiles run to
 * the block's widest row; V is read only below it (never a row past the
 * live length). */
PA_INLINE void block_pair(const attention_job_t *jb, int64_t pair, float *restrict s) {
    const pa_attention_t *a = jb->a;
    const int64_t b = pair / a->heads, h = pair % a->heads, d = a->size, rows = a->rows;
    const float *qb = jb->q + b * a->q[0] + h * a->q[1];
    const float *kb = jb->k + b * a->k[0] + h * a->k[1];
    const float *vb = jb->v + b * a->v[0] + h * a->v[1];
    float *ob = jb->out + b * a->out[0] + h * a->out[1];
    const int64_t nall = att_seen(a, rows - 1), np = att_pad(nall);
    const int64_t ldk = np + ATT_SKEW;
    float *restrict kt = s, *restrict S = s + d * ldk, *restrict qr = S + ATT_R * np;
    const int64_t kj = a->k[2], kc = a->k[3];
    for (int64_t j = 0; j < nall; j++) {   /* a key row read where it lies */
        const float *restrict kr = kb + j * kj;
        for (int64_t c = 0; c < d; c++)
            kt[c * ldk + j] = kr[c * kc];
    }
    for (int64_t c = 0; c < d; c++)
        for (int64_t j = nall; j < np; j++)
            kt[c * ldk + j] = 0.0f;
    for (int64_t i0 = 0; i0 < rows; i0 += ATT_R) {
        for (int64_t r = 0; r < ATT_R; r++) {
            const int64_t ir = i0 + r < rows ? i0 + r : rows - 1;
            for (int64_t c = 0; c < d; c++)
                qr[r * d + c] = qb[ir * a->q[2] + c * a->q[3]];
        }
        const int64_t last = i0 + ATT_R - 1 < rows ? i0 + ATT_R - 1 : rows - 1;
        const int64_t nb = att_seen(a, last);
        for (int64_t j0 = 0; j0 < nb; j0 += ATT_J)
            score_tile(qr, kt, d, ldk, np, j0, S);
        for (int64_t r = 0; r < ATT_R; r++) {
            const int64_t ir = i0 + r < rows ? i0 + r : rows - 1, n = att_seen(a, ir);
            float *restrict srow = S + r * np;
            const float scale = a->scale;
            scale_row(srow, scale, (size_t)n);
            if (jb->mask) {
                const float *restrict m =
                    jb->mask + b * a->mask[0] + h * a->mask[1] + ir * a->mask[2];
                const int64_t mj = a->mask[3];
                if (mj == 1) {
                    add_row(srow, m, (size_t)n);
                } else {
                    for (int64_t j = 0; j < n; j++)
                        srow[j] += m[j * mj];
                }
            }
            if (n > 0)
                _pa_softmax_row_inplace(srow, (size_t)n);
            for (int64_t j = n; j < nb; j++)
                srow[j] = 0.0f;
        }
        for (int64_t c0 = 0; c0 < d;) {
            const int64_t w = d - c0 >= ATT_W ? ATT_W : d - c0 >= 16 ? 16 : d - c0;
            float o[ATT_R][ATT_W];
            if (w == ATT_W && a->v[3] == 1) {
                weigh_tile(S, np, vb, a->v[2], c0, nb, o);
            } else if (w == 16 && a->v[3] == 1) {
                weigh_tile16(S, np, vb, a->v[2], c0, nb, o);
            } else {
                for (int64_t r = 0; r < ATT_R; r++)
                    for (int64_t cc = 0; cc < w; cc++) {
                        float t = 0.0f;
                        for (int64_t j = 0; j < nb; j++)
                            t += S[r * np + j] * vb[j * a->v[2] + (c0 + cc) * a->v[3]];
                        o[r][cc] = t;
                    }
            }
            for (int64_t r = 0; r < ATT_R && i0 + r < rows; r++)
                for (int64_t cc = 0; cc < w; cc++)
                    ob[(i0 + r) * a->out[2] + (c0 + cc) * a->out[3]] = o[r][cc];
            c0 += w;
        }
    }
}

PA_MULTIVERSION
static void pa_attention_block_pair(const attention_job_t *jb, int64_t pair,
                                    float *restrict s) {
    block_pair(jb, pair, s);
}

#if PA_AVX512_BUILT
/* The same, its 16-float vectors as AVX-512 registers (the x86-64-v4
 * clone above splits them in two AVX2 registers: GCC prefers 256-bit
 * vectors there); the same operations in the same order (the same bits
 * where both contract to FMA). */
#if defined(__clang__)
#define PA_ATT_WIDE __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), \
                                   min_vector_width(512)))
#else
#define PA_ATT_WIDE \
    __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif
PA_ATT_WIDE
static void pa_attention_block_pair_avx512(const attention_job_t *jb, int64_t pair,
                                           float *restrict s) {
    block_pair(jb, pair, s);
}
#endif

static void attention_items(void *ctx, int64_t b, int64_t e) {
    const attention_job_t *jb = ctx;
    float *s = jb->scratch + (size_t)b * slot_floats(jb->a);
    for (int64_t p = b; p < e; p++) {
        if (jb->a->rows >= ATT_R) {
#if PA_AVX512_BUILT
            if (jb->wide) {
                pa_attention_block_pair_avx512(jb, p, s);
                continue;
            }
#endif
            pa_attention_block_pair(jb, p, s);
        } else
            pa_attention_pair(jb, p, s);
    }
}

static int attention_ok(const pa_attention_t *a) {
    const int64_t lim = (int64_t)1 << 40;
    if (!a || a->batch < 0 || a->heads < 0 || a->rows < 0 || a->keys < 0 || a->size < 0 ||
        a->causal < -1 || a->keys >= lim || a->size >= lim || a->rows >= lim)
        return 0;
    return a->batch == 0 || a->heads == 0 ||
           (a->batch < lim / a->heads && a->batch * a->heads < lim / (a->keys + a->size + 1));
}

size_t pa_attention_scratch_floats(const pa_attention_t *a) {
    if (!attention_ok(a))
        return 0;
    const size_t n = (size_t)(a->batch * a->heads) * slot_floats(a);
    return n ? n : 1;
}

pa_status_t pa_attention(const pa_attention_t *a, const float *q, const float *k,
                         const float *v, const float *mask, float *out, float *scratch,
                         pa_workers_t *workers) {
    return _pa_attention_isa(a, q, k, v, mask, out, scratch, workers, 1);
}

pa_status_t _pa_attention_isa(const pa_attention_t *a, const float *q, const float *k,
                              const float *v, const float *mask, float *out, float *scratch,
                              pa_workers_t *workers, int avx512) {
    if (!attention_ok(a))
        return PA_ERR_INVALID;
    const int64_t pairs = a->batch * a->heads;
    if (pairs == 0 || a->rows == 0)
        return PA_OK;
    if (!q || !k || !v || !out || !scratch)
        return PA_ERR_INVALID;
    attention_job_t jb = {a, q, k, v, mask, out, scratch, avx512 && _pa_avx512_usable()};
    const double work = (double)pairs * (double)a->rows * (double)a->keys * (double)a->size * 2;
    _pa_parallel(_pa_workers_for(workers, work), pairs, attention_items, &jb);
    return PA_OK;
}
