/* test_pool_lock.c -- the work pool's biased lock (csrc/alloc/pool_lock.h):
 * the bias is granted after PA_BIAS_AFTER acquisitions in a row, revoked
 * by another thread (which then waits for the owner to leave), granted
 * again only after more acquisitions; mutual exclusion between an owner
 * entering without the spinlock and threads revoking it all the time; and
 * a pool used by a biased owner while other threads check, read the
 * statistics, free its blocks and fork.  Run under TSan too (make tsan). */
#define _POSIX_C_SOURCE 200809L
#include "alloc/pool_lock.h"
#include "pyarena.h"
#include "../testhelper.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

static void take_and_release(pa_lock_t *l, unsigned times) {
    for (unsigned i = 0; i < times; i++) {
        _pa_lock_acquire(l);
        _pa_lock_release(l);
    }
}

static void *take_once(void *arg) {
    take_and_release(arg, 1);
    return NULL;
}

static int biasing(void) {
    pa_lock_t l;
    _pa_lock_init(&l);
    take_and_release(&l, PA_BIAS_AFTER);
    return atomic_load(&l.owner) != 0;
}

static void test_grant_and_revoke(void) {
    _pa_lock_setup();
    if (!biasing()) { /* no membarrier here: never biased, a plain spinlock */
        printf("skip test_grant_and_revoke: no bias on this system\n");
        return;
    }
    pa_lock_t l;
    _pa_lock_init(&l);
    take_and_release(&l, PA_BIAS_AFTER - 1);
    CHECK_EQ(atomic_load(&l.owner), 0u); /* one acquisition short */
    take_and_release(&l, 1);
    CHECK_EQ(atomic_load(&l.owner), _pa_lock_self());
    CHECK_EQ(atomic_load(&l.bias), _pa_lock_self());
    take_and_release(&l, 100); /* the owner's path: owner_in back to 0 */
    CHECK_EQ(atomic_load(&l.owner_in), 0);
    CHECK_EQ(l.revocations, 0u);

    pthread_t t;
    pthread_create(&t, NULL, take_once, &l); /* another thread revokes */
    pthread_join(t, NULL);
    CHECK_EQ(l.revocations, 1u);
    CHECK_EQ(atomic_load(&l.owner), 0u);
    CHECK_EQ(atomic_load(&l.bias), 0u);
    CHECK_EQ(l.threshold, PA_BIAS_AFTER * PA_BIAS_GROWTH);

    /* granted again only after the longer streak */
    take_and_release(&l, PA_BIAS_AFTER * PA_BIAS_GROWTH - 1);
    CHECK_EQ(atomic_load(&l.owner), 0u);
    take_and_release(&l, 1);
    CHECK_EQ(atomic_load(&l.owner), _pa_lock_self());
    /* the owner's own exclusive take (destroy, fork) drops the bias */
    _pa_lock_exclusive(&l);
    _pa_lock_release_exclusive(&l);
    CHECK_EQ(atomic_load(&l.owner), 0u);
    CHECK_EQ(l.revocations, 2u);
}

/* ---- mutual exclusion: a counter bumped non-atomically in a long section */

typedef struct {
    pa_lock_t l;
    long counter;             /* guarded by l */
    atomic_int done;
    atomic_long taken;        /* the revoker's sections so far */
    long owner_steps;         /* the owner's sections */
} shared_t;

static void section(shared_t *s) {
    long c = s->counter;
    for (volatile int k = 0; k < 40; k++) {
    }
    s->counter = c + 1;
}

#define OWNER_STEPS 300000
#define REVOKER_MIN 64
/* At least OWNER_STEPS sections, and on until the revoker has had
 * REVOKER_MIN of its own: on a loaded machine the owner could otherwise
 * finish before the revoker was ever scheduled, and nothing be revoked. */
static void *owner_thread(void *arg) {
    shared_t *s = arg;
    long i = 0;
    for (; i < OWNER_STEPS || atomic_load(&s->taken) < REVOKER_MIN; i++) {
        _pa_lock_acquire(&s->l);
        section(s);
        _pa_lock_release(&s->l);
    }
    s->owner_steps = i;
    atomic_store(&s->done, 1);
    return NULL;
}

/* Take the lock now and then until the owner is done; keep the threshold
 * low (it is guarded by the spinlock, held here) so the owner is biased
 * and revoked over and over.  The exclusive take: this thread must never
 * be biased itself -- a biased thread enters without the spinlock, and its
 * write of the threshold would race the owner's slow path (seen under
 * TSan on a loaded machine, where the owner sleeps long enough for eight
 * revoker takes in a row). */
