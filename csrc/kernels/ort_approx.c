/* kernels/ort_approx.c -- the logistic and hyperbolic tangent functions as
 * onnxruntime computes them on x86-64 with FMA3 (MLAS's LogisticKernelFma3
 * and TanhKernelFma3, onnxruntime/core/mlas/lib/logistic.cpp and tanh.cpp:
 * Eigen's rational approximations, the polynomials in Horner form with
 * fused multiply-adds, one division).  A recurrent layer that quantizes
 * its state every step (DynamicQuantizeLSTM) needs the same bits as
 * onnxruntime there: an ulp of difference in h can move one of its 8-bit
 * values, and the difference then grows step by step.
 *
 * fmaf is exact on every target: the x86-64-v3 / v4 clones compile it to
 * the instruction, the baseline calls the C library's (correctly rounded)
 * fmaf.  NaN passes through as in the assembly (its max / min return the
 * input when it is NaN). */
#include "internal.h"

#include <math.h>

/* MlasLogisticConstants */
#define L_LO (-18.0f)
#define L_HI 18.0f
#define A9 4.37031012579801e-11f
#define A7 1.15627324459942e-07f
#define A5 6.08574864600143e-05f
#define A3 8.51377133304701e-03f
#define A1 2.48287947061529e-01f
#define B10 6.10247389755681e-13f
#define B8 5.76102136993427e-09f
#define B6 6.29106785017040e-06f
#define B4 1.70198817374094e-03f
#define B2 1.16817656904453e-01f
#define B0 9.93151921023180e-01f

/* MlasTanhConstants */
#define T_LO (-9.0f)
#define T_HI 9.0f
#define T13 (-2.76076847742355e-16f)
#define T11 2.00018790482477e-13f
#define T9 (-8.60467152213735e-11f)
#define T7 5.12229709037114e-08f
#define T5 1.48572235717979e-05f
#define T3 6.37261928875436e-04f
#define T1 4.89352455891786e-03f
#define U6 1.19825839466702e-06f
#define U4 1.18534705686654e-04f
#define U2 2.26843463243900e-03f
#define U0 4.89352518554385e-03f

PA_INLINE float logistic1(float v) {
    v = L_LO > v ? L_LO : v;                /* vmaxps lo, x: x when NaN */
    v = L_HI < v ? L_HI : v;
    float x2 = v * v;
    float p = fmaf(x2, A9, A7);
    p = fmaf(x2, p, A5);
    p = fmaf(x2, p, A3);
    p = fmaf(x2, p, A1);
    float q = fmaf(x2, B10, B8);
    q = fmaf(x2, q, B6);
    q = fmaf(x2, q, B4);
    q = fmaf(x2, q, B2);
    q = fmaf(x2, q, B0);
    float r = (v * p) / q + 0.5f;
    return 0.0f > r ? 0.0f : r;
}

PA_INLINE float tanh1(float v) {
    v = T_LO > v ? T_LO : v;
    v = T_HI < v ? T_HI : v;
    float x2 = v * v;
    float p = fmaf(x2, T13, T11);
    p = fmaf(x2, p, T9);
    p = fmaf(x2, p, T7);
    p = fmaf(x2, p, T5);
    p = fmaf(x2, p, T3);
    p = fmaf(x2, p, T1);
    float q = fmaf(x2, U6, U4);
    q = fmaf(x2, q, U2);
    q = fmaf(x2, q, U0);
    return (v * p) / q;
}

/* Blocks of PA_VEC through a local buffer (x and y may be the same array):
 * a fixed trip over disjoint memory, which -O2 vectorises -- the same
 * operations per element as the scalar tail, so the same bits. */
#define ORT_MAP(name, f)                                                   \
    PA_MULTIVERSION                                                        \
    static void name(const float *x, float *y, size_t n) {                 \
        size_t i = 0;                                                      \
        for (; i + PA_VEC <= n; i += PA_VEC) {                             \
            float v[PA_VEC];                                               \
            for (size_t t = 0; t < PA_VEC; t++)                            \
                v[t] = x[i + t];                                           \
            for (size_t t = 0; t < PA_VEC; t++)                            \
                v[t] = f(v[t]);                                            \
            for (size_t t = 0; t < PA_VEC; t++)                            \
                y[i + t] = v[t];                                           \
        }                                                                  \
        for (; i < n; i++)                                                 \
            y[i] = f(x[i]);                                                \
    }

ORT_MAP(logistic_run, logistic1)
ORT_MAP(tanh_run, tanh1)

/* x and y: the same array or disjoint ones (the loops read each element
 * before writing it). */
static int bad_args(const float *x, const float *y, size_t n) {
    if (n == 0)
        return 0;
    if (x == NULL || y == NULL)
        return 1;
    if (x == y)
        return 0;
    uintptr_t a = (uintptr_t)x, b = (uintptr_t)y, len = (uintptr_t)n * sizeof(float);
    return a < b + len && b < a + len;
}

pa_status_t pa_ort_logistic(const float *x, float *y, size_t n) {
    if (bad_args(x, y, n))
        return PA_ERR_INVALID;
    logistic_run(x, y, n);
    return PA_OK;
}

pa_status_t pa_ort_tanh(const float *x, float *y, size_t n) {
    if (bad_args(x, y, n))
        return PA_ERR_INVALID;
    tanh_run(x, y, n);
    return PA_OK;
}
