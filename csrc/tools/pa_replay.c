/* pa_replay.c -- replay one allocation trace against one allocator.
 *
 *   pa_replay TRACE.bin ALLOCATOR [--lib PATH --malloc SYM --free SYM]
 *             [--repeat N] [--samples K] [--no-touch]
 *
 * The worker behind `pyarena alloc-bench`: one fresh process per
 * allocator, so no heap state of another allocator (or of Python) is in
 * the figures.  TRACE.bin is the binary form of a trace (docs/traces.md):
 * a little-endian array of {uint32 id, uint32 kind, uint64 size} records,
 * kind 0 = alloc, 1 = free, 2 = step.  ALLOCATOR is `malloc` (the
 * process's own malloc/free, i.e. glibc's unless the environment says
 * otherwise), `dlopen` (the --malloc / --free symbols of the library at
 * --lib, loaded with RTLD_LOCAL: jemalloc, mimalloc, tcmalloc), or
 * `pool-hybrid`, `pool-slab`, `pool-buddy` (pyarena's work pool, library
 * defaults but the mode).
 *
 * It replays the trace once for memory -- every page of every block
 * touched, the RSS sampled K times along the way, the high-water mark
 * (VmHWM, reset through /proc/self/clear_refs first), the peak of the
 * anonymous resident set (sampled after each allocation), the page
 * faults and the RSS kept after the last free -- once more untimed for
 * the warm peaks, then N times for time (thread CPU time per replay,
 * pages touched alike), and prints one JSON object.
 * Blocks still live at the end of the trace are freed after each replay,
 * outside the timing.  Errors go to stderr with exit status 2.
 */
#define _GNU_SOURCE
#include "pyarena.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* At most this many anonymous-RSS samples per pass (one per allocation
 * up to it; a longer trace is sampled every k-th allocation). */
#define ANON_SAMPLES ((size_t)2000000)

typedef struct rec {
    uint32_t id, kind;
    uint64_t size;
} rec_t;

typedef struct alloc {
    const char *name;
    void *(*m)(size_t);
    void (*f)(void *);
    pa_pool_t *pool;
    int steps;     /* pool-learned: a step mark calls pa_pool_step */
} alloc_t;

static void *do_alloc(const alloc_t *a, size_t n)
{
    return a->pool ? pa_pool_alloc(a->pool, n, NULL) : a->m(n);
}

static void do_free(const alloc_t *a, void *p)
{
    if (a->pool)
        (void)pa_pool_free(a->pool, p);
    else
        a->f(p);
}

static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':')
            v = atol(line + k + 1);
    fclose(f);
    return v;
}

