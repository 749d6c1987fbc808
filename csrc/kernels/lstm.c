/* kernels/lstm.c -- the time loop of a float32 ONNX LSTM with its default
 * gates (sigmoid, tanh, tanh; no peepholes, clip, input_forget), one
 * direction, as one call: a streaming model runs one step per inference,
 * and a sequence walked from Python paid a dozen NumPy calls per step --
 * more than the step's arithmetic.
 *
 * Per step t (walked backwards when reverse), per row i:
 *   g       = (x[t][i] @ W^T + h[i] @ R^T) + (Wb + Rb)   (each product summed in k order)
 *   i, o, f = logistic(g[0:3H]);  c~ = tanh(g[3H:4H])
 *   c[i]    = c[i] f + i c~                               (two products, one sum)
 *   h[i]    = tanh(c[i]) o;  y[t][i] = h[i]
 * The activations are onnxruntime's (rnn_helpers.cc uses MLAS's:
 * pa_ort_logistic / pa_ort_tanh); its GEMMs sum in another order, so the
 * gates agree within float rounding, not bit for bit.  The input product
 * is a row at a time, as the recurrent one: no projection of the whole
 * sequence is stored, so the op needs 4 hidden floats of workspace. */
#include "internal.h"

/* g += v @ m for one row: m [k][G] row-major, summed over k in order (four
 * rows of m per pass over g).  The loops over j run in fixed-trip blocks
 * of PA_VEC, which -O2 vectorises. */
PA_MULTIVERSION
static void row_product(const float *restrict v, const float *restrict m, int64_t k, int64_t G,
                        float *restrict g) {
    int64_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
        const float v0 = v[kk], v1 = v[kk + 1], v2 = v[kk + 2], v3 = v[kk + 3];
        const float *m0 = m + kk * G, *m1 = m0 + G, *m2 = m1 + G, *m3 = m2 + G;
        int64_t j = 0;
        for (; j + PA_VEC <= G; j += PA_VEC)
            for (int64_t t = 0; t < PA_VEC; t++)
                g[j + t] = g[j + t] + v0 * m0[j + t] + v1 * m1[j + t] + v2 * m2[j + t] +
                           v3 * m3[j + t];
        for (; j < G; j++)
            g[j] = g[j] + v0 * m0[j] + v1 * m1[j] + v2 * m2[j] + v3 * m3[j];
    }
    for (; kk < k; kk++) {
        const float vk = v[kk], *mk = m + kk * G;
        for (int64_t j = 0; j < G; j++)
            g[j] = g[j] + vk * mk[j];
    }
}

/* The gates of g (in place) and the state update of one row. */
static pa_status_t row_update(float *g, float *hi, float *ci, int64_t H) {
    pa_status_t st;
    if ((st = pa_ort_logistic(g, g, (size_t)(3 * H))) != PA_OK ||
        (st = pa_ort_tanh(g + 3 * H, g + 3 * H, (size_t)H)) != PA_OK)
        return st;
    const float *ig = g, *og = g + H, *fg = g + 2 * H, *cg = g + 3 * H;
    for (int64_t j = 0; j < H; j++) {
        float a = ci[j] * fg[j], b = ig[j] * cg[j];
        ci[j] = a + b;
    }
    if ((st = pa_ort_tanh(ci, hi, (size_t)H)) != PA_OK)
        return st;
    for (int64_t j = 0; j < H; j++)
        hi[j] = hi[j] * og[j];
    return PA_OK;
}

pa_status_t pa_lstm_run(const float *x, int64_t x_step, int64_t x_row, int64_t input,
                        const float *wt, const float *bias, const float *rt, int64_t n,
                        int64_t hidden, int64_t steps, int reverse, float *h, float *c, float *y,
                        int64_t y_step, int64_t y_row, float *g) {
    if (n < 0 || steps < 0 || input < 0 || hidden < 1 || hidden > 32768 || input > 32768 ||
        n > ((int64_t)1 << 24))
        return PA_ERR_INVALID;
    if (n == 0 || steps == 0)
        return PA_OK;
    if (!x || !wt || !rt || !h || !c || !g)
        return PA_ERR_INVALID;
    const int64_t H = hidden, G = 4 * hidden;
    pa_status_t st;
    for (int64_t s = 0; s < steps; s++) {
        const int64_t t = reverse ? steps - 1 - s : s;
        for (int64_t i = 0; i < n; i++) {
            float *hi = h + i * H, *ci = c + i * H;
            memset(g, 0, (size_t)G * sizeof *g);
            row_product(x + t * x_step + i * x_row, wt, input, G, g);
            row_product(hi, rt, H, G, g);
            if (bias)
                for (int64_t j = 0; j < G; j++)
                    g[j] = g[j] + bias[j];
            if ((st = row_update(g, hi, ci, H)) != PA_OK)
                return st;
            if (y)
                memcpy(y + t * y_step + i * y_row, hi, (size_t)H * sizeof *hi);
        }
    }
    return PA_OK;
}
