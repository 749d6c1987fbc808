"""ONNX files read: `parse_model` (clear errors for a missing, empty or
non-ONNX file) over the initializer data read in place: the model's structure parsed
without its weights, the weights as views of the file.

``onnx.load`` copies every initializer's bytes into protobuf objects, and
each shape-inference pass serialises and parses the whole model again,
so loading a model with W bytes of weights used to peak at about 5 x W.
:func:`read_model` instead maps the file (:func:`pyarena.memory.map_file`),
walks the protobuf wire format of ``ModelProto -> graph -> initializer``,
and builds a copy of the model whose large initializers carry no data
(``data_location = EXTERNAL`` and no location, so shape inference sees
their type and dims only).  Their data are read-only NumPy views of the
mapped file: nothing is copied or even read until a kernel or a folding
step touches it.  Initializers that name an external data file (the
ONNX external-data format) are mapped from that file the same way.

Kept inline (decoded by ``onnx`` as before): small initializers (at
most ``INLINE_BYTES``; shape arithmetic reads them), int64 ones, any
element type without a plain NumPy equivalent (bfloat16, 4-bit, float8,
strings), and everything outside the top-level graph's initializer list
-- except the ``value`` of a top-level ``Constant`` node (how some
exporters, e.g. Paddle2ONNX, store every weight), which is read in place
the same way and keyed by the node's output name.
A file the wire walk cannot follow is handed to ``onnx.load`` whole, so
its error message is onnx's own.  :func:`check_initializer_data` refuses,
by name, an initializer whose data does not fill its dims.
"""
import math
import os

import numpy as np

from ..errors import ModelImportError
from ..memory.mapped import map_file

__all__ = ["parse_model", "read_model", "INLINE_BYTES", "check_initializer_data"]

#: initializers up to this many bytes stay in the protobuf
INLINE_BYTES = 4096

# TensorProto.DataType -> little-endian NumPy dtype, for types stored as-is
_PLAIN = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 9: "?", 10: "<f2",
          11: "<f8", 12: "<u4", 13: "<u8"}
_INT64 = 7


class _Malformed(Exception):
    pass


def _varint(buf, i, end):
    shift = value = 0
    while True:
        if i >= end or shift > 63:
            raise _Malformed
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def _encode_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf, start, end):
    """(field number, wire type, field start, payload start, payload end)."""
    i = start
    while i < end:
        f0 = i
        key, i = _varint(buf, i, end)
        field, wt = key >> 3, key & 7
        if wt == 0:
            _, j = _varint(buf, i, end)
            yield field, wt, f0, i, j
        elif wt == 1:
            j = i + 8
            yield field, wt, f0, i, j
        elif wt == 2:
            n, i = _varint(buf, i, end)
            j = i + n
            yield field, wt, f0, i, j
        elif wt == 5:
            j = i + 4
            yield field, wt, f0, i, j
        else:                      # groups (3, 4) never appear in ONNX
            raise _Malformed
        if j > end:
            raise _Malformed
        i = j


def _tensor_meta(buf, s, e):
    """name, dims, data_type, raw_data span, location, external data."""
    meta = {"name": "", "dims": [], "type": 0, "raw": None, "loc": 0, "ext": {}}
    for field, wt, _, a, b in _fields(buf, s, e):
        if field == 1:
            if wt == 2:                   # packed dims
                k = a
                while k < b:
                    d, k = _varint(buf, k, b)
                    meta["dims"].append(d - (1 << 64) if d >= 1 << 63 else d)
            else:
                d, _ = _varint(buf, a, b)
                meta["dims"].append(d - (1 << 64) if d >= 1 << 63 else d)
        elif field == 2 and wt == 0:
            meta["type"] = _varint(buf, a, b)[0]
        elif field == 8 and wt == 2:
            meta["name"] = bytes(buf[a:b]).decode("utf-8", "replace")
        elif field == 9 and wt == 2:
            meta["raw"] = (a, b)
        elif (field, wt, meta["type"]) in ((4, 2, 1), (10, 2, 11)) and meta["raw"] is None:
            meta["raw"] = (a, b)    # packed float_data / double_data: the same bytes
        elif field == 14 and wt == 0:
            meta["loc"] = _varint(buf, a, b)[0]
        elif field == 13 and wt == 2:
            kv = {}
            for f2, w2, _, a2, b2 in _fields(buf, a, b):
                if w2 == 2 and f2 in (1, 2):
                    kv[f2] = bytes(buf[a2:b2]).decode("utf-8", "replace")
            if 1 in kv:
                meta["ext"][kv[1]] = kv.get(2, "")
    return meta


