/* kernels_elementwise.c -- activations and fused bias + activation chains
 * in one pass over memory.
 *
 * NumPy spends one full pass per ufunc: a sigmoid is four (negate, exp,
 * add, reciprocal), x * sigmoid(x) five, a bias then ReLU6 three.  These
 * kernels read each value once and write it once, with the activation
 * computed in registers (the branch-free exp of kernels_internal.h, so the
 * loops vectorise).  The work is cut into blocks of PA_EW_BLOCK floats
 * that the worker pool shares out.
 */
#include "kernels_internal.h"

#define PA_EW_BLOCK 16384

static int act_ok(const pa_act_params_t *act) {
    return act && (unsigned)act->kind <= (unsigned)PA_ACT_HARDSIGMOID;
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
PA_INLINE void bias_act_rows(const float *x, float *y, size_t np, size_t nc,
                             const float *restrict bias, const pa_act_params_t *act) {
    for (size_t p = 0; p < np; p++) {
        float *restrict yr = y + p * nc;
        if (x == y) {
            PA_MAP(yr, nc, i, yr[i] + bias[i]);
        } else {
            const float *restrict xr = x + p * nc;
            PA_MAP(yr, nc, i, xr[i] + bias[i]);
        }
        _pa_act_block(yr, nc, act);
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

pa_status_t pa_bias_act(pa_layout_t layout, int64_t n, int64_t c, int64_t spatial,
                        const float *x, const float *bias, float *y,
                        const pa_act_params_t *act, pa_workers_t *workers) {
    if (!act_ok(act) || !x || !y || n < 0 || c < 1 || spatial < 0 ||
        (layout != PA_LAYOUT_NCHW && layout != PA_LAYOUT_NHWC))
        return PA_ERR_INVALID;
    int64_t total;
    if (__builtin_mul_overflow(n, c, &total) || __builtin_mul_overflow(total, spatial, &total) ||
        total > ((int64_t)1 << 50))
        return PA_ERR_INVALID;
    ew_job_t j = {act, x, bias, y, n, c, spatial};
    pa_workers_t *w = _pa_workers_for(workers, (double)total * 4);
    if (layout == PA_LAYOUT_NCHW) {
        _pa_parallel(w, n * c, bias_planes, &j);
    } else {
        int64_t per = PA_EW_BLOCK / c > 0 ? PA_EW_BLOCK / c : 1;
        _pa_parallel(w, (n * spatial + per - 1) / per, bias_pixels, &j);
    }
    return PA_OK;
}
