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
#include "internal.h"

typedef struct {
    const pa_attention_t *a;
    const float *q, *k, *v, *mask;
    float *out, *scratch;
} attention_job_t;

static size_t slot_floats(const pa_attention_t *a) {
    return (size_t)(a->keys + a->size);
}

/* sum over c < n of x[c] * y[c] in PA_VEC partial sums (vectorises). */
PA_INLINE float dot_row(const float *restrict x, const float *restrict y, int64_t n) {
    float s[PA_VEC] = {0};
    int64_t c0 = 0;
    for (; c0 + PA_VEC <= n; c0 += PA_VEC)
        for (int64_t j = 0; j < PA_VEC; j++)
            s[j] += x[c0 + j] * y[c0 + j];
    float t = 0.0f;
    for (int64_t j = 0; j < PA_VEC; j++)
        t += s[j];
    for (int64_t c = c0; c < n; c++)
        t += x[c] * y[c];
    return t;
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
        for (int64_t c = 0; c < d; c++) {
            const float qc = qrow[c];
            const float *restrict kt = kb + c * kc;
            for (int64_t j = 0; j < n; j++)
                s[j] += qc * kt[j];
        }
    } else {
        for (int64_t j = 0; j < n; j++) {
            float t = 0.0f;
            for (int64_t c = 0; c < d; c++)
                t += qrow[c] * kb[j * kj + c * kc];
            s[j] = t;
        }
    }
}

/* acc[0, size) = sum over j < n of p[j] * v row j. */
PA_INLINE void weigh_rows(const pa_attention_t *a, const float *restrict p,
                          const float *restrict vb, float *restrict acc, int64_t n) {
    const int64_t vj = a->v[2], vc = a->v[3], d = a->size;
    for (int64_t c = 0; c < d; c++)
        acc[c] = 0.0f;
    if (vc == 1) {
        for (int64_t j = 0; j < n; j++) {
            const float pj = p[j];
            const float *restrict vr = vb + j * vj;
            for (int64_t c = 0; c < d; c++)
                acc[c] += pj * vr[c];
        }
    } else {
        for (int64_t j = 0; j < n; j++)
            for (int64_t c = 0; c < d; c++)
                acc[c] += p[j] * vb[j * vj + c * vc];
    }
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
        int64_t n = a->keys;
        if (a->causal >= 0 && a->causal + i + 1 < n)
            n = a->causal + i + 1;
        /* the query row, contiguous, in the accumulator's place */
        const float *qi = qb + i * a->q[2];
        for (int64_t c = 0; c < d; c++)
            acc[c] = qi[c * a->q[3]];
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

static void attention_items(void *ctx, int64_t b, int64_t e) {
    const attention_job_t *jb = ctx;
    float *s = jb->scratch + (size_t)b * slot_floats(jb->a);
    for (int64_t p = b; p < e; p++)
        pa_attention_pair(jb, p, s);
}

static int attention_ok(const pa_attention_t *a) {
    if (!a || a->batch < 0 || a->heads < 0 || a->rows < 0 || a->causal < -1)
        return 0;
    if (a->batch == 0 || a->heads == 0 || a->rows == 0)
        return a->keys >= 0 && a->size >= 0;
    const int64_t lim = (int64_t)1 << 40;
    return a->keys >= 1 && a->size >= 1 && a->keys < lim && a->size < lim &&
           a->batch < lim / a->heads && a->batch * a->heads < lim / (a->keys + a->size);
}

size_t pa_attention_scratch_floats(const pa_attention_t *a) {
    if (!attention_ok(a))
        return 0;
    return (size_t)(a->batch * a->heads) * slot_floats(a);
}

pa_status_t pa_attention(const pa_attention_t *a, const float *q, const float *k,
                         const float *v, const float *mask, float *out, float *scratch,
                         pa_workers_t *workers) {
    if (!attention_ok(a))
        return PA_ERR_INVALID;
    const int64_t pairs = a->batch * a->heads;
    if (pairs == 0 || a->rows == 0)
        return PA_OK;
    if (!q || !k || !v || !out || !scratch)
        return PA_ERR_INVALID;
    attention_job_t jb = {a, q, k, v, mask, out, scratch};
    const double work = (double)pairs * (double)a->rows * (double)a->keys * (double)a->size * 2;
    _pa_parallel(_pa_workers_for(workers, work), pairs, attention_items, &jb);
    return PA_OK;
}
