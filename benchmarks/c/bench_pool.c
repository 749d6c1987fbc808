/* bench_pool.c -- replay allocation traces against glibc malloc,
 * jemalloc, mimalloc, tcmalloc and pyarena's work pool (hybrid, slab-only,
 * buddy-only) and print markdown tables of speed and footprint.
 *
 * Speed: for each trace a fresh child process (fork + exec of this
 * program, which regenerates the trace from the seed) replays it with every
 * allocator, in an interleaved, rotating order (rep r starts with
 * allocator r), after one untimed warm-up replay each; the figure is the median over repetitions
 * of wall time / number of alloc+free pairs.  Each allocated block gets
 * its first and last cache line written (--touch changes that), so the
 * cost of cold memory shows.
 *
 * Footprint: each allocator replays the trace once more in its own forked
 * child (so heaps do not pollute each other), writing one byte per page so
 * that every byte handed out is resident; the figure is the child's peak
 * RSS growth (VmHWM after clear_refs) divided by the trace's peak live
 * requested bytes.  The same child then replays the trace a second time
 * (the "warm" figure: peak RSS during that replay over the RSS before the
 * first, i.e. what the allocator needs resident in steady state).  The
 * pool additionally reports its own statistics (peaks of the warm replay).
 *
 * Step marks in the traces (one per inference) are passed to the
 * allocators that take them (pool-learned); "glibc-tuned" (no trim, no
 * mmap below 32 MiB, set with mallopt for the whole process) is timed in
 * a timing child of its own.
 *
 * The other mallocs are loaded with dlopen(RTLD_LOCAL) and called through
 * their own symbols, so nothing is needed at build time; a library that
 * is missing is reported and its column skipped. */
#define _GNU_SOURCE
#include "bench.h"
#include "traces.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- */
/* the mallocs                                                       */
/* ---------------------------------------------------------------- */

static void *glibc_alloc(void *ctx, size_t n) { (void)ctx; return malloc(n); }
static void glibc_free(void *ctx, void *p) { (void)ctx; free(p); }

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);

typedef struct {
    const char *lib;
    const char *malloc_sym;
    const char *free_sym;
    void *handle;
    malloc_fn m;
    free_fn f;
} dl_alloc_t;

static dl_alloc_t dl_je = {"libjemalloc.so.2", "malloc", "free", 0, 0, 0};
static dl_alloc_t dl_mi = {"libmimalloc.so.2", "mi_malloc", "mi_free", 0, 0, 0};
static dl_alloc_t dl_tc = {"libtcmalloc_minimal.so.4", "tc_malloc", "tc_free",
                           0, 0, 0};

static void *dl_alloc(void *ctx, size_t n) { return ((dl_alloc_t *)ctx)->m(n); }
static void dl_free(void *ctx, void *p) { ((dl_alloc_t *)ctx)->f(p); }

static int dl_open(bench_alloc_t *a) {
    dl_alloc_t *d = a->ctx;
    if (d->handle) return 0;
    d->handle = dlopen(d->lib, RTLD_NOW | RTLD_LOCAL);
    if (!d->handle) {
        snprintf(a->note, sizeof a->note, "%s not loadable: skipped", d->lib);
        return -1;
    }
    d->m = (malloc_fn)dlsym(d->handle, d->malloc_sym);
    d->f = (free_fn)dlsym(d->handle, d->free_sym);
    if (!d->m || !d->f) {
        snprintf(a->note, sizeof a->note, "%s lacks %s/%s: skipped", d->lib,
                 d->malloc_sym, d->free_sym);
        return -1;
    }
    return 0;
}

#define MAX_ALLOCS 16

/* glibc without trimming and without mmap below 32 MiB: process-wide */
static int glibc_tuned_open(bench_alloc_t *a) {
    (void)a;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 0x7fffffff);
    return 0;
}

