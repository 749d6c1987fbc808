/* kernels/workers.c -- a small fixed pool of threads for the native kernels.
 *
 * One inference runs dozens of short kernels back to back, so a thread per
 * call (tens of microseconds to create and join) would cost more than many
 * kernels take.  The pool starts its threads once; a call publishes the
 * job (function, context, item count) and bumps a generation counter.
 * The items are cut into a few chunks per thread (PA_CHUNKS_PER_THREAD),
 * and every thread -- the caller too -- claims chunks one at a time until
 * none is left, then the caller waits for the chunks others claimed to
 * finish.  A helper the system has not scheduled yet claims nothing: the
 * caller runs its share instead of waiting a time slice for it (with one
 * fixed part per thread, a 2-thread session on two busy cores took 60x its
 * 1-thread time).  A claim is one compare-and-swap of a ticket holding the
 * job's number, the next chunk and the chunk count, so a helper that wakes
 * late cannot claim a chunk of another job than the one it read.  Helpers
 * and the waiting caller spin for a short while before sleeping on a
 * condition variable: the next kernel usually follows within microseconds,
 * and a wake-up from sleep costs more than that.
 */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PA_MAX_THREADS 256
/* Spin budget before sleeping, in pause rounds (about 50 us), yielding the
 * core every PA_YIELD_EVERY rounds.  A helper spinning with pause alone
 * kept its core from the threads that had work between two native kernels
 * (BLAS's own threads running a 1x1 convolution): MobileNetV2 at 224 with
 * BLAS and the native kernels both on 2 threads (2 cores) took 47 ms with
 * 20000 pure pause rounds, 12 ms with these (1 thread: 14 ms). */
#define PA_SPIN_ROUNDS 2048
#define PA_YIELD_EVERY 64
/* Chunks per thread a job is cut into (at most one per item). */
#define PA_CHUNKS_PER_THREAD 4
#define PA_MAX_CHUNKS 0xFFFF

struct pa_workers {
    int n;                      /* threads in all, the caller included    */
    int started;                /* helper threads created                 */
    pthread_t *threads;
    pthread_mutex_t lock;       /* guards the two condition variables     */
    pthread_cond_t wake, done;
    _Atomic uint64_t generation;  /* bumped per job (release), read with acquire */
    /* job number (32 bits, the generation's low half) | next chunk (16) |
     * chunks (16): claimed by compare-and-swap */
    _Atomic uint64_t ticket;
    _Atomic int64_t left;       /* chunks of the current job not finished */
    _Atomic int stop;           /* set once by destroy                    */
    /* the job: written by the caller before the ticket is published */
    _pa_task_fn fn;
    void *ctx;
    int64_t total;
};

typedef struct {
    pa_workers_t *w;
    int index;
} pa_helper_arg_t;

static void pa_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* One round of waiting: pause, and every PA_YIELD_EVERY rounds give the
 * core to another runnable thread. */
static void pa_spin_wait(int round) {
    if (round % PA_YIELD_EVERY == PA_YIELD_EVERY - 1)
        sched_yield();
    else
        pa_cpu_relax();
}

/* Claim the next chunk of job `job`: 1 and its index and the chunk count,
 * or 0 when the job has none left (or is not the current one). */
static int claim(pa_workers_t *w, uint32_t job, int64_t *chunk, int64_t *chunks) {
    uint64_t t = atomic_load_explicit(&w->ticket, memory_order_acquire);
    for (;;) {
        uint64_t next = (t >> 16) & 0xFFFF, n = t & 0xFFFF;
        if ((uint32_t)(t >> 32) != job || next >= n)
            return 0;
        if (atomic_compare_exchange_weak_explicit(&w->ticket, &t, t + ((uint64_t)1 << 16),
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *chunk = (int64_t)next;
            *chunks = (int64_t)n;
            return 1;
        }
    }
}

/* Run chunks of job `job` until none is left to claim; the thread that
 * finishes the last one wakes the caller. */
static void run_chunks(pa_workers_t *w, uint32_t job) {
    int64_t c, n;
    while (claim(w, job, &c, &n)) {
        int64_t b = w->total * c / n, e = w->total * (c + 1) / n;
        if (b < e)
            w->fn(w->ctx, b, e);
        if (atomic_fetch_sub_explicit(&w->left, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&w->lock);
            pthread_cond_signal(&w->done);
            pthread_mutex_unlock(&w->lock);
        }
    }
}

static void *helper_main(void *p) {
    pa_helper_arg_t arg = *(pa_helper_arg_t *)p;
    free(p);
    pa_workers_t *w = arg.w;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load_explicit(&w->generation, memory_order_acquire);
        for (int i = 0; g == seen && i < PA_SPIN_ROUNDS; i++) {
            pa_spin_wait(i);
            g = atomic_load_explicit(&w->generation, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&w->lock);
            while ((g = atomic_load_explicit(&w->generation, memory_order_acquire)) == seen &&
                   !atomic_load(&w->stop))
                pthread_cond_wait(&w->wake, &w->lock);
            pthread_mutex_unlock(&w->lock);
        }
        if (atomic_load(&w->stop))
            return NULL;
        seen = g;
        run_chunks(w, (uint32_t)g);
    }
}

