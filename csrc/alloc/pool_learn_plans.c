/* alloc/pool_learn_plans.c -- the plans of a learning pool (pool_learn.c):
 * a recorded step planned with the static planner (pa_plan_assign), its
 * class table (every distinct offset, for frees found by offset), the
 * plans kept (at most max_plans, the least recently used evicted; the
 * region sized to the largest), and the plans that start with the same
 * size placing their first block at one shared offset. */
#include "pool_learn.h"

#include <stdlib.h>
#include <string.h>

static inline size_t mix(uint64_t k) { return _pa_learn_mix(k); }

static inline size_t block_bytes(const pa_learn_t *L, size_t size) {
    return _pa_learn_block_bytes(L, size);
}

/* ---- plans ------------------------------------------------------------------------ */

void _pa_learn_plan_free(pa_learn_plan_t *P) {
    if (!P) return;
    free(P->ev);
    free(P->e);
    free(P->rank);
    free(P->cls_off);
    free(P->cls_live);
    free(P->cls_step);
    free(P->cls_index);
    free(P->freed_at);
    free(P);
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

long _pa_learn_cls_of(const pa_learn_plan_t *P, uint64_t off) {
    if (!P->cls_index) return -1;
    for (size_t i = mix(off) & P->cls_mask;; i = (i + 1) & P->cls_mask) {
        uint32_t c = P->cls_index[i];
        if (!c) return -1;
        if (P->cls_off[c - 1] == off) return (long)c - 1;
    }
}

/* The class table: every distinct planned offset, and offset -> class.
 * Built aside and swapped in whole, so on failure (no memory) the plan
 * keeps the table it had. */
static int plan_classes(pa_learn_plan_t *P) {
    uint64_t *offs = malloc((2 * P->n + 1) * sizeof(*offs));
    if (!offs) return -1;
    size_t k = 0;
    for (size_t i = 0; i < P->n; i++)
        for (int par = 0; par < 2; par++)
            if (P->e[i].off[par] != PA_LEARN_GENERAL) offs[k++] = P->e[i].off[par];
    qsort(offs, k, sizeof(*offs), cmp_u64);
    size_t d = 0;
    for (size_t i = 0; i < k; i++)
        if (!d || offs[d - 1] != offs[i]) offs[d++] = offs[i];
    size_t cap = 8;
    while (cap < 2 * d) cap <<= 1;
    uint32_t *index = calloc(cap, sizeof(*index));
    uint32_t *live = calloc(d ? d : 1, sizeof(*live));
    uint64_t *step = calloc(d ? d : 1, sizeof(*step));
    if (!index || !live || !step) {
        free(offs);
        free(index);
        free(live);
        free(step);
        return -1;
    }
    free(P->cls_off);
    free(P->cls_index);
    free(P->cls_live);
    free(P->cls_step);
    P->cls_off = offs;
    P->ncls = d;
    P->cls_mask = cap - 1;
    P->cls_index = index;
    P->cls_live = live;
    P->cls_step = step;
    for (size_t c = 0; c < d; c++) {
        size_t i = mix(offs[c]) & P->cls_mask;
        while (P->cls_index[i]) i = (i + 1) & P->cls_mask;
        P->cls_index[i] = (uint32_t)(c + 1);
    }
    for (size_t i = 0; i < P->n; i++)
        for (int par = 0; par < 2; par++)
            P->e[i].cls[par] = P->e[i].off[par] == PA_LEARN_GENERAL
                                   ? 0 : (uint32_t)_pa_learn_cls_of(P, P->e[i].off[par]);
    return 0;
}


_pa_learn_life_t *_pa_learn_lifetimes(const uint64_t *ev, size_t nev, size_t *n_out) {
    size_t n = 0;
    for (size_t t = 0; t < nev; t++) n += (ev[t] & 3) == EV_ALLOC;
    _pa_learn_life_t *l = malloc((n ? n : 1) * sizeof(*l));
    if (!l) return NULL;
    size_t k = 0;
    for (size_t t = 0; t < nev; t++) {
        uint64_t v = ev[t] >> 2;
        switch (ev[t] & 3) {
        case EV_ALLOC:
            l[k] = (_pa_learn_life_t){(int64_t)t, -1, -1, (size_t)v};
            k++;
            break;
        case EV_FREE:
            if (v < k) l[v].f = (int64_t)t;
            break;
        default:
            if (v < n) l[v].pf = (int64_t)t;
            break;
        }
    }
    *n_out = n;
    return l;
}

/* Plan a recorded sequence; NULL if nothing in it can be planned (or no
 * memory, or the planner failed). */
pa_learn_plan_t *_pa_learn_build_plan(pa_learn_t *L, const uint64_t *ev, size_t nev, uint64_t hash) {
    size_t n;
    _pa_learn_life_t *l = _pa_learn_lifetimes(ev, nev, &n);
    pa_learn_plan_t *P = calloc(1, sizeof(*P));
    pa_plan_buffer_t *b = malloc((2 * n + 1) * sizeof(*b));
    size_t *slot = malloc((2 * n + 1) * sizeof(*slot)); /* buffer -> entry*2+par */
    if (!l || !P || !b || !slot) goto fail;
    P->n = n;
    P->nev = nev;
    P->hash = hash;
    P->ev = malloc((nev ? nev : 1) * sizeof(*P->ev));
    P->e = calloc(n ? n : 1, sizeof(*P->e));
    P->rank = malloc((n ? n : 1) * sizeof(*P->rank));
    P->freed_at = calloc(n ? n : 1, sizeof(*P->freed_at));
    if (!P->ev || !P->e || !P->rank || !P->freed_at) goto fail;
    memcpy(P->ev, ev, nev * sizeof(*ev));
    size_t nb = 0;
    int64_t end = nev ? (int64_t)nev - 1 : 0;
    for (size_t i = 0; i < n; i++) {
        pa_learn_entry_t *e = &P->e[i];
        e->size = l[i].size;
        e->off[0] = e->off[1] = PA_LEARN_GENERAL;
        uint64_t sz = l[i].size ? l[i].size : 1;
        if (l[i].f >= 0) {                  /* freed within the step */
            b[nb] = (pa_plan_buffer_t){sz, l[i].a, l[i].f, 0};
            slot[nb++] = 2 * i;
        } else if (l[i].pf >= 0) {          /* freed in the next step */
            e->carry = 1;
            b[nb] = (pa_plan_buffer_t){sz, 0, end, 0};
            slot[nb++] = 2 * i;
            if (l[i].pf > l[i].a) {         /* both copies live at once */
                b[nb] = (pa_plan_buffer_t){sz, 0, end, 0};
                slot[nb++] = 2 * i + 1;
            }
        }
    }
    if (!nb) goto fail;
    pa_plan_options_t opt;
    pa_plan_options_default(&opt);
    opt.alignment = L->gran;
    opt.strategy = PA_PLAN_GREEDY_BY_SIZE; /* no timed search: the same plan every run */
    pa_plan_result_t res;
    if (pa_plan_assign(b, nb, &opt, &res) != PA_OK) goto fail;
    for (size_t k = 0; k < nb; k++) {
        pa_learn_entry_t *e = &P->e[slot[k] / 2];
        e->off[slot[k] % 2] = b[k].offset;
        if (slot[k] % 2 == 0) e->off[1] = b[k].offset; /* until a second slot */
    }
    /* need: in-step frees before each alloc; rank: their order */
    uint32_t done = 0, k = 0;
    for (size_t t = 0; t < nev; t++) {
        uint64_t v = ev[t] >> 2;
        if ((ev[t] & 3) == EV_ALLOC) P->e[k++].need = done;
        else if ((ev[t] & 3) == EV_FREE && v < n) P->rank[done++] = (uint32_t)v;
    }
    P->nfree = done;
    P->arena = (size_t)res.arena_bytes;
    if (plan_classes(P) != 0) goto fail;
    free(l);
    free(b);
    free(slot);
    return P;
fail:
    free(l);
    free(b);
    free(slot);
    _pa_learn_plan_free(P);
    return NULL;
}

pa_learn_plan_t *_pa_learn_find_plan(const pa_learn_t *L, const uint64_t *ev, size_t nev, uint64_t h) {
    for (size_t i = 0; i < L->nplans; i++) {
        pa_learn_plan_t *P = L->plans[i];
        if (P->hash == h && P->nev == nev && !memcmp(P->ev, ev, nev * sizeof(*ev))) return P;
    }
    return NULL;
}

void _pa_learn_update_want(pa_learn_t *L) {
    L->want = 0;
    for (size_t i = 0; i < L->nplans; i++)
        if (L->plans[i]->arena > L->want) L->want = L->plans[i]->arena;
}

/* Keep P, evicting the least recently used plan with nothing live when
 * full; 0 if kept. */
int _pa_learn_add_plan(pa_learn_t *L, pa_learn_plan_t *P) {
    if (L->nplans == L->max_plans) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < L->nplans; i++) {
            pa_learn_plan_t *Q = L->plans[i];
            if (Q == L->owner && L->live) continue;
            if (victim == SIZE_MAX || Q->last_used < L->plans[victim]->last_used) victim = i;
        }
        if (victim == SIZE_MAX) return -1;
        pa_learn_plan_t *Q = L->plans[victim];
        if (L->owner == Q) L->owner = NULL;
        if (L->last == Q) L->last = NULL;
        if (L->cur == Q) L->cur = NULL;
        _pa_learn_plan_free(Q);
        L->plans[victim] = L->plans[--L->nplans];
    }
    P->id = ++L->next_plan_id;
    L->plans[L->nplans++] = P;
    _pa_learn_update_want(L);
    return 0;
}

