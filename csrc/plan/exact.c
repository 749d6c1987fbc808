/* plan/exact.c -- the planner's exact solver: does an assignment with
 * max(offset + size) <= capacity exist?  Modelled on MiniMalloc (Moffitt,
 * "MiniMalloc: A Lightweight Memory Allocator for Hardware-Accelerated
 * Machine Learning", ASPLOS 2023); written from the paper's ideas in C.
 *
 * Depth-first search over *canonical* solutions: buffers are placed in
 * non-decreasing order of offset, each at its minimum feasible offset (0 or
 * the end of an already-placed overlapping buffer), so every solution is
 * visited once.  Pruning:
 *   - sections: maximal time ranges with a constant live set.  Each keeps a
 *     floor (nothing unplaced in it can start below) and the total size of
 *     its unplaced buffers; floor + total > capacity prunes (spatial
 *     inference).  The floor is raised to the smallest minimum offset of
 *     the section's unplaced buffers (unallocated floor) and to the offset
 *     of the last placement (monotonic floor);
 *   - dominance: a buffer is never placed at or above the lowest height any
 *     other unplaced buffer could reach -- that would leave a gap where the
 *     other could go instead;
 *   - "hatless" pruning: when the buffer just tried had no unplaced
 *     neighbours, its alternatives are not tried;
 *   - dynamic decomposition: when no unplaced buffer crosses a section
 *     boundary any more, the two sides are solved independently.
 * Buffers are tried by minimum offset, ties by a static preorder; three
 * preorders (width/area/total, total/width/area, total/area/width) run in
 * round robin under a node limit that doubles, so one unlucky order does
 * not stall the search.
 *
 * Design choice for C: all per-node data (orderings, preorders, partition
 * lists, undo records) live on a few growable LIFO stacks addressed by
 * index, so a node allocates nothing and backtracking is a stack pop. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT64_MAX

enum { R_OK, R_NOTFOUND, R_ABORTED, R_TIMEOUT, R_NOMEM };

typedef struct {
    uint64_t off;
    uint32_t pidx;
} candidate_t;

typedef struct {
    uint32_t what; /* section index | FLOOR_BIT, or buffer index */
    uint64_t old;
} undo_record_t;
#define FLOOR_BIT 0x80000000u

typedef struct {
    size_t boff, nb;  /* buffers: bst[boff .. boff+nb) */
    uint32_t slo, shi; /* section range [slo, shi) */
} partition_t;

#define STACK(T, name) \
    T *name;           \
    size_t name##_n, name##_cap

typedef struct {
    const _pa_plan_inst_t *in;
    size_t n, S;
    uint32_t *sa, *sb;             /* section range of each buffer        */
    size_t *ovl_start;             /* CSR: overlapping buffers            */
    uint32_t *ovl;
    size_t *mem_start;             /* CSR: buffers of each section        */
    uint32_t *mem;
    uint64_t *floor, *total;       /* per section                         */
    uint32_t *cuts;                /* unplaced buffers crossing s|s+1     */
    uint64_t *asg, *minoff, *sol;  /* per buffer                          */
    uint64_t *width;
    long double *area;
    uint64_t *tkey;
    uint32_t *mark, stamp, *aff;
    uint64_t cap;
    int heur;
    int64_t nodes_left;
    uint64_t nodes;
    double deadline;
    bool timed_out;
    STACK(undo_record_t, undo);
    STACK(candidate_t, ost);
    STACK(uint32_t, pst); /* preorders: buffer index per preorder index */
    STACK(uint32_t, bst); /* partition buffer lists and cut points      */
} exact_search_t;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return false;
    *p = np;
    *cap = nc;
    return true;
}
#define RESERVE(e, name, extra)                                            \
    grow((void **)&(e)->name, &(e)->name##_cap, (e)->name##_n + (extra),   \
         sizeof(*(e)->name))

/* ---- preorder ------------------------------------------------------------ */

