"""A large block of fresh memory that the OS may back with transparent huge
pages: an activation block touched whole by a model's first run.

A new block's pages are each faulted in (and zeroed by the kernel) the
first time they are written: 5,600 faults for a 22 MiB activation arena,
measured at 9-27 ms on the 2-core VM -- as long as the rest of a compiled
model's load.  Backed by 2 MiB pages the same block takes 11 faults (2 ms).
Only the 2 MiB-aligned pages lying wholly inside the block are asked for
(``madvise(MADV_HUGEPAGE)``): the block's resident size never exceeds its
length, the tail stays in 4 KiB pages.  Where the OS gives no huge pages
(another system, THP off, memory too fragmented) the same call gives plain
pages, and the block works as before.
"""
import mmap

import numpy as np

__all__ = ["HUGE_PAGE", "huge_page_block"]

#: the size of a transparent huge page (x86-64, arm64 with 4 KiB pages)
HUGE_PAGE = 2 << 20


def huge_page_block(nbytes):
    """A writable, zeroed uint8 array of ``nbytes`` starting on a 2 MiB
    boundary, its whole 2 MiB pages advised to be huge; None where this
    Python has no anonymous private mapping or no ``MADV_HUGEPAGE``, or
    ``nbytes`` is below one huge page (the caller allocates as before).
    The array keeps its mapping alive (unmapped once no view is left)."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    anonymous = getattr(mmap, "MAP_ANONYMOUS", None)
    if advice is None or anonymous is None or nbytes < HUGE_PAGE:
        return None
    try:    # a huge page's worth more address space (not memory) to align the start
        m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | anonymous)
    except (OSError, ValueError):
        return None
    whole = np.frombuffer(m, dtype=np.uint8)
    skip = -whole.__array_interface__["data"][0] % HUGE_PAGE
    try:
        m.madvise(advice, skip, nbytes // HUGE_PAGE * HUGE_PAGE)
    except OSError:         # no THP here: plain pages
        pass
    return whole[skip:skip + nbytes]
