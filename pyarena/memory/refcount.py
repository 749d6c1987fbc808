"""Who can still see a block: reference counts, calibrated once.

``Arena.rewind`` / ``reset`` and ``Pool.free`` release memory only when
nothing but the allocator's own bookkeeping (or the caller's one name)
holds the array.  NumPy points every view at the array that owns the
memory (its base is not an array, so view chains stop there), so the
array's reference count tells whether a view, a memoryview, a container
or another name can still read the block.

CPython's counts include references held by the calling frames, and those
differ between interpreter versions, so each measure is calibrated here,
once, with exactly the call shape of its use.
"""
import sys

import numpy as np

__all__ = ["referenced", "references", "base_references", "ONE_HOLDER",
           "BASE_ONE_HOLDER"]

_getrefcount = sys.getrefcount


def _held_beyond(records, start, limit):
    return [records[i] for i in range(start, len(records))
            if _getrefcount(records[i]) > limit]


def referenced(records, start):
    """The arrays of ``records`` from ``start`` on that something besides
    the list itself holds (an array, or any view of it)."""
    return _held_beyond(records, start, _LIST_ONLY)


def references(obj):
    """``obj``'s reference count as seen from a method ``f(self, obj)`` of
    the caller: ``ONE_HOLDER`` when the caller holds it by one name only."""
    return _getrefcount(obj)


def base_references(arr):
    """``arr.base``'s reference count: ``BASE_ONE_HOLDER`` when only the
    array holds it."""
    owner = arr.base
    return _getrefcount(owner)


def _probe(obj):
    return references(obj)   # the call shape of Pool.free(self, arr)


def _calibrate():
    x = np.empty(1)                            # one holder: this local
    y = np.frombuffer(bytearray(8), np.uint8)  # its base is held by y only
    probe = [np.empty(1)]                      # held by the list only
    list_only = next(n for n in range(1, 64) if not _held_beyond(probe, 0, n))
    return _probe(x), base_references(y), list_only


ONE_HOLDER, BASE_ONE_HOLDER, _LIST_ONLY = _calibrate()
