/* kernels/qelementwise.c -- the 8-bit quantized element-wise kernels:
 * QLinearAdd / QLinearMul, a 256-entry table lookup, QuantizeLinear,
 * DequantizeLinear and QLinearGlobalAveragePool.
 *
 * The design choice is bit-exactness, with onnxruntime for Add and Mul and
 * with pyarena's NumPy path (runtime/kernels/quantized*.py) for all: the
 * same float32 operations in the same order, so the native and NumPy paths
 * give the same bytes and a test compares them.  Add and Mul follow
 * onnxruntime's MLAS kernels as they run on x86-64:
 *
 *   Add (onnxruntime/core/mlas/lib/intrinsics/avx2/qladd_avx2.cpp, the
 *   kernel its AVX2 machines dispatch to; the spans and their "scalar"
 *   operand: contrib_ops/cpu/quantization/qlinear_binary_op.cc):
 *     rA = sa / sy, rB = sb / sy                                (float32)
 *     both operands vectors:  F = zy - fma(rA, za, rB * zb)
 *                             y = cvt(fma(a, rA, fma(b, rB, F)))
 *     V a vector, S one value per span (V = b when a is the scalar one):
 *                             F = zy - fma(rV, zV, rS * zS)
 *                             y = cvt(fma(v, rV, fma(s, rS, F)))
 *   The fused multiply-adds are the MLAS kernel's own (its intrinsics and
 *   the compiler's contraction of its constant part, which we measured:
 *   every other order differs from it on some inputs).
 *
 *   Mul (onnxruntime/core/mlas/lib/qlmul.cpp, SSE2; no FMA there):
 *     y = cvt((float)((a - za) * (b - zb)) * ((sa * sb) / sy) + zy)
 *
 *   TFLite's int8 MUL (tensorflow/lite/kernels/internal/reference/
 *   integer_ops/mul.h, MulElementwise / BroadcastMul6DSlow) in integers:
 *     y = clamp(MultiplyByQuantizedMultiplier((a - za) * (b - zb), m, s) + zy)
 *   m, s: QuantizeMultiplier of sa * sb / sy in double (the caller's,
 *   pyarena/runtime/kernels/requant_fixed.py); two roundings, as qrequant.c.
 *
 * cvt is the SSE conversion: round half to even, and any value it cannot
 * hold in an int32 (>= 2^31, NaN) becomes INT32_MIN, so the type's lowest
 * value; then saturation to the type and the optional [y_min, y_max].
 * Rounding uses the 1.5 * 2^23 trick on a value clamped to +-2^22 (exact
 * under the default rounding mode, and vectorises where nearbyintf is a
 * library call).
 *
 * Contraction: the file compiles as ISO C (-std=c11: GCC does not contract
 * a * b + c then; clang contracts only within one expression, and no
 * expression here has a product inside a sum apart from the explicit
 * fmaf calls, which are exact everywhere -- the x86-64-v3 / v4 clones
 * inline them as one instruction, the baseline calls libm's).
 */
#include "internal.h"
#include "isa.h"

#include <math.h>

/* -- shared pieces --------------------------------------------------- */

static int qtype_ok(pa_qtype_t t) { return t == PA_Q_U8 || t == PA_Q_S8; }

static void qtype_range(pa_qtype_t t, int32_t *lo, int32_t *hi) {
    *lo = t == PA_Q_S8 ? -128 : 0;
    *hi = t == PA_Q_S8 ? 127 : 255;
}

static int clamp_ok(pa_qtype_t t, int32_t y_min, int32_t y_max) {
    int32_t lo, hi;
    qtype_range(t, &lo, &hi);
    return y_min >= lo && y_max <= hi && y_min <= y_max;
}

PA_INLINE int32_t load8(const void *p, int64_t i, int s8) {
    return s8 ? (int32_t)((const int8_t *)p)[i] : (int32_t)((const uint8_t *)p)[i];
}

PA_INLINE void store8(void *p, int64_t i, int32_t v, int s8) {
    if (s8)
        ((int8_t *)p)[i] = (int8_t)v;
    else
        ((uint8_t *)p)[i] = (uint8_t)v;
}

/* rint(t) for |t| <= 2^22 (round half to even). */
PA_INLINE float round_even(float t) { return (float)_pa_round_half_even(t); }

