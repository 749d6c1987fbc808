/* alloc/internal.h -- what the allocators' files (the arena and the work
 * pool's layers) share: the page size and the OS layer; not installed.
 * Grouped by the file that defines them.  Names start with _pa_. */
#ifndef PYARENA_ALLOC_INTERNAL_H
#define PYARENA_ALLOC_INTERNAL_H

#include "../internal.h"

#define PA_PAGE_SHIFT 12
#define PA_PAGE_SIZE ((size_t)1 << PA_PAGE_SHIFT)

/* os.c */
void *_pa_backend_map(const pa_backend_t *b, size_t size, size_t align);
void _pa_backend_unmap(const pa_backend_t *b, void *p, size_t size);
/* 1 if `b` is pa_backend_default()'s mmap/munmap/madvise. */
int _pa_backend_is_default(const pa_backend_t *b);
/* Reserve `size` bytes (page multiple) of address space (PROT_NONE,
 * MAP_NORESERVE: no memory, no commit charge); NULL if the OS refuses.
 * Give it back with the default backend's unmap. */
void *_pa_os_reserve(size_t size);
/* Make [p, p+size) of a reservation usable (commit 1: read/write) or give
 * its pages and commit charge back (commit 0).  0 on success. */
int _pa_os_commit(void *p, size_t size, int commit);
/* Transparent huge pages for [p, p+size) of a reservation (PA_HUGE_SIZE
 * aligned and sized).  collapse 0: page faults in it may map huge pages
 * (madvise MADV_HUGEPAGE; a huge page is resident whole).  collapse 1:
 * back it with huge pages now (MADV_COLLAPSE: present 4 KiB pages are
 * copied, the rest zero-filled).  0 on success, -1 where the kernel
 * cannot (no THP, before Linux 6.1, no page present yet, no memory). */
int _pa_os_huge(void *p, size_t size, int collapse);
#define PA_HUGE_SIZE ((size_t)2 << 20)

#endif /* PYARENA_ALLOC_INTERNAL_H */
