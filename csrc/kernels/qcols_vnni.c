/* kernels/qcols_vnni.c -- the few-columns 8-bit product's AVX-512 VNNI
 * tile.
 *
 * Up to four rows of A against one packed column (qcols.h): each step
 * loads 64 bytes of each row and of the column and adds their products
 * into one register of 16 int32 per row (vpdpbusd: the row's bytes
 * unsigned, the column's signed), the loads of the column serving the
 * rows; the last step reads only the bytes of A that are there (a masked
 * load; the column's bytes past k are zeros).  A row's 16 partial sums
 * are then added up.  Integer sums: the same bits as the portable tile
 * (qcols.c), which tests/c/kernels/test_qcols.c checks.  Picked by
 * pa_qcols_run where the processor has AVX512-VNNI (_pa_avx512vnni_usable,
 * cpu.c). */
#include "qcols.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

#define VNNI PA_VNNI_TARGET

/* One step of 64 bytes of k: each row's bytes (loaded by LOAD) against
 * NC columns, the row's byte sums by vpsadbw. */
#define QC_ROW(R, LOAD)                                                           \
    do {                                                                          \
        __m512i x = LOAD(r##R);                                                   \
        s##R = _mm512_add_epi64(s##R, _mm512_sad_epu8(x, zero));                  \
        c##R##0 = _mm512_dpbusd_epi32(c##R##0, x, v0);                            \
        if (NC > 1) {                                                             \
            c##R##1 = _mm512_dpbusd_epi32(c##R##1, x, v1);                        \
            c##R##2 = _mm512_dpbusd_epi32(c##R##2, x, v2);                        \
            c##R##3 = _mm512_dpbusd_epi32(c##R##3, x, v3);                        \
        }                                                                         \
    } while (0)
#define QC_FULL(p) _mm512_loadu_si512((const void *)((p) + q))
#define QC_PART(p) _mm512_maskz_loadu_epi8(tail, (p) + q)
#define QC_STEP(LOAD)                                                             \
    do {                                                                          \
        __m512i v0 = _mm512_loadu_si512((const void *)(w + q)), v1 = v0, v2 = v0, v3 = v0; \
        if (NC > 1) {                                                             \
            v1 = _mm512_loadu_si512((const void *)(w1 + q));                      \
            v2 = _mm512_loadu_si512((const void *)(w2 + q));                      \
            v3 = _mm512_loadu_si512((const void *)(w3 + q));                      \
        }                                                                         \
        QC_ROW(0, LOAD); QC_ROW(1, LOAD); QC_ROW(2, LOAD); QC_ROW(3, LOAD);       \
    } while (0)
#define QC_ZERO(R)                                                                \
    __m512i s##R = _mm512_setzero_si512(), c##R##0 = s##R, c##R##1 = s##R,        \
            c##R##2 = s##R, c##R##3 = s##R
#define QC_OUT(R)                                                                 \
    do {                                                                          \
        rs[R] = (uint32_t)_mm512_reduce_add_epi64(s##R);                          \
        d[R][0] = _mm512_reduce_add_epi32(c##R##0);                               \
        if (NC > 1) {                                                             \
            d[R][1] = _mm512_reduce_add_epi32(c##R##1);                           \
            d[R][2] = _mm512_reduce_add_epi32(c##R##2);                           \
            d[R][3] = _mm512_reduce_add_epi32(c##R##3);                           \
        }                                                                         \
    } while (0)

/* NC (1 or QC_NT) columns; rows past mr repeat row 0 and columns past nc
 * column 0 (computed, not stored). */
#define QC_TILE(NAME, NCOLS)                                                         \
    VNNI static void NAME(const uint8_t *const *a, int mr, int64_t k, const int8_t *w0, \
                          int64_t kp, int nc, int32_t dot[QC_MR][QC_NT],          \
                          uint32_t rsum[QC_MR]) {                                 \
        const int NC = (NCOLS);                                                   \
        const uint8_t *r0 = a[0], *r1 = mr > 1 ? a[1] : a[0];                     \
        const uint8_t *r2 = mr > 2 ? a[2] : a[0], *r3 = mr > 3 ? a[3] : a[0];     \
        const int8_t *w = w0, *w1 = nc > 1 ? w0 + kp : w0;                        \
        const int8_t *w2 = nc > 2 ? w0 + 2 * kp : w0, *w3 = nc > 3 ? w0 + 3 * kp : w0; \
        const __m512i zero = _mm512_setzero_si512();                              \
        QC_ZERO(0); QC_ZERO(1); QC_ZERO(2); QC_ZERO(3);                           \
        (void)w1, (void)w2, (void)w3;                                             \
        int64_t q = 0;                                                            \
        for (; q + QC_KB <= k; q += QC_KB)                                        \
            QC_STEP(QC_FULL);                                                     \
        if (q < k) {                /* the last 1-63 bytes of K */                \
            __mmask64 tail = (__mmask64)(~0ULL >> (QC_KB - (k - q)));             \
            QC_STEP(QC_PART);                                                     \
        }                                                                         \
        int32_t d[QC_MR][QC_NT];                                                  \
        uint32_t rs[QC_MR];                                                       \
        QC_OUT(0); QC_OUT(1); QC_OUT(2); QC_OUT(3);                               \
        for (int r = 0; r < mr; r++) {                                            \
            rsum[r] = rs[r];                                                      \
            for (int c = 0; c < nc; c++)                                          \
                dot[r][c] = d[r][c];                                              \
        }                                                                         \
    }

QC_TILE(tile_1, 1)
QC_TILE(tile_4, QC_NT)

VNNI static void tile_vnni(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                           int64_t kp, int nc, int32_t dot[QC_MR][QC_NT],
                           uint32_t rsum[QC_MR]) {
    if (nc == 1)
        tile_1(a, mr, k, w, kp, nc, dot, rsum);
    else
        tile_4(a, mr, k, w, kp, nc, dot, rsum);
}

const _pa_qcol_tile_fn _pa_qcol_tile_vnni = tile_vnni;

#else

const _pa_qcol_tile_fn _pa_qcol_tile_vnni = 0;

#endif