def _strip_tensor(buf, s, e):
    """The TensorProto bytes without its data (raw_data, or the packed
    float_data / double_data), marked EXTERNAL."""
    out = bytearray()
    for field, wt, f0, _, b in _fields(buf, s, e):
        if field in (9, 14) or (field in (4, 10) and wt == 2):
            continue
        out += buf[f0:b]
    out += b"\x70\x01"             # field 14 (data_location), varint 1 = EXTERNAL
    return bytes(out)


def _walk(buf, start, end, on_field):
    """Copy a message's fields; ``on_field`` may return replacement bytes."""
    out = bytearray()
    for field, wt, f0, a, b in _fields(buf, start, end):
        new = on_field(field, wt, a, b)
        if new is None:
            out += buf[f0:b]
        else:
            out += _encode_varint(field << 3 | 2) + _encode_varint(len(new)) + new
    return bytes(out)


class _FileBytes:
    """The file's bytes by index and slice, read with pread through a
    one-block cache: walking the headers this way makes no page of the
    file resident (a touched page of a mapping brings its neighbours:
    43 MiB resident for the headers of a 98 MiB model)."""

    BLOCK = 1 << 14

    def __init__(self, f, size):
        self.fd, self.size = f.fileno(), size
        self.start, self.block = -1, b""

    def __len__(self):
        return self.size

    def __getitem__(self, k):
        if isinstance(k, slice):
            a, b = max(0, k.start or 0), min(self.size, self.size if k.stop is None
                                             else k.stop)
            return os.pread(self.fd, b - a, a) if b > a else b""
        if not 0 <= k < self.size:
            raise IndexError(k)
        if not self.start <= k < self.start + len(self.block):
            self.start = k
            self.block = os.pread(self.fd, self.BLOCK, k)
        return self.block[k - self.start]


class _Reader:
    def __init__(self, path, mf, f):
        self.path, self.mf, self.buf = path, mf, _FileBytes(f, len(mf))
        self.views, self.files = {}, {}
        self.base = os.path.dirname(os.path.abspath(path))

    def initializer(self, a, b, key=None):
        """The TensorProto at [a, b) without its data (None: kept as it is);
        its data, a view of the file, go to ``views[key or its name]``."""
        m = _tensor_meta(self.buf, a, b)
        key = m["name"] if key is None else key
        dt = _PLAIN.get(m["type"])
        if dt is None or any(d < 0 for d in m["dims"]):
            return None
        if m["loc"] == 1:
            self.views[key] = self.external(m, np.dtype(dt))
            return None
        if m["raw"] is None or m["type"] == _INT64:
            return None
        ra, rb = m["raw"]
        n = np.dtype(dt).itemsize * int(np.prod(m["dims"], dtype=np.int64))
        if rb - ra <= INLINE_BYTES or rb - ra != n:
            return None                # small, or the wrong size: onnx reports it
        self.views[key] = self.mf.array(ra, dt, m["dims"])
        return _strip_tensor(self.buf, a, b)

    def node(self, a, b):
        """A ``Constant`` node whose ``value`` is a large tensor: the node
        without the data, which go to ``views[its output]``."""
        op = domain = b""
        out = None
        # a small node is read in one call and parsed from memory (most are
        # a few dozen bytes: 860 nodes of a text recognizer 100 -> 8 ms)
        local = self.buf[a:b] if b - a <= 1 << 16 else None
        src, lo, hi = (local, 0, len(local)) if local is not None else (self.buf, a, b)
        for field, wt, _, x, y in _fields(src, lo, hi):
            if wt != 2:
                continue
            if field == 4:
                op = bytes(src[x:y])
            elif field == 7:
                domain = bytes(src[x:y])
            elif field == 2 and out is None:
                out = bytes(src[x:y]).decode("utf-8", "replace")
        if op != b"Constant" or domain not in (b"", b"ai.onnx") or not out:
            return None
        return _walk(self.buf, a, b, lambda f, w, x, y: self.value_attribute(f, w, x, y, out))

    def value_attribute(self, field, wt, a, b, out):
        if field != 5 or wt != 2:
            return None
        name, t = None, None
        for f2, w2, _, x, y in _fields(self.buf, a, b):
            if f2 == 1 and w2 == 2:
                name = bytes(self.buf[x:y])
            elif f2 == 5 and w2 == 2:
                t = (x, y)
        if name != b"value" or t is None:
            return None
        stripped = self.initializer(t[0], t[1], key=out)
        if stripped is None:
            return None
        return _walk(self.buf, a, b, lambda f, w, x, y: stripped if f == 5 and w == 2
                     else None)

    def external(self, m, dt):
        loc = m["ext"].get("location", "")
        name = m["name"]
        if not loc or os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            raise ModelImportError(f"initializer {name!r}: external data location "
                                   f"{loc!r} must be a relative path inside the model's "
                                   f"folder")
        full = os.path.join(self.base, loc)
        try:
            mf = self.files.get(full) or self.files.setdefault(full, map_file(full))
        except OSError as exc:
            raise ModelImportError(f"initializer {name!r}: external data file {loc!r}: "
                                   f"{exc.strerror or exc}") from None
        try:
            off = int(m["ext"].get("offset", 0) or 0)
            n = dt.itemsize * int(np.prod(m["dims"], dtype=np.int64))
            length = int(m["ext"].get("length", n) or n)
        except ValueError:
            raise ModelImportError(f"initializer {name!r}: external data offset / "
                                   f"length are not integers") from None
        if length != n or off < 0 or off + n > len(mf):
            raise ModelImportError(f"initializer {name!r}: external data [{off:,}, "
                                   f"{off + length:,}) of {loc!r} ({len(mf):,} bytes) does "
                                   f"not hold its dims {m['dims']} ({n:,} bytes)")
        return mf.array(off, dt, m["dims"])

    def graph(self, field, wt, a, b):
        if field == 5 and wt == 2:
            return self.initializer(a, b)
        if field == 1 and wt == 2:
            return self.node(a, b)
        return None

    def model(self, field, wt, a, b):
        if field == 7 and wt == 2:
            return _walk(self.buf, a, b, self.graph)
        return None