/* true if buffer x goes before y under heuristic e->heur */
static bool pre_before(const exact_search_t *e, uint32_t x, uint32_t y) {
    static const char *const H[3] = {"WAT", "TAW", "TWA"};
    for (const char *c = H[e->heur]; *c; c++) {
        switch (*c) {
        case 'W':
            if (e->width[x] != e->width[y]) return e->width[x] > e->width[y];
            break;
        case 'A':
            if (e->area[x] != e->area[y]) return e->area[x] > e->area[y];
            break;
        default:
            if (e->tkey[x] != e->tkey[y]) return e->tkey[x] > e->tkey[y];
            break;
        }
    }
    return x < y;
}

static void pre_sort(const exact_search_t *e, uint32_t *v, uint32_t *tmp, size_t k) {
    if (k < 2) return;
    if (k <= 12) {
        for (size_t i = 1; i < k; i++) {
            uint32_t x = v[i];
            size_t j = i;
            while (j > 0 && pre_before(e, x, v[j - 1])) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    size_t h = k / 2, i = 0, j = h, o = 0;
    pre_sort(e, v, tmp, h);
    pre_sort(e, v + h, tmp, k - h);
    while (i < h && j < k)
        tmp[o++] = pre_before(e, v[j], v[i]) ? v[j++] : v[i++];
    while (i < h) tmp[o++] = v[i++];
    while (j < k) tmp[o++] = v[j++];
    memcpy(v, tmp, k * sizeof(uint32_t));
}

static inline bool ord_lt(const candidate_t *p, const candidate_t *q) {
    return p->off != q->off ? p->off < q->off : p->pidx < q->pidx;
}

/* Sort by (offset, preorder index); keys are unique. */
PA_DEFINE_INLINE_SORT(sort_ord_quick, candidate_t, ord_lt)

/* A node's ordering is its parent's, minus one buffer, with the minimum
 * offsets of that buffer's neighbours raised: nearly sorted.  Insertion sort
 * handles that in about linear time; past 8 moves per element it hands over
 * to the quicksort. */
static void sort_ord(candidate_t *a, size_t n) {
    size_t moves = 0, limit = 8 * n + 64;
    for (size_t i = 1; i < n; i++) {
        candidate_t x = a[i];
        size_t j = i;
        while (j > 0 && ord_lt(&x, &a[j - 1])) {
            a[j] = a[j - 1];
            j--;
            moves++;
        }
        a[j] = x;
        if (moves > limit) {
            sort_ord_quick(a, n);
            return;
        }
    }
}

/* ---- search ------------------------------------------------------------ */

static int sub_solve(exact_search_t *e, partition_t part);

static bool push_undo(exact_search_t *e, uint32_t what, uint64_t old) {
    if (!RESERVE(e, undo, 1)) return false;
    e->undo[e->undo_n++] = (undo_record_t){what, old};
    return true;
}

static void restore(exact_search_t *e, size_t u0, uint32_t b) {
    while (e->undo_n > u0) {
        undo_record_t u = e->undo[--e->undo_n];
        if (u.what & FLOOR_BIT) e->floor[u.what & ~FLOOR_BIT] = u.old;
        else e->minoff[u.what] = u.old;
    }
    for (uint32_t s = e->sa[b]; s < e->sb[b]; s++) e->total[s] += e->in->size[b];
    e->asg[b] = NONE;
}

/* Place b at asg[b]: raise neighbours' minimum offsets and section floors.
 * Sets *hatless when b has no unplaced neighbour.  false: out of memory. */
static bool apply(exact_search_t *e, uint32_t b, bool *hatless) {
    uint64_t height = e->asg[b] + e->in->size[b];
    size_t naff = 0;
    *hatless = true;
    if (++e->stamp == 0) {
        memset(e->mark, 0, e->S * sizeof(uint32_t));
        e->stamp = 1;
    }
    for (size_t k = e->ovl_start[b]; k < e->ovl_start[b + 1]; k++) {
        uint32_t o = e->ovl[k];
        if (e->asg[o] != NONE) continue;
        *hatless = false;
        if (e->minoff[o] >= height) continue;
        if (!push_undo(e, o, e->minoff[o])) return false;
        e->minoff[o] = height;
        for (uint32_t s = e->sa[o]; s < e->sb[o]; s++) {
            if (e->mark[s] != e->stamp) {
                e->mark[s] = e->stamp;
                e->aff[naff++] = s;
            }
        }
    }
    for (uint32_t s = e->sa[b]; s < e->sb[b]; s++) {
        if (!push_undo(e, s | FLOOR_BIT, e->floor[s])) return false;
        if (height > e->floor[s]) e->floor[s] = height;
        e->total[s] -= e->in->size[b];
    }
    for (size_t k = 0; k < naff; k++) {
        uint32_t s = e->aff[k];
        uint64_t lo = NONE, fl = e->floor[s];
        for (size_t j = e->mem_start[s]; j < e->mem_start[s + 1]; j++) {
            uint32_t o = e->mem[j];
            if (e->asg[o] != NONE) continue;
            if (e->minoff[o] <= fl) { /* the floor cannot rise: stop early */
                lo = NONE;
                break;
            }
            if (e->minoff[o] < lo) lo = e->minoff[o];
        }
        if (lo != NONE && fl < lo) {
            if (!push_undo(e, s | FLOOR_BIT, e->floor[s])) return false;
            e->floor[s] = lo;
        }
    }
    return true;
}

static bool check(const exact_search_t *e, const partition_t *part, uint64_t off) {
    for (uint32_t s = part->slo; s < part->shi; s++) {
        uint64_t f = e->floor[s] > off ? e->floor[s] : off;
        if (f + e->total[s] > e->cap) return false;
    }
    return true;
}

static int search(exact_search_t *e, const partition_t *part, size_t pre_off,
                  size_t orig_off, size_t orig_n, uint64_t min_off,
                  uint32_t min_pidx);

static int decompose(exact_search_t *e, const partition_t *part, size_t pre_off,
                     size_t ord_off, size_t ord_n, uint64_t min_off,
                     uint32_t pidx, uint32_t b) {
    e->sol[b] = e->asg[b];
    size_t c0 = e->bst_n;
    for (uint32_t s = e->sa[b]; s + 1 < e->sb[b]; s++) {
        if (--e->cuts[s] == 0) {
            if (!RESERVE(e, bst, 1)) {
                for (uint32_t t = e->sa[b]; t <= s; t++) e->cuts[t]++;
                e->bst_n = c0;
                return R_NOMEM;
            }
            e->bst[e->bst_n++] = s + 1;
        }
    }
    size_t ncut = e->bst_n - c0;
    int res = R_OK;
    if (ncut == 0) {
        res = search(e, part, pre_off, ord_off, ord_n, min_off, pidx);
    } else {
        uint32_t lo = part->slo;
        for (size_t c = 0; c <= ncut && res == R_OK; c++) {
            uint32_t hi = c < ncut ? e->bst[c0 + c] : part->shi;
            size_t b0 = e->bst_n;
            if (!RESERVE(e, bst, part->nb)) {
                res = R_NOMEM;
                break;
            }
            for (size_t j = 0; j < part->nb; j++) {
                uint32_t o = e->bst[part->boff + j];
                if (e->asg[o] != NONE) continue;
                if (e->sb[o] <= lo || hi <= e->sa[o]) continue;
                e->bst[e->bst_n++] = o;
            }
            if (e->bst_n > b0) {
                partition_t sub = {b0, e->bst_n - b0, lo, hi};
                res = sub_solve(e, sub);
            }
            e->bst_n = b0;
            lo = hi;
        }
    }
    e->bst_n = c0;
    for (uint32_t s = e->sa[b]; s + 1 < e->sb[b]; s++) e->cuts[s]++;
    return res;
}

static int search(exact_search_t *e, const partition_t *part, size_t pre_off,
                  size_t orig_off, size_t orig_n, uint64_t min_off,
                  uint32_t min_pidx) {
    if (e->nodes_left <= 0) return R_ABORTED;
    e->nodes_left--;
    if ((e->nodes++ & 63) == 0 && _pa_plan_now() > e->deadline)
        e->timed_out = true;
    if (e->timed_out) return R_TIMEOUT;
    size_t base = e->ost_n, m = 0;
    if (!RESERVE(e, ost, orig_n)) return R_NOMEM;
    for (size_t j = 0; j < orig_n; j++) {
        uint32_t pidx = e->ost[orig_off + j].pidx;
        uint32_t b = e->pst[pre_off + pidx];
        if (e->asg[b] != NONE) continue;
        e->ost[base + m++] = (candidate_t){e->minoff[b], pidx};
    }
    if (m == 0) {
        for (size_t j = 0; j < part->nb; j++) {
            uint32_t b = e->bst[part->boff + j];
            e->sol[b] = e->asg[b];
        }
        return R_OK;
    }
    e->ost_n = base + m;
    sort_ord(e->ost + base, m);
    uint64_t min_height = NONE;
    for (size_t j = 0; j < m; j++) {
        const candidate_t *o = &e->ost[base + j];
        uint64_t h = o->off + e->in->size[e->pst[pre_off + o->pidx]];
        if (h < min_height) min_height = h;
    }
    int res = R_NOTFOUND;
    for (size_t j = 0; j < m; j++) {
        candidate_t o = e->ost[base + j];
        uint32_t b = e->pst[pre_off + o.pidx];
        if (o.off < min_off || (o.off == min_off && o.pidx < min_pidx))
            continue; /* not canonical */
        if (o.off >= min_height) continue; /* dominated */
        if (o.off + e->in->size[b] > e->cap) continue;
        e->asg[b] = o.off;
        size_t u0 = e->undo_n;
        bool hatless;
        int r = R_NOTFOUND;
        if (!apply(e, b, &hatless)) {
            r = R_NOMEM;
        } else if (check(e, part, o.off)) {
            r = decompose(e, part, pre_off, base, m, o.off, o.pidx, b);
        }
        restore(e, u0, b);
        if (r != R_NOTFOUND) {
            res = r;
            break;
        }
        if (hatless) break;
    }
    e->ost_n = base;
    return res;
}

static int sub_solve(exact_search_t *e, partition_t part) {
    size_t pre_off = e->pst_n, nb = part.nb;
    if (!RESERVE(e, pst, 2 * nb)) return R_NOMEM;
    uint32_t *pre = e->pst + pre_off;
    for (size_t j = 0; j < nb; j++) {
        uint32_t b = e->bst[part.boff + j];
        uint64_t t = 0;
        for (uint32_t s = e->sa[b]; s < e->sb[b]; s++)
            if (e->total[s] > t) t = e->total[s];
        e->tkey[b] = t;
        pre[j] = b;
    }
    pre_sort(e, pre, pre + nb, nb);
    e->pst_n = pre_off + nb;
    size_t ord_off = e->ost_n;
    if (!RESERVE(e, ost, nb)) {
        e->pst_n = pre_off;
        return R_NOMEM;
    }
    for (size_t j = 0; j < nb; j++) e->ost[ord_off + j] = (candidate_t){0, (uint32_t)j};
    e->ost_n = ord_off + nb;
    int res = search(e, &part, pre_off, ord_off, nb, 0, 0);
    e->ost_n = ord_off;
    e->pst_n = pre_off;
    return res;
}

/* ---- set-up ------------------------------------------------------------- */

static void search_free(exact_search_t *e) {
    free(e->sa);
    free(e->sb);
    free(e->ovl_start);
    free(e->ovl);
    free(e->mem_start);
    free(e->mem);
    free(e->floor);
    free(e->total);
    free(e->cuts);
    free(e->asg);
    free(e->minoff);
    free(e->sol);
    free(e->width);
    free(e->area);
    free(e->tkey);
    free(e->mark);
    free(e->aff);
    free(e->undo);
    free(e->ost);
    free(e->pst);
    free(e->bst);
}

/* The section of every compressed time point (secof[0..T)): a new
 * section starts after point p when something ends at p or starts at
 * p + 1, otherwise both points have the same live set.  Returns the number
 * of sections, 0 when out of memory. */
static uint32_t number_sections(const uint32_t *a, const uint32_t *b, size_t n, size_t T,
                                uint32_t *secof) {
    uint32_t *ends = calloc(T + 1, sizeof(uint32_t));
    uint32_t *starts = calloc(T + 1, sizeof(uint32_t));
    uint32_t S = 0;
    if (ends && starts) {
        for (size_t i = 0; i < n; i++) {
            ends[b[i]]++;
            starts[a[i]]++;
        }
        for (size_t p = 0; p < T; p++) {
            if (p > 0 && (ends[p - 1] || starts[p])) S++;
            secof[p] = S;
        }
        S++;
    }
    free(ends);
    free(starts);
    return S;
}

/* The per-buffer and per-section arrays, for e->n buffers and e->S
 * sections.  false: out of memory (search_free() frees what was had). */
static bool search_alloc(exact_search_t *e) {
    size_t n = e->n, S = e->S;
    e->sa = malloc(n * sizeof(uint32_t));
    e->sb = malloc(n * sizeof(uint32_t));
    e->floor = calloc(S, sizeof(uint64_t));
    e->total = calloc(S, sizeof(uint64_t));
    e->cuts = calloc(S, sizeof(uint32_t));
    e->mark = calloc(S, sizeof(uint32_t));
    e->aff = malloc(S * sizeof(uint32_t));
    e->mem_start = calloc(S + 1, sizeof(size_t));
    e->ovl_start = calloc(n + 1, sizeof(size_t));
    e->asg = malloc(n * sizeof(uint64_t));
    e->minoff = calloc(n, sizeof(uint64_t));
    e->sol = malloc(n * sizeof(uint64_t));
    e->width = malloc(n * sizeof(uint64_t));
    e->area = malloc(n * sizeof(long double));
    e->tkey = calloc(n, sizeof(uint64_t));
    return e->sa && e->sb && e->floor && e->total && e->cuts && e->mark && e->aff &&
           e->mem_start && e->ovl_start && e->asg && e->minoff && e->sol && e->width &&
           e->area && e->tkey;
}

/* Each buffer's section range [sa, sb), width and area; each section's
 * total size, cut count and member list (CSR: mem_start / mem).  false:
 * out of memory. */
static bool build_members(exact_search_t *e, const uint32_t *a, const uint32_t *b,
                          const uint32_t *secof) {
    const _pa_plan_inst_t *in = e->in;
    size_t n = e->n, S = e->S, nmem = 0;
    for (size_t i = 0; i < n; i++) {
        e->sa[i] = secof[a[i]];
        e->sb[i] = secof[b[i]] + 1;
        e->asg[i] = NONE;
        e->width[i] = (uint64_t)(in->last[i] - in->first[i]) + 1;
        e->area[i] = (long double)in->size[i] * (long double)e->width[i];
        for (uint32_t s = e->sa[i]; s < e->sb[i]; s++) {
            e->total[s] += in->size[i];
            e->mem_start[s + 1]++;
            if (s + 1 < e->sb[i]) e->cuts[s]++;
        }
        nmem += e->sb[i] - e->sa[i];
    }
    for (size_t s = 0; s < S; s++) e->mem_start[s + 1] += e->mem_start[s];
    e->mem = malloc((nmem ? nmem : 1) * sizeof(uint32_t));
    size_t *fill = calloc(S, sizeof(size_t));
    if (!e->mem || !fill) {
        free(fill);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        for (uint32_t s = e->sa[i]; s < e->sb[i]; s++)
            e->mem[e->mem_start[s] + fill[s]++] = (uint32_t)i;
    free(fill);
    return true;
}

/* Each buffer's overlapping buffers (CSR: ovl_start / ovl).  Buffers
 * sorted by first section (counting sort): j after i overlaps i iff it
 * starts before i ends.  false: out of memory. */
static bool build_overlaps(exact_search_t *e) {
    size_t n = e->n, S = e->S, npair = 0;
    uint32_t *byst = malloc(n * sizeof(uint32_t));
    size_t *cnt = calloc(S + 1, sizeof(size_t));
    size_t *cur = NULL;
    bool ok = false;
    if (!byst || !cnt) goto out;
    for (size_t i = 0; i < n; i++) cnt[e->sa[i] + 1]++;
    for (size_t s = 0; s < S; s++) cnt[s + 1] += cnt[s];
    for (size_t i = 0; i < n; i++) byst[cnt[e->sa[i]]++] = (uint32_t)i;
    for (size_t x = 0; x < n; x++) {
        uint32_t i = byst[x];
        for (size_t y = x + 1; y < n && e->sa[byst[y]] < e->sb[i]; y++) {
            e->ovl_start[i + 1]++;
            e->ovl_start[byst[y] + 1]++;
            npair += 2;
        }
    }
    for (size_t i = 0; i < n; i++) e->ovl_start[i + 1] += e->ovl_start[i];
    e->ovl = malloc((npair ? npair : 1) * sizeof(uint32_t));
    cur = malloc((n ? n : 1) * sizeof(size_t));
    if (!e->ovl || !cur) goto out;
    memcpy(cur, e->ovl_start, n * sizeof(size_t));
    for (size_t x = 0; x < n; x++) {
        uint32_t i = byst[x];
        for (size_t y = x + 1; y < n && e->sa[byst[y]] < e->sb[i]; y++) {
            uint32_t j = byst[y];
            e->ovl[cur[i]++] = j;
            e->ovl[cur[j]++] = i;
        }
    }
    ok = true;
out:
    free(byst);
    free(cnt);
    free(cur);
    return ok;
}

/* Sections, overlaps, memberships, cuts.  false: out of memory. */
static bool search_build(exact_search_t *e) {
    const _pa_plan_inst_t *in = e->in;
    size_t n = in->n, T = 0;
    uint32_t *a = malloc(n * sizeof(uint32_t)), *b = malloc(n * sizeof(uint32_t));
    uint32_t *secof = NULL;
    bool ok = false;
    if (!a || !b || !_pa_plan_compress(in, a, b, &T)) goto out;
    secof = malloc(T * sizeof(uint32_t));
    if (!secof) goto out;
    e->S = number_sections(a, b, n, T, secof);
    ok = e->S && search_alloc(e) && build_members(e, a, b, secof) && build_overlaps(e);
out:
    free(a);
    free(b);
    free(secof);
    return ok;
}

pa_status_t _pa_plan_exact_fit(const _pa_plan_inst_t *in, uint64_t capacity,
                               double deadline, uint64_t *off,
                               uint64_t *nodes) {
    size_t n = in->n;
    if (nodes) *nodes = 0;
    if (n == 0) return PA_OK;
    if (n > PA_PLAN_EXACT_MAX_N) return PA_ERR_INVALID;
    exact_search_t e;
    memset(&e, 0, sizeof(e));
    e.in = in;
    e.n = n;
    e.cap = capacity - capacity % in->align;
    e.deadline = deadline;
    if (!search_build(&e)) {
        search_free(&e);
        return PA_ERR_NOMEM;
    }
    pa_status_t st = PA_OK;
    for (size_t s = 0; s < e.S; s++)
        if (e.total[s] > e.cap) st = PA_ERR_INFEASIBLE; /* above the bound */
    /* top-level partitions: split where no buffer crosses a boundary */
    if (st == PA_OK) {
        int res = R_ABORTED;
        int64_t limit = (int64_t)n;
        while (res == R_ABORTED) {
            limit = limit > INT64_MAX / 2 ? INT64_MAX : 2 * limit;
            for (e.heur = 0; e.heur < 3; e.heur++) {
                e.nodes_left = limit;
                res = R_OK;
                uint32_t lo = 0;
                for (uint32_t s = 0; s < e.S && res == R_OK; s++) {
                    if (s + 1 < e.S && e.cuts[s] != 0) continue;
                    uint32_t hi = s + 1;
                    e.bst_n = 0;
                    if (!RESERVE(&e, bst, n)) {
                        res = R_NOMEM;
                        break;
                    }
                    for (size_t i = 0; i < n; i++)
                        if (e.sa[i] >= lo && e.sb[i] <= hi)
                            e.bst[e.bst_n++] = (uint32_t)i;
                    partition_t p = {0, e.bst_n, lo, hi};
                    if (p.nb) res = sub_solve(&e, p);
                    lo = hi;
                }
                if (res != R_ABORTED) break;
            }
        }
        switch (res) {
        case R_OK:
            memcpy(off, e.sol, n * sizeof(uint64_t));
            break;
        case R_NOTFOUND: st = PA_ERR_INFEASIBLE; break;
        case R_TIMEOUT: st = PA_ERR_TIMEOUT; break;
        default: st = PA_ERR_NOMEM; break;
        }
    }
    if (nodes) *nodes = e.nodes;
    search_free(&e);
    return st;
}
