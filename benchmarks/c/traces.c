/* traces.c -- generators for the pool benchmark's allocation traces.
 *
 * Two families: a synthetic log-uniform trace (many sizes, random frees:
 * the classic malloc stress) and inference traces replaying what a
 * runtime without a static plan does during CNN forward passes (allocate
 * each activation when produced, free it after its last reader, plus
 * im2col scratch).  The CNN layer shapes are the published MobileNetV2
 * (width 1.0) and ResNet-50 (v1.5) architectures, BN/ReLU fused into the
 * convolutions as inference runtimes do.  Everything is deterministic for
 * a given seed. */
#include "traces.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- */
/* builder                                                           */
/* ---------------------------------------------------------------- */

typedef struct {
    bt_trace_t *t;
    size_t cap;
    uint32_t *free_slots;
    size_t nfree, cap_free;
    uint32_t *slot_size;
    size_t cap_slots;
    uint64_t live;
    int err;
} builder_t;

static int push_op(builder_t *b, uint32_t slot, uint32_t size) {
    bt_trace_t *t = b->t;
    if (t->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        bt_op_t *p = realloc(t->ops, nc * sizeof *p);
        if (!p) return b->err = -1;
        t->ops = p;
        b->cap = nc;
    }
    t->ops[t->n].slot = slot;
    t->ops[t->n].size = size;
    t->n++;
    return 0;
}

static uint32_t b_alloc(builder_t *b, uint32_t size) {
    uint32_t slot;
    if (b->err) return 0;
    if (b->nfree) {
        slot = b->free_slots[--b->nfree];
    } else {
        slot = b->t->nslots++;
        if (slot >= b->cap_slots) {
            size_t nc = b->cap_slots ? b->cap_slots * 2 : 1024;
            uint32_t *p = realloc(b->slot_size, nc * sizeof *p);
            if (!p) { b->err = -1; return 0; }
            b->slot_size = p;
            b->cap_slots = nc;
        }
    }
    if (size == 0) size = 1;
    b->slot_size[slot] = size;
    if (push_op(b, slot, size)) return 0;
    b->t->n_allocs++;
    b->t->total_req += size;
    b->live += size;
    if (b->live > b->t->peak_live) b->t->peak_live = b->live;
    if (size < b->t->min_size) b->t->min_size = size;
    if (size > b->t->max_size) b->t->max_size = size;
    return slot;
}

static void b_free(builder_t *b, uint32_t slot) {
    if (b->err) return;
    if (b->nfree == b->cap_free) {
        size_t nc = b->cap_free ? b->cap_free * 2 : 1024;
        uint32_t *p = realloc(b->free_slots, nc * sizeof *p);
        if (!p) { b->err = -1; return; }
        b->free_slots = p;
        b->cap_free = nc;
    }
    b->free_slots[b->nfree++] = slot;
    b->live -= b->slot_size[slot];
    push_op(b, slot, 0);
}

static void b_step(builder_t *b) {
    if (b->err) return;
    if (push_op(b, BT_STEP, 0) == 0) b->t->n_steps++;
}

static void b_init(builder_t *b, bt_trace_t *t) {
    memset(b, 0, sizeof *b);
    memset(t, 0, sizeof *t);
    t->min_size = UINT32_MAX;
    b->t = t;
}

static int b_finish(builder_t *b) {
    free(b->free_slots);
    free(b->slot_size);
    if (b->err) {
        bt_free(b->t);
        return -1;
    }
    return 0;
}

