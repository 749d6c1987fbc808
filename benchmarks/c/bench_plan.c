/* bench_plan.c -- benchmarks the static planner core (no Python).
 *
 *   bench_plan [-t SECONDS] [-b] [-s] [-q] [FILE.csv ...]
 *
 * For each MiniMalloc CSV (`id,lower,upper,size`, upper exclusive; the
 * capacity is the number before ".csv" in the file name, else 1 MiB) it
 * prints n, the lower bound, the arenas of first fit / greedy by size /
 * greedy by breadth, the EXACT result within the capacity (-t seconds,
 * default 60), whether it fits, and the seconds spent; -b adds a column
 * for BEST (minimise, same time limit).  Every plan is re-checked with an
 * independent O(n^2) validator.  Then (unless -q) a scaling table: random
 * network-like instances of 1,000 / 10,000 / 100,000 buffers, median ms
 * (CPU time) per heuristic.  -s prints only the scaling table. */
#define _POSIX_C_SOURCE 200809L
#include "pyarena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of this process: robust when other jobs share the cores */
static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t pad(uint64_t s, uint64_t a) { return (s + a - 1) / a * a; }

/* 1 if no two lifetime-overlapping buffers overlap in bytes and all
 * offsets are aligned and the arena is right. */
static int valid(const pa_plan_buffer_t *b, size_t n, uint64_t align,
                 uint64_t arena) {
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i].offset % align) return 0;
        uint64_t e = b[i].offset + pad(b[i].size, align);
        if (e > top) top = e;
        for (size_t j = i + 1; j < n; j++) {
            if (b[i].last < b[j].first || b[j].last < b[i].first) continue;
            uint64_t f = b[j].offset + pad(b[j].size, align);
            if (b[i].offset < f && b[j].offset < e) return 0;
        }
    }
    return top == arena;
}

static pa_plan_buffer_t *read_csv(const char *path, size_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 256, k = 0;
    pa_plan_buffer_t *b = malloc(cap * sizeof(*b));
    char line[512];
    while (b && fgets(line, sizeof line, f)) {
        long long id, lo, up;
        unsigned long long sz;
        if (sscanf(line, "%lld,%lld,%lld,%llu", &id, &lo, &up, &sz) != 4)
            continue; /* the header */
        if (k == cap) {
            cap *= 2;
            pa_plan_buffer_t *nb = realloc(b, cap * sizeof(*b));
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
        }
        b[k++] = (pa_plan_buffer_t){(uint64_t)sz, lo, up - 1, 0};
    }
    fclose(f);
    *n = k;
    return b;
}

static uint64_t capacity_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot) return 1048576;
    const char *p = dot;
    while (p > path && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == dot || p == path || p[-1] != '.') return 1048576;
    return strtoull(p, NULL, 10);
}

static double last_cpu; /* CPU seconds of the last run_one */

static int run_one(pa_plan_buffer_t *b, size_t n, pa_plan_strategy_t s,
                   uint64_t cap, double tl, pa_plan_result_t *r,
                   pa_status_t *stp) {
    pa_plan_options_t o;
    pa_plan_options_default(&o);
    o.strategy = s;
    o.alignment = 1;
    o.capacity = cap;
    o.time_limit = tl;
    double t0 = now(), c0 = cpu();
    pa_status_t st = pa_plan_assign(b, n, &o, r);
    r->seconds = now() - t0;
    last_cpu = cpu() - c0;
    *stp = st;
    if (st != PA_OK) return 1;
    if (!valid(b, n, 1, r->arena_bytes)) {
        printf("  INVALID PLAN (strategy %d)\n", (int)s);
        return 0;
    }
    return 1;
}

