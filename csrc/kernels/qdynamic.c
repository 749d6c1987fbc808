/* kernels/qdynamic.c -- DynamicQuantizeLinear (pa_dynamic_quantize): the
 * range of the data, its uint8 scale and zero point, and the data
 * quantized with them, in two vectorised passes (pyarena.h gives the
 * arithmetic, onnxruntime's).  The rounding is _pa_round_half_even
 * (internal.h): exact for |v| <= 2^22, and values are clamped to
 * [-zero_point, 255 - zero_point] before it. */
#include "internal.h"

/* 64 values a tile: a tile of 16 (16 bytes out) got 128-bit vectors from
 * GCC even in the x86-64-v4 clone; 64 gets 512-bit divisions, which take
 * about 0.7x the time on 2M values.  The same operations per value. */
#define QD_TILE 64

/* min and max of x[0 .. n) (n > 0); *nan set when one is NaN. */
PA_MULTIVERSION
static void qd_range(const float *restrict x, size_t n, float *lo, float *hi, int *nan) {
    float mn[QD_TILE], mx[QD_TILE];
    int bad[QD_TILE];
    for (int l = 0; l < QD_TILE; l++)
        mn[l] = mx[l] = x[0], bad[l] = 0;
    size_t i = 0;
    for (; i + QD_TILE <= n; i += QD_TILE)
        for (int l = 0; l < QD_TILE; l++) {
            float v = x[i + l];
            mn[l] = v < mn[l] ? v : mn[l];
            mx[l] = v > mx[l] ? v : mx[l];
            bad[l] |= v != v;
        }
    for (; i < n; i++) {
        float v = x[i];
        mn[0] = v < mn[0] ? v : mn[0];
        mx[0] = v > mx[0] ? v : mx[0];
        bad[0] |= v != v;
    }
    float a = mn[0], b = mx[0];
    int any = 0;
    for (int l = 0; l < QD_TILE; l++) {
        a = mn[l] < a ? mn[l] : a;
        b = mx[l] > b ? mx[l] : b;
        any |= bad[l];
    }
    *lo = a, *hi = b, *nan = any;
}

PA_INLINE uint8_t qd_one(float v, float scale, float lo, float hi, float zp) {
    float f = v / scale;
    f = f < lo ? lo : f;        /* a NaN fails both tests and stays NaN */
    f = f > hi ? hi : f;
    f = f == f ? f : lo;        /* NaN -> the lowest code, 0 */
    return (uint8_t)(_pa_round_half_even(f) + (int32_t)zp);
}

PA_MULTIVERSION
static void qd_quantize(const float *restrict x, size_t n, uint8_t *restrict y, float scale,
                        float zp) {
    const float lo = -zp, hi = 255.0f - zp;
    size_t i = 0;
    for (; i + QD_TILE <= n; i += QD_TILE)
        for (int l = 0; l < QD_TILE; l++)
            y[i + l] = qd_one(x[i + l], scale, lo, hi, zp);
    for (; i < n; i++)
        y[i] = qd_one(x[i], scale, lo, hi, zp);
}

pa_status_t pa_dynamic_quantize(const float *x, size_t n, uint8_t *y, float *scale,
                                uint8_t *zero_point) {
    if (!scale || !zero_point || (n && (!x || !y)))
        return PA_ERR_INVALID;
    float lo = 0.0f, hi = 0.0f;
    if (n) {
        int nan = 0;
        qd_range(x, n, &lo, &hi, &nan);
        if (nan)
            lo = hi = 0.0f;
    }
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float z = (0.0f - lo) / s;
    z = z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z;
    z = (float)_pa_round_half_even(z);
    *scale = s;
    *zero_point = (uint8_t)z;
    if (n)
        qd_quantize(x, n, y, s, z);
    return PA_OK;
}
