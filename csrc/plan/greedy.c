/* plan/greedy.c -- the planner's heuristics: first fit, greedy by size,
 * greedy by breadth, and placement in an arbitrary order.
 *
 * First fit works in execution order, so it is an online allocator: a sweep
 * frees the dead buffers and a treap of free gaps (ordered by address,
 * augmented with the longest gap below each node) finds the lowest fit in
 * O(log n).  O(n log n) in all, however many buffers overlap.
 *
 * The greedy ones place buffers out of time order against the placed
 * buffers whose lifetimes overlap; the design choice is how those are found
 * without an O(n^2) pair loop: time is compressed to the distinct
 * endpoints (T <= 2n points) and two segment trees over those points hold
 * node lists of placed buffers:
 *   - a cover tree (each lifetime stored at its O(log T) canonical nodes):
 *     walking leaf(first) to the root yields every placed buffer live at
 *     `first`;
 *   - a start tree (each buffer stored on the path from leaf(its first) to
 *     the root): the canonical nodes of (first, last] yield every placed
 *     buffer that starts inside the new lifetime.
 * The two sets are disjoint and together are exactly the placed buffers
 * overlapping [first, last], found in O(log T + k).  They are sorted by
 * offset and scanned for gaps: O(k log k) per buffer, where k is the
 * number of placed lifetime-overlapping buffers (small for real networks;
 * it is only large when very many buffers are live together).
 *
 * Greedy by breadth enumerates the still-unplaced buffers live at a step
 * from a third (cover) tree whose node lists are compacted as they are
 * read, so every entry is read at most twice: O(n log T) in all. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- growable uint32 lists ------------------------------------------- */

typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} vec_t;

static bool vec_push(vec_t *v, uint32_t x) {
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? 2 * v->cap : 4;
        uint32_t *nv = realloc(v->v, nc * sizeof(uint32_t));
        if (!nv) return false;
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
    return true;
}

static void vecs_free(vec_t *vs, size_t m) {
    if (!vs) return;
    for (size_t i = 0; i < m; i++) free(vs[i].v);
    free(vs);
}

/* ---- the placed-buffer index ----------------------------------------- */

typedef struct {
    size_t M;      /* leaves (a power of two >= T) */
    vec_t *cover;  /* 2M node lists */
    vec_t *start;  /* 2M node lists */
} placed_index_t;

static bool placed_index_init(placed_index_t *t, size_t T) {
    t->M = 1;
    while (t->M < T) t->M <<= 1;
    t->cover = calloc(2 * t->M, sizeof(vec_t));
    t->start = calloc(2 * t->M, sizeof(vec_t));
    return t->cover && t->start;
}

static void placed_index_free(placed_index_t *t) {
    vecs_free(t->cover, 2 * t->M);
    vecs_free(t->start, 2 * t->M);
}

/* Store id in the canonical nodes of [lo, hi] of a tree of lists. */
static bool cover_insert(vec_t *tree, size_t M, size_t lo, size_t hi,
                         uint32_t id) {
    size_t l = lo + M, r = hi + M + 1;
    while (l < r) {
        if (l & 1) {
            if (!vec_push(&tree[l++], id)) return false;
        }
        if (r & 1) {
            if (!vec_push(&tree[--r], id)) return false;
        }
        l >>= 1;
        r >>= 1;
    }
    return true;
}

static bool placed_index_insert(placed_index_t *t, uint32_t lo, uint32_t hi, uint32_t id) {
    if (!cover_insert(t->cover, t->M, lo, hi, id)) return false;
    for (size_t x = lo + t->M; x >= 1; x >>= 1)
        if (!vec_push(&t->start[x], id)) return false;
    return true;
}

typedef struct {
    uint64_t off, end;
} time_span_t;

/* Sort spans by offset (ties in any order: the gap scan gives the same
 * answer).  This is the hot loop of the greedy heuristics. */
#define SPAN_LT(p, q) ((p)->off < (q)->off)
PA_DEFINE_INLINE_SORT(sort_spans, time_span_t, SPAN_LT)

typedef struct {
    const _pa_plan_inst_t *in;
    uint32_t *a, *b;  /* compressed lifetimes */
    size_t T;
    placed_index_t pt;
    time_span_t *scratch;
    size_t scap;
    uint64_t *off;
    uint64_t top;
} placer_t;