/* splitmix64: tiny, good enough, deterministic */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) {
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

void bt_free(bt_trace_t *t) {
    if (!t) return;
    free(t->ops);
    t->ops = NULL;
    t->n = 0;
}

/* ---------------------------------------------------------------- */
/* (a) log-uniform                                                   */
/* ---------------------------------------------------------------- */

int bt_gen_loguniform(bt_trace_t *t, size_t n_allocs, uint32_t live,
                      uint32_t min_size, uint32_t max_size, uint64_t seed) {
    builder_t b;
    b_init(&b, t);
    if (live == 0 || min_size == 0 || max_size < min_size) return -1;
    uint64_t rng = seed;
    double lo = log((double)min_size), hi = log((double)max_size + 1.0);
    /* slots currently live, for picking a random victim */
    uint32_t *alive = malloc((size_t)live * 4 * sizeof *alive);
    size_t nalive = 0, cap_alive = (size_t)live * 4;
    if (!alive) return -1;
    size_t done = 0;
    while (done < n_allocs && !b.err) {
        /* probability of allocating next: 1/2 at the target, pulled back
         * linearly towards it (stationary spread about +-25%) */
        double p = 0.5 + 0.5 * ((double)live - (double)nalive) / live;
        int do_alloc = nalive == 0 || rng_unit(&rng) < p;
        if (do_alloc) {
            if (nalive == cap_alive) break; /* cannot happen: p <= 0 there */
            uint32_t sz = (uint32_t)exp(lo + (hi - lo) * rng_unit(&rng));
            if (sz < min_size) sz = min_size;
            if (sz > max_size) sz = max_size;
            alive[nalive++] = b_alloc(&b, sz);
            done++;
            if (done % 1000 == 0) b_step(&b);
        } else {
            size_t k = (size_t)(rng_next(&rng) % nalive);
            b_free(&b, alive[k]);
            alive[k] = alive[--nalive];
        }
    }
    while (nalive && !b.err) {
        size_t k = (size_t)(rng_next(&rng) % nalive);
        b_free(&b, alive[k]);
        alive[k] = alive[--nalive];
    }
    b_step(&b);
    free(alive);
    snprintf(t->name, sizeof t->name, "loguniform");
    snprintf(t->desc, sizeof t->desc,
             "log-uniform %u B..%u B, ~%u live, %zu allocs, random frees",
             min_size, max_size, live, n_allocs);
    return b_finish(&b);
}

/* ---------------------------------------------------------------- */
/* (b)/(c) CNN forward passes                                        */
/* ---------------------------------------------------------------- */

#define MAXT 512
#define MAXOP 512

typedef struct {
    uint32_t c, h, w;
} shape_t;

typedef struct {
    int out;
    int in[2];
    int nin;
    uint64_t scratch;
} gop_t;

typedef struct {
    shape_t shp[MAXT];
    int last[MAXT];
    int nt;
    gop_t op[MAXOP];
    int nop;
    int overflow;
} graph_t;

static int g_tensor(graph_t *g, uint32_t c, uint32_t h, uint32_t w) {
    if (g->nt >= MAXT) { g->overflow = 1; return 0; }
    g->shp[g->nt].c = c;
    g->shp[g->nt].h = h;
    g->shp[g->nt].w = w;
    g->last[g->nt] = -1;
    return g->nt++;
}

static int g_op(graph_t *g, int out, int a, int b2, uint64_t scratch) {
    if (g->nop >= MAXOP) { g->overflow = 1; return out; }
    gop_t *o = &g->op[g->nop++];
    o->out = out;
    o->nin = 0;
    if (a >= 0) o->in[o->nin++] = a;
    if (b2 >= 0) o->in[o->nin++] = b2;
    o->scratch = scratch;
    return out;
}

static uint32_t out_dim(uint32_t x, uint32_t k, uint32_t s) {
    uint32_t pad = k / 2;
    return (x + 2 * pad - k) / s + 1;
}

/* conv k x k, stride s, groups 1 or depthwise (groups == cin) */
static int conv(graph_t *g, int x, uint32_t cout, uint32_t k, uint32_t s,
                int depthwise) {
    shape_t in = g->shp[x];
    uint32_t ho = out_dim(in.h, k, s), wo = out_dim(in.w, k, s);
    int y = g_tensor(g, cout, ho, wo);
    uint64_t scratch = 0;
    if (!depthwise && !(k == 1 && s == 1))
        scratch = (uint64_t)in.c * k * k * ho * wo * 4u;
    return g_op(g, y, x, -1, scratch);
}

static int maxpool(graph_t *g, int x, uint32_t k, uint32_t s) {
    shape_t in = g->shp[x];
    int y = g_tensor(g, in.c, out_dim(in.h, k, s), out_dim(in.w, k, s));
    return g_op(g, y, x, -1, 0);
}

static int add(graph_t *g, int a, int b2) {
    shape_t in = g->shp[a];
    int y = g_tensor(g, in.c, in.h, in.w);
    return g_op(g, y, a, b2, 0);
}

static int gap(graph_t *g, int x) {
    int y = g_tensor(g, g->shp[x].c, 1, 1);
    return g_op(g, y, x, -1, 0);
}

static int fc(graph_t *g, int x, uint32_t n) {
    int y = g_tensor(g, n, 1, 1);
    return g_op(g, y, x, -1, 0);
}

static void build_mobilenetv2(graph_t *g, uint32_t res) {
    static const uint32_t cfg[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},
                                       {6, 32, 3, 2},  {6, 64, 4, 2},
                                       {6, 96, 3, 1},  {6, 160, 3, 2},
                                       {6, 320, 1, 1}};
    int x = g_tensor(g, 3, res, res);
    g_op(g, x, -1, -1, 0); /* the input is produced (copied in) first */
    x = conv(g, x, 32, 3, 2, 0);
    uint32_t cin = 32;
    for (int i = 0; i < 7; i++) {
        for (uint32_t r = 0; r < cfg[i][2]; r++) {
            uint32_t t = cfg[i][0], c = cfg[i][1];
            uint32_t s = r == 0 ? cfg[i][3] : 1;
            int h = x;
            if (t != 1) h = conv(g, h, cin * t, 1, 1, 0);
            h = conv(g, h, cin * t, 3, s, 1);
            h = conv(g, h, c, 1, 1, 0);
            if (s == 1 && cin == c) h = add(g, x, h);
            x = h;
            cin = c;
        }
    }
    x = conv(g, x, 1280, 1, 1, 0);
    x = gap(g, x);
    fc(g, x, 1000);
}