static int make_allocators(bench_alloc_t *a) {
    int n = 0;
    memset(a, 0, MAX_ALLOCS * sizeof *a);
    snprintf(a[n].name, sizeof a[n].name, "glibc");
    a[n].alloc = glibc_alloc;
    a[n].free = glibc_free;
    a[n].available = 1;
    n++;
    snprintf(a[n].name, sizeof a[n].name, "glibc-tuned");
    a[n].alloc = glibc_alloc;
    a[n].free = glibc_free;
    a[n].open = glibc_tuned_open;
    a[n].solo = 1;
    a[n].available = 1;
    n++;
    struct { const char *name; dl_alloc_t *d; } dls[] = {
        {"jemalloc", &dl_je}, {"mimalloc", &dl_mi}, {"tcmalloc", &dl_tc}};
    for (size_t i = 0; i < sizeof dls / sizeof dls[0]; i++) {
        snprintf(a[n].name, sizeof a[n].name, "%s", dls[i].name);
        a[n].alloc = dl_alloc;
        a[n].free = dl_free;
        a[n].open = dl_open;
        a[n].ctx = dls[i].d;
        a[n].available = 1;
        n++;
    }
    n += bench_pool_adapters(a + n, MAX_ALLOCS - n);
    return n;
}

/* ---------------------------------------------------------------- */
/* replay                                                            */
/* ---------------------------------------------------------------- */

enum { TOUCH_NONE, TOUCH_ENDS, TOUCH_PAGES, TOUCH_ALL };
static const char *touch_names[] = {"none", "ends", "pages", "all"};

/* CLOCK_THREAD_CPUTIME_ID by default: on a shared, loaded machine the
 * time the thread is descheduled would dominate wall time; page faults
 * and other kernel work done for the thread still count (--clock wall
 * switches to CLOCK_MONOTONIC). */
static clockid_t g_clock = CLOCK_THREAD_CPUTIME_ID;

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Returns elapsed ns, or -1 if an allocation failed (everything allocated
 * so far is freed again). */
static double replay(const bench_alloc_t *a, const bt_trace_t *t,
                     void **slots, int touch) {
    void *(*am)(void *, size_t) = a->alloc;
    void (*af)(void *, void *) = a->free;
    void (*as)(void *) = a->step;
    void *ctx = a->ctx;
    const bt_op_t *ops = t->ops;
    size_t n = t->n, i;
    double t0 = now_ns();
    for (i = 0; i < n; i++) {
        bt_op_t op = ops[i];
        if (op.size) {
            volatile char *p = am(ctx, op.size);
            if (!p) goto fail;
            switch (touch) {
            case TOUCH_ENDS:
                p[0] = 1;
                p[op.size - 1] = 1;
                break;
            case TOUCH_PAGES:
                for (size_t o = 0; o < op.size; o += 4096) p[o] = 1;
                p[op.size - 1] = 1;
                break;
            case TOUCH_ALL:
                memset((void *)p, 1, op.size);
                break;
            default:
                break;
            }
            slots[op.slot] = (void *)p;
        } else if (op.slot != BT_STEP) {
            af(ctx, slots[op.slot]);
        } else if (as) {
            as(ctx);
        }
    }
    return now_ns() - t0;
fail: {
    /* free what is live: replay the remaining frees of live slots */
    char *live = calloc(t->nslots, 1);
    if (live) {
        for (size_t j = 0; j < i; j++)
            if (ops[j].slot != BT_STEP) live[ops[j].slot] = ops[j].size != 0;
        for (uint32_t s = 0; s < t->nslots; s++)
            if (live[s]) af(ctx, slots[s]);
        free(live);
    }
    return -1;
}
}

/* ---------------------------------------------------------------- */
/* reference: an idealised online allocator                          */
/* ---------------------------------------------------------------- */

/* Replay the trace on one unbounded address range with address-ordered
 * first fit, immediate coalescing and the top given back when free,
 * 64-byte granularity and no metadata: the footprint an ideal general
 * allocator without size classes or chunks would reach.  Returns the
 * high-water offset / peak live bytes, or -1 on no memory. */