static void placer_free(placer_t *p) {
    free(p->a);
    free(p->b);
    free(p->scratch);
    placed_index_free(&p->pt);
}

static bool placer_init(placer_t *p, const _pa_plan_inst_t *in,
                        uint64_t *off) {
    memset(p, 0, sizeof(*p));
    p->in = in;
    p->off = off;
    size_t n = in->n ? in->n : 1;
    p->a = malloc(n * sizeof(uint32_t));
    p->b = malloc(n * sizeof(uint32_t));
    p->scap = 64;
    p->scratch = malloc(p->scap * sizeof(time_span_t));
    if (!p->a || !p->b || !p->scratch || !_pa_plan_compress(in, p->a, p->b, &p->T) ||
        !placed_index_init(&p->pt, p->T ? p->T : 1)) {
        placer_free(p);
        return false;
    }
    return true;
}

static bool scratch_push(placer_t *p, size_t *k, uint32_t id) {
    if (*k == p->scap) {
        time_span_t *ns = realloc(p->scratch, 2 * p->scap * sizeof(time_span_t));
        if (!ns) return false;
        p->scratch = ns;
        p->scap *= 2;
    }
    p->scratch[(*k)++] = (time_span_t){p->off[id], p->off[id] + p->in->size[id]};
    return true;
}

static bool append_list(placer_t *p, const vec_t *v, size_t *k) {
    for (uint32_t j = 0; j < v->n; j++)
        if (!scratch_push(p, k, v->v[j])) return false;
    return true;
}

/* Place buffer i (lowest gap, or TFLite's best gap), then index it. */
static bool place(placer_t *p, uint32_t i, int best_fit) {
    const placed_index_t *t = &p->pt;
    size_t k = 0, M = t->M;
    uint32_t lo = p->a[i], hi = p->b[i];
    for (size_t x = lo + M; x >= 1; x >>= 1)
        if (!append_list(p, &t->cover[x], &k)) return false;
    if (lo < hi) {
        size_t l = lo + 1 + M, r = hi + M + 1;
        while (l < r) {
            if (l & 1) {
                if (!append_list(p, &t->start[l++], &k)) return false;
            }
            if (r & 1) {
                if (!append_list(p, &t->start[--r], &k)) return false;
            }
            l >>= 1;
            r >>= 1;
        }
    }
    sort_spans(p->scratch, k);
    uint64_t s = p->in->size[i], cur = 0, best = UINT64_MAX,
             best_gap = UINT64_MAX;
    for (size_t j = 0; j < k; j++) {
        const time_span_t *o = &p->scratch[j];
        if (o->off >= cur && o->off - cur >= s) {
            uint64_t gap = o->off - cur;
            if (!best_fit) {
                best = cur;
                break;
            }
            if (gap < best_gap) {
                best_gap = gap;
                best = cur;
                if (gap == s) break; /* a perfect fit cannot be beaten */
            }
        }
        if (o->end > cur) cur = o->end;
    }
    if (best == UINT64_MAX) best = cur;
    p->off[i] = best;
    if (best + s > p->top) p->top = best + s;
    return placed_index_insert(&p->pt, lo, hi, i);
}

pa_status_t _pa_plan_place_order(const _pa_plan_inst_t *in,
                                 const uint32_t *order, int best_fit,
                                 uint64_t *off, uint64_t *arena) {
    placer_t p;
    if (!placer_init(&p, in, off)) return PA_ERR_NOMEM;
    for (size_t r = 0; r < in->n; r++) {
        if (!place(&p, order[r], best_fit)) {
            placer_free(&p);
            return PA_ERR_NOMEM;
        }
    }
    *arena = p.top;
    placer_free(&p);
    return PA_OK;
}

/* ---- orders ------------------------------------------------------------ */

typedef struct {
    uint64_t key1;
    int64_t key2;
    uint32_t id;
} order_key_t;

/* key1 descending, then key2 ascending, then id ascending */
static int cmp_order_key(const void *x, const void *y) {
    const order_key_t *p = x, *q = y;
    if (p->key1 != q->key1) return p->key1 > q->key1 ? -1 : 1;
    if (p->key2 != q->key2) return p->key2 < q->key2 ? -1 : 1;
    return (p->id > q->id) - (p->id < q->id);
}

