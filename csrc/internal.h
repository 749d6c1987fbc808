/* internal.h -- helpers shared by the C core's folders: branch hints,
 * graded debug assertions, power-of-two arithmetic; not installed.  Each
 * folder has its own internal.h for what only its files share
 * (alloc/internal.h includes this one).  Names start with _pa_. */
#ifndef PYARENA_INTERNAL_H
#define PYARENA_INTERNAL_H

#include "pyarena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define pa_likely(x) __builtin_expect(!!(x), 1)
#define pa_unlikely(x) __builtin_expect(!!(x), 0)
/* For the few hot helpers whose callers must not pay a call (alloc/pool.c's
 * fast paths save no registers; alloc/page_heap_ops.h). */
#define PA_HOT static inline __attribute__((always_inline))
#else
#define pa_likely(x) (x)
#define pa_unlikely(x) (x)
#define PA_HOT static inline
#endif

/* Graded debug assertions: PA_DEBUG=1 checks cheap invariants, 2 also the
 * expensive ones.  They never fire in release builds. */
#ifndef PA_DEBUG
#define PA_DEBUG 0
#endif
#if PA_DEBUG > 0
#include <assert.h>
#define pa_assert_internal(x) assert(x)
#else
#define pa_assert_internal(x) ((void)0)
#endif
#if PA_DEBUG > 1
#define pa_assert_expensive(x) assert(x)
#else
#define pa_assert_expensive(x) ((void)0)
#endif

static inline bool _pa_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* Round x up to a multiple of a (a power of two); false on overflow. */
static inline bool _pa_align_up(size_t x, size_t a, size_t *out) {
    if (x > SIZE_MAX - (a - 1)) return false;
    *out = (x + a - 1) & ~(a - 1);
    return true;
}

static inline uintptr_t _pa_align_ptr(uintptr_t x, size_t a) {
    return (x + a - 1) & ~((uintptr_t)a - 1);
}

/* Smallest power of two >= x; 0 on overflow. */
static inline size_t _pa_next_pow2(size_t x) {
    if (x <= 1) return 1;
    if (x > (SIZE_MAX >> 1) + 1) return 0;
    size_t p = 1;
    while (p < x) p <<= 1;
    return p;
}

static inline unsigned _pa_log2_floor(size_t x) {
    return (unsigned)(63 - __builtin_clzll((unsigned long long)x));
}
static inline unsigned _pa_log2_ceil(size_t x) {
    return x <= 1 ? 0 : _pa_log2_floor(x - 1) + 1;
}

#endif /* PYARENA_INTERNAL_H */
