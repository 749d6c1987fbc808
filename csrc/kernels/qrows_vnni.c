/* kernels/qrows_vnni.c -- the few-rows 8-bit product's AVX-512 VNNI tile.
 *
 * One or two rows of A against one group of 128 packed columns (qrows.h):
 * 8 accumulators of 16 int32 per row, so that eight vpdpbusd chains are in
 * flight for a single row (a recurrent step: one row of h against R).
 * Each step of 4 bytes of K broadcasts a row's 4 bytes and adds their
 * products with each column's 4 weights; a last partial group reads only
 * the bytes of A that are there (the weights past K are zeros).  Integer
 * sums: the same bits as the portable tile (qrows.c), which
 * tests/c/kernels/test_qrows.c checks.  Picked by pa_qrows_run where the
 * processor has AVX512-VNNI (_pa_avx512vnni_usable, cpu.c). */
#include "qrows.h"
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

VNNI static inline uint32_t load4(const uint8_t *p, int64_t n) {
    uint32_t v = 0;
    memcpy(&v, p, (size_t)n);
    return v;
}

/* MR constant at each call: the compiler keeps 8 * MR registers. */
VNNI static inline __attribute__((always_inline)) void
tile_rows(const uint8_t *const *a, const int MR, int64_t k, const int8_t *w,
          int32_t acc[QR_MR][QR_NC]) {
    __m512i c[QR_MR][8];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < 8; j++)
            c[r][j] = _mm512_setzero_si512();
    const int64_t full = k / 4, kq = (k + 3) / 4;
    for (int64_t g = 0; g < kq; g++) {
        __m512i b[QR_MR];
        for (int r = 0; r < MR; r++)
            b[r] = _mm512_set1_epi32((int)(g < full ? load4(a[r] + 4 * g, 4)
                                                    : load4(a[r] + 4 * g, k - 4 * g)));
        const int8_t *wg = w + g * QR_NC * 4;
        for (int j = 0; j < 8; j++) {
            __m512i wv = _mm512_loadu_si512((const void *)(wg + 64 * j));
            for (int r = 0; r < MR; r++)
                c[r][j] = _mm512_dpbusd_epi32(c[r][j], b[r], wv);
        }
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < 8; j++)
            _mm512_storeu_si512((void *)(acc[r] + 16 * j), c[r][j]);
}

VNNI static void tile_vnni(const uint8_t *const *a, int mr, int64_t k, const int8_t *w,
                           int32_t acc[QR_MR][QR_NC]) {
    if (mr == 2)
        tile_rows(a, 2, k, w, acc);
    else
        tile_rows(a, 1, k, w, acc);
}

const _pa_qr_tile_fn _pa_qr_tile_vnni = tile_vnni;

#else

const _pa_qr_tile_fn _pa_qr_tile_vnni = 0;

#endif