/* ids by requested size descending, then first, then id */
static pa_status_t size_order(const _pa_plan_inst_t *in, uint32_t **out) {
    size_t n = in->n;
    order_key_t *k = malloc((n ? n : 1) * sizeof(order_key_t));
    uint32_t *o = malloc((n ? n : 1) * sizeof(uint32_t));
    if (!k || !o) {
        free(k);
        free(o);
        return PA_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        k[i] = (order_key_t){in->raw[i], in->first[i], (uint32_t)i};
    }
    qsort(k, n, sizeof(order_key_t), cmp_order_key);
    for (size_t i = 0; i < n; i++) o[i] = k[i].id;
    free(k);
    *out = o;
    return PA_OK;
}

/* ---- first fit: a sweep with an ordered set of free gaps ----------------- */

/* First fit in execution order is an online allocator: at step `first` every
 * buffer with last < first is dead.  The free space below infinity is a set
 * of gaps kept in a treap ordered by address and augmented with the largest
 * gap length in each subtree, so "lowest gap >= s" is one descent: the whole
 * heuristic is O(n log n) however many buffers are live together.  The last
 * gap runs to infinity (end == UINT64_MAX), so a fit always exists. */

typedef struct {
    uint64_t start, end, maxlen;
    uint32_t left, right, prio;
} gap_node_t;

#define NIL 0u /* node 0 is the null node */

typedef struct {
    gap_node_t *t;
    uint32_t root, freelist, used;
    uint64_t rng;
} gap_treap_t;

static uint64_t glen(const gap_node_t *x) { return x->end - x->start; }

static void gfix(gap_treap_t *g, uint32_t x) {
    gap_node_t *t = g->t;
    uint64_t m = glen(&t[x]);
    if (t[x].left && t[t[x].left].maxlen > m) m = t[t[x].left].maxlen;
    if (t[x].right && t[t[x].right].maxlen > m) m = t[t[x].right].maxlen;
    t[x].maxlen = m;
}

/* split by start: left < key <= right */
static void gsplit(gap_treap_t *g, uint32_t x, uint64_t key, uint32_t *l, uint32_t *r) {
    if (!x) {
        *l = *r = NIL;
        return;
    }
    if (g->t[x].start < key) {
        gsplit(g, g->t[x].right, key, &g->t[x].right, r);
        *l = x;
    } else {
        gsplit(g, g->t[x].left, key, l, &g->t[x].left);
        *r = x;
    }
    gfix(g, x);
}

static uint32_t gmerge(gap_treap_t *g, uint32_t a, uint32_t b) {
    if (!a) return b;
    if (!b) return a;
    if (g->t[a].prio > g->t[b].prio) {
        g->t[a].right = gmerge(g, g->t[a].right, b);
        gfix(g, a);
        return a;
    }
    g->t[b].left = gmerge(g, a, g->t[b].left);
    gfix(g, b);
    return b;
}

static void ginsert(gap_treap_t *g, uint64_t start, uint64_t end) {
    uint32_t x = g->freelist;
    if (x) g->freelist = g->t[x].left;
    else x = ++g->used;
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    g->t[x] = (gap_node_t){start, end, end - start, NIL, NIL, (uint32_t)g->rng};
    uint32_t l, r;
    gsplit(g, g->root, start, &l, &r);
    g->root = gmerge(g, gmerge(g, l, x), r);
}

static void gerase(gap_treap_t *g, uint64_t start) {
    uint32_t l, m, r;
    gsplit(g, g->root, start, &l, &m);
    gsplit(g, m, start + 1, &m, &r);
    if (m) {
        g->t[m].left = g->freelist;
        g->freelist = m;
    }
    g->root = gmerge(g, l, r);
}

/* Set the gap that starts at `key` to [start, end) (ordering unchanged). */
static void gset(gap_treap_t *g, uint32_t x, uint64_t key, uint64_t start, uint64_t end) {
    if (g->t[x].start == key) {
        g->t[x].start = start;
        g->t[x].end = end;
    } else if (key < g->t[x].start) {
        gset(g, g->t[x].left, key, start, end);
    } else {
        gset(g, g->t[x].right, key, start, end);
    }
    gfix(g, x);
}

