"""The float32 path of onnxruntime's com.microsoft Attention as a BERT
encoder uses it (attention_contrib.py falls back to the general NumPy
path otherwise): constant weights and bias, no past, no attention_bias,
not unidirectional, the mask absent or as right-padding ends (batch,) or
a 0/1 key mask (batch, total).

* Q, K and V projected by the packed SGEMM (weights packed once at setup,
  the bias added in registers) into planned scratch;
* the key mask built as onnxruntime builds it (``mask_filter_value`` on
  a masked key) into a (batch, 1, 1, seq) scratch row;
* ``pa_attention`` (csrc/kernels/attention.c) over Q, K and V where the
  projection left them (strided, no transposed copies): per (batch,
  head) the scores of four query rows at a time in L1, scaled, the mask
  added, the softmax, the weighted sum of V's rows written straight into
  the output's (batch, seq, heads * size) layout.  (Before: scores by
  BLAS into a (batch, heads, seq, seq) scratch, each step a pass over it,
  and a copy of the context: MiniLM at 256 tokens about 1.4x the time.)

Nothing is allocated per run: every temporary is a scratch buffer the
planner places.
"""
import math

import numpy as np

from ..._native import check, ffi, lib
from ..._native.kernels import NULL, fptr
from .linalg import _packed_product
from .native import NATIVE_DTYPE


def native_setup(k, x, w):
    """Set kernel ``k`` (MsAttention, after its own setup) on the native
    path when it applies (``k.fast``)."""
    k.fast = False
    if not (k.use_native and k.dtype == NATIVE_DTYPE and not k.causal and not k.has(4) and
            not k.has(5) and not k.has(6) and k.slots == [0] and
            np.dtype(k.ins[0].dtype) == NATIVE_DTYPE):
        return
    wd = k.ins[1].data
    bias = k.ins[2].data if k.has(2) else None
    if wd is None or (k.has(2) and bias is None) or len(set(k.sizes)) != 1:
        return
    mask = k.shape(3) if k.has(3) else None
    b, s, h = x
    if mask is not None and tuple(mask) not in ((b,), (b, s)):
        return
    n = k.num_heads
    size = k.sizes[0] // n
    k.dims = (b, s, n, size)
    k.packed_of = (wd, bias)
    _packed_product(k, None if k.sizing else np.asarray(wd, np.float32).T,
                   None if bias is None else np.asarray(bias, np.float32).reshape(-1),
                   b * s, h, w[1])
    k.runtime = (0, 3) if mask is not None else (0,)
    k.scale_value = np.float32(k.scale if k.scale else 1 / math.sqrt(size))
    k.fill_value = np.float32(k.fill)
    k.positions = np.arange(1, s + 1, dtype=np.float32).reshape(1, 1, 1, s)   # j + 1
    row = 3 * n * size      # Q, K and V side by side in a projected row
    k.att = ffi.new("pa_attention_t *", {
        "batch": b, "heads": n, "rows": s, "keys": s, "size": size, "causal": -1,
        "scale": float(k.scale_value),
        "q": [s * row, size, row, 1], "k": [s * row, size, row, 1],
        "v": [s * row, size, row, 1], "mask": [s if b > 1 else 0, 0, 0, 1],
        "out": [s * n * size, size, n * size, 1]})
    floats = lib.pa_attention_scratch_floats(k.att)
    if not floats:
        return
    k.scratch = [((b * s, w[1]), np.float32), ((int(floats),), np.float32),
                 ((b, 1, 1, s), np.float32)]
    k.fast = True


def native_run(k, xs, ys, sc):
    """One run of the native path (see the module docstring)."""
    b, s, n, size = k.dims
    qkv, work, add = sc
    st = lib.pa_conv2d_run(k.desc, k.packed_ptr, fptr(xs[0]), fptr(qkv), k.workers)
    if st:
        check(st, f"Attention {k.op.name!r}")
    mask = xs[3] if len(xs) > 3 else None
    if mask is not None:
        # masked: 1, kept: 0 -- a 0/1 key mask as 1 - clip(mask, 0, 1); the
        # ends form as clip(j + 1 - end, 0, 1); then times mask_filter_value
        if mask.ndim == 2:
            np.copyto(add, mask.reshape(b, 1, 1, s), casting="unsafe")
            np.clip(add, 0, 1, out=add)
            np.subtract(np.float32(1), add, out=add)
        else:
            np.copyto(add, k.positions)
            np.subtract(add, mask.reshape(b, 1, 1, 1), out=add, casting="unsafe")
            np.clip(add, 0, 1, out=add)
        np.multiply(add, k.fill_value, out=add)
    p = fptr(qkv)
    st = lib.pa_attention(k.att, p, p + n * size, p + 2 * n * size,
                          NULL if mask is None else fptr(add), fptr(ys[0]), fptr(work),
                          k.workers)
    if st:
        check(st, f"Attention {k.op.name!r}")
