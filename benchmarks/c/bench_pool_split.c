/* bench_pool_split.c -- where the time of a random alloc/free pair goes,
 * per size range: the allocation call, the free call and the first touch
 * of the block (its first and last byte), for the work pool (library
 * defaults) next to tcmalloc and glibc malloc in the same process.
 *
 * The trace is bench_pool's log-uniform one (64 B .. 1 MiB, ~1000 live,
 * random frees).  Every call is bracketed by the CPU's time-stamp counter
 * (x86: rdtsc, ~25 cycles of overhead per reading, the same for every
 * allocator; elsewhere clock_gettime nanoseconds), summed per size range
 * over `reps` timed replays after one untimed warm-up each, allocators
 * interleaved.  Wall-clock counter: run it on a quiet machine, or compare
 * only rows of the same run.  Ranges: the pool's zones with the default
 * configuration -- slab (<= 4 KiB), buddy (<= 16 KiB), large (<= 256 KiB,
 * the sizes tcmalloc still serves from its per-thread size classes), large
 * (> 256 KiB).
 *   make -C benchmarks/c build/bench_pool_split
 *   benchmarks/c/build/bench_pool_split [allocs (300000)] [reps (3)]
 */
#define _GNU_SOURCE
#include "pyarena.h"
#include "traces.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t tick(void) { return __rdtsc(); }
#define UNIT "cycles"
#else
static inline uint64_t tick(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#define UNIT "ns"
#endif

#define NRANGES 4
static const char *range_names[NRANGES] = {"<= 4 KiB", "4..16 KiB", "16..256 KiB", "> 256 KiB"};

static int range_of(size_t n) {
    return n <= 4096 ? 0 : n <= 16384 ? 1 : n <= 262144 ? 2 : 3;
}

typedef struct {
    const char *name;
    void *(*alloc)(void *ctx, size_t n);
    void (*free)(void *ctx, void *p);
    void *ctx;
    double t_alloc[NRANGES], t_free[NRANGES], t_touch[NRANGES];
    uint64_t n[NRANGES];
} alloc_t;

static void *pool_alloc(void *c, size_t n) { return pa_pool_alloc(c, n, NULL); }
static void pool_free(void *c, void *p) { pa_pool_free(c, p); }
static void *libc_alloc(void *c, size_t n) { (void)c; return malloc(n); }
static void libc_free(void *c, void *p) { (void)c; free(p); }
static void *(*tc_malloc_fn)(size_t);
static void (*tc_free_fn)(void *);
static void *tc_alloc(void *c, size_t n) { (void)c; return tc_malloc_fn(n); }
static void tc_free(void *c, void *p) { (void)c; tc_free_fn(p); }

static void replay(alloc_t *a, const bt_trace_t *t, void **slots, uint32_t *sizes, int timed) {
    for (size_t i = 0; i < t->n; i++) {
        bt_op_t o = t->ops[i];
        if (o.slot == BT_STEP) continue;
        if (o.size) {
            uint64_t t0 = tick();
            char *p = a->alloc(a->ctx, o.size);
            uint64_t t1 = tick();
            p[0] = 1;
            p[o.size - 1] = 1;
            uint64_t t2 = tick();
            slots[o.slot] = p;
            sizes[o.slot] = o.size;
            if (timed) {
                int r = range_of(o.size);
                a->t_alloc[r] += (double)(t1 - t0);
                a->t_touch[r] += (double)(t2 - t1);
                a->n[r]++;
            }
        } else {
            uint64_t t0 = tick();
            a->free(a->ctx, slots[o.slot]);
            uint64_t t1 = tick();
            if (timed) a->t_free[range_of(sizes[o.slot])] += (double)(t1 - t0);
        }
    }
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 300000;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    bt_trace_t t;
    if (n == 0 || reps <= 0 || bt_gen_loguniform(&t, n, 1000, 64, 1u << 20, 42) != 0) {
        fprintf(stderr, "usage: bench_pool_split [allocs > 0] [reps > 0]\n");
        return 2;
    }
    void **slots = calloc(t.nslots + 1, sizeof(void *));
    uint32_t *sizes = calloc(t.nslots + 1, sizeof(uint32_t));
    alloc_t as[3] = {{.name = "pool-hybrid", .alloc = pool_alloc, .free = pool_free},
                     {.name = "tcmalloc", .alloc = tc_alloc, .free = tc_free},
                     {.name = "glibc", .alloc = libc_alloc, .free = libc_free}};
    as[0].ctx = pa_pool_create(NULL, NULL);
    void *h = dlopen("libtcmalloc_minimal.so.4", RTLD_NOW);
    if (h) {
        tc_malloc_fn = (void *(*)(size_t))dlsym(h, "tc_malloc");
        tc_free_fn = (void (*)(void *))dlsym(h, "tc_free");
    }
    int na = tc_malloc_fn && tc_free_fn ? 3 : 2;
    if (na == 2) as[1] = as[2]; /* no tcmalloc: pool and glibc only */
    if (!slots || !sizes || !as[0].ctx) return 1;
    for (int i = 0; i < na; i++) replay(&as[i], &t, slots, sizes, 0);
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < na; k++) replay(&as[(r + k) % na], &t, slots, sizes, 1);
    printf("log-uniform 64 B..1 MiB, %zu allocs x %d reps: %s per call "
           "(alloc / free / first touch), share of allocations per range\n\n", n, reps, UNIT);
    printf("| allocator | total per pair |");
    for (int r = 0; r < NRANGES; r++) printf(" %s |", range_names[r]);
    printf("\n|---|---:|");
    for (int r = 0; r < NRANGES; r++) printf("---:|");
    printf("\n");
    for (int i = 0; i < na; i++) {
        alloc_t *a = &as[i];
        double tot = 0, pairs = 0;
        for (int r = 0; r < NRANGES; r++) {
            tot += a->t_alloc[r] + a->t_free[r] + a->t_touch[r];
            pairs += (double)a->n[r];
        }
        printf("| %s | %.0f |", a->name, tot / pairs);
        for (int r = 0; r < NRANGES; r++) {
            double k = a->n[r] ? (double)a->n[r] : 1;
            printf(" %.0f / %.0f / %.0f (%.2f) |", a->t_alloc[r] / k, a->t_free[r] / k,
                   a->t_touch[r] / k, (double)a->n[r] / pairs);
        }
        printf("\n");
    }
    pa_pool_destroy(as[0].ctx);
    bt_free(&t);
    free(slots);
    free(sizes);
    return 0;
}
