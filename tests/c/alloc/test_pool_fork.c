/* test_pool_fork.c -- fork() while other threads are inside pool calls.
 *
 * Threads hammer three pools (alloc/free, and stats/trim/check/reclaim,
 * and a create/destroy loop that moves handles on and off the registry)
 * while the main thread forks again and again.  Each child allocates,
 * writes, checks and frees in every pool under an alarm(): a lock left
 * held by a thread that is gone in the child would make it spin until the
 * alarm kills it, which the parent sees as a signal.  Before the
 * pthread_atfork handlers in pool.c, 1-2 in every 40-60 children hung.
 *
 * Under AddressSanitizer or ThreadSanitizer the threads park at each fork
 * instead (see park()): the pool calls malloc (span descriptors, page
 * maps, handles), and the sanitizers' own allocators (GCC 12's ASan,
 * clang 14's TSan) take no lock around fork(), so a child whose parent was
 * inside calloc() at the fork can wait forever in the sanitizer's
 * allocator (seen: ASan in SizeClassAllocator64::GetFromAllocator, 1 run
 * in 15; TSan in LargeMmapAllocator::Allocate, 1 run in 30).  glibc's
 * malloc is fork-safe, so the plain build keeps the full race; the
 * sanitizer builds still run the atfork handlers and the child's pool use
 * under their checkers. */
#define _POSIX_C_SOURCE 200809L
#include "pyarena.h"
#include "../testhelper.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define POOLS 3
#define FORKS 60

static pa_pool_t *pools[POOLS];
static atomic_int stop;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PARK_AT_FORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PARK_AT_FORK 1
#endif
#endif
#ifndef PARK_AT_FORK
#define PARK_AT_FORK 0
#endif

static atomic_int forking; /* the main thread is about to fork (sanitizers) */
static atomic_int parked;  /* threads waiting for it */

/* Between two pool calls: wait while the main thread forks (sanitizers). */
static void park(void) {
    if (!PARK_AT_FORK || !atomic_load(&forking)) return;
    atomic_fetch_add(&parked, 1);
    while (atomic_load(&forking) && !atomic_load(&stop)) sched_yield();
    atomic_fetch_sub(&parked, 1);
}

static void *hammer(void *arg) {
    unsigned long long seed = (unsigned long long)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
    void *held[16] = {0};
    while (!atomic_load(&stop)) {
        park();
        pa_pool_t *p = pools[pa_rand(&seed) % POOLS];
        int i = (int)(pa_rand(&seed) % 16);
        if (held[i]) {
            /* each slot keeps its pool: index by slot, pool by slot */
            pa_pool_free(pools[i % POOLS], held[i]);
            held[i] = NULL;
        } else {
            held[i] = pa_pool_alloc(pools[i % POOLS], 1 + pa_rand(&seed) % 300000, NULL);
        }
        (void)p;
    }
    for (int i = 0; i < 16; i++)
        if (held[i]) pa_pool_free(pools[i % POOLS], held[i]);
    return NULL;
}

static void *janitor(void *arg) {
    (void)arg;
    unsigned n = 0;
    while (!atomic_load(&stop)) {
        park();
        pa_pool_t *p = pools[n % POOLS];
        pa_pool_stats_t st;
        switch (n++ % 4) {
        case 0: pa_pool_stats(p, &st); break;
        case 1: pa_pool_trim(p, 0, NULL); break;
        case 2: pa_pool_check(p); break;
        default: pa_pool_reclaim(p); break;
        }
    }
    return NULL;
}

/* creates and destroys pools: the registry changes during the forks */
static void *churn(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        park();
        pa_pool_t *p = pa_pool_create(NULL, NULL);
        void *b = pa_pool_alloc(p, 5000, NULL);
        pa_pool_free(p, b);
        pa_pool_destroy(p);
    }
    return NULL;
}

/* The child: use every pool, then exit 0 (3 on a wrong answer). */
static void child(void) {
    alarm(5);
    for (int k = 0; k < POOLS; k++) {
        for (size_t n = 1; n <= ((size_t)1 << 21); n *= 7) {
            unsigned char *b = pa_pool_alloc(pools[k], n, NULL);
            if (!b) _exit(3);
            memset(b, 0xA5, n);
            if (pa_pool_free(pools[k], b) != PA_OK) _exit(3);
        }
        if (pa_pool_check(pools[k]) != 0) _exit(3);
    }
    pa_pool_t *fresh = pa_pool_create(NULL, NULL);
    if (!fresh || pa_pool_destroy(fresh) != PA_OK) _exit(3);
    _exit(0);
}

