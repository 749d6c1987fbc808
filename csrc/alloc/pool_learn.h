/* alloc/pool_learn.h -- the work pool's learned steps (pool_learn.c): record
 * each step's alloc/free sequence, plan a repeated one, serve it at
 * planned offsets in one region.  Not installed; names start with _pa_.
 *
 * Lock rule: a pa_learn_t belongs to one pool and is guarded by that
 * pool's lock (see pool_internal.h); these functions are called with it
 * held and never take it.  pool.c calls in here; this file calls the page
 * heap (for the backend, the limit and the reserved peak) and the planner
 * (pa_plan_assign), nothing above.
 */
#ifndef PA_POOL_LEARN_H
#define PA_POOL_LEARN_H

#include "page_heap.h"

#define PA_LEARN_MAX_SEQUENCES 64
#define PA_LEARN_CANDIDATES 16     /* sequences seen, not yet planned     */
#define PA_LEARN_GENERAL UINT64_MAX /* entry offset: served by the zones   */
#define PA_LEARN_JUDGE 64          /* steps per judgement of the plans      */

/* One allocation of a learned sequence. */
typedef struct pa_learn_entry {
    size_t size;              /* requested bytes it must match            */
    uint64_t off[2];          /* offset by step parity (differ only for a
                                 double-buffered carry); GENERAL          */
    uint32_t cls[2];          /* class (distinct offset) of off[parity]   */
    uint32_t need;            /* in-step frees (by rank) that must have
                                 happened before it is handed out         */
    uint8_t carry;            /* freed in the next step                   */
} pa_learn_entry_t;

/* A learned sequence and its plan.  The per-class and per-entry arrays
 * are the serving state (valid while this plan owns the region). */
typedef struct pa_learn_plan {
    uint64_t id;
    uint64_t *ev;             /* the recorded events                      */
    size_t nev;
    uint64_t hash;
    pa_learn_entry_t *e;      /* allocations, in order                    */
    size_t n;
    uint32_t *rank;           /* r -> entry freed r-th within the step    */
    size_t nfree;
    uint64_t *cls_off;        /* class -> offset                          */
    uint32_t *cls_live;       /* class -> live entry + 1, 0 = free        */
    uint64_t *cls_step;       /* class -> step its live block came from   */
    size_t ncls;
    uint32_t *cls_index;      /* open addressing: offset -> class + 1     */
    size_t cls_mask;
    uint64_t *freed_at;       /* entry -> step of its in-step free        */
    size_t arena;             /* bytes of region the plan needs           */
    uint64_t next_id;         /* the sequence that followed it last time  */
    uint64_t last_used;       /* step it was last matched or served       */
    int par;                  /* parity of its last served step           */
} pa_learn_plan_t;

typedef struct pa_learn_cand {
    uint64_t *ev;
    size_t nev, cap;
    uint64_t hash;
    unsigned count;
    uint64_t last;            /* step it was last seen                    */
    uint64_t unrec;           /* L->unrec then                            */
    size_t dist;              /* step kinds seen between its last two
                                 sightings (reuse distance)               */
} pa_learn_cand_t;

/* ptr -> allocation index of a step (linear probing, backward-shift
 * deletion; entries stamped with another step read as empty, so a new
 * step starts empty without a clear). */
typedef struct pa_ptr_slot {
    uintptr_t key;
    uint64_t stamp;
    uint32_t idx;
} pa_ptr_slot_t;

typedef struct pa_ptr_table {
    pa_ptr_slot_t *s;
    size_t mask, n;           /* n: entries with the current stamp        */
    uint64_t stamp;
} pa_ptr_table_t;