static double sim_first_fit(const bt_trace_t *t) {
    typedef struct { uint64_t start, size; } ext_t;
    size_t cap = 1024, n = 0;
    ext_t *fr = malloc(cap * sizeof *fr);
    uint64_t *off = calloc(t->nslots, sizeof *off);
    uint64_t *len = calloc(t->nslots, sizeof *len);
    uint64_t top = 0, hw = 0;
    double res = -1;
    if (!fr || !off || !len) goto out;
    for (size_t i = 0; i < t->n; i++) {
        bt_op_t op = t->ops[i];
        if (op.slot == BT_STEP) continue;
        if (op.size) {
            uint64_t sz = ((uint64_t)op.size + 63) & ~(uint64_t)63;
            size_t k;
            for (k = 0; k < n && fr[k].size < sz; k++) {}
            if (k < n) {
                off[op.slot] = fr[k].start;
                fr[k].start += sz;
                fr[k].size -= sz;
                if (!fr[k].size) {
                    memmove(fr + k, fr + k + 1, (n - k - 1) * sizeof *fr);
                    n--;
                }
            } else if (n && fr[n - 1].start + fr[n - 1].size == top) {
                off[op.slot] = fr[n - 1].start; /* grow the last hole */
                top = fr[n - 1].start + sz;
                n--;
            } else {
                off[op.slot] = top;
                top += sz;
            }
            len[op.slot] = sz;
            if (top > hw) hw = top;
        } else {
            uint64_t st = off[op.slot], sz = len[op.slot];
            size_t k = 0, lo = 0, hi = n;
            while (lo < hi) { /* first extent after st */
                size_t mid = (lo + hi) / 2;
                if (fr[mid].start < st) lo = mid + 1; else hi = mid;
            }
            k = lo;
            if (k < n && st + sz == fr[k].start) { /* merge right */
                sz += fr[k].size;
                memmove(fr + k, fr + k + 1, (n - k - 1) * sizeof *fr);
                n--;
            }
            if (k > 0 && fr[k - 1].start + fr[k - 1].size == st) { /* left */
                fr[k - 1].size += sz;
                k--;
            } else {
                if (n == cap) {
                    ext_t *nf = realloc(fr, 2 * cap * sizeof *fr);
                    if (!nf) goto out;
                    fr = nf;
                    cap *= 2;
                }
                memmove(fr + k + 1, fr + k, (n - k) * sizeof *fr);
                fr[k].start = st;
                fr[k].size = sz;
                n++;
            }
            if (fr[n - 1].start + fr[n - 1].size == top) { /* trim top */
                top = fr[n - 1].start;
                n--;
            }
        }
    }
    res = (double)hw / (double)t->peak_live;
out:
    free(fr);
    free(off);
    free(len);
    return res;
}

/* ---------------------------------------------------------------- */
/* footprint in a child                                              */
/* ---------------------------------------------------------------- */

typedef struct {
    int ok;           /* 1 ok, 0 open failed, -1 alloc failed */
    char note[160];
    double rss0_kb, hwm_kb, rss_end_kb;
    double warm_hwm_kb;  /* peak RSS during the second replay */
    double warm_faults;  /* page faults (minor + major) during it */
    double replay_ns;
    bench_stats_t st;
} fp_result_t;

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':') v = atol(line + k + 1);
    fclose(f);
    return v;
}

static int reset_hwm(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0) return -1;
    ssize_t w = write(fd, "5", 1);
    close(fd);
    return w == 1 ? 0 : -1;
}

/* replay() with TOUCH_PAGES that also takes the allocator's snapshot
 * every time the live requested bytes reach the trace's peak (the last
 * such snapshot is kept). */
static double replay_fp(const bench_alloc_t *a, const bt_trace_t *t,
                        void **slots, bench_stats_t *st) {
    uint32_t *sizes = calloc(t->nslots, sizeof *sizes);
    uint64_t live = 0;
    double t0 = now_ns();
    if (!sizes) return -1;
    for (size_t i = 0; i < t->n; i++) {
        bt_op_t op = t->ops[i];
        if (op.size) {
            volatile char *p = a->alloc(a->ctx, op.size);
            if (!p) {
                free(sizes);
                return -1; /* the child exits right after: no cleanup */
            }
            for (size_t o = 0; o < op.size; o += 4096) p[o] = 1;
            p[op.size - 1] = 1;
            slots[op.slot] = (void *)p;
            sizes[op.slot] = op.size;
            live += op.size;
            if (live == t->peak_live && a->snapshot) a->snapshot((bench_alloc_t *)a, st);
        } else if (op.slot != BT_STEP) {
            a->free(a->ctx, slots[op.slot]);
            live -= sizes[op.slot];
        } else if (a->step) {
            a->step(a->ctx);
        }
    }
    free(sizes);
    return now_ns() - t0;
}