static void instances(int argc, char **argv, double tl, int with_best) {
    printf("MiniMalloc instances (alignment 1), EXACT within the capacity, "
           "time limit %.0f s\n", tl);
    printf("%-16s %5s %9s %9s %9s %9s %9s %5s %8s %8s", "instance", "n", "lower",
           "first-fit", "gr-size", "gr-bread", "exact", "fits", "wall s", "cpu s");
    if (with_best) printf(" %9s %5s %8s", "best", "opt", "wall s");
    printf("\n");
    double total = 0, total_cpu = 0, total_best = 0;
    int fitted = 0, count = 0;
    for (int a = 0; a < argc; a++) {
        size_t n;
        pa_plan_buffer_t *b = read_csv(argv[a], &n);
        if (!b) {
            printf("%s: cannot read\n", argv[a]);
            continue;
        }
        uint64_t cap = capacity_of(argv[a]);
        pa_plan_result_t r[3], re, rb;
        pa_status_t st;
        for (int s = 0; s < 3; s++)
            run_one(b, n, (pa_plan_strategy_t)s, 0, tl, &r[s], &st);
        run_one(b, n, PA_PLAN_EXACT, cap, tl, &re, &st);
        double ecpu = last_cpu;
        const char *name = strrchr(argv[a], '/');
        name = name ? name + 1 : argv[a];
        int fit = st == PA_OK && re.arena_bytes <= cap;
        char ex[32];
        if (st == PA_OK) snprintf(ex, sizeof ex, "%llu", (unsigned long long)re.arena_bytes);
        else snprintf(ex, sizeof ex, "%s", st == PA_ERR_TIMEOUT ? "timeout" : "infeas");
        printf("%-16s %5zu %9llu %9llu %9llu %9llu %9s %5s %8.2f %8.2f", name, n,
               (unsigned long long)r[0].lower_bound,
               (unsigned long long)r[0].arena_bytes,
               (unsigned long long)r[1].arena_bytes,
               (unsigned long long)r[2].arena_bytes, ex, fit ? "yes" : "NO",
               re.seconds, ecpu);
        total += re.seconds;
        total_cpu += ecpu;
        fitted += fit;
        count++;
        if (with_best) {
            run_one(b, n, PA_PLAN_BEST, 0, tl, &rb, &st);
            printf(" %9llu %5s %8.2f", (unsigned long long)rb.arena_bytes,
                   rb.optimal ? "yes" : "no", rb.seconds);
            total_best += rb.seconds;
        }
        printf("\n");
        fflush(stdout);
        free(b);
    }
    printf("fitted %d of %d, exact total %.1f s wall, %.1f s cpu", fitted, count,
           total, total_cpu);
    if (with_best) printf(", best total %.1f s", total_best);
    printf("\n\n");
}

/* Network-like random lifetimes: most buffers live 1-4 steps, some up to
 * 64 (skip connections), 1% up to n/20; sizes log-uniform 64 B .. 4 MiB. */
static void random_instance(pa_plan_buffer_t *b, size_t n, unsigned long long seed) {
    unsigned long long s = seed * 2654435761ULL + 1;
#define RND() (s ^= s >> 12, s ^= s << 25, s ^= s >> 27, s * 2685821657736338717ULL)
    for (size_t i = 0; i < n; i++) {
        unsigned long long r = RND() % 100, len;
        if (r < 85) len = 1 + RND() % 4;
        else if (r < 99) len = 1 + RND() % 64;
        else len = 1 + RND() % (n / 20 + 1);
        int64_t first = (int64_t)(RND() % n);
        unsigned long long sz = 64ULL << (RND() % 17);
        sz += RND() % sz;
        b[i] = (pa_plan_buffer_t){sz, first, first + (int64_t)len - 1, 0};
    }
#undef RND
}

