/* kernels/qrows_vnni.c -- the few-rows 8-bit product's AVX-512 VNNI tiles.
 *
 * Rows of A against one group of 128 packed columns (qrows.h).  One row
 * (a recurrent step: h against R) or two: 8 accumulators of 16 int32 per
 * row, so that eight vpdpbusd chains are in flight, each weight load
 * serving the rows.  Three to six rows (a sequence's input product): half
 * the group at a time, 4 registers of columns by 6 rows, so that a load of
 * weights serves 6 rows.  Each step of 4 bytes of K broadcasts a row's 4
 * bytes and adds their products with each column's 4 weights; a last
 * partial group reads only the bytes of A that are there (the weights past
 * K are zeros).  Integer sums: the same bits as the portable tile
 * (qrows.c), which tests/c/kernels/test_qrows.c checks.  Picked by
 * pa_qrows_run where the processor has AVX512-VNNI (_pa_avx512vnni_usable,
 * cpu.c). */
#include "qrows.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

#define VNNI PA_VNNI_TARGET

/* MR constant at each call; the loops over the 8 registers and the rows
 * written out, so that the 8 * MR accumulators stay in registers (GCC at
 * -O2 kept a loop over an array of them, in memory). */
#define QR_DP(R, J) c##R##J = _mm512_dpbusd_epi32(c##R##J, b##R, w##J)
#define QR_DP8(R)                                                                 \
    do {                                                                          \
        QR_DP(R, 0); QR_DP(R, 1); QR_DP(R, 2); QR_DP(R, 3);                       \
        QR_DP(R, 4); QR_DP(R, 5); QR_DP(R, 6); QR_DP(R, 7);                       \
    } while (0)
#define QR_LOADW(G)                                                               \
    const int8_t *wg = w + (G) * QR_NC * 4;                                       \
    __m512i w0 = _mm512_loadu_si512((const void *)wg);                            \
    __m512i w1 = _mm512_loadu_si512((const void *)(wg + 64));                     \
    __m512i w2 = _mm512_loadu_si512((const void *)(wg + 128));                    \
    __m512i w3 = _mm512_loadu_si512((const void *)(wg + 192));                    \
    __m512i w4 = _mm512_loadu_si512((const void *)(wg + 256));                    \
    __m512i w5 = _mm512_loadu_si512((const void *)(wg + 320));                    \
    __m512i w6 = _mm512_loadu_si512((const void *)(wg + 384));                    \
    __m512i w7 = _mm512_loadu_si512((const void *)(wg + 448))
#define QR_ZERO(R)                                                                \
    __m512i c##R##0 = _mm512_setzero_si512(), c##R##1 = c##R##0, c##R##2 = c##R##0, \
            c##R##3 = c##R##0, c##R##4 = c##R##0, c##R##5 = c##R##0, c##R##6 = c##R##0, \
            c##R##7 = c##R##0
