/* testhelper.h -- a tiny CHECK harness for the C tests (no Python).
 *
 * Hangs: RUN(test) arms alarm() for PA_TEST_TIMEOUT seconds (environment
 * variable, default 60; 0 disables it).  A test still running then -- a
 * loop in the code under test that never ends -- prints
 * "TIMEOUT <file>: <test> ran past N s" and the binary exits with status
 * 142 (128 + SIGALRM, as if the alarm had killed it), so a hang is a
 * failure that names its test.  csrc/Makefile also runs each binary under
 * timeout(1) (status 124, or 137 once killed), a backstop for a binary
 * whose alarm cannot fire. */
#ifndef PA_TESTHELPER_H
#define PA_TESTHELPER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The message the alarm handler writes (built before the test starts:
 * a signal handler may only call async-signal-safe functions). */
static char pa_test_timeout_msg[256];
static size_t pa_test_timeout_len;

static void pa_test_on_alarm(int sig) {
    (void)sig;
    ssize_t w = write(2, pa_test_timeout_msg, pa_test_timeout_len);
    (void)w;
    _exit(142); /* 128 + SIGALRM: "ended by the alarm" */
}

static inline void pa_test_arm(const char *file, const char *name) {
    const char *env = getenv("PA_TEST_TIMEOUT");
    unsigned secs = env && *env ? (unsigned)strtoul(env, NULL, 10) : 60;
    int n = snprintf(pa_test_timeout_msg, sizeof pa_test_timeout_msg,
                     "\nTIMEOUT %s: %s ran past %u s\n", file, name, secs);
    pa_test_timeout_len = n < 0 ? 0 : (size_t)n < sizeof pa_test_timeout_msg
                                          ? (size_t)n : sizeof pa_test_timeout_msg - 1;
    fflush(stdout);
    signal(SIGALRM, pa_test_on_alarm);
    alarm(secs);
}

#define RUN(test)                                                          \
    do {                                                                   \
        int before_ = pa_test_failures;                                    \
        pa_test_arm(__FILE__, #test);                                      \
        test();                                                            \
        alarm(0);                                                          \
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
