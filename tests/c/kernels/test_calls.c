/* test_calls.c -- pa_calls_run: a list of kernel calls run in one call
 * gives the bits of the same calls one by one (a small NHWC block: a
 * pointwise conv, a depthwise conv, a conv with a residual, PRelu, an
 * activation, max and average pooling, and strided block copies between
 * them), stops at the first failing call with its index and leaves the
 * calls after it unrun, and refuses bad lists; the 8-bit kernels' calls
 * likewise. */
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x243F6A8885A308D3ULL;

static float frand(void) {
    return (float)((double)(pa_rand(&seed) >> 11) / 9007199254740992.0 * 2 - 1);
}

static float *fbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

enum { H = 6, W = 5, C = 8, HO = 3, WO = 3, NT = 8 };

/* the geometry of the block: x (H x W x C) -> pw (C) -> dw 3x3 -> res conv
 * (+ x) -> prelu -> clip -> max pool 2x2 s2 -> avg pool 3x3 s1 */
typedef struct {
    pa_conv2d_t pw, dw;
    pa_pool2d_t maxp, avgp;
    pa_act_params_t clip;
    float *pw_w, *dw_w, *slope;
} block_t;

static float *pack(const pa_conv2d_t *c) {
    size_t n = pa_conv2d_packed_size(c);
    int64_t cin = c->c_in / c->groups;
    float *w = fbuf((size_t)(c->c_out * c->kh * c->kw * cin)), *b = fbuf((size_t)c->c_out);
    float *p = malloc(n * sizeof *p);
    CHECK_EQ(pa_conv2d_pack(c, w, b, p, n), PA_OK);
    free(w);
    free(b);
    return p;
}

static void block_init(block_t *b) {
    pa_act_params_t none = {PA_ACT_NONE, 0, 0};
    b->pw = (pa_conv2d_t){PA_LAYOUT_NHWC, 1, C, H, W, C, H, W, 1, 1, 1, 1, 1, 1, 0, 0, 1, none};
    b->dw = (pa_conv2d_t){PA_LAYOUT_NHWC, 1, C, H, W, C, H, W, 3, 3, 1, 1, 1, 1, 1, 1, C, none};
    b->dw.act = (pa_act_params_t){PA_ACT_RELU, 0, 0};
    b->maxp = (pa_pool2d_t){PA_LAYOUT_NHWC, 1, C, H, W, HO, WO, 2, 2, 2, 2, 0, 0, 0, 1, 0};
    b->avgp = (pa_pool2d_t){PA_LAYOUT_NHWC, 1, C, HO, WO, HO, WO, 3, 3, 1, 1, 1, 1, 1, 1, 0};
    b->clip = (pa_act_params_t){PA_ACT_CLIP, -0.25f, 0.5f};
    b->pw_w = pack(&b->pw);
    b->dw_w = pack(&b->dw);
    b->slope = fbuf(C);
}

static void block_free(block_t *b) {
    free(b->pw_w);
    free(b->dw_w);
    free(b->slope);
}

/* t[0] = x; t[1] = pw(x); t[2] = dw(t1); t[3] = pw(t2) + x; t[4] = prelu(t3);
 * t[4] = clip(t4) (in place); t[5] = maxpool(t4); t[6] = avgpool(t5);
 * t[7] rows 1..3 of t[6]'s columns 1..2 as blocks (a strided copy) */
static size_t block_calls(const block_t *b, float **t, pa_call_t *s) {
    size_t n = 0;
    s[n++] = (pa_call_t){PA_CALL_CONV2D, &b->pw, b->pw_w, t[0], NULL, t[1], {0}, NULL};
    s[n++] = (pa_call_t){PA_CALL_CONV2D, &b->dw, b->dw_w, t[1], NULL, t[2], {0}, NULL};
    s[n++] = (pa_call_t){PA_CALL_CONV2D_RESIDUAL, &b->pw, b->pw_w, t[2], t[0], t[3], {C}, NULL};
    s[n++] = (pa_call_t){PA_CALL_PRELU, NULL, b->slope, t[3], NULL, t[4],
                         {PA_LAYOUT_NHWC, 1, C, H * W}, NULL};
    s[n++] = (pa_call_t){PA_CALL_ACT, &b->clip, NULL, t[4], NULL, t[4], {H * W * C}, NULL};
    s[n++] = (pa_call_t){PA_CALL_MAXPOOL, &b->maxp, NULL, t[4], NULL, t[5], {0}, NULL};
    s[n++] = (pa_call_t){PA_CALL_AVGPOOL, &b->avgp, NULL, t[5], NULL, t[6], {0}, NULL};
    /* HO rows of 2 pixels (columns 1..2) of C floats: src stride one row */
    s[n++] = (pa_call_t){PA_CALL_COPY, NULL, NULL, t[6] + C, NULL, t[7],
                         {HO, 2 * C * (int64_t)sizeof(float), WO * C * (int64_t)sizeof(float),
                          2 * C * (int64_t)sizeof(float)}, NULL};
    return n;
}

