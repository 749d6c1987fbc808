/* test_qrequant.c -- TFLite's fixed-point requantization (kernels/qrequant.c)
 * against a reference written another way (floor division for the first
 * rounding, half-away-from-zero division for the second), a case worked
 * out by hand from a real model (the keyword spotter whose conv TFLite
 * rounds to 109 where one float rounding gives 108), both types, the clamp,
 * a left shift, the call-list kind, and bad input refused; the one-rounding
 * form (FULLY_CONNECTED's, ruy's) against exact rational arithmetic. */
#include "pyarena.h"
#include "kernels/internal.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

static unsigned long long seed = 0x2545F4914F6CDD1DULL;

static int64_t irand(int64_t lo, int64_t hi) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return lo + (int64_t)(seed % (unsigned long long)(hi - lo + 1));
}

/* floor(a / 2^e) for any sign */
static int64_t floor_pow2(int64_t a, int e) {
    int64_t d = INT64_C(1) << e;
    int64_t q = a / d;
    return (a % d != 0 && a < 0) ? q - 1 : q;
}

static int32_t reference(int32_t acc, int32_t m, int32_t shift, int32_t zp, int32_t lo,
                         int32_t hi) {
    int64_t a = (int64_t)acc * (INT64_C(1) << (shift > 0 ? shift : 0));
    if (a > INT32_MAX)
        a = INT32_MAX;
    if (a < INT32_MIN)
        a = INT32_MIN;
    int64_t h = floor_pow2(a * m + (INT64_C(1) << 30), 31);     /* half up */
    int r = shift > 0 ? 0 : -shift;
    int64_t v = h;
    if (r > 0) {                                                /* half away from 0 */
        int64_t half = INT64_C(1) << (r - 1);
        v = h >= 0 ? (h + half) >> r : -((-h + half) >> r);
    }
    v += zp;
    return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

/* one rounding: acc * m * 2^shift / 2^31 rounded half away from zero,
 * exact in 128 bits (|acc * m| < 2^62), then saturated to int32, + zp,
 * clamped */
static int32_t reference_single(int32_t acc, int32_t m, int32_t shift, int32_t zp, int32_t lo,
                                int32_t hi) {
    __int128 v = (__int128)acc * m;
    __int128 d = (__int128)1 << (31 - shift);
    __int128 q = v / d, rem = v % d;             /* truncated: rem has v's sign */
    if (2 * (rem < 0 ? -rem : rem) >= d)
        q += v < 0 ? -1 : 1;
    if (q > INT32_MAX)
        q = INT32_MAX;
    if (q < INT32_MIN)
        q = INT32_MIN;
    int64_t r = (int64_t)q + zp;
    return (int32_t)(r < lo ? lo : r > hi ? hi : r);
}

static void test_by_hand(void) {
    /* hey_mycroft's conv_2d_32, channel 21: acc 9750, x 0.0766 * w 0.00465
     * / y 0.0320 = 0.0111281 (m 1529361642, shift -6): 108.494 rounds to
     * 6944 / 64 = 108.5 first, then 109; zero point -128 */
    int32_t ms[2] = {1529361642, -6};
    int32_t acc = 9750;
    int8_t y = 0;
    pa_qrequant_t p = {PA_Q_S8, 1, -128, -128, 127, 0};
    CHECK_EQ(pa_qrequant(&p, ms, &acc, &y, 1), PA_OK);
    CHECK_EQ(y, -19);
    acc = -9750;
    CHECK_EQ(pa_qrequant(&p, ms, &acc, &y, 1), PA_OK);
    CHECK_EQ(y, -128);          /* -109 - 128 clamped */
    /* shift 0, m = 2^30 (x 0.5): 3 -> 1.5 -> 2, -3 -> -1.5 -> -1 (half up first) */
    int32_t half[2] = {1 << 30, 0}, accs[2] = {3, -3};
    uint8_t u[2];
    pa_qrequant_t pu = {PA_Q_U8, 1, 100, 0, 255, 0};
    CHECK_EQ(pa_qrequant(&pu, half, accs, u, 2), PA_OK);
    CHECK_EQ(u[0], 102);
    CHECK_EQ(u[1], 99);
    /* one rounding: 9750 x 0.0111281 = 108.494 stays 108; -108.494 -> -108;
     * x 0.5: 3 -> 2, -3 -> -2 (half away from zero) */
    p.single_rounding = 1;
    acc = 9750;
    CHECK_EQ(pa_qrequant(&p, ms, &acc, &y, 1), PA_OK);
    CHECK_EQ(y, -20);
    acc = -9750;
    p.zero_point = 0;
    CHECK_EQ(pa_qrequant(&p, ms, &acc, &y, 1), PA_OK);
    CHECK_EQ(y, -108);
    pu.single_rounding = 1;
    CHECK_EQ(pa_qrequant(&pu, half, accs, u, 2), PA_OK);
    CHECK_EQ(u[0], 102);
    CHECK_EQ(u[1], 98);
}

/* Both paths (the AVX-512 lanes where usable, the portable loops), channel
 * counts that are and are not multiples of the 8 lanes and of the portable
 * block of 16. */
static void matches_reference(int C, int avx512) {
    enum { MAXC = 67, ROWS = 300 };
    const int N = C * ROWS;
    int32_t ms[2 * MAXC], acc[MAXC * ROWS];
    for (int t = 0; t < 40; t++) {
        for (int c = 0; c < C; c++) {
            ms[c] = (int32_t)irand(INT64_C(1) << 30, INT32_MAX);
            ms[C + c] = (int32_t)(t % 5 == 0 ? irand(0, 3) : t % 7 == 0 ? irand(25, 30)
                                                                     : irand(-31, -1));
        }
        if (t % 4 == 1)     /* the extremes: the widest right shift, a zero multiplier */
            ms[2 * C - 1] = -31, ms[0] = t % 8 == 1 ? 0 : ms[0];
        for (int i = 0; i < N; i++)
            acc[i] = (int32_t)(t % 3 == 0 ? irand(-5000, 5000) : irand(-(1 << 24), 1 << 24));
        acc[0] = INT32_MAX, acc[1] = INT32_MIN;     /* the saturations */
        int s8 = t % 2, single = (t / 2) % 2;
        int32_t zp = (int32_t)irand(-20, 20) + (s8 ? 0 : 128);
        int32_t lo = s8 ? (int32_t)irand(-128, -100) : (int32_t)irand(0, 20);
        int32_t hi = s8 ? (int32_t)irand(100, 127) : (int32_t)irand(230, 255);
        pa_qrequant_t p = {s8 ? PA_Q_S8 : PA_Q_U8, C, zp, lo, hi, single};
        uint8_t y[MAXC * ROWS];
        CHECK_EQ(_pa_qrequant_isa(&p, ms, acc, y, N, avx512), PA_OK);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            int32_t want = single ? reference_single(acc[i], ms[i % C], ms[C + i % C], zp, lo, hi)
                                  : reference(acc[i], ms[i % C], ms[C + i % C], zp, lo, hi);
            int32_t got = s8 ? (int32_t)(int8_t)y[i] : (int32_t)y[i];
            bad += got != want;
        }
        CHECK_EQ(bad, 0);
    }
}