int _pa_learn_cmp_range(const void *x, const void *y) {
    const _pa_learn_range_t *a = x, *b = y;
    return (a->off > b->off) - (a->off < b->off);
}

/* ---- plans that start alike ---------------------------------------------------- */

/* Plans with the same first size are told apart by the second request
 * only.  So that the first block need not wait for it in the zones
 * (warm-up memory kept committed beside the region: 5 % of the peak on the
 * dynamic-shape trace, the input tensor), every such plan places its first
 * block at one common offset, free in each of them for as long as that
 * block lives: the block is served from the region at once, on the plan
 * the predictor expects, and moves its record (not its bytes) to the plan
 * the second request picks. */

/* The first block of P, if it can share an offset: planned, freed within
 * the step (not a carry). */
int _pa_learn_first_movable(const pa_learn_plan_t *P) {
    return P->n && !P->e[0].carry && P->e[0].off[0] != PA_LEARN_GENERAL;
}

/* Append to r[] the bytes P's other blocks occupy while its first block
 * lives (lifetimes compared as check_plan does); -1 if out of memory. */
static int first_busy(const pa_learn_t *L, const pa_learn_plan_t *P, _pa_learn_range_t **r, size_t *nr,
                      size_t *cap) {
    size_t n;
    _pa_learn_life_t *l = _pa_learn_lifetimes(P->ev, P->nev, &n);
    if (!l || n != P->n) {
        free(l);
        return -1;
    }
    int64_t end = P->nev ? (int64_t)P->nev - 1 : 0, a0 = l[0].a, f0 = l[0].f;
    for (size_t i = 1; i < n; i++) {
        const pa_learn_entry_t *e = &P->e[i];
        int64_t b0 = e->carry ? 0 : l[i].a, b1 = e->carry ? end : l[i].f;
        if (b0 > f0 || a0 > b1) continue;
        for (int par = 0; par < 2; par++) {
            if (e->off[par] == PA_LEARN_GENERAL || (par && e->off[1] == e->off[0])) continue;
            if (*nr == *cap) {
                size_t c2 = *cap ? 2 * *cap : 64;
                _pa_learn_range_t *g = realloc(*r, c2 * sizeof(*g));
                if (!g) {
                    free(l);
                    return -1;
                }
                *r = g;
                *cap = c2;
            }
            (*r)[(*nr)++] = (_pa_learn_range_t){e->off[par], e->off[par] + block_bytes(L, e->size)};
        }
    }
    free(l);
    return 0;
}