/* The SSE conversion of t, saturated to [lo, hi] (see the banner). */
PA_INLINE int32_t cvt_sat(float t, int32_t lo, int32_t hi) {
    float c = t > -4194304.0f ? t : -4194304.0f;    /* NaN -> -2^22 */
    c = c < 4194304.0f ? c : 4194304.0f;
    int32_t i = (int32_t)round_even(c);
    i = i < lo ? lo : i;
    i = i > hi ? hi : i;
    return t < 2147483648.0f ? i : lo;
}

/* ONNX requantization as NumPy does it: rint, + zero point, clip. */
PA_INLINE int32_t requant(float t, float zp, int32_t lo, int32_t hi) {
    float c = t > -4194304.0f ? t : -4194304.0f;
    c = c < 4194304.0f ? c : 4194304.0f;
    float r = round_even(c);
    r = r + zp;
    r = r > (float)lo ? r : (float)lo;
    r = r < (float)hi ? r : (float)hi;
    return (int32_t)r;
}

/* QuantizeLinear / DequantizeLinear of one value (onnxruntime's
 * QuantizeLinear: x / scale, round half to even, + zero point, saturate;
 * a NaN quantizes to 0.  DequantizeLinear: (x - zero point) * scale). */
PA_INLINE int32_t quant_one(float x, float scale, float zp, int32_t lo, int32_t hi) {
    float q = x / scale;
    int32_t v = requant(q, zp, lo, hi);
    return q == q ? v : 0;
}

PA_INLINE float dequant_one(int32_t x, float scale, float zp) {
    float d = (float)x - zp;
    return d * scale;
}

/* Two dequantized values added / multiplied: each product rounded to
 * float32 on its own (separate statements: no contraction), then the op. */
PA_INLINE float dq_add(int32_t v, float zv, float sv, int32_t s, float zs, float ss) {
    float fv = dequant_one(v, sv, zv);
    float fs = dequant_one(s, ss, zs);
    return fv + fs;
}

PA_INLINE float dq_mul(int32_t v, float zv, float sv, int32_t s, float zs, float ss) {
    float fv = dequant_one(v, sv, zv);
    float fs = dequant_one(s, ss, zs);
    return fv * fs;
}

/* -- QLinearAdd / QLinearMul ----------------------------------------- */

typedef struct qb_consts {
    float rv, rs;       /* Add: the vector's and the scalar's scale ratios */
    float f;            /* Add: the fixed part                              */
    float ratio, zy;    /* Mul                                              */
    int32_t zv, zs;     /* the zero points of v and s                       */
    int32_t lo, hi;
    float sv, ss, sy;   /* DQ_ADD / DQ_MUL: the three scales                */
    float fzv, fzs;     /* DQ_ADD / DQ_MUL: v's and s's zero points         */
    int32_t mult, shift, izy;   /* TFLITE_MUL: Q31 multiplier, shift, zy    */
} qb_consts_t;

/* PA_MAP's blocks of 32 elements: one 256-bit register of bytes (16, a
 * PA_VEC, held the loops to 128-bit registers). */
