/* pool_adapter.c -- pyarena's work pool behind the benchmark's allocator
 * interface: one adapter per pool mode (hybrid, slab-only, buddy-only),
 * each a pool created with the library defaults except the mode, plus
 * variants with PA_GROW_REQUESTED growth ("-req"), without deferred
 * caches ("-nocache"), and "pool-learned": the library defaults told the
 * trace's step marks (pa_pool_step), so it learns repeated steps; and
 * "pool-huge": the defaults with huge_pages on.  The other rows are never
 * told the step marks, so they never start learning. */
#include "bench.h"
#include "pyarena.h"

#include <stdio.h>
#include <string.h>

/* variant flags above the mode byte */
#define VAR_REQ 0x100     /* growth PA_GROW_REQUESTED instead of POW2     */
#define VAR_NOCACHE 0x200 /* cache_budget 1 byte: no deferred caching    */
#define VAR_LEARN 0x400   /* told the step marks                         */
#define VAR_HUGE 0x800    /* huge_pages on                               */

static void *pool_alloc(void *ctx, size_t n) { return pa_pool_alloc(ctx, n, NULL); }
static void pool_free(void *ctx, void *p) { pa_pool_free(ctx, p); }
static void pool_step(void *ctx) { pa_pool_step(ctx); }

/* Peaks from here on: the warm figures. */
static void pool_warm(bench_alloc_t *a) {
    if (a->ctx) pa_pool_reset_peak(a->ctx);
}

static int pool_open(bench_alloc_t *a) {
    pa_pool_config_t cfg;
    pa_status_t st = PA_OK;
    if (a->ctx) return 0;
    pa_pool_config_default(&cfg);
    cfg.mode = a->mode & 0xff;
    if (a->mode & VAR_REQ) cfg.growth = PA_GROW_REQUESTED;
    if (a->mode & VAR_NOCACHE) cfg.cache_budget = 1;
    if (a->mode & VAR_HUGE) cfg.huge_pages = 1;
    a->ctx = pa_pool_create(&cfg, &st);
    if (!a->ctx) {
        snprintf(a->note, sizeof a->note, "pa_pool_create failed: %s",
                 pa_status_string(st));
        return -1;
    }
    return 0;
}

static void pool_close(bench_alloc_t *a) {
    if (a->ctx) pa_pool_destroy(a->ctx);
    a->ctx = NULL;
}

/* Peaks and end-of-run figures from the pool's running statistics. */
static void pool_stats(bench_alloc_t *a, bench_stats_t *out) {
    pa_pool_stats_t s;
    if (!a->ctx || pa_pool_stats(a->ctx, &s) != PA_OK) return;
    out->has_stats = 1;
    out->peak_requested = (double)s.peak_requested;
    out->peak_allocated = (double)s.peak_allocated;
    out->peak_reserved = (double)s.peak_reserved;
    out->end_requested = (double)s.requested;
    out->end_reserved = (double)s.reserved;
    out->check_errors = (long)pa_pool_check(a->ctx);
}

/* The fragmentation figures at this moment (called at the peak). */
static void pool_snapshot(bench_alloc_t *a, bench_stats_t *out) {
    pa_pool_stats_t s;
    if (!a->ctx || pa_pool_stats(a->ctx, &s) != PA_OK) return;
    out->frag_internal = s.frag_internal;
    out->frag_external = s.frag_external;
    out->frag_overall = s.frag_overall;
    out->snap_requested = (double)s.requested;
    out->snap_reserved = (double)s.reserved;
}

int bench_pool_adapters(bench_alloc_t *out, int max) {
    static const struct { const char *name; int mode; } modes[] = {
        {"pool-hybrid", PA_POOL_HYBRID},
        {"pool-slab", PA_POOL_SLAB_ONLY},
        {"pool-buddy", PA_POOL_BUDDY_ONLY},
        {"hybrid-req-nocache", PA_POOL_HYBRID | VAR_REQ | VAR_NOCACHE},
        {"pool-learned", PA_POOL_HYBRID | VAR_LEARN},
        {"pool-huge", PA_POOL_HYBRID | VAR_HUGE}};
    int n = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0] && n < max; i++) {
        bench_alloc_t *a = &out[n++];
        memset(a, 0, sizeof *a);
        snprintf(a->name, sizeof a->name, "%s", modes[i].name);
        a->available = 1;
        a->mode = modes[i].mode;
        a->alloc = pool_alloc;
        a->free = pool_free;
        a->open = pool_open;
        a->close = pool_close;
        a->stats = pool_stats;
        a->snapshot = pool_snapshot;
        a->warm = pool_warm;
        if (modes[i].mode & VAR_LEARN) a->step = pool_step;
    }
    return n;
}
