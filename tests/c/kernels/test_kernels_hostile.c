/* test_kernels_hostile.c -- every native-kernel entry point of pyarena.h
 * called with FUZZ_N seeded random hostile descriptors each: zero,
 * negative and huge sizes (INT64_MAX, products past 2^63 and past the
 * kernels' 2^40-element limit), strides, pads, dilations and groups that
 * do not fit together, kernels larger than the input, unknown layouts,
 * activations and call kinds, NULL pointers, indices out of range.
 *
 * The contract checked (pyarena.h): a call never crashes, prints or
 * aborts; geometry that no buffer can satisfy (a size below 1, a negative
 * pad, groups that do not divide the channels, a product that overflows)
 * is PA_ERR_INVALID even with buffers that are far too small; and when a
 * call accepts small geometry, it stays inside the buffers that geometry
 * implies.  Those are allocated with exactly the floats the descriptor
 * claims (the tail at the end of the allocation, the head 0-3 floats in,
 * so starts are not always 16-byte aligned), so ASan reports any read or
 * write past them and UBSan any overflow on the way.  Accepted geometry
 * too large to allocate is only called with NULL pointers.
 *
 * Half of the calls that run get a team of two workers (the kernels' splits
 * across threads), and `make check` runs the binary a second time with
 * PA_DISABLE_AVX512=1 (the portable tiles).
 *
 * Deterministic (one seed); the environment's FUZZ_N changes the count,
 * FUZZ_SEED the seed (to search further than the default run); FUZZ_TRACE
 * prints each convolution before it runs (the last one names a crash). */
#include "pyarena.h"
#include "../testhelper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long seed = 0x6A09E667F3BCC908ULL;
static long fuzz_n = 10000;

/* Largest buffer (floats) and work (multiply-adds) a fuzz case runs. */
#define CAP_FLOATS 4096
#define CAP_WORK 40000.0

static uint64_t rnd(void) { return pa_rand(&seed); }

/* Two workers, given to half of the calls that run (the others run on the
 * caller alone): the kernels' parallel splits stay inside the buffers too.
 * Which call gets them is drawn from the same seed, so a run replays. */
static pa_workers_t *team;
#define TEAM (one_in(2) ? team : NULL)
static int64_t upto(int64_t n) { return (int64_t)(rnd() % (uint64_t)n); }
static int one_in(int n) { return upto(n) == 0; }

static const int64_t hostile[] = {
    0, -1, -2, INT64_MIN, INT64_MAX, INT64_MAX - 1, INT32_MAX, (int64_t)INT32_MAX + 1,
    -(int64_t)INT32_MAX, (int64_t)1 << 20, (int64_t)1 << 31, (int64_t)1 << 32,
    ((int64_t)1 << 39) + 1, (int64_t)1 << 40, ((int64_t)1 << 40) + 1, (int64_t)1 << 41,
    (int64_t)1 << 62, 3037000500LL /* its square passes 2^63 */, 4096, 4097, 65536, 257,
};
#define NHOSTILE ((int)(sizeof hostile / sizeof hostile[0]))

static int64_t hval(void) { return hostile[upto(NHOSTILE)]; }

/* v - 2 .. v + 2, wrapping (past INT64_MAX is INT64_MIN's side) */
static int64_t nudge(int64_t v) { return (int64_t)((uint64_t)v + (uint64_t)(upto(5) - 2)); }

/* a float buffer of n floats whose end is the end of its allocation */
typedef struct {
    void *base;
    float *p;
} fbuf_t;

static fbuf_t fbuf(int64_t n) {
    int64_t off = upto(4);
    fbuf_t b;
    b.base = malloc((size_t)(n + off) * sizeof(float) + (n + off == 0));
    b.p = (float *)b.base + off;
    for (int64_t i = 0; i < n; i++)
        b.p[i] = (float)((int64_t)(rnd() >> 40) - (1 << 23)) / (float)(1 << 22);
    if (n + off == 0)   /* malloc(1): the pointer one byte in is past the end */
        b.p = (float *)((char *)b.base + 1);
    return b;
}

/* a*b*..., 0 if a factor is negative or the product passes INT64_MAX */
static int prod(int64_t *out, int k, const int64_t *v) {
    int64_t t = 1;
    for (int i = 0; i < k; i++)
        if (v[i] < 0 || __builtin_mul_overflow(t, v[i], &t))
            return 0;
    *out = t;
    return 1;
}

/* a small buffer for calls that must reject whatever they are given */
static float tiny[16];

static pa_act_params_t rand_act(void) {
    pa_act_params_t a = {(pa_act_t)upto(8), (float)upto(5) - 2.0f, (float)upto(5)};
    if (one_in(10))
        a.kind = (pa_act_t)(one_in(2) ? -1 : 8 + (int)upto(1000));
    return a;
}

static int act_kind_ok(const pa_act_params_t *a) {
    return (unsigned)a->kind <= (unsigned)PA_ACT_GELU;
}

/* -- activations ------------------------------------------------------------ */

static void test_act(void) {
    for (long it = 0; it < fuzz_n; it++) {
        pa_act_params_t act = rand_act();
        size_t n = one_in(8) ? (size_t)hval() : (size_t)upto(200);
        int ok = act_kind_ok(&act);
        CHECK(pa_act(NULL, tiny, tiny, n, NULL) == PA_ERR_INVALID);
        if (n)
            CHECK(pa_act(&act, NULL, tiny, n, NULL) == PA_ERR_INVALID &&
                  pa_act(&act, tiny, NULL, n, NULL) == PA_ERR_INVALID);
        if (n > CAP_FLOATS) {
            if (n > ((size_t)1 << 50) || !ok)
                CHECK(pa_act(&act, tiny, tiny, n, NULL) == PA_ERR_INVALID);
            continue;
        }
        fbuf_t x = fbuf((int64_t)n), y = fbuf((int64_t)n);
        pa_status_t st = pa_act(&act, x.p, one_in(3) ? x.p : y.p, n, TEAM);
        CHECK(st == (ok ? PA_OK : PA_ERR_INVALID));
        free(x.base);
        free(y.base);
    }
}