/* The resident set in KiB from /proc/self/statm (cheaper than status). */
static long rss_kb(int fd)
{
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? atol(p + 1) * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

/* The anonymous resident set in KiB: statm's resident minus its shared
 * (file-backed) pages.  The heap's footprint is anonymous memory; the
 * file pages -- the allocator's own code, faulted in 64 KiB at a time
 * around the first call of each function -- moved VmRSS by a 64 KiB
 * quantum from run to run (a 258 KiB trace: 1.07-1.71x its peak live for
 * one allocator, 276-280 KiB of anonymous growth every time). */
static long anon_kb(int fd)
{
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long size, resident, shared;
    if (n <= 0)
        return -1;
    buf[n] = 0;
    if (sscanf(buf, "%ld %ld %ld", &size, &resident, &shared) != 3)
        return -1;
    return (resident - shared) * (sysconf(_SC_PAGESIZE) / 1024);
}

static int die(const char *what, const char *detail)
{
    fprintf(stderr, "pa_replay: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 2;
}

/* What one replay samples (all optional): every `every` events (0 =
 * never) an RSS sample goes to samples; with `anon_peak`, the anonymous
 * resident set after every `anon_every`-th allocation, its maximum kept. */
typedef struct probe {
    size_t every, anon_every;
    int statm;
    long *samples;
    size_t nsamples;
    long *anon_peak;
} probe_t;

/* One replay.  slots[id] holds live blocks; `touch` writes one byte per
 * page.  Returns the thread CPU ns of the replay, or -1 if an allocation
 * failed. */
static double replay(const alloc_t *a, const rec_t *t, size_t n, void **slots, int touch,
                     probe_t *pr)
{
    size_t nalloc = 0;
    double t0 = thread_ns();
    for (size_t i = 0; i < n; i++) {
        const rec_t r = t[i];
        if (r.kind == 0) {
            size_t sz = r.size ? (size_t)r.size : 1;
            volatile char *p = (volatile char *)do_alloc(a, sz);
            if (!p)
                return -1;
            if (touch) {
                for (size_t o = 0; o < sz; o += 4096)
                    p[o] = 1;
                p[sz - 1] = 1;
            }
            slots[r.id] = (void *)p;
            if (pr->anon_peak && ++nalloc % pr->anon_every == 0) {
                long kb = anon_kb(pr->statm);
                if (kb > *pr->anon_peak)
                    *pr->anon_peak = kb;
            }
        } else if (r.kind == 1 && slots[r.id]) {
            do_free(a, slots[r.id]);
            slots[r.id] = NULL;
        } else if (r.kind == 2 && a->steps) {
            (void)pa_pool_step(a->pool);
        }
        if (pr->every && (i % pr->every == 0 || i + 1 == n)) {
            pr->samples[2 * pr->nsamples] = (long)i;
            pr->samples[2 * pr->nsamples + 1] = rss_kb(pr->statm);
            ++pr->nsamples;
        }
    }
    return thread_ns() - t0;
}

static void free_live(const alloc_t *a, void **slots, size_t nslots)
{
    for (size_t i = 0; i < nslots; i++)
        if (slots[i]) {
            do_free(a, slots[i]);
            slots[i] = NULL;
        }
}

static int open_alloc(alloc_t *a, const char *name, const char *lib, const char *msym,
                      const char *fsym, int has_steps)
{
    a->name = name;
    if (!strcmp(name, "malloc")) {
        a->m = malloc;
        a->f = free;
        return 0;
    }
    if (!strcmp(name, "dlopen")) {
        if (!lib || !msym || !fsym)
            return die("dlopen needs --lib, --malloc and --free", NULL);
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return die("cannot load", dlerror());
        *(void **)&a->m = dlsym(h, msym);
        *(void **)&a->f = dlsym(h, fsym);
        return a->m && a->f ? 0 : die("symbol not found in", lib);
    }
    pa_pool_config_t cfg;
    pa_pool_config_default(&cfg);
    if (!strcmp(name, "pool-hybrid"))
        cfg.mode = PA_POOL_HYBRID;
    else if (!strcmp(name, "pool-slab"))
        cfg.mode = PA_POOL_SLAB_ONLY;
    else if (!strcmp(name, "pool-buddy"))
        cfg.mode = PA_POOL_BUDDY_ONLY;
    else if (!strcmp(name, "pool-learned")) {
        /* learned steps: the trace's step marks, or (a trace without
         * any) the pool's own automatic boundaries */
        cfg.mode = PA_POOL_HYBRID;
        cfg.learn = 1;
        cfg.auto_step = !has_steps;
        a->steps = 1;
    } else
        return die("unknown allocator", name);
    pa_status_t st;
    a->pool = pa_pool_create(&cfg, &st);
    if (a->pool && a->steps && !has_steps)
        (void)pa_pool_step(a->pool);    /* learning starts at the first mark */
    return a->pool ? 0 : die("pa_pool_create failed", pa_status_string(st));
}

/* The trace, mapped read-only; its record count in *n, slots needed in *nslots. */
static const rec_t *load(const char *path, size_t *n, size_t *nslots)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size % (off_t)sizeof(rec_t)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    *n = (size_t)sb.st_size / sizeof(rec_t);
    void *m = *n ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (*n && m == MAP_FAILED)
        return NULL;
    const rec_t *t = (const rec_t *)m;
    size_t maxid = 0;
    for (size_t i = 0; i < *n; i++)
        if (t[i].kind != 2 && t[i].id + (size_t)1 > maxid)
            maxid = t[i].id + (size_t)1;
    *nslots = maxid;
    return t;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The memory pass's figures, KiB: VmRSS at its start, its high-water
 * mark, the warm pass's, VmRSS after the last free; the anonymous
 * resident set at the start, its sampled peaks and after the last free. */
typedef struct mem {
    long rss0, hwm, hwm_warm, rss_end, anon0, anon_peak, anon_warm, anon_end;
} mem_t;

static void print_json(const alloc_t *a, size_t n, size_t nallocs, double *ns, int reps,
                       const mem_t *m, struct rusage *ru0, struct rusage *ru1,
                       const long *samples, size_t nsamples)
{
    qsort(ns, (size_t)reps, sizeof *ns, cmp_double);
    printf("{\"allocator\": \"%s\", \"events\": %zu, \"allocations\": %zu, ", a->name, n,
           nallocs);
    printf("\"ns_per_pair\": %.3f, \"ns_per_pair_min\": %.3f, \"ns_per_pair_max\": %.3f, ",
           nallocs ? ns[reps / 2] / (double)nallocs : 0.0,
           nallocs ? ns[0] / (double)nallocs : 0.0,
           nallocs ? ns[reps - 1] / (double)nallocs : 0.0);
    printf("\"rss0_kb\": %ld, \"hwm_kb\": %ld, \"hwm_warm_kb\": %ld, \"rss_end_kb\": %ld, ",
           m->rss0, m->hwm, m->hwm_warm, m->rss_end);
    printf("\"anon0_kb\": %ld, \"anon_peak_kb\": %ld, \"anon_warm_kb\": %ld, "
           "\"anon_end_kb\": %ld, ", m->anon0, m->anon_peak, m->anon_warm, m->anon_end);
    printf("\"minor_faults\": %ld, \"major_faults\": %ld, \"samples\": [",
           ru1->ru_minflt - ru0->ru_minflt, ru1->ru_majflt - ru0->ru_majflt);
    for (size_t i = 0; i < nsamples; i++)
        printf("%s[%ld, %ld]", i ? ", " : "", samples[2 * i], samples[2 * i + 1]);
    printf("]}\n");
}

typedef struct opts {
    const char *lib, *msym, *fsym;
    int reps, touch;
    size_t samples;
} opts_t;

static int parse_opts(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){NULL, NULL, NULL, 5, 1, 200};
    for (int i = 3; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(s, "--no-touch")) {
            o->touch = 0;
            continue;
        }
        if (!v)
            return die("option needs a value", s);
        if (!strcmp(s, "--lib")) o->lib = v;
        else if (!strcmp(s, "--malloc")) o->msym = v;
        else if (!strcmp(s, "--free")) o->fsym = v;
        else if (!strcmp(s, "--repeat")) o->reps = atoi(v);
        else if (!strcmp(s, "--samples")) o->samples = (size_t)atol(v);
        else return die("unknown option", s);
        i++;
    }
    if (o->reps < 1 || o->reps > 1000)
        return die("--repeat must be in 1..1000", NULL);
    return 0;
}

