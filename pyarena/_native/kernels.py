"""The native float32 kernels of the C core, as the runtime calls them.

Thin on purpose: descriptors (``conv2d``, ``pool2d``, ``act_params``) are
cffi structs built once per operator, ``fptr`` turns a NumPy array into the
``float *`` the C functions take (``ffi.from_buffer``, which keeps the
array alive and refuses a non-contiguous one), and :class:`Workers` owns a
``pa_workers_t`` thread pool.  Status codes become exceptions through
:func:`pyarena._native.check`.  Every call passes raw pointers into the
caller's (planned) memory; nothing here allocates per call.
"""
import math
from functools import partial

import numpy as np

from ..errors import InvalidArgumentError
from . import check, ffi, lib

__all__ = ["ACTIVATIONS", "act_params", "conv2d", "pack_conv2d", "pool2d", "fptr", "iptr",
           "Workers", "NULL", "CallList", "copy_call", "CALL", "deconv2d", "pack_deconv2d"]

NULL = ffi.NULL

#: activation name -> pa_act_t: the header's PA_ACT_* enum, read from it
ACTIVATIONS = {n[len("PA_ACT_"):]: getattr(lib, n) for n in dir(lib) if n.startswith("PA_ACT_")}

_LAYOUT = {"NCHW": lib.PA_LAYOUT_NCHW, "NHWC": lib.PA_LAYOUT_NHWC}


def fptr(arr):
    """``float *`` into a C-contiguous float32 array (kept alive by it)."""
    return ffi.from_buffer("float[]", arr)


def iptr(arr):
    """``int32_t *`` into a C-contiguous int32 array."""
    return ffi.from_buffer("int32_t[]", arr)


def layout(name):
    return _LAYOUT[name]


def act_params(kind="NONE", alpha=0.0, beta=0.0):
    """A ``pa_act_params_t *`` for an activation name of :data:`ACTIVATIONS`."""
    return ffi.new("pa_act_params_t *", {"kind": ACTIVATIONS[kind], "alpha": float(alpha),
                                          "beta": float(beta)})


def conv2d(*, nhwc, n, c_in, h, w, c_out, h_out, w_out, kh, kw, sh, sw, dh, dw,
           pad_top, pad_left, groups, act):
    """A ``pa_conv2d_t *`` (``act``: a ``pa_act_params_t *``)."""
    return ffi.new("pa_conv2d_t *", {
        "layout": lib.PA_LAYOUT_NHWC if nhwc else lib.PA_LAYOUT_NCHW,
        "n": n, "c_in": c_in, "h": h, "w": w, "c_out": c_out, "h_out": h_out,
        "w_out": w_out, "kh": kh, "kw": kw, "sh": sh, "sw": sw, "dh": dh, "dw": dw,
        "pad_top": pad_top, "pad_left": pad_left, "groups": groups, "act": act[0]})


def conv2d_packed_floats(desc):
    """Floats of ``desc``'s packed weights; InvalidArgumentError for a
    geometry the C kernel cannot take."""
    n = lib.pa_conv2d_packed_size(desc)
    if n == 0:
        raise InvalidArgumentError("native conv2d: geometry out of range")
    return int(n)


def pack_conv2d(desc, weight_ohwi, bias, out_alloc):
    """Pack OHWI weights (and a bias or None) for ``desc`` into an array
    from ``out_alloc(n_floats)``; returns that array."""
    n = conv2d_packed_floats(desc)
    packed = out_alloc(n)
    w = np.ascontiguousarray(weight_ohwi, dtype=np.float32)
    b = NULL if bias is None else fptr(np.ascontiguousarray(bias, dtype=np.float32))
    check(lib.pa_conv2d_pack(desc, fptr(w), b, fptr(packed), n), "pa_conv2d_pack")
    return packed


def deconv2d(*, n, c_in, h, w, c_out, kh, kw, act):
    """A ``pa_deconv2d_t *`` (NCHW; ``act``: a ``pa_act_params_t *``)."""
    return ffi.new("pa_deconv2d_t *", {
        "layout": lib.PA_LAYOUT_NCHW, "n": n, "c_in": c_in, "h": h, "w": w, "c_out": c_out,
        "kh": kh, "kw": kw, "act": act[0]})


