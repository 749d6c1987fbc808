"""``Arena``: NumPy arrays from the C bump arena (weights, constants).

Lifetime rules (the reason for most of this file):

* The C arena is owned by a handle (pyarena/_native/glue_handle.c) that destroys
  it when the last reference is gone; every array's base is that handle.
  NumPy stops collapsing view chains at the first base that is not an
  array, so *every* view of a handed-out array has that array as its base:
  the array's reference count tells whether anything can still see its
  block.  The arena keeps each array in a list and reads that count
  (:mod:`.refcount`) before it releases memory.
* So arrays keep the arena alive, and dropping or closing the ``Arena``
  object first is fine.
* ``rewind``/``reset`` refuse (``StateError``) while a released block is
  still referenced, unless ``force=True``.  Even then nothing can fault:
  the C arena keeps released chunks mapped as spares, and ``trim`` refuses
  to unmap while a forced-out block is still referenced.

``empty`` is one native call (the glue's shape parser, dtype cache and
allocation); ``zeros``, ``full`` and ``asarray`` build on it.

Not thread-safe: one thread at a time per arena, like the C arena.
"""
import functools
import threading

import numpy as np

from .._native import check, ffi, glue, lib
from ..errors import InvalidArgumentError, StateError
from . import dtypes
from .args import MAX_ALIGN, as_pow2, as_size
from .closable import Closable
from .refcount import referenced
from .stats import ArenaStats, out_of_memory

__all__ = ["Arena", "Mark"]

_GROWTH = {"pow2": lib.PA_GROW_POW2, "requested": lib.PA_GROW_REQUESTED,
           "none": lib.PA_GROW_NONE}
_DEFAULT_CHUNK = 64 << 10
#: per thread, the out-parameters Arena.owns passes (made once, not per call)
_find_out = threading.local()
_PAGE = 4096


def _stats(h):
    st = ffi.new("pa_arena_stats_t *")
    check(lib.pa_arena_stats(h, st), "arena stats")
    return ArenaStats.from_c(st)


def _alloc_failed(h, nbytes, status, align):
    """Called by the native ``empty`` when the C arena refused a block."""
    if status == lib.PA_ERR_NOMEM:
        raise out_of_memory(nbytes, _stats(h))
    check(status, f"arena allocation of {nbytes:,} bytes")
    raise StateError("arena allocation failed without a status")


class Mark:
    """A position in an arena; ``with arena.mark():`` rewinds on exit."""

    __slots__ = ("_arena", "_c", "_nrec", "__weakref__")

    def __init__(self, arena, c_mark, nrec):
        self._arena = arena
        self._c = c_mark
        self._nrec = nrec

    def rewind(self, force=False):
        self._arena.rewind(self, force=force)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        arena = self._arena
        try:
            arena.rewind(self, force=False)
        except StateError:
            if exc[0] is None:
                raise
        finally:
            if self in arena._marks:
                arena._marks.remove(self)
        return False


