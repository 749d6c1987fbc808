/* plan.c -- the static planner's front: options, validation, the lower
 * bound, dispatch to the heuristics (plan_greedy.c) and the exact solver
 * (plan_exact.c), and the BEST strategy that combines them.
 *
 * Design choice: validate once, then hand the back ends a normalised
 * instance (padded sizes, total checked to fit in int64) so none of them
 * needs overflow checks of its own: every offset any of them produces is 0
 * or the end of another buffer, hence <= the total.
 *
 * BEST runs the three heuristics, keeps the lowest arena and, unless it
 * already equals the lower bound, spends the time limit on search:
 * randomised best-fit orders (cheap, tightens the upper bound), then for
 * n <= PA_PLAN_EXACT_MAX_N a search over the capacity with the exact solver
 * (first at the lower bound, then bisection), each probe bounded by part of
 * the remaining time.  A proof of infeasibility at arena - alignment or a
 * hit on the lower bound makes the result optimal. */
#include "plan_internal.h"

#include <stdlib.h>
#include <string.h>

pa_status_t pa_plan_options_default(pa_plan_options_t *opt) {
    if (!opt) return PA_ERR_INVALID;
    opt->strategy = PA_PLAN_BEST;
    opt->alignment = PA_DEFAULT_ALIGNMENT;
    opt->time_limit = 10.0;
    opt->capacity = 0;
    return PA_OK;
}

static bool padded(uint64_t size, uint64_t align, uint64_t *out) {
    if (size > UINT64_MAX - (align - 1)) return false;
    *out = (size + align - 1) & ~(align - 1);
    return true;
}

/* ---- lower bound ---------------------------------------------------------- */

typedef struct {
    int64_t t;
    uint64_t size;
} tev_t;

static int cmp_tev(const void *x, const void *y) {
    const tev_t *a = x, *b = y;
    return (a->t > b->t) - (a->t < b->t);
}

/* Max over steps of the live total: a merge of the buffers sorted by first
 * and by last; a start at t <= the next end's t is live with it (inclusive
 * lifetimes).  UINT64_MAX when the total overflows or memory runs out. */
static uint64_t live_max(const uint64_t *size, const int64_t *first,
                         const int64_t *last, size_t n) {
    if (n == 0) return 0;
    if (n > SIZE_MAX / (2 * sizeof(tev_t))) return UINT64_MAX;
    tev_t *st = malloc(2 * n * sizeof(tev_t));
    if (!st) return UINT64_MAX;
    tev_t *en = st + n;
    for (size_t i = 0; i < n; i++) {
        st[i] = (tev_t){first[i], size[i]};
        en[i] = (tev_t){last[i], size[i]};
    }
    qsort(st, n, sizeof(tev_t), cmp_tev);
    qsort(en, n, sizeof(tev_t), cmp_tev);
    uint64_t live = 0, best = 0;
    size_t i = 0, j = 0;
    while (i < n) {
        if (st[i].t <= en[j].t) {
            if (live > UINT64_MAX - 1 - st[i].size) {
                free(st);
                return UINT64_MAX;
            }
            live += st[i++].size;
            if (live > best) best = live;
        } else {
            live -= en[j++].size;
        }
    }
    free(st);
    return best;
}

static int cmp_i64v(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Number of lifetime-overlapping pairs: all pairs minus those where one
 * ends before the other starts.  O(n log n); UINT64_MAX if out of memory. */
static uint64_t overlap_pairs(const int64_t *first, const int64_t *last,
                              size_t n) {
    if (n < 2) return 0;
    int64_t *f = malloc(n * sizeof(int64_t)), *l = malloc(n * sizeof(int64_t));
    if (!f || !l) {
        free(f);
        free(l);
        return UINT64_MAX;
    }
    memcpy(f, first, n * sizeof(int64_t));
    memcpy(l, last, n * sizeof(int64_t));
    qsort(f, n, sizeof(int64_t), cmp_i64v);
    qsort(l, n, sizeof(int64_t), cmp_i64v);
    uint64_t disjoint = 0;
    size_t k = 0;
    for (size_t j = 0; j < n; j++) { /* lasts strictly before first f[j] */
        while (k < n && l[k] < f[j]) k++;
        disjoint += k;
    }
    free(f);
    free(l);
    return (uint64_t)n * (n - 1) / 2 - disjoint;
}

uint64_t pa_plan_lower_bound(const pa_plan_buffer_t *bufs, size_t n,
                             uint64_t alignment) {
    if (n == 0) return 0;
    if (!bufs) return UINT64_MAX;
    if (alignment == 0) alignment = PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2((size_t)alignment)) return UINT64_MAX;
    if (n > SIZE_MAX / (sizeof(uint64_t) + 2 * sizeof(int64_t)))
        return UINT64_MAX;
    uint64_t *size = malloc(n * sizeof(uint64_t));
    int64_t *first = malloc(n * sizeof(int64_t));
    int64_t *last = malloc(n * sizeof(int64_t));
    uint64_t lb = UINT64_MAX;
    if (!size || !first || !last) goto out;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].first < 0 || bufs[i].first > bufs[i].last ||
            !padded(bufs[i].size, alignment, &size[i]))
            goto out;
        first[i] = bufs[i].first;
        last[i] = bufs[i].last;
    }
    lb = live_max(size, first, last, n);