def pack_deconv2d(desc, weight_iohw, bias, out_alloc):
    """Pack ConvTranspose weights ([c_in][c_out][kh][kw]) and a bias (or
    None) for ``desc`` into an array from ``out_alloc(n_floats)``; returns
    that array.  InvalidArgumentError for a geometry the C kernel cannot
    take."""
    n = int(lib.pa_deconv2d_packed_size(desc))
    if n == 0:
        raise InvalidArgumentError("native deconv2d: geometry out of range")
    packed = out_alloc(n)
    w = np.ascontiguousarray(weight_iohw, dtype=np.float32)
    b = NULL if bias is None else fptr(np.ascontiguousarray(bias, dtype=np.float32))
    check(lib.pa_deconv2d_pack(desc, fptr(w), b, fptr(packed), n), "pa_deconv2d_pack")
    return packed


def pool2d(*, nhwc, n, c, h, w, h_out, w_out, kh, kw, sh, sw, pads, count_include_pad):
    """A ``pa_pool2d_t *``; ``pads`` = (top, left, bottom, right)."""
    pt, pl, pb, pr = (int(v) for v in pads)
    return ffi.new("pa_pool2d_t *", {
        "layout": lib.PA_LAYOUT_NHWC if nhwc else lib.PA_LAYOUT_NCHW,
        "n": n, "c": c, "h": h, "w": w, "h_out": h_out, "w_out": w_out, "kh": kh, "kw": kw,
        "sh": sh, "sw": sw, "pad_top": pt, "pad_left": pl, "pad_bottom": pb,
        "pad_right": pr, "count_include_pad": int(count_include_pad)})


#: call kind name -> pa_call_kind_t
CALL = {"conv2d": lib.PA_CALL_CONV2D, "conv2d_residual": lib.PA_CALL_CONV2D_RESIDUAL,
        "maxpool": lib.PA_CALL_MAXPOOL, "avgpool": lib.PA_CALL_AVGPOOL,
        "prelu": lib.PA_CALL_PRELU, "act": lib.PA_CALL_ACT, "copy": lib.PA_CALL_COPY,
        "qconv2d": lib.PA_CALL_QCONV2D, "qbinary": lib.PA_CALL_QBINARY,
        "qlookup": lib.PA_CALL_QLOOKUP, "quantize": lib.PA_CALL_QUANTIZE,
        "dequantize": lib.PA_CALL_DEQUANTIZE, "add": lib.PA_CALL_ADD,
        "layer_norm": lib.PA_CALL_LAYER_NORM,
        "transpose_planes": lib.PA_CALL_TRANSPOSE_PLANES, "deconv2d": lib.PA_CALL_DECONV2D,
        "qrequant": lib.PA_CALL_QREQUANT, "avgpool_ordered": lib.PA_CALL_AVGPOOL_ORDERED,
        "qavgpool": lib.PA_CALL_QAVGPOOL}


def _inner_axis(a):
    """The first axis of ``a``'s C-contiguous trailing part."""
    inner, k = a.itemsize, a.ndim
    while k and (a.shape[k - 1] == 1 or a.strides[k - 1] == inner):
        inner *= a.shape[k - 1]
        k -= 1
    return k


def _blocks(a, k=None):
    """(count, bytes, stride) of ``a`` as equally spaced contiguous blocks
    of its axes from ``k`` on (default: its whole C-contiguous trailing
    part), the axes before them one constant stride; None when they are
    not."""
    k = _inner_axis(a) if k is None else k
    inner = a.itemsize * math.prod(a.shape[k:])
    outer = [(d, st) for d, st in zip(a.shape[:k], a.strides[:k]) if d != 1]
    if not outer:
        return 1, inner, 0
    count, stride = outer[-1]
    for d, st in reversed(outer[:-1]):
        if st != stride * count:
            return None
        count *= d
    return count, inner, stride


