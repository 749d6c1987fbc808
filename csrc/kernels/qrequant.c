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
 * Integer arithmetic only, so every machine gives the same bits.  Where the
 * processor has AVX-512, eight channels at once in 64-bit lanes (the same
 * steps: a keyword spotter's 64 channels went 0.21 -> 0.09 us a call);
 * else branch-free loops the compiler may vectorize.
 */
#include "internal.h"
#include "isa.h"

#if PA_AVX512_BUILT
#include <immintrin.h>
#endif

/* requant_one: _pa_requant_fixed (kernels/internal.h), also TFLite's MUL's. */
#define requant_one _pa_requant_fixed

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

/* Channels per block of the loops below: a count the compiler's cheapest
 * vectorizer takes (no remainder loop of its own). */
#define REQUANT_BLOCK 16

/* Rows of C channels; y gets the low byte of the clamped value, which is
 * the int8 or the uint8 result alike (lo and hi lie in the type's range). */
PA_MULTIVERSION
static void requant_rows(const int32_t *restrict mult, const int32_t *restrict shift,
                         const int32_t *restrict acc, uint8_t *restrict y, int64_t n, int64_t C,
                         int32_t zp, int32_t lo, int32_t hi) {
    for (int64_t i = 0; i < n; i += C) {
        int64_t c = 0;
        for (; c + REQUANT_BLOCK <= C; c += REQUANT_BLOCK)     /* a fixed count: vectorized */
            for (int64_t j = c; j < c + REQUANT_BLOCK; j++) {
                int64_t v = (int64_t)requant_one(acc[i + j], mult[j], shift[j]) + zp;
                y[i + j] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
            }
        for (; c < C; c++) {
            int64_t v = (int64_t)requant_one(acc[i + c], mult[c], shift[c]) + zp;
            y[i + c] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
        }
    }
}

/* requant_rows with one rounding (FULLY_CONNECTED's). */
static void requant_rows_single(const int32_t *mult, const int32_t *shift, const int32_t *acc,
                                uint8_t *y, int64_t n, int64_t C, int32_t zp, int32_t lo,
                                int32_t hi) {
    for (int64_t i = 0; i < n; i += C)
        for (int64_t c = 0; c < C; c++) {
            int64_t v = (int64_t)requant_single(acc[i + c], mult[c], shift[c]) + zp;
            y[i + c] = (uint8_t)(v < lo ? lo : v > hi ? hi : v);
        }
}

#if PA_AVX512_BUILT
#define RQ_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

/* Channels [c, c + 16) of a row at once (k: the lanes there are),
 * requant_one's value in 32-bit lanes, the product alone in 64-bit ones:
 *   a = acc << left, saturated (the lanes whose shift lost bits);
 *   h = floor((a * m + 2^30) / 2^31) -- SaturatingRoundingDoublingHighMul:
 *       its nudge of 1 - 2^30 for a negative product and the division
 *       rounding toward 0 are this floor, exactly -- from vpmuldq on the
 *       even lanes and on the odd ones, bits 31..62 of each sum;
 *   RoundingDivideByPOT as requant_one writes it.
 * (The 64-bit lanes throughout took 30 cycles per 8 channels on AMD's
 * cores, a third of a one-pixel layer's time.) */
RQ_TARGET static inline __m512i requant16v(__m512i x, const int32_t *mult,
                                           const int32_t *shift, __mmask16 k) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    const __m512i s = _mm512_maskz_loadu_epi32(k, shift);
    const __m512i left = _mm512_max_epi32(s, zero);
    const __m512i right = _mm512_max_epi32(_mm512_sub_epi32(zero, s), zero);
    __m512i a = x;
    if (_mm512_cmpgt_epi32_mask(s, zero)) {     /* (real models: rare) */
        a = _mm512_sllv_epi32(x, left);
        const __mmask16 lost = _mm512_cmpneq_epi32_mask(_mm512_srav_epi32(a, left), x);
        a = _mm512_mask_mov_epi32(a, lost, _mm512_xor_si512(_mm512_srai_epi32(x, 31),
                                                            _mm512_set1_epi32(INT32_MAX)));
    }
    const __m512i m = _mm512_maskz_loadu_epi32(k, mult);
    const __m512i nudge = _mm512_set1_epi64(INT64_C(1) << 30);
    const __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(a, m), nudge);
    const __m512i po = _mm512_add_epi64(
        _mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32)), nudge);
    const __m512i h = _mm512_mask_blend_epi32((__mmask16)0xAAAA, _mm512_srli_epi64(pe, 31),
                                              _mm512_slli_epi64(po, 1));
    const __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    const __m512i rem = _mm512_and_si512(h, mask);
    const __m512i thr = _mm512_sub_epi32(_mm512_srai_epi32(mask, 1), _mm512_srai_epi32(h, 31));
    const __m512i r = _mm512_srav_epi32(h, right);
    return _mm512_mask_add_epi32(r, _mm512_cmpgt_epi32_mask(rem, thr), r, one);
}