static void rand_ncs(int64_t *n, int64_t *c, int64_t *s) {
    int64_t *f[3] = {n, c, s};
    *n = upto(3), *c = 1 + upto(20), *s = upto(30);
    for (int k = 0; k < 3; k++)
        if (one_in(6))
            *f[k] = hval();
}

static void test_bias_act_prelu(int prelu) {
    for (long it = 0; it < fuzz_n; it++) {
        pa_layout_t lay = one_in(20) ? (pa_layout_t)(2 + upto(5)) : (pa_layout_t)upto(2);
        int64_t n, c, s, total;
        rand_ncs(&n, &c, &s);
        pa_act_params_t act = rand_act();
        int64_t dims[3] = {n, c, s};
        int bad = n < 0 || c < 1 || s < 0 || lay > PA_LAYOUT_NHWC || !prod(&total, 3, dims) ||
                  (!prelu && !act_kind_ok(&act));
#define CALL(X, B, Y)                                                              \
    (prelu ? pa_prelu(lay, n, c, s, (X), (B), (Y), NULL)                           \
           : pa_bias_act(lay, n, c, s, (X), (B), (Y), &act, NULL))
        CHECK(CALL(NULL, tiny, tiny) == PA_ERR_INVALID);
        CHECK(CALL(tiny, tiny, NULL) == PA_ERR_INVALID);
        if (prelu)
            CHECK(CALL(tiny, NULL, tiny) == PA_ERR_INVALID);
        else
            CHECK(pa_bias_act(lay, n, c, s, tiny, tiny, tiny, NULL, NULL) == PA_ERR_INVALID);
        if (bad) {
            CHECK(CALL(tiny, tiny, tiny) == PA_ERR_INVALID);
            continue;
        }
        if (total > CAP_FLOATS || c > CAP_FLOATS)
            continue;
        fbuf_t x = fbuf(total), y = fbuf(total), b = fbuf(c);
        float *bp = !prelu && one_in(4) ? NULL : b.p;
        CHECK(CALL(x.p, bp, one_in(3) ? x.p : y.p) == PA_OK);
#undef CALL
        free(x.base);
        free(y.base);
        free(b.base);
    }
}

/* pa_scale_bias_act: the same shapes and layouts, two per-channel vectors,
 * every pointer required. */
static void test_scale_bias_act(void) {
    for (long it = 0; it < fuzz_n; it++) {
        pa_layout_t lay = one_in(20) ? (pa_layout_t)(2 + upto(5)) : (pa_layout_t)upto(2);
        int64_t n, c, s, total;
        rand_ncs(&n, &c, &s);
        pa_act_params_t act = rand_act();
        int64_t dims[3] = {n, c, s};
        int bad = n < 0 || c < 1 || s < 0 || lay > PA_LAYOUT_NHWC || !prod(&total, 3, dims) ||
                  !act_kind_ok(&act);
        CHECK(pa_scale_bias_act(lay, n, c, s, NULL, tiny, tiny, tiny, &act, NULL) ==
              PA_ERR_INVALID);
        CHECK(pa_scale_bias_act(lay, n, c, s, tiny, NULL, tiny, tiny, &act, NULL) ==
              PA_ERR_INVALID);
        CHECK(pa_scale_bias_act(lay, n, c, s, tiny, tiny, NULL, tiny, &act, NULL) ==
              PA_ERR_INVALID);
        CHECK(pa_scale_bias_act(lay, n, c, s, tiny, tiny, tiny, NULL, &act, NULL) ==
              PA_ERR_INVALID);
        CHECK(pa_scale_bias_act(lay, n, c, s, tiny, tiny, tiny, tiny, NULL, NULL) ==
              PA_ERR_INVALID);
        if (bad) {
            CHECK(pa_scale_bias_act(lay, n, c, s, tiny, tiny, tiny, tiny, &act, NULL) ==
                  PA_ERR_INVALID);
            continue;
        }
        if (total > CAP_FLOATS || c > CAP_FLOATS)
            continue;
        fbuf_t x = fbuf(total), y = fbuf(total), sc = fbuf(c), b = fbuf(c);
        CHECK(pa_scale_bias_act(lay, n, c, s, x.p, sc.p, b.p, one_in(3) ? x.p : y.p, &act,
                                TEAM) == PA_OK);
        free(x.base);
        free(y.base);
        free(sc.base);
        free(b.base);
    }
}

static void test_bias_act(void) { test_bias_act_prelu(0); }
static void test_prelu(void) { test_bias_act_prelu(1); }

/* -- convolution ------------------------------------------------------------- */

/* small, mostly sensible geometry of the kinds the kernels pick between
 * (depthwise, pointwise, few input channels, few output channels, the
 * direct kernel), then in half the cases one to three fields replaced by
 * hostile values */