def copy_call(dst, src):
    """The ``pa_call_t`` record (see :class:`CallList`) of ``np.copyto(dst,
    src)`` for two arrays of one shape and dtype that are equally spaced
    blocks with one split (their common C-contiguous trailing axes); None
    when they are not."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        return None
    if dst.size == 0:
        return ("copy", None, None, None, None, None, (0, 0, 0, 0))
    k = max(_inner_axis(dst), _inner_axis(src))
    d, s = _blocks(dst, k), _blocks(src, k)
    if d is None or s is None or d[:2] != s[:2]:
        return None
    return ("copy", None, None, src, None, dst, (d[0], d[1], s[2], d[2]))


def _address(p):
    if p is None:
        return NULL
    if isinstance(p, np.ndarray):
        return ffi.cast("void *", p.__array_interface__["data"][0])
    if type(p) is int:          # an address already (see CallList)
        return ffi.cast("void *", p)
    return p


class CallList:
    """Native kernel calls run in order by one ``pa_calls_run``.  Each
    record is ``(kind, params, w, a, b, y, sizes)`` or ``(..., sizes, s)``:
    a :data:`CALL` name, the kernel's descriptor (a cffi pointer or None),
    its weights, input, second input and output (cffi pointers, NumPy
    arrays -- their first element, strided views too --, addresses as
    ints, or None), up to
    four sizes and its workspace (likewise, or None); the
    records, and so what their pointers point into, are kept alive here --
    unless ``hold`` is given: then only ``hold`` is, and the caller keeps
    alive everything else the pointers point into (a patched stage's
    thousands of band views and pointers held for nothing but that cost
    more than the arena its bands saved)."""

    def __init__(self, records, names=None, hold=None):
        self.n = len(records)
        self.names = names
        self.arr = ffi.new("pa_call_t[]", max(self.n, 1))
        if self.n and type(records[0]) is bytes:    # packed (pack_call): as they lie
            ffi.memmove(self.arr, b"".join(records), self.n * ffi.sizeof("pa_call_t"))
            self._kinds = None
        else:
            self._kinds = [r[0] for r in records]
            for call, rec in zip(self.arr, records):
                _fill(call, rec)
        self.keep = records if hold is None else hold
        self.failed = ffi.new("size_t *")

    def run(self, workers, what):
        st = lib.pa_calls_run(self.arr, self.n, NULL if workers is None else workers,
                              self.failed)
        if st:
            self.fail(st, what)

    def bound(self, workers):
        """``pa_calls_run`` of this list with ``workers`` as a call of no
        arguments returning its status (a cached step's: no lookups per
        run); a status other than 0 goes to :meth:`fail`."""
        return partial(lib.pa_calls_run, self.arr, self.n,
                       NULL if workers is None else workers, self.failed)

    def fail(self, st, what):
        """Raise for status ``st`` of a run, naming the call that failed."""
        i = self.failed[0]
        of = f" of {self.names[i]!r}" if self.names else ""
        check(st, f"{what}: call {i} ({self.kinds[i]}{of})")

    @property
    def kinds(self):
        """The :data:`CALL` name of each call (of packed records: read back)."""
        if self._kinds is not None:
            return self._kinds
        return [_KIND[self.arr[i].kind] for i in range(self.n)]


_KIND = {v: k for k, v in CALL.items()}


def _fill(call, rec):
    """Set the ``pa_call_t`` ``call`` from record ``rec`` (see CallList)."""
    kind, params, w, a, b, y, sizes, *s = rec
    call.kind = CALL[kind]
    call.params = NULL if params is None else params
    call.w = NULL if w is None else ffi.cast("const float *", _address(w))
    call.a, call.b, call.y = _address(a), _address(b), _address(y)
    call.s = _address(s[0]) if s else NULL
    for j, v in enumerate(sizes):
        call.i[j] = int(v)


def pack_call(rec):
    """Record ``rec`` (see :class:`CallList`) as the bytes of its
    ``pa_call_t``: what a ``CallList`` given ``hold`` copies as it is.  A
    patched stage makes a record per band and op at its first run; held
    as tuples of addresses until the list is made, they were a transient
    of ~350 bytes each (a third of a MiB on palm detection lite, left
    resident in the interpreter's arenas), packed ~120."""
    one = ffi.new("pa_call_t *")
    _fill(one[0], rec)
    return bytes(ffi.buffer(one))


class Workers:
    """A ``pa_workers_t``: ``n`` threads run each native kernel (the
    calling thread and n - 1 helpers).  ``handle`` is what the kernels
    take; ``close()`` joins the threads (twice is fine; also on garbage
    collection)."""

    def __init__(self, n):
        n = int(n)
        if n < 1:
            raise InvalidArgumentError(f"threads must be >= 1, not {n}")
        st = ffi.new("pa_status_t *")
        h = lib.pa_workers_create(n, st)
        check(st[0], f"pa_workers_create({n})")
        self.n = n
        self._destroy = lib.pa_workers_destroy
        self.handle = h

    def close(self):
        h, self.handle = self.handle, NULL
        if h != NULL:
            self._destroy(h)

    def __del__(self):
        try:
            self.close()
        except Exception:   # interpreter shutdown: nothing to do
            pass