static const size_t sizes[NT] = {H * W * C, H * W * C, H * W * C, H * W * C,
                                 H * W * C, HO * WO * C, HO * WO * C, HO * 2 * C};

static void alloc_tensors(float **t) {
    for (int k = 0; k < NT; k++) {
        t[k] = malloc(sizes[k] * sizeof(float));
        memset(t[k], 0, sizes[k] * sizeof(float));
    }
}

static void one_by_one(const block_t *b, float **t, pa_workers_t *w) {
    CHECK_EQ(pa_conv2d_run(&b->pw, b->pw_w, t[0], t[1], w), PA_OK);
    CHECK_EQ(pa_conv2d_run(&b->dw, b->dw_w, t[1], t[2], w), PA_OK);
    CHECK_EQ(pa_conv2d_run_residual(&b->pw, b->pw_w, t[2], t[0], C, t[3], w), PA_OK);
    CHECK_EQ(pa_prelu(PA_LAYOUT_NHWC, 1, C, H * W, t[3], b->slope, t[4], w), PA_OK);
    CHECK_EQ(pa_act(&b->clip, t[4], t[4], H * W * C, w), PA_OK);
    CHECK_EQ(pa_maxpool2d(&b->maxp, t[4], t[5], w), PA_OK);
    CHECK_EQ(pa_avgpool2d(&b->avgp, t[5], t[6], w), PA_OK);
    for (int r = 0; r < HO; r++)
        memcpy(t[7] + r * 2 * C, t[6] + (r * WO + 1) * C, 2 * C * sizeof(float));
}

static void test_calls_equal_one_by_one(void) {
    pa_status_t st;
    pa_workers_t *pool = pa_workers_create(3, &st);
    for (int threads = 0; threads < 2; threads++) {
        block_t b;
        block_init(&b);
        float *ref[NT], *got[NT];
        alloc_tensors(ref);
        alloc_tensors(got);
        for (size_t i = 0; i < sizes[0]; i++)
            ref[0][i] = got[0][i] = frand();
        pa_workers_t *w = threads ? pool : NULL;
        one_by_one(&b, ref, w);
        pa_call_t calls[16];
        size_t n = block_calls(&b, got, calls), failed = 99;
        CHECK_EQ(pa_calls_run(calls, n, w, &failed), PA_OK);
        CHECK_EQ(failed, n);
        for (int k = 1; k < NT; k++)
            CHECK(memcmp(ref[k], got[k], sizes[k] * sizeof(float)) == 0);
        for (int k = 0; k < NT; k++) {
            free(ref[k]);
            free(got[k]);
        }
        block_free(&b);
    }
    pa_workers_destroy(pool);
}

static void test_calls_stop_at_the_first_failure(void) {
    block_t b;
    block_init(&b);
    float *t[NT];
    alloc_tensors(t);
    pa_call_t calls[16];
    size_t n = block_calls(&b, t, calls), failed = 99;
    /* call 3 (PRelu) gets a NULL input: calls 0..2 run, 4.. do not */
    calls[3].a = NULL;
    for (size_t i = 0; i < sizes[4]; i++)
        t[4][i] = 7.0f;
    CHECK_EQ(pa_calls_run(calls, n, NULL, &failed), PA_ERR_INVALID);
    CHECK_EQ(failed, 3);
    int untouched = 1;
    for (size_t i = 0; i < sizes[4]; i++)
        untouched &= t[4][i] == 7.0f;
    CHECK(untouched);
    /* an unknown kind, a bad PRelu layout, negative sizes */
    calls[3].a = t[3];
    pa_call_t bad = calls[0];
    bad.kind = (pa_call_kind_t)99;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, &failed), PA_ERR_INVALID);
    CHECK_EQ(failed, 0);
    bad = calls[3];
    bad.i[0] = 7;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad = calls[4];
    bad.i[0] = -1;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad = calls[7];
    bad.i[1] = -4;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad.i[1] = 4;
    bad.a = NULL;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad.i[0] = 0;      /* no blocks: nothing to read */
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_OK);
    CHECK_EQ(pa_calls_run(NULL, 1, NULL, &failed), PA_ERR_INVALID);
    CHECK_EQ(pa_calls_run(NULL, 0, NULL, &failed), PA_OK);
    CHECK_EQ(failed, 0);
    for (int k = 0; k < NT; k++)
        free(t[k]);
    block_free(&b);
}