/* node of the lowest gap with length >= s (one exists: the last is infinite) */
static uint32_t glowest(const gap_treap_t *g, uint64_t s) {
    uint32_t x = g->root;
    for (;;) {
        const gap_node_t *n = &g->t[x];
        if (n->left && g->t[n->left].maxlen >= s) x = n->left;
        else if (glen(n) >= s) return x;
        else x = n->right;
    }
}

/* the gap starting exactly at key, or NIL */
static uint32_t gfind(const gap_treap_t *g, uint64_t key) {
    uint32_t x = g->root;
    while (x && g->t[x].start != key)
        x = key < g->t[x].start ? g->t[x].left : g->t[x].right;
    return x;
}

/* the gap with the largest start < key, or NIL */
static uint32_t gpred(const gap_treap_t *g, uint64_t key) {
    uint32_t x = g->root, best = NIL;
    while (x) {
        if (g->t[x].start < key) {
            best = x;
            x = g->t[x].right;
        } else {
            x = g->t[x].left;
        }
    }
    return best;
}

static void gfree_block(gap_treap_t *g, uint64_t o, uint64_t e) {
    uint32_t p = gpred(g, o), q = gfind(g, e);
    bool below = p && g->t[p].end == o;
    if (below && q) {
        uint64_t qend = g->t[q].end, pstart = g->t[p].start;
        gerase(g, e);
        gset(g, g->root, pstart, pstart, qend);
    } else if (below) {
        uint64_t pstart = g->t[p].start;
        gset(g, g->root, pstart, pstart, e);
    } else if (q) {
        uint64_t qend = g->t[q].end;
        gset(g, g->root, e, o, qend);
    } else {
        ginsert(g, o, e);
    }
}