RQ_TARGET static inline __m512i requant16(const int32_t *acc, const int32_t *mult,
                                          const int32_t *shift, __mmask16 k) {
    return requant16v(_mm512_maskz_loadu_epi32(k, acc), mult, shift, k);
}

/* _pa_qrequant_tile on the AVX-512 lanes: the accumulators corrected in
 * registers (no round trip through memory), two roundings. */
RQ_TARGET static void requant_tile_avx512(const int32_t *acc, const int32_t *corr,
                                          const int32_t *zpw, uint32_t rs,
                                          const int32_t *mult, const int32_t *shift,
                                          int8_t *out, int64_t n, int32_t zp, int32_t lo,
                                          int32_t hi) {
    const __m512i dzp = _mm512_set1_epi32(zp), dlo = _mm512_set1_epi32(lo - zp),
                  dhi = _mm512_set1_epi32(hi - zp), vrs = _mm512_set1_epi32((int32_t)rs);
    for (int64_t c = 0; c < n; c += 16) {
        __mmask16 k = n - c >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - c)) - 1);
        __m512i x = _mm512_add_epi32(_mm512_maskz_loadu_epi32(k, acc + c),
                                     _mm512_maskz_loadu_epi32(k, corr + c));
        if (rs)
            x = _mm512_sub_epi32(x, _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, zpw + c), vrs));
        __m512i v = requant16v(x, mult + c, shift + c, k);
        v = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(v, dlo), dhi), dzp);
        __m128i b = _mm512_cvtepi32_epi8(v);
        if (k == 0xFFFF) {
            _mm_storeu_si128((__m128i *)(out + c), b);
        } else {
            int8_t t[16];
            _mm_storeu_si128((__m128i *)t, b);
            memcpy(out + c, t, (size_t)(n - c));
        }
    }
}

/* requant_single's steps on 8 channels in 64-bit lanes (the same bits):
 * v = acc * m (vpmuldq), |v| + 2^(t - 1) shifted right by t = 31 - shift,
 * the sign put back, saturated to int32. */
RQ_TARGET static inline __m512i requant8_single(const int32_t *acc, const int32_t *mult,
                                                const int32_t *shift, __mmask8 k) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1);
    const __m512i s = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, shift));
    const __m512i t = _mm512_sub_epi64(_mm512_set1_epi64(31), s);
    const __m512i a = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, acc));
    const __m512i m = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, mult));
    const __m512i v = _mm512_mul_epi32(a, m);
    const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(t, one));
    __m512i q = _mm512_srlv_epi64(_mm512_add_epi64(_mm512_abs_epi64(v), half), t);
    q = _mm512_mask_sub_epi64(q, _mm512_cmplt_epi64_mask(v, zero), zero, q);
    return _mm512_min_epi64(_mm512_max_epi64(q, _mm512_set1_epi64(INT32_MIN)),
                            _mm512_set1_epi64(INT32_MAX));
}

