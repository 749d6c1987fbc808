/* alloc/pool_learn.c -- a work pool that learns its inference loop.
 *
 * An inference loop makes the same allocations and frees every step.
 * Once the caller marks step ends (pa_pool_step), the pool records each
 * step as a list of events -- "alloc of n bytes", "free of this step's
 * k-th block", "free of the previous step's k-th block" -- and keeps the
 * lists it saw recently as candidates.  When one list has been seen
 * `repeats` times, and fewer other step kinds than the plans kept were seen
 * since its last sighting (reuse_distance: a kind that comes back farther
 * apart would be evicted before its plan serves), it is planned with the
 * static planner's greedy-by-size heuristic (pa_plan_assign: no timed
 * search, so the same steps get the same plan every run, for a fraction
 * of the time): a block freed within its step lives
 * from its alloc to its free; a block freed during the next step (a loop
 * variable rebound in the next iteration) is a carry and gets a slot for
 * the whole step -- two slots, used on alternate steps, when the next
 * step's copy is made before the old one dies; a block living longer is
 * left to the zones.  Every plan lives in ONE region sized to the largest
 * plan (not their sum), mapped beside the page heap.
 *
 * Serving is a compare and an add: the step's first request picks a plan
 * (when several plans start with that size, the first block comes from
 * the zones and the second request decides; ties go to the plan that
 * followed the previous step's plan last time, else to the most recently
 * used one); the i-th request must
 * have the plan's i-th size and the in-step frees the plan counted before
 * it must have happened (`need` against `prefix`, the frees done in the
 * plan's order), else the step diverges: the zones serve the rest of it,
 * and blocks already handed out stay where they are until freed.  The
 * region is reused at a step start only when nothing but the previous
 * step's carries of the same plan still lives in it, so no planned block
 * is ever placed over a live one.  Frees are recognised by address (one
 * compare with the region) and found by offset in the plan's class table.
 *
 * Recording continues while a plan serves (an array store per event), so
 * a step that diverges is still recorded whole and a new sequence repeated
 * `repeats` times is learned too (up to `max_plans`, the least recently
 * used one evicted).  Zone blocks are tracked by pointer in two small
 * tables (this step's and the previous step's) to name their frees.
 * Traffic that never repeats (NOVEL_QUIET new sequences in a row) is
 * recorded one step in 8 only, then in 16, 32 and 64 after every 16 more
 * recorded steps that come out new (quiet_period), so learning costs
 * little where it cannot help; a sequence that starts to repeat is still
 * learned within two periods.
 *
 * The region and the zones share one footprint: when the zones must grow
 * during a step no plan serves, an empty region is given back first and
 * mapped again at the step's end (_pa_learn_yield_region), and a step
 * served whole after the zones grew lets the pool trim that growth --
 * once: growth needed again after a trim is kept for GAP_MAX steps (a
 * loop whose first step diverges each round faulted it in every round).
 *
 * Learning must never cost more than it gives.  Every PA_LEARN_JUDGE step
 * marks (or EARLY_MARKS, once the window saw EARLY_ALLOCS allocations:
 * long steps that never repeat are each recorded and tracked by pointer)
 * the pool weighs the window: steps served from a plan to their end
 * against steps lost -- each step that diverged, each step recorded again
 * of a sequence no plan is made of (mostly_small), and twice each plan made
 * (a planner run, and a step served by the zones; plans evicted and made
 * again, 28 step kinds for 16 plans, must count against learning).  When at least LOST_MIN steps were lost and
 * more than twice as many as were served (a loop of 16 step signatures
 * still learns in its first window; a plan made just before the window
 * closes has not had its chance yet), every plan is dropped (the region goes back once nothing
 * lives in it; the zones keep what they hold, as the plain pool would)
 * and the pool runs as the plain pool -- no recording, no
 * planned offsets -- for PA_LEARN_JUDGE << 2k marks (k the fallbacks in a
 * row; 64, 256, 1,024, then 4,096 marks: a learning turn that loses costs
 * a few times the plain pool's time, so the turns must thin out fast),
 * then learns afresh.  The judgement counts events, not
 * time, so the same program falls back at the same step every run.
 */
