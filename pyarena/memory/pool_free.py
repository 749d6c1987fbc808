"""Early free and ownership: :meth:`Pool.free`, :meth:`Pool.owns`,
:meth:`Pool.block_size` (:class:`EarlyFree`, part of
:class:`~pyarena.memory.pool.Pool`).

``pool.free(arr)`` returns the block early.  It is safe because it
refuses (``StateError``) while anything else still references the array
-- a view, a memoryview, a container, another name -- which the array's
reference count tells (every view's base *is* that array).  Then the
array itself is emptied in place (``ndarray.__setstate__`` to shape
``(0,)``): it drops the block, and whoever still holds the name holds a
harmless empty array, never a dangling pointer.  A second ``free`` of it
raises ``DoubleFreeError``.  There is no ``force``: freeing memory a live
view can still read would be a use-after-free.
"""
import weakref

import numpy as np

from .._native import ffi, glue, lib
from ..errors import DoubleFreeError, ForeignPointerError, StateError
from .refcount import BASE_ONE_HOLDER, ONE_HOLDER, base_references, references

__all__ = ["EarlyFree"]

_glue_owner = glue.owner
_ndarray = np.ndarray


class EarlyFree:
    """Mixed into ``Pool``: uses its ``_h`` (the C pool), ``_hcap`` (the
    handle every block of this pool holds), ``_closed`` and
    ``_check_open``; keeps ``_freed`` (id(array) -> weakref of the arrays
    freed, for DoubleFreeError), which ``Pool`` makes and drops."""

    def free(self, arr):
        """Give ``arr``'s block back now.

        ``arr`` must be an array this pool handed out (by :meth:`empty` and
        friends, or by NumPy under :func:`numpy_allocator`), held by no other
        name, view, memoryview or container -- otherwise ``StateError`` and
        nothing changes.  Afterwards ``arr`` is an empty array of shape
        ``(0,)``; freeing it again raises ``DoubleFreeError``.  A foreign
        array raises ``ForeignPointerError``; a closed pool ``StateError``.
        """
        self._check_open()
        if not isinstance(arr, _ndarray):
            raise TypeError(f"free() takes a numpy array, not {type(arr).__name__}")
        ref = self._freed.get(id(arr))
        if ref is not None and ref() is arr:
            raise DoubleFreeError("array was already freed into this pool")
        info = _glue_owner(arr)
        if info is None:
            base = arr.base
            if isinstance(base, _ndarray) and _glue_owner(base) is not None:
                raise StateError(
                    f"cannot free a view (shape {arr.shape}) of a pool array: free "
                    "the array the pool handed out, after dropping its views")
            raise ForeignPointerError(
                f"array of shape {arr.shape} and dtype {arr.dtype} was not "
                "allocated by a pyarena pool")
        cap, kind = info
        if cap is not self._hcap:
            raise ForeignPointerError(
                f"array of shape {arr.shape} was allocated by another pool")
        del info, cap
        extra = references(arr) - ONE_HOLDER
        if kind == 1 and extra <= 0 and base_references(arr) > BASE_ONE_HOLDER:
            extra = 1  # someone kept arr.base, the block's owner capsule
        if extra > 0:
            raise StateError(
                f"cannot free array of shape {arr.shape}: {extra} other reference(s) "
                "(views, memoryviews, containers or names) still see its block; "
                "delete them first, or just drop the array (its block returns to "
                "the pool when the last reference is gone)")
        try:
            state = (1, (0,), arr.dtype, False, b"")
            arr.__setstate__(state)  # drops the block (owner capsule / NumPy data)
        except Exception:
            arr.__setstate__((1, (0,), np.dtype(np.uint8), False, b""))
        self._freed[id(arr)] = weakref.ref(arr, self._forget(id(arr)))

    def _forget(self, key):
        freed = self._freed

        def cb(_ref, freed=freed, key=key):
            r = freed.get(key)
            if r is _ref:
                del freed[key]
        return cb

    def owns(self, arr):
        """True if ``arr`` (or the array it is a view of) came from this pool."""
        if self._closed or not isinstance(arr, _ndarray):
            return False
        info = _glue_owner(arr)
        if info is None and isinstance(arr.base, _ndarray):
            info = _glue_owner(arr.base)
        return info is not None and info[0] is self._hcap

    def block_size(self, arr):
        """Usable bytes of the block under ``arr`` (>= ``arr.nbytes``); 0 if
        ``arr`` does not start a live block of this pool."""
        self._check_open()
        addr = arr.__array_interface__["data"][0]
        return int(lib.pa_pool_block_size(self._h, ffi.cast("void *", addr)))
