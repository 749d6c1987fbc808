/* kernels/elementwise.c -- activations and fused bias + activation chains
 * in one pass over memory.
 *
 * NumPy spends one full pass per ufunc: a sigmoid is four (negate, exp,
 * add, reciprocal), x * sigmoid(x) five, a bias then ReLU6 three.  These
 * kernels read each value once and write it once, with the activation
 * computed in registers (the branch-free exp of internal.h, so the
 * loops vectorise).  The work is cut into blocks of PA_EW_BLOCK floats
 * that the worker pool shares out.
 */
#include "internal.h"

#define PA_EW_BLOCK 16384

static int act_ok(const pa_act_params_t *act) {
    return act && (unsigned)act->kind <= (unsigned)PA_ACT_GELU;
}

/* y[i] = act(x[i] + b); b = 0 for a plain activation.  Inline so each
 * clone of its callers vectorises it for its own ISA.  x and y are either
 * the same array or disjoint (callers split the two cases, so neither
 * loop needs a run-time overlap check, which -O2 would not vectorise). */
PA_INLINE void bias_act(const float *restrict x, float *restrict y, size_t n, float b,
                        const pa_act_params_t *act) {
    const float lo = act->alpha, hi = act->beta;
    switch (act->kind) {
    case PA_ACT_NONE:
        PA_MAP(y, n, i, x[i] + b);
        break;
    case PA_ACT_RELU:
        PA_MAP(y, n, i, _pa_act_relu(x[i] + b));
        break;
    case PA_ACT_CLIP:
        PA_MAP(y, n, i, _pa_clampf(x[i] + b, lo, hi));
        break;
    case PA_ACT_SIGMOID:
        PA_MAP(y, n, i, _pa_sigmoidf(x[i] + b));
        break;
    case PA_ACT_SILU:
        PA_MAP(y, n, i, _pa_act_silu(x[i] + b));
        break;
    case PA_ACT_HARDSWISH:
        PA_MAP(y, n, i, _pa_act_hardswish(x[i] + b));
        break;
    case PA_ACT_HARDSIGMOID:
        PA_MAP(y, n, i, _pa_act_hardsigmoid(x[i] + b, lo, hi));
        break;
    case PA_ACT_GELU:
        PA_MAP(y, n, i, _pa_act_gelu(x[i] + b));
        break;
    }
}

/* The same in place: v[i] = act(v[i] + b). */
PA_INLINE void bias_act_inplace(float *restrict v, size_t n, float b,
                                const pa_act_params_t *act) {
    if (b != 0.0f)
        PA_MAP(v, n, i, v[i] + b);
    _pa_act_block(v, n, act);
}

/* y[p, c] = act(x[p, c] + bias[c]) for rows of nc values (x == y or
 * disjoint): the bias, then the activation over the row while it is in L1. */
PA_INLINE void add_row(const float *restrict x, float *restrict y, size_t n,
                       const float *restrict b) {
    PA_MAP(y, n, i, x[i] + b[i]);
}
PA_INLINE void add_row_ip(float *restrict y, size_t n, const float *restrict b) {
    PA_MAP(y, n, i, y[i] + b[i]);
}

PA_INLINE void bias_act_rows(const float *x, float *y, size_t np, size_t nc,
                             const float *bias, const pa_act_params_t *act) {
    for (size_t p = 0; p < np; p++) {
        if (x == y)
            add_row_ip(y + p * nc, nc, bias);
        else
            add_row(x + p * nc, y + p * nc, nc, bias);
        _pa_act_block(y + p * nc, nc, act);
    }
}

PA_MULTIVERSION
void _pa_act_inplace(float *v, size_t n, const pa_act_params_t *act) {
    _pa_act_block(v, n, act);
}

PA_MULTIVERSION
void _pa_bias_act_plane(const float *x, float *y, size_t n, float b,
                        const pa_act_params_t *act) {
    if (x == y)
        bias_act_inplace(y, n, b, act);
    else
        bias_act(x, y, n, b, act);
}