#define PA_QB_BLOCK 32
#define PA_QMAP(dst, n, i, EXPR)                                         \
    do {                                                                 \
        size_t i##_0 = 0;                                                \
        for (; i##_0 + PA_QB_BLOCK <= (n); i##_0 += PA_QB_BLOCK)         \
            for (size_t i = i##_0; i < i##_0 + PA_QB_BLOCK; i++)         \
                (dst)[i] = (EXPR);                                       \
        for (size_t i = i##_0; i < (n); i++)                             \
            (dst)[i] = (EXPR);                                           \
    } while (0)

/* The row kernels, one per element type T (a fixed-length inner loop,
 * PA_QMAP, so -O2 vectorises them).  vv: both operands vectors (v = a,
 * s = b); vs: s one value for the run. */
#define PA_QB_ROWS(T, NAME)                                                        \
    PA_INLINE void add_vv_##NAME(const T *restrict v, const T *restrict s,         \
                                 T *restrict y, int64_t n, const qb_consts_t *k) { \
        const float rv = k->rv, rs = k->rs, f = k->f;                              \
        const int32_t lo = k->lo, hi = k->hi;                                      \
        PA_QMAP(y, (size_t)n, i,                                                    \
               (T)cvt_sat(fmaf((float)v[i], rv, fmaf((float)s[i], rs, f)), lo, hi)); \
    }                                                                              \
    PA_INLINE void add_vs_##NAME(const T *restrict v, int32_t s, T *restrict y,    \
                                 int64_t n, const qb_consts_t *k) {                \
        const float rv = k->rv, fs = fmaf((float)s, k->rs, k->f);                  \
        const int32_t lo = k->lo, hi = k->hi;                                      \
        PA_QMAP(y, (size_t)n, i, (T)cvt_sat(fmaf((float)v[i], rv, fs), lo, hi));    \
    }                                                                              \
    PA_INLINE void mul_vv_##NAME(const T *restrict v, const T *restrict s,         \
                                 T *restrict y, int64_t n, const qb_consts_t *k) { \
        const float ratio = k->ratio, zy = k->zy;                                  \
        const int32_t zv = k->zv, zs = k->zs, lo = k->lo, hi = k->hi;              \
        PA_QMAP(y, (size_t)n, i,                                                    \
               (T)cvt_sat(mul_t(((int32_t)v[i] - zv) * ((int32_t)s[i] - zs), ratio, zy), \
                          lo, hi));                                                \
    }                                                                              \
    PA_INLINE void mul_vs_##NAME(const T *restrict v, int32_t s, T *restrict y,    \
                                 int64_t n, const qb_consts_t *k) {                \
        const float ratio = k->ratio, zy = k->zy;                                  \
        const int32_t zv = k->zv, ds = s - k->zs, lo = k->lo, hi = k->hi;          \
        PA_QMAP(y, (size_t)n, i,                                                    \
               (T)cvt_sat(mul_t(((int32_t)v[i] - zv) * ds, ratio, zy), lo, hi));   \
    }

/* The unfused QDQ group's steps, op by op in float32 (dequant_one,
 * quant_one: the DequantizeLinear and QuantizeLinear below). */
#define PA_QB_DQ_ROWS(T, NAME)                                                        \
    PA_INLINE void dq_vv_##NAME(const T *restrict v, const T *restrict s,            \
                                T *restrict y, int64_t n, const qb_consts_t *k,      \
                                int mul) {                                           \
        const float sv = k->sv, ss = k->ss, sy = k->sy, zv = k->fzv, zs = k->fzs;   \
        const float zy = k->zy;                                                      \
        const int32_t lo = k->lo, hi = k->hi;                                        \
        if (mul)                                                                     \
            PA_QMAP(y, (size_t)n, i,                                                 \
                    (T)quant_one(dq_mul(v[i], zv, sv, s[i], zs, ss), sy, zy, lo, hi)); \
        else                                                                         \
            PA_QMAP(y, (size_t)n, i,                                                 \
                    (T)quant_one(dq_add(v[i], zv, sv, s[i], zs, ss), sy, zy, lo, hi)); \
    }                                                                                \
    PA_INLINE void dq_vs_##NAME(const T *restrict v, int32_t s, T *restrict y,       \
                                int64_t n, const qb_consts_t *k, int mul) {          \
        const float sv = k->sv, zv = k->fzv, sy = k->sy, zy = k->zy;                 \
        const float fs = dequant_one(s, k->ss, k->fzs);                              \
        const int32_t lo = k->lo, hi = k->hi;                                        \
        if (mul)                                                                     \
            PA_QMAP(y, (size_t)n, i,                                                 \
                    (T)quant_one(dequant_one((int32_t)v[i], sv, zv) * fs, sy, zy, lo, hi)); \
        else                                                                         \
            PA_QMAP(y, (size_t)n, i,                                                 \
                    (T)quant_one(dequant_one((int32_t)v[i], sv, zv) + fs, sy, zy, lo, hi)); \
    }

/* TFLite's MUL of one product (exact in int32: |p| <= 2^16): requantized
 * as pa_qrequant (two roundings), + zy, clamped. */
