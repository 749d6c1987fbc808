/* test_qdynamic.c -- pa_dynamic_quantize against the formula written out
 * (libm's nearbyintf for the rounding), on random data of every length up
 * to 100 (the vector tiles and their tails), constant and one-signed data;
 * NaN; NULL pointers refused. */
#include "pyarena.h"
#include "../testhelper.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x13198A2E03707344ULL;

static void reference(const float *x, size_t n, uint8_t *y, float *scale, uint8_t *zp) {
    float lo = 0.0f, hi = 0.0f;
    for (size_t i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float z = nearbyintf(fminf(fmaxf(-lo / s, 0.0f), 255.0f));
    for (size_t i = 0; i < n; i++)
        y[i] = (uint8_t)fminf(fmaxf(nearbyintf(x[i] / s) + z, 0.0f), 255.0f);
    *scale = s, *zp = (uint8_t)z;
}

static void test_dynamic_quantize_matches_formula(void) {
    float x[100];
    uint8_t y[100], ry[100], zp, rzp;
    float s, rs;
    for (int kind = 0; kind < 4; kind++)
        for (size_t n = 1; n <= 100; n++) {
            for (size_t i = 0; i < n; i++) {
                float v = (float)((double)(pa_rand(&seed) % 20001) / 100.0 - 100.0);
                x[i] = kind == 1 ? fabsf(v) : kind == 2 ? -fabsf(v) : kind == 3 ? 7.0f : v;
            }
            CHECK(pa_dynamic_quantize(x, n, y, &s, &zp) == PA_OK);
            reference(x, n, ry, &rs, &rzp);
            CHECK(s == rs && zp == rzp);
            CHECK(memcmp(y, ry, n) == 0);
        }
}

static void test_dynamic_quantize_nan_and_null(void) {
    float x[3] = {2.0f, NAN, -1.0f}, s;
    uint8_t y[3], zp;
    CHECK(pa_dynamic_quantize(x, 3, y, &s, &zp) == PA_OK);
    CHECK(s == 1.0f && zp == 0 && y[0] == 2 && y[1] == 0 && y[2] == 0);
    CHECK(pa_dynamic_quantize(NULL, 3, y, &s, &zp) == PA_ERR_INVALID);
    CHECK(pa_dynamic_quantize(x, 3, NULL, &s, &zp) == PA_ERR_INVALID);
    CHECK(pa_dynamic_quantize(x, 3, y, NULL, &zp) == PA_ERR_INVALID);
    CHECK(pa_dynamic_quantize(x, 3, y, &s, NULL) == PA_ERR_INVALID);
    CHECK(pa_dynamic_quantize(NULL, 0, NULL, &s, &zp) == PA_OK && s == 1.0f && zp == 0);
}

int main(void) {
    RUN(test_dynamic_quantize_matches_formula);
    RUN(test_dynamic_quantize_nan_and_null);
    return pa_test_report();
}