static pa_conv2d_t rand_conv(void) {
    pa_conv2d_t c;
    c.layout = (pa_layout_t)upto(2);
    c.n = 1 + upto(2);
    c.groups = 1;
    int kind = (int)upto(5);
    c.c_in = kind == 2 ? 1 + upto(4) : 1 + upto(20);
    c.c_out = kind == 3 ? 1 + upto(4) : 1 + upto(20);
    if (kind == 0) {        /* depthwise */
        c.c_in = c.c_out = 2 + upto(20);
        c.groups = c.c_in;
    } else if (kind == 4 && one_in(2)) {
        c.groups = 1 + upto(4);
        c.c_in *= c.groups, c.c_out *= c.groups;
    }
    c.h = 1 + upto(12), c.w = 1 + upto(12);
    c.kh = 1 + upto(5), c.kw = 1 + upto(5);
    c.sh = 1 + upto(3), c.sw = 1 + upto(3);
    c.dh = 1 + (one_in(3) ? upto(3) : 0), c.dw = 1 + (one_in(3) ? upto(3) : 0);
    c.pad_top = upto(4), c.pad_left = upto(4);
    if (kind == 1 || one_in(8)) {   /* pointwise */
        c.kh = c.kw = c.sh = c.sw = c.dh = c.dw = 1;
        c.pad_top = c.pad_left = 0;
        c.h_out = c.h, c.w_out = c.w;
    } else if (one_in(4)) {         /* any output size: the bottom pad follows */
        c.h_out = 1 + upto(12), c.w_out = 1 + upto(12);
    } else {
        int64_t eh = c.h + 2 * c.pad_top - (c.kh - 1) * c.dh - 1;
        int64_t ew = c.w + 2 * c.pad_left - (c.kw - 1) * c.dw - 1;
        c.h_out = eh < 0 ? 1 : eh / c.sh + 1;
        c.w_out = ew < 0 ? 1 : ew / c.sw + 1;
    }
    c.act = rand_act();
    if (one_in(2)) {
        int64_t *f[] = {&c.n, &c.c_in, &c.h, &c.w, &c.c_out, &c.h_out, &c.w_out, &c.kh,
                        &c.kw, &c.sh, &c.sw, &c.dh, &c.dw, &c.pad_top, &c.pad_left, &c.groups};
        int k = 1 + (int)upto(3);
        for (int i = 0; i < k; i++) {
            int64_t *p = f[upto(16)];
            *p = one_in(3) ? nudge(*p) : hval();
        }
        if (one_in(20))
            c.layout = (pa_layout_t)(one_in(2) ? -1 : 2);
    }
    return c;
}

/* 1 if no buffer can satisfy the geometry: the call must refuse it */
static int conv_impossible(const pa_conv2d_t *c) {
    if ((c->layout != PA_LAYOUT_NCHW && c->layout != PA_LAYOUT_NHWC) || !act_kind_ok(&c->act))
        return 1;
    const int64_t pos[] = {c->n, c->c_in, c->h, c->w, c->c_out, c->h_out, c->w_out, c->kh,
                           c->kw, c->sh, c->sw, c->dh, c->dw, c->groups};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i] < 1)
            return 1;
    if (c->pad_top < 0 || c->pad_left < 0 || c->c_in % c->groups || c->c_out % c->groups)
        return 1;
    int64_t t;
    const int64_t xs[] = {c->n, c->c_in, c->h, c->w}, ys[] = {c->n, c->c_out, c->h_out, c->w_out};
    const int64_t ws[] = {c->c_out, c->kh, c->kw, c->c_in / c->groups};
    return !prod(&t, 4, xs) || !prod(&t, 4, ys) || !prod(&t, 4, ws);
}

/* floats of x, y and the weights, and the multiply-adds; 0 if too large */
static int conv_small(const pa_conv2d_t *c, int64_t *nx, int64_t *ny, int64_t *nw) {
    const int64_t xs[] = {c->n, c->c_in, c->h, c->w}, ys[] = {c->n, c->c_out, c->h_out, c->w_out};
    const int64_t ws[] = {c->c_out, c->kh, c->kw, c->c_in / c->groups};
    if (!prod(nx, 4, xs) || !prod(ny, 4, ys) || !prod(nw, 4, ws))
        return 0;
    double work = (double)*ny * (double)(c->kh * c->kw) * (double)(c->c_in / c->groups);
    return *nx <= CAP_FLOATS && *ny <= CAP_FLOATS && *nw <= CAP_FLOATS && work <= CAP_WORK;
}

static void dump_conv(const char *why, const pa_conv2d_t *c) {
    fprintf(stderr, "%s: layout %d n %lld c_in %lld h %lld w %lld c_out %lld h_out %lld w_out %lld k %lldx%lld s %lldx%lld d %lldx%lld pad %lld,%lld groups %lld act %d\n",
            why, (int)c->layout, (long long)c->n, (long long)c->c_in, (long long)c->h, (long long)c->w,
            (long long)c->c_out, (long long)c->h_out, (long long)c->w_out, (long long)c->kh,
            (long long)c->kw, (long long)c->sh, (long long)c->sw, (long long)c->dh, (long long)c->dw,
            (long long)c->pad_top, (long long)c->pad_left, (long long)c->groups, (int)c->act.kind);
}