static void test_fork_while_threads_use_pools(void) {
    pa_pool_config_t cfg;
    for (int k = 0; k < POOLS; k++) {
        pa_pool_config_default(&cfg);
        cfg.mode = (pa_pool_mode_t)k;
        pools[k] = pa_pool_create(&cfg, NULL);
        CHECK(pools[k] != NULL);
    }
    atomic_init(&stop, 0);
    atomic_init(&forking, 0);
    atomic_init(&parked, 0);
    pthread_t th[4];
    pthread_create(&th[0], NULL, hammer, (void *)1);
    pthread_create(&th[1], NULL, hammer, (void *)2);
    pthread_create(&th[2], NULL, janitor, NULL);
    pthread_create(&th[3], NULL, churn, NULL);
    int ok = 0, signalled = 0, failed = 0;
    for (int f = 0; f < FORKS; f++) {
        for (volatile int spin = 0; spin < 20000; spin++) {
        }
        if (PARK_AT_FORK) {
            atomic_store(&forking, 1);
            while (atomic_load(&parked) < 4) sched_yield();
        }
        pid_t pid = fork();
        if (pid == 0) child();
        atomic_store(&forking, 0);
        CHECK(pid > 0);
        if (pid < 0) break;
        int ws = 0;
        waitpid(pid, &ws, 0);
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) ok++;
        else if (WIFSIGNALED(ws)) signalled++;
        else failed++;
        if (signalled || failed) break; /* one hang is enough to fail */
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    if (signalled || failed)
        fprintf(stderr, "fork: %d ok, %d killed (hung), %d wrong\n", ok, signalled, failed);
    CHECK_EQ(ok, FORKS);
    CHECK_EQ(signalled, 0);
    CHECK_EQ(failed, 0);
    for (int k = 0; k < POOLS; k++) {
        CHECK_EQ(pa_pool_check(pools[k]), 0u);
        CHECK_EQ(pa_pool_destroy(pools[k]), PA_OK);
    }
}

/* fork() while the caches hold blocks of every zone (and the large caches
 * are in bypass after random large sizes): the child finds the pool
 * consistent, gets the cached blocks back, and the parent's pool is
 * untouched by what the child did. */
static void test_fork_with_cached_blocks(void) {
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    cfg.slab_max = 4096; /* a buddy zone from 4 KiB: every zone in use */
    pa_pool_t *p = pa_pool_create(&cfg, NULL);
    CHECK(p != NULL);
    for (int i = 0; i < 300; i++) { /* growing sizes: large caching off */
        void *a = pa_pool_alloc(p, ((size_t)20 << 10) + ((size_t)i << 12), NULL);
        CHECK(a != NULL);
        pa_pool_free(p, a);
    }
    pa_pool_reclaim(p);
    /* the large one first: a span request flushes the buddy bins */
    size_t sizes[] = {(size_t)200 << 10, 100, 3000, 9000};
    for (int i = 0; i < 4; i++) { /* one cached block per zone */
        void *a = pa_pool_alloc(p, sizes[i], NULL);
        CHECK(a != NULL);
        pa_pool_free(p, a);
    }
    pa_pool_stats_t st0;
    pa_pool_stats(p, &st0);
    CHECK(st0.zone[PA_ZONE_SLAB].cached > 0);
    CHECK(st0.zone[PA_ZONE_BUDDY].cached > 0);
    CHECK_EQ(pa_pool_check(p), 0u);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int bad = pa_pool_check(p) != 0;
        pa_pool_stats_t a0, a1;
        pa_pool_stats(p, &a0);
        void *b[4];
        for (int k = 1; k <= 4; k++) { /* the large one last */
            int i = k & 3;
            b[i] = pa_pool_alloc(p, sizes[i], NULL);
            bad |= b[i] == NULL;
            if (b[i]) memset(b[i], 0x5A, sizes[i]);
            bad |= pa_pool_check(p) != 0;
        }
        pa_pool_stats(p, &a1);
        /* slab and buddy blocks came back from the caches */
        bad |= a1.zone[PA_ZONE_SLAB].cache_hits != a0.zone[PA_ZONE_SLAB].cache_hits + 2;
        bad |= a1.zone[PA_ZONE_BUDDY].cache_hits != a0.zone[PA_ZONE_BUDDY].cache_hits + 1;
        for (int i = 0; i < 4; i++) {
            bad |= pa_pool_free(p, b[i]) != PA_OK;
            bad |= pa_pool_check(p) != 0;
        }
        pa_pool_stats(p, &a1);
        bad |= a1.live != 0 || a1.requested != 0;
        _exit(bad);
    }
    CHECK(pid > 0);
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    pa_pool_stats_t st1;
    pa_pool_stats(p, &st1);
    CHECK_EQ(st1.cached, st0.cached);
    CHECK_EQ(st1.allocs, st0.allocs);
    CHECK_EQ(pa_pool_check(p), 0u);
    pa_pool_destroy(p);
}

int main(void) {
    RUN(test_fork_while_threads_use_pools);
    RUN(test_fork_with_cached_blocks);
    return pa_test_report();
}