typedef struct pa_learn {
    /* configuration */
    int on, auto_step;
    unsigned repeats, max_plans;
    size_t max_events, gran;
    size_t small_max;         /* the zones' slab sizes (0: none): a step
                                 made mostly of these is not planned      */
    pa_page_heap_t *heap;     /* backend, limit, `outside` bytes, peak    */

    /* the one region */
    uintptr_t base;           /* 0 = none                                 */
    size_t size;
    size_t want;              /* largest plan's arena                     */

    pa_learn_plan_t *plans[PA_LEARN_MAX_SEQUENCES];
    size_t nplans;
    uint64_t next_plan_id;
    pa_learn_cand_t cand[PA_LEARN_CANDIDATES];

    /* the step under way */
    int started;              /* on, and a step mark has been seen        */
    int hot;                  /* started, and this step is recorded or
                                 served                                   */
    uint64_t step;            /* step number                              */
    uint64_t *ev;             /* events recorded in this step             */
    size_t nev, evcap;
    int overflow;             /* too many events, or a quiet step: not
                                 recorded                                 */
    unsigned novel;           /* recorded steps in a row seen for the
                                 first time (random traffic): from
                                 NOVEL_QUIET on, only 1 step in 8 is
                                 recorded                                 */
    size_t nalloc;            /* allocations so far in this step          */
    pa_learn_plan_t *cur;     /* plan chosen for this step                */
    int tried, serving, par;
    int defer;                /* several plans start with the step's first
                                 size, the second request picks the plan:
                                 1 = the first block came from the zones,
                                 2 = from their shared offset, on the
                                 predicted plan (moved if another wins)   */
    size_t size0;             /* the step's first size                    */
    int freed0;               /* ...and its block is already freed        */
    size_t ai, prefix;        /* next entry; in-step frees done in order  */
    pa_learn_plan_t *last;    /* plan the previous step matched           */
    size_t base_requested;    /* auto_step: live bytes at the step start  */
    pa_ptr_table_t tab[2];    /* zone blocks of this / the previous step  */
    int tcur;

    /* live blocks in the region: all of one plan (`owner`) */
    pa_learn_plan_t *owner;
    size_t cur_in, cur_carry, prev_in, prev_carry, older;
    size_t live, live_bytes, live_req;

    /* does learning pay? (judged every PA_LEARN_JUDGE steps, see
       judge() in pool_learn.c) */
    uint64_t j_paid, j_lost;  /* plan_steps and the steps lost (LOST() in
                                 pool_learn.c) when the window began      */
    uint64_t w_steps;         /* step marks in this window                */
    uint64_t w_allocs, j_hits; /* allocations in this window; hits when it
                                 began                                    */
    uint64_t built;           /* plans made                               */
    uint64_t unplanned;       /* recorded steps of a sequence no plan can
                                 be made of                               */
    uint64_t next_yield;      /* first step the region may be given to the
                                 zones again (_pa_learn_yield_region)     */
    uint64_t next_trim;       /* ...the zones trimmed after a served step */
    uint64_t yield_gap, trim_gap; /* steps until the next of each: doubled
                                 each time (a periodic need keeps its
                                 memory, as the plain pool would)         */
    uint64_t heap_grows;      /* the heap's grows at the last such trim   */
    int trimmed;              /* the last such check trimmed: if the zones
                                 grew again, the next keeps the growth    */
    uint64_t rest;            /* marks left before learning resumes (0 =
                                 learning)                                */
    unsigned fallbacks_in_row; /* backs the rest off: 4^k windows         */
    uint64_t unrec;           /* steps not recorded (quiet or too long):
                                 each counts as a step kind in a reuse
                                 distance                                 */

    /* statistics */
    uint64_t hits, misses, plan_steps, steps, frees, fallbacks;
    int map_failed;           /* the region could not grow: no retry
                                 until a new plan or a release            */
} pa_learn_t;

void _pa_learn_init(pa_learn_t *L, const pa_pool_config_t *cfg, size_t gran,
                    pa_page_heap_t *heap);
/* Free the plans, the tables and unmap the region. */
void _pa_learn_destroy(pa_learn_t *L);

/* 1 if `ptr` lies in the learned region (one compare). */
static inline int _pa_learn_owns(const pa_learn_t *L, const void *ptr) {
    return (uintptr_t)ptr - L->base < L->size;
}

static inline size_t _pa_learn_mix(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return (size_t)(k ^ (k >> 29));
}

static inline size_t _pa_learn_block_bytes(const pa_learn_t *L, size_t size) {
    if (size == 0) size = 1;
    return (size + L->gran - 1) & ~(L->gran - 1);
}

/* Append an event to the step's list (unless not recording). */
void _pa_learn_record(pa_learn_t *L, uint64_t ev);
void *_pa_learn_alloc_slow(pa_learn_t *L, size_t size, size_t *bsize);

/* A planned block for the step's next request of `size` bytes, or NULL
 * (the zones serve it; call _pa_learn_note_alloc then).  *bsize gets the
 * block bytes.  Only while L->hot.  The hit is inline: the plan's next
 * entry has this size, the frees it needs happened, its place is free;
 * everything else (choosing a plan, a divergence) is in pool_learn.c. */