static void test_copy_overlapping_blocks(void) {
    /* a move of kept rows down within one buffer (as memmove) */
    float buf[24], ref[24];
    for (int i = 0; i < 24; i++)
        buf[i] = ref[i] = (float)i;
    memmove(ref, ref + 4, 16 * sizeof(float));
    pa_call_t s = {PA_CALL_COPY, NULL, NULL, buf + 4, NULL, buf, {1, 16 * sizeof(float), 0, 0}, NULL};
    CHECK_EQ(pa_calls_run(&s, 1, NULL, NULL), PA_OK);
    CHECK(memcmp(buf, ref, sizeof buf) == 0);
}

/* Blocks of a few floats (the fixed-size copies: 4 .. 64 bytes, and
 * sizes between them on the general path), strided on either side, some
 * with negative strides, and one overlapping move down a buffer: the
 * bytes of memmove block by block. */
static void test_copy_small_blocks(void) {
    enum { NB = 37, MAXB = 72 };
    static const int64_t bsizes[] = {4, 8, 12, 16, 20, 24, 32, 36, 48, 64, 72};
    static char src[NB * 2 * MAXB], dst[NB * 3 * MAXB], ref[NB * 3 * MAXB];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)(i * 7 + 3);
    for (size_t q = 0; q < sizeof bsizes / sizeof bsizes[0]; q++) {
        const int64_t b = bsizes[q];
        for (int back = 0; back < 2; back++) {
            const int64_t ss = back ? -2 * b : 2 * b, ds = 3 * b;
            const char *s0 = back ? src + (NB - 1) * 2 * b : src;
            memset(dst, 0x5a, sizeof dst), memset(ref, 0x5a, sizeof ref);
            for (int64_t k = 0; k < NB; k++)
                memmove(ref + k * ds, s0 + k * ss, (size_t)b);
            pa_call_t c = {PA_CALL_COPY, NULL, NULL, (void *)s0, NULL, dst, {NB, b, ss, ds}, NULL};
            CHECK_EQ(pa_calls_run(&c, 1, NULL, NULL), PA_OK);
            CHECK(memcmp(dst, ref, sizeof dst) == 0);
        }
        /* each block moved down by half its size within one buffer */
        for (size_t i = 0; i < sizeof dst; i++)
            dst[i] = ref[i] = (char)(i * 5 + 1);
        for (int64_t k = 0; k < NB; k++)
            memmove(ref + k * b, ref + k * b + b / 2, (size_t)b);
        pa_call_t m = {PA_CALL_COPY, NULL, NULL, dst + b / 2, NULL, dst, {NB, b, b, b}, NULL};
        CHECK_EQ(pa_calls_run(&m, 1, NULL, NULL), PA_OK);
        CHECK(memcmp(dst, ref, sizeof dst) == 0);
    }
}

/* Copies large enough for threads to share (three workers): blocks of
 * 12 bytes and of 5000, either stride negative, and a move down within
 * one buffer (source and destination overlap: block by block, in order);
 * the bytes of memmove block by block. */