/* The child: a fresh exec of this program (so no allocator state from
 * the parent leaks in), which regenerates the trace from the same seed,
 * replays it once touching every page and writes an fp_result_t to
 * `wfd`. */
static int footprint_child(bench_alloc_t *a, const bt_trace_t *t, int wfd) {
    fp_result_t r;
    memset(&r, 0, sizeof r);
    r.st.check_errors = -1;
    void **slots = calloc(t->nslots, sizeof *slots);
    if (!slots || (a->open && a->open(a) != 0)) {
        r.ok = 0;
        snprintf(r.note, sizeof r.note, "%s", a->note);
    } else {
        if (reset_hwm() != 0) snprintf(r.note, sizeof r.note, "clear_refs failed");
        r.rss0_kb = (double)status_kb("VmRSS");
        double ns = replay_fp(a, t, slots, &r.st);
        r.hwm_kb = (double)status_kb("VmHWM");
        if (ns >= 0) { /* steady state: the same trace again */
            struct rusage ru0, ru1;
            if (a->warm) a->warm(a);
            reset_hwm();
            getrusage(RUSAGE_SELF, &ru0);
            ns = replay_fp(a, t, slots, &r.st);
            getrusage(RUSAGE_SELF, &ru1);
            r.warm_hwm_kb = (double)status_kb("VmHWM");
            r.warm_faults = (double)(ru1.ru_minflt - ru0.ru_minflt + ru1.ru_majflt - ru0.ru_majflt);
        }
        r.rss_end_kb = (double)status_kb("VmRSS");
        r.replay_ns = ns;
        r.ok = ns < 0 ? -1 : 1;
        if (ns < 0) snprintf(r.note, sizeof r.note, "allocation failed");
        if (a->stats) a->stats(a, &r.st);
    }
    free(slots);
    if (a->close) a->close(a);
    ssize_t w = write(wfd, &r, sizeof r);
    return w == (ssize_t)sizeof r ? 0 : 1;
}

static char *g_self;  /* this program, re-executed for each child     */
static char **g_args; /* the user's options, passed on to the children */
static int g_nargs;

/* Run `g_self <user options> --child MODE FD ALLOC TRACE` and read exactly
 * `size` bytes of results from it into `out`; returns 0 on success, else
 * -1 with `out` zeroed. */