static inline void *_pa_learn_alloc(pa_learn_t *L, size_t size, size_t *bsize) {
    pa_learn_plan_t *P = L->cur;
    size_t ai = L->ai;
    if (pa_likely(L->serving && ai < P->n && ai == L->nalloc)) {
        const pa_learn_entry_t *e = &P->e[ai];
        uint64_t off = e->off[L->par];
        uint32_t c = e->cls[L->par];
        if (pa_likely(e->size == size && off != PA_LEARN_GENERAL && e->need <= L->prefix &&
                      !P->cls_live[c])) {
            P->cls_live[c] = (uint32_t)ai + 1;
            P->cls_step[c] = L->step;
            if (e->carry) L->cur_carry++;
            else L->cur_in++;
            size_t bs = _pa_learn_block_bytes(L, size);
            L->live++;
            L->live_bytes += bs;
            L->live_req += size;
            L->hits++;
            L->ai = ai + 1;
            L->nalloc++;
            uint64_t ev = (uint64_t)size << 2; /* EV_ALLOC */
            if (pa_likely(!L->overflow && L->nev < L->evcap)) L->ev[L->nev++] = ev;
            else _pa_learn_record(L, ev);
            *bsize = bs;
            return (void *)(L->base + off);
        }
    }
    return _pa_learn_alloc_slow(L, size, bsize);
}
/* A zone block handed out while L->hot: recorded. */
void _pa_learn_note_alloc(pa_learn_t *L, void *ptr, size_t size);
/* A zone block freed while L->hot: recorded. */
void _pa_learn_note_free(pa_learn_t *L, const void *ptr);
pa_status_t _pa_learn_free_slow(pa_learn_t *L, const void *ptr, size_t *req, size_t *bsize);

/* Free the planned block at `ptr` (in the region): PA_OK with its
 * requested and block bytes, or PA_ERR_DOUBLE_FREE / PA_ERR_FOREIGN.  The
 * common cases are inline: a block of this step, or a carry of the
 * previous one, of the plan serving it, found at the first probe of the
 * class table; the rest (older blocks, bad pointers) is in pool_learn.c. */
static inline pa_status_t _pa_learn_free(pa_learn_t *L, const void *ptr, size_t *req,
                                         size_t *bsize) {
    pa_learn_plan_t *P = L->cur;
    if (pa_likely(P && P == L->owner && L->hot)) {
        uint64_t off = (uint64_t)((uintptr_t)ptr - L->base);
        uint32_t c1 = P->cls_index[_pa_learn_mix(off) & P->cls_mask];
        if (pa_likely(c1 && P->cls_off[c1 - 1] == off)) {
            uint32_t c = c1 - 1, v = P->cls_live[c];
            if (pa_likely(v && P->cls_step[c] == L->step && !P->e[v - 1].carry)) {
                uint32_t idx = v - 1;
                size_t size = P->e[idx].size, bs = _pa_learn_block_bytes(L, size);
                P->cls_live[c] = 0;
                L->cur_in--;
                L->live--;
                L->live_bytes -= bs;
                L->live_req -= size;
                L->frees++;
                uint64_t ev = (uint64_t)idx << 2 | 1u; /* EV_FREE */
                if (pa_likely(!L->overflow && L->nev < L->evcap)) L->ev[L->nev++] = ev;
                else _pa_learn_record(L, ev);
                P->freed_at[idx] = L->step;
                while (L->prefix < P->nfree && P->freed_at[P->rank[L->prefix]] == L->step)
                    L->prefix++;
                *req = size;
                *bsize = bs;
                return PA_OK;
            }
            if (v && P->cls_step[c] + 1 == L->step && P->e[v - 1].carry) {
                /* the previous step's carry (a loop variable rebound) */
                uint32_t idx = v - 1;
                size_t size = P->e[idx].size, bs = _pa_learn_block_bytes(L, size);
                P->cls_live[c] = 0;
                L->prev_carry--;
                L->live--;
                L->live_bytes -= bs;
                L->live_req -= size;
                L->frees++;
                uint64_t ev = (uint64_t)idx << 2 | 2u; /* EV_PREV */
                if (pa_likely(!L->overflow && L->nev < L->evcap)) L->ev[L->nev++] = ev;
                else _pa_learn_record(L, ev);
                *req = size;
                *bsize = bs;
                return PA_OK;
            }
        }
    }
    return _pa_learn_free_slow(L, ptr, req, bsize);
}
/* Block bytes (and *req: requested bytes) of the live planned block at
 * `ptr`; 0 if none, *st (may be NULL) saying why (PA_ERR_DOUBLE_FREE /
 * PA_ERR_FOREIGN). */