class Arena(Closable):
    """A bump arena handing out NumPy arrays.

    ``Arena()`` grows by chunks as needed; ``Arena(capacity)`` with
    ``growth="none"`` maps ``capacity`` bytes once and raises
    :class:`OutOfMemoryError` when full; ``Arena(buffer=b)`` carves a
    caller-owned writable buffer (bytearray, NumPy array, mmap ...).

    Parameters: ``alignment`` -- granularity of every block (a power of two
    from 8); ``chunk_size`` -- first chunk; ``growth`` -- "pow2" (next
    power of two, at least doubling), "requested" (just enough) or "none".
    """

    _kind = "arena"

    def __init__(self, capacity=None, *, alignment=64, chunk_size=None,
                 growth="pow2", buffer=None):
        alignment = as_pow2(alignment, "alignment", 8, MAX_ALIGN)
        if growth not in _GROWTH:
            raise InvalidArgumentError(
                f"growth must be one of {sorted(_GROWTH)}, not {growth!r}")
        capacity = as_size(capacity, "capacity", 1, optional=True)
        if capacity is not None and buffer is None and capacity < _PAGE:
            raise InvalidArgumentError(
                f"capacity {capacity:,} is below one page ({_PAGE:,} bytes), the "
                "smallest arena that maps its own memory")
        if chunk_size is None:
            # 64 KiB, or the whole capacity when that is smaller
            chunk_size = min(_DEFAULT_CHUNK, capacity or _DEFAULT_CHUNK)
        else:
            chunk_size = as_size(chunk_size, "chunk_size", 1)
            if capacity and chunk_size > capacity:
                raise InvalidArgumentError(
                    f"chunk_size {chunk_size:,} exceeds the capacity {capacity:,}")
        if buffer is not None:
            ptr, keep = self._init_static(buffer, alignment)
        else:
            if growth == "none" and not capacity:
                raise InvalidArgumentError("growth='none' needs a capacity")
            ptr, keep = self._create(alignment, chunk_size, capacity, growth), None
        try:
            self._hcap = glue.handle(glue.ARENA, int(ffi.cast("uintptr_t", ptr)), keep)
        except BaseException:
            lib.pa_arena_destroy(ptr)
            raise
        self._h = ptr
        self.alignment = alignment
        self._records = []      # handed-out arrays, in allocation order
        self._marks = []        # the stack of valid marks
        self._orphans = []      # blocks released by a forced rewind/reset
        self._closed = False
        # the native empty(): it holds the handle (so a kept bound method
        # keeps the C arena) and appends to _records
        self._empty = glue.empty_function(self._hcap, alignment, self._records,
                                          dtypes.CACHE, dtypes.resolve_dtype,
                                          functools.partial(_alloc_failed, ptr), False)
        self.empty = self._empty

    # -- construction helpers ---------------------------------------------
    @staticmethod
    def _create(alignment, chunk_size, capacity, growth):
        cfg = ffi.new("pa_arena_config_t *")
        lib.pa_arena_config_default(cfg)
        cfg.alignment = alignment
        cfg.chunk_size = int(chunk_size)
        cfg.capacity = int(capacity or 0)
        cfg.growth = _GROWTH[growth]
        status = ffi.new("pa_status_t *")
        ptr = lib.pa_arena_create(cfg, status)
        if ptr == ffi.NULL:
            if status[0] != lib.PA_ERR_NOMEM:  # the checks above rule it out
                check(status[0], "arena creation")
            need = capacity if growth == "none" and capacity else chunk_size
            raise out_of_memory(int(need), limit=capacity, what="arena creation")
        return ptr

    @staticmethod
    def _init_static(buffer, alignment):
        try:
            cbuf = ffi.from_buffer(buffer, require_writable=True)
        except (TypeError, BufferError) as exc:
            raise TypeError(f"buffer must be a writable buffer, not "
                            f"{type(buffer).__name__}: {exc}") from None
        meta = ffi.new("char[]", int(lib.pa_arena_metadata_size()) + 64)
        # the metadata must be aligned for the C struct
        addr = int(ffi.cast("uintptr_t", meta))
        meta_aligned = meta + ((-addr) % 64)
        ptr = lib.pa_arena_init_static(meta_aligned, lib.pa_arena_metadata_size(),
                                       cbuf, len(cbuf), alignment, ffi.NULL)
        if ptr == ffi.NULL:
            raise InvalidArgumentError(
                f"buffer of {len(cbuf)} bytes is too small for alignment {alignment}")
        return ptr, (buffer, cbuf, meta)

    # -- allocation ---------------------------------------------------------
    def empty(self, shape, dtype=np.float64, align=None):
        """An uninitialised C-contiguous array in the arena, its data aligned
        to ``max(align, alignment)``.  (An instance attribute replaces this
        method with the native call of the same signature.)"""
        self._check_open()
        return self._empty(shape, dtype, align)

    def zeros(self, shape, dtype=np.float64, align=None):
        """Like :meth:`empty`, filled with zeros."""
        a = self.empty(shape, dtype, align)
        a.fill(0)
        return a

    def full(self, shape, fill_value, dtype=None, align=None):
        """Like :meth:`empty`, filled with ``fill_value``."""
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        a = self.empty(shape, dtype, align)
        a.fill(fill_value)
        return a

    def asarray(self, obj, dtype=None, align=None):
        """A copy of ``obj`` (any array-like, e.g. weights) in the arena."""
        src = np.asarray(obj, dtype=dtype)
        a = self.empty(src.shape, src.dtype, align)
        np.copyto(a, src)
        return a

    # -- marks, rewind, reset ------------------------------------------------
    def mark(self):
        """The current position.  ``with arena.mark(): ...`` rewinds to it on
        exit; ``arena.rewind(m)`` may rewind to it any number of times."""
        self._check_open()
        c = ffi.new("pa_arena_mark_t *")
        check(lib.pa_arena_mark(self._h, c), "arena mark")
        m = Mark(self, c, len(self._records))
        self._marks.append(m)
        return m

    def forget(self, mark):
        """Stop keeping ``mark`` (it can no longer be rewound to); what was
        allocated since stays."""
        if isinstance(mark, Mark) and mark._arena is self and mark in self._marks:
            self._marks.remove(mark)

    def _release(self, start, force, what):
        busy = referenced(self._records, start)
        if busy and not force:
            r = busy[0]
            raise StateError(
                f"cannot {what}: {len(busy)} array(s) in the released region are "
                f"still referenced (e.g. shape {r.shape}, dtype {r.dtype}); delete them "
                f"first or pass force=True to reuse their memory anyway")
        if busy:
            self._orphans.extend(busy)
        del self._records[start:]

    def rewind(self, mark, force=False):
        """Release everything allocated after ``mark``."""
        self._check_open()
        if not isinstance(mark, Mark) or mark._arena is not self:
            raise InvalidArgumentError("mark does not belong to this arena")
        if mark not in self._marks:
            raise StateError("mark is stale: the arena was reset or rewound past it")
        self._release(mark._nrec, force, "rewind")
        check(lib.pa_arena_rewind(self._h, mark._c), "arena rewind")
        i = self._marks.index(mark)
        del self._marks[i + 1:]

    def reset(self, force=False):
        """Release every allocation and every mark."""
        self._check_open()
        self._release(0, force, "reset")
        check(lib.pa_arena_reset(self._h), "arena reset")
        self._marks.clear()

    def trim(self):
        """Give spare chunks back to the OS; returns the bytes released."""
        self._check_open()
        self._orphans = referenced(self._orphans, 0)
        if self._orphans:
            raise StateError(
                f"cannot trim: {len(self._orphans)} array(s) released by a forced "
                "rewind/reset are still referenced")
        released = ffi.new("size_t *")
        check(lib.pa_arena_trim(self._h, released), "arena trim")
        return int(released[0])

    # -- introspection -------------------------------------------------------
    def stats(self):
        """An :class:`ArenaStats` snapshot."""
        self._check_open()
        return _stats(self._h)

    def check(self):
        """Number of broken internal invariants (0 = healthy)."""
        self._check_open()
        return int(lib.pa_arena_check(self._h))

    def owns(self, arr):
        """True if ``arr``'s data lies in this arena."""
        addr = arr.__array_interface__["data"][0]
        out = getattr(_find_out, "v", None)
        if out is None:     # what pa_arena_find reports beside the answer: unread
            out = _find_out.v = (ffi.new("size_t *"), ffi.new("void **"),
                                 ffi.new("size_t *"))
        return lib.pa_arena_find(self._h, ffi.cast("void *", addr), *out) == lib.PA_OK

    # -- lifetime --------------------------------------------------------------
    def _drop(self):
        self._empty.__self__.close()                  # a kept bound empty() refuses too
        self._empty = None
        self.__dict__.pop("empty", None)
        self._records = []
        self._marks = []
        self._orphans = []
        self._h = ffi.NULL
        self._hcap = None

    def __repr__(self):
        if self._closed:
            return "<pyarena.Arena closed>"
        st = self.stats()
        return (f"<pyarena.Arena used={st.used:,} reserved={st.reserved:,} "
                f"blocks={st.count} alignment={st.alignment}>")