#include "pool_learn.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_REPEATS 2u
#define DEFAULT_PLANS 16u
#define DEFAULT_EVENTS ((size_t)65536)
#define UNPLANNABLE ((unsigned)-1)
#define CHECK_PAIRS_MAX 2048
#define NOVEL_QUIET 16
#define DEFER_ZONES 1 /* ambiguous first size: first block from the zones */
#define DEFER_GUESS 2 /* ...served at the offset the candidates share     */
#define REST_SHIFT_MAX 6 /* the plain pool's turn: at most JUDGE << 6 marks */
#define LOST_MIN 8      /* lost steps a window needs before it can fall back */
#define GAP_MAX ((uint64_t)PA_LEARN_JUDGE << REST_SHIFT_MAX)
#define ALLOCS_MIN 512  /* allocations a window needs before they are weighed */
#define EARLY_MARKS 16  /* a window closes after these marks already when */
#define EARLY_ALLOCS 4096 /* ...it saw this many allocations (long steps)   */

static inline size_t mix(uint64_t k) { return _pa_learn_mix(k); }

/* Steps lost so far (judge()): steps that diverged, twice each plan made,
 * and steps recorded again although no plan can be made of them. */
#define LOST(L) ((L)->misses + 2 * (L)->built + (L)->unplanned)

static inline size_t block_bytes(const pa_learn_t *L, size_t size) {
    return _pa_learn_block_bytes(L, size);
}

/* ---- event list ------------------------------------------------------------ */

void _pa_learn_record(pa_learn_t *L, uint64_t ev) {
    if (L->overflow) return;
    if (L->nev == L->evcap) {
        if (L->nev >= L->max_events) {
            L->overflow = 1;
            return;
        }
        size_t cap = L->evcap ? 2 * L->evcap : 256;
        if (cap > L->max_events) cap = L->max_events;
        uint64_t *n = realloc(L->ev, cap * sizeof(*n));
        if (!n) {
            L->overflow = 1;
            return;
        }
        L->ev = n;
        L->evcap = cap;
    }
    L->ev[L->nev++] = ev;
}

static uint64_t hash_events(const uint64_t *ev, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ ev[i]) * 1099511628211ull;
    return h;
}

/* ---- pointer tables ------------------------------------------------------------ */

static int tab_grow(pa_ptr_table_t *t) {
    size_t cap = t->s ? 2 * (t->mask + 1) : 64;
    pa_ptr_slot_t *s = calloc(cap, sizeof(*s));
    if (!s) return -1;
    if (t->s) {
        for (size_t i = 0; i <= t->mask; i++) {
            if (t->s[i].stamp != t->stamp) continue;
            size_t j = mix(t->s[i].key) & (cap - 1);
            while (s[j].stamp == t->stamp) j = (j + 1) & (cap - 1);
            s[j] = t->s[i];
        }
        free(t->s);
    }
    t->s = s;
    t->mask = cap - 1;
    return 0;
}

/* A lost entry (no memory) only makes that block's free unrecorded. */
static void tab_put(pa_ptr_table_t *t, uintptr_t key, uint32_t idx) {
    if ((t->n + 1) * 2 > (t->s ? t->mask + 1 : 0) && tab_grow(t) != 0) return;
    size_t i = mix(key) & t->mask;
    while (t->s[i].stamp == t->stamp) i = (i + 1) & t->mask;
    t->s[i].key = key;
    t->s[i].stamp = t->stamp;
    t->s[i].idx = idx;
    t->n++;
}

static int tab_take(pa_ptr_table_t *t, uintptr_t key, uint32_t *idx) {
    if (!t->n) return 0;
    pa_ptr_slot_t *s = t->s;
    size_t m = t->mask, i = mix(key) & m;
    for (;; i = (i + 1) & m) {
        if (s[i].stamp != t->stamp) return 0;
        if (s[i].key == key) break;
    }
    *idx = s[i].idx;
    /* backward-shift deletion keeps every probe chain unbroken */
    for (size_t j = i;;) {
        j = (j + 1) & m;
        if (s[j].stamp != t->stamp) break;
        size_t h = mix(s[j].key) & m;
        int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (!stays) {
            s[i] = s[j];
            i = j;
        }
    }
    s[i].stamp = 0;
    t->n--;
    return 1;
}

/* ---- candidates ------------------------------------------------------------------- */

/* How many other step kinds were seen since c's last sighting: the
 * candidates and plans seen after it, and every step not recorded.  A
 * sequence that comes back only after more kinds than the pool keeps
 * plans (an irregular program replayed: 24 kinds for 16 plans) would be
 * evicted before its plan serves: a planner run and region bytes for
 * nothing. */
static size_t reuse_distance(const pa_learn_t *L, const pa_learn_cand_t *c) {
    size_t d = (size_t)(L->unrec - c->unrec);
    for (int i = 0; i < PA_LEARN_CANDIDATES; i++)
        d += L->cand[i].count && &L->cand[i] != c && L->cand[i].last > c->last;
    for (size_t i = 0; i < L->nplans; i++) d += L->plans[i]->last_used > c->last;
    return d;
}