#define QR_STORE(R)                                                               \
    do {                                                                          \
        _mm512_storeu_si512((void *)(acc[R] + 0), c##R##0);                       \
        _mm512_storeu_si512((void *)(acc[R] + 16), c##R##1);                      \
        _mm512_storeu_si512((void *)(acc[R] + 32), c##R##2);                      \
        _mm512_storeu_si512((void *)(acc[R] + 48), c##R##3);                      \
        _mm512_storeu_si512((void *)(acc[R] + 64), c##R##4);                      \
        _mm512_storeu_si512((void *)(acc[R] + 80), c##R##5);                      \
        _mm512_storeu_si512((void *)(acc[R] + 96), c##R##6);                      \
        _mm512_storeu_si512((void *)(acc[R] + 112), c##R##7);                     \
    } while (0)

VNNI static void tile1(const uint8_t *const *a, int64_t k, const int8_t *w,
                       int32_t acc[QR_MR][QR_NC]) {
    QR_ZERO(0);
    const int64_t full = k / 4;
    for (int64_t g = 0; g < full; g++) {
        __m512i b0 = _mm512_set1_epi32((int)_pa_load4(a[0] + 4 * g, 4));
        QR_LOADW(g);
        QR_DP8(0);
    }
    if (4 * full < k) {                     /* the last 1-3 bytes of K */
        __m512i b0 = _mm512_set1_epi32((int)_pa_load4(a[0] + 4 * full, k - 4 * full));
        QR_LOADW(full);
        QR_DP8(0);
    }
    QR_STORE(0);
}

VNNI static void tile2(const uint8_t *const *a, int64_t k, const int8_t *w,
                       int32_t acc[QR_MR][QR_NC]) {
    QR_ZERO(0);
    QR_ZERO(1);
    const int64_t full = k / 4;
    for (int64_t g = 0; g < full; g++) {
        __m512i b0 = _mm512_set1_epi32((int)_pa_load4(a[0] + 4 * g, 4));
        __m512i b1 = _mm512_set1_epi32((int)_pa_load4(a[1] + 4 * g, 4));
        QR_LOADW(g);
        QR_DP8(0);
        QR_DP8(1);
    }
    if (4 * full < k) {
        __m512i b0 = _mm512_set1_epi32((int)_pa_load4(a[0] + 4 * full, k - 4 * full));
        __m512i b1 = _mm512_set1_epi32((int)_pa_load4(a[1] + 4 * full, k - 4 * full));
        QR_LOADW(full);
        QR_DP8(0);
        QR_DP8(1);
    }
    QR_STORE(0);
    QR_STORE(1);
}

/* Three to six rows (the input product of a whole sequence): half a
 * group at a time, 4 registers of columns by 6 rows, so that each load of
 * weights serves 6 rows (rows past mr repeat row 0; not stored). */
#define QR_DP4(R)                                                                 \
    do {                                                                          \
        __m512i b = _mm512_set1_epi32((int)_pa_load4(r##R + 4 * g, n4));              \
        d##R##0 = _mm512_dpbusd_epi32(d##R##0, b, v0);                            \
        d##R##1 = _mm512_dpbusd_epi32(d##R##1, b, v1);                            \
        d##R##2 = _mm512_dpbusd_epi32(d##R##2, b, v2);                            \
        d##R##3 = _mm512_dpbusd_epi32(d##R##3, b, v3);                            \
    } while (0)
#define QR_ZERO4(R)                                                               \
    __m512i d##R##0 = _mm512_setzero_si512(), d##R##1 = d##R##0, d##R##2 = d##R##0, \
            d##R##3 = d##R##0
#define QR_STORE4(R)                                                              \
    do {                                                                          \
        _mm512_storeu_si512((void *)(acc[R] + h + 0), d##R##0);                   \
        _mm512_storeu_si512((void *)(acc[R] + h + 16), d##R##1);                  \
        _mm512_storeu_si512((void *)(acc[R] + h + 32), d##R##2);                  \
        _mm512_storeu_si512((void *)(acc[R] + h + 48), d##R##3);                  \
    } while (0)

VNNI static void tile6(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                       int32_t acc[QR_MR][QR_NC]) {
    const uint8_t *r0 = a[0], *r1 = a[1], *r2 = a[2];
    const uint8_t *r3 = mr > 3 ? a[3] : a[0], *r4 = mr > 4 ? a[4] : a[0];
    const uint8_t *r5 = mr > 5 ? a[5] : a[0];
    const int64_t full = k / 4;
    for (int64_t h = 0; h < QR_NC; h += 64) {
        QR_ZERO4(0); QR_ZERO4(1); QR_ZERO4(2); QR_ZERO4(3); QR_ZERO4(4); QR_ZERO4(5);
#define QR_G6(G, N4)                                                              \
    do {                                                                          \
        const int64_t g = (G), n4 = (N4);                                         \
        const int8_t *wg = w + g * QR_NC * 4 + h * 4;                             \
        __m512i v0 = _mm512_loadu_si512((const void *)wg);                        \
        __m512i v1 = _mm512_loadu_si512((const void *)(wg + 64));                 \
        __m512i v2 = _mm512_loadu_si512((const void *)(wg + 128));                \
        __m512i v3 = _mm512_loadu_si512((const void *)(wg + 192));                \
        QR_DP4(0); QR_DP4(1); QR_DP4(2); QR_DP4(3); QR_DP4(4); QR_DP4(5);         \
    } while (0)
        for (int64_t q = 0; q < full; q++)
            QR_G6(q, 4);
        if (4 * full < k)                   /* the last 1-3 bytes of K */
            QR_G6(full, k - 4 * full);
#undef QR_G6
        QR_STORE4(0); QR_STORE4(1); QR_STORE4(2); QR_STORE4(3); QR_STORE4(4); QR_STORE4(5);
    }
}

VNNI static void tile_vnni(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                           int32_t acc[QR_MR][QR_NC]) {
    if (mr > 2)
        tile6(a, mr, k, w, acc);
    else if (mr == 2)
        tile2(a, k, w, acc);
    else
        tile1(a, k, w, acc);
}

const _pa_qr_tile_fn _pa_qr_tile_vnni = tile_vnni;

#else

const _pa_qr_tile_fn _pa_qr_tile_vnni = 0;

#endif
