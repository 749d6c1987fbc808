/* alloc/os.c -- the default OS-memory backend: mmap, munmap and madvise.
 *
 * Allocators never call the OS directly; they go through a pa_backend_t so
 * that an embedding runtime can hand in its own memory and tests can force
 * failures.  Alignments above the page size are met by over-mapping and
 * trimming the ends, so the whole range given back is exactly what the
 * caller asked for and munmap needs no bookkeeping. */
#define _DEFAULT_SOURCE
#include "internal.h"

#include <sys/mman.h>
#if defined(__linux__) && !defined(MADV_COLLAPSE)
#define MADV_COLLAPSE 25 /* Linux 6.1; older kernels answer EINVAL */
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static void *os_map(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (size == 0) return NULL;
    if (align <= PA_PAGE_SIZE) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    if (size > SIZE_MAX - align) return NULL;
    size_t span = size + align;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)_pa_align_ptr((uintptr_t)raw, align);
    size_t head = (size_t)(p - raw);
    size_t tail = span - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap(p + size, tail);
    return p;
}

static void os_unmap(void *p, size_t size, void *ctx) {
    (void)ctx;
    if (p) munmap(p, size);
}

static int os_decommit(void *p, size_t size, void *ctx) {
    (void)ctx;
    return madvise(p, size, MADV_DONTNEED);
}

static const pa_backend_t os_backend = {os_map, os_unmap, os_decommit, NULL};

const pa_backend_t *pa_backend_default(void) { return &os_backend; }

int _pa_backend_is_default(const pa_backend_t *b) {
    return b->map == os_map && b->unmap == os_unmap && b->decommit == os_decommit;
}

void *_pa_os_reserve(size_t size) {
    /* Address space only: PROT_NONE + MAP_NORESERVE takes no commit
     * charge (even under strict overcommit) and no memory; _pa_os_commit
     * makes parts usable.  Released with the default backend's unmap.
     * Aligned to PA_HUGE_SIZE (over-reserved, the ends trimmed) so that
     * its huge-page segments (_pa_os_huge) start at its base. */
    if (size == 0 || size % PA_PAGE_SIZE || size > SIZE_MAX - PA_HUGE_SIZE) return NULL;
    size_t span = size + PA_HUGE_SIZE;
    char *raw = mmap(NULL, span, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)_pa_align_ptr((uintptr_t)raw, PA_HUGE_SIZE);
    size_t head = (size_t)(p - raw), tail = span - head - size;
    if (head) munmap(raw, head);
    if (tail) munmap(p + size, tail);
    return p;
}

int _pa_os_huge(void *p, size_t size, int collapse) {
#if defined(MADV_HUGEPAGE) && defined(MADV_COLLAPSE)
    return madvise(p, size, collapse ? MADV_COLLAPSE : MADV_HUGEPAGE);
#else
    (void)p;
    (void)size;
    (void)collapse;
    return -1;
#endif
}

int _pa_os_commit(void *p, size_t size, int commit) {
    if (commit) return mprotect(p, size, PROT_READ | PROT_WRITE);
    /* drop the pages (they read back as zeros once committed again) and
     * the commit charge */
    if (madvise(p, size, MADV_DONTNEED) != 0) return -1;
    return mprotect(p, size, PROT_NONE);
}

void *_pa_backend_map(const pa_backend_t *b, size_t size, size_t align) {
    if (align < PA_PAGE_SIZE) align = PA_PAGE_SIZE;
    size_t rounded;
    if (!_pa_align_up(size, PA_PAGE_SIZE, &rounded)) return NULL;
    void *p = b->map(rounded, align, b->ctx);
    if (p && ((uintptr_t)p & (align - 1)) != 0) {
        /* A backend that ignores the alignment is a bug in the embedder;
         * refuse the memory rather than hand out misaligned blocks. */
        b->unmap(p, rounded, b->ctx);
        return NULL;
    }
    return p;
}

void _pa_backend_unmap(const pa_backend_t *b, void *p, size_t size) {
    size_t rounded;
    if (!p || !_pa_align_up(size, PA_PAGE_SIZE, &rounded)) return;
    b->unmap(p, rounded, b->ctx);
}

int pa_heap_trim(void) {
#if defined(__GLIBC__)
    return malloc_trim(0) ? 1 : 0;
#else
    return 0;
#endif
}
