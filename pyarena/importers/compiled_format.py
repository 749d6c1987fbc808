"""The container of a compiled model file (``.pa``): a fixed header, a JSON
document and a blob of aligned arrays, each with a checksum.

Layout (every integer little-endian)::

    offset  size  field
    0       8     magic  b"PYARENA\\x00"
    8       8     kind   b"COMPILED"
    16      4     format version (FORMAT_VERSION)
    20      4     flags (0)
    24      8     meta offset (always 64: right after the header)
    32      8     meta length (bytes of UTF-8 JSON)
    40      8     blob offset (a multiple of BLOB_ALIGN)
    48      8     blob length
    56      4     CRC-32C of the meta bytes
    60      4     CRC-32C of bytes 0..59 of this header

The blob holds the arrays the document refers to (``{"$blob": index}``),
each at a multiple of :data:`BLOB_ALIGN` bytes from the start of the file
(the blob starts at one, each array at one from the blob's start),
so that a read-only ``mmap`` of the file gives NumPy views the kernels read
as they are (aligned for the C core's vector loads, shared between the
processes that map the same file, resident only once touched).  The
document lists the arrays as ``[offset in the blob, nbytes, crc32c]``; every
array's checksum is verified when the file is opened (:func:`read`), unless
``verify=False``: by the C core (``pa_crc32c``, SSE4.2's instruction where
there is one: about 1 ms for 12 MiB) over the mapped pages themselves,
which the first inference reads anyway (no copy; asked ahead with
``MADV_WILLNEED`` so that a file not in the page cache is read in large
pieces).  The checksums are CRC-32C (Castagnoli) since format version 2:
version 1 stored zlib's CRC-32, which took 6 ms for the same 12 MiB.

:func:`write` and :func:`read` know nothing of graphs: :mod:`.compiled`
puts a model into the document.  Anything wrong with a file -- another
magic, another version, a truncated or damaged byte, an array outside the
file -- is a :class:`~pyarena.errors.ModelImportError` naming the file and
what is wrong; nothing is allocated from a size the file states before
that size is checked against the file's length.
"""
import json
import mmap
import os
import struct

import numpy as np

from .._native.checksum import crc32c
from ..errors import ModelImportError
from ..memory.mapped import map_file

__all__ = ["MAGIC", "FORMAT_VERSION", "BLOB_ALIGN", "HEADER_BYTES", "is_compiled",
           "write", "read", "Blob"]

MAGIC = b"PYARENA\x00COMPILED"
FORMAT_VERSION = 2
BLOB_ALIGN = 64
HEADER_BYTES = 64
_HEADER = struct.Struct("<16sIIQQQQII")     # 64 bytes


def is_compiled(head):
    """Whether the first bytes of a file are a compiled model's magic."""
    return bytes(head[:len(MAGIC)]) == MAGIC


def _pad(n, a=BLOB_ALIGN):
    return -(-n // a) * a


class Blob:
    """The arrays of a file being written: :meth:`add` returns the
    ``{"$blob": index}`` reference the document stores.  Equal bytes are
    stored once (the same weight read by two signatures' graphs, or twice
    in one model: read-only views of one copy)."""

    def __init__(self):
        self.arrays = []        # contiguous uint8 views, in order
        self.crcs = []
        self._by_crc = {}       # (bytes, crc) -> indices

    def add(self, arr):
        raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        crc = crc32c(raw)
        same = self._by_crc.setdefault((raw.size, crc), [])
        for i in same:
            if np.array_equal(self.arrays[i], raw):
                return {"$blob": i}
        same.append(len(self.arrays))
        self.arrays.append(raw)
        self.crcs.append(crc)
        return {"$blob": len(self.arrays) - 1}

    @property
    def nbytes(self):
        return sum(int(a.size) for a in self.arrays)


def write(path, document, blob):
    """Write ``document`` (a JSON-able dict) and ``blob``'s arrays to
    ``path`` (atomically: a temporary file renamed into place).  Returns
    the file's size in bytes."""
    table, rel = [], 0
    for a, crc in zip(blob.arrays, blob.crcs):    # offsets from the blob's start, aligned
        table.append([rel, int(a.nbytes), crc])
        rel = _pad(rel + a.nbytes)
    meta = json.dumps(dict(document, arrays=table), separators=(",", ":")).encode()
    blob_off = _pad(HEADER_BYTES + len(meta))
    blob_len = table[-1][0] + table[-1][1] if table else 0
    head = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, HEADER_BYTES, len(meta), blob_off,
                        blob_len, crc32c(meta), 0)
    head = head[:60] + struct.pack("<I", crc32c(head[:60]))
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(head)
            f.write(meta)
            pos = HEADER_BYTES + len(meta)
            for (off, n, _), a in zip(table, blob.arrays):
                f.write(b"\0" * (blob_off + off - pos))
                f.write(a.data)
                pos = blob_off + off + n
            f.write(b"\0" * max(0, blob_off - pos))    # no arrays: the blob still starts in the file
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return os.path.getsize(path)


