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
    56      4     CRC-32 of the meta bytes
    60      4     CRC-32 of bytes 0..59 of this header

The blob holds the arrays the document refers to (``{"$blob": index}``),
each at a multiple of :data:`BLOB_ALIGN` bytes from the start of the file
(the blob starts at one, each array at one from the blob's start),
so that a read-only ``mmap`` of the file gives NumPy views the kernels read
as they are (aligned for the C core's vector loads, shared between the
processes that map the same file, resident only once touched).  The
document lists the arrays as ``[offset in the blob, nbytes, crc32]``; every array's
checksum is verified when the file is opened (:func:`read`; read through
one small buffer, not the mapping), unless ``verify=False``.

:func:`write` and :func:`read` know nothing of graphs: :mod:`.compiled`
puts a model into the document.  Anything wrong with a file -- another
magic, another version, a truncated or damaged byte, an array outside the
file -- is a :class:`~pyarena.errors.ModelImportError` naming the file and
what is wrong; nothing is allocated from a size the file states before
that size is checked against the file's length.
"""
import json
import os
import struct
import zlib

import numpy as np

from ..errors import ModelImportError
from ..memory.mapped import map_file

__all__ = ["MAGIC", "FORMAT_VERSION", "BLOB_ALIGN", "HEADER_BYTES", "is_compiled",
           "write", "read", "Blob"]

MAGIC = b"PYARENA\x00COMPILED"
FORMAT_VERSION = 1
BLOB_ALIGN = 64
HEADER_BYTES = 64
_HEADER = struct.Struct("<16sIIQQQQII")     # 64 bytes
_VERIFY_CHUNK = 1 << 20     # the buffer the checksums read the file through


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
        crc = zlib.crc32(raw) & 0xFFFFFFFF
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
                        blob_len, zlib.crc32(meta) & 0xFFFFFFFF, 0)
    head = head[:60] + struct.pack("<I", zlib.crc32(head[:60]) & 0xFFFFFFFF)
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
    if zlib.crc32(head[:60]) & 0xFFFFFFFF != struct.unpack("<I", head[60:])[0]:
        raise _bad(path, "the header is damaged (checksum)")
    if version != FORMAT_VERSION:
        raise _bad(path, f"format version {version}; this pyarena reads version "
                         f"{FORMAT_VERSION} (compile the model again with this pyarena)")
    if flags or meta_off != HEADER_BYTES or meta_off + meta_len > size or \
            blob_off < meta_off + meta_len or blob_off + blob_len > size or \
            blob_off % BLOB_ALIGN:
        raise _bad(path, f"its sections do not fit in its {size:,} bytes (truncated?)")
    meta = bytes(mf.buffer[meta_off:meta_off + meta_len])
    if zlib.crc32(meta) & 0xFFFFFFFF != meta_crc:
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
        if not (isinstance(row, list) and len(row) == 3 and
                all(type(v) is int and v >= 0 for v in row)):
            raise _bad(path, f"array #{i}: {row!r:.60} is not [offset, bytes, crc]")
        off, n, crc = row
        if off % BLOB_ALIGN or off + n > blob_len:
            raise _bad(path, f"array #{i} at [{off:,}, {off + n:,}) of the blob is outside "
                             f"it ({blob_len:,} bytes) or unaligned")
        views.append(whole[blob_off + off:blob_off + off + n])   # (read-only: the mapping's)
        checks.append((blob_off + off, n, crc))
    if verify:
        bad = _damaged(path, checks)
        if bad is not None:
            raise _bad(path, f"array #{bad} is damaged (checksum)")
    return doc, views


def _damaged(path, checks):
    """The index of the first array whose CRC-32 is not the one stated, or
    None.  Read with ``readinto`` through one reused buffer, not through
    the mapping: checking the file neither faults its pages into the
    process nor holds more than the buffer."""
    buf = bytearray(min(_VERIFY_CHUNK, max((n for _, n, _ in checks), default=0)) or 1)
    view = memoryview(buf)
    try:
        with open(path, "rb", buffering=0) as f:
            for i, (off, n, want) in enumerate(checks):
                f.seek(off)
                crc, left = 0, n
                while left:
                    got = f.readinto(view[:min(left, len(buf))])
                    if not got:
                        return i
                    crc = zlib.crc32(view[:got], crc)
                    left -= got
                if crc & 0xFFFFFFFF != want:
                    return i
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    return None
