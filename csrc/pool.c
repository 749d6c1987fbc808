/* pool.c -- the dynamic work pool: front end (TEMPORARY minimal version).
 *
 * This first version only fixes the public API so the Python layer and the
 * benchmark can start: every block is a separate aligned malloc tracked in
 * an open-addressing hash set (so double free and foreign pointers are
 * detected).  The slab / buddy / large zones replace it in later commits.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    void *ptr;
    size_t size, req;
} ent_t;

struct pa_pool {
    pthread_mutex_t lock;
    int dead;
    size_t alignment, limit, high, low;
    ent_t *tab;
    size_t cap, n;
    pa_pool_stats_t st;
};

void pa_pool_config_default(pa_pool_config_t *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->alignment = PA_DEFAULT_ALIGNMENT;
    cfg->mode = PA_POOL_HYBRID;
    cfg->growth = PA_GROW_POW2;
    cfg->chunk_size = (size_t)1 << 20;
    cfg->cache_budget = (size_t)16 << 20;
    cfg->classes_per_doubling = 4;
    cfg->slab_max = 4096;
    cfg->slab_size = (size_t)64 << 10;
    cfg->buddy_region = (size_t)1 << 20;
    cfg->large_threshold = (size_t)256 << 10;
}

pa_pool_t *pa_pool_create_status(const pa_pool_config_t *cfg, pa_status_t *status) {
    pa_pool_config_t def;
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (!cfg) {
        pa_pool_config_default(&def);
        cfg = &def;
    }
    size_t al = cfg->alignment ? cfg->alignment : PA_DEFAULT_ALIGNMENT;
    if (!_pa_is_pow2(al) || al < 8 || al > 4096) {
        *status = PA_ERR_ALIGN;
        return NULL;
    }
    pa_pool_t *p = calloc(1, sizeof(*p));
    if (!p) {
        *status = PA_ERR_NOMEM;
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->alignment = al;
    p->limit = cfg->limit;
    p->cap = 1024;
    p->tab = calloc(p->cap, sizeof(ent_t));
    *status = PA_OK;
    return p;
}

pa_pool_t *pa_pool_create(const pa_pool_config_t *cfg) {
    return pa_pool_create_status(cfg, NULL);
}

static size_t hidx(const pa_pool_t *p, const void *ptr) {
    return ((uintptr_t)ptr >> 6) * 0x9E3779B97F4A7C15ull % p->cap;
}

static ent_t *find(pa_pool_t *p, const void *ptr) {
    for (size_t i = hidx(p, ptr), k = 0; k < p->cap; i = (i + 1) % p->cap, k++) {
        if (p->tab[i].ptr == ptr) return &p->tab[i];
        if (!p->tab[i].ptr && !p->tab[i].size) return NULL;
    }
    return NULL;
}

static void insert(pa_pool_t *p, void *ptr, size_t size, size_t req) {
    if ((p->n + 1) * 2 > p->cap) {
        ent_t *old = p->tab;
        size_t oc = p->cap;
        p->cap *= 2;
        p->tab = calloc(p->cap, sizeof(ent_t));
        p->n = 0;
        for (size_t i = 0; i < oc; i++)
            if (old[i].ptr) insert(p, old[i].ptr, old[i].size, old[i].req);
        free(old);
    }
    size_t i = hidx(p, ptr);
    while (p->tab[i].ptr) i = (i + 1) % p->cap;
    p->tab[i].ptr = ptr;
    p->tab[i].size = size;
    p->tab[i].req = req;
    p->n++;
}

pa_status_t pa_pool_destroy(pa_pool_t *p) {
    if (!p) return PA_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    if (p->dead) {
        pthread_mutex_unlock(&p->lock);
        return PA_ERR_STATE;
    }
    for (size_t i = 0; i < p->cap; i++) free(p->tab[i].ptr);
    free(p->tab);
    p->tab = NULL;
    p->dead = 1;
    pthread_mutex_unlock(&p->lock);
    return PA_OK;
}

void *pa_pool_alloc_status(pa_pool_t *p, size_t size, pa_status_t *status) {
    pa_status_t dummy;
    if (!status) status = &dummy;
    if (!p) {
        *status = PA_ERR_INVALID;
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    void *r = NULL;
    size_t bs;
    if (p->dead) {
        *status = PA_ERR_STATE;
    } else if (size > ((size_t)1 << 48) || !_pa_align_up(size ? size : 1, p->alignment, &bs)) {
        *status = PA_ERR_OVERFLOW;
    } else if (p->limit && p->st.allocated + bs > p->limit) {
        *status = PA_ERR_NOMEM;
    } else if (!(r = aligned_alloc(p->alignment, bs))) {
        *status = PA_ERR_NOMEM;
    } else {
        insert(p, r, bs, size);
        p->st.allocated += bs;
        p->st.requested += size;
        p->st.reserved += bs;
        p->st.live++;
        p->st.allocs++;
        *status = PA_OK;
    }
    if (!r && p->tab) p->st.failures++;
    pthread_mutex_unlock(&p->lock);
    return r;
}

void *pa_pool_alloc(pa_pool_t *p, size_t size) {
    return pa_pool_alloc_status(p, size, NULL);
}

pa_status_t pa_pool_free(pa_pool_t *p, void *ptr) {
    if (!p) return PA_ERR_INVALID;
    if (!ptr) return PA_OK;
    pthread_mutex_lock(&p->lock);
    pa_status_t s = PA_OK;
    ent_t *e;
    if (p->dead) {
        s = PA_ERR_STATE;
    } else if (!(e = find(p, ptr))) {
        s = PA_ERR_FOREIGN;
    } else {
        p->st.allocated -= e->size;
        p->st.requested -= e->req;
        p->st.reserved -= e->size;
        p->st.live--;
        p->st.frees++;
        free(e->ptr);
        e->ptr = NULL; /* tombstone: size stays nonzero */
        p->n--;
    }
    pthread_mutex_unlock(&p->lock);
    return s;
}