/* pack and run one geometry; 1 if it ran */
static int conv_case(const pa_conv2d_t *c, int residual) {
    size_t need = pa_conv2d_packed_size(c);
    int64_t nx, ny, nw;
    if (conv_impossible(c)) {
        if (need) dump_conv("impossible", c);
        CHECK_EQ(need, 0);
        CHECK(pa_conv2d_pack(c, tiny, tiny, tiny, 16) == PA_ERR_INVALID);
        CHECK(pa_conv2d_run(c, tiny, tiny, tiny, NULL) == PA_ERR_INVALID);
        CHECK(pa_conv2d_run_residual(c, tiny, tiny, tiny, 1, tiny, NULL) == PA_ERR_INVALID);
        return 0;
    }
    CHECK(pa_conv2d_run(c, NULL, tiny, tiny, NULL) == PA_ERR_INVALID);
    CHECK(pa_conv2d_run(c, tiny, NULL, tiny, NULL) == PA_ERR_INVALID);
    CHECK(pa_conv2d_run(c, tiny, tiny, NULL, NULL) == PA_ERR_INVALID);
    CHECK(pa_conv2d_run_residual(c, tiny, tiny, NULL, 1, tiny, NULL) == PA_ERR_INVALID);
    CHECK(pa_conv2d_pack(c, NULL, tiny, tiny, SIZE_MAX) == PA_ERR_INVALID);
    CHECK(pa_conv2d_pack(c, tiny, tiny, NULL, SIZE_MAX) == PA_ERR_INVALID);
    if (!need) {    /* refused (coordinates past 2^40 ...): by every call */
        CHECK(pa_conv2d_pack(c, tiny, tiny, tiny, 16) == PA_ERR_INVALID);
        CHECK(pa_conv2d_run(c, tiny, tiny, tiny, NULL) == PA_ERR_INVALID);
        CHECK(pa_conv2d_run_residual(c, tiny, tiny, tiny, 1, tiny, NULL) == PA_ERR_INVALID);
        return 0;
    }
    if (!conv_small(c, &nx, &ny, &nw))
        return 0;
    CHECK(need <= (size_t)64 * CAP_FLOATS);
    if (need > (size_t)64 * CAP_FLOATS) {
        dump_conv("need", c);
        return 0;
    }
    fbuf_t w = fbuf(nw), b = fbuf(c->c_out), pk = fbuf((int64_t)need);
    CHECK(pa_conv2d_pack(c, w.p, b.p, pk.p, need - 1) == PA_ERR_INVALID);
    CHECK(pa_conv2d_pack(c, w.p, one_in(4) ? NULL : b.p, pk.p, need) == PA_OK);
    fbuf_t x = fbuf(nx), y = fbuf(ny);
    if (getenv("FUZZ_TRACE"))
        dump_conv("run", c);
    if (!residual) {
        CHECK(pa_conv2d_run(c, pk.p, x.p, y.p, TEAM) == PA_OK);
    } else {
        int64_t c_res = one_in(4) ? hval() : 1 + upto(c->c_out + 1);
        int pw = c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pad_top == 0 &&
                 c->pad_left == 0 && c->h_out == c->h && c->w_out == c->w && c->groups == 1;
        int ok = pw && c_res >= 1 && c_res <= c->c_out;
        int64_t nr = ok ? c->n * c_res * c->h * c->w : 0;
        fbuf_t r = fbuf(nr);
        CHECK(pa_conv2d_run_residual(c, pk.p, x.p, ok ? r.p : tiny, c_res, y.p, TEAM) ==
              (ok ? PA_OK : PA_ERR_INVALID));
        free(r.base);
    }
    free(w.base), free(b.base), free(pk.base), free(x.base), free(y.base);
    return 1;
}

static void test_conv2d_packed_size(void) {
    long ran = 0;
    for (long it = 0; it < fuzz_n; it++) {
        pa_conv2d_t c = rand_conv();
        size_t need = pa_conv2d_packed_size(&c);
        if (conv_impossible(&c)) {
            if (need) dump_conv("impossible", &c);
            CHECK_EQ(need, 0);
        }
        ran += need > 0;
    }
    CHECK_EQ(pa_conv2d_packed_size(NULL), 0);
    CHECK(ran > fuzz_n / 4);
}

static void test_conv2d_pack_run(void) {
    long ran = 0;
    CHECK(pa_conv2d_run(NULL, tiny, tiny, tiny, NULL) == PA_ERR_INVALID);
    CHECK(pa_conv2d_pack(NULL, tiny, tiny, tiny, 16) == PA_ERR_INVALID);
    for (long it = 0; it < fuzz_n; it++) {
        pa_conv2d_t c = rand_conv();
        ran += conv_case(&c, 0);
    }
    CHECK(ran > fuzz_n / 4);
}

static void test_conv2d_run_residual(void) {
    long ran = 0;
    CHECK(pa_conv2d_run_residual(NULL, tiny, tiny, tiny, 1, tiny, NULL) == PA_ERR_INVALID);
    for (long it = 0; it < fuzz_n; it++) {
        pa_conv2d_t c = rand_conv();
        if (one_in(2)) {    /* mostly pointwise: the case it takes */
            c.kh = c.kw = c.sh = c.sw = 1;
            c.pad_top = c.pad_left = 0;
            c.h_out = c.h, c.w_out = c.w, c.groups = 1;
        }
        ran += conv_case(&c, 1);
    }
    CHECK(ran > fuzz_n / 4);
}

/* -- pooling ------------------------------------------------------------------ */

static pa_pool2d_t rand_pool(void) {
    pa_pool2d_t p;
    p.layout = (pa_layout_t)upto(2);
    p.n = 1 + upto(2), p.c = 1 + upto(20), p.h = 1 + upto(14), p.w = 1 + upto(14);
    p.kh = 1 + upto(5), p.kw = 1 + upto(5), p.sh = 1 + upto(3), p.sw = 1 + upto(3);
    p.pad_top = upto(3), p.pad_left = upto(3), p.pad_bottom = upto(3), p.pad_right = upto(3);
    if (one_in(4)) {
        p.h_out = 1 + upto(14), p.w_out = 1 + upto(14);
    } else {
        int64_t eh = p.h + p.pad_top + p.pad_bottom - p.kh;
        int64_t ew = p.w + p.pad_left + p.pad_right - p.kw;
        p.h_out = eh < 0 ? 1 : eh / p.sh + 1;
        p.w_out = ew < 0 ? 1 : ew / p.sw + 1;
    }
    p.count_include_pad = (int)upto(2);
    if (one_in(2)) {
        int64_t *f[] = {&p.n, &p.c, &p.h, &p.w, &p.h_out, &p.w_out, &p.kh, &p.kw, &p.sh,
                        &p.sw, &p.pad_top, &p.pad_left, &p.pad_bottom, &p.pad_right};
        int k = 1 + (int)upto(3);
        for (int i = 0; i < k; i++) {
            int64_t *q = f[upto(14)];
            *q = one_in(3) ? nudge(*q) : hval();
        }
        if (one_in(20))
            p.layout = (pa_layout_t)(one_in(2) ? -1 : 2);
        if (one_in(10))
            p.count_include_pad = one_in(2) ? -1 : 1000;
    }
    return p;
}

