/* testhelper.h -- a tiny CHECK harness for the C tests (no Python). */
#ifndef PA_TESTHELPER_H
#define PA_TESTHELPER_H

#include <stdio.h>
#include <stdlib.h>

static int pa_test_failures = 0;
static int pa_test_checks = 0;

#define CHECK(cond)                                                        \
    do {                                                                   \
        pa_test_checks++;                                                  \
        if (!(cond)) {                                                     \
            pa_test_failures++;                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
        }                                                                  \
    } while (0)

#define CHECK_EQ(a, b) CHECK((a) == (b))

#define RUN(test)                                                          \
    do {                                                                   \
        int before_ = pa_test_failures;                                    \
        test();                                                            \
        printf("%s %s\n", pa_test_failures == before_ ? "ok  " : "FAIL",   \
               #test);                                                     \
    } while (0)

/* Prints the plain closing line and returns the exit status. */
static inline int pa_test_report(void) {
    printf("%d passed, %d failed\n", pa_test_checks - pa_test_failures,
           pa_test_failures);
    return pa_test_failures ? 1 : 0;
}

/* xorshift64*: deterministic random numbers for the fuzz-style tests. */
static inline unsigned long long pa_rand(unsigned long long *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

#endif