PA_MULTIVERSION
void _pa_bias_act_rows(const float *x, float *y, size_t np, size_t nc, const float *b,
                       const pa_act_params_t *act) {
    bias_act_rows(x, y, np, nc, b, act);
}

/* -- the public calls: blocks shared by the pool ---------------------------- */

typedef struct {
    const pa_act_params_t *act;
    const float *x, *bias;
    float *y;
    int64_t n, c, spatial;     /* pa_bias_act's shape; pa_act: n values */
} ew_job_t;

static void act_blocks(void *ctx, int64_t b, int64_t e) {
    const ew_job_t *j = ctx;
    int64_t lo = b * PA_EW_BLOCK, hi = e * PA_EW_BLOCK < j->n ? e * PA_EW_BLOCK : j->n;
    _pa_bias_act_plane(j->x + lo, j->y + lo, (size_t)(hi - lo), 0.0f, j->act);
}

pa_status_t pa_act(const pa_act_params_t *act, const float *x, float *y, size_t n,
                   pa_workers_t *workers) {
    if (!act_ok(act) || (n && (!x || !y)) || n > ((size_t)1 << 50))
        return PA_ERR_INVALID;
    ew_job_t j = {act, x, NULL, y, (int64_t)n, 0, 0};
    int64_t blocks = ((int64_t)n + PA_EW_BLOCK - 1) / PA_EW_BLOCK;
    _pa_parallel(_pa_workers_for(workers, (double)n * 4), blocks, act_blocks, &j);
    return PA_OK;
}

typedef struct {
    const float *a, *b;
    float *y;
    int64_t n;
} add_job_t;

static void add_blocks(void *ctx, int64_t b, int64_t e) {
    const add_job_t *j = ctx;
    int64_t lo = b * PA_EW_BLOCK, hi = e * PA_EW_BLOCK < j->n ? e * PA_EW_BLOCK : j->n;
    const float *x0 = j->a + lo, *x1 = j->b + lo;
    float *y = j->y + lo;
    PA_MAP(y, (size_t)(hi - lo), i, x0[i] + x1[i]);
}

/* The residual Add of a detector's blocks: between two native kernels it
 * would otherwise return to the interpreter (and run on one thread). */
pa_status_t pa_add(const float *a, const float *b, float *y, size_t n, pa_workers_t *workers) {
    if ((n && (!a || !b || !y)) || n > ((size_t)1 << 50))
        return PA_ERR_INVALID;
    add_job_t j = {a, b, y, (int64_t)n};
    int64_t blocks = ((int64_t)n + PA_EW_BLOCK - 1) / PA_EW_BLOCK;
    _pa_parallel(_pa_workers_for(workers, (double)n), blocks, add_blocks, &j);
    return PA_OK;
}

/* NCHW: one plane (image, channel) per item. */
static void bias_planes(void *ctx, int64_t b, int64_t e) {
    const ew_job_t *j = ctx;
    for (int64_t i = b; i < e; i++) {
        size_t off = (size_t)i * (size_t)j->spatial;
        _pa_bias_act_plane(j->x + off, j->y + off, (size_t)j->spatial,
                           j->bias ? j->bias[i % j->c] : 0.0f, j->act);
    }
}

/* NHWC: rows of c channels, in blocks of rows. */
static void bias_pixels(void *ctx, int64_t b, int64_t e) {
    const ew_job_t *j = ctx;
    int64_t rows = j->n * j->spatial;
    int64_t per = PA_EW_BLOCK / j->c > 0 ? PA_EW_BLOCK / j->c : 1;
    int64_t lo = b * per, hi = e * per < rows ? e * per : rows;
    size_t off = (size_t)lo * (size_t)j->c;
    if (j->bias)
        _pa_bias_act_rows(j->x + off, j->y + off, (size_t)(hi - lo), (size_t)j->c, j->bias,
                          j->act);
    else
        _pa_bias_act_plane(j->x + off, j->y + off, (size_t)(hi - lo) * (size_t)j->c, 0.0f,
                           j->act);
}

/* The checks and the split shared by the per-channel passes: `e`'s
 * activation and sizes checked (n * c * spatial values, at most 2^50),
 * then `planes` over the n * c planes (NCHW) or `pixels` over blocks of
 * PA_EW_BLOCK / c pixels (NHWC), with `ctx`. */