static void test_pool(int is_max) {
    long ran = 0;
    pa_status_t (*fn)(const pa_pool2d_t *, const float *, float *, pa_workers_t *) =
        is_max ? pa_maxpool2d : pa_avgpool2d;
    CHECK(fn(NULL, tiny, tiny, NULL) == PA_ERR_INVALID);
    for (long it = 0; it < fuzz_n; it++) {
        pa_pool2d_t p = rand_pool();
        int64_t nx, ny;
        const int64_t pos[] = {p.n, p.c, p.h, p.w, p.h_out, p.w_out, p.kh, p.kw, p.sh, p.sw};
        int bad = p.layout != PA_LAYOUT_NCHW && p.layout != PA_LAYOUT_NHWC;
        for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
            bad |= pos[i] < 1;
        bad |= p.pad_top < 0 || p.pad_left < 0 || p.pad_bottom < 0 || p.pad_right < 0;
        const int64_t xs[] = {p.n, p.c, p.h, p.w}, ys[] = {p.n, p.c, p.h_out, p.w_out};
        bad |= !prod(&nx, 4, xs) || !prod(&ny, 4, ys);
        CHECK(fn(&p, NULL, tiny, NULL) == PA_ERR_INVALID);
        CHECK(fn(&p, tiny, NULL, NULL) == PA_ERR_INVALID);
        if (bad) {
            CHECK(fn(&p, tiny, tiny, NULL) == PA_ERR_INVALID);
            continue;
        }
        int64_t win = (p.kh < p.h ? p.kh : p.h) * (p.kw < p.w ? p.kw : p.w);
        if (nx > CAP_FLOATS || ny > CAP_FLOATS || (double)ny * (double)win > CAP_WORK)
            continue;
        /* coordinates past 2^40 may be refused (pyarena.h: bad geometry) */
        const int64_t far = (int64_t)1 << 40;
        int edge = p.kh >= far || p.kw >= far || p.pad_top >= far || p.pad_left >= far ||
                   p.pad_bottom >= far || p.pad_right >= far || p.h_out >= far / p.sh ||
                   p.w_out >= far / p.sw;
        fbuf_t x = fbuf(nx), y = fbuf(ny);
        pa_status_t st = fn(&p, x.p, y.p, TEAM);
        CHECK(st == PA_OK || (edge && st == PA_ERR_INVALID));
        free(x.base), free(y.base);
        ran += st == PA_OK;
    }
    CHECK(ran > fuzz_n / 4);
}

static void test_maxpool2d(void) { test_pool(1); }
static void test_avgpool2d(void) { test_pool(0); }

/* -- resize ------------------------------------------------------------------- */

/* a table of m indices into [0, n) (some out of range when `spoil`) */
static int32_t *index_table(int64_t m, int64_t n, int spoil, int *spoiled) {
    int32_t *t = malloc((size_t)m * sizeof *t + (m == 0));
    for (int64_t i = 0; i < m; i++)
        t[i] = (int32_t)upto(n);
    if (spoil && m > 0) {
        static const int32_t badi[] = {-1, INT32_MIN, INT32_MAX};
        int64_t i = upto(m);
        int32_t v = one_in(2) ? badi[upto(3)] : (int32_t)(n > INT32_MAX ? INT32_MAX : n);
        t[i] = v;
        *spoiled = 1;
    }
    return t;
}

static void test_resize2d(void) {
    long ran = 0;
    for (long it = 0; it < fuzz_n; it++) {
        pa_layout_t lay = one_in(20) ? (pa_layout_t)(2 + upto(3)) : (pa_layout_t)upto(2);
        int64_t d[6] = {1 + upto(2), 1 + upto(8), 1 + upto(10), 1 + upto(10), 1 + upto(14),
                        1 + upto(14)};
        if (one_in(2))
            for (int k = 1 + (int)upto(2); k > 0; k--)
                d[upto(6)] = one_in(3) ? nudge(d[upto(6)]) : hval();
        int64_t n = d[0], c = d[1], h = d[2], w = d[3], ho = d[4], wo = d[5], nx, ny;
        int bad = lay > PA_LAYOUT_NHWC || n < 1 || c < 1 || h < 1 || w < 1 || ho < 1 || wo < 1;
        const int64_t xs[] = {n, c, h, w}, ys[] = {n, c, ho, wo};
        bad |= !prod(&nx, 4, xs) || !prod(&ny, 4, ys);
        CHECK(pa_resize2d(lay, n, c, h, w, ho, wo, NULL, NULL, NULL, NULL, NULL, NULL, tiny,
                          tiny, NULL) == PA_ERR_INVALID);
        if (bad) {
            int32_t it32[16] = {0};
            CHECK(pa_resize2d(lay, n, c, h, w, ho, wo, it32, it32, tiny, it32, it32, tiny, tiny,
                              tiny, NULL) == PA_ERR_INVALID);
            continue;
        }
        if (nx > CAP_FLOATS || ny > CAP_FLOATS || ho > CAP_FLOATS || wo > CAP_FLOATS)
            continue;
        int spoiled = 0, spoil = one_in(4);
        int32_t *r0 = index_table(ho, h, spoil && one_in(4), &spoiled);
        int32_t *r1 = index_table(ho, h, spoil && one_in(3), &spoiled);
        int32_t *c0 = index_table(wo, w, spoil && one_in(2), &spoiled);
        int32_t *c1 = index_table(wo, w, spoil && !spoiled, &spoiled);
        fbuf_t rw = fbuf(ho), cw = fbuf(wo), x = fbuf(nx), y = fbuf(ny);
        int drop = (int)upto(12);   /* 0..5: one of the pointers NULL */
        const int32_t *t[4] = {r0, r1, c0, c1};
        if (drop < 4)
            t[drop] = NULL;
        pa_status_t st = pa_resize2d(lay, n, c, h, w, ho, wo, t[0], t[1], drop == 4 ? NULL : rw.p,
                                     t[2], t[3], drop == 5 ? NULL : cw.p, x.p, y.p, TEAM);
        CHECK(st == (spoiled || drop < 6 ? PA_ERR_INVALID : PA_OK));
        ran += st == PA_OK;
        free(r0), free(r1), free(c0), free(c1);
        free(rw.base), free(cw.base), free(x.base), free(y.base);
    }
    CHECK(ran > fuzz_n / 8);
}