static void build_resnet50(graph_t *g, uint32_t res) {
    static const uint32_t cfg[4][3] = {
        {64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
    int x = g_tensor(g, 3, res, res);
    g_op(g, x, -1, -1, 0);
    x = conv(g, x, 64, 7, 2, 0);
    x = maxpool(g, x, 3, 2);
    uint32_t cin = 64;
    for (int i = 0; i < 4; i++) {
        for (uint32_t r = 0; r < cfg[i][1]; r++) {
            uint32_t mid = cfg[i][0], s = r == 0 ? cfg[i][2] : 1;
            int a = conv(g, x, mid, 1, 1, 0);
            int b2 = conv(g, a, mid, 3, s, 0);
            int c = conv(g, b2, mid * 4, 1, 1, 0);
            int sc = x;
            if (r == 0) sc = conv(g, x, mid * 4, 1, s, 0);
            x = add(g, c, sc);
            cin = mid * 4;
        }
    }
    (void)cin;
    x = gap(g, x);
    fc(g, x, 1000);
}

/* Emit one forward pass: alloc the output, alloc+free the scratch, free
 * the inputs whose last reader this op is; the final output is read by
 * the caller after the last op and then freed. */
static void emit_graph(builder_t *b, graph_t *g, uint32_t batch) {
    static uint32_t slot_of[MAXT];
    for (int i = 0; i < g->nt; i++) g->last[i] = -1;
    for (int i = 0; i < g->nop; i++)
        for (int j = 0; j < g->op[i].nin; j++)
            g->last[g->op[i].in[j]] = i;
    int final = g->op[g->nop - 1].out;
    g->last[final] = g->nop; /* read after the pass */
    for (int i = 0; i < g->nop; i++) {
        gop_t *o = &g->op[i];
        shape_t s = g->shp[o->out];
        uint64_t bytes = (uint64_t)s.c * s.h * s.w * 4u * batch;
        slot_of[o->out] = b_alloc(b, (uint32_t)bytes);
        if (o->scratch) {
            uint32_t ss = b_alloc(b, (uint32_t)(o->scratch * batch));
            b_free(b, ss);
        }
        for (int j = 0; j < o->nin; j++) {
            int in = o->in[j];
            if (g->last[in] == i && !(j == 1 && o->in[0] == in))
                b_free(b, slot_of[in]);
        }
        if (g->last[o->out] < 0) b_free(b, slot_of[o->out]); /* unread */
    }
    b_free(b, slot_of[final]);
    b_step(b);
}

static int gen_cnn(bt_trace_t *t, int model, size_t inferences, uint32_t res_min,
                   uint32_t res_max, uint32_t batch_min, uint32_t batch_max,
                   uint64_t seed) {
    builder_t b;
    b_init(&b, t);
    if (model < BT_MOBILENETV2 || model > BT_BOTH || res_min < 32 ||
        res_max < res_min || res_max > 1024 || batch_min < 1 || batch_max < batch_min ||
        batch_max > 64)
        return -1;
    graph_t *g = malloc(sizeof *g);
    if (!g) return -1;
    uint64_t rng = seed;
    uint32_t nres = (res_max - res_min) / 32 + 1;
    for (size_t i = 0; i < inferences && !b.err; i++) {
        uint32_t res = res_min;
        if (res_max != res_min)
            res = res_min + 32 * (uint32_t)(rng_next(&rng) % nres);
        int m = model;
        if (m == BT_BOTH)
            m = (rng_next(&rng) & 1) ? BT_MOBILENETV2 : BT_RESNET50;
        memset(g, 0, sizeof *g);
        if (m == BT_MOBILENETV2)
            build_mobilenetv2(g, res);
        else
            build_resnet50(g, res);
        if (g->overflow) { b.err = -1; break; }
        uint32_t batch = batch_min;
        if (batch_max != batch_min)
            batch = batch_min + (uint32_t)(rng_next(&rng) % (batch_max - batch_min + 1));
        emit_graph(&b, g, batch);
    }
    free(g);
    const char *mn = model == BT_MOBILENETV2 ? "mobilenetv2"
                     : model == BT_RESNET50  ? "resnet50"
                                             : "mnv2+resnet50";
    if (batch_max != batch_min) {
        snprintf(t->name, sizeof t->name, "%s-batch%u-%u", mn, batch_min, batch_max);
        snprintf(t->desc, sizeof t->desc,
                 "%s x%zu, %ux%u, batch %u..%u (random per inference), fp32, "
                 "im2col scratch", mn, inferences, res_min, res_min, batch_min, batch_max);
    } else if (res_min == res_max) {
        snprintf(t->name, sizeof t->name, "%s-%u", mn, res_min);
        snprintf(t->desc, sizeof t->desc,
                 "%s forward pass x%zu, batch 1, %ux%u, fp32, im2col scratch",
                 mn, inferences, res_min, res_min);
    } else {
        snprintf(t->name, sizeof t->name, "dyn-%s", mn);
        snprintf(t->desc, sizeof t->desc,
                 "%s x%zu, input %u..%u (step 32, random per inference)", mn,
                 inferences, res_min, res_max);
    }
    return b_finish(&b);
}

int bt_gen_cnn(bt_trace_t *t, int model, size_t inferences, uint32_t res_min,
               uint32_t res_max, uint64_t seed) {
    return gen_cnn(t, model, inferences, res_min, res_max, 1, 1, seed);
}

int bt_gen_cnn_batch(bt_trace_t *t, int model, size_t inferences, uint32_t res,
                     uint32_t batch_min, uint32_t batch_max, uint64_t seed) {
    return gen_cnn(t, model, inferences, res, res, batch_min, batch_max, seed);
}

int bt_write_csv(const bt_trace_t *t, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "op,slot,size\n");
    for (size_t i = 0; i < t->n; i++)
        fprintf(f, "%c,%u,%u\n",
                t->ops[i].size ? 'a' : t->ops[i].slot == BT_STEP ? 's' : 'f',
                t->ops[i].slot == BT_STEP ? 0u : t->ops[i].slot, t->ops[i].size);
    return fclose(f) ? -1 : 0;
}