static void test_matches_reference(void) {
    const int counts[] = {1, 7, 8, 16, 19, 64, 67};
    for (int avx512 = 0; avx512 < 2; avx512++)
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            matches_reference(counts[i], avx512);
}

static void test_call_list(void) {
    int32_t ms[4] = {1 << 30, 1 << 30, -1, 0}, acc[4] = {10, 10, 11, 11};
    int8_t y[4] = {0};
    pa_qrequant_t p = {PA_Q_S8, 2, 0, -128, 127, 0};
    pa_call_t call;
    memset(&call, 0, sizeof call);
    call.kind = PA_CALL_QREQUANT, call.params = &p, call.w = (const float *)ms;
    call.a = acc, call.y = y, call.i[0] = 4;
    size_t failed = 99;
    CHECK_EQ(pa_calls_run(&call, 1, NULL, &failed), PA_OK);
    CHECK_EQ(failed, 1u);
    /* channel 0: x 0.5 then / 2 (10 -> 5 -> 2.5 -> 3); channel 1: x 0.5 (10 -> 5, 11 -> 5.5 -> 6) */
    CHECK_EQ(y[0], 3);
    CHECK_EQ(y[1], 5);
    CHECK_EQ(y[2], 3);
    CHECK_EQ(y[3], 6);
}

static void test_refuses_bad_input(void) {
    int32_t ms[2] = {1 << 30, -3}, acc[2] = {0, 0};
    int8_t y[2];
    pa_qrequant_t p = {PA_Q_S8, 1, 0, -128, 127, 0};
    CHECK_EQ(pa_qrequant(NULL, ms, acc, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, NULL, acc, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, ms, NULL, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, ms, acc, NULL, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, ms, acc, y, -1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, ms, acc, y, 0), PA_OK);
    pa_qrequant_t q = p;
    q.channels = 0;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
    q = p, q.channels = 2;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 3), PA_ERR_INVALID);   /* not a multiple */
    q = p, q.type = PA_Q_S32;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
    q = p, q.y_min = 5, q.y_max = 4;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
    q = p, q.y_max = 128;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
    int32_t bad_m[2] = {-1, -3}, bad_s[2] = {1 << 30, 31}, bad_s2[2] = {1 << 30, -32};
    CHECK_EQ(pa_qrequant(&p, bad_m, acc, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, bad_s, acc, y, 1), PA_ERR_INVALID);
    CHECK_EQ(pa_qrequant(&p, bad_s2, acc, y, 1), PA_ERR_INVALID);
    q = p, q.single_rounding = 2;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
    q = p, q.single_rounding = -1;
    CHECK_EQ(pa_qrequant(&q, ms, acc, y, 1), PA_ERR_INVALID);
}

int main(void) {
    RUN(test_by_hand);
    RUN(test_matches_reference);
    RUN(test_call_list);
    RUN(test_refuses_bad_input);
    return pa_test_report();
}
