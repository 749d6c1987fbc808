/* test_plan.c -- C tests for the static planner core (no Python needed).
 *
 * Everything is checked against independent code written here: an O(n^2)
 * validity checker, a per-step lower bound, naive reference versions of the
 * three heuristics (same rules, no index structures), a brute force over
 * placement orders for the optimum of tiny instances, and guillotine tilings
 * whose optimum is known by construction (every step is full). */
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

#define MAXN 7000

static uint64_t pad(uint64_t s, uint64_t a) { return (s + a - 1) / a * a; }

static int overlaps(const pa_plan_buffer_t *x, const pa_plan_buffer_t *y) {
    return !(x->last < y->first || y->last < x->first);
}

/* arena of a valid plan, or UINT64_MAX when two live buffers collide or an
 * offset is misaligned */
static uint64_t check_plan(const pa_plan_buffer_t *b, size_t n, uint64_t a) {
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i].offset % a) return UINT64_MAX;
        uint64_t e = b[i].offset + pad(b[i].size, a);
        if (e > top) top = e;
        for (size_t j = i + 1; j < n; j++) {
            if (!overlaps(&b[i], &b[j])) continue;
            uint64_t f = b[j].offset + pad(b[j].size, a);
            if (b[i].offset < f && b[j].offset < e && pad(b[i].size, a) &&
                pad(b[j].size, a))
                return UINT64_MAX;
        }
    }
    return top;
}

/* per integer step, for small time ranges */
static uint64_t step_bound(const pa_plan_buffer_t *b, size_t n, uint64_t a) {
    int64_t hi = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i].last > hi) hi = b[i].last;
    uint64_t best = 0;
    for (int64_t t = 0; t <= hi; t++) {
        uint64_t live = 0;
        for (size_t i = 0; i < n; i++)
            if (b[i].first <= t && t <= b[i].last) live += pad(b[i].size, a);
        if (live > best) best = live;
    }
    return best;
}

static pa_status_t plan(pa_plan_buffer_t *b, size_t n, pa_plan_strategy_t s,
                        uint64_t align, uint64_t cap, double tl,
                        pa_plan_result_t *r) {
    pa_plan_options_t o;
    pa_plan_options_default(&o);
    o.strategy = s;
    o.alignment = align;
    o.capacity = cap;
    o.time_limit = tl;
    return pa_plan_assign(b, n, &o, r);
}

/* ---- naive references ------------------------------------------------- */

/* lowest offset (best_fit = 0) or TFLite's best gap (1) for buffer i among
 * the placed ones */
static uint64_t naive_place(const pa_plan_buffer_t *b, const int *placed,
                            size_t n, size_t i, uint64_t a, int best_fit) {
    /* placed overlapping, sorted by offset (then end) with insertion sort */
    static size_t ids[MAXN];
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        if (!placed[j] || !overlaps(&b[i], &b[j])) continue;
        size_t p = k++;
        while (p > 0) {
            const pa_plan_buffer_t *q = &b[ids[p - 1]];
            uint64_t qe = q->offset + pad(q->size, a),
                     je = b[j].offset + pad(b[j].size, a);
            if (q->offset < b[j].offset || (q->offset == b[j].offset && qe <= je))
                break;
            ids[p] = ids[p - 1];
            p--;
        }
        ids[p] = j;
    }
    uint64_t s = pad(b[i].size, a), cur = 0, best = UINT64_MAX, gapb = UINT64_MAX;
    for (size_t x = 0; x < k; x++) {
        const pa_plan_buffer_t *q = &b[ids[x]];
        if (q->offset >= cur && q->offset - cur >= s) {
            if (!best_fit) return cur;
            if (q->offset - cur < gapb) {
                gapb = q->offset - cur;
                best = cur;
            }
        }
        uint64_t e = q->offset + pad(q->size, a);
        if (e > cur) cur = e;
    }
    return best == UINT64_MAX ? cur : best;
}

static int before_size(const pa_plan_buffer_t *b, size_t x, size_t y) {
    if (b[x].size != b[y].size) return b[x].size > b[y].size;
    if (b[x].first != b[y].first) return b[x].first < b[y].first;
    return x < y;
}