RQ_TARGET static void requant_avx512(const int32_t *mult, const int32_t *shift,
                                     const int32_t *acc, void *y, int64_t n, int64_t C,
                                     int32_t zp, int32_t lo, int32_t hi, int single) {
    const __m512i vzp = _mm512_set1_epi64(zp), vlo = _mm512_set1_epi64(lo),
                  vhi = _mm512_set1_epi64(hi);
    int8_t *out = y;    /* (uint8_t or int8_t: the low byte of the clamped value either way) */
    if (!single) {
        /* clamped before the zero point is added (the sum could pass
         * INT32_MAX in a 32-bit lane): the same values */
        const __m512i dzp = _mm512_set1_epi32(zp), dlo = _mm512_set1_epi32(lo - zp),
                      dhi = _mm512_set1_epi32(hi - zp);
        for (int64_t i = 0; i < n; i += C)
            for (int64_t c = 0; c < C; c += 16) {
                __mmask16 k = C - c >= 16 ? (__mmask16)0xFFFF
                                          : (__mmask16)((1u << (C - c)) - 1);
                __m512i v = requant16(acc + i + c, mult + c, shift + c, k);
                v = _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(v, dlo), dhi), dzp);
                /* the bytes packed in a register, then a plain store: the
                 * masked byte store (vpmovdb to memory) is slow on AMD's cores */
                __m128i b = _mm512_cvtepi32_epi8(v);
                if (k == 0xFFFF) {
                    _mm_storeu_si128((__m128i *)(out + i + c), b);
                } else {
                    int8_t t[16];
                    _mm_storeu_si128((__m128i *)t, b);
                    memcpy(out + i + c, t, (size_t)(C - c));
                }
            }
        return;
    }
    for (int64_t i = 0; i < n; i += C)
        for (int64_t c = 0; c < C; c += 8) {
            __mmask8 k = C - c >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (C - c)) - 1);
            __m512i v = _mm512_add_epi64(requant8_single(acc + i + c, mult + c, shift + c, k),
                                         vzp);
            v = _mm512_min_epi64(_mm512_max_epi64(v, vlo), vhi);
            __m128i b = _mm512_cvtepi64_epi8(v);
            if (k == 0xFF) {
                _mm_storel_epi64((__m128i *)(out + i + c), b);
            } else {
                int8_t t[16];
                _mm_storeu_si128((__m128i *)t, b);
                memcpy(out + i + c, t, (size_t)(C - c));
            }
        }
}
#endif

pa_status_t pa_qrequant(const pa_qrequant_t *p, const int32_t *mult_shift, const int32_t *acc,
                        void *y, int64_t n) {
    return _pa_qrequant_isa(p, mult_shift, acc, y, n, _pa_avx512_usable());
}

pa_status_t _pa_qrequant_isa(const pa_qrequant_t *p, const int32_t *mult_shift,
                             const int32_t *acc, void *y, int64_t n, int avx512) {
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
    int bad = 0;        /* (no early exit: the loop vectorizes) */
    for (int64_t c = 0; c < C; c++)
        bad |= (mult[c] < 0) | (shift[c] < -31) | (shift[c] > 30);
    if (bad)
        return PA_ERR_INVALID;
    _pa_qrequant_rows(mult, shift, acc, y, n, C, p->zero_point, p->y_min, p->y_max,
                      p->single_rounding, avx512);
    return PA_OK;
}

void _pa_qrequant_rows(const int32_t *mult, const int32_t *shift, const int32_t *acc, void *y,
                       int64_t n, int64_t C, int32_t zp, int32_t lo, int32_t hi, int single,
                       int avx512) {
#if PA_AVX512_BUILT
    if (avx512 && _pa_avx512_usable()) {
        requant_avx512(mult, shift, acc, y, n, C, zp, lo, hi, single);
        return;
    }
#else
    (void)avx512;
#endif
    if (single)
        requant_rows_single(mult, shift, acc, y, n, C, zp, lo, hi);
    else
        requant_rows(mult, shift, acc, y, n, C, zp, lo, hi);
}

void _pa_qrequant_tile(const int32_t *acc, const int32_t *corr, const int32_t *zpw, uint32_t rs,
                       const int32_t *mult, const int32_t *shift, void *y, int64_t n,
                       int32_t zp, int32_t lo, int32_t hi, int single, int avx512) {
#if PA_AVX512_BUILT
    if (avx512 && !single && _pa_avx512_usable()) {
        requant_tile_avx512(acc, corr, zpw, rs, mult, shift, y, n, zp, lo, hi);
        return;
    }
#endif
    int32_t v[64];
    for (int64_t c0 = 0; c0 < n; c0 += 64) {
        int64_t m = n - c0 < 64 ? n - c0 : 64;
        for (int64_t c = 0; c < m; c++)
            v[c] = (int32_t)((uint32_t)acc[c0 + c] + (uint32_t)corr[c0 + c] -
                             (uint32_t)zpw[c0 + c] * rs);
        _pa_qrequant_rows(mult + c0, shift + c0, v, (uint8_t *)y + c0, m, m, zp, lo, hi, single,
                          avx512);
    }
}