static void test_copy_shared_by_threads(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    enum { BYTES = 1 << 21 };
    char *src = malloc(BYTES), *dst = malloc(2 * BYTES), *ref = malloc(2 * BYTES);
    for (int i = 0; i < BYTES; i++)
        src[i] = (char)(i * 13 + 7);
    static const int64_t geo[][4] = {   /* count, bytes, src stride, dst stride */
        {80000, 12, 24, 12}, {80000, 12, -24, 24}, {200, 5000, 10000, -5008}, {100, 5000, 5000, 9000}};
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; g++) {
        const int64_t n = geo[g][0], b = geo[g][1], ss = geo[g][2], ds = geo[g][3];
        const char *s0 = ss < 0 ? src + (n - 1) * -ss : src;
        char *d0 = ds < 0 ? dst + (n - 1) * -ds : dst;
        char *r0 = ds < 0 ? ref + (n - 1) * -ds : ref;
        memset(dst, 1, 2 * BYTES), memset(ref, 1, 2 * BYTES);
        for (int64_t k = 0; k < n; k++)
            memmove(r0 + k * ds, s0 + k * ss, (size_t)b);
        pa_call_t c = {PA_CALL_COPY, NULL, NULL, (void *)s0, NULL, d0, {n, b, ss, ds}, NULL};
        CHECK_EQ(pa_calls_run(&c, 1, pool, NULL), PA_OK);
        CHECK(memcmp(dst, ref, 2 * BYTES) == 0);
    }
    /* 150000 blocks of 12 bytes each moved 6 bytes down within dst */
    for (int i = 0; i < 2 * BYTES; i++)
        dst[i] = ref[i] = (char)(i * 3 + 1);
    for (int64_t k = 0; k < 150000; k++)
        memmove(ref + k * 12, ref + k * 12 + 6, 12);
    pa_call_t m = {PA_CALL_COPY, NULL, NULL, dst + 6, NULL, dst, {150000, 12, 12, 12}, NULL};
    CHECK_EQ(pa_calls_run(&m, 1, pool, NULL), PA_OK);
    CHECK(memcmp(dst, ref, 2 * BYTES) == 0);
    free(src), free(dst), free(ref);
    pa_workers_destroy(pool);
}

/* A copy whose blocks would span more than INT64_MAX bytes (k * stride
 * overflowed, and the first step already left any buffer): refused. */
static void test_calls_copy_span_overflow(void) {
    char a[16] = {0}, y[16] = {0};
    pa_call_t c = {PA_CALL_COPY, NULL, NULL, a, NULL, y, {3, 4, INT64_MAX, 0}, NULL};
    size_t failed = 9;
    CHECK(pa_calls_run(&c, 1, NULL, &failed) == PA_ERR_INVALID && failed == 0);
    c.i[2] = 0, c.i[3] = INT64_MIN;
    CHECK(pa_calls_run(&c, 1, NULL, &failed) == PA_ERR_INVALID);
    c.i[3] = (INT64_MAX - 4) / 2 + 1;   /* 2 strides + 4 bytes: one past INT64_MAX */
    CHECK(pa_calls_run(&c, 1, NULL, &failed) == PA_ERR_INVALID);
    c.i[0] = 1, c.i[3] = INT64_MAX;     /* one block: no stride is taken */
    CHECK(pa_calls_run(&c, 1, NULL, &failed) == PA_OK && failed == 1);
}

/* The 8-bit kernels as calls: quantize -> depthwise qconv (NCHW, with a
 * workspace) -> QLinearAdd of that and the quantized input -> a lookup ->
 * dequantize, as a list and one by one: the same bits; a negative
 * workspace size and a quantize call without parameters are refused. */