static pa_learn_cand_t *see_candidate(pa_learn_t *L, uint64_t h) {
    pa_learn_cand_t *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < PA_LEARN_CANDIDATES; i++) {
        pa_learn_cand_t *c = &L->cand[i];
        if (!c->count) {
            if (!free_slot) free_slot = c;
            continue;
        }
        if (c->hash == h && c->nev == L->nev && !memcmp(c->ev, L->ev, L->nev * sizeof(*c->ev))) {
            if (c->count != UNPLANNABLE) c->count++;
            c->dist = reuse_distance(L, c);
            c->last = L->step;
            c->unrec = L->unrec;
            return c;
        }
        if (!oldest || c->last < oldest->last) oldest = c;
    }
    pa_learn_cand_t *c = free_slot ? free_slot : oldest;
    if (c->cap < L->nev) {
        uint64_t *n = realloc(c->ev, L->nev * sizeof(*n));
        if (!n) return NULL;
        c->ev = n;
        c->cap = L->nev;
    }
    memcpy(c->ev, L->ev, L->nev * sizeof(*c->ev));
    c->nev = L->nev;
    c->hash = h;
    c->count = 1;
    c->last = L->step;
    c->unrec = L->unrec;
    c->dist = SIZE_MAX;
    return c;
}

static void start_step(pa_learn_t *L, size_t requested);

/* ---- life cycle --------------------------------------------------------------------- */

void _pa_learn_init(pa_learn_t *L, const pa_pool_config_t *cfg, size_t gran,
                    pa_page_heap_t *heap) {
    memset(L, 0, sizeof(*L));
    L->on = cfg->learn != 0;
    L->auto_step = cfg->auto_step != 0;
    L->repeats = cfg->learn_repeats ? cfg->learn_repeats : DEFAULT_REPEATS;
    L->max_plans = cfg->learn_sequences ? cfg->learn_sequences : DEFAULT_PLANS;
    if (L->max_plans > PA_LEARN_MAX_SEQUENCES) L->max_plans = PA_LEARN_MAX_SEQUENCES;
    L->max_events = cfg->learn_max_events ? cfg->learn_max_events : DEFAULT_EVENTS;
    L->gran = gran;
    L->heap = heap;
    L->step = 1;
    L->yield_gap = L->trim_gap = PA_LEARN_JUDGE;
    if (L->on && L->auto_step) { /* boundaries come by themselves */
        L->started = 1;
        start_step(L, 0);
    }
}

void _pa_learn_destroy(pa_learn_t *L) {
    for (size_t i = 0; i < L->nplans; i++) _pa_learn_plan_free(L->plans[i]);
    for (int i = 0; i < PA_LEARN_CANDIDATES; i++) free(L->cand[i].ev);
    free(L->ev);
    free(L->tab[0].s);
    free(L->tab[1].s);
    if (L->base) _pa_backend_unmap(&L->heap->backend, (void *)L->base, L->size);
    L->heap->outside = 0;
    memset(L, 0, sizeof(*L));
}

/* Record one step in this many (see the top). */
static unsigned quiet_period(unsigned novel) {
    if (novel < NOVEL_QUIET) return 1;
    unsigned k = (novel - NOVEL_QUIET) / 16;
    return 8u << (k < 3 ? k : 3);
}

static void start_step(pa_learn_t *L, size_t requested) {
    L->hot = 1;
    L->step++;
    L->nev = 0;
    L->overflow = L->novel >= NOVEL_QUIET && (L->step & (quiet_period(L->novel) - 1)) != 0;
    L->nalloc = 0;
    L->cur = NULL;
    L->tried = L->serving = L->defer = L->freed0 = 0;
    L->ai = L->prefix = 0;
    L->tcur ^= 1;
    L->tab[L->tcur].stamp = L->step;
    L->tab[L->tcur].n = 0;
    L->base_requested = requested;
}