/* -- call lists ---------------------------------------------------------------- */

/* One call of each kind over exact buffers, some hostile; runs the list
 * and checks that it stops at the first failure. */
static void test_calls_run(void) {
    CHECK(pa_calls_run(NULL, 1, NULL, NULL) == PA_ERR_INVALID);
    CHECK(pa_calls_run(NULL, 0, NULL, NULL) == PA_OK);
    long ran = 0;
    for (long it = 0; it < fuzz_n; it++) {
        pa_call_t call;
        memset(&call, 0, sizeof call);
        int kind = (int)upto(10);
        /* the float kinds (0..6, ADD and TRANSPOSE_PLANES; the 8-bit ones:
           test_calls.c), or one past every kind */
        call.kind = kind < 7 ? (pa_call_kind_t)kind : kind == 7 ? PA_CALL_ADD
                    : kind == 8 ? PA_CALL_TRANSPOSE_PLANES
                    : (pa_call_kind_t)(one_in(2) ? -1 : PA_CALL_TRANSPOSE_PLANES + 1 + upto(99));
        void *bufs[6] = {0};
        int expect_ok = 0;
        pa_conv2d_t conv;
        pa_pool2d_t pool;
        pa_act_params_t act = rand_act();
        int64_t nx, ny, nw;
        switch ((int)call.kind) {
        case PA_CALL_CONV2D:
        case PA_CALL_CONV2D_RESIDUAL: {
            conv = rand_conv();
            if (kind == PA_CALL_CONV2D_RESIDUAL) {
                conv.kh = conv.kw = conv.sh = conv.sw = 1;
                conv.pad_top = conv.pad_left = 0;
                conv.h_out = conv.h, conv.w_out = conv.w, conv.groups = 1;
            }
            call.params = &conv;
            size_t need = pa_conv2d_packed_size(&conv);
            if (!need || !conv_small(&conv, &nx, &ny, &nw)) {
                call.w = call.a = call.b = call.y = !need ? tiny : NULL;
                break;
            }
            fbuf_t w = fbuf(nw), pk = fbuf((int64_t)need), x = fbuf(nx), y = fbuf(ny);
            CHECK(pa_conv2d_pack(&conv, w.p, NULL, pk.p, need) == PA_OK);
            free(w.base);
            bufs[0] = pk.base, bufs[1] = x.base, bufs[2] = y.base;
            call.w = pk.p, call.a = x.p, call.y = y.p;
            expect_ok = 1;
            if (kind == PA_CALL_CONV2D_RESIDUAL) {
                call.i[0] = one_in(4) ? hval() : 1 + upto(conv.c_out);
                expect_ok = call.i[0] >= 1 && call.i[0] <= conv.c_out;
                fbuf_t r = fbuf(expect_ok ? conv.n * call.i[0] * conv.h * conv.w : 0);
                bufs[3] = r.base;
                call.b = r.p;
            }
            break;
        }
        case PA_CALL_MAXPOOL:
        case PA_CALL_AVGPOOL: {
            pool = rand_pool();
            call.params = &pool;
            const int64_t xs[] = {pool.n, pool.c, pool.h, pool.w};
            const int64_t ys[] = {pool.n, pool.c, pool.h_out, pool.w_out};
            int small = pool.layout <= PA_LAYOUT_NHWC && pool.n > 0 && pool.c > 0 && pool.h > 0 &&
                        pool.w > 0 && pool.h_out > 0 && pool.w_out > 0 && pool.kh > 0 &&
                        pool.kw > 0 && pool.kh < 64 && pool.kw < 64 && pool.sh > 0 &&
                        pool.sw > 0 && pool.sh < 64 && pool.sw < 64 && pool.pad_top >= 0 &&
                        pool.pad_left >= 0 && pool.pad_bottom >= 0 && pool.pad_right >= 0 &&
                        pool.pad_top < 64 && pool.pad_left < 64 && pool.pad_bottom < 64 &&
                        pool.pad_right < 64 && prod(&nx, 4, xs) &&
                        prod(&ny, 4, ys) && nx <= CAP_FLOATS && ny <= CAP_FLOATS &&
                        (double)ny * (double)pool.kh * (double)pool.kw <= CAP_WORK;
            if (!small) {
                call.a = call.y = NULL;
                break;
            }
            fbuf_t x = fbuf(nx), y = fbuf(ny);
            bufs[1] = x.base, bufs[2] = y.base;
            call.a = x.p, call.y = y.p;
            expect_ok = 1;
            break;
        }
        case PA_CALL_PRELU: {
            call.i[0] = one_in(10) ? hval() : upto(2);
            call.i[1] = upto(3), call.i[2] = 1 + upto(10), call.i[3] = upto(20);
            if (one_in(4))
                call.i[1 + upto(3)] = hval();
            int64_t tot;
            int ok = (call.i[0] == 0 || call.i[0] == 1) && call.i[1] >= 0 && call.i[2] >= 1 &&
                     call.i[3] >= 0 && prod(&tot, 3, call.i + 1);
            if (!ok || tot > CAP_FLOATS || call.i[2] > CAP_FLOATS) {
                call.a = call.y = ok ? NULL : tiny;
                call.w = tiny;
                break;
            }
            fbuf_t x = fbuf(tot), y = fbuf(tot), s = fbuf(call.i[2]);
            bufs[0] = s.base, bufs[1] = x.base, bufs[2] = y.base;
            call.w = s.p, call.a = x.p, call.y = y.p;
            expect_ok = 1;
            break;
        }
        case PA_CALL_ACT: {
            call.params = &act;
            call.i[0] = one_in(6) ? hval() : upto(100);
            if (call.i[0] < 0 || !act_kind_ok(&act)) {
                call.a = call.y = tiny;
                break;
            }
            if (call.i[0] > CAP_FLOATS) {
                call.a = call.y = NULL;
                break;
            }
            fbuf_t x = fbuf(call.i[0]), y = fbuf(call.i[0]);
            bufs[1] = x.base, bufs[2] = y.base;
            call.a = x.p, call.y = y.p;
            expect_ok = 1;
            break;
        }
        case PA_CALL_ADD: {
            call.i[0] = one_in(6) ? hval() : upto(100);
            if (call.i[0] < 0) {
                call.a = call.b = call.y = tiny;
                break;
            }
            if (call.i[0] > CAP_FLOATS) {
                call.a = call.b = call.y = NULL;
                break;
            }
            fbuf_t x = fbuf(call.i[0]), y = fbuf(call.i[0]);
            bufs[1] = x.base, bufs[2] = y.base;
            call.a = x.p, call.b = y.p, call.y = y.p;       /* in place on b */
            expect_ok = 1;
            break;
        }
        case PA_CALL_TRANSPOSE_PLANES: {
            int64_t g[3] = {upto(3), upto(18), upto(40)};
            if (one_in(4))
                g[upto(3)] = hval();
            call.i[0] = g[0], call.i[1] = g[1], call.i[2] = g[2], call.i[3] = upto(3);
            int64_t total;
            if (!prod(&total, 3, g) || total > CAP_FLOATS) {
                call.a = call.y = tiny;         /* negative, overflowing or overlapping */
                break;
            }
            fbuf_t x = fbuf(total), y = fbuf(total);
            bufs[1] = x.base, bufs[2] = y.base;
            call.a = x.p, call.y = y.p;
            expect_ok = 1;
            break;
        }
        case PA_CALL_COPY: {
            int64_t count = upto(5), bytes = upto(40), sa = upto(80) - 20, sy = upto(80) - 20;
            if (one_in(3)) {
                int64_t *f[] = {&count, &bytes, &sa, &sy};
                *f[upto(4)] = hval();
            }
            call.i[0] = count, call.i[1] = bytes, call.i[2] = sa, call.i[3] = sy;
            if (count < 0 || bytes < 0) {
                call.a = call.y = tiny;
                break;
            }
            if (count == 0 || bytes == 0) {     /* nothing to copy: any pointers */
                call.a = one_in(2) ? NULL : tiny, call.y = one_in(2) ? NULL : tiny;
                expect_ok = 1;
                break;
            }
            /* the blocks' span from the lowest to the highest byte */
            int64_t la, ly;
            int64_t k = count - 1;
            if (sa == INT64_MIN || sy == INT64_MIN ||
                __builtin_mul_overflow(k, sa < 0 ? -sa : sa, &la) ||
                __builtin_mul_overflow(k, sy < 0 ? -sy : sy, &ly) ||
                __builtin_add_overflow(la, bytes, &la) ||
                __builtin_add_overflow(ly, bytes, &ly)) {
                /* no object is that large: must be refused */
                call.a = call.y = tiny;
                break;
            }
            if (la > 4 * CAP_FLOATS || ly > 4 * CAP_FLOATS) {
                call.a = call.y = NULL;
                break;
            }
            char *a = malloc((size_t)la), *y = malloc((size_t)ly);
            memset(a, 1, (size_t)la);
            bufs[1] = a, bufs[2] = y;
            /* negative strides: the first block at the top */
            call.a = sa < 0 ? a + k * -sa : a;
            call.y = sy < 0 ? y + k * -sy : y;
            expect_ok = 1;
            break;
        }
        default:
            call.a = call.y = tiny;
            break;
        }
        /* the call alone, then after a good one and before one that fails */
        size_t failed = 99;
        pa_status_t st = pa_calls_run(&call, 1, TEAM, &failed);
        if (expect_ok) {
            if (st != PA_OK)
                fprintf(stderr, "call kind %d: status %d\n", kind, (int)st);
            CHECK(st == PA_OK && failed == 1);
            ran++;
        } else if (call.a == tiny || call.kind > PA_CALL_TRANSPOSE_PLANES || call.kind < 0) {
            CHECK(st == PA_ERR_INVALID && failed == 0);
        } else {
            CHECK((st == PA_OK && failed == 1) || (st != PA_OK && failed == 0));
        }
        pa_call_t list[3];
        memset(list, 0, sizeof list);
        list[0].kind = PA_CALL_COPY;    /* nothing to copy */
        list[1] = call;
        list[2].kind = (pa_call_kind_t)42;
        st = pa_calls_run(list, 3, NULL, &failed);
        CHECK(st == PA_ERR_INVALID && failed == (expect_ok ? 2u : failed));
        for (int i = 0; i < 6; i++)
            free(bufs[i]);
    }
    CHECK(ran > fuzz_n / 4);
}

