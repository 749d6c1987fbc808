"""Read-only NumPy views of a file's bytes, and giving their pages back.

A model's weights are read straight from its file: :func:`map_file` maps
the file once (read-only, shared with the page cache) and
:meth:`MappedFile.array` gives a view of any stretch as a NumPy array
without copying or reading it.  A page costs resident memory only once
it is touched, and it is clean: :func:`release_pages` drops an array's
pages from this process's resident set again (``madvise(MADV_DONTNEED)``;
the data stays valid and is read back from the page cache on the next
touch).  The executor releases each weight's pages once it has placed
the weight in its weights arena, so a model's weights are resident once.

Views are read-only (writing raises ValueError) and keep the mapping
alive; the file must not be truncated while they are in use (as for any
memory map).  Multi-byte values are read in the file's byte order: the
importers pass little-endian dtypes, which :meth:`MappedFile.array`
converts (one copy) only on a big-endian machine.
"""
import errno
import mmap
import os
import stat

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["MappedFile", "map_file", "release_pages", "release_files", "is_mapped",
           "mapped_buffer", "read_in_place"]

_PAGE = mmap.PAGESIZE


class _InPlaceMap(mmap.mmap):
    """The mapping of a file laid out to be read where it lies (a compiled
    model: every array aligned, :func:`read_in_place`)."""


class MappedFile:
    """One read-only mapping of a whole file (see :func:`map_file`);
    ``in_place``: its arrays are laid out to be read where they lie."""

    def __init__(self, path, in_place=False):
        self.path = os.fspath(path)
        # not blocking: opening a FIFO for reading would wait for a writer
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket?)",
                              self.path)
            self.size = st.st_size
            # an empty file cannot be mapped: keep an empty buffer instead
            kind = _InPlaceMap if in_place else mmap.mmap
            self.buffer = (kind(fd, 0, access=mmap.ACCESS_READ) if self.size else b"")
        finally:
            os.close(fd)
        if self.size and hasattr(self.buffer, "madvise"):
            # pages are read where they are used, not ahead: reading one
            # header must not make its neighbours resident
            self.buffer.madvise(mmap.MADV_RANDOM)
        self._bytes = np.frombuffer(self.buffer, dtype=np.uint8)

    def __len__(self):
        return self.size

    def release(self):
        """Drop every resident page of the file from this process (views
        stay valid).  Returns the bytes given back."""
        return release_pages(self._bytes, whole_file=True)

    def array(self, offset, dtype, shape):
        """A read-only view of ``shape`` elements of ``dtype`` at byte
        ``offset`` (InvalidArgumentError if that runs past the end)."""
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        count = 1
        for d in shape:
            count *= d
        end = offset + count * dtype.itemsize
        if offset < 0 or end > self.size or any(d < 0 for d in shape):
            raise InvalidArgumentError(
                f"{self.path}: bytes [{offset:,}, {end:,}) are outside the file "
                f"({self.size:,} bytes)")
        v = self._bytes[offset:end].view(dtype.newbyteorder("=") if dtype.isnative
                                         else dtype).reshape(shape)
        if not dtype.isnative:          # a big-endian machine: one copy
            v = v.astype(dtype.newbyteorder("="))
            v.flags.writeable = False
        return v


def map_file(path, in_place=False):
    """A :class:`MappedFile` of ``path`` (OSError if it cannot be read)."""
    return MappedFile(path, in_place)


def _mapping(arr):
    """The mmap under ``arr``'s memory, or None."""
    b = arr
    while isinstance(b, np.ndarray):
        b = b.base
    if isinstance(b, memoryview):       # np.frombuffer wraps the mmap in one
        b = b.obj
    return b if isinstance(b, mmap.mmap) else None


def mapped_buffer(arr):
    """The mmap object under a mapped-file view (None for other arrays)."""
    return _mapping(arr) if isinstance(arr, np.ndarray) else None


def read_in_place(arr, alignment=64):
    """True if ``arr`` is a C-contiguous, ``alignment``-aligned view of a
    file mapped to be read in place (a compiled model's constant): used
    where it lies, not copied."""
    return isinstance(arr, np.ndarray) and isinstance(_mapping(arr), _InPlaceMap) and \
        arr.flags.c_contiguous and arr.__array_interface__["data"][0] % alignment == 0


def is_mapped(arr):
    """True if ``arr`` is a view of a mapped file."""
    return isinstance(arr, np.ndarray) and _mapping(arr) is not None


def release_pages(arr, whole_file=False):
    """Drop the resident pages of a mapped-file view ``arr`` (whole pages
    it lies on; neighbours on its edge pages are simply read again when
    touched), or with ``whole_file`` those of its whole file.  Returns the
    bytes given back (0 for an array that is not a mapped view, or on a
    system without ``madvise``)."""
    mm = _mapping(arr) if isinstance(arr, np.ndarray) else None
    if mm is None or len(mm) == 0 or not hasattr(mm, "madvise"):
        return 0
    if whole_file:
        lo, hi = 0, len(mm)
    else:
        base = np.frombuffer(mm, dtype=np.uint8, count=1).__array_interface__["data"][0]
        start = arr.__array_interface__["data"][0] - base
        lo = start // _PAGE * _PAGE
        hi = min(len(mm), -(-(start + arr.nbytes) // _PAGE) * _PAGE)
    if hi <= lo:
        return 0
    try:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    except (OSError, ValueError):
        return 0
    return hi - lo


def release_files(arrays):
    """Give back every resident page of the files that the mapped views
    among ``arrays`` lie in: one ``madvise`` per file, whatever the number
    of views.  Returns the bytes given back."""
    files = {}
    for a in arrays:
        mm = mapped_buffer(a)
        if mm is not None:
            files.setdefault(id(mm), a)
    return sum(release_pages(a, whole_file=True) for a in files.values())
