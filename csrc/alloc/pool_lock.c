/* alloc/pool_lock.c -- the slow halves of the work pool's biased lock
 * (pool_lock.h: the design and the handshake). */
#define _GNU_SOURCE
#include "pool_lock.h"

#include <sched.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MEMBARRIER_PRIVATE_EXPEDITED (1 << 3)          /* linux/membarrier.h */
#define MEMBARRIER_REGISTER_PRIVATE_EXPEDITED (1 << 4)

/* Nonzero once biases may be granted: membarrier is registered (or the
 * handshake is sequentially consistent, under ThreadSanitizer).  Written by
 * _pa_lock_setup (once, and in a fork child), read under a pool's v. */
static atomic_int bias_enabled;

_Thread_local char _pa_lock_anchor;

static int membarrier_call(int cmd) {
#if defined(__linux__) && defined(SYS_membarrier)
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    return -1;
#endif
}

void _pa_lock_setup(void) {
    int ok = membarrier_call(MEMBARRIER_REGISTER_PRIVATE_EXPEDITED) == 0;
#ifdef PA_LOCK_TSAN
    ok = 1;
#endif
    atomic_store_explicit(&bias_enabled, ok, memory_order_relaxed);
}

void _pa_lock_init(pa_lock_t *l) {
    atomic_init(&l->v, 0);
    atomic_init(&l->owner_in, 0);
    atomic_init(&l->bias, 0);
    atomic_init(&l->owner, 0);
    l->last = 0;
    l->streak = 0;
    l->threshold = PA_BIAS_AFTER;
    l->revocations = 0;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin briefly with `pause`, then yield the CPU: a preempted holder on an
 * oversubscribed machine does not burn the waiters' time slices. */
static void backoff(unsigned *n) {
    if (++*n < 100) cpu_relax();
    else sched_yield();
}

static void spin_lock(pa_lock_t *l) {
    if (pa_likely(!atomic_exchange_explicit(&l->v, 1, memory_order_acquire))) return;
    unsigned n = 0;
    for (;;) {
        while (atomic_load_explicit(&l->v, memory_order_relaxed)) backoff(&n);
        if (!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)) return;
    }
}

/* With v held: take the bias away from its owner and wait until the owner
 * is out (pool_lock.h).  No barrier when the owner is the caller: it is
 * not inside. */
static void revoke_bias(pa_lock_t *l, uintptr_t me) {
    uintptr_t o = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (!o) return;
    atomic_store_explicit(&l->bias, 0, memory_order_seq_cst);
    if (o != me) {
#ifndef PA_LOCK_TSAN
        /* registered when the bias was granted: it does not fail then */
        membarrier_call(MEMBARRIER_PRIVATE_EXPEDITED);
#endif
        unsigned n = 0;
        while (atomic_load_explicit(&l->owner_in, memory_order_seq_cst)) backoff(&n);
    }
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    l->revocations++;
    l->streak = 0;
    if (l->threshold < PA_BIAS_MAX) l->threshold *= PA_BIAS_GROWTH;
}

void _pa_lock_acquire_slow(pa_lock_t *l, uintptr_t me) {
    spin_lock(l);
    revoke_bias(l, me);
}

/* Release v; grant the bias to a thread that took v `threshold` times in
 * a row. */
void _pa_lock_release_slow(pa_lock_t *l, uintptr_t me) {
    if (l->last != me) {
        l->last = me;
        l->streak = 0;
    }
    if (++l->streak >= l->threshold &&
        atomic_load_explicit(&bias_enabled, memory_order_relaxed)) {
        l->streak = 0;
        atomic_store_explicit(&l->owner, me, memory_order_relaxed);
        atomic_store_explicit(&l->bias, me, memory_order_relaxed);
    }
    atomic_store_explicit(&l->v, 0, memory_order_release);
}

void _pa_lock_exclusive(pa_lock_t *l) {
    spin_lock(l);
    revoke_bias(l, _pa_lock_self());
}

void _pa_lock_release_exclusive(pa_lock_t *l) {
    atomic_store_explicit(&l->v, 0, memory_order_release);
}
