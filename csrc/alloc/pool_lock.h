/* alloc/pool_lock.h -- the work pool's lock: a test-and-set spinlock, biased to
 * the thread that keeps taking it (pool_lock.c).  Not installed; names
 * start with _pa_.
 *
 * The lock guards everything reachable from a pool handle
 * (pool_internal.h).  Taking the spinlock is an atomic exchange, and on
 * x86 an atomic read-modify-write waits until every store before it has
 * left the store buffer -- on random traffic those are the caller's writes
 * to the block it just got, cache misses: ~16 % of the pool's time per
 * alloc+free pair on the log-uniform trace (docs/pool.md, "Random traffic:
 * a biased lock").  So the lock is *biased*: once one thread has taken it
 * PA_BIAS_AFTER times in a row, that thread (the owner) enters with plain
 * stores and loads, and any other thread first revokes the bias:
 *
 *   owner:   owner_in = 1; [compiler barrier]; if bias == me: inside
 *            ... ; owner_in = 0 (release)
 *   other:   take the spinlock; bias = 0; membarrier(); wait until
 *            owner_in == 0; inside ...; release the spinlock
 *
 * (an asymmetric Dekker handshake).  membarrier(PRIVATE_EXPEDITED) makes
 * every running thread of the process execute a full memory barrier, so
 * either the owner's `owner_in = 1` is visible to the revoker, which then
 * waits, or the owner's load of `bias` comes after the barrier and sees 0,
 * and it takes the spinlock like everyone else.  A revoked bias is
 * granted again only after PA_BIAS_GROWTH times more acquisitions in a row
 * (up to PA_BIAS_MAX), so threads taking turns pay a membarrier rarely.
 * Without membarrier (not Linux, or refused) no bias is ever granted.
 * Under ThreadSanitizer (which does not model membarrier) the owner's
 * store and load and the revoker's are sequentially consistent instead,
 * which gives the same handshake with an atomic exchange: the bias logic
 * runs there too.  fork(): the prepare handler takes every pool with
 * _pa_lock_exclusive (spinlock taken, bias revoked), so the child finds no
 * owner and no holder.  Exclusion is the only thing changed: the pool's
 * checks and statistics see one serialised history either way. */
#ifndef PA_POOL_LOCK_H
#define PA_POOL_LOCK_H

#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define PA_LOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PA_LOCK_TSAN 1
#endif
#endif

#define PA_BIAS_AFTER 1024u      /* acquisitions in a row before a bias   */
#define PA_BIAS_GROWTH 4u        /* ...times more after each revocation   */
#define PA_BIAS_MAX (1u << 24)

typedef struct pa_lock {
    atomic_int v;             /* the spinlock: 1 while a non-owner holds it */
    atomic_int owner_in;      /* 1 while the owner is (maybe) inside      */
    atomic_uintptr_t bias;    /* the thread that may enter without v; 0   */
    atomic_uintptr_t owner;   /* that thread until its revocation ends    */
    /* guarded by v: who took v last, how many times in a row, and how
       many it takes to be granted the bias */
    uintptr_t last;
    uint32_t streak, threshold;
    uint64_t revocations;     /* biases revoked (for the tests)           */
} pa_lock_t;

/* Once per process (and in a fork child): may biases be granted? */
void _pa_lock_setup(void);
void _pa_lock_init(pa_lock_t *l);
/* The slow halves of _pa_lock_acquire / _pa_lock_release. */
void _pa_lock_acquire_slow(pa_lock_t *l, uintptr_t me);
void _pa_lock_release_slow(pa_lock_t *l, uintptr_t me);
/* Take the spinlock and revoke any bias (fork, destroy): release with
 * _pa_lock_release_exclusive. */
void _pa_lock_exclusive(pa_lock_t *l);
void _pa_lock_release_exclusive(pa_lock_t *l);

/* This thread's token: the address of a thread-local byte (pool_lock.c),
 * unique among live threads, never 0.  A thread that exits while biased
 * leaves its token in `bias` (and owner_in 0); a later thread given the
 * same thread-local block enters as the owner, which is safe: the only
 * holder since the bias was granted was the dead thread, whose writes
 * reach the new one through the C library before the block is handed out
 * again (the thread stack cache's lock, the kernel clearing the dead
 * thread's id, or malloc's lock for a dynamically loaded library's
 * thread-local block). */
extern _Thread_local char _pa_lock_anchor __attribute__((visibility("hidden")));
/* The calling thread's token.  On Linux the thread pointer (x86-64:
 * %fs:0, which holds itself; AArch64: TPIDR_EL0) is one register read,
 * where the address of a thread-local variable in a shared library (how
 * Python loads this one) is a call to __tls_get_addr -- a call makes the
 * lock's callers save registers on every entry. */
static inline uintptr_t _pa_lock_self(void) {
#if defined(__linux__) && defined(__x86_64__)
    uintptr_t t;
    __asm__("mov %%fs:0, %0" : "=r"(t));
    return t;
#elif defined(__linux__) && defined(__aarch64__)
    uintptr_t t;
    __asm__("mrs %0, tpidr_el0" : "=r"(t));
    return t;
#else
    return (uintptr_t)&_pa_lock_anchor;
#endif
}

/* Enter as the biased owner: 1 if in (release with _pa_lock_release), 0
 * if this thread holds no bias (nothing taken then). */
static inline int _pa_lock_enter_biased(pa_lock_t *l) {
    uintptr_t me = _pa_lock_self();
    if (atomic_load_explicit(&l->bias, memory_order_relaxed) != me) return 0;
#ifdef PA_LOCK_TSAN
    atomic_store_explicit(&l->owner_in, 1, memory_order_seq_cst);
    if (pa_likely(atomic_load_explicit(&l->bias, memory_order_seq_cst) == me)) return 1;
#else
    atomic_store_explicit(&l->owner_in, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the revoker's membarrier does the rest */
    if (pa_likely(atomic_load_explicit(&l->bias, memory_order_relaxed) == me)) return 1;
#endif
    atomic_store_explicit(&l->owner_in, 0, memory_order_release); /* revoked */
    return 0;
}

/* Leave after _pa_lock_enter_biased returned 1 (the bias cannot move
 * while its owner is in: a revoker waits for owner_in to drop). */
static inline void _pa_lock_leave_biased(pa_lock_t *l) {
    atomic_store_explicit(&l->owner_in, 0, memory_order_release);
}

static inline void _pa_lock_acquire(pa_lock_t *l) {
    if (!_pa_lock_enter_biased(l)) _pa_lock_acquire_slow(l, _pa_lock_self());
}

static inline void _pa_lock_release(pa_lock_t *l) {
    uintptr_t me = _pa_lock_self();
    if (pa_likely(atomic_load_explicit(&l->owner, memory_order_relaxed) == me)) {
        atomic_store_explicit(&l->owner_in, 0, memory_order_release);
        return;
    }
    _pa_lock_release_slow(l, me);
}

#endif /* PA_POOL_LOCK_H */