void _pa_learn_map_region(pa_learn_t *L, int release) {
    pa_page_heap_t *h = L->heap;
    if (L->live) return;
    if (release) L->map_failed = 0;
    if (release || L->want > L->size) {
        if (L->base) _pa_backend_unmap(&h->backend, (void *)L->base, L->size);
        L->base = 0;
        L->size = 0;
        h->outside = 0;
    }
    if (release || !L->want || L->base) return;
    size_t want;
    if (!_pa_align_up(L->want, PA_PAGE_SIZE, &want)) return;
    if (h->limit && (h->reserved > h->limit || want > h->limit - h->reserved)) {
        L->map_failed = 1;
        return;
    }
    void *m = _pa_backend_map(&h->backend, want, PA_PAGE_SIZE);
    if (!m) {
        L->map_failed = 1;
        return;
    }
    L->base = (uintptr_t)m;
    L->size = want;
    h->outside = want;
    if (h->reserved + want > h->peak_reserved) h->peak_reserved = h->reserved + want;
}

/* The region and the zones share one footprint: a step that no plan
 * serves gets its memory from the zones while the region idles, and
 * without this the two peaks add up (the batch-varying loop's warm pass:
 * 1.57x the peak live bytes against the plain pool's 1.16x). */
/* The next gap between two region yields (or two trims after growth):
 * a need that keeps coming back is periodic, and its memory is better
 * kept than mapped and faulted every period. */
static uint64_t back_off(uint64_t gap) {
    return gap < GAP_MAX ? 2 * gap : gap;
}

int _pa_learn_yield_region(pa_learn_t *L) {
    if (!L->base || L->live || L->serving || L->step < L->next_yield) return 0;
    _pa_backend_unmap(&L->heap->backend, (void *)L->base, L->size);
    L->base = 0;
    L->size = 0;
    L->heap->outside = 0;
    L->next_yield = L->step + L->yield_gap;
    L->yield_gap = back_off(L->yield_gap);
    return 1;
}

/* ---- the step ---------------------------------------------------------------------- */

/* The region's live blocks age by one step. */
static void age_region(pa_learn_t *L) {
    L->older += L->prev_in + L->prev_carry;
    L->prev_in = L->cur_in;
    L->prev_carry = L->cur_carry;
    L->cur_in = L->cur_carry = 0;
}

/* Drop every plan but the one whose blocks still live in the region. */
static void drop_plans(pa_learn_t *L) {
    size_t keep = 0;
    for (size_t i = 0; i < L->nplans; i++) {
        pa_learn_plan_t *P = L->plans[i];
        if (P == L->owner && L->live) L->plans[keep++] = P;
        else _pa_learn_plan_free(P);
    }
    L->nplans = keep;
    if (!keep) L->owner = NULL;
    L->cur = L->last = NULL;
    _pa_learn_update_want(L);
}

/* Learning did not pay over the window: the plain pool's turn (see the
 * top). */
static void fall_back(pa_learn_t *L) {
    unsigned k = 2 * L->fallbacks_in_row < REST_SHIFT_MAX ? 2 * L->fallbacks_in_row
                                                          : REST_SHIFT_MAX;
    L->fallbacks++;
    L->fallbacks_in_row++;
    L->rest = (uint64_t)PA_LEARN_JUDGE << k;
    drop_plans(L);
    for (int i = 0; i < PA_LEARN_CANDIDATES; i++) L->cand[i].count = 0;
    L->novel = 0;
    L->hot = L->serving = L->defer = L->tried = 0;
    L->nalloc = L->nev = 0;
}

/* One step mark of the window; 1 if learning falls back. */
static int judge(pa_learn_t *L) {
    L->w_allocs += L->nalloc;
    ++L->w_steps;
    if (L->w_steps < PA_LEARN_JUDGE && (L->w_steps < EARLY_MARKS || L->w_allocs < EARLY_ALLOCS))
        return 0;
    uint64_t paid = L->plan_steps - L->j_paid, lost = LOST(L) - L->j_lost;
    uint64_t hit = L->hits - L->j_hits, allocs = L->w_allocs;
    L->w_steps = 0;
    L->w_allocs = 0;
    L->j_paid = L->plan_steps;
    L->j_lost = LOST(L);
    L->j_hits = L->hits;
    /* steps lost against steps served; and, since every allocation a plan
     * does not serve is recorded and tracked by pointer, allocations
     * served against allocations made: a plan that serves a few short
     * steps of a program whose big steps never repeat costs more than it
     * gives (a k-means fit: 1.75x the plain pool's time per pair) */
    if ((lost >= LOST_MIN && 2 * paid < lost) || (allocs >= ALLOCS_MIN && 4 * hit < allocs)) {
        fall_back(L);
        return 1;
    }
    if (paid) L->fallbacks_in_row = 0;
    return 0;
}

/* A step mark while the plain pool has its turn: the region's blocks age;
 * once none lives the last plan goes too (1: the caller gives the region
 * back); the last mark of the turn starts learning afresh. */