static int run_child(const char *mode, const char *alloc, const char *trace,
                     void *out, size_t size) {
    int fds[2];
    memset(out, 0, size);
    if (pipe(fds)) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        char fdbuf[16];
        char *argv[72];
        int k = 0;
        close(fds[0]);
        snprintf(fdbuf, sizeof fdbuf, "%d", fds[1]);
        argv[k++] = g_self;
        for (int i = 0; i < g_nargs && k < 64; i++) argv[k++] = g_args[i];
        argv[k++] = "--child";
        argv[k++] = (char *)mode;
        argv[k++] = fdbuf;
        argv[k++] = (char *)alloc;
        argv[k++] = (char *)trace;
        argv[k] = NULL;
        execv(g_self, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fds[0], (char *)out + got, size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != size) {
        memset(out, 0, size);
        fprintf(stderr, "child %s/%s/%s died (status %d)\n", mode, alloc,
                trace, status);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- */
/* driver                                                            */
/* ---------------------------------------------------------------- */

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef struct {
    int reps, touch, do_time, do_fp, strict;
    size_t lu_allocs, inferences;
    uint64_t seed;
    const char *dump_dir;
    char allocs_filter[256];
    char traces_filter[256];
} opts_t;

static int selected(const char *filter, const char *name) {
    if (!filter[0]) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", filter);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, name)) return 1;
    return 0;
}

static void mib(char *buf, size_t n, double bytes) {
    snprintf(buf, n, "%.1f", bytes / 1048576.0);
}

typedef struct {
    int ok;
    double med, lo, hi;
    char note[160];
} tm_result_t;

/* The selected allocators replay `t` in this process: one warm-up each,
 * then o->reps timed replays in rotating order.  `only` NULL: every
 * allocator but the solo ones; else just the one named.  Fills
 * res[0..na) (ok 0 for those not timed here). */
static int time_all(const opts_t *o, const bt_trace_t *t, bench_alloc_t *a,
                    int na, tm_result_t *res, const char *only) {
    void **slots = calloc(t->nslots, sizeof *slots);
    double *samples = calloc((size_t)na * (size_t)o->reps, sizeof *samples);
    memset(res, 0, (size_t)na * sizeof *res);
    if (!slots || !samples) return 1;
    for (int i = 0; i < na; i++) {
        res[i].ok = 1;
        if (only ? strcmp(only, a[i].name) != 0 : a[i].solo) {
            res[i].ok = 0;
            a[i].available = 0;
            snprintf(res[i].note, sizeof res[i].note, "timed in its own process");
            continue;
        }
        if (!a[i].available || (a[i].open && a[i].open(&a[i]) != 0) ||
            replay(&a[i], t, slots, o->touch) < 0) {
            res[i].ok = 0;
            snprintf(res[i].note, sizeof res[i].note, "%s",
                     a[i].note[0] ? a[i].note : "allocation failed");
        }
    }
    for (int r = 0; r < o->reps; r++) {
        for (int k = 0; k < na; k++) {
            int i = (k + r) % na;
            if (!res[i].ok) continue;
            double ns = replay(&a[i], t, slots, o->touch);
            if (ns < 0) {
                res[i].ok = 0;
                snprintf(res[i].note, sizeof res[i].note, "allocation failed");
            }
            samples[(size_t)i * o->reps + r] = ns / (double)t->n_allocs;
        }
    }
    for (int i = 0; i < na; i++) {
        if (a[i].close) a[i].close(&a[i]);
        if (!res[i].ok) continue;
        double *x = samples + (size_t)i * o->reps;
        qsort(x, (size_t)o->reps, sizeof *x, cmp_double);
        res[i].med = o->reps % 2 ? x[o->reps / 2]
                                 : 0.5 * (x[o->reps / 2 - 1] + x[o->reps / 2]);
        res[i].lo = x[0];
        res[i].hi = x[o->reps - 1];
    }
    free(samples);
    free(slots);
    return 0;
}

static int run_trace(const opts_t *o, const char *key, bt_trace_t *t,
                     bench_alloc_t *a, int na) {
    int failures = 0;
    printf("\n### %s\n\n%s: %zu ops, %zu alloc/free pairs, sizes %u..%u B, "
           "peak live %.1f MiB, at most %u blocks live\n\n",
           t->name, t->desc, t->n, t->n_allocs, t->min_size, t->max_size,
           (double)t->peak_live / 1048576.0, t->nslots);
    fflush(stdout);
    fp_result_t fp[MAX_ALLOCS];
    double med[MAX_ALLOCS], lo[MAX_ALLOCS], hi[MAX_ALLOCS];
    memset(fp, 0, sizeof fp);
    for (int i = 0; i < na; i++) med[i] = lo[i] = hi[i] = -1;

    if (o->do_fp) {
        for (int i = 0; i < na; i++) {
            if (!a[i].available) continue;
            if (run_child("fp", a[i].name, key, &fp[i], sizeof fp[i]) != 0) {
                fp[i].ok = -1;
                snprintf(fp[i].note, sizeof fp[i].note, "footprint child died");
            }
            if (fp[i].ok == 0) {
                a[i].available = 0;
                snprintf(a[i].note, sizeof a[i].note, "%s", fp[i].note);
            }
        }
    }
    if (o->do_time) {
        tm_result_t tr[MAX_ALLOCS], solo[MAX_ALLOCS];
        run_child("time", "-", key, tr, sizeof tr);
        for (int i = 0; i < na; i++)
            if (a[i].solo && a[i].available &&
                run_child("time", a[i].name, key, solo, sizeof solo) == 0)
                tr[i] = solo[i];
        for (int i = 0; i < na; i++) {
            if (tr[i].ok == 1) {
                med[i] = tr[i].med;
                lo[i] = tr[i].lo;
                hi[i] = tr[i].hi;
            } else if (a[i].available) {
                a[i].available = 0;
                snprintf(a[i].note, sizeof a[i].note, "%s",
                         tr[i].note[0] ? tr[i].note : "timing failed");
            }
        }
    }

    /* the table */
    double base_t = a[0].available ? med[0] : -1;
    double base_f = -1;
    if (o->do_fp && fp[0].ok == 1)
        base_f = (fp[0].hwm_kb - fp[0].rss0_kb) * 1024.0 / (double)t->peak_live;
    printf("| allocator | ns/pair (median) | min..max | vs glibc | "
           "peak RSS / peak live | vs glibc | frag (RSS) | "
           "reserved / requested (peaks) | frag (stats) | int. @peak | "
           "ext. @peak | RSS kept (MiB) | warm peak RSS / peak live | "
           "warm page faults / %s |\n", t->n_steps > 1 ? "step" : "replay");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < na; i++) {
        char c[14][48];
        for (int k = 0; k < 14; k++) snprintf(c[k], sizeof c[k], "-");
        snprintf(c[0], sizeof c[0], "%.31s", a[i].name);
        if (!a[i].available) goto row;
        if (med[i] >= 0) {
            snprintf(c[1], sizeof c[1], "%.1f", med[i]);
            snprintf(c[2], sizeof c[2], "%.1f..%.1f", lo[i], hi[i]);
            if (base_t > 0) snprintf(c[3], sizeof c[3], "%.2f", med[i] / base_t);
        }
        if (o->do_fp && fp[i].ok == 1) {
            double f = (fp[i].hwm_kb - fp[i].rss0_kb) * 1024.0 / (double)t->peak_live;
            snprintf(c[4], sizeof c[4], "%.3f", f);
            if (base_f > 0) snprintf(c[5], sizeof c[5], "%.2f", f / base_f);
            snprintf(c[6], sizeof c[6], "%.1f%%", f > 0 ? 100 * (1 - 1 / f) : 0);
            mib(c[11], sizeof c[11], (fp[i].rss_end_kb - fp[i].rss0_kb) * 1024.0);
            snprintf(c[12], sizeof c[12], "%.3f",
                     (fp[i].warm_hwm_kb - fp[i].rss0_kb) * 1024.0 / (double)t->peak_live);
            snprintf(c[13], sizeof c[13], "%.1f",
                     fp[i].warm_faults / (double)(t->n_steps > 1 ? t->n_steps : 1));
        } else if (o->do_fp) {
            snprintf(c[4], sizeof c[4], "fail");
        }
        bench_stats_t *st = &fp[i].st;
        if (o->do_fp && st->has_stats && st->peak_reserved > 0 &&
            st->peak_requested > 0) {
            snprintf(c[7], sizeof c[7], "%.3f", st->peak_reserved / st->peak_requested);
            snprintf(c[8], sizeof c[8], "%.1f%%",
                     100 * (1 - st->peak_requested / st->peak_reserved));
            snprintf(c[9], sizeof c[9], "%.1f%%", 100 * st->frag_internal);
            snprintf(c[10], sizeof c[10], "%.1f%%", 100 * st->frag_external);
        }
        if (o->do_fp && st->has_stats) {
            /* the pool's own accounting must match the trace */
            if ((uint64_t)st->peak_requested != t->peak_live ||
                st->end_requested != 0 || st->check_errors > 0) {
                failures++;
                fprintf(stderr,
                        "MISMATCH %s on %s: pool peak requested %.0f (trace %llu), "
                        "live at end %.0f, check errors %ld\n",
                        a[i].name, t->name, st->peak_requested,
                        (unsigned long long)t->peak_live, st->end_requested,
                        st->check_errors);
            }
        }
    row:
        printf("|");
        for (int k = 0; k < 14; k++) printf(" %s |", c[k]);
        printf("\n");
    }
    if (o->do_fp) {
        double ff = sim_first_fit(t);
        printf("| (ideal first fit, simulated) | - | - | - | %.3f | %s | %.1f%% "
               "| - | - | - | - | - | - | - |\n", ff, "-", ff > 0 ? 100 * (1 - 1 / ff) : 0);
    }
    for (int i = 0; i < na; i++)
        if (a[i].note[0]) printf("\nnote: %s: %s\n", a[i].name, a[i].note);
    fflush(stdout);
    return failures;
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_pool [options]\n"
            "  --trace LIST    comma list of: loguniform, mobilenetv2, resnet50,\n"
            "                  dynamic, batch (default: all five)\n"
            "  --allocs LIST   comma list of allocator names (default: all)\n"
            "  --reps N        timed repetitions per allocator (default 7)\n"
            "  --touch MODE    none|ends|pages|all for the timed runs (default ends)\n"
            "  --clock C       cpu (thread CPU time, default) or wall\n"
            "  --n N           allocations in the log-uniform trace (default 1000000)\n"
            "  --inferences N  forward passes per CNN trace (default 200)\n"
            "  --seed N        trace seed (default 42)\n"
            "  --quick         --n 100000 --inferences 20 --reps 3\n"
            "  --no-time / --no-footprint   skip a part\n"
            "  --strict        exit 1 if the pool's stats disagree with the trace\n"
            "  --dump DIR      also write the traces as CSV into DIR\n");
}

