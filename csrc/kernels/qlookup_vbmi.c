/* kernels/qlookup_vbmi.c -- the 256-entry byte table lookup of the 8-bit
 * element-wise kernels (qelementwise.c: QLinearLookup's tables, and
 * QLinearAdd / QLinearMul runs against one value) with AVX512-VBMI: the
 * table in four registers, 64 bytes at a time by two two-register byte
 * permutes (vpermi2b: each index's low 7 bits pick among 128 bytes) and
 * a blend on each index's top bit.  A byte at a time the lookups of a
 * text detector's hard-swish layers took 0.45 ms per 32 x 160 x 160
 * tensor.  The same bytes as the scalar loop (a table read is exact);
 * tests/c/kernels/test_qelementwise.c compares them.  Picked where
 * _pa_avx512vbmi_usable (cpu.c). */
#include "isa.h"

#if PA_AVX512_BUILT

#include <immintrin.h>

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void
lookup_vbmi(const uint8_t *table, const uint8_t *x, uint8_t *y, int64_t n) {
    const __m512i t0 = _mm512_loadu_si512((const void *)table);
    const __m512i t1 = _mm512_loadu_si512((const void *)(table + 64));
    const __m512i t2 = _mm512_loadu_si512((const void *)(table + 128));
    const __m512i t3 = _mm512_loadu_si512((const void *)(table + 192));
    for (int64_t i = 0; i < n; i += 64) {
        __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        __m512i v = _mm512_maskz_loadu_epi8(m, (const void *)(x + i));
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1);
        __m512i hi = _mm512_permutex2var_epi8(t2, v, t3);
        __m512i r = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
        _mm512_mask_storeu_epi8((void *)(y + i), m, r);
    }
}

const _pa_lookup256_fn _pa_lookup256_vbmi = lookup_vbmi;

#else

const _pa_lookup256_fn _pa_lookup256_vbmi = 0;

#endif