static int rest_step(pa_learn_t *L, size_t requested) {
    age_region(L);
    if (--L->rest == 0) {
        L->j_paid = L->plan_steps;
        L->j_lost = LOST(L);
        L->j_hits = L->hits;
        L->w_steps = 0;
        L->w_allocs = 0;
        start_step(L, requested);
    } else {
        L->step++;
    }
    if (!L->live && L->nplans) drop_plans(L);
    return L->base && !L->live;
}

/* Whether at most one of the candidate step's allocations is above the
 * slab sizes.  The slab caches' fast path serves the small ones as
 * cheaply as a plan does, and one large block is reused in place by the
 * zones' caches: a plan can gain neither time nor footprint there, and
 * it adds its step marks, its choice at each step's first request and
 * the blocks the zones still serve (a NumPy loop of 11 blocks a step, one
 * of 256 KiB, every step served: 1.17x the plain pool's time per pair).
 * Such a step is left to the zones; the judgement (nothing served) soon
 * gives the plain pool its turn, no region ever mapped beside them. */
static int mostly_small(const pa_learn_t *L, const pa_learn_cand_t *c) {
    size_t big = 0;
    for (size_t i = 0; i < c->nev; i++)
        big += (c->ev[i] & 3) == EV_ALLOC && (size_t)(c->ev[i] >> 2) > L->small_max;
    return big <= 1;
}

int _pa_learn_step(pa_learn_t *L, size_t requested) {
    L->steps++;
    if (!L->on) return 0;
    if (L->rest) return rest_step(L, requested);
    if (!L->started) {
        L->started = 1;
        start_step(L, requested);
        return 0;
    }
    pa_learn_plan_t *P = L->cur, *matched = NULL;
    int made = 0;
    int full = L->serving && P && L->ai == P->n && L->ai == L->nalloc;
    if (L->serving && !full) L->misses++; /* fewer requests than planned */
    if (full) {
        matched = P;
        L->plan_steps++;
        L->novel = 0;
        if (L->heap->grows != L->heap_grows && L->step >= L->next_trim) {
            /* served again after the zones grew: the growth goes back --
             * unless it grew again since the last such trim: what was
             * trimmed was needed again, and trimming once more would only
             * fault it back in; it is kept for GAP_MAX steps */
            L->heap_grows = L->heap->grows;
            L->next_trim = L->step + (L->trimmed ? GAP_MAX : L->trim_gap);
            L->trim_gap = back_off(L->trim_gap);
            made = !L->trimmed;
            L->trimmed = !L->trimmed;
        }
    } else if (L->overflow) {
        L->unrec++;
    } else if (L->nev) {
        uint64_t h = hash_events(L->ev, L->nev);
        matched = _pa_learn_find_plan(L, L->ev, L->nev, h);
        pa_learn_cand_t *c = matched ? NULL : see_candidate(L, h);
        L->novel = matched || (c && c->count != 1) ? 0 : L->novel + 1;
        if (c && c->count == UNPLANNABLE) L->unplanned++;
        int ready = c && c->count != UNPLANNABLE &&
                    c->count >= L->repeats && c->dist < L->max_plans;
        if (ready && mostly_small(L, c)) {
            c->count = UNPLANNABLE;
        } else if (ready) {
            pa_learn_plan_t *Q = _pa_learn_build_plan(L, c->ev, c->nev, h);
            if (Q) L->built++;
            if (Q && _pa_learn_add_plan(L, Q) == 0) {
                _pa_learn_share_first(L, Q);
                matched = Q;
                made = 1;
                L->map_failed = 0;
                c->count = 0; /* the slot is free again */
            } else if (Q) { /* no plan could make room: try again later */
                _pa_learn_plan_free(Q);
            } else {
                c->count = UNPLANNABLE;
            }
        }
    }
    if (matched) matched->last_used = L->step;
    if (L->last) L->last->next_id = matched ? matched->id : 0;
    L->last = matched;
    age_region(L);
    if (judge(L)) { /* the plain pool's turn begins with this mark */
        L->step++;
        return 1;   /* the caller trims; an empty region goes back */
    }
    start_step(L, requested);
    return made || (L->want > L->size && !L->live && !L->map_failed);
}

/* ---- serving ------------------------------------------------------------------------ */

/* P can serve this step: it starts with `size0` (and has `size1` next,
 * unless size1 is SIZE_MAX), fits the region, and nothing of another
 * step lives where it would place blocks. */
