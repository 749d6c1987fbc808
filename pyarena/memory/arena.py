"""``Arena``: NumPy arrays from the C bump arena (weights, constants).

Lifetime rules (the reason for most of this file):

* Every array is an ordinary ``numpy.ndarray`` whose base is its chunk's
  buffer object.  NumPy stops collapsing view chains at the first array
  whose base is not an array, so *every* view of a handed-out array has
  that array as its base: the array's reference count tells whether
  anything can still see its block.  The arena keeps each array in a list
  and reads that count before it releases memory.
* Each chunk's memory is exported through a cffi buffer that keeps the C
  handle alive, so arrays keep the arena alive and dropping the ``Arena``
  object first is fine.
* ``rewind``/``reset`` refuse (``StateError``) while a released block is
  still referenced, unless ``force=True``.  Even then nothing can fault:
  the C arena keeps released chunks mapped as spares, and ``trim`` refuses
  to unmap while a forced-out block is still referenced.

Not thread-safe: one thread at a time per arena, like the C arena.
"""
import sys
import weakref

import numpy as np

from .._native import check, ffi, lib
from . import shapes as _shapes
from ..errors import AlignmentError, InvalidArgumentError, OutOfMemoryError, StateError
from .stats import ArenaStats

try:  # the native hot path; the pure-Python path below is complete without it
    from .._native._fastpath import FastArena as _FastArena
except ImportError:  # pragma: no cover - source checkouts without a build
    _FastArena = None

__all__ = ["Arena", "Mark"]

_GROWTH = {"pow2": lib.PA_GROW_POW2, "requested": lib.PA_GROW_REQUESTED,
           "none": lib.PA_GROW_NONE}
_MAX_ALIGN = 1 << 30
_alloc_addr = lib._pa_arena_alloc_addr
_getrefcount = sys.getrefcount


def _check_alignment(value, what, low=8):
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} must be an integer, not {value!r}") from None
    if v != value or v < low or v > _MAX_ALIGN or v & (v - 1):
        raise AlignmentError(
            f"{what} {value!r} is not a power of two in [{low}, {_MAX_ALIGN}]")
    return v


def _referenced(records, start):
    """The records from ``start`` on that something besides the list holds
    (an array or any view of one: NumPy points every view at the block)."""
    return [records[i] for i in range(start, len(records))
            if _getrefcount(records[i]) > _UNREFERENCED]


def _calibrate():
    # The count a record held only by its list shows under the exact
    # expression used above (interpreters differ in stack references).
    probe = [np.empty(1)]
    return max(_getrefcount(probe[i]) for i in range(1))


_UNREFERENCED = _calibrate()


class _Handle:
    """Owns the C arena; destroyed when the last chunk export is gone."""

    __slots__ = ("ptr", "keep", "__weakref__")

    def __init__(self, ptr, keep=None):
        self.ptr = ptr
        self.keep = keep  # caller buffer + metadata for a static arena

    def __del__(self):
        # Never raise, and do nothing at interpreter exit when lib may be gone.
        ptr, self.ptr = self.ptr, None
        if ptr is not None and lib is not None and not sys.is_finalizing():
            lib.pa_arena_destroy(ptr)


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