static void reset_hwm(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd >= 0) {
        if (write(fd, "5", 1) != 1)
            fprintf(stderr, "pa_replay: cannot reset the RSS high-water mark\n");
        close(fd);
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    if (argc < 3)
        return die("usage: pa_replay TRACE.bin ALLOCATOR [--lib P --malloc S --free S] "
                   "[--repeat N] [--samples K] [--no-touch]", NULL);
    int rc = parse_opts(argc, argv, &o);
    size_t n = 0, nslots = 0;
    const rec_t *t = rc ? NULL : load(argv[1], &n, &nslots);
    if (rc || (!t && n))
        return rc ? rc : die("cannot read the trace", argv[1]);
    size_t nallocs = 0, nsteps = 0;
    for (size_t i = 0; i < n; i++) {
        nallocs += t[i].kind == 0;
        nsteps += t[i].kind == 2;
    }
    void **slots = (void **)calloc(nslots + 1, sizeof *slots);
    long *samples = (long *)calloc(2 * (o.samples + 2), sizeof *samples);
    double *ns = (double *)calloc((size_t)o.reps, sizeof *ns);
    int statm = open("/proc/self/statm", O_RDONLY);
    alloc_t a = {0};
    if (!slots || !samples || !ns)
        return die("out of memory", NULL);
    if ((rc = open_alloc(&a, argv[2], o.lib, o.msym, o.fsym, nsteps > 0)) != 0)
        return rc;
    /* the memory pass: a fresh heap, every page touched, RSS sampled */
    reset_hwm();
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    long rss0 = status_kb("VmRSS"), anon0 = anon_kb(statm);
    long anon_peak = anon0, anon_warm = anon0;
    probe_t pr = {o.samples ? (n / o.samples) + 1 : 0, nallocs / ANON_SAMPLES + 1, statm,
                  samples, 0, &anon_peak};
    if (replay(&a, t, n, slots, o.touch, &pr) < 0)
        return die("an allocation failed", a.name);
    long hwm = status_kb("VmHWM");
    getrusage(RUSAGE_SELF, &ru1);
    free_live(&a, slots, nslots);
    long rss_end = status_kb("VmRSS"), anon_end = anon_kb(statm);
    /* the warm pass, untimed: the trace run again on the heap the memory
     * pass left (what a loop pays after its first iterations) */
    reset_hwm();
    probe_t warm = {0, pr.anon_every, statm, NULL, 0, &anon_warm};
    if (replay(&a, t, n, slots, o.touch, &warm) < 0)
        return die("an allocation failed", a.name);
    long hwm_warm = status_kb("VmHWM");
    free_live(&a, slots, nslots);
    /* the timing passes */
    probe_t quiet = {0, 1, statm, NULL, 0, NULL};
    for (int r = 0; r < o.reps; r++) {
        ns[r] = replay(&a, t, n, slots, o.touch, &quiet);
        if (ns[r] < 0)
            return die("an allocation failed", a.name);
        free_live(&a, slots, nslots);
    }
    mem_t mem = {rss0, hwm, hwm_warm, rss_end, anon0, anon_peak, anon_warm, anon_end};
    print_json(&a, n, nallocs, ns, o.reps, &mem, &ru0, &ru1, samples, pr.nsamples);
    if (a.pool)
        (void)pa_pool_destroy(a.pool);
    return 0;
}