PA_INLINE int32_t tmul_one(int32_t p, int32_t m, int32_t shift, int32_t zy, int32_t lo,
                           int32_t hi) {
    int32_t v = _pa_requant_fixed(p, m, shift) + zy;
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* TFLite's MUL rows (the product is symmetric: v and s in either role). */
#define PA_QB_TFLITE_ROWS(T, NAME)                                                   \
    PA_INLINE void tmul_vv_##NAME(const T *restrict v, const T *restrict s,          \
                                  T *restrict y, int64_t n, const qb_consts_t *k) {  \
        const int32_t zv = k->zv, zs = k->zs, m = k->mult, sh = k->shift;            \
        const int32_t zy = k->izy, lo = k->lo, hi = k->hi;                           \
        PA_QMAP(y, (size_t)n, i,                                                     \
                (T)tmul_one(((int32_t)v[i] - zv) * ((int32_t)s[i] - zs), m, sh, zy, lo, hi)); \
    }                                                                                \
    PA_INLINE void tmul_vs_##NAME(const T *restrict v, int32_t s, T *restrict y,     \
                                  int64_t n, const qb_consts_t *k) {                 \
        const int32_t zv = k->zv, ds = s - k->zs, m = k->mult, sh = k->shift;        \
        const int32_t zy = k->izy, lo = k->lo, hi = k->hi;                           \
        PA_QMAP(y, (size_t)n, i, (T)tmul_one(((int32_t)v[i] - zv) * ds, m, sh, zy, lo, hi)); \
    }

/* Mul's float steps: the product times the ratio, then + zy (two
 * roundings, as MLAS's SSE2 kernel). */
PA_INLINE float mul_t(int32_t p, float ratio, float zy) {
    float t = (float)p * ratio;
    return t + zy;
}

PA_QB_ROWS(uint8_t, u8)
PA_QB_ROWS(int8_t, s8)
PA_QB_DQ_ROWS(uint8_t, u8)
PA_QB_DQ_ROWS(int8_t, s8)
PA_QB_TFLITE_ROWS(uint8_t, u8)
PA_QB_TFLITE_ROWS(int8_t, s8)

/* The 256 bytes 0..255: every value of an 8-bit type, by its byte. */
static const uint8_t all_bytes[256] = {
#define PA_B4(i) (i), (i) + 1, (i) + 2, (i) + 3
#define PA_B16(i) PA_B4(i), PA_B4((i) + 4), PA_B4((i) + 8), PA_B4((i) + 12)
#define PA_B64(i) PA_B16(i), PA_B16((i) + 16), PA_B16((i) + 32), PA_B16((i) + 48)
    PA_B64(0), PA_B64(64), PA_B64(128), PA_B64(192)
#undef PA_B64
#undef PA_B16
#undef PA_B4
};

/* Runs at least this long with one value of s go through a table: with s
 * fixed the result is a function of v's byte, so the row kernel computes
 * its 256 results (on all_bytes: the same function, the same bits) and
 * the run is a lookup (about twice as fast as the arithmetic). */
#define PA_QB_TABLE_MIN 1024

#define PA_QB_TABLE(T, NAME)                                                         \
    PA_INLINE void vs_table_##NAME(const T *restrict v, int32_t s, T *restrict y,    \
                                   int64_t n, const qb_consts_t *k, int mul) {       \
        T table[256];                                                                \
        if (mul == 4)                                                                \
            tmul_vs_##NAME((const T *)all_bytes, s, table, 256, k);                  \
        else if (mul > 1)                                                            \
            dq_vs_##NAME((const T *)all_bytes, s, table, 256, k, mul == 3);          \
        else if (mul)                                                                \
            mul_vs_##NAME((const T *)all_bytes, s, table, 256, k);                   \
        else                                                                         \
            add_vs_##NAME((const T *)all_bytes, s, table, 256, k);                   \
        lookup_bytes((const uint8_t *)table, (const uint8_t *)v, (uint8_t *)y, n);  \
    }