out:
    free(size);
    free(first);
    free(last);
    return lb;
}

/* ---- search helpers ------------------------------------------------------ */

typedef struct {
    _pa_plan_inst_t in;
    uint64_t lb;
    uint64_t *best;       /* best offsets so far */
    uint64_t best_arena;
    pa_plan_strategy_t by;
    uint64_t proven_lo;   /* every arena below this is impossible */
    uint64_t *tmp;
} ctx_t;

static uint64_t arena_of(const _pa_plan_inst_t *in, const uint64_t *off) {
    uint64_t top = 0;
    for (size_t i = 0; i < in->n; i++)
        if (off[i] + in->size[i] > top) top = off[i] + in->size[i];
    return top;
}

static void take(ctx_t *c, uint64_t arena, pa_plan_strategy_t by) {
    if (arena < c->best_arena) {
        c->best_arena = arena;
        memcpy(c->best, c->tmp, c->in.n * sizeof(uint64_t));
        c->by = by;
    }
}

/* The greedy heuristics cost O(log n) per buffer plus O(k log k) for the k
 * placed buffers overlapping it in time: O(P log n) in all for P
 * overlapping pairs.  BEST and EXACT skip them (and the randomised search,
 * which costs the same per round) above this many pairs, keeping first fit,
 * which is O(n log n) whatever P is. */
#define PA_PLAN_DENSE_PAIRS 20000000ULL

static pa_status_t run_heuristics(ctx_t *c, bool all, bool dense) {
    static const pa_plan_strategy_t order[3] = {
        PA_PLAN_GREEDY_BY_SIZE, PA_PLAN_GREEDY_BY_BREADTH, PA_PLAN_FIRST_FIT};
    for (int h = dense ? 2 : 0; h < 3; h++) {
        uint64_t arena = 0;
        pa_status_t st;
        switch (order[h]) {
        case PA_PLAN_GREEDY_BY_SIZE:
            st = _pa_plan_greedy_size(&c->in, c->tmp, &arena);
            break;
        case PA_PLAN_GREEDY_BY_BREADTH:
            st = _pa_plan_greedy_breadth(&c->in, c->tmp, &arena);
            break;
        default:
            st = _pa_plan_first_fit(&c->in, c->tmp, &arena);
            break;
        }
        if (st != PA_OK) return st;
        take(c, arena, order[h]);
        if (!all && c->best_arena == c->lb) break;
    }
    return PA_OK;
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}

typedef struct {
    double key;
    uint32_t id;
} rkey_t;

