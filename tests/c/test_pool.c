/* test_pool.c -- C tests for the work pool front end (bad input, stats). */
#include "pyarena.h"
#include "testhelper.h"

#include <stdint.h>
#include <string.h>

static void test_basic(void) {
    pa_pool_t *p = pa_pool_create(NULL);
    CHECK(p != NULL);
    pa_status_t s;
    char *a = pa_pool_alloc_status(p, 100, &s);
    CHECK(a != NULL && s == PA_OK);
    CHECK(((uintptr_t)a & 63) == 0);
    memset(a, 1, 100);
    CHECK(pa_pool_block_size(p, a) >= 100);
    void *z1 = pa_pool_alloc(p, 0), *z2 = pa_pool_alloc(p, 0);
    CHECK(z1 && z2 && z1 != z2);
    CHECK(pa_pool_alloc_status(p, SIZE_MAX, &s) == NULL);
    CHECK_EQ(s, PA_ERR_OVERFLOW);
    CHECK_EQ(pa_pool_free(p, a), PA_OK);
    CHECK(pa_pool_free(p, a) != PA_OK); /* DOUBLE_FREE once the zones land */
    int local;
    CHECK_EQ(pa_pool_free(p, &local), PA_ERR_FOREIGN);
    CHECK_EQ(pa_pool_check(p), 0u);
    CHECK_EQ(pa_pool_destroy(p), PA_OK);
    CHECK_EQ(pa_pool_free(p, z1), PA_ERR_STATE);
    CHECK_EQ(pa_pool_destroy(p), PA_ERR_STATE);
}

int main(void) {
    RUN(test_basic);
    return pa_test_report();
}