class Arena:
    """A bump arena handing out NumPy arrays.

    ``Arena()`` grows by chunks as needed; ``Arena(capacity)`` with
    ``growth="none"`` maps ``capacity`` bytes once and raises
    :class:`OutOfMemoryError` when full; ``Arena(buffer=b)`` carves a
    caller-owned writable buffer (bytearray, NumPy array, mmap ...).

    Parameters: ``alignment`` -- granularity of every block (a power of two
    from 8); ``chunk_size`` -- first chunk; ``growth`` -- "pow2" (next
    power of two, at least doubling), "requested" (just enough) or "none".
    """

    def __init__(self, capacity=None, *, alignment=64, chunk_size=64 << 10,
                 growth="pow2", buffer=None):
        alignment = _check_alignment(alignment, "alignment")
        if growth not in _GROWTH:
            raise InvalidArgumentError(
                f"growth must be one of {sorted(_GROWTH)}, not {growth!r}")
        if capacity is not None and (int(capacity) != capacity or capacity <= 0):
            raise InvalidArgumentError(f"capacity must be a positive int, not {capacity!r}")
        if chunk_size is None or int(chunk_size) != chunk_size or chunk_size <= 0:
            raise InvalidArgumentError(f"chunk_size must be a positive int, not {chunk_size!r}")
        if buffer is not None:
            ptr, keep = self._init_static(buffer, alignment)
        else:
            cfg = ffi.new("pa_arena_config_t *")
            lib.pa_arena_config_default(cfg)
            cfg.alignment = alignment
            cfg.chunk_size = int(chunk_size)
            cfg.capacity = int(capacity or 0)
            cfg.growth = _GROWTH[growth]
            if growth == "none" and not capacity:
                raise InvalidArgumentError("growth='none' needs a capacity")
            status = ffi.new("pa_status_t *")
            ptr = lib.pa_arena_create(cfg, status)
            keep = None
            if ptr == ffi.NULL:
                if status[0] != lib.PA_ERR_NOMEM:  # the checks above rule it out
                    check(status[0], "arena creation")
                need = capacity if growth == "none" and capacity else chunk_size
                raise OutOfMemoryError(int(need), 0, limit=capacity, what="arena creation")
        self._handle = _Handle(ptr, keep)
        self._h = ptr
        self._status = ffi.new("pa_status_t *")  # pa_arena_alloc's out-parameter
        self.alignment = alignment
        self._chunks = {}       # chunk base address -> buffer over the chunk
        self._records = []      # handed-out arrays, in allocation order
        self._marks = []        # the stack of valid marks
        self._orphans = []      # blocks released by a forced rewind/reset
        self._cur_base = 0
        self._cur_end = 0
        self._cur_buf = None
        self._closed = False
        self._fast = None
        if _FastArena is not None:
            self._install_fast_path()

    def _install_fast_path(self):
        """Route ``self.empty`` through the native hot path.  It shares
        ``_records`` and the dtype cache with the Python path and calls back
        into it for anything unusual.  It holds the arena strongly (so
        ``Arena().empty(3)`` keeps the arena alive during the call, as a
        bound method would); the callbacks use weak references, and the
        resulting cycle (arena -> fast path -> arena) is left to the GC or
        broken by close()."""
        ref = weakref.ref(self)

        def slow(*args, **kwargs):
            arena = ref()
            if arena is None:
                raise StateError("arena is closed")
            return Arena.empty(arena, *args, **kwargs)

        def refresh(addr):
            ref()._chunk_view(addr)

        fn = int(ffi.cast("uintptr_t", ffi.addressof(lib, "pa_arena_alloc")))
        self._fast = _FastArena(fn, int(ffi.cast("uintptr_t", self._h)), self._records,
                                _shapes._DTYPES, slow, refresh, self)
        self.empty = self._fast.empty

    # -- construction helpers ---------------------------------------------
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

    def _chunk_view(self, addr):
        """The buffer of the chunk holding ``addr`` (made on first use)."""
        index = ffi.new("size_t *")
        base = ffi.new("void **")
        size = ffi.new("size_t *")
        check(lib.pa_arena_find(self._h, ffi.cast("void *", addr), index, base, size),
              "arena chunk lookup")
        b = int(ffi.cast("uintptr_t", base[0]))
        n = int(size[0])
        buf = self._chunks.get(b)
        if buf is None or len(buf) != n:
            handle = self._handle
            # The gc'd pointer's destructor closes over the handle: the chunk
            # export keeps the C arena alive.
            owner = ffi.gc(ffi.cast("char *", b), lambda _p, _h=handle: None)
            buf = ffi.buffer(owner, n)
            self._chunks[b] = buf
        self._cur_base, self._cur_end, self._cur_buf = b, b + n, buf
        if self._fast is not None:
            self._fast.set_chunk(b, b + n, buf)
        return buf

    def _alloc_failed(self, nbytes, align):
        status = self._status[0]  # set by the failed _alloc_addr call
        if status == lib.PA_ERR_NOMEM:
            st = self.stats()
            raise OutOfMemoryError(nbytes, st.used, limit=st.capacity,
                                   reserved=st.reserved)
        if status == lib.PA_ERR_ALIGN:
            _check_alignment(align, "align")  # raises with the value
        check(status, f"arena allocation of {nbytes} bytes")
        raise StateError("arena allocation failed without a status")

    # -- allocation ---------------------------------------------------------
    def empty(self, shape, dtype=np.float64, align=None):
        """An uninitialised C-contiguous array in the arena, its data aligned
        to ``max(align, alignment)``."""
        try:
            dt = _shapes._DTYPES[dtype]
        except (KeyError, TypeError):
            dt = _shapes.resolve_dtype(dtype)
        if type(shape) is not tuple:
            shape = _shapes.normalize_shape(shape)
        nbytes = _shapes.nbytes_for(shape, dt)
        if align is None:
            addr = _alloc_addr(self._h, nbytes, 0, self._status)
        else:
            if type(align) is not int or align & (align - 1) or align <= 0:
                _check_alignment(align, "align", low=1)
            addr = _alloc_addr(self._h, nbytes, align, self._status)
        if not addr:
            if self._closed:
                raise StateError("arena is closed")
            self._alloc_failed(nbytes, align)
        if not self._cur_base <= addr < self._cur_end:
            self._chunk_view(addr)
        arr = np.ndarray(shape, dt, self._cur_buf, addr - self._cur_base)
        self._records.append(arr)
        return arr

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

    def _release(self, start, force, what):
        busy = _referenced(self._records, start)
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
        self._orphans = _referenced(self._orphans, 0)
        if self._orphans:
            raise StateError(
                f"cannot trim: {len(self._orphans)} array(s) released by a forced "
                "rewind/reset are still referenced")
        live = set()
        for i in range(int(lib.pa_arena_num_chunks(self._h))):
            base = ffi.new("void **")
            size = ffi.new("size_t *")
            check(lib.pa_arena_chunk(self._h, i, base, size), "arena chunk")
            live.add(int(ffi.cast("uintptr_t", base[0])))
        released = ffi.new("size_t *")
        check(lib.pa_arena_trim(self._h, released), "arena trim")
        freed = int(released[0])
        for b in list(self._chunks):
            if b not in live:
                del self._chunks[b]
        if self._cur_base not in live:
            self._cur_base = self._cur_end = 0
            self._cur_buf = None
            if self._fast is not None:
                self._fast.set_chunk(0, 0, None)
        return freed

    # -- introspection -------------------------------------------------------
    def stats(self):
        """An :class:`ArenaStats` snapshot."""
        self._check_open()
        st = ffi.new("pa_arena_stats_t *")
        check(lib.pa_arena_stats(self._h, st), "arena stats")
        return ArenaStats.from_c(st)

    def check(self):
        """Number of broken internal invariants (0 = healthy)."""
        self._check_open()
        return int(lib.pa_arena_check(self._h))

    def owns(self, arr):
        """True if ``arr``'s data lies in this arena."""
        addr = arr.__array_interface__["data"][0]
        index = ffi.new("size_t *")
        base = ffi.new("void **")
        size = ffi.new("size_t *")
        return lib.pa_arena_find(self._h, ffi.cast("void *", addr), index, base,
                                 size) == lib.PA_OK

    # -- lifetime --------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise StateError("arena is closed")

    def close(self):
        """Drop this object's hold on the arena.  Arrays already handed out
        stay valid (they keep the memory alive); further calls raise.  Safe
        to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._fast is not None:
            self._fast.detach()
            self._fast = None
            self.__dict__.pop("empty", None)
        self._records = []
        self._marks = []
        self._orphans = []
        self._chunks = {}
        self._cur_base = self._cur_end = 0
        self._cur_buf = None
        self._h = ffi.NULL
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._closed:
            return "<pyarena.Arena closed>"
        st = self.stats()
        return (f"<pyarena.Arena used={st.used:,} reserved={st.reserved:,} "
                f"blocks={st.count} alignment={st.alignment}>")