/* y[i] = table[x[i]], i < n: VBMI's 64 at a time where it is there. */
static void lookup_bytes(const uint8_t *table, const uint8_t *x, uint8_t *y, int64_t n) {
    if (n >= 64 && _pa_lookup256_vbmi && _pa_avx512vbmi_usable()) {
        _pa_lookup256_vbmi(table, x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] = table[x[i]];
}

PA_QB_TABLE(uint8_t, u8)
PA_QB_TABLE(int8_t, s8)

/* The walk: outer x middle runs of `inner`; s_vector says whether s
 * varies along a run (else one value of s per run). */
#define PA_QB_WALK(T, NAME)                                                         \
    PA_INLINE void qbinary_walk_##NAME(const pa_qbinary_t *p, const qb_consts_t *k,  \
                                       const T *v, int64_t v_outer, int64_t v_middle, \
                                       const T *s, int64_t s_outer, int64_t s_middle, \
                                       int s_vector, T *y, int mul) {               \
        const int64_t inner = p->inner;                                             \
        for (int64_t o = 0; o < p->outer; o++)                                      \
            for (int64_t m = 0; m < p->middle; m++) {                               \
                const T *vr = v + o * v_outer + m * v_middle;                       \
                const T *sr = s + o * s_outer + m * s_middle;                       \
                T *yr = y + (o * p->middle + m) * inner;                            \
                if (s_vector && mul == 4)                                           \
                    tmul_vv_##NAME(vr, sr, yr, inner, k);                           \
                else if (s_vector && mul > 1)                                       \
                    dq_vv_##NAME(vr, sr, yr, inner, k, mul == 3);                   \
                else if (s_vector && mul)                                           \
                    mul_vv_##NAME(vr, sr, yr, inner, k);                            \
                else if (s_vector)                                                  \
                    add_vv_##NAME(vr, sr, yr, inner, k);                            \
                else if (inner >= PA_QB_TABLE_MIN)                                  \
                    vs_table_##NAME(vr, sr[0], yr, inner, k, mul);                  \
                else if (mul == 4)                                                  \
                    tmul_vs_##NAME(vr, sr[0], yr, inner, k);                        \
                else if (mul > 1)                                                   \
                    dq_vs_##NAME(vr, sr[0], yr, inner, k, mul == 3);                \
                else if (mul)                                                       \
                    mul_vs_##NAME(vr, sr[0], yr, inner, k);                         \
                else                                                                \
                    add_vs_##NAME(vr, sr[0], yr, inner, k);                         \
            }                                                                       \
    }

PA_QB_WALK(uint8_t, u8)
PA_QB_WALK(int8_t, s8)

PA_MULTIVERSION
static void qbinary_run(const pa_qbinary_t *p, const qb_consts_t *k, const void *v,
                        int64_t v_outer, int64_t v_middle, const void *s,
                        int64_t s_outer, int64_t s_middle, int s_vector, void *y) {
    /* 0 Add, 1 Mul, 2 the float path's Add, 3 its Mul, 4 TFLite's Mul */
    const int mul = p->op == PA_QBINARY_MUL ? 1 : p->op == PA_QBINARY_DQ_ADD ? 2 :
                    p->op == PA_QBINARY_DQ_MUL ? 3 : p->op == PA_QBINARY_TFLITE_MUL ? 4 : 0;
    if (p->type == PA_Q_S8)
        qbinary_walk_s8(p, k, v, v_outer, v_middle, s, s_outer, s_middle, s_vector, y, mul);
    else
        qbinary_walk_u8(p, k, v, v_outer, v_middle, s, s_outer, s_middle, s_vector, y, mul);
}

static int scale_ok(float s) { return isfinite(s) && s > 0.0f; }

pa_status_t pa_qbinary(const pa_qbinary_t *p, const void *a, const void *b, void *y) {
    if (!p || !a || !b || !y || !qtype_ok(p->type) ||
        (p->op != PA_QBINARY_ADD && p->op != PA_QBINARY_MUL && p->op != PA_QBINARY_DQ_ADD &&
         p->op != PA_QBINARY_DQ_MUL && p->op != PA_QBINARY_TFLITE_MUL))
        return PA_ERR_INVALID;
    if (p->op == PA_QBINARY_TFLITE_MUL && (p->multiplier < 0 || p->shift < -31 || p->shift > 30))
        return PA_ERR_INVALID;
    if (p->outer < 0 || p->middle < 0 || p->inner < 0 || p->a_outer < 0 || p->a_middle < 0 ||
        p->b_outer < 0 || p->b_middle < 0 || (p->a_inner != 0 && p->a_inner != 1) ||
        (p->b_inner != 0 && p->b_inner != 1))
        return PA_ERR_INVALID;
    if (!scale_ok(p->a_scale) || !scale_ok(p->b_scale) || !scale_ok(p->y_scale) ||
        !clamp_ok(p->type, p->y_min, p->y_max))
        return PA_ERR_INVALID;
    int32_t lo, hi;
    qtype_range(p->type, &lo, &hi);
    if (p->a_zero_point < lo || p->a_zero_point > hi || p->b_zero_point < lo ||
        p->b_zero_point > hi || p->y_zero_point < lo || p->y_zero_point > hi)
        return PA_ERR_INVALID;
    if (p->outer == 0 || p->middle == 0 || p->inner == 0)
        return PA_OK;
    /* onnxruntime's roles: a scalar a makes b the vector operand */
    const int swap = p->a_inner == 0;
    const void *v = swap ? b : a, *s = swap ? a : b;
    const float sv = swap ? p->b_scale : p->a_scale, ss = swap ? p->a_scale : p->b_scale;
    qb_consts_t k;
    k.zv = swap ? p->b_zero_point : p->a_zero_point;
    k.zs = swap ? p->a_zero_point : p->b_zero_point;
    k.lo = p->y_min;
    k.hi = p->y_max;
    k.rv = sv / p->y_scale;
    k.rs = ss / p->y_scale;
    float prod = k.rs * (float)k.zs;
    k.f = (float)p->y_zero_point - fmaf(k.rv, (float)k.zv, prod);
    float sab = p->a_scale * p->b_scale;
    k.ratio = sab / p->y_scale;
    k.zy = (float)p->y_zero_point;
    k.sv = sv;
    k.ss = ss;
    k.sy = p->y_scale;
    k.fzv = (float)k.zv;
    k.fzs = (float)k.zs;
    k.mult = p->multiplier;
    k.shift = p->shift;
    k.izy = p->y_zero_point;
    const int s_vector = !swap && p->b_inner != 0;
    qbinary_run(p, &k, v, swap ? p->b_outer : p->a_outer, swap ? p->b_middle : p->a_middle,
                s, swap ? p->a_outer : p->b_outer, swap ? p->a_middle : p->b_middle,
                s_vector, y);
    return PA_OK;
}