static void naive_heuristic(pa_plan_buffer_t *b, size_t n, uint64_t a, int which) {
    static int placed[MAXN];
    static size_t order[MAXN];
    memset(placed, 0, sizeof placed);
    size_t k = 0;
    if (which == 2) { /* greedy by breadth over every integer step */
        int64_t hi = 0;
        for (size_t i = 0; i < n; i++)
            if (b[i].last > hi) hi = b[i].last;
        static int64_t steps[4 * MAXN];
        static uint64_t br[4 * MAXN];
        size_t T = (size_t)hi + 1;
        for (size_t t = 0; t < T; t++) {
            steps[t] = (int64_t)t;
            br[t] = 0;
            for (size_t i = 0; i < n; i++)
                if (b[i].first <= (int64_t)t && (int64_t)t <= b[i].last)
                    br[t] += pad(b[i].size, a);
        }
        for (size_t x = 1; x < T; x++) { /* stable by breadth descending */
            int64_t s = steps[x];
            size_t p = x;
            while (p > 0 && br[steps[p - 1]] < br[s]) {
                steps[p] = steps[p - 1];
                p--;
            }
            steps[p] = s;
        }
        for (size_t x = 0; x < T; x++) {
            size_t m = 0;
            static size_t now[MAXN];
            for (size_t i = 0; i < n; i++) {
                if (placed[i] || b[i].first > steps[x] || b[i].last < steps[x]) continue;
                size_t p = m++;
                while (p > 0 && before_size(b, i, now[p - 1])) {
                    now[p] = now[p - 1];
                    p--;
                }
                now[p] = i;
            }
            for (size_t j = 0; j < m; j++) {
                b[now[j]].offset = naive_place(b, placed, n, now[j], a, 1);
                placed[now[j]] = 1;
            }
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        size_t p = k++;
        while (p > 0) {
            size_t y = order[p - 1];
            int earlier = which == 0 ? (b[i].first < b[y].first)
                                     : before_size(b, i, y);
            if (!earlier) break;
            order[p] = y;
            p--;
        }
        order[p] = i;
    }
    for (size_t x = 0; x < n; x++) {
        b[order[x]].offset = naive_place(b, placed, n, order[x], a, which == 1);
        placed[order[x]] = 1;
    }
}

/* optimum by brute force: every order, each buffer at its lowest offset
 * (some order reproduces any optimal plan, sorted by offset) */
static uint64_t brute_best;
static void brute(pa_plan_buffer_t *b, size_t n, int *placed, size_t depth,
                  uint64_t top) {
    if (top >= brute_best) return;
    if (depth == n) {
        brute_best = top;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (placed[i]) continue;
        uint64_t o = naive_place(b, placed, n, i, 1, 0);
        b[i].offset = o;
        placed[i] = 1;
        uint64_t e = o + b[i].size;
        brute(b, n, placed, depth + 1, e > top ? e : top);
        placed[i] = 0;
    }
}

static unsigned long long seed = 0x12345678ULL;

static void random_bufs(pa_plan_buffer_t *b, size_t n, int64_t steps,
                        int64_t maxlen, uint64_t maxsize) {
    for (size_t i = 0; i < n; i++) {
        int64_t f = (int64_t)(pa_rand(&seed) % (unsigned long long)steps);
        int64_t len = 1 + (int64_t)(pa_rand(&seed) % (unsigned long long)maxlen);
        b[i] = (pa_plan_buffer_t){1 + pa_rand(&seed) % maxsize, f, f + len - 1, 0};
    }
}

/* Guillotine tiling of [0,W) x [0,T): every step holds exactly W bytes, so
 * the optimum is W.  Returns the number of buffers. */
static size_t tiling(pa_plan_buffer_t *b, size_t cap, uint64_t x0, uint64_t w,
                     int64_t t0, int64_t t, int depth) {
    if (cap == 0) return 0;
    unsigned long long r = pa_rand(&seed) % 8;
    if (depth <= 0 || (w < 2 && t < 2) || r == 0 || cap < 2) {
        b[0] = (pa_plan_buffer_t){w, t0, t0 + t - 1, 0};
        return 1;
    }
    if ((r & 1) ? w >= 2 : t < 2) { /* cut in space */
        uint64_t c = 1 + pa_rand(&seed) % (w - 1);
        size_t k = tiling(b, cap / 2, x0, c, t0, t, depth - 1);
        return k + tiling(b + k, cap - k, x0 + c, w - c, t0, t, depth - 1);
    }
    int64_t c = 1 + (int64_t)(pa_rand(&seed) % (unsigned long long)(t - 1));
    size_t k = tiling(b, cap / 2, x0, w, t0, c, depth - 1);
    return k + tiling(b + k, cap - k, x0, w, t0 + c, t - c, depth - 1);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_small_known(void) {
    pa_plan_result_t r;
    /* empty */
    CHECK_EQ(plan(NULL, 0, PA_PLAN_BEST, 0, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 0u);
    CHECK_EQ(r.optimal, 1);
    CHECK_EQ(pa_plan_lower_bound(NULL, 0, 64), 0u);
    /* a single buffer is padded to the alignment */
    pa_plan_buffer_t one = {100, 3, 7, 999};
    for (int s = 0; s <= PA_PLAN_EXACT; s++) {
        CHECK_EQ(plan(&one, 1, (pa_plan_strategy_t)s, 64, 0, 1, &r), PA_OK);
        CHECK_EQ(one.offset, 0u);
        CHECK_EQ(r.arena_bytes, 128u);
        CHECK_EQ(r.lower_bound, 128u);
    }
    /* a chain of disjoint lifetimes reuses one slot */
    pa_plan_buffer_t chain[5];
    for (int i = 0; i < 5; i++) chain[i] = (pa_plan_buffer_t){64u * (i + 1), i, i, 0};
    for (int s = 0; s <= PA_PLAN_EXACT; s++) {
        CHECK_EQ(plan(chain, 5, (pa_plan_strategy_t)s, 64, 0, 1, &r), PA_OK);
        CHECK_EQ(r.arena_bytes, 320u);
        for (int i = 0; i < 5; i++) CHECK_EQ(chain[i].offset, 0u);
    }
    /* all live together: arena = sum, every order is optimal */
    pa_plan_buffer_t all[4] = {{10, 0, 5, 0}, {20, 1, 5, 0}, {30, 2, 3, 0}, {5, 3, 9, 0}};
    CHECK_EQ(plan(all, 4, PA_PLAN_BEST, 1, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 65u);
    CHECK_EQ(r.optimal, 1);
    CHECK_EQ(check_plan(all, 4, 1), 65u);
    /* inclusive lifetimes: [0,1] and [1,2] share step 1 */
    pa_plan_buffer_t touch[2] = {{64, 0, 1, 0}, {64, 1, 2, 0}};
    CHECK_EQ(plan(touch, 2, PA_PLAN_FIRST_FIT, 64, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 128u);
    CHECK(touch[0].offset != touch[1].offset);
    /* sizes 4, 1, 4 over [0,0], [1,2], [2,3]: the bound 5 is reachable */
    pa_plan_buffer_t g[3] = {{4, 0, 0, 0}, {1, 1, 2, 0}, {4, 2, 3, 0}};
    CHECK_EQ(plan(g, 3, PA_PLAN_EXACT, 1, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 5u);
    CHECK_EQ(r.optimal, 1);
    /* size 0 buffers take no room */
    pa_plan_buffer_t z[3] = {{0, 0, 9, 0}, {64, 0, 9, 0}, {0, 2, 3, 0}};
    CHECK_EQ(plan(z, 3, PA_PLAN_BEST, 64, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 64u);
    /* alignment 1 is accepted and sizes stay exact */
    pa_plan_buffer_t odd[2] = {{3, 0, 1, 0}, {5, 1, 1, 0}};
    CHECK_EQ(plan(odd, 2, PA_PLAN_GREEDY_BY_SIZE, 1, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 8u);
    CHECK_EQ(pa_plan_lower_bound(odd, 2, 1), 8u);
    /* huge step numbers, including INT64_MAX */
    pa_plan_buffer_t far[2] = {{8, INT64_MAX - 1, INT64_MAX, 0}, {8, INT64_MAX, INT64_MAX, 0}};
    CHECK_EQ(plan(far, 2, PA_PLAN_BEST, 8, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, 16u);
    CHECK_EQ(pa_plan_lower_bound(far, 2, 8), 16u);
}

static void test_bad_input(void) {
    pa_plan_result_t r;
    pa_plan_buffer_t b[2] = {{8, 0, 1, 0}, {8, 1, 2, 0}};
    CHECK_EQ(plan(NULL, 2, PA_PLAN_BEST, 0, 0, 1, &r), PA_ERR_INVALID);
    CHECK_EQ(plan(b, 2, PA_PLAN_BEST, 3, 0, 1, &r), PA_ERR_ALIGN);
    CHECK_EQ(plan(b, 2, PA_PLAN_BEST, 48, 0, 1, &r), PA_ERR_ALIGN);
    CHECK_EQ(plan(b, 2, (pa_plan_strategy_t)7, 0, 0, 1, &r), PA_ERR_INVALID);
    CHECK_EQ(plan(b, 2, (pa_plan_strategy_t)-1, 0, 0, 1, &r), PA_ERR_INVALID);
    b[1].first = -1;
    CHECK_EQ(plan(b, 2, PA_PLAN_FIRST_FIT, 0, 0, 1, &r), PA_ERR_INVALID);
    CHECK_EQ(pa_plan_lower_bound(b, 2, 8), UINT64_MAX);
    b[1].first = 3; /* first > last */
    CHECK_EQ(plan(b, 2, PA_PLAN_EXACT, 0, 0, 1, &r), PA_ERR_INVALID);
    CHECK_EQ(pa_plan_lower_bound(b, 2, 8), UINT64_MAX);
    b[1].first = 1;
    b[1].size = UINT64_MAX; /* padding overflows */
    CHECK_EQ(plan(b, 2, PA_PLAN_BEST, 64, 0, 1, &r), PA_ERR_OVERFLOW);
    CHECK_EQ(pa_plan_lower_bound(b, 2, 64), UINT64_MAX);
    b[0].size = (uint64_t)INT64_MAX - 7;
    b[1].size = 64; /* sum too large */
    CHECK_EQ(plan(b, 2, PA_PLAN_GREEDY_BY_SIZE, 8, 0, 1, &r), PA_ERR_OVERFLOW);
    CHECK_EQ(pa_plan_lower_bound(NULL, 2, 8), UINT64_MAX);
    CHECK_EQ(pa_plan_lower_bound(b, 2, 5), UINT64_MAX);
    /* NULL options and NULL result are fine */
    pa_plan_buffer_t c[2] = {{8, 0, 1, 0}, {8, 1, 2, 0}};
    CHECK_EQ(pa_plan_assign(c, 2, NULL, NULL), PA_OK);
    CHECK_EQ(check_plan(c, 2, 64), 128u);
    CHECK_EQ(pa_plan_options_default(NULL), PA_ERR_INVALID);
    pa_plan_options_t o;
    pa_plan_options_default(&o);
    CHECK_EQ(o.strategy, PA_PLAN_BEST);
    CHECK_EQ(o.alignment, 64u);
    /* capacity below the lower bound: infeasible for every strategy */
    for (int s = 0; s <= PA_PLAN_EXACT; s++) {
        c[0].offset = c[1].offset = 77;
        memset(&r, 0, sizeof r);
        CHECK_EQ(plan(c, 2, (pa_plan_strategy_t)s, 64, 127, 1, &r),
                 PA_ERR_INFEASIBLE);
        /* offsets untouched; the result describes the best plan found */
        CHECK(c[0].offset == 77 && c[1].offset == 77);
        CHECK_EQ(r.lower_bound, 128u);
        CHECK_EQ(r.arena_bytes, 128u);
    }
}

/* Every strategy: valid, >= the bound, the bound right; the heuristics equal
 * their naive references offset for offset; BEST <= every heuristic. */
static void test_random_valid(void) {
    static pa_plan_buffer_t b[MAXN], ref[MAXN];
    static const size_t ns[] = {1, 2, 3, 7, 20, 60, 150, 400};
    for (int rep = 0; rep < 40; rep++) {
        size_t n = ns[rep % 8];
        uint64_t align = (rep % 3 == 0) ? 1 : (rep % 3 == 1) ? 8 : 64;
        int64_t steps = 1 + (int64_t)(pa_rand(&seed) % (2 * n + 3));
        random_bufs(b, n, steps, 1 + (int64_t)(pa_rand(&seed) % 12),
                    1 + pa_rand(&seed) % 3000);
        uint64_t lb = step_bound(b, n, align);
        CHECK_EQ(pa_plan_lower_bound(b, n, align), lb);
        uint64_t heur[3];
        for (int s = 0; s <= PA_PLAN_EXACT; s++) {
            pa_plan_result_t r;
            pa_status_t st = plan(b, n, (pa_plan_strategy_t)s, align, 0, 0.2, &r);
            CHECK_EQ(st, PA_OK);
            uint64_t arena = check_plan(b, n, align);
            CHECK(arena != UINT64_MAX);
            CHECK_EQ(arena, r.arena_bytes);
            CHECK_EQ(r.lower_bound, lb);
            CHECK(r.arena_bytes >= lb);
            if (r.arena_bytes == lb) CHECK_EQ(r.optimal, 1);
            /* a heuristic proves nothing above the lower bound (pyarena.h:
               optimal = "arena_bytes is proven minimal"; only EXACT proves) */
            if (s < 3 && r.arena_bytes > lb) CHECK_EQ(r.optimal, 0);
            if (s < 3) {
                heur[s] = r.arena_bytes;
                CHECK_EQ((int)r.strategy, s);
                memcpy(ref, b, n * sizeof(*b));
                naive_heuristic(ref, n, align, s);
                int same = 1;
                for (size_t i = 0; i < n; i++) same &= ref[i].offset == b[i].offset;
                CHECK(same);
            } else {
                CHECK(r.arena_bytes <= heur[0] && r.arena_bytes <= heur[1] &&
                      r.arena_bytes <= heur[2]);
            }
        }
    }
}

/* EXACT equals the brute-force optimum on tiny instances, proves it, and
 * answers the capacity question on both sides of it. */
static void test_exact_brute(void) {
    static pa_plan_buffer_t b[8];
    int placed[8];
    for (int rep = 0; rep < 150; rep++) {
        size_t n = 2 + (size_t)(pa_rand(&seed) % 6); /* 2..7 */
        random_bufs(b, n, 1 + (int64_t)(pa_rand(&seed) % 6),
                    1 + (int64_t)(pa_rand(&seed) % 4), 1 + pa_rand(&seed) % 9);
        memset(placed, 0, sizeof placed);
        brute_best = UINT64_MAX;
        brute(b, n, placed, 0, 0);
        uint64_t opt = brute_best;
        pa_plan_result_t r;
        CHECK_EQ(plan(b, n, PA_PLAN_EXACT, 1, 0, 5, &r), PA_OK);
        CHECK_EQ(r.arena_bytes, opt);
        CHECK_EQ(r.optimal, 1);
        CHECK_EQ(check_plan(b, n, 1), opt);
        CHECK_EQ(plan(b, n, PA_PLAN_BEST, 1, 0, 5, &r), PA_OK);
        CHECK_EQ(r.arena_bytes, opt);
        CHECK_EQ(r.optimal, 1);
        CHECK_EQ(plan(b, n, PA_PLAN_EXACT, 1, opt, 5, &r), PA_OK);
        CHECK(r.arena_bytes <= opt);
        CHECK_EQ(check_plan(b, n, 1), r.arena_bytes);
        if (opt > 1)
            CHECK_EQ(plan(b, n, PA_PLAN_EXACT, 1, opt - 1, 5, &r), PA_ERR_INFEASIBLE);
        CHECK_EQ(plan(b, n, PA_PLAN_BEST, 1, opt - 1 ? opt - 1 : 1, 5, &r),
                 opt > 1 ? PA_ERR_INFEASIBLE : PA_OK);
    }
}

/* Tilings: the optimum W is known; EXACT and BEST must reach it.  Each
 * search takes milliseconds here; the 2 s limits and the stop at the first
 * failing tiling make a solver that cannot reach W fail in seconds, not
 * run into the harness's timeout. */
static void test_tilings(void) {
    static pa_plan_buffer_t b[256];
    int misses_gbs = 0;
    for (int rep = 0; rep < 30; rep++) {
        uint64_t W = 16 + pa_rand(&seed) % 200;
        int64_t T = 4 + (int64_t)(pa_rand(&seed) % 30);
        size_t n = tiling(b, 60, 0, W, 0, T, 12);
        /* shuffle so the input order gives nothing away */
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(pa_rand(&seed) % i);
            pa_plan_buffer_t t = b[i - 1];
            b[i - 1] = b[j];
            b[j] = t;
        }
        CHECK_EQ(pa_plan_lower_bound(b, n, 1), W);
        pa_plan_result_t r;
        CHECK_EQ(plan(b, n, PA_PLAN_GREEDY_BY_SIZE, 1, 0, 1, &r), PA_OK);
        misses_gbs += r.arena_bytes > W;
        int before = pa_test_failures;
        CHECK_EQ(plan(b, n, PA_PLAN_EXACT, 1, W, 2, &r), PA_OK); /* fits exactly */
        CHECK_EQ(check_plan(b, n, 1), W);
        if (pa_test_failures != before) break;
        CHECK_EQ(plan(b, n, PA_PLAN_EXACT, 1, 0, 2, &r), PA_OK);
        CHECK_EQ(r.arena_bytes, W);
        CHECK_EQ(r.optimal, 1);
        CHECK_EQ(check_plan(b, n, 1), W);
        CHECK_EQ(plan(b, n, PA_PLAN_BEST, 1, 0, 2, &r), PA_OK);
        CHECK_EQ(r.arena_bytes, W);
        CHECK_EQ(check_plan(b, n, 1), W);
        if (pa_test_failures != before) break;
    }
    CHECK(misses_gbs > 0); /* the tilings are not all trivial */
}

/* A tiny time limit on a hard fit ends in PA_ERR_TIMEOUT, not a wrong
 * answer. */
static void test_timeout(void) {
    static pa_plan_buffer_t b[256];
    int timeouts = 0;
    for (int rep = 0; rep < 20; rep++) {
        uint64_t W = 1000 + pa_rand(&seed) % 1000;
        size_t n = tiling(b, 200, 0, W, 0, 8, 16);
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)(pa_rand(&seed) % i);
            pa_plan_buffer_t t = b[i - 1];
            b[i - 1] = b[j];
            b[j] = t;
        }
        pa_plan_result_t r;
        int heuristic_fits = 0;
        for (int s = 0; s < 3; s++) {
            CHECK_EQ(plan(b, n, (pa_plan_strategy_t)s, 1, 0, 1, &r), PA_OK);
            heuristic_fits |= r.arena_bytes <= W;
        }
        pa_status_t st = plan(b, n, PA_PLAN_EXACT, 1, W, 1e-9, &r);
        if (heuristic_fits) {
            CHECK_EQ(st, PA_OK);
            CHECK(check_plan(b, n, 1) <= W);
        } else {
            CHECK_EQ(st, PA_ERR_TIMEOUT);
            timeouts++;
        }
    }
    CHECK(timeouts > 0);
}

/* Bigger instances: still valid and above the bound. */
static void test_larger(void) {
    static pa_plan_buffer_t b[MAXN];
    size_t n = 3000;
    random_bufs(b, n, 2000, 40, 1 << 16);
    uint64_t lb = pa_plan_lower_bound(b, n, 64);
    uint64_t best_heur = UINT64_MAX;
    for (int s = 0; s <= PA_PLAN_EXACT; s++) {
        /* EXACT above its size cap falls back to heuristics + search */
        pa_plan_result_t r;
        CHECK_EQ(plan(b, n, (pa_plan_strategy_t)s, 64, 0, 0.3, &r), PA_OK);
        CHECK_EQ(check_plan(b, n, 64), r.arena_bytes);
        CHECK(r.arena_bytes >= lb);
        if (s < 3 && r.arena_bytes < best_heur) best_heur = r.arena_bytes;
        if (s >= 3) CHECK(r.arena_bytes <= best_heur);
    }
    /* dense: everything live at once, too many pairs for the greedy ones;
     * BEST keeps to first fit and still gets the (trivial) optimum */
    n = MAXN;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        b[i] = (pa_plan_buffer_t){1 + pa_rand(&seed) % 5000,
                                  (int64_t)(pa_rand(&seed) % 100),
                                  1000 + (int64_t)(pa_rand(&seed) % 100), 0};
        sum += pad(b[i].size, 8);
    }
    pa_plan_result_t r;
    CHECK_EQ(plan(b, n, PA_PLAN_BEST, 8, 0, 1, &r), PA_OK);
    CHECK_EQ(r.arena_bytes, sum);
    CHECK_EQ(r.optimal, 1);
    CHECK_EQ(check_plan(b, n, 8), sum);
    CHECK_EQ(plan(b, n, PA_PLAN_FIRST_FIT, 8, 0, 1, &r), PA_OK);
    CHECK_EQ(check_plan(b, n, 8), sum);
}

int main(void) {
    RUN(test_small_known);
    RUN(test_bad_input);
    RUN(test_random_valid);
    RUN(test_exact_brute);
    RUN(test_tilings);
    RUN(test_timeout);
    RUN(test_larger);
    return pa_test_report();
}