void *pa_pool_calloc(pa_pool_t *p, size_t count, size_t size, pa_status_t *status) {
    if (size && count > SIZE_MAX / size) {
        if (status) *status = PA_ERR_OVERFLOW;
        return NULL;
    }
    void *r = pa_pool_alloc_status(p, count * size, status);
    if (r) memset(r, 0, count * size);
    return r;
}

size_t pa_pool_block_size(pa_pool_t *p, const void *ptr) {
    if (!p) return 0;
    pthread_mutex_lock(&p->lock);
    ent_t *e = p->dead ? NULL : find(p, ptr);
    size_t r = e ? e->size : 0;
    pthread_mutex_unlock(&p->lock);
    return r;
}

void *pa_pool_realloc(pa_pool_t *p, void *ptr, size_t size, pa_status_t *status) {
    if (!ptr) return pa_pool_alloc_status(p, size, status);
    if (!p) {
        if (status) *status = PA_ERR_INVALID;
        return NULL;
    }
    pthread_mutex_lock(&p->lock);
    ent_t *e = p->dead ? NULL : find(p, ptr);
    size_t old = e ? e->req : 0;
    int dead = p->dead;
    pthread_mutex_unlock(&p->lock);
    if (!e) {
        if (status) *status = dead ? PA_ERR_STATE : PA_ERR_FOREIGN;
        return NULL;
    }
    void *n = pa_pool_alloc_status(p, size, status);
    if (!n) return NULL;
    memcpy(n, ptr, old < size ? old : size);
    pa_pool_free(p, ptr);
    return n;
}

#define SIMPLE(name)                                                       \
    pa_status_t name(pa_pool_t *p) {                                       \
        if (!p) return PA_ERR_INVALID;                                     \
        return p->dead ? PA_ERR_STATE : PA_OK;                             \
    }
SIMPLE(pa_pool_reclaim)
SIMPLE(pa_pool_free_all)

pa_status_t pa_pool_trim(pa_pool_t *p, size_t target, size_t *released) {
    (void)target;
    if (released) *released = 0;
    if (!p) return PA_ERR_INVALID;
    return p->dead ? PA_ERR_STATE : PA_OK;
}

pa_status_t pa_pool_set_limit(pa_pool_t *p, size_t limit) {
    if (!p) return PA_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    pa_status_t s = PA_OK;
    if (p->dead) s = PA_ERR_STATE;
    else if (limit && limit < p->st.reserved) s = PA_ERR_INVALID;
    else p->limit = limit;
    pthread_mutex_unlock(&p->lock);
    return s;
}

pa_status_t pa_pool_set_watermarks(pa_pool_t *p, size_t high, size_t low) {
    if (!p) return PA_ERR_INVALID;
    if (low > high) return PA_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    p->high = high;
    p->low = low;
    pthread_mutex_unlock(&p->lock);
    return PA_OK;
}

pa_status_t pa_pool_stats(pa_pool_t *p, pa_pool_stats_t *out) {
    if (!p || !out) return PA_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    pa_status_t s = p->dead ? PA_ERR_STATE : PA_OK;
    *out = p->st;
    out->limit = p->limit;
    out->high_watermark = p->high;
    out->low_watermark = p->low;
    out->alignment = p->alignment;
    out->total_free = out->reserved - out->allocated;
    if (out->allocated) out->frag_internal = 1.0 - (double)out->requested / (double)out->allocated;
    if (out->reserved) out->frag_overall = 1.0 - (double)out->requested / (double)out->reserved;
    pthread_mutex_unlock(&p->lock);
    return s;
}

pa_status_t pa_pool_reset_peak(pa_pool_t *p) {
    if (!p) return PA_ERR_INVALID;
    return p->dead ? PA_ERR_STATE : PA_OK;
}

size_t pa_pool_check(pa_pool_t *p) { return (!p || p->dead) ? 1 : 0; }

pa_status_t pa_pool_walk(pa_pool_t *p, pa_pool_walker_t fn, void *ctx) {
    if (!p || !fn) return PA_ERR_INVALID;
    pthread_mutex_lock(&p->lock);
    if (p->dead) {
        pthread_mutex_unlock(&p->lock);
        return PA_ERR_STATE;
    }
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->tab[i].ptr) continue;
        pa_pool_block_t b = {p->tab[i].ptr, p->tab[i].size, p->tab[i].req, PA_ZONE_LARGE, PA_BLOCK_LIVE};
        if (fn(&b, ctx)) break;
    }
    pthread_mutex_unlock(&p->lock);
    return PA_OK;
}