static int usable(const pa_learn_t *L, const pa_learn_plan_t *P, size_t size0, size_t size1) {
    if (!P->n || P->e[0].size != size0 || P->arena > L->size) return 0;
    if (size1 != SIZE_MAX && (P->n < 2 || P->e[1].size != size1)) return 0;
    if (L->older || L->prev_in || L->cur_in || L->cur_carry) return 0;
    return !L->prev_carry || L->owner == P;
}

/* The plan for a step starting with size0 (, size1); *count gets how many
 * plans qualify, *shared whether they all place the first block at one
 * offset (share_first), so it can be served before the choice is final. */
static pa_learn_plan_t *choose(const pa_learn_t *L, size_t size0, size_t size1, size_t *count,
                               int *shared) {
    pa_learn_plan_t *best = NULL, *next = NULL;
    size_t k = 0;
    uint64_t off0 = PA_LEARN_GENERAL;
    int same = 1;
    for (size_t i = 0; i < L->nplans; i++) {
        pa_learn_plan_t *P = L->plans[i];
        if (!usable(L, P, size0, size1)) continue;
        uint64_t o = _pa_learn_first_movable(P) ? P->e[0].off[0] : PA_LEARN_GENERAL;
        if (!k) off0 = o;
        else if (o != off0) same = 0;
        k++;
        if (L->last && P->id == L->last->next_id) next = P;
        if (!best || P->last_used > best->last_used) best = P;
    }
    *count = k;
    *shared = same && off0 != PA_LEARN_GENERAL;
    return next ? next : best;
}

static void start_serving(pa_learn_t *L, pa_learn_plan_t *P) {
    L->par = L->prev_carry ? !P->par : 0;
    P->par = L->par;
    P->last_used = L->step;
    L->cur = P;
    L->owner = P;
    L->serving = 1;
}

/* Entry idx of this step was freed: in-step frees done in plan order. */
static void freed_in_step(pa_learn_t *L, uint32_t idx) {
    pa_learn_plan_t *P = L->cur;
    if (!P || idx >= P->n || P->e[idx].carry) return;
    P->freed_at[idx] = L->step;
    while (L->prefix < P->nfree && P->freed_at[P->rank[L->prefix]] == L->step) L->prefix++;
}

/* The second request of a step whose first block was served on a guess
 * (DEFER_GUESS): if the guessed plan does not continue with `size1`, the
 * plan that does takes over the first block's record (same offset). */
static void rechoose(pa_learn_t *L, size_t size1) {
    pa_learn_plan_t *P = L->cur;
    if (P->n > 1 && P->e[1].size == size1) return;
    size_t k, in = L->cur_in;
    int shared;
    L->cur_in = 0; /* the first block, where every candidate allows it */
    pa_learn_plan_t *Q = choose(L, P->e[0].size, size1, &k, &shared);
    L->cur_in = in;
    if (!Q || Q == P) return; /* diverges below */
    uint32_t c = P->e[0].cls[0], cq = Q->e[0].cls[0];
    if (P->cls_live[c]) {
        P->cls_live[c] = 0;
        Q->cls_live[cq] = 1;
        Q->cls_step[cq] = L->step;
    } else {
        Q->freed_at[0] = L->step;
    }
    start_serving(L, Q);
    L->prefix = 0;
    while (L->prefix < Q->nfree && Q->freed_at[Q->rank[L->prefix]] == L->step) L->prefix++;
}