static void test_quantized_calls_equal_one_by_one(void) {
    enum { QC = 20, QH = 7, QW = 9, QN = QC * QH * QW };
    pa_qconv2d_t q;
    memset(&q, 0, sizeof q);
    q.conv = (pa_conv2d_t){.layout = PA_LAYOUT_NCHW, .n = 1, .c_in = QC, .h = QH, .w = QW,
                           .c_out = QC, .h_out = QH, .w_out = QW, .kh = 3, .kw = 3, .sh = 1,
                           .sw = 1, .dh = 1, .dw = 1, .pad_top = 1, .pad_left = 1,
                           .groups = QC};
    q.x_type = q.w_type = q.y_type = PA_Q_U8;
    q.x_zp = 120, q.y_zp = 128, q.y_lo = 0, q.y_hi = 255;
    size_t psize = pa_qconv2d_packed_size(&q), ssize = pa_qconv2d_scratch_size(&q);
    CHECK(psize > 0 && ssize > 0 && ssize != (size_t)-1);
    uint8_t w[QC * 9], table[256];
    float scale[QC];
    int32_t bias[QC];
    for (int i = 0; i < QC * 9; i++) w[i] = (uint8_t)(pa_rand(&seed) >> 56);
    for (int i = 0; i < QC; i++) scale[i] = 0.002f + 0.0001f * (float)i, bias[i] = 50 * i - 400;
    for (int i = 0; i < 256; i++) table[i] = (uint8_t)(255 - i / 2);
    void *packed = aligned_alloc(64, (psize + 63) / 64 * 64);
    CHECK(pa_qconv2d_pack(&q, w, NULL, bias, scale, packed, psize) == PA_OK);
    pa_qbinary_t add = {.op = PA_QBINARY_ADD, .type = PA_Q_U8, .a_scale = 0.02f,
                        .b_scale = 0.01f, .y_scale = 0.03f, .a_zero_point = 128,
                        .b_zero_point = 120, .y_zero_point = 100, .y_min = 0, .y_max = 255,
                        .outer = 1, .middle = 1, .inner = QN, .a_outer = 0, .a_middle = 0,
                        .a_inner = 1, .b_outer = 0, .b_middle = 0, .b_inner = 1};
    pa_qaffine_t qa = {PA_Q_U8, 0.01f, 120, 0, 255}, dq = {PA_Q_U8, 0.05f, 7, 0, 0};
    float *x = fbuf(QN), *out[2];
    uint8_t *t[2][4];
    void *ws[2];
    for (int r = 0; r < 2; r++) {
        out[r] = fbuf(QN);
        ws[r] = malloc(ssize);
        for (int k = 0; k < 4; k++)
            t[r][k] = malloc(QN);
    }
    /* one by one */
    CHECK(pa_quantize_linear(PA_Q_U8, x, t[0][0], QN, qa.scale, qa.zero_point, 0, 255) == PA_OK);
    CHECK(pa_qconv2d_run(&q, packed, t[0][0], t[0][1], ws[0], ssize, NULL) == PA_OK);
    CHECK(pa_qbinary(&add, t[0][1], t[0][0], t[0][2]) == PA_OK);
    CHECK(pa_qlookup(table, t[0][2], t[0][3], 1, QN, 0, 0) == PA_OK);
    CHECK(pa_dequantize_linear(PA_Q_U8, t[0][3], out[0], QN, dq.scale, dq.zero_point) == PA_OK);
    /* as a list */
    pa_call_t calls[5] = {
        {PA_CALL_QUANTIZE, &qa, NULL, x, NULL, t[1][0], {QN}, NULL},
        {PA_CALL_QCONV2D, &q, (const float *)packed, t[1][0], NULL, t[1][1],
         {(int64_t)ssize}, ws[1]},
        {PA_CALL_QBINARY, &add, NULL, t[1][1], t[1][0], t[1][2], {0}, NULL},
        {PA_CALL_QLOOKUP, NULL, (const float *)(const void *)table, t[1][2], NULL, t[1][3],
         {1, QN, 0, 0}, NULL},
        {PA_CALL_DEQUANTIZE, &dq, NULL, t[1][3], NULL, out[1], {QN}, NULL}};
    size_t failed = 99;
    CHECK(pa_calls_run(calls, 5, NULL, &failed) == PA_OK && failed == 5);
    for (int k = 0; k < 4; k++)
        CHECK(memcmp(t[0][k], t[1][k], QN) == 0);
    CHECK(memcmp(out[0], out[1], QN * sizeof(float)) == 0);
    /* refused */
    calls[1].i[0] = -1;
    CHECK(pa_calls_run(calls, 5, NULL, &failed) == PA_ERR_INVALID && failed == 1);
    calls[1].i[0] = (int64_t)ssize;
    calls[0].params = NULL;
    CHECK(pa_calls_run(calls, 5, NULL, &failed) == PA_ERR_INVALID && failed == 0);
    for (int r = 0; r < 2; r++) {
        free(out[r]), free(ws[r]);
        for (int k = 0; k < 4; k++)
            free(t[r][k]);
    }
    free(x), free(packed);
}

/* PA_CALL_ADD (pa_add): y = a + b, each sum the float32 addition
 * (volatile: computed here one by one, not by the vectorised loop), on one
 * and on three threads (blocks split across them), in place on a and on
 * b, sizes around the 16384-float blocks; NULL pointers and a negative
 * size are refused, an empty add runs. */