static void *revoker_thread(void *arg) {
    shared_t *s = arg;
    long n = 0;
    while (!atomic_load(&s->done)) {
        _pa_lock_exclusive(&s->l);
        section(s);
        s->l.threshold = 8;
        _pa_lock_release_exclusive(&s->l);
        n++;
        atomic_store(&s->taken, n);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return (void *)n;
}

static void test_exclusion(void) {
    shared_t *s = calloc(1, sizeof(*s));
    _pa_lock_init(&s->l);
    atomic_init(&s->done, 0);
    atomic_init(&s->taken, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, owner_thread, s);
    pthread_create(&b, NULL, revoker_thread, s);
    void *n;
    pthread_join(a, NULL);
    pthread_join(b, &n);
    CHECK(s->owner_steps >= OWNER_STEPS && (long)(intptr_t)n >= REVOKER_MIN);
    CHECK_EQ(s->counter, s->owner_steps + (long)(intptr_t)n);
    if (biasing()) CHECK(s->l.revocations > 0);
    printf("     %lu revocations, %ld revoker sections\n", (unsigned long)s->l.revocations,
           (long)(intptr_t)n);
    free(s);
}

/* ---- a pool: a biased owner allocating, writing and freeing at random,
 * others checking, reading statistics, freeing the owner's blocks and
 * forking */

#define SLOTS 256
#define POOL_STEPS 200000

typedef struct {
    pa_pool_t *pool;
    atomic_int done;
    /* blocks handed to the helper thread to free (a one-slot mailbox) */
    _Atomic(unsigned char *) mailbox;
    atomic_long broken;
} pool_shared_t;

static void *pool_owner(void *arg) {
    pool_shared_t *s = arg;
    unsigned char *blk[SLOTS] = {0};
    size_t len[SLOTS];
    unsigned char tag[SLOTS];
    unsigned long long seed = 0x51ED2701A5ull;
    for (int step = 0; step < POOL_STEPS; step++) {
        int i = (int)(pa_rand(&seed) % SLOTS);
        if (blk[i]) {
            for (size_t k = 0; k < len[i]; k += (len[i] > 4096 ? 509 : 7))
                if (blk[i][k] != (unsigned char)(tag[i] + k)) atomic_fetch_add(&s->broken, 1);
            unsigned char *none = NULL;
            if (step % 64 == 0 && atomic_compare_exchange_strong(&s->mailbox, &none, blk[i])) {
                blk[i] = NULL; /* the helper frees it */
                continue;
            }
            if (pa_pool_free(s->pool, blk[i]) != PA_OK) atomic_fetch_add(&s->broken, 1);
            /* a double free is still seen while the (slab) block is cached */
            if (len[i] <= 4096 && step % 97 == 0 && pa_pool_free(s->pool, blk[i]) != PA_ERR_DOUBLE_FREE)
                atomic_fetch_add(&s->broken, 1);
            blk[i] = NULL;
        } else {
            unsigned lg = 6 + (unsigned)(pa_rand(&seed) % 15);
            size_t n = ((size_t)1 << lg) + pa_rand(&seed) % ((size_t)1 << lg);
            blk[i] = pa_pool_alloc(s->pool, n, NULL);
            if (!blk[i]) {
                atomic_fetch_add(&s->broken, 1);
                continue;
            }
            len[i] = n;
            tag[i] = (unsigned char)pa_rand(&seed);
            for (size_t k = 0; k < n; k += (n > 4096 ? 509 : 7))
                blk[i][k] = (unsigned char)(tag[i] + k);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (blk[i] && pa_pool_free(s->pool, blk[i]) != PA_OK) atomic_fetch_add(&s->broken, 1);
    atomic_store(&s->done, 1);
    return NULL;
}

static void *pool_helper(void *arg) {
    pool_shared_t *s = arg;
    unsigned rounds = 0;
    for (;;) {
        int done = atomic_load(&s->done);
        unsigned char *b = atomic_exchange(&s->mailbox, NULL);
        if (b && pa_pool_free(s->pool, b) != PA_OK) atomic_fetch_add(&s->broken, 1);
        if (done && !b) break;
        pa_pool_stats_t st;
        pa_pool_stats(s->pool, &st);
        if (st.allocated + st.cached > st.reserved || st.requested > st.allocated)
            atomic_fetch_add(&s->broken, 1);
        if (rounds % 8 == 0) atomic_fetch_add(&s->broken, (long)pa_pool_check(s->pool));
        if (rounds % 200 == 100) {
            pid_t pid = fork();
            if (pid == 0) { /* the child: the pool is unlocked and usable */
                void *q = pa_pool_alloc(s->pool, 100, NULL);
                int ok = q && pa_pool_free(s->pool, q) == PA_OK && pa_pool_check(s->pool) == 0;
                _exit(ok ? 0 : 1);
            }
            int wst = 0;
            if (pid < 0 || waitpid(pid, &wst, 0) != pid || !WIFEXITED(wst) ||
                WEXITSTATUS(wst) != 0)
                atomic_fetch_add(&s->broken, 1);
        }
        rounds++;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_pool_biased_owner(void) {
    pool_shared_t s;
    s.pool = pa_pool_create(NULL, NULL);
    CHECK(s.pool != NULL);
    atomic_init(&s.done, 0);
    atomic_init(&s.mailbox, NULL);
    atomic_init(&s.broken, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, pool_owner, &s);
    pthread_create(&b, NULL, pool_helper, &s);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ(atomic_load(&s.broken), 0);
    pa_pool_stats_t st;
    CHECK_EQ(pa_pool_stats(s.pool, &st), PA_OK);
    CHECK_EQ(st.live, 0u);
    CHECK_EQ(st.requested, 0u);
    CHECK_EQ(st.allocated, 0u);
    CHECK_EQ(st.allocs, st.frees);
    CHECK_EQ(pa_pool_check(s.pool), 0u);
    CHECK_EQ(pa_pool_destroy(s.pool), PA_OK);
}

int main(void) {
    RUN(test_grant_and_revoke);
    RUN(test_exclusion);
    RUN(test_pool_biased_owner);
    return pa_test_report();
}