static pa_status_t channel_pass(pa_layout_t layout, const ew_job_t *e, pa_workers_t *workers,
                                _pa_task_fn planes, _pa_task_fn pixels, void *ctx) {
    int64_t n = e->n, c = e->c, spatial = e->spatial, total;
    if (!act_ok(e->act) || n < 0 || c < 1 || spatial < 0 ||
        (layout != PA_LAYOUT_NCHW && layout != PA_LAYOUT_NHWC))
        return PA_ERR_INVALID;
    if (__builtin_mul_overflow(n, c, &total) || __builtin_mul_overflow(total, spatial, &total) ||
        total > ((int64_t)1 << 50))
        return PA_ERR_INVALID;
    if (total == 0)     /* no values: not n * c empty planes to walk */
        return PA_OK;
    pa_workers_t *w = _pa_workers_for(workers, (double)total * 4);
    if (layout == PA_LAYOUT_NCHW) {
        _pa_parallel(w, n * c, planes, ctx);
    } else {
        int64_t per = PA_EW_BLOCK / c > 0 ? PA_EW_BLOCK / c : 1;
        _pa_parallel(w, (n * spatial + per - 1) / per, pixels, ctx);
    }
    return PA_OK;
}

pa_status_t pa_bias_act(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                        const float *x, const float *bias, float *y,
                        const pa_act_params_t *act, pa_workers_t *workers) {
    if (!x || !y)
        return PA_ERR_INVALID;
    ew_job_t j = {act, x, bias, y, n, c, spatial};
    return channel_pass(layout, &j, workers, bias_planes, bias_pixels, &j);
}

/* -- per-channel scale and shift, then an activation ---------------------- */

/* y = act(x * s + b) over n values of one channel (x == y or disjoint). */
PA_INLINE void affine_span(const float *restrict x, float *restrict y, size_t n, float s,
                           float b) {
    PA_MAP(y, n, i, x[i] * s + b);
}
PA_INLINE void affine_span_ip(float *restrict y, size_t n, float s, float b) {
    PA_MAP(y, n, i, y[i] * s + b);
}
/* y[p, c] = x[p, c] * s[c] + b[c] over one row of nc channels. */
PA_INLINE void affine_row(const float *restrict x, float *restrict y, size_t n,
                          const float *restrict s, const float *restrict b) {
    PA_MAP(y, n, i, x[i] * s[i] + b[i]);
}
PA_INLINE void affine_row_ip(float *restrict y, size_t n, const float *restrict s,
                             const float *restrict b) {
    PA_MAP(y, n, i, y[i] * s[i] + b[i]);
}

PA_MULTIVERSION
void _pa_affine_act_plane(const float *x, float *y, size_t n, float s, float b,
                          const pa_act_params_t *act) {
    if (x == y)
        affine_span_ip(y, n, s, b);
    else
        affine_span(x, y, n, s, b);
    _pa_act_block(y, n, act);
}

PA_MULTIVERSION
void _pa_affine_act_rows(const float *x, float *y, size_t np, size_t nc, const float *s,
                         const float *b, const pa_act_params_t *act) {
    for (size_t p = 0; p < np; p++) {
        if (x == y)
            affine_row_ip(y + p * nc, nc, s, b);
        else
            affine_row(x + p * nc, y + p * nc, nc, s, b);
        _pa_act_block(y + p * nc, nc, act);
    }
}

typedef struct {
    ew_job_t e;
    const float *scale;
} affine_job_t;

static void affine_planes(void *ctx, int64_t b, int64_t e) {
    const affine_job_t *a = ctx;
    const ew_job_t *j = &a->e;
    for (int64_t i = b; i < e; i++) {
        size_t off = (size_t)i * (size_t)j->spatial;
        _pa_affine_act_plane(j->x + off, j->y + off, (size_t)j->spatial, a->scale[i % j->c],
                             j->bias[i % j->c], j->act);
    }
}