/* Lowest offset from `from` where `bytes` fit between the sorted ranges. */
static uint64_t lowest_gap(const _pa_learn_range_t *r, size_t nr, uint64_t from, uint64_t bytes) {
    uint64_t y = from;
    for (size_t i = 0; i < nr && r[i].off < y + bytes; i++)
        if (r[i].end > y) y = r[i].end;
    return y;
}

/* Give Q's first block and that of every plan starting with its size one
 * offset, within the region the plans already need (L->want); nothing
 * changes when no such offset exists (the first block then waits in the
 * zones, as before).  A plan whose blocks are live keeps its offset. */
void _pa_learn_share_first(pa_learn_t *L, pa_learn_plan_t *Q) {
    if (!_pa_learn_first_movable(Q)) return;
    size_t s0 = Q->e[0].size, bs = block_bytes(L, s0), nfam = 0, nr = 0, cap = 0;
    pa_learn_plan_t *fam[PA_LEARN_MAX_SEQUENCES];
    _pa_learn_range_t *r = NULL;
    uint64_t fixed = PA_LEARN_GENERAL;
    for (size_t i = 0; i < L->nplans; i++) {
        pa_learn_plan_t *P = L->plans[i];
        if (!P->n || P->e[0].size != s0) continue;
        if (!_pa_learn_first_movable(P)) return;
        if (P == L->owner && L->live) fixed = P->e[0].off[0];
        fam[nfam++] = P;
    }
    if (nfam < 2) return;
    for (size_t i = 0; i < nfam; i++)
        if (first_busy(L, fam[i], &r, &nr, &cap) != 0) {
            free(r);
            return;
        }
    if (nr) qsort(r, nr, sizeof(*r), _pa_learn_cmp_range);
    uint64_t y = lowest_gap(r, nr, fixed == PA_LEARN_GENERAL ? 0 : fixed, bs);
    free(r);
    if ((fixed != PA_LEARN_GENERAL && y != fixed) || y + bs > L->want) return;
    for (size_t i = 0; i < nfam; i++) {
        pa_learn_plan_t *P = fam[i];
        uint64_t was = P->e[0].off[0];
        size_t arena = P->arena;
        if (was == y) continue;
        P->e[0].off[0] = P->e[0].off[1] = y;
        if (y + bs > P->arena) P->arena = y + bs;
        if (plan_classes(P) != 0) { /* no memory: P keeps its own place */
            P->e[0].off[0] = P->e[0].off[1] = was;
            P->arena = arena;
        }
    }
}
