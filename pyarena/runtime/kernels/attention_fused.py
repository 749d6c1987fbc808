"""The fused scaled dot-product attention that runtime/fusion_attention.py
puts where a graph spelled it out (MatMul, scale, mask Add, Softmax,
MatMul), run by the C core's ``pa_attention`` (csrc/kernels/attention.c).

``pyarena.Attention(q, k, v[, mask][, position]) -> out``.  Each operand
is a rank-4 tensor as the graph holds it; the attributes ``q_axes``,
``k_axes``, ``v_axes`` name, for each of the logical axes (batch, head,
row or key, element), the axis of the tensor that holds it (the
Transposes the rewrite absorbed), and ``out_axes`` the axis of the output
that holds each logical axis.  A size-1 axis against a larger one
broadcasts (stride 0); ``mask`` (float32, any rank <= 4) broadcasts as in
an Add.  ``scale`` multiplies the scores before the mask is added.

``position`` (int64 (1,), the KV-cache session's past length, see
:mod:`pyarena.importers.session_kv`): the keys are a cache whose rows
from ``position + rows`` on are not written yet; only the live ones are
read, query i seeing keys up to ``position + i`` -- a step costs what its
live length costs, not the cache's.

Nothing is allocated per run: the scores of one query row, or of a block
of four (the C core's register tiles, for an encoder's many rows), live
in a slot of planned scratch per (batch, head) pair.  The C path also
beats BLAS on an encoder's attention (MiniLM, 12 heads of 32, one
thread: 16 rows 17 vs 16 us, 64 rows 85 vs 101, 256 rows 0.88 vs 1.28
ms): the scores stay in L1 where BLAS's products, the scale, the mask and
the softmax each pass over a (batch, heads, rows, keys) tensor, and its
tiles use AVX-512 where NumPy's OpenBLAS takes its AVX2 kernels.
``BLAS_ROWS`` (None: never) keeps that BLAS path, over the operands'
strided views, for a test to compare against.
"""
import numpy as np

from ..._native import check, ffi, lib
from ..._native.kernels import NULL, fptr
from ...errors import InvalidArgumentError
from .registry import Kernel, register

_F32 = np.dtype(np.float32)
#: query rows from which an attention without a cache runs on BLAS (None:
#: never; the C path, see the module docstring)
BLAS_ROWS = None


def _strides(shape, axes, logical):
    """Element strides of a C-contiguous ``shape`` seen through ``axes``
    as the logical (batch, head, row, element) dims ``logical``: 0 where a
    size-1 axis broadcasts; None where a size differs otherwise."""
    st, step = [0] * len(shape), 1
    for a in range(len(shape) - 1, -1, -1):
        st[a] = step
        step *= shape[a]
    out = []
    for want, a in zip(logical, axes):
        if shape[a] == want:
            out.append(st[a] if want > 1 else 0)
        elif shape[a] == 1:
            out.append(0)
        else:
            return None
    return out


def _mask_strides(shape, logical):
    """A mask of ``shape`` broadcast against the scores ``logical``
    (batch, heads, rows, keys), right-aligned: its strides, or None."""
    if len(shape) > 4:
        return None
    full = (1,) * (4 - len(shape)) + tuple(shape)
    return _strides(full, (0, 1, 2, 3), logical)


