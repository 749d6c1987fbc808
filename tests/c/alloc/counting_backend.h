/* counting_backend.h -- a counting backend for the arena and pool tests:
 * counts maps, unmaps and decommits, tracks the bytes mapped, and fails on
 * demand. */
#ifndef PA_COUNTING_BACKEND_H
#define PA_COUNTING_BACKEND_H

#include "pyarena.h"

typedef struct {
    int maps, unmaps, decommits;
    int fail_after;        /* maps allowed before failing; -1 = never   */
    int fail_decommit;     /* decommit returns -1                       */
    size_t live_bytes;     /* mapped and not unmapped                   */
    size_t last_map;       /* size of the last successful map           */
} counting_t;

static void *cnt_map(size_t size, size_t align, void *ctx) {
    counting_t *c = ctx;
    if (c->fail_after >= 0 && c->maps >= c->fail_after) return NULL;
    void *p = pa_backend_default()->map(size, align, NULL);
    if (p) {
        c->maps++;
        c->live_bytes += size;
        c->last_map = size;
    }
    return p;
}

static void cnt_unmap(void *p, size_t size, void *ctx) {
    counting_t *c = ctx;
    c->unmaps++;
    c->live_bytes -= size;
    pa_backend_default()->unmap(p, size, NULL);
}

static int cnt_decommit(void *p, size_t size, void *ctx) {
    counting_t *c = ctx;
    if (c->fail_decommit) return -1;
    c->decommits++;
    return pa_backend_default()->decommit(p, size, NULL);
}

static inline pa_backend_t counting_backend(counting_t *c) {
    c->maps = c->unmaps = c->decommits = 0;
    c->fail_after = -1;
    c->fail_decommit = 0;
    c->live_bytes = c->last_map = 0;
    pa_backend_t b = {cnt_map, cnt_unmap, cnt_decommit, c};
    return b;
}

#endif
