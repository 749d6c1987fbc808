/* bench.h -- the allocator interface bench_pool.c replays traces against. */
#ifndef PA_BENCH_H
#define PA_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Figures an allocator can report about itself after a replay (the pool
 * does; the mallocs leave has_stats = 0). */
typedef struct bench_stats {
    int has_stats;
    double peak_requested;   /* bytes */
    double peak_allocated;   /* bytes handed out incl. rounding */
    double peak_reserved;    /* bytes obtained from the OS */
    double frag_internal;    /* fractions 0..1, from the snapshot taken the
                                last time live bytes were at their peak */
    double frag_external;
    double frag_overall;
    double end_requested;    /* live bytes after the replay (should be 0) */
    double end_reserved;     /* bytes kept after the replay */
    double snap_requested;   /* requested / reserved in that snapshot */
    double snap_reserved;
    long check_errors;       /* broken invariants, -1 = not checked */
} bench_stats_t;

typedef struct bench_alloc {
    char name[32];
    int available;
    char note[160];
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr);
    /* optional: */
    int (*open)(struct bench_alloc *a);           /* 0 = ok */
    void (*close)(struct bench_alloc *a);
    void (*stats)(struct bench_alloc *a, bench_stats_t *out);   /* peaks, end */
    void (*snapshot)(struct bench_alloc *a, bench_stats_t *out); /* frag now */
    void (*step)(void *ctx);                      /* a step mark in the trace */
    void (*warm)(struct bench_alloc *a);          /* after the warm-up replay */
    int solo;            /* timed in a process of its own (process-wide
                            settings, e.g. mallopt) */
    void *ctx;
    int mode;
} bench_alloc_t;

/* Fill `out` (room for `max`) with the pool's modes; returns how many. */
int bench_pool_adapters(bench_alloc_t *out, int max);

#endif