static int cmp_rkey(const void *x, const void *y) {
    const rkey_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Randomised best fit: sizes scaled by a random factor in [0.7, 1.3), so
 * buffers of similar size trade places; repeated until the deadline or
 * `iters` orders. */
static pa_status_t perturb(ctx_t *c, double deadline, long iters) {
    size_t n = c->in.n;
    rkey_t *k = malloc(n * sizeof(rkey_t));
    uint32_t *o = malloc(n * sizeof(uint32_t));
    pa_status_t st = PA_OK;
    if (!k || !o) {
        st = PA_ERR_NOMEM;
        goto out;
    }
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ n;
    for (long it = 0; it < iters && c->best_arena > c->lb; it++) {
        if (_pa_plan_now() > deadline) break;
        for (size_t i = 0; i < n; i++) {
            double u = (double)(rng_next(&seed) >> 11) * (1.0 / 9007199254740992.0);
            k[i] = (rkey_t){(double)c->in.size[i] * (0.7 + 0.6 * u), (uint32_t)i};
        }
        qsort(k, n, sizeof(rkey_t), cmp_rkey);
        for (size_t i = 0; i < n; i++) o[i] = k[i].id;
        uint64_t arena;
        st = _pa_plan_place_order(&c->in, o, 1, c->tmp, &arena);
        if (st != PA_OK) break;
        take(c, arena, PA_PLAN_BEST);
    }
out:
    free(k);
    free(o);
    return st;
}

/* Tighten best_arena with exact probes until proven or out of time.  The
 * first probe asks for the lower bound; later ones ask for best - step:
 * a fit keeps the step, a proof of infeasibility raises the proven floor
 * and halves the distance, a timeout halves the step (probes closer to a
 * known solution tend to be easier).  Each probe gets a share of the time
 * left, so a hopeless probe cannot eat the whole budget. */
static pa_status_t exact_minimise(ctx_t *c, double deadline) {
    uint64_t a = c->in.align;
    uint64_t step = (c->best_arena - c->proven_lo) / 2;
    bool first = true;
    while (c->proven_lo < c->best_arena) {
        double now = _pa_plan_now();
        if (now >= deadline) break;
        uint64_t hi = c->best_arena, cap;
        if (step < a) step = a;
        if (first) cap = c->proven_lo;
        else cap = hi - step < c->proven_lo ? c->proven_lo : hi - step;
        cap = cap / a * a;
        if (cap < c->proven_lo) cap = c->proven_lo;
        if (cap >= hi) break;
        double probe_end = now + (deadline - now) * (first ? 0.2 : 0.25);
        first = false;
        pa_status_t st = _pa_plan_exact_fit(&c->in, cap, probe_end, c->tmp, NULL);
        if (st == PA_OK) {
            take(c, arena_of(&c->in, c->tmp), PA_PLAN_EXACT);
        } else if (st == PA_ERR_INFEASIBLE) {
            c->proven_lo = cap + a;
            step = (c->best_arena - (c->proven_lo < c->best_arena
                                         ? c->proven_lo : c->best_arena)) / 2;
        } else if (st == PA_ERR_TIMEOUT) {
            step /= 2;
        } else {
            return st;
        }
    }
    return PA_OK;
}

/* ---- entry point ------------------------------------------------------------ */

pa_status_t pa_plan_assign(pa_plan_buffer_t *bufs, size_t n,
                           const pa_plan_options_t *opt,
                           pa_plan_result_t *result) {
    double t0 = _pa_plan_now();
    pa_plan_options_t def;
    if (!opt) {
        pa_plan_options_default(&def);
        opt = &def;
    }
    if (n && !bufs) return PA_ERR_INVALID;
    if (n >= UINT32_MAX / 2) return PA_ERR_INVALID; /* ids are 32-bit */
    if ((int)opt->strategy < PA_PLAN_FIRST_FIT || opt->strategy > PA_PLAN_EXACT)
        return PA_ERR_INVALID;
    uint64_t align = opt->alignment ? opt->alignment : PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2((size_t)align)) return PA_ERR_ALIGN;
    double limit = opt->time_limit > 0 ? opt->time_limit : 10.0;
    double deadline = t0 + limit;
    uint64_t cap = opt->capacity;

    size_t m = n ? n : 1;
    uint64_t *size = malloc(m * sizeof(uint64_t));
    uint64_t *raw = malloc(m * sizeof(uint64_t));
    int64_t *first = malloc(m * sizeof(int64_t));
    int64_t *last = malloc(m * sizeof(int64_t));
    uint64_t *best = malloc(m * sizeof(uint64_t));
    uint64_t *tmp = malloc(m * sizeof(uint64_t));
    pa_status_t st = PA_ERR_NOMEM;
    ctx_t c;
    memset(&c, 0, sizeof(c));
    bool planned = false, optimal = false;
    if (!size || !raw || !first || !last || !best || !tmp) goto out;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].first < 0 || bufs[i].first > bufs[i].last) {
            st = PA_ERR_INVALID;
            goto out;
        }
        if (!padded(bufs[i].size, align, &size[i]) ||
            size[i] > (uint64_t)INT64_MAX - total) {
            st = PA_ERR_OVERFLOW;
            goto out;
        }
        total += size[i];
        raw[i] = bufs[i].size;
        first[i] = bufs[i].first;
        last[i] = bufs[i].last;
    }
    c = (ctx_t){.in = {n, size, raw, first, last, align, total},
                .best = best, .best_arena = UINT64_MAX, .tmp = tmp,
                .by = opt->strategy};
    c.lb = live_max(size, first, last, n);
    if (c.lb == UINT64_MAX) goto out; /* cannot overflow: total checked */
    c.proven_lo = c.lb;
    if (n == 0) c.best_arena = 0;
    bool dense = false;

    if (n > 0) {
        switch (opt->strategy) {
        case PA_PLAN_FIRST_FIT:
            st = _pa_plan_first_fit(&c.in, tmp, &c.best_arena);
            break;
        case PA_PLAN_GREEDY_BY_SIZE:
            st = _pa_plan_greedy_size(&c.in, tmp, &c.best_arena);
            break;
        case PA_PLAN_GREEDY_BY_BREADTH:
            st = _pa_plan_greedy_breadth(&c.in, tmp, &c.best_arena);
            break;
        default:
            dense = overlap_pairs(first, last, n) > PA_PLAN_DENSE_PAIRS;
            st = run_heuristics(&c, opt->strategy == PA_PLAN_BEST, dense);
            break;
        }
        if (st != PA_OK) goto out;
        if (opt->strategy <= PA_PLAN_GREEDY_BY_BREADTH)
            memcpy(best, tmp, n * sizeof(uint64_t));
    }
    planned = true;
    st = PA_OK;
    if (cap && c.lb > cap) {
        st = PA_ERR_INFEASIBLE; /* more is live at one step than fits */
        goto out;
    }
    bool search = opt->strategy == PA_PLAN_BEST || opt->strategy == PA_PLAN_EXACT;
    bool fits = !cap || c.best_arena <= cap;
    if (search && c.best_arena > c.lb && !(opt->strategy == PA_PLAN_EXACT && cap && fits)) {
        if (n <= PA_PLAN_EXACT_MAX_N) {
            if (opt->strategy == PA_PLAN_BEST) {
                /* a short burst of random orders first: cheap upper bound */
                double burst = t0 + 0.05 * limit;
                st = perturb(&c, burst, 200);
                if (st != PA_OK) goto out;
            }
            if (opt->strategy == PA_PLAN_BEST && cap && c.best_arena > cap) {
                /* meet the capacity first, then keep minimising */
                double now = _pa_plan_now();
                st = _pa_plan_exact_fit(&c.in, cap, now + 0.5 * (deadline - now),
                                        tmp, NULL);
                if (st == PA_OK) take(&c, arena_of(&c.in, tmp), PA_PLAN_EXACT);
                else if (st != PA_ERR_TIMEOUT) goto out; /* proven: no fit */
                st = PA_OK;
            }
            if (opt->strategy == PA_PLAN_EXACT && cap) {
                st = _pa_plan_exact_fit(&c.in, cap, deadline, tmp, NULL);
                if (st == PA_OK) {
                    take(&c, arena_of(&c.in, tmp), PA_PLAN_EXACT);
                } else {
                    goto out; /* INFEASIBLE, TIMEOUT or NOMEM */
                }
            } else {
                st = exact_minimise(&c, deadline);
                if (st != PA_OK) goto out;
            }
        } else if (n <= 20000 && !dense) {
            st = perturb(&c, deadline, 1000000);
            if (st != PA_OK) goto out;
        }
    }
    optimal = c.best_arena == c.lb || c.best_arena <= c.proven_lo;
    if (cap && c.best_arena > cap) {
        if (opt->strategy == PA_PLAN_BEST || opt->strategy == PA_PLAN_EXACT)
            st = optimal ? PA_ERR_INFEASIBLE : PA_ERR_TIMEOUT;
        else
            st = PA_ERR_INFEASIBLE; /* this heuristic found no fit */
        goto out;
    }
    for (size_t i = 0; i < n; i++) bufs[i].offset = best[i];
out:
    /* on success, and on a missed capacity, describe the best plan found */
    if (result && planned &&
        (st == PA_OK || st == PA_ERR_INFEASIBLE || st == PA_ERR_TIMEOUT)) {
        result->arena_bytes = c.best_arena;
        result->lower_bound = c.lb;
        result->optimal = optimal || c.best_arena == c.lb;
        result->seconds = _pa_plan_now() - t0;
        result->strategy = c.by;
    }
    free(size);
    free(raw);
    free(first);
    free(last);
    free(best);
    free(tmp);
    return st;
}
