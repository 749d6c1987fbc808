/* plan/plan.c -- the static planner's front: options, validation, the lower
 * bound, dispatch to the heuristics (greedy.c) and the exact solver
 * (exact.c), and the BEST strategy that combines them.
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
#include "internal.h"

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
} time_event_t;

static int cmp_time_event(const void *x, const void *y) {
    const time_event_t *a = x, *b = y;
    return (a->t > b->t) - (a->t < b->t);
}

/* Max over steps of the live total: a merge of the buffers sorted by first
 * and by last; a start at t <= the next end's t is live with it (inclusive
 * lifetimes).  UINT64_MAX when the total overflows or memory runs out. */
static uint64_t live_max(const uint64_t *size, const int64_t *first,
                         const int64_t *last, size_t n) {
    if (n == 0) return 0;
    if (n > SIZE_MAX / (2 * sizeof(time_event_t))) return UINT64_MAX;
    time_event_t *st = malloc(2 * n * sizeof(time_event_t));
    if (!st) return UINT64_MAX;
    time_event_t *en = st + n;
    for (size_t i = 0; i < n; i++) {
        st[i] = (time_event_t){first[i], size[i]};
        en[i] = (time_event_t){last[i], size[i]};
    }
    qsort(st, n, sizeof(time_event_t), cmp_time_event);
    qsort(en, n, sizeof(time_event_t), cmp_time_event);
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
} search_state_t;

static uint64_t arena_of(const _pa_plan_inst_t *in, const uint64_t *off) {
    uint64_t top = 0;
    for (size_t i = 0; i < in->n; i++)
        if (off[i] + in->size[i] > top) top = off[i] + in->size[i];
    return top;
}

static void take(search_state_t *c, uint64_t arena, pa_plan_strategy_t by) {
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

static pa_status_t run_heuristics(search_state_t *c, bool all, bool dense) {
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
} random_key_t;

static int cmp_random_key(const void *x, const void *y) {
    const random_key_t *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Randomised best fit: sizes scaled by a random factor in [0.7, 1.3), so
 * buffers of similar size trade places; repeated until the deadline or
 * `iters` orders. */
static pa_status_t perturb(search_state_t *c, double deadline, long iters) {
    size_t n = c->in.n;
    random_key_t *k = malloc(n * sizeof(random_key_t));
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
            k[i] = (random_key_t){(double)c->in.size[i] * (0.7 + 0.6 * u), (uint32_t)i};
        }
        qsort(k, n, sizeof(random_key_t), cmp_random_key);
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
static pa_status_t exact_minimise(search_state_t *c, double deadline) {
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

/* The arrays pa_plan_assign owns: the normalised instance and two plans. */
typedef struct {
    uint64_t *size, *raw, *best, *tmp;
    int64_t *first, *last;
} plan_arrays_t;

static bool arrays_alloc(plan_arrays_t *a, size_t n) {
    size_t m = n ? n : 1;
    a->size = malloc(m * sizeof(uint64_t));
    a->raw = malloc(m * sizeof(uint64_t));
    a->first = malloc(m * sizeof(int64_t));
    a->last = malloc(m * sizeof(int64_t));
    a->best = malloc(m * sizeof(uint64_t));
    a->tmp = malloc(m * sizeof(uint64_t));
    return a->size && a->raw && a->first && a->last && a->best && a->tmp;
}

static void arrays_free(plan_arrays_t *a) {
    free(a->size);
    free(a->raw);
    free(a->first);
    free(a->last);
    free(a->best);
    free(a->tmp);
}

/* Validate the buffers into the instance arrays: sizes padded to `align`,
 * their total (in *total) checked to fit in int64. */
static pa_status_t normalise(const pa_plan_buffer_t *bufs, size_t n, uint64_t align,
                             plan_arrays_t *a, uint64_t *total) {
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].first < 0 || bufs[i].first > bufs[i].last) return PA_ERR_INVALID;
        if (!padded(bufs[i].size, align, &a->size[i]) ||
            a->size[i] > (uint64_t)INT64_MAX - *total)
            return PA_ERR_OVERFLOW;
        *total += a->size[i];
        a->raw[i] = bufs[i].size;
        a->first[i] = bufs[i].first;
        a->last[i] = bufs[i].last;
    }
    return PA_OK;
}

/* The strategy's heuristic (all three for BEST / EXACT, which set *dense)
 * into c->best and c->best_arena. */