def _bad(path, what):
    return ModelImportError(f"{path}: not a usable compiled pyarena model: {what}")


def read(path, verify=True):
    """``(document, arrays)`` of the compiled file at ``path``: the JSON
    document and a list of read-only uint8 views of the mapped file, one
    per array (see the module docstring).  ModelImportError for anything
    wrong with the file."""
    path = os.fspath(path)
    try:
        mf = map_file(path, in_place=True)
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    size = len(mf)
    if size < HEADER_BYTES:
        raise _bad(path, f"{size} bytes, shorter than the {HEADER_BYTES}-byte header")
    head = bytes(mf.buffer[:HEADER_BYTES])
    magic, version, flags, meta_off, meta_len, blob_off, blob_len, meta_crc, _ = \
        _HEADER.unpack(head)
    if magic != MAGIC:
        raise _bad(path, "no compiled-model magic")
    if crc32c(head[:60]) != struct.unpack("<I", head[60:])[0]:
        raise _bad(path, "the header is damaged (checksum)")
    if version != FORMAT_VERSION:
        raise _bad(path, f"format version {version}; this pyarena reads version "
                         f"{FORMAT_VERSION} (compile the model again with this pyarena)")
    if flags or meta_off != HEADER_BYTES or meta_off + meta_len > size or \
            blob_off < meta_off + meta_len or blob_len and blob_off + blob_len > size or \
            blob_off % BLOB_ALIGN:
        raise _bad(path, f"its sections do not fit in its {size:,} bytes (truncated?)")
    meta = bytes(mf.buffer[meta_off:meta_off + meta_len])
    if crc32c(meta) != meta_crc:
        raise _bad(path, "the model description is damaged (checksum)")
    try:
        doc = json.loads(meta.decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(path, f"the model description is not JSON ({type(exc).__name__})") from None
    table = doc.get("arrays") if isinstance(doc, dict) else None
    if not isinstance(table, list):
        raise _bad(path, "no array table")
    views, checks = [], []
    whole = mf.array(0, np.uint8, (size,))
    for i, row in enumerate(table):
        # (spelt out, not all() over a generator: a model has hundreds of rows)
        if type(row) is not list or len(row) != 3:
            raise _bad(path, f"array #{i}: {row!r:.60} is not [offset, bytes, crc]")
        off, n, crc = row
        if not (type(off) is int and type(n) is int and type(crc) is int and
                off >= 0 and n >= 0 and crc >= 0):
            raise _bad(path, f"array #{i}: {row!r:.60} is not [offset, bytes, crc]")
        if off % BLOB_ALIGN or off + n > blob_len:
            raise _bad(path, f"array #{i} at [{off:,}, {off + n:,}) of the blob is outside "
                             f"it ({blob_len:,} bytes) or unaligned")
        views.append(whole[blob_off + off:blob_off + off + n])   # (read-only: the mapping's)
        checks.append((blob_off + off, n, crc))
    if verify:
        bad = _damaged(mf, whole, checks, blob_off, blob_len)
        if bad is not None:
            raise _bad(path, f"array #{bad} is damaged (checksum)")
    return doc, views


def _damaged(mf, whole, checks, blob_off, blob_len):
    """The index of the first array whose CRC-32C is not the one stated,
    or None: computed over the mapping ``whole`` (the file's bytes), the
    blob's pages first asked for ahead (one ``madvise``)."""
    if blob_len and hasattr(mf.buffer, "madvise"):
        lo = blob_off // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            mf.buffer.madvise(mmap.MADV_WILLNEED, lo, blob_off + blob_len - lo)
        except (OSError, ValueError):
            pass
    for i, (off, n, want) in enumerate(checks):
        if crc32c(whole[off:off + n]) != want:
            return i
    return None
