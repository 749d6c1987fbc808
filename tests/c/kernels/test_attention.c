/* test_attention.c -- the fused attention (kernels/attention.c) against a
 * naive double reference (no Python): random batch, heads, query rows,
 * keys and head sizes; keys as rows, transposed and in a permuted layout;
 * V and the output transposed; masks broadcast over batch and heads or
 * absent; a causal offset; a live length below the keys held (the rows
 * past it hold NaN and must not be read); one and three threads giving
 * the same bits; bad arguments refused.  Run plain and under ASan + UBSan. */
#include "kernels/internal.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;

static int64_t rnd(int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)(pa_rand(&seed) % (unsigned long long)(hi - lo + 1));
}

static float frand(void) {
    return (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
}

/* n floats, random in [-scale, scale] */
static float *fbuf(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

/* Strides of a (d0, d1, d2, d3) array stored with its axes in `order`
 * (order[0] outermost). */
static void strides_of(const int64_t dims[4], const int order[4], int64_t st[4]) {
    int64_t step = 1;
    for (int i = 3; i >= 0; i--) {
        st[order[i]] = step;
        step *= dims[order[i]];
    }
}

static const int ORDERS[3][4] = {{0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}};

/* out[b, h, i, c] of the reference, in double */
static double reference(const pa_attention_t *a, const float *q, const float *k,
                        const float *v, const float *mask, int64_t b, int64_t h, int64_t i,
                        int64_t c) {
    int64_t n = a->keys;
    if (a->causal >= 0 && a->causal + i + 1 < n)
        n = a->causal + i + 1;
    double s[512], top = -INFINITY, sum = 0, out = 0;
    for (int64_t j = 0; j < n; j++) {
        double t = 0;
        for (int64_t e = 0; e < a->size; e++)
            t += (double)q[b * a->q[0] + h * a->q[1] + i * a->q[2] + e * a->q[3]] *
                 (double)k[b * a->k[0] + h * a->k[1] + j * a->k[2] + e * a->k[3]];
        t *= (double)a->scale;
        if (mask)
            t += mask[b * a->mask[0] + h * a->mask[1] + i * a->mask[2] + j * a->mask[3]];
        s[j] = t;
        top = t > top ? t : top;
    }
    for (int64_t j = 0; j < n; j++)
        sum += exp(s[j] - top);
    for (int64_t j = 0; j < n; j++)
        out += exp(s[j] - top) / sum *
               (double)v[b * a->v[0] + h * a->v[1] + j * a->v[2] + c * a->v[3]];
    return out;
}

static void test_attention_random(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    double worst = 0;
    for (int it = 0; it < 300; it++) {
        pa_attention_t a;
        memset(&a, 0, sizeof a);
        a.batch = rnd(1, 3);
        a.heads = rnd(1, 4);
        a.rows = rnd(1, it % 3 ? 9 : 40);
        a.size = rnd(1, it % 4 ? 70 : 8);
        const int64_t held = rnd(1, it % 5 ? 60 : 300);     /* keys stored */
        a.keys = rnd(1, held);                              /* keys read   */
        a.causal = it % 4 == 1 ? rnd(0, held) : -1;
        a.scale = (float)(0.05 + 0.3 * (frand() + 1));
        const int64_t qd[4] = {a.batch, a.heads, a.rows, a.size};
        const int64_t kd[4] = {a.batch, a.heads, held, a.size};
        const int64_t od[4] = {a.batch, a.heads, a.rows, a.size};
        strides_of(qd, ORDERS[rnd(0, 2)], a.q);
        strides_of(kd, ORDERS[rnd(0, 2)], a.k);
        strides_of(kd, ORDERS[rnd(0, 2)], a.v);
        strides_of(od, ORDERS[rnd(0, 2)], a.out);
        size_t nq = (size_t)(a.batch * a.heads * a.rows * a.size);
        size_t nk = (size_t)(a.batch * a.heads * held * a.size);
        float *q = fbuf(nq, 2), *k = fbuf(nk, 2), *v = fbuf(nk, 1);
        /* the rows past the live length: NaN, so a read of one shows */
        for (int64_t b = 0; b < a.batch; b++)
            for (int64_t h = 0; h < a.heads; h++)
                for (int64_t j = a.keys; j < held; j++)
                    for (int64_t c = 0; c < a.size; c++) {
                        k[b * a.k[0] + h * a.k[1] + j * a.k[2] + c * a.k[3]] = NAN;
                        v[b * a.v[0] + h * a.v[1] + j * a.v[2] + c * a.v[3]] = NAN;
                    }
        float *mask = NULL;
        int kind = (int)rnd(0, 2);      /* none, (rows, keys), (batch, 1, 1, keys) */
        if (kind == 1) {
            mask = fbuf((size_t)(a.rows * held), 3);
            a.mask[2] = held;
            a.mask[3] = 1;
        } else if (kind == 2) {
            mask = fbuf((size_t)(a.batch * held), 3);
            a.mask[0] = held;
            a.mask[3] = 1;
            mask[rnd(0, a.batch * held - 1)] = -1e30f;      /* a masked key */
        }
        size_t ns = pa_attention_scratch_floats(&a);
        CHECK(ns > 0);
        float *out = fbuf(nq, 1), *out3 = fbuf(nq, 1), *scratch = fbuf(ns, 1);
        CHECK_EQ(pa_attention(&a, q, k, v, mask, out, scratch, NULL), PA_OK);
        CHECK_EQ(pa_attention(&a, q, k, v, mask, out3, scratch, pool), PA_OK);
        CHECK(memcmp(out, out3, nq * sizeof *out) == 0);
        /* the blocked path's AVX-512 registers or not: the same sums in
         * the same order (the same bits where both contract to FMA, as
         * GCC's clones; the clang sanitizer build's differ by rounding:
         * each within the reference check's 1e-5 below) */
        CHECK_EQ(_pa_attention_isa(&a, q, k, v, mask, out3, scratch, NULL, 0), PA_OK);
        for (size_t e = 0; e < nq; e++)
            CHECK(fabsf(out[e] - out3[e]) <= 2e-5f + 2e-5f * fabsf(out[e]));
        for (int64_t b = 0; b < a.batch; b++)
            for (int64_t h = 0; h < a.heads; h++)
                for (int64_t i = 0; i < a.rows; i++)
                    for (int64_t c = 0; c < a.size; c++) {
                        double want = reference(&a, q, k, v, mask, b, h, i, c);
                        float got = out[b * a.out[0] + h * a.out[1] + i * a.out[2] +
                                        c * a.out[3]];
                        double err = fabs(want - got) / (1e-5 + 1e-5 * fabs(want));
                        CHECK(isfinite(got));
                        if (err > worst)
                            worst = err;
                    }
        free(q), free(k), free(v), free(mask), free(out), free(out3), free(scratch);
    }
    CHECK(worst <= 1.0);
    pa_workers_destroy(pool);
}

static void test_attention_refuses(void) {
    pa_attention_t a;
    memset(&a, 0, sizeof a);
    a.batch = a.heads = a.rows = a.keys = a.size = 1;
    a.causal = -1;
    a.scale = 1;
    float x[4] = {1, 2, 3, 4}, y[4], s[8];
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_OK);
    CHECK(fabsf(y[0] - 1.0f) < 1e-6f);      /* one key: its value */
    CHECK_EQ(pa_attention(NULL, x, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_attention(&a, NULL, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, NULL, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_attention_scratch_floats(NULL), 0u);
    a.causal = -2;
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
    a.causal = -1;
    a.keys = 0;     /* no keys: the sum of no rows */
    y[0] = 7;
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_OK);
    CHECK(y[0] == 0.0f);
    a.keys = -1;
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_attention_scratch_floats(&a), 0u);
    a.keys = 1;
    a.size = -1;
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
    a.size = 1;
    a.rows = 0;     /* nothing to do: no pointer read */
    CHECK_EQ(pa_attention(&a, NULL, NULL, NULL, NULL, NULL, NULL, NULL), PA_OK);
    a.rows = 1;
    a.batch = (int64_t)1 << 40;
    CHECK_EQ(pa_attention(&a, x, x, x, NULL, y, s, NULL), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_attention_random);
    RUN(test_attention_refuses);
    return pa_test_report();
}
