/* kernels/calls.c -- a list of native kernel calls run in one call.
 *
 * A patched stage runs its ops band by band: hundreds of small kernel
 * calls, each of which would otherwise cost an interpreter round trip
 * (argument conversion, dispatch) comparable to its own work.  The caller
 * lays the calls out once as pa_call_t records (pointers into its planned
 * buffers) and runs them all here; a call is exactly the public kernel it
 * names, so a list gives bit for bit what the calls one by one give.
 * The Executor batches runs of whole-op calls the same way, the 8-bit
 * kernels of a quantized model among them (convolution, Add / Mul,
 * lookups, (de)quantization, average pools).
 */
#include "internal.h"

#include <string.h>

/* 1 if count blocks of `bytes`, `stride` bytes apart, span at most
 * INT64_MAX bytes (no object is larger, and k * stride cannot overflow). */
static int span_ok(int64_t count, int64_t bytes, int64_t stride) {
    int64_t span;
    return stride != INT64_MIN &&
           !__builtin_mul_overflow(count - 1, stride < 0 ? -stride : stride, &span) &&
           !__builtin_add_overflow(span, bytes, &span);
}

/* A block copy: count blocks of `bytes`, ss / ds bytes apart. */
typedef struct {
    const char *src;
    char *dst;
    int64_t bytes, ss, ds;
} copy_job_t;

/* blocks [k0, k1) of N bytes (a constant: the copies are inlined), in
 * order, each read whole before it is written, as memmove (a block may
 * overlap its source). */
#define COPY_FIXED(N)                                                     \
    do {                                                                  \
        for (int64_t k = k0; k < k1; k++) {                               \
            char t_[N];                                                   \
            memcpy(t_, j->src + k * j->ss, (N));                          \
            memcpy(j->dst + k * j->ds, t_, (N));                          \
        }                                                                 \
        return;                                                           \
    } while (0)

static void copy_range(const copy_job_t *j, int64_t k0, int64_t k1) {
    /* blocks of a few floats (a channel slice of NHWC pixels, a strided
     * Slice): a copy of constant size each, inlined, not a libc call */
    switch (j->bytes) {
    case 4:
        COPY_FIXED(4);
    case 8:
        COPY_FIXED(8);
    case 12:
        COPY_FIXED(12);
    case 16:
        COPY_FIXED(16);
    case 24:
        COPY_FIXED(24);
    case 32:
        COPY_FIXED(32);
    case 64:
        COPY_FIXED(64);
    default:
        for (int64_t k = k0; k < k1; k++)
            memmove(j->dst + k * j->ds, j->src + k * j->ss, (size_t)j->bytes);
    }
}

/* Blocks per work item of a shared copy (about 16 KiB each). */
#define COPY_ITEM_BYTES 16384

/* Items of `per` blocks of a copy of `count`. */
typedef struct {
    const copy_job_t *j;
    int64_t per, count;
} copy_items_t;

static void copy_items(void *ctx, int64_t b, int64_t e) {
    const copy_items_t *it = ctx;
    int64_t k1 = e * it->per < it->count ? e * it->per : it->count;
    copy_range(it->j, b * it->per, k1);
}

/* The lowest byte and one past the highest of count blocks. */
static void copy_span(const char *p, int64_t count, int64_t bytes, int64_t stride,
                      uintptr_t *lo, uintptr_t *hi) {
    uintptr_t a = (uintptr_t)p, last = a + (uintptr_t)((count - 1) * stride);
    *lo = stride < 0 ? last : a;
    *hi = (stride < 0 ? a : last) + (uintptr_t)bytes;
}

static pa_status_t copy_blocks(const pa_call_t *s, pa_workers_t *workers) {
    const int64_t count = s->i[0], bytes = s->i[1];
    if (count < 0 || bytes < 0 || (count && bytes && (!s->a || !s->y)))
        return PA_ERR_INVALID;
    if (count && bytes && (!span_ok(count, bytes, s->i[2]) || !span_ok(count, bytes, s->i[3])))
        return PA_ERR_INVALID;
    if (!count || !bytes)
        return PA_OK;
    copy_job_t j = {s->a, s->y, bytes, s->i[2], s->i[3]};
    /* threads share a large copy whose source and destination are apart
     * (blocks moved within one buffer go one after the other, in order) */
    uintptr_t slo, shi, dlo, dhi;
    copy_span(j.src, count, bytes, j.ss, &slo, &shi);
    copy_span(j.dst, count, bytes, j.ds, &dlo, &dhi);
    pa_workers_t *w = _pa_workers_for(workers, (double)count * (double)bytes / 4.0);
    if (w && (shi <= dlo || dhi <= slo)) {
        const int64_t per = bytes >= COPY_ITEM_BYTES ? 1 : COPY_ITEM_BYTES / bytes;
        copy_items_t it = {&j, per, count};
        _pa_parallel(w, (count + per - 1) / per, copy_items, &it);
        return PA_OK;
    }
    copy_range(&j, 0, count);
    return PA_OK;
}