/* -- table lookup ---------------------------------------------------- */

PA_MULTIVERSION
static void lookup_run(const uint8_t *restrict table, const uint8_t *x, uint8_t *y,
                       int64_t blocks, int64_t len, int64_t xs, int64_t ys) {
    for (int64_t k = 0; k < blocks; k++) {
        lookup_bytes(table, x + k * xs, y + k * ys, len);
    }
}

pa_status_t pa_qlookup(const uint8_t *table, const void *x, void *y, int64_t blocks,
                       int64_t block_len, int64_t x_stride, int64_t y_stride) {
    if (!table || !x || !y || blocks < 0 || block_len < 0)
        return PA_ERR_INVALID;
    lookup_run(table, x, y, blocks, block_len, x_stride, y_stride);
    return PA_OK;
}

/* -- QuantizeLinear / DequantizeLinear ------------------------------- */

/* Typed bodies (PA_MAP: -O2 vectorises them).  A NaN quantizes to 0. */
#define PA_QUANT_BODIES(T, NAME)                                                       \
    PA_INLINE void quantize_##NAME(const float *restrict x, T *restrict y, int64_t n,  \
                                   float scale, float zp, int32_t lo, int32_t hi) {    \
        PA_MAP(y, (size_t)n, i, (T)quant_one(x[i], scale, zp, lo, hi));                \
    }                                                                                  \
    PA_INLINE void dequantize_##NAME(const T *restrict x, float *restrict y, int64_t n,\
                                     float scale, float zp) {                          \
        PA_MAP(y, (size_t)n, i, dequant_one((int32_t)x[i], scale, zp));                \
    }

PA_MULTIVERSION
static void lookup_channels_run(const uint8_t *tables, int64_t ntables, const uint8_t *x,
                                uint8_t *y, int64_t blocks, int64_t len) {
    for (int64_t k = 0; k < blocks; k++)
        lookup_bytes(tables + (k % ntables) * 256, x + k * len, y + k * len, len);
}

pa_status_t pa_qlookup_channels(const uint8_t *tables, int64_t ntables, const void *x,
                                void *y, int64_t blocks, int64_t block_len) {
    if (!tables || !x || !y || ntables < 1 || blocks < 0 || block_len < 0)
        return PA_ERR_INVALID;
    lookup_channels_run(tables, ntables, x, y, blocks, block_len);
    return PA_OK;
}

PA_QUANT_BODIES(uint8_t, u8)
PA_QUANT_BODIES(int8_t, s8)

PA_MULTIVERSION
static void quantize_run(int s8, const float *x, void *y, int64_t n, float scale, float zp,
                         int32_t lo, int32_t hi) {
    if (s8)
        quantize_s8(x, y, n, scale, zp, lo, hi);
    else
        quantize_u8(x, y, n, scale, zp, lo, hi);
}

pa_status_t pa_quantize_linear(pa_qtype_t type, const float *x, void *y, int64_t n,
                               float scale, int32_t zero_point, int32_t y_min, int32_t y_max) {
    if (!x || !y || n < 0 || !qtype_ok(type) || !clamp_ok(type, y_min, y_max))
        return PA_ERR_INVALID;
    quantize_run(type == PA_Q_S8, x, y, n, scale, (float)zero_point, y_min, y_max);
    return PA_OK;
}