pa_workers_t *pa_workers_create(int nthreads, pa_status_t *status) {
    pa_status_t st = PA_OK;
    pa_workers_t *w = NULL;
    if (nthreads < 1 || nthreads > PA_MAX_THREADS) {
        st = PA_ERR_INVALID;
        goto out;
    }
    w = calloc(1, sizeof *w);
    if (!w || !(w->threads = calloc((size_t)nthreads, sizeof *w->threads))) {
        free(w);
        w = NULL;
        st = PA_ERR_NOMEM;
        goto out;
    }
    w->n = nthreads;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->done, NULL);
    for (int i = 1; i < nthreads; i++) {
        pa_helper_arg_t *arg = malloc(sizeof *arg);
        if (arg) {
            arg->w = w;
            arg->index = i;
        }
        if (!arg || pthread_create(&w->threads[i], NULL, helper_main, arg) != 0) {
            free(arg);
            pa_workers_destroy(w);
            w = NULL;
            st = PA_ERR_NOMEM;
            goto out;
        }
        w->started = i;
    }
out:
    if (status)
        *status = st;
    return w;
}

pa_status_t pa_workers_destroy(pa_workers_t *w) {
    if (!w)
        return PA_ERR_INVALID;
    pthread_mutex_lock(&w->lock);
    atomic_store(&w->stop, 1);
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (int i = 1; i <= w->started; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->lock);
    free(w->threads);
    free(w);
    return PA_OK;
}

int pa_workers_count(const pa_workers_t *w) { return w ? w->n : 1; }

/* Below this much work per call the pool stays asleep. */
#define PA_PARALLEL_MIN_WORK 100000.0

pa_workers_t *_pa_workers_for(pa_workers_t *w, double work) {
    return (w && w->n > 1 && work >= PA_PARALLEL_MIN_WORK) ? w : NULL;
}

void _pa_parallel(pa_workers_t *w, int64_t n, _pa_task_fn fn, void *ctx) {
    if (n <= 0)
        return;
    if (!w || w->n == 1 || n == 1) {
        fn(ctx, 0, n);
        return;
    }
    int64_t chunks = (int64_t)w->n * PA_CHUNKS_PER_THREAD;
    if (chunks > n)
        chunks = n;
    if (chunks > PA_MAX_CHUNKS)
        chunks = PA_MAX_CHUNKS;
    w->fn = fn;
    w->ctx = ctx;
    w->total = n;
    atomic_store_explicit(&w->left, chunks, memory_order_relaxed);
    /* the job's number: the generation it is published under (low half) */
    uint64_t g = atomic_load_explicit(&w->generation, memory_order_relaxed) + 1;
    uint32_t job = (uint32_t)g;
    atomic_store_explicit(&w->ticket, ((uint64_t)job << 32) | (uint64_t)chunks,
                          memory_order_release);
    pthread_mutex_lock(&w->lock);
    atomic_store_explicit(&w->generation, g, memory_order_release);
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    run_chunks(w, job);
    for (int i = 0; atomic_load_explicit(&w->left, memory_order_acquire) > 0 &&
                    i < PA_SPIN_ROUNDS; i++)
        pa_spin_wait(i);
    if (atomic_load_explicit(&w->left, memory_order_acquire) > 0) {
        pthread_mutex_lock(&w->lock);
        while (atomic_load_explicit(&w->left, memory_order_acquire) > 0)
            pthread_cond_wait(&w->done, &w->lock);
        pthread_mutex_unlock(&w->lock);
    }
}