static int gen_trace(const opts_t *o, const char *key, bt_trace_t *t) {
    static const struct { const char *key; int model; uint32_t rmin, rmax; } cnn[] = {
        {"mobilenetv2", BT_MOBILENETV2, 224, 224},
        {"resnet50", BT_RESNET50, 224, 224},
        {"dynamic", BT_BOTH, 128, 320}};
    if (!strcmp(key, "loguniform"))
        return bt_gen_loguniform(t, o->lu_allocs, 1000, 64, 1u << 20, o->seed);
    if (!strcmp(key, "batch"))
        return bt_gen_cnn_batch(t, BT_MOBILENETV2, o->inferences, 224, 1, 8, o->seed + 4);
    for (int k = 0; k < 3; k++)
        if (!strcmp(key, cnn[k].key))
            return bt_gen_cnn(t, cnn[k].model, o->inferences, cnn[k].rmin,
                              cnn[k].rmax, o->seed + (uint64_t)k + 1);
    return -1;
}

/* jemalloc uses initial-exec TLS, so dlopen() fails unless glibc keeps
 * enough static TLS in reserve: re-exec once with the tunable set. */
static void reexec_for_static_tls(char **argv) {
    char buf[512];
    const char *old = getenv("GLIBC_TUNABLES");
    if (getenv("PA_BENCH_REEXEC")) return;
    setenv("PA_BENCH_REEXEC", "1", 1);
    snprintf(buf, sizeof buf, "%s%sglibc.rtld.optional_static_tls=16384",
             old ? old : "", old && old[0] ? ":" : "");
    setenv("GLIBC_TUNABLES", buf, 1);
    execv("/proc/self/exe", argv);
    /* could not re-exec: carry on, jemalloc will be reported missing */
}