static int cmpd(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void scaling(void) {
    static const size_t sizes[3] = {1000, 10000, 100000};
    static const int reps[3] = {11, 5, 3};
    static const char *names[3] = {"first-fit", "greedy-by-size", "greedy-by-breadth"};
    printf("Scaling: random network-like instances, alignment 64, median CPU ms "
           "of pa_plan_assign (arena / lower bound)\n");
    printf("%-18s %18s %18s %18s\n", "heuristic", "1,000", "10,000", "100,000");
    double ms[3][3], ratio[3][3];
    for (int k = 0; k < 3; k++) {
        size_t n = sizes[k];
        pa_plan_buffer_t *b = malloc(n * sizeof(*b));
        if (!b) return;
        random_instance(b, n, 42 + k);
        uint64_t lb = pa_plan_lower_bound(b, n, 64);
        for (int s = 0; s < 3; s++) {
            double t[16];
            pa_plan_result_t r;
            for (int i = 0; i < reps[k]; i++) {
                pa_plan_options_t o;
                pa_plan_options_default(&o);
                o.strategy = (pa_plan_strategy_t)s;
                double t0 = cpu();
                pa_status_t st = pa_plan_assign(b, n, &o, &r);
                t[i] = 1e3 * (cpu() - t0);
                if (st != PA_OK) printf("error %d\n", (int)st);
            }
            qsort(t, (size_t)reps[k], sizeof(double), cmpd);
            ms[s][k] = t[reps[k] / 2];
            ratio[s][k] = (double)r.arena_bytes / (double)lb;
            if (n <= 10000 && !valid(b, n, 64, r.arena_bytes))
                printf("INVALID plan: %s n=%zu\n", names[s], n);
        }
        free(b);
    }
    for (int s = 0; s < 3; s++) {
        printf("%-18s", names[s]);
        for (int k = 0; k < 3; k++) printf(" %9.2f (%5.3f)", ms[s][k], ratio[s][k]);
        printf("\n");
    }
    /* dense: lifetimes up to n/2 steps, so each overlaps a large fraction of
     * the others; BEST then keeps to first fit (the greedy ones are
     * quadratic in the overlapping pairs) */
    printf("\nDense: 100,000 buffers, lifetimes up to 50,000 steps, CPU ms\n");
    size_t n = 100000;
    pa_plan_buffer_t *b = malloc(n * sizeof(*b));
    if (!b) return;
    unsigned long long s = 7;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        unsigned long long r = s * 2685821657736338717ULL;
        int64_t first = (int64_t)(r % n);
        b[i] = (pa_plan_buffer_t){64 + (r >> 40) % 100000, first,
                                  first + (int64_t)((r >> 20) % (n / 2)), 0};
    }
    uint64_t lb = pa_plan_lower_bound(b, n, 64);
    static const pa_plan_strategy_t ds[2] = {PA_PLAN_FIRST_FIT, PA_PLAN_BEST};
    for (int k = 0; k < 2; k++) {
        pa_plan_options_t o;
        pa_plan_options_default(&o);
        o.strategy = ds[k];
        pa_plan_result_t r;
        double t0 = cpu();
        pa_status_t st = pa_plan_assign(b, n, &o, &r);
        printf("%-18s %9.2f (%5.3f)%s\n", k ? "best" : "first-fit",
               1e3 * (cpu() - t0), (double)r.arena_bytes / (double)lb,
               st == PA_OK ? "" : " error");
    }
    free(b);
}

int main(int argc, char **argv) {
    double tl = 60.0;
    int with_best = 0, quick = 0, only_scaling = 0, a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "-t") && a + 1 < argc) tl = atof(argv[++a]);
        else if (!strcmp(argv[a], "-b")) with_best = 1;
        else if (!strcmp(argv[a], "-q")) quick = 1;
        else if (!strcmp(argv[a], "-s")) only_scaling = 1;
        else {
            fprintf(stderr, "usage: %s [-t SECONDS] [-b] [-q] [-s] [FILE.csv ...]\n", argv[0]);
            return 2;
        }
    }
    if (!only_scaling && a < argc) instances(argc - a, argv + a, tl, with_best);
    if (!quick) scaling();
    return 0;
}