@register
class FusedAttention(Kernel):
    """pyarena.Attention: see the module docstring."""

    op_types = ("pyarena.Attention",)
    onnx_domain = "pyarena"
    family = "linalg"
    inplace = "none"
    fold = "never"

    path = "native"
    _ptrs = None        # the operands' pointers, kept once the views are bound

    def setup(self):
        axes = {n: [int(a) for a in self.attrs[f"{n}_axes"]] for n in ("q", "k", "v", "out")}
        q, k, v, o = self.shape(0), self.shape(1), self.shape(2), self.oshape()
        if any(len(s) != 4 for s in (q, k, v, o)) or \
                any(np.dtype(t.dtype) != _F32 for t in self.ins[:3] + self.outs[:1]):
            self.malformed("q, k, v and the output are rank-4 float32 tensors")
        lq = [q[a] for a in axes["q"]]
        lk = [k[a] for a in axes["k"]]
        batch, heads = max(lq[0], lk[0]), max(lq[1], lk[1])
        rows, keys, size = lq[2], lk[2], lk[3]
        lv = [v[a] for a in axes["v"]]
        batch, heads = max(batch, lv[0]), max(heads, lv[1])
        desc = {"batch": batch, "heads": heads, "rows": rows, "keys": keys, "size": size,
                "causal": -1, "scale": float(self.attrs.get("scale", 1.0))}
        if lq[3] != size or lv[2] != keys or lv[3] != size:
            self.malformed(f"q {list(q)}, k {list(k)} and v {list(v)} do not fit one "
                           f"attention")
        for name, shape, logical in (("q", q, (batch, heads, rows, size)),
                                     ("k", k, (batch, heads, keys, size)),
                                     ("v", v, (batch, heads, keys, size)),
                                     ("out", o, (batch, heads, rows, size))):
            st = _strides(shape, axes[name], logical)
            if st is None:
                self.malformed(f"{name} {list(shape)} does not fit the attention of (batch, "
                               f"heads, rows, keys, size) {[batch, heads, rows, keys, size]}")
            desc[name] = st
        if [o[a] for a in axes["out"]] != [batch, heads, rows, size]:
            self.malformed(f"output {list(o)} is not (batch, heads, rows, size) "
                           f"{[batch, heads, rows, size]} laid out by {axes['out']}")
        self.has_mask = self.has(3)
        desc["mask"] = [0, 0, 0, 0]
        if self.has_mask:
            st = _mask_strides(self.shape(3), (batch, heads, rows, keys))
            if st is None or np.dtype(self.ins[3].dtype) != _F32:
                self.malformed(f"mask {list(self.shape(3))} does not broadcast to the "
                               f"scores {[batch, heads, rows, keys]}")
            desc["mask"] = st
        self.live = self.has(4)         # a KV cache's past length, read each run
        self.held = keys
        self.desc = ffi.new("pa_attention_t *", desc)
        floats = lib.pa_attention_scratch_floats(self.desc)
        if not floats:
            self.malformed(f"sizes {[batch, heads, rows, keys, size]} out of range")
        self.scratch = [((int(floats),), np.float32)]
        self.blas = BLAS_ROWS is not None and not self.live and rows >= BLAS_ROWS
        if self.blas:
            self.dims = (batch, heads, rows, keys, size)
            # (beside the C path's part: a plan made for a bucket's length
            # serves the shorter ones, which may take the C path)
            self.scratch += [((batch, heads, rows, keys), np.float32),
                             ((batch, heads, rows, size), np.float32)]
            self.scale_value = np.float32(desc["scale"])
            self.mask_rank = len(self.shape(3)) if self.has_mask else 0

    def _views(self, xs, ys):
        """q, k^T, v and the output seen as (batch, heads, rows or keys,
        size), the mask as 4-D: views, no copies."""
        ax = self.attrs
        q = xs[0].transpose(ax["q_axes"])
        kt = xs[1].transpose(ax["k_axes"]).swapaxes(2, 3)
        v = xs[2].transpose(ax["v_axes"])
        out = ys[0].transpose(ax["out_axes"])
        mask = None
        if self.has_mask:
            mask = xs[3].reshape((1,) * (4 - self.mask_rank) + xs[3].shape)
        return q, kt, v, out, mask

    def _run_blas(self, xs, ys, sc):
        _, scores, ctx = sc
        q, kt, v, out, mask = self._views(xs, ys)
        np.matmul(q, kt, out=scores)
        np.multiply(scores, self.scale_value, out=scores)
        if mask is not None:
            np.add(scores, mask, out=scores)
        b, h, m, n, _ = self.dims
        check(lib.pa_softmax_rows(fptr(scores), fptr(scores), b * h * m, n, self.workers),
              f"Attention {self.op.name!r}")
        np.matmul(scores, v, out=ctx)
        np.copyto(out, ctx)

    def __call__(self, xs, ys, scratch=None):
        if self._ptrs is None:      # (the first run, or the BLAS path: views carved)
            super().__call__(xs, ys, scratch)
        else:
            self._run_c(xs)

    def run(self, xs, ys, sc):
        if self.blas:
            self._run_blas(xs, ys, sc)
            return
        p = (fptr(xs[0]), fptr(xs[1]), fptr(xs[2]),
             fptr(xs[3]) if self.has_mask else NULL, fptr(ys[0]), fptr(sc[0]))
        if self.stable:     # the same planned views every run from now on
            self._ptrs = p
        self._run_c(xs, p)

    def _run_c(self, xs, p=None):
        d = self.desc
        if self.live:
            at = int(xs[4][0])
            if at < 0 or at + d.rows > self.held:
                raise InvalidArgumentError(
                    f"operator {self.op.name!r} (pyarena.Attention): {d.rows} rows at "
                    f"position {at} pass the {self.held} keys held")
            d.keys, d.causal = at + d.rows, at
        p = p or self._ptrs
        st = lib.pa_attention(d, p[0], p[1], p[2], p[3], p[4], p[5], self.workers)
        if st:
            check(st, f"Attention {self.op.name!r}")