int main(int argc, char **argv) {
    opts_t o;
    reexec_for_static_tls(argv);
    int child_fd = -1;
    const char *child_alloc = NULL, *child_trace = NULL, *child_mode = NULL;
    memset(&o, 0, sizeof o);
    o.reps = 7;
    o.touch = TOUCH_ENDS;
    o.do_time = o.do_fp = 1;
    o.lu_allocs = 1000000;
    o.inferences = 200;
    o.seed = 42;
    g_self = "/proc/self/exe";
    g_args = argv + 1;
    g_nargs = argc - 1;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEEDV() do { if (!v) { usage(); return 2; } i++; } while (0)
        if (!strcmp(s, "--trace")) { NEEDV(); snprintf(o.traces_filter, sizeof o.traces_filter, "%s", v); }
        else if (!strcmp(s, "--allocs")) { NEEDV(); snprintf(o.allocs_filter, sizeof o.allocs_filter, "%s", v); }
        else if (!strcmp(s, "--reps")) { NEEDV(); o.reps = atoi(v); }
        else if (!strcmp(s, "--n")) { NEEDV(); o.lu_allocs = strtoull(v, NULL, 10); }
        else if (!strcmp(s, "--inferences")) { NEEDV(); o.inferences = strtoull(v, NULL, 10); }
        else if (!strcmp(s, "--seed")) { NEEDV(); o.seed = strtoull(v, NULL, 10); }
        else if (!strcmp(s, "--dump")) { NEEDV(); o.dump_dir = v; }
        else if (!strcmp(s, "--touch")) {
            NEEDV();
            o.touch = -1;
            for (int k = 0; k < 4; k++) if (!strcmp(v, touch_names[k])) o.touch = k;
            if (o.touch < 0) { fprintf(stderr, "bad --touch '%s'\n", v); return 2; }
        }
        else if (!strcmp(s, "--quick")) { o.lu_allocs = 100000; o.inferences = 20; o.reps = 3; }
        else if (!strcmp(s, "--clock")) {
            NEEDV();
            if (!strcmp(v, "wall")) g_clock = CLOCK_MONOTONIC;
            else if (!strcmp(v, "cpu")) g_clock = CLOCK_THREAD_CPUTIME_ID;
            else { fprintf(stderr, "bad --clock '%s'\n", v); return 2; }
        }
        else if (!strcmp(s, "--no-time")) o.do_time = 0;
        else if (!strcmp(s, "--no-footprint")) o.do_fp = 0;
        else if (!strcmp(s, "--strict")) o.strict = 1;
        else if (!strcmp(s, "--child") && i + 4 < argc) {
            if (g_nargs == argc - 1) g_nargs = i - 1;
            child_mode = argv[i + 1];
            child_fd = atoi(argv[i + 2]);
            child_alloc = argv[i + 3];
            child_trace = argv[i + 4];
            i += 4;
        }
        else { usage(); return 2; }
    }
    if (o.reps < 1 || o.reps > 1000) { fprintf(stderr, "bad --reps %d\n", o.reps); return 2; }
    if (o.lu_allocs < 1 || o.inferences < 1) { fprintf(stderr, "bad --n / --inferences\n"); return 2; }

    bench_alloc_t all[MAX_ALLOCS], a[MAX_ALLOCS];
    int nall = make_allocators(all), na = 0;

    for (int i = 0; i < nall; i++)
        if (selected(o.allocs_filter, all[i].name)) a[na++] = all[i];
    if (na == 0) { fprintf(stderr, "no allocator selected\n"); return 2; }

    if (child_fd >= 0) {
        bt_trace_t t;
        int rc = 1;
        if (gen_trace(&o, child_trace, &t)) return 1;
        if (!strcmp(child_mode, "time")) {
            tm_result_t res[MAX_ALLOCS];
            rc = time_all(&o, &t, a, na, res, strcmp(child_alloc, "-") ? child_alloc : NULL);
            ssize_t w = write(child_fd, res, sizeof res);
            if (w != (ssize_t)sizeof res) rc = 1;
        } else {
            for (int i = 0; i < na; i++)
                if (!strcmp(a[i].name, child_alloc))
                    rc = footprint_child(&a[i], &t, child_fd);
        }
        bt_free(&t);
        return rc;
    }

    printf("## pool benchmark: ns per alloc+free pair (%s time, touch=%s, "
           "median of %d, interleaved), footprint = peak RSS growth / peak "
           "live bytes\n", g_clock == CLOCK_MONOTONIC ? "wall" : "thread CPU",
           touch_names[o.touch], o.reps);
    int failures = 0;
    static const char *keys[] = {"loguniform", "mobilenetv2", "resnet50", "dynamic", "batch"};
    for (int k = 0; k < 5; k++) {
        bt_trace_t t;
        if (!selected(o.traces_filter, keys[k])) continue;
        if (gen_trace(&o, keys[k], &t)) {
            fprintf(stderr, "cannot generate trace %s\n", keys[k]);
            return 1;
        }
        if (o.dump_dir) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s.csv", o.dump_dir, t.name);
            if (bt_write_csv(&t, path)) fprintf(stderr, "cannot write %s\n", path);
        }
        failures += run_trace(&o, keys[k], &t, a, na);
        bt_free(&t);
    }
    if (failures) fprintf(stderr, "%d pool statistics mismatches\n", failures);
    return o.strict && failures ? 1 : 0;
}