static int cmp_order_key_time(const void *x, const void *y) {
    const order_key_t *a = x, *b = y;
    if (a->key2 != b->key2) return a->key2 < b->key2 ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

pa_status_t _pa_plan_first_fit(const _pa_plan_inst_t *in, uint64_t *off,
                               uint64_t *arena) {
    size_t n = in->n;
    *arena = 0;
    if (n == 0) return PA_OK;
    order_key_t *byfirst = malloc(n * sizeof(order_key_t));
    order_key_t *bylast = malloc(n * sizeof(order_key_t));
    gap_treap_t g = {calloc(n + 3, sizeof(gap_node_t)), NIL, NIL, 0, 0x2545F4914F6CDD1DULL};
    if (!byfirst || !bylast || !g.t) {
        free(byfirst);
        free(bylast);
        free(g.t);
        return PA_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        byfirst[i] = (order_key_t){0, in->first[i], (uint32_t)i};
        bylast[i] = (order_key_t){0, in->last[i], (uint32_t)i};
    }
    qsort(byfirst, n, sizeof(order_key_t), cmp_order_key_time);
    qsort(bylast, n, sizeof(order_key_t), cmp_order_key_time);
    ginsert(&g, 0, UINT64_MAX);
    uint64_t top = 0;
    size_t d = 0;
    for (size_t r = 0; r < n; r++) {
        uint32_t i = byfirst[r].id;
        int64_t f = in->first[i];
        for (; d < n && bylast[d].key2 < f; d++) {
            uint32_t j = bylast[d].id;
            if (in->size[j]) gfree_block(&g, off[j], off[j] + in->size[j]);
        }
        uint64_t s = in->size[i];
        if (s == 0) {
            off[i] = 0;
            continue;
        }
        uint32_t x = glowest(&g, s);
        uint64_t o = g.t[x].start, end = g.t[x].end;
        if (end - o == s) gerase(&g, o);
        else gset(&g, g.root, o, o + s, end);
        off[i] = o;
        if (o + s > top) top = o + s;
    }
    *arena = top;
    free(byfirst);
    free(bylast);
    free(g.t);
    return PA_OK;
}

/* TFLite's ArenaPlanner order: requested size descending, then first use,
 * then id. */
pa_status_t _pa_plan_greedy_size(const _pa_plan_inst_t *in, uint64_t *off,
                                 uint64_t *arena) {
    uint32_t *o;
    pa_status_t st = size_order(in, &o);
    if (st != PA_OK) return st;
    st = _pa_plan_place_order(in, o, 1, off, arena);
    free(o);
    return st;
}

/* ---- greedy by breadth ------------------------------------------------- */

typedef struct {
    uint64_t breadth;
    uint32_t step;
} step_t;

static int cmp_step(const void *x, const void *y) {
    const step_t *p = x, *q = y;
    if (p->breadth != q->breadth) return p->breadth > q->breadth ? -1 : 1;
    return (p->step > q->step) - (p->step < q->step);
}

/* Sort ids by size descending (then first, then id) with a merge sort
 * keyed through `in`: qsort has no context argument in C11 and a global
 * would break re-entrancy. */
static void sort_ids_by_size(const _pa_plan_inst_t *in, uint32_t *ids,
                             uint32_t *tmp, size_t k) {
    if (k < 2) return;
    if (k <= 16) {
        for (size_t i = 1; i < k; i++) {
            uint32_t x = ids[i];
            size_t j = i;
            while (j > 0) {
                uint32_t y = ids[j - 1];
                bool before = in->raw[x] != in->raw[y]
                                  ? in->raw[x] > in->raw[y]
                              : in->first[x] != in->first[y]
                                  ? in->first[x] < in->first[y]
                                  : x < y;
                if (!before) break;
                ids[j] = y;
                j--;
            }
            ids[j] = x;
        }
        return;
    }
    size_t h = k / 2;
    sort_ids_by_size(in, ids, tmp, h);
    sort_ids_by_size(in, ids + h, tmp, k - h);
    size_t i = 0, j = h, o = 0;
    while (i < h && j < k) {
        uint32_t x = ids[i], y = ids[j];
        bool take_y = in->raw[y] != in->raw[x] ? in->raw[y] > in->raw[x]
                      : in->first[y] != in->first[x]
                          ? in->first[y] < in->first[x]
                          : y < x;
        tmp[o++] = take_y ? ids[j++] : ids[i++];
    }
    while (i < h) tmp[o++] = ids[i++];
    while (j < k) tmp[o++] = ids[j++];
    memcpy(ids, tmp, k * sizeof(uint32_t));
}

pa_status_t _pa_plan_greedy_breadth(const _pa_plan_inst_t *in, uint64_t *off,
                                    uint64_t *arena) {
    size_t n = in->n;
    if (n == 0) {
        *arena = 0;
        return PA_OK;
    }
    placer_t p;
    if (!placer_init(&p, in, off)) return PA_ERR_NOMEM;
    pa_status_t st = PA_ERR_NOMEM;
    size_t T = p.T, M = p.pt.M;
    step_t *steps = malloc(T * sizeof(step_t));
    uint64_t *diff = calloc(T + 1, sizeof(uint64_t));
    vec_t *live = calloc(2 * M, sizeof(vec_t));
    unsigned char *done = calloc(n, 1);
    uint32_t *ids = malloc(n * sizeof(uint32_t));
    uint32_t *tmp = malloc(n * sizeof(uint32_t));
    if (!steps || !diff || !live || !done || !ids || !tmp) goto out;
    /* breadth of each compressed step (wrapping arithmetic is exact here:
     * every prefix is a sum of live sizes <= in->total) */
    for (size_t i = 0; i < n; i++) {
        diff[p.a[i]] += in->size[i];
        diff[p.b[i] + 1] -= in->size[i];
        if (!cover_insert(live, M, p.a[i], p.b[i], (uint32_t)i)) goto out;
    }
    uint64_t run = 0;
    for (size_t s = 0; s < T; s++) {
        run += diff[s];
        steps[s] = (step_t){run, (uint32_t)s};
    }
    qsort(steps, T, sizeof(step_t), cmp_step);
    for (size_t r = 0; r < T; r++) {
        size_t k = 0;
        for (size_t x = steps[r].step + M; x >= 1; x >>= 1) {
            vec_t *v = &live[x];
            uint32_t w = 0;
            for (uint32_t j = 0; j < v->n; j++) {
                uint32_t id = v->v[j];
                if (done[id]) continue; /* compaction: drop placed ones */
                v->v[w++] = id;
                ids[k++] = id;
                done[id] = 1;
            }
            v->n = w;
        }
        sort_ids_by_size(in, ids, tmp, k);
        for (size_t j = 0; j < k; j++)
            if (!place(&p, ids[j], 1)) goto out;
    }
    *arena = p.top;
    st = PA_OK;
out:
    free(steps);
    free(diff);
    vecs_free(live, live ? 2 * M : 0);
    free(done);
    free(ids);
    free(tmp);
    placer_free(&p);
    return st;
}