def parse_model(onnx, path):
    """``(ModelProto, views)`` of the ONNX file ``path`` (:func:`read_model`,
    then external data read_model does not map); ModelImportError for a
    missing, empty, truncated or non-ONNX file."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    if size == 0:
        raise ModelImportError(f"{path}: empty file")
    try:
        model, views = read_model(onnx, path)
        _load_other_external(onnx, model, views, path)
    except ModelImportError:
        raise
    except Exception as exc:
        raise ModelImportError(f"{path}: not a readable ONNX model (truncated or not "
                               f"ONNX?): {type(exc).__name__}: {exc}") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelImportError(f"{path}: the file holds no ONNX graph (wrong format?)")
    return model, views


def _load_other_external(onnx, model, views, path):
    """External-data initializers that read_model does not map (an element
    type with no plain NumPy form): loaded into the protobuf by onnx."""
    rest = [i for i in model.graph.initializer if i.name not in views and
            i.data_location == onnx.TensorProto.EXTERNAL and
            any(e.key == "location" for e in i.external_data)]
    if rest:
        from onnx.external_data_helper import load_external_data_for_tensor
        base = os.path.dirname(os.path.abspath(path))
        for init in rest:
            load_external_data_for_tensor(init, base)
            init.data_location = onnx.TensorProto.DEFAULT


def read_model(onnx, path):
    """``(ModelProto, {initializer name: read-only ndarray})``: the model
    with its large initializers' data left in the file, and those data as
    views of it (see the module docstring).  Raises OSError if the file
    cannot be read; a file the wire walk cannot follow comes back from
    ``onnx.load`` whole, with no views.

    The walk's result for the last few files is kept (keyed by path, size
    and modification time; the views are of the read-only mapping), so
    importing the same file again -- a session's next input signature --
    starts from a copy of the stripped model instead of walking it."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    hit = _CACHE.get(key)
    if hit is None:
        hit = _read(onnx, path)
        if not hit[1]:                   # nothing read in place: nothing to keep
            return hit
        _CACHE[key] = hit
        while len(_CACHE) > _CACHE_FILES:
            _CACHE.pop(next(iter(_CACHE)))
    stripped, views = hit                # the kept model stays untouched: a copy
    copy = onnx.ModelProto()
    copy.CopyFrom(stripped)
    return copy, dict(views)


#: stripped models kept (read_model)
_CACHE_FILES = 4
_CACHE = {}


def _read(onnx, path):
    mf = map_file(path)
    with open(path, "rb") as f:
        r = _Reader(path, mf, f)
        try:
            stripped = _walk(r.buf, 0, len(mf), r.model)
        except (_Malformed, IndexError):
            return onnx.load(path, load_external_data=True), {}
    model = onnx.ModelProto.FromString(stripped)
    return model, r.views


def check_initializer_data(onnx, init, dt):
    """The data an initializer holds must fill its dims (checked before it
    is decoded, so the message names the tensor, not a NumPy reshape).
    Packed and exotic element types are left to onnx's own decoder."""
    T = onnx.TensorProto
    plain = {T.FLOAT, T.DOUBLE, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8, T.UINT16,
             T.UINT32, T.UINT64, T.FLOAT16, T.BOOL}
    if init.data_location == T.EXTERNAL or init.data_type not in plain:
        return
    want = math.prod(init.dims)
    if init.HasField("raw_data"):
        have, need, unit = len(init.raw_data), want * dt.itemsize, "bytes of raw data"
    else:
        have = sum(len(getattr(init, f)) for f in
                   ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"))
        need, unit = want, "values"
    if have != need:
        raise ModelImportError(f"initializer {init.name!r} holds {have:,} {unit} but its "
                               f"dims {list(init.dims)} need {need:,}")
