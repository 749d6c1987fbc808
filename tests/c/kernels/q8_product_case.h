/* q8_product_case.h -- the case the packed 8-bit products' tests share
 * (test_qrows.c: a few rows of A, test_qcols.c: a few columns of B): A
 * (m x k uint8) times W (k x n, int8 or uint8) with the zero points
 * taken off, against an int64 reference; the portable tile and the VNNI
 * one (where the processor has it) through the product's `run_isa`, and
 * its public run, bit for bit.  Random values, or only the extremes
 * (a_zp 0 / 255 against weights -128 / 127 / 255). */
#ifndef PYARENA_TEST_Q8_PRODUCT_CASE_H
#define PYARENA_TEST_Q8_PRODUCT_CASE_H

#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct q8_product {
    size_t (*packed_size)(int64_t k, int64_t n);
    pa_status_t (*pack)(const void *w, pa_qtype_t w_type, const int32_t *w_zp, int64_t k,
                        int64_t n, void *packed, size_t size);
    pa_status_t (*run_isa)(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                           int32_t *y, int isa);
    pa_status_t (*run)(const void *packed, const uint8_t *a, int64_t m, int32_t a_zp,
                       int32_t *y);
} q8_product_t;

static inline int64_t q8_rnd(unsigned long long *seed, int64_t lo, int64_t hi) {
    return lo + (int64_t)(pa_rand(seed) % (unsigned long long)(hi - lo + 1));
}

/* One case; 1 when the VNNI tile ran it. */
static inline int q8_check_case(const q8_product_t *p, unsigned long long *seed, int64_t m,
                                int64_t k, int64_t n, int s8, int with_zp, int extreme) {
    uint8_t *a = malloc((size_t)(m * k + 1));
    uint8_t *w = malloc((size_t)(k * n + 1));
    int32_t *zp = malloc((size_t)(n + 1) * sizeof *zp), *y = malloc((size_t)(m * n + 1) * sizeof *y);
    int32_t a_zp = extreme ? (int32_t)(q8_rnd(seed, 0, 1) * 255) : (int32_t)q8_rnd(seed, 0, 255);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = extreme ? (uint8_t)(q8_rnd(seed, 0, 1) * 255) : (uint8_t)q8_rnd(seed, 0, 255);
    for (int64_t i = 0; i < k * n; i++)
        w[i] = extreme ? (uint8_t)(s8 ? (q8_rnd(seed, 0, 1) ? 0x80 : 0x7F) : 255 * q8_rnd(seed, 0, 1))
                       : (uint8_t)q8_rnd(seed, 0, 255);
    for (int64_t j = 0; j < n; j++)
        zp[j] = with_zp ? (int32_t)(s8 ? q8_rnd(seed, -128, 127) : q8_rnd(seed, 0, 255)) : 0;
    for (int64_t i = 0; i < m; i++)             /* the reference */
        for (int64_t j = 0; j < n; j++) {
            int64_t ref = 0;
            for (int64_t q = 0; q < k; q++) {
                int64_t wv = s8 ? (int8_t)w[q * n + j] : w[q * n + j];
                ref += ((int64_t)a[i * k + q] - a_zp) * (wv - zp[j]);
            }
            y[i * n + j] = (int32_t)ref;
        }
    size_t psize = p->packed_size(k, n);
    int32_t *packed = malloc(psize), *y2 = malloc((size_t)(m * n + 1) * sizeof *y2);
    CHECK_EQ(p->pack(w, s8 ? PA_Q_S8 : PA_Q_U8, with_zp ? zp : NULL, k, n, packed, psize), PA_OK);
    int vnni = 0;
    for (int isa = 0; isa < 2; isa++) {
        memset(y2, 0xA5, (size_t)(m * n) * sizeof *y2);
        pa_status_t st = p->run_isa(packed, a, m, a_zp, y2, isa);
        if (isa == 1 && st == PA_ERR_STATE)
            continue;               /* no VNNI here */
        CHECK_EQ(st, PA_OK);
        vnni += isa;
        CHECK(memcmp(y, y2, (size_t)(m * n) * sizeof *y) == 0);
    }
    CHECK_EQ(p->run(packed, a, m, a_zp, y2), PA_OK);
    CHECK(memcmp(y, y2, (size_t)(m * n) * sizeof *y) == 0);
    free(packed), free(y2);
    free(a), free(w), free(zp), free(y);
    return vnni;
}

#endif /* PYARENA_TEST_Q8_PRODUCT_CASE_H */
