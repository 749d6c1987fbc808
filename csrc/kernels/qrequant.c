/* kernels/qrequant.c -- TFLite's requantization of int32 accumulators.
 *
 * TFLite's int8 kernels scale an accumulator by a fixed-point multiplier
 * (tensorflow/lite/kernels/internal/common.h, MultiplyByQuantizedMultiplier,
 * the reference kernels' build):
 *
 *   left = max(shift, 0), right = max(-shift, 0)
 *   h = SaturatingRoundingDoublingHighMul(acc * 2^left, m)
 *     = (acc * 2^left * m + (ab >= 0 ? 2^30 : 1 - 2^30)) / 2^31, truncated
 *   y = RoundingDivideByPOT(h, right): h / 2^right rounded half away from 0
 *
 * Two roundings, where onnxruntime's float32 requantization (qconv.c) has
 * one: the same accumulator can land one unit apart.  TFLite files are run
 * with this one (the importer asks for it: pyarena/importers/tflite_quant.py).
 * TFLite's FULLY_CONNECTED rounds once instead, half away from zero
 * (single_rounding: ruy's MultiplyByQuantizedMultiplier,
 * ruy/apply_multiplier.cc; measured against the interpreter,
 * tests/importers/test_tflite_int8.py).
 * Integer arithmetic only, so every machine gives the same bits.
 */
#include "internal.h"

static int32_t srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN)
        return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (INT64_C(1) << 30) : (INT64_C(1) - (INT64_C(1) << 30));
    return (int32_t)((ab + nudge) / (INT64_C(1) << 31));   /* C division truncates */
}

static int32_t rdbpot(int32_t x, int e) {
    int32_t mask = (int32_t)((INT64_C(1) << e) - 1);
    int32_t rem = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (rem > threshold ? 1 : 0);
}

static int32_t requant_one(int32_t acc, int32_t m, int32_t shift) {
    int64_t a = (int64_t)acc * (INT64_C(1) << (shift > 0 ? shift : 0));  /* (no shift of a negative) */
    a = a > INT32_MAX ? INT32_MAX : a < INT32_MIN ? INT32_MIN : a;   /* (int32 in TFLite) */
    return rdbpot(srdhm((int32_t)a, m), shift > 0 ? 0 : -shift);
}

/* One rounding (TFLite's FULLY_CONNECTED: its int8 product goes through
 * ruy, ruy/apply_multiplier.cc, MultiplyByQuantizedMultiplier): acc * m /
 * 2^t, t = 31 - shift in [1, 62], rounded half away from zero (measured
 * against the interpreter: exact ties, -1.5 -> -2); |acc * m| < 2^62, so
 * adding 2^(t - 1) fits; then saturated to int32. */
static int32_t requant_single(int32_t acc, int32_t m, int32_t shift) {
    int t = 31 - shift;
    int64_t v = (int64_t)acc * m;
    int64_t a = v < 0 ? -v : v;
    int64_t q = (a + (INT64_C(1) << (t - 1))) >> t;
    q = v < 0 ? -q : q;
    return (int32_t)(q > INT32_MAX ? INT32_MAX : q < INT32_MIN ? INT32_MIN : q);
}

pa_status_t pa_qrequant(const pa_qrequant_t *p, const int32_t *mult_shift, const int32_t *acc,
                        void *y, int64_t n) {
    if (!p || n < 0 || p->channels < 1 || n % p->channels)
        return PA_ERR_INVALID;
    int32_t tlo = p->type == PA_Q_U8 ? 0 : -128, thi = p->type == PA_Q_U8 ? 255 : 127;
    if ((p->type != PA_Q_U8 && p->type != PA_Q_S8) || p->y_min > p->y_max ||
        p->y_min < tlo || p->y_max > thi || (p->single_rounding != 0 && p->single_rounding != 1))
        return PA_ERR_INVALID;
    if (n == 0)
        return PA_OK;
    if (!mult_shift || !acc || !y)
        return PA_ERR_INVALID;
    const int64_t C = p->channels;
    const int32_t *mult = mult_shift, *shift = mult_shift + C;
    for (int64_t c = 0; c < C; c++)
        if (mult[c] < 0 || shift[c] < -31 || shift[c] > 30)
            return PA_ERR_INVALID;
    const int64_t zp = p->zero_point;
    for (int64_t i = 0; i < n; i += C)
        for (int64_t c = 0; c < C; c++) {
            int64_t v = (int64_t)(p->single_rounding ? requant_single(acc[i + c], mult[c], shift[c])
                                  : requant_one(acc[i + c], mult[c], shift[c])) + zp;
            v = v < p->y_min ? p->y_min : v > p->y_max ? p->y_max : v;
            if (p->type == PA_Q_U8)
                ((uint8_t *)y)[i + c] = (uint8_t)v;
            else
                ((int8_t *)y)[i + c] = (int8_t)v;
        }
    return PA_OK;
}