/* -- the worker pool ------------------------------------------------------------- */

/* -- the 8-bit convolution ---------------------------------------------------- */

/* rand_conv's geometry with random (sometimes hostile) 8-bit types, zero
 * points and clamps: refused where the descriptor is impossible, else run
 * in buffers of exactly the bytes it implies. */
static void test_qconv2d(void) {
    long ran = 0;
    uint8_t b[64] = {0};
    CHECK(pa_qconv2d_run(NULL, b, b, b, b, sizeof b, NULL) == PA_ERR_INVALID);
    CHECK(pa_qconv2d_pack(NULL, b, NULL, NULL, NULL, b, sizeof b) == PA_ERR_INVALID);
    for (long it = 0; it < fuzz_n; it++) {
        pa_qconv2d_t q;
        memset(&q, 0, sizeof q); /* (requant: PA_QREQ_FLOAT, the float-scale epilogue) */
        q.conv = rand_conv();
        if (!one_in(8))
            q.conv.act.kind = PA_ACT_NONE;
        q.x_type = (pa_qtype_t)(one_in(16) ? upto(5) - 1 : upto(2));
        q.w_type = (pa_qtype_t)(one_in(16) ? upto(5) - 1 : upto(2));
        q.y_type = (pa_qtype_t)(one_in(16) ? upto(5) - 1 : upto(3));
        q.x_zp = one_in(16) ? (int32_t)hval() : (int32_t)upto(256) - (q.x_type == PA_Q_S8) * 128;
        q.y_zp = one_in(16) ? (int32_t)hval() : (int32_t)upto(256) - (q.y_type == PA_Q_S8) * 128;
        q.y_lo = (q.y_type == PA_Q_S8 ? -128 : 0) + (int32_t)upto(20);
        q.y_hi = q.y_lo + (int32_t)upto(240);
        if (one_in(16))
            q.y_lo = (int32_t)hval();
        size_t need = pa_qconv2d_packed_size(&q), ss = pa_qconv2d_scratch_size(&q);
        CHECK((need == 0) == (ss == (size_t)-1));
        int types_ok = (q.x_type == PA_Q_U8 || q.x_type == PA_Q_S8) &&
                       (q.w_type == PA_Q_U8 || q.w_type == PA_Q_S8) &&
                       (unsigned)q.y_type <= (unsigned)PA_Q_S32;
        if (conv_impossible(&q.conv) || q.conv.act.kind != PA_ACT_NONE || !types_ok) {
            CHECK_EQ(need, 0);
            CHECK(pa_qconv2d_run(&q, b, b, b, b, sizeof b, NULL) == PA_ERR_INVALID);
            CHECK(pa_qconv2d_pack(&q, b, NULL, NULL, NULL, b, sizeof b) == PA_ERR_INVALID);
            continue;
        }
        int64_t nx, ny, nw;
        if (!need || !conv_small(&q.conv, &nx, &ny, &nw))
            continue;
        size_t es = q.y_type == PA_Q_S32 ? 4 : 1;
        uint8_t *w = malloc((size_t)nw), *x = malloc((size_t)nx), *y = malloc((size_t)ny * es);
        uint8_t *pk = malloc(need), *sc = malloc(ss ? ss : 1);
        int32_t *zp = calloc((size_t)q.conv.c_out, 4), *bias = calloc((size_t)q.conv.c_out, 4);
        float *scale = malloc((size_t)q.conv.c_out * 4);
        for (int64_t i = 0; i < nw; i++) w[i] = (uint8_t)upto(256);
        for (int64_t i = 0; i < nx; i++) x[i] = (uint8_t)upto(256);
        for (int64_t o = 0; o < q.conv.c_out; o++) {
            scale[o] = one_in(50) ? -1.0f : 0.01f;
            bias[o] = (int32_t)hval();
        }
        pa_status_t st = pa_qconv2d_pack(&q, w, zp, bias, scale, pk, need);
        int bad_scale = 0;
        for (int64_t o = 0; o < q.conv.c_out; o++)
            bad_scale |= scale[o] < 0 && q.y_type != PA_Q_S32;
        CHECK(st == (bad_scale ? PA_ERR_INVALID : PA_OK));
        if (st == PA_OK) {
            CHECK(pa_qconv2d_run(&q, pk, x, y, ss ? sc : NULL, ss, TEAM) == PA_OK);
            if (ss)
                CHECK(pa_qconv2d_run(&q, pk, x, y, sc, ss - 1, NULL) == PA_ERR_INVALID);
            ran++;
        }
        free(w), free(x), free(y), free(pk), free(sc), free(zp), free(bias), free(scale);
    }
    CHECK(ran > fuzz_n / 8);
}

