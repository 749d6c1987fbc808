/* pool_world.h -- the blocks a pool test holds, by slot, and the checks
 * every pool test makes of them: each block is filled with a pattern when
 * handed out (A) and verified when freed (F) and by world_ok, which also
 * counts overlapping live blocks, misaligned blocks and error statuses,
 * and runs pa_pool_check.  Define PA_WORLD_SLOTS before including it for
 * more or fewer slots (default 64). */
#ifndef PA_POOL_WORLD_H
#define PA_POOL_WORLD_H

#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <string.h>

#ifndef PA_WORLD_SLOTS
#define PA_WORLD_SLOTS 64
#endif
#define SLOTS PA_WORLD_SLOTS

typedef struct {
    pa_pool_t *pool;
    unsigned char *ptr[SLOTS];
    size_t size[SLOTS];
    unsigned char tag[SLOTS];
    unsigned char next_tag;
    int corrupt, overlap, bad_status, misaligned;
} world_t;

static inline void world_init(world_t *w, pa_pool_t *p) {
    memset(w, 0, sizeof(*w));
    w->pool = p;
}

static inline void fill(unsigned char *b, size_t n, unsigned char tag) {
    for (size_t k = 0; k < n; k++) b[k] = (unsigned char)(tag + k * 7);
}

static inline int intact(const unsigned char *b, size_t n, unsigned char tag) {
    for (size_t k = 0; k < n; k++)
        if (b[k] != (unsigned char)(tag + k * 7)) return 0;
    return 1;
}

/* Counts each pair of live blocks that overlap (a 0-byte block as 1). */
static inline void check_overlap(world_t *w) {
    for (int i = 0; i < SLOTS; i++) {
        if (!w->ptr[i]) continue;
        for (int j = i + 1; j < SLOTS; j++) {
            if (!w->ptr[j]) continue;
            size_t si = w->size[i] ? w->size[i] : 1, sj = w->size[j] ? w->size[j] : 1;
            if (w->ptr[i] < w->ptr[j] + sj && w->ptr[j] < w->ptr[i] + si) w->overlap++;
        }
    }
}

/* A block of `size` bytes into `slot`, filled; NULL (counted) on failure. */
static inline void *A(world_t *w, int slot, size_t size) {
    pa_status_t st;
    unsigned char *b = pa_pool_alloc(w->pool, size, &st);
    if (!b || st != PA_OK) {
        w->bad_status++;
        return NULL;
    }
    if ((uintptr_t)b % 64) w->misaligned++;
    w->ptr[slot] = b;
    w->size[slot] = size;
    w->tag[slot] = w->next_tag++;
    fill(b, size, w->tag[slot]);
    check_overlap(w);
    return b;
}

/* Frees `slot`'s block after verifying its pattern. */
static inline void F(world_t *w, int slot) {
    if (!w->ptr[slot]) return;
    if (!intact(w->ptr[slot], w->size[slot], w->tag[slot])) w->corrupt++;
    if (pa_pool_free(w->pool, w->ptr[slot]) != PA_OK) w->bad_status++;
    w->ptr[slot] = NULL;
}

static inline void verify_all(world_t *w) {
    for (int i = 0; i < SLOTS; i++)
        if (w->ptr[i] && !intact(w->ptr[i], w->size[i], w->tag[i])) w->corrupt++;
}

static inline void world_ok(world_t *w) {
    verify_all(w);
    CHECK_EQ(w->corrupt, 0);
    CHECK_EQ(w->overlap, 0);
    CHECK_EQ(w->bad_status, 0);
    CHECK_EQ(w->misaligned, 0);
    CHECK_EQ(pa_pool_check(w->pool), 0u);
}

static inline pa_pool_stats_t stats(pa_pool_t *p) {
    pa_pool_stats_t s;
    pa_pool_stats(p, &s);
    return s;
}

#endif
