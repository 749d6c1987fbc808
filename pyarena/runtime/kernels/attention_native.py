"""The float32 path of onnxruntime's com.microsoft Attention as a BERT
encoder uses it (attention_contrib.py falls back to the general NumPy
path otherwise): constant weights and bias, no past, no attention_bias,
not unidirectional, the mask absent or as right-padding ends (batch,) or
a 0/1 key mask (batch, total).

* Q, K and V projected by the packed SGEMM (weights packed once at setup,
  the bias added in registers) into planned scratch;
* per head, scores = Q K^T by BLAS into planned scratch (batch, heads,
  seq, seq), scaled, the key mask added as onnxruntime builds it
  (``mask_filter_value`` on a masked key), the softmax by
  ``pa_softmax_rows`` in place, then probabilities times V into a
  (batch, heads, seq, size) scratch, copied into the output's
  (batch, seq, heads * size) layout.

Nothing is allocated per run: every temporary is a scratch buffer the
planner places.
"""
import math

import numpy as np

from ..._native import check, lib
from ..._native.kernels import fptr
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
    k.scratch = [((b * s, w[1]), np.float32), ((b, n, s, s), np.float32),
                 ((b, n, s, size), np.float32), ((b, 1, 1, s), np.float32)]
    k.fast = True


def native_run(k, xs, ys, sc):
    """One run of the native path (see the module docstring)."""
    b, s, n, size = k.dims
    qkv, scores, ctx, add = sc
    st = lib.pa_conv2d_run(k.desc, k.packed_ptr, fptr(xs[0]), fptr(qkv), k.workers)
    if st:
        check(st, f"Attention {k.op.name!r}")
    split = qkv.reshape(b, s, 3, n, size)
    q = split[:, :, 0].transpose(0, 2, 1, 3)
    kt = split[:, :, 1].transpose(0, 2, 3, 1)
    v = split[:, :, 2].transpose(0, 2, 1, 3)
    np.matmul(q, kt, out=scores)
    np.multiply(scores, k.scale_value, out=scores)
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
        np.add(scores, add, out=scores)
    check(lib.pa_softmax_rows(fptr(scores), fptr(scores), b * n * s, s, k.workers),
          f"Attention {k.op.name!r}")
    np.matmul(scores, v, out=ctx)
    np.copyto(ys[0].reshape(b, s, n, size), ctx.transpose(0, 2, 1, 3))