void *_pa_learn_alloc_slow(pa_learn_t *L, size_t size, size_t *bsize) {
    if (pa_unlikely(!L->tried)) {
        L->tried = 1;
        size_t k = 0;
        int shared = 0;
        pa_learn_plan_t *P = L->base ? choose(L, size, SIZE_MAX, &k, &shared) : NULL;
        if (k > 1 && !shared) { /* ambiguous: this block from the zones, decide next */
            L->defer = DEFER_ZONES;
            L->size0 = size;
            L->ai = 1;
            return NULL;
        }
        if (P) {
            start_serving(L, P);
            if (k > 1) L->defer = DEFER_GUESS;
            if (L->freed0) freed_in_step(L, 0);
        }
    } else if (pa_unlikely(L->defer)) {
        int guess = L->defer == DEFER_GUESS;
        L->defer = 0;
        if (guess) {
            if (L->serving && L->nalloc == 1 && L->ai == 1) rechoose(L, size);
        } else {
            size_t k;
            int shared;
            pa_learn_plan_t *P = L->nalloc == 1 ? choose(L, L->size0, size, &k, &shared) : NULL;
            if (P) {
                start_serving(L, P);
                if (L->freed0) freed_in_step(L, 0);
            }
        }
    }
    if (!L->serving) {
        /* a quiet step no plan serves: nothing to do until its end */
        if (L->overflow && !L->defer && !L->auto_step) L->hot = 0;
        return NULL;
    }
    pa_learn_plan_t *P = L->cur;
    if (pa_unlikely(L->ai >= P->n || L->ai != L->nalloc)) goto diverge;
    const pa_learn_entry_t *e = &P->e[L->ai];
    if (pa_unlikely(e->size != size)) goto diverge;
    uint64_t off = e->off[L->par];
    if (off == PA_LEARN_GENERAL) { /* a long-lived block: the zones' */
        L->ai++;
        return NULL;
    }
    uint32_t c = e->cls[L->par];
    if (pa_unlikely(e->need > L->prefix || P->cls_live[c])) goto diverge;
    P->cls_live[c] = (uint32_t)L->ai + 1;
    P->cls_step[c] = L->step;
    if (e->carry) L->cur_carry++;
    else L->cur_in++;
    size_t bs = block_bytes(L, size);
    L->live++;
    L->live_bytes += bs;
    L->live_req += size;
    L->hits++;
    L->ai++;
    L->nalloc++;
    _pa_learn_record(L, (uint64_t)size << 2 | EV_ALLOC);
    *bsize = bs;
    return (void *)(L->base + off);
diverge:
    L->serving = 0;
    L->misses++;
    return NULL;
}

void _pa_learn_note_alloc(pa_learn_t *L, void *ptr, size_t size) {
    uint32_t idx = (uint32_t)L->nalloc++;
    _pa_learn_record(L, (uint64_t)size << 2 | EV_ALLOC);
    if (!L->overflow || L->serving) tab_put(&L->tab[L->tcur], (uintptr_t)ptr, idx);
}

void _pa_learn_note_free(pa_learn_t *L, const void *ptr) {
    uint32_t idx;
    if (tab_take(&L->tab[L->tcur], (uintptr_t)ptr, &idx)) {
        _pa_learn_record(L, (uint64_t)idx << 2 | EV_FREE);
        freed_in_step(L, idx); /* a zone block the plan counts (deferred) */
        if (idx == 0 && !L->cur) L->freed0 = 1;
    } else if (tab_take(&L->tab[!L->tcur], (uintptr_t)ptr, &idx))
        _pa_learn_record(L, (uint64_t)idx << 2 | EV_PREV);
}

/* The class of the live block starting at `ptr`, or why there is none. */
static pa_status_t find_planned(const pa_learn_t *L, const void *ptr, long *cls) {
    const pa_learn_plan_t *P = L->owner;
    if (!P) return PA_ERR_FOREIGN;
    long c = _pa_learn_cls_of(P, (uint64_t)((uintptr_t)ptr - L->base));
    if (c < 0) return PA_ERR_FOREIGN;
    if (!P->cls_live[c]) return PA_ERR_DOUBLE_FREE;
    *cls = c;
    return PA_OK;
}

pa_status_t _pa_learn_free_slow(pa_learn_t *L, const void *ptr, size_t *req, size_t *bsize) {
    long c;
    pa_status_t st = find_planned(L, ptr, &c);
    if (st != PA_OK) return st;
    pa_learn_plan_t *P = L->owner;
    uint32_t idx = P->cls_live[c] - 1;
    const pa_learn_entry_t *e = &P->e[idx];
    uint64_t age = L->step - P->cls_step[c];
    P->cls_live[c] = 0;
    if (age == 0) {
        if (e->carry) L->cur_carry--;
        else L->cur_in--;
    } else if (age == 1) {
        if (e->carry) L->prev_carry--;
        else L->prev_in--;
    } else {
        L->older--;
    }
    size_t bs = block_bytes(L, e->size);
    L->live--;
    L->live_bytes -= bs;
    L->live_req -= e->size;
    L->frees++;
    *req = e->size;
    *bsize = bs;
    if (L->hot) {
        if (age == 0) {
            _pa_learn_record(L, (uint64_t)idx << 2 | EV_FREE);
            if (P == L->cur) freed_in_step(L, idx);
        } else if (age == 1) {
            _pa_learn_record(L, (uint64_t)idx << 2 | EV_PREV);
        }
    }
    return PA_OK;
}

size_t _pa_learn_block(const pa_learn_t *L, const void *ptr, size_t *req, pa_status_t *st) {
    long c;
    pa_status_t s = find_planned(L, ptr, &c);
    if (st) *st = s;
    if (s != PA_OK) return 0;
    const pa_learn_entry_t *e = &L->owner->e[L->owner->cls_live[c] - 1];
    if (req) *req = e->size;
    return block_bytes(L, e->size);
}