static void test_calls_add(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    static const int64_t counts[] = {1, 7, 16383, 16384, 16385, 200001};
    for (int s = 0; s < 6; s++) {
        int64_t n = counts[s];
        float *a = fbuf((size_t)n), *b = fbuf((size_t)n), *want = fbuf((size_t)n);
        float *y = fbuf((size_t)n), *y3 = fbuf((size_t)n), *ip = fbuf((size_t)n);
        for (int64_t i = 0; i < n; i++) {
            volatile float t = a[i];
            t += b[i];
            want[i] = t;
        }
        pa_call_t c = {PA_CALL_ADD, NULL, NULL, a, b, y, {n, 0, 0, 0}, NULL};
        CHECK_EQ(pa_calls_run(&c, 1, NULL, NULL), PA_OK);
        CHECK(memcmp(y, want, (size_t)n * sizeof *y) == 0);
        c.y = y3;
        CHECK_EQ(pa_calls_run(&c, 1, pool, NULL), PA_OK);
        CHECK(memcmp(y3, want, (size_t)n * sizeof *y) == 0);
        memcpy(ip, a, (size_t)n * sizeof *ip);          /* y = a */
        CHECK_EQ(pa_add(ip, b, ip, (size_t)n, pool), PA_OK);
        CHECK(memcmp(ip, want, (size_t)n * sizeof *y) == 0);
        memcpy(ip, b, (size_t)n * sizeof *ip);          /* y = b */
        CHECK_EQ(pa_add(a, ip, ip, (size_t)n, NULL), PA_OK);
        CHECK(memcmp(ip, want, (size_t)n * sizeof *y) == 0);
        free(a), free(b), free(want), free(y), free(y3), free(ip);
    }
    float v = 1.0f;
    pa_call_t bad = {PA_CALL_ADD, NULL, NULL, &v, NULL, &v, {1, 0, 0, 0}, NULL};
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad.b = &v, bad.i[0] = -1;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    CHECK_EQ(pa_add(NULL, NULL, NULL, 0, pool), PA_OK);
    CHECK_EQ(pa_add(&v, NULL, &v, 1, pool), PA_ERR_INVALID);
    pa_workers_destroy(pool);
}

/* PA_CALL_LAYER_NORM: the call gives pa_layer_norm_rows's bits (with
 * and without beta, one and three threads, in place); no epsilon
 * (params NULL), no gamma, a negative epsilon are refused. */
static void test_calls_layer_norm(void) {
    pa_workers_t *pool = pa_workers_create(3, NULL);
    CHECK(pool != NULL);
    static const int64_t shapes[][2] = {{1, 256}, {3, 7}, {16, 256}, {2, 1}, {5, 1000}};
    const float eps = 1e-5f;
    for (int s = 0; s < 5; s++) {
        int64_t rows = shapes[s][0], n = shapes[s][1];
        size_t total = (size_t)(rows * n);
        float *x = fbuf(total), *g = fbuf((size_t)n), *b = fbuf((size_t)n);
        float *want = fbuf(total), *y = fbuf(total), *ip = fbuf(total);
        for (int with_beta = 0; with_beta < 2; with_beta++) {
            const float *beta = with_beta ? b : NULL;
            CHECK_EQ(pa_layer_norm_rows(x, g, beta, want, rows, n, eps, NULL), PA_OK);
            pa_call_t c = {PA_CALL_LAYER_NORM, &eps, g, x, beta, y, {rows, n, 0, 0}, NULL};
            CHECK_EQ(pa_calls_run(&c, 1, s % 2 ? pool : NULL, NULL), PA_OK);
            CHECK(memcmp(y, want, total * sizeof *y) == 0);
            memcpy(ip, x, total * sizeof *ip);
            c.a = c.y = ip;
            CHECK_EQ(pa_calls_run(&c, 1, pool, NULL), PA_OK);
            CHECK(memcmp(ip, want, total * sizeof *y) == 0);
        }
        free(x), free(g), free(b), free(want), free(y), free(ip);
    }
    float v = 1.0f, neg = -1.0f;
    pa_call_t bad = {PA_CALL_LAYER_NORM, NULL, &v, &v, NULL, &v, {1, 1, 0, 0}, NULL};
    size_t failed = 9;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, &failed), PA_ERR_INVALID);
    CHECK_EQ(failed, 0u);
    bad.params = &eps, bad.w = NULL;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad.w = &v, bad.params = &neg;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_ERR_INVALID);
    bad.params = &eps;
    CHECK_EQ(pa_calls_run(&bad, 1, NULL, NULL), PA_OK);
    pa_workers_destroy(pool);
}

int main(void) {
    RUN(test_calls_equal_one_by_one);
    RUN(test_calls_stop_at_the_first_failure);
    RUN(test_copy_overlapping_blocks);
    RUN(test_copy_small_blocks);
    RUN(test_copy_shared_by_threads);
    RUN(test_calls_copy_span_overflow);
    RUN(test_quantized_calls_equal_one_by_one);
    RUN(test_calls_add);
    RUN(test_calls_layer_norm);
    return pa_test_report();
}