static void test_workers(void) {
    static const int counts[] = {0, -1, INT32_MIN, INT32_MAX, 257, 1000, 1, 2};
    CHECK(pa_workers_destroy(NULL) == PA_ERR_INVALID);
    CHECK_EQ(pa_workers_count(NULL), 1);
    for (long it = 0; it < fuzz_n; it++) {
        int k = counts[upto(8)];
        pa_status_t st = PA_OK;
        if (k == 2 && !one_in(200))
            k = 1;  /* starting threads is slow: few of them */
        pa_workers_t *w = pa_workers_create(k, one_in(2) ? &st : NULL);
        if (k < 1 || k > 256) {
            CHECK(w == NULL);
            continue;
        }
        CHECK(w != NULL && pa_workers_count(w) == k);
        /* a pool runs small calls on the caller: still within the buffers */
        float v[8] = {0};
        pa_act_params_t relu = {PA_ACT_RELU, 0, 0};
        CHECK(pa_act(&relu, v, v, 8, w) == PA_OK);
        CHECK(pa_workers_destroy(w) == PA_OK);
    }
}

/* -- regressions: hostile geometry the fuzz found ---------------------------------- */

int main(void) {
    const char *env = getenv("FUZZ_N");
    if (env && *env)
        fuzz_n = strtol(env, NULL, 10);
    env = getenv("FUZZ_SEED");
    if (env && *env)
        seed = 0x9E3779B97F4A7C15ULL * (strtoull(env, NULL, 0) + 1) | 1;
    team = pa_workers_create(2, NULL);
    CHECK(team != NULL);
    RUN(test_act);
    RUN(test_bias_act);
    RUN(test_scale_bias_act);
    RUN(test_prelu);
    RUN(test_conv2d_packed_size);
    RUN(test_conv2d_pack_run);
    RUN(test_conv2d_run_residual);
    RUN(test_maxpool2d);
    RUN(test_avgpool2d);
    RUN(test_resize2d);
    RUN(test_qconv2d);
    RUN(test_calls_run);
    RUN(test_workers);
    pa_workers_destroy(team);
    return pa_test_report();
}
