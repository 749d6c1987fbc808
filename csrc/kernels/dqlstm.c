/* kernels/dqlstm.c -- one time step of onnxruntime's DynamicQuantizeLSTM
 * (com.microsoft) with its default gates, as one call: the Python time
 * loop (runtime/kernels/recurrent_quant.py) spent more on a dozen small
 * calls per step than on the arithmetic.
 *
 * The arithmetic, in onnxruntime's order (uni_directional_lstm.cc,
 * rnn_helpers.cc) and the Python cell's, bit for bit:
 *   hq, hs, hz  = DynamicQuantizeLinear(h_src)              (pa_dynamic_quantize)
 *   acc         = (hq - hz) @ (R - r_zp)                    (pa_qrows_run, int32)
 *   g           = xw + float(acc) * (r_scale * hs)          (float32, this order)
 *   g          += Wb + Rb                                   (if bias)
 *   i, o, f     = logistic(g[:, 0:3H]);  c~ = tanh(g[:, 3H:4H])   (MLAS's: ort_approx.c)
 *   c_out       = c * f + i * c~                            (two products, one sum)
 *   h_out       = tanh(c_out) * o
 * No FMA contraction here (-std=c11): each product is rounded as
 * onnxruntime's separate multiplies and adds round it.
 * pa_dqlstm_run walks a direction's steps in C too (no sequence_lens):
 * at onnxruntime's few microseconds a step, a call from Python per step
 * cost as much as the step. */
#include "internal.h"

/* out[j] = EXPR for j < n, in blocks of PA_VEC through a local buffer: a
 * fixed trip the compiler vectorises at -O2, whatever aliases out (c_out
 * may be c, h_out h_src); the same operations lane by lane, the same bits. */
#define DQ_BLOCKS(n, out, EXPR)                                                 \
    do {                                                                        \
        int64_t i_ = 0;                                                         \
        for (; i_ + PA_VEC <= (n); i_ += PA_VEC) {                              \
            float b_[PA_VEC];                                                   \
            for (int64_t t_ = 0; t_ < PA_VEC; t_++) {                           \
                int64_t j = i_ + t_;                                            \
                b_[t_] = (EXPR);                                                \
            }                                                                   \
            memcpy((out) + i_, b_, sizeof b_);                                  \
        }                                                                       \
        for (; i_ < (n); i_++) {                                                \
            int64_t j = i_;                                                     \
            (out)[j] = (EXPR);                                                  \
        }                                                                       \
    } while (0)

/* Everything after the integer product: the gates and the state. */
PA_MULTIVERSION
static pa_status_t gates(const float *c, const float *xw, const float *bias,
                         const float *r_scale, float hs, int64_t n, int64_t H, float *g,
                         float *c_out, float *h_out, const int32_t *acc, float *mult) {
    const int64_t G = 4 * H;
    pa_status_t st;
    DQ_BLOCKS(G, mult, r_scale[j] * hs);
    for (int64_t i = 0; i < n; i++) {
        float *gi = g + i * G;
        const float *xi = xw + i * G;
        const int32_t *ai = acc + i * G;
        if (bias)                               /* (x + acc m) + b: onnxruntime's order */
            DQ_BLOCKS(G, gi, (xi[j] + (float)ai[j] * mult[j]) + bias[j]);
        else
            DQ_BLOCKS(G, gi, xi[j] + (float)ai[j] * mult[j]);
        if ((st = pa_ort_logistic(gi, gi, (size_t)(3 * H))) != PA_OK ||
            (st = pa_ort_tanh(gi + 3 * H, gi + 3 * H, (size_t)H)) != PA_OK)
            return st;
        const float *ig = gi, *og = gi + H, *fg = gi + 2 * H, *cg = gi + 3 * H;
        const float *ci = c + i * H;
        float *co = c_out + i * H, *ho = h_out + i * H;
        DQ_BLOCKS(H, co, ci[j] * fg[j] + ig[j] * cg[j]);
        if ((st = pa_ort_tanh(co, ho, (size_t)H)) != PA_OK)
            return st;
        DQ_BLOCKS(H, ho, ho[j] * og[j]);
    }
    return PA_OK;
}

pa_status_t pa_dqlstm_step(const float *h_src, const float *c, const float *xw,
                           const float *bias, const void *r_packed, const float *r_scale,
                           int64_t n, int64_t hidden,
                           float *g, float *c_out, float *h_out, uint8_t *hq, int32_t *acc,
                           float *mult) {
    if (n < 0 || hidden < 1 || hidden > 32768 || n > ((int64_t)1 << 24))
        return PA_ERR_INVALID;
    if (n == 0)
        return PA_OK;
    if (!h_src || !c || !xw || !r_packed || !r_scale || !g || !c_out || !h_out || !hq || !acc ||
        !mult)
        return PA_ERR_INVALID;
    const int64_t H = hidden;
    float hs;
    uint8_t hz;
    pa_status_t st = pa_dynamic_quantize(h_src, (size_t)(n * H), hq, &hs, &hz);
    if (st != PA_OK)
        return st;
    st = pa_qrows_run(r_packed, hq, n, hz, acc);
    if (st != PA_OK)
        return st;
    return gates(c, xw, bias, r_scale, hs, n, hidden, g, c_out, h_out, acc, mult);
}

pa_status_t pa_dqlstm_run(const float *xw, int64_t steps, int reverse, const float *bias,
                          const void *r_packed, const float *r_scale, int64_t n, int64_t hidden,
                          float *h, float *c, float *y, int64_t y_step, int64_t y_row, float *g,
                          uint8_t *hq, int32_t *acc, float *mult) {
    if (steps < 0 || n < 0 || hidden < 1 || hidden > 32768 || n > ((int64_t)1 << 24) ||
        (y != NULL && y_row < hidden && n > 1))
        return PA_ERR_INVALID;
    if (steps == 0 || n == 0)
        return PA_OK;
    if (xw == NULL || h == NULL)
        return PA_ERR_INVALID;      /* (the step checks the rest) */
    const int64_t G = 4 * hidden;
    for (int64_t s = 0; s < steps; s++) {
        int64_t t = reverse ? steps - 1 - s : s;
        pa_status_t st = pa_dqlstm_step(h, c, xw + t * n * G, bias, r_packed, r_scale, n,
                                        hidden, g, c, h, hq, acc, mult);
        if (st != PA_OK)
            return st;
        if (y != NULL)
            for (int64_t i = 0; i < n; i++)
                memcpy(y + t * y_step + i * y_row, h + i * hidden, (size_t)hidden * sizeof *h);
    }
    return PA_OK;
}
