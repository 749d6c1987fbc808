/* plan.c -- the static planner core: offsets for buffers with lifetimes.
 *
 * Bootstrap version: the lower bound (a sweep over lifetime events) and the
 * first-fit heuristic in execution order.  Every strategy currently falls
 * back to first-fit; result->strategy says which heuristic produced it. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void pa_plan_options_default(pa_plan_options_t *opt) {
    if (!opt) return;
    opt->strategy = PA_PLAN_BEST;
    opt->alignment = PA_DEFAULT_ALIGNMENT;
    opt->time_limit = 10.0;
    opt->capacity = 0;
}

typedef struct {
    int64_t t;
    int64_t delta; /* +size at first, -size after last */
} event_t;

static int cmp_event(const void *x, const void *y) {
    const event_t *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    /* removals before additions at the same step */
    return (a->delta > b->delta) - (a->delta < b->delta);
}

static bool padded(uint64_t size, uint64_t align, uint64_t *out) {
    if (size > UINT64_MAX - (align - 1)) return false;
    *out = (size + align - 1) & ~(align - 1);
    return true;
}

uint64_t pa_plan_lower_bound(const pa_plan_buffer_t *bufs, size_t n,
                             uint64_t alignment) {
    if (n == 0) return 0;
    if (!bufs) return UINT64_MAX;
    if (alignment == 0) alignment = PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2((size_t)alignment)) return UINT64_MAX;
    if (n > SIZE_MAX / (2 * sizeof(event_t))) return UINT64_MAX;
    event_t *ev = malloc(2 * n * sizeof(event_t));
    if (!ev) return UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t s;
        if (bufs[i].first > bufs[i].last || bufs[i].first < 0 ||
            bufs[i].last == INT64_MAX || !padded(bufs[i].size, alignment, &s) ||
            s > (uint64_t)INT64_MAX) {
            free(ev);
            return UINT64_MAX;
        }
        ev[2 * i] = (event_t){bufs[i].first, (int64_t)s};
        ev[2 * i + 1] = (event_t){bufs[i].last + 1, -(int64_t)s};
    }
    qsort(ev, 2 * n, sizeof(event_t), cmp_event);
    uint64_t live = 0, best = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        if (ev[i].delta >= 0) {
            if (live > UINT64_MAX - (uint64_t)ev[i].delta) {
                free(ev);
                return UINT64_MAX;
            }
            live += (uint64_t)ev[i].delta;
        } else {
            live -= (uint64_t)(-ev[i].delta);
        }
        if (live > best) best = live;
    }
    free(ev);
    return best;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* First fit in the given order: the lowest offset whose byte range is
 * free of every already-placed buffer whose lifetime overlaps. O(n^2). */
static pa_status_t first_fit(pa_plan_buffer_t *bufs, size_t n, uint64_t align,
                             uint64_t *arena) {
    size_t *placed = malloc((n ? n : 1) * sizeof(size_t));
    if (!placed) return PA_ERR_NOMEM;
    size_t np = 0;
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s;
        if (!padded(bufs[i].size, align, &s)) {
            free(placed);
            return PA_ERR_OVERFLOW;
        }
        uint64_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (size_t k = 0; k < np; k++) {
                const pa_plan_buffer_t *o = &bufs[placed[k]];
                if (o->last < bufs[i].first || bufs[i].last < o->first) continue;
                uint64_t os = 0;
                padded(o->size, align, &os);
                if (off < o->offset + os && o->offset < off + s) {
                    off = o->offset + os;
                    moved = true;
                }
            }
        }
        if (off > UINT64_MAX - s) {
            free(placed);
            return PA_ERR_OVERFLOW;
        }
        bufs[i].offset = off;
        if (off + s > top) top = off + s;
        placed[np++] = i;
    }
    free(placed);
    *arena = top;
    return PA_OK;
}

pa_status_t pa_plan_assign(pa_plan_buffer_t *bufs, size_t n,
                           const pa_plan_options_t *opt,
                           pa_plan_result_t *result) {
    pa_plan_options_t def;
    if (!opt) {
        pa_plan_options_default(&def);
        opt = &def;
    }
    if (n && !bufs) return PA_ERR_INVALID;
    uint64_t align = opt->alignment ? opt->alignment : PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2((size_t)align)) return PA_ERR_ALIGN;
    double t0 = now_seconds();
    uint64_t lb = pa_plan_lower_bound(bufs, n, align);
    if (lb == UINT64_MAX) return n ? PA_ERR_INVALID : PA_OK;
    uint64_t arena = 0;
    pa_status_t st = first_fit(bufs, n, align, &arena);
    if (st != PA_OK) return st;
    if (opt->capacity && arena > opt->capacity) return PA_ERR_INFEASIBLE;
    if (result) {
        result->arena_bytes = arena;
        result->lower_bound = lb;
        result->optimal = arena == lb;
        result->seconds = now_seconds() - t0;
        result->strategy = PA_PLAN_FIRST_FIT;
    }
    return PA_OK;
}