static void affine_pixels(void *ctx, int64_t b, int64_t e) {
    const affine_job_t *a = ctx;
    const ew_job_t *j = &a->e;
    int64_t rows = j->n * j->spatial;
    int64_t per = PA_EW_BLOCK / j->c > 0 ? PA_EW_BLOCK / j->c : 1;
    int64_t lo = b * per, hi = e * per < rows ? e * per : rows;
    size_t off = (size_t)lo * (size_t)j->c;
    _pa_affine_act_rows(j->x + off, j->y + off, (size_t)(hi - lo), (size_t)j->c, a->scale,
                        j->bias, j->act);
}

pa_status_t pa_scale_bias_act(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                              const float *x, const float *scale, const float *bias, float *y,
                              const pa_act_params_t *act, pa_workers_t *workers) {
    if (!x || !y || !scale || !bias)
        return PA_ERR_INVALID;
    affine_job_t j = {{act, x, bias, y, n, c, spatial}, scale};
    return channel_pass(layout, &j.e, workers, affine_planes, affine_pixels, &j);
}

/* -- PRelu: a slope per channel ------------------------------------------- */

PA_INLINE float prelu1(float x, float s) { return x < 0.0f ? x * s : x; }

/* y = prelu(x) with one slope, or a slope per element of the row; x == y
 * or disjoint.  Helpers with restrict parameters: GCC trusts those, not
 * restrict locals declared inside a loop. */
PA_INLINE void prelu_span(const float *restrict x, float *restrict y, size_t n, float s) {
    PA_MAP(y, n, k, prelu1(x[k], s));
}
PA_INLINE void prelu_span_ip(float *restrict y, size_t n, float s) {
    PA_MAP(y, n, k, prelu1(y[k], s));
}
PA_INLINE void prelu_row(const float *restrict x, float *restrict y, size_t n,
                         const float *restrict s) {
    PA_MAP(y, n, k, prelu1(x[k], s[k]));
}
PA_INLINE void prelu_row_ip(float *restrict y, size_t n, const float *restrict s) {
    PA_MAP(y, n, k, prelu1(y[k], s[k]));
}

PA_MULTIVERSION
static void prelu_planes(void *ctx, int64_t b, int64_t e) {
    const ew_job_t *j = ctx;
    const size_t n = (size_t)j->spatial;
    for (int64_t i = b; i < e; i++) {
        size_t off = (size_t)i * n;
        const float s = j->bias[i % j->c];
        if (j->x == j->y)
            prelu_span_ip(j->y + off, n, s);
        else
            prelu_span(j->x + off, j->y + off, n, s);
    }
}

PA_MULTIVERSION
static void prelu_pixels(void *ctx, int64_t b, int64_t e) {
    const ew_job_t *j = ctx;
    const size_t nc = (size_t)j->c;
    for (int64_t p = b; p < e; p++) {
        size_t off = (size_t)p * nc;
        if (j->x == j->y)
            prelu_row_ip(j->y + off, nc, j->bias);
        else
            prelu_row(j->x + off, j->y + off, nc, j->bias);
    }
}

pa_status_t pa_prelu(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                     const float *x, const float *slope, float *y, pa_workers_t *workers) {
    int64_t total;
    if (!x || !y || !slope || n < 0 || c < 1 || spatial < 0 ||
        (layout != PA_LAYOUT_NCHW && layout != PA_LAYOUT_NHWC) ||
        __builtin_mul_overflow(n, c, &total) || __builtin_mul_overflow(total, spatial, &total) ||
        total > ((int64_t)1 << 50))
        return PA_ERR_INVALID;
    if (total == 0)     /* no values: not n * c empty planes to walk */
        return PA_OK;
    pa_act_params_t none = {PA_ACT_NONE, 0.0f, 0.0f};
    ew_job_t j = {&none, x, slope, y, n, c, spatial};
    pa_workers_t *w = _pa_workers_for(workers, (double)total * 2);
    if (layout == PA_LAYOUT_NCHW)
        _pa_parallel(w, n * c, prelu_planes, &j);
    else
        _pa_parallel(w, n * spatial, prelu_pixels, &j);
    return PA_OK;
}