size_t _pa_learn_block(const pa_learn_t *L, const void *ptr, size_t *req, pa_status_t *st);

/* End the step: learn from it, start the next.  Returns 1 when a new
 * plan was made (the warm-up memory can go back), a step was served
 * whole after the zones grew (what they grew by can go back; at most
 * once per PA_LEARN_JUDGE steps), the region must grow, or learning
 * fell back (the caller trims, then calls _pa_learn_map_region), else
 * 0. */
int _pa_learn_step(pa_learn_t *L, size_t requested);
/* (Re)map the region to L->want bytes if nothing lives in it and it is
 * smaller; within the heap's limit.  Gives an empty region back when
 * `release` (free_all).  */
void _pa_learn_map_region(pa_learn_t *L, int release);

/* The zones must grow during a step no plan serves: give the empty
 * region back first (it is mapped again at the step's end, when the
 * caller trims the zones), so that the zones' peak and the region's do
 * not add up; PA_LEARN_JUDGE steps before the next time, then twice as
 * many after each (at most PA_LEARN_JUDGE << 6).  1 if given. */
int _pa_learn_yield_region(pa_learn_t *L);

/* Number of broken invariants of the region and the plans; *live,
 * *bytes and *req get the live planned blocks, block and requested bytes
 * recounted from the class tables. */
size_t _pa_learn_check(const pa_learn_t *L, size_t *live, size_t *bytes, size_t *req);
void _pa_learn_stats(const pa_learn_t *L, pa_pool_stats_t *out);

/* ---- plans (pool_learn_plans.c) ------------------------------------------- */

/* Event kinds of a recorded step (the low two bits of an event). */
#define EV_ALLOC 0u
#define EV_FREE 1u  /* a block of this step                              */
#define EV_PREV 2u  /* a block of the previous step                       */

/* Lifetimes of a recorded sequence: alloc time, own free time, free time
 * of the previous step's copy (-1 = none), per allocation. */
typedef struct {
    int64_t a, f, pf;
    size_t size;
} _pa_learn_life_t;

/* A byte range [off, end) of a plan, and their order by start (qsort). */
typedef struct {
    uint64_t off, end;
} _pa_learn_range_t;
int _pa_learn_cmp_range(const void *x, const void *y);

/* The lifetimes of the allocations of events ev[0..nev) (*n_out of
 * them; malloc'd, NULL without memory). */
_pa_learn_life_t *_pa_learn_lifetimes(const uint64_t *ev, size_t nev, size_t *n_out);
/* A plan of the recorded step ev[0..nev) (its hash `hash`): offsets from
 * pa_plan_assign, carries, the class table; NULL if it cannot be made. */
pa_learn_plan_t *_pa_learn_build_plan(pa_learn_t *L, const uint64_t *ev, size_t nev,
                                      uint64_t hash);
/* The plan of exactly these events, or NULL. */
pa_learn_plan_t *_pa_learn_find_plan(const pa_learn_t *L, const uint64_t *ev, size_t nev,
                                     uint64_t h);
/* Keep plan P (the least recently used one evicted at max_plans); 0 or -1. */
int _pa_learn_add_plan(pa_learn_t *L, pa_learn_plan_t *P);
void _pa_learn_plan_free(pa_learn_plan_t *P);
/* The region size every plan needs: the largest plan's (L->want). */
void _pa_learn_update_want(pa_learn_t *L);
/* The class of planned offset `off` in P, or -1. */
long _pa_learn_cls_of(const pa_learn_plan_t *P, uint64_t off);
/* Whether P's first block can share an offset with the plans that start
 * with the same size, and placing Q's first block at that offset. */
int _pa_learn_first_movable(const pa_learn_plan_t *P);
void _pa_learn_share_first(pa_learn_t *L, pa_learn_plan_t *Q);

#endif /* PA_POOL_LEARN_H */