/* ---- inspection ------------------------------------------------------------------- */

/* Buffers of P whose lifetimes overlap must not overlap in bytes. */
static size_t check_plan(const pa_learn_t *L, const pa_learn_plan_t *P) {
    size_t broken = 0, n;
    if (P->n > CHECK_PAIRS_MAX) return 0;
    _pa_learn_life_t *l = _pa_learn_lifetimes(P->ev, P->nev, &n);
    if (!l) return 0;
    if (n != P->n) broken++;
    int64_t end = P->nev ? (int64_t)P->nev - 1 : 0;
    for (size_t i = 0; i < n && n == P->n; i++) {
        const pa_learn_entry_t *a = &P->e[i];
        for (int pa = 0; pa < 2; pa++) {
            if (a->off[pa] == PA_LEARN_GENERAL) continue;
            if (a->off[pa] + block_bytes(L, a->size) > P->arena) broken++;
            if (a->off[pa] % L->gran) broken++;
            int64_t a0 = a->carry ? 0 : l[i].a, a1 = a->carry ? end : l[i].f;
            for (size_t j = i; j < n; j++) {
                const pa_learn_entry_t *b = &P->e[j];
                int64_t b0 = b->carry ? 0 : l[j].a, b1 = b->carry ? end : l[j].f;
                if (b0 > a1 || a0 > b1) continue;
                for (int pb = 0; pb < 2; pb++) {
                    if (b->off[pb] == PA_LEARN_GENERAL || (j == i && pb == pa)) continue;
                    if (j == i && a->off[0] == a->off[1]) continue;
                    uint64_t ae = a->off[pa] + block_bytes(L, a->size);
                    uint64_t be = b->off[pb] + block_bytes(L, b->size);
                    if (a->off[pa] < be && b->off[pb] < ae) broken++;
                }
            }
        }
    }
    free(l);
    return broken;
}

size_t _pa_learn_check(const pa_learn_t *L, size_t *live, size_t *bytes, size_t *req) {
    size_t broken = 0, count = 0, total = 0, treq = 0;
    if (L->heap->outside != L->size || (L->base == 0) != (L->size == 0)) broken++;
    if (L->base % PA_PAGE_SIZE) broken++;
    _pa_learn_range_t *r = NULL;
    size_t nr = 0;
    for (size_t k = 0; k < L->nplans; k++) {
        const pa_learn_plan_t *P = L->plans[k];
        broken += check_plan(L, P);
        if (P == L->owner && L->live) r = malloc(L->live * sizeof(*r));
        for (size_t c = 0; c < P->ncls; c++) {
            if (_pa_learn_cls_of(P, P->cls_off[c]) != (long)c) broken++;
            if (!P->cls_live[c]) continue;
            uint32_t idx = P->cls_live[c] - 1;
            if (P != L->owner || idx >= P->n) {
                broken++;
                continue;
            }
            const pa_learn_entry_t *e = &P->e[idx];
            if (e->off[0] != P->cls_off[c] && e->off[1] != P->cls_off[c]) broken++;
            size_t bs = block_bytes(L, e->size);
            if (P->cls_off[c] + bs > L->size) broken++;
            if (r && nr < L->live) r[nr++] = (_pa_learn_range_t){P->cls_off[c], P->cls_off[c] + bs};
            count++;
            total += bs;
            treq += e->size;
        }
        if (P == L->owner && r) {
            qsort(r, nr, sizeof(*r), _pa_learn_cmp_range);
            for (size_t i = 1; i < nr; i++)
                if (r[i].off < r[i - 1].end) broken++;
            free(r);
            r = NULL;
        }
    }
    if (count != L->live || total != L->live_bytes || treq != L->live_req) broken++;
    if (L->cur_in + L->cur_carry + L->prev_in + L->prev_carry + L->older != L->live) broken++;
    if (L->want > 0 && L->nplans == 0) broken++;
    *live = count;
    *bytes = total;
    *req = treq;
    return broken;
}

void _pa_learn_stats(const pa_learn_t *L, pa_pool_stats_t *out) {
    out->learned_sequences = L->nplans;
    out->planned_bytes = L->size;
    out->planned_live = L->live_bytes;
    out->plan_hits = L->hits;
    out->plan_misses = L->misses;
    out->plan_steps = L->plan_steps;
    out->steps = L->steps;
    out->learn_fallbacks = L->fallbacks;
}