PA_MULTIVERSION
static void dequantize_run(int s8, const void *x, float *y, int64_t n, float scale,
                           float zp) {
    if (s8)
        dequantize_s8(x, y, n, scale, zp);
    else
        dequantize_u8(x, y, n, scale, zp);
}

pa_status_t pa_dequantize_linear(pa_qtype_t type, const void *x, float *y, int64_t n,
                                 float scale, int32_t zero_point) {
    if (!x || !y || n < 0 || !qtype_ok(type))
        return PA_ERR_INVALID;
    dequantize_run(type == PA_Q_S8, x, y, n, scale, (float)zero_point);
    return PA_OK;
}

/* -- QLinearGlobalAveragePool ---------------------------------------- */

/* The mean's requantization, NumPy's steps (quantized_contrib.py). */
PA_INLINE int32_t pool_out(int64_t sum, int64_t spatial, float xzp, float mult, float yzp,
                           int32_t lo, int32_t hi) {
    float mean = (float)((double)sum / (double)spatial);
    float t = mean - xzp;
    t = t * mult;
    return requant(t, yzp, lo, hi);
}

/* The sum of a row of n <= 2^16 values: int32 lanes (no overflow at that
 * length), so -O2 vectorises it. */
#define PA_ROW_SUM(T, NAME)                                                 \
    PA_INLINE int64_t row_sum_##NAME(const T *restrict row, int64_t n) {    \
        int32_t sum = 0;                                                    \
        for (int64_t i = 0; i < n; i++)                                     \
            sum += row[i];                                                  \
        return sum;                                                         \
    }
PA_ROW_SUM(uint8_t, u8)
PA_ROW_SUM(int8_t, s8)

/* Channels at a time of the NHWC sums (their int64 sums on the stack). */
#define PA_GAP_CHANNELS 256

PA_MULTIVERSION
static void gap_run(int s8, int nhwc, int64_t n, int64_t c, int64_t spatial,
                    const uint8_t *x, uint8_t *y, float xzp, float mult, float yzp,
                    int32_t lo, int32_t hi) {
    for (int64_t img = 0; img < n; img++) {
        const uint8_t *xi = x + img * c * spatial;
        uint8_t *yi = y + img * c;
        if (!nhwc) {
            for (int64_t ch = 0; ch < c; ch++) {
                const uint8_t *row = xi + ch * spatial;
                int64_t sum = s8 ? row_sum_s8((const int8_t *)row, spatial)
                                 : row_sum_u8(row, spatial);
                store8(yi, ch, pool_out(sum, spatial, xzp, mult, yzp, lo, hi), s8);
            }
            continue;
        }
        for (int64_t c0 = 0; c0 < c; c0 += PA_GAP_CHANNELS) {
            const int64_t cn = c - c0 < PA_GAP_CHANNELS ? c - c0 : PA_GAP_CHANNELS;
            int64_t sum[PA_GAP_CHANNELS] = {0};
            for (int64_t p = 0; p < spatial; p++) {
                const uint8_t *px = xi + p * c + c0;
                for (int64_t j = 0; j < cn; j++)
                    sum[j] += load8(px, j, s8);
            }
            for (int64_t j = 0; j < cn; j++)
                store8(yi, c0 + j, pool_out(sum[j], spatial, xzp, mult, yzp, lo, hi), s8);
        }
    }
}

pa_status_t pa_qglobal_avgpool(pa_qtype_t type, pa_layout_t layout, int64_t n, int64_t c,
                               int64_t spatial, const void *x, void *y, float x_zero_point,
                               float multiplier, float y_zero_point, int32_t y_min,
                               int32_t y_max) {
    if (!x || !y || !qtype_ok(type) || n < 0 || c < 0 || spatial < 1 ||
        spatial >= (1 << 16) || !clamp_ok(type, y_min, y_max) ||
        (layout != PA_LAYOUT_NCHW && layout != PA_LAYOUT_NHWC))
        return PA_ERR_INVALID;
    gap_run(type == PA_Q_S8, layout == PA_LAYOUT_NHWC, n, c, spatial, x, y, x_zero_point,
            multiplier, y_zero_point, y_min, y_max);
    return PA_OK;
}