static pa_status_t plan_heuristics(search_state_t *c, pa_plan_strategy_t strategy, bool *dense) {
    pa_status_t st;
    switch (strategy) {
    case PA_PLAN_FIRST_FIT:
        st = _pa_plan_first_fit(&c->in, c->tmp, &c->best_arena);
        break;
    case PA_PLAN_GREEDY_BY_SIZE:
        st = _pa_plan_greedy_size(&c->in, c->tmp, &c->best_arena);
        break;
    case PA_PLAN_GREEDY_BY_BREADTH:
        st = _pa_plan_greedy_breadth(&c->in, c->tmp, &c->best_arena);
        break;
    default:
        *dense = overlap_pairs(c->in.first, c->in.last, c->in.n) > PA_PLAN_DENSE_PAIRS;
        st = run_heuristics(c, strategy == PA_PLAN_BEST, *dense);
        break;
    }
    if (st == PA_OK && strategy <= PA_PLAN_GREEDY_BY_BREADTH)
        memcpy(c->best, c->tmp, c->in.n * sizeof(uint64_t));
    return st;
}

/* BEST and EXACT: spend the time limit improving c->best (a plain
 * heuristic, a plan at the lower bound, or EXACT's first fit within the
 * capacity return at once).  Not PA_OK: stop, with that status. */
static pa_status_t plan_search(search_state_t *c, const pa_plan_options_t *opt, double t0, double limit,
                               bool dense) {
    bool best = opt->strategy == PA_PLAN_BEST, exact = opt->strategy == PA_PLAN_EXACT;
    uint64_t cap = opt->capacity;
    double deadline = t0 + limit;
    bool fits = !cap || c->best_arena <= cap;
    if (!(best || exact) || c->best_arena <= c->lb || (exact && cap && fits)) return PA_OK;
    if (c->in.n > PA_PLAN_EXACT_MAX_N) {
        if (c->in.n <= 20000 && !dense) return perturb(c, deadline, 1000000);
        return PA_OK;
    }
    pa_status_t st;
    if (best) {
        /* a short burst of random orders first: cheap upper bound */
        st = perturb(c, t0 + 0.05 * limit, 200);
        if (st != PA_OK) return st;
    }
    if (best && cap && c->best_arena > cap) {
        /* meet the capacity first, then keep minimising */
        double now = _pa_plan_now();
        st = _pa_plan_exact_fit(&c->in, cap, now + 0.5 * (deadline - now), c->tmp, NULL);
        if (st == PA_OK) take(c, arena_of(&c->in, c->tmp), PA_PLAN_EXACT);
        else if (st != PA_ERR_TIMEOUT) return st; /* proven: no fit */
    }
    if (exact && cap) {
        st = _pa_plan_exact_fit(&c->in, cap, deadline, c->tmp, NULL);
        if (st != PA_OK) return st; /* INFEASIBLE, TIMEOUT or NOMEM */
        take(c, arena_of(&c->in, c->tmp), PA_PLAN_EXACT);
        return PA_OK;
    }
    return exact_minimise(c, deadline);
}

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
    uint64_t cap = opt->capacity, total = 0;

    plan_arrays_t a;
    search_state_t c;
    memset(&c, 0, sizeof(c));
    bool planned = false, optimal = false, dense = false;
    pa_status_t st = PA_ERR_NOMEM;
    if (!arrays_alloc(&a, n)) goto out;
    st = normalise(bufs, n, align, &a, &total);
    if (st != PA_OK) goto out;
    c = (search_state_t){.in = {n, a.size, a.raw, a.first, a.last, align, total},
                .best = a.best, .best_arena = UINT64_MAX, .tmp = a.tmp,
                .by = opt->strategy};
    st = PA_ERR_NOMEM;
    c.lb = live_max(a.size, a.first, a.last, n);
    if (c.lb == UINT64_MAX) goto out; /* cannot overflow: total checked */
    c.proven_lo = c.lb;
    if (n == 0) c.best_arena = 0;
    if (n > 0) {
        st = plan_heuristics(&c, opt->strategy, &dense);
        if (st != PA_OK) goto out;
    }
    planned = true;
    st = PA_OK;
    if (cap && c.lb > cap) {
        st = PA_ERR_INFEASIBLE; /* more is live at one step than fits */
        goto out;
    }
    st = plan_search(&c, opt, t0, limit, dense);
    if (st != PA_OK) goto out;
    optimal = c.best_arena == c.lb || c.best_arena <= c.proven_lo;
    if (cap && c.best_arena > cap) {
        if (opt->strategy == PA_PLAN_BEST || opt->strategy == PA_PLAN_EXACT)
            st = optimal ? PA_ERR_INFEASIBLE : PA_ERR_TIMEOUT;
        else
            st = PA_ERR_INFEASIBLE; /* this heuristic found no fit */
        goto out;
    }
    for (size_t i = 0; i < n; i++) bufs[i].offset = a.best[i];
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
    arrays_free(&a);
    return st;
}