static pa_status_t qaffine(const pa_call_t *s) {
    const pa_qaffine_t *p = s->params;
    if (!p)
        return PA_ERR_INVALID;
    if (s->kind == PA_CALL_QUANTIZE)
        return pa_quantize_linear(p->type, s->a, s->y, s->i[0], p->scale, p->zero_point,
                                  p->y_min, p->y_max);
    return pa_dequantize_linear(p->type, s->a, s->y, s->i[0], p->scale, p->zero_point);
}

static pa_status_t run_call(const pa_call_t *s, pa_workers_t *workers) {
    switch (s->kind) {
    case PA_CALL_CONV2D:
        return pa_conv2d_run(s->params, s->w, s->a, s->y, workers);
    case PA_CALL_DECONV2D:
        return pa_deconv2d_run(s->params, s->w, s->a, s->y, workers);
    case PA_CALL_QREQUANT:
        return pa_qrequant(s->params, (const int32_t *)s->w, s->a, s->y, s->i[0]);
    case PA_CALL_CONV2D_RESIDUAL:
        return pa_conv2d_run_residual(s->params, s->w, s->a, s->b, s->i[0], s->y, workers);
    case PA_CALL_MAXPOOL:
        return pa_maxpool2d(s->params, s->a, s->y, workers);
    case PA_CALL_AVGPOOL:
        return pa_avgpool2d(s->params, s->a, s->y, workers);
    case PA_CALL_AVGPOOL_ORDERED:
        if (s->i[0] < 0 || s->i[0] > PA_POOL_ORDER_LANES)
            return PA_ERR_INVALID;
        return pa_avgpool2d_ordered(s->params, (pa_pool_order_t)s->i[0], s->a, s->y, workers);
    case PA_CALL_QAVGPOOL:
        return pa_qavgpool(s->params, s->a, s->y);
    case PA_CALL_PRELU:
        if (s->i[0] != PA_LAYOUT_NCHW && s->i[0] != PA_LAYOUT_NHWC)
            return PA_ERR_INVALID;
        return pa_prelu((pa_layout_t)s->i[0], s->i[1], s->i[2], s->i[3], s->a, s->w, s->y,
                        workers);
    case PA_CALL_ACT:
        if (s->i[0] < 0)
            return PA_ERR_INVALID;
        return pa_act(s->params, s->a, s->y, (size_t)s->i[0], workers);
    case PA_CALL_COPY:
        return copy_blocks(s, workers);
    case PA_CALL_QCONV2D:
        if (s->i[0] < 0)
            return PA_ERR_INVALID;
        return pa_qconv2d_run(s->params, s->w, s->a, s->y, s->s, (size_t)s->i[0], workers);
    case PA_CALL_QBINARY:
        return pa_qbinary(s->params, s->a, s->b, s->y);
    case PA_CALL_QLOOKUP:
        return pa_qlookup((const uint8_t *)s->w, s->a, s->y, s->i[0], s->i[1], s->i[2],
                          s->i[3]);
    case PA_CALL_QUANTIZE:
    case PA_CALL_DEQUANTIZE:
        return qaffine(s);
    case PA_CALL_ADD:
        if (s->i[0] < 0)
            return PA_ERR_INVALID;
        return pa_add(s->a, s->b, s->y, (size_t)s->i[0], workers);
    case PA_CALL_LAYER_NORM:
        if (!s->params)
            return PA_ERR_INVALID;
        return pa_layer_norm_rows(s->a, s->w, s->b, s->y, s->i[0], s->i[1],
                                  *(const float *)s->params, workers);
    case PA_CALL_TRANSPOSE_PLANES:
        return pa_transpose_planes(s->a, s->y, s->i[0], s->i[1], s->i[2], s->i[3] != 0,
                                   workers);
    }
    return PA_ERR_INVALID;
}

pa_status_t pa_calls_run(const pa_call_t *calls, size_t n, pa_workers_t *workers,
                         size_t *failed) {
    if (failed)
        *failed = 0;
    if (!calls && n)
        return PA_ERR_INVALID;
    for (size_t k = 0; k < n; k++) {
        pa_status_t st = run_call(&calls[k], workers);
        if (st != PA_OK) {
            if (failed)
                *failed = k;
            return st;
        }
    }
    if (failed)
        *failed = n;
    return PA_OK;
}
