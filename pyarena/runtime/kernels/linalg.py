"""Matrix products: MatMul, Gemm (alpha, beta, transposes; a constant C
folded at build time) and TFLite's FullyConnected.  Gemm with a run-time
C and beta != 1 takes one output-sized scratch buffer.

A product with constant weights -- Gemm of a constant B (alpha 1, A not
transposed, C constant per output column or absent) and FullyConnected of
constant float32 weights -- runs the C core's packed SGEMM (the NHWC
pointwise convolution's tile over the rows of A as pixels): B is packed
once at setup, as onnxruntime prepacks it, where BLAS packs it again at
every call (ddddocr's CRNN head, 24 x 512 by 512 x 8210: see
docs/native-kernels.md).  A new input signature's kernel takes the
prior one's packed copy of the same arrays.
"""
import math

import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .attention_core import attend, heads as _heads, masked as _masked, rotary_parts, rotate
from .native import NATIVE_DTYPE, native_act
from . import shape_rules as rules
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .registry import Kernel, const, register


_SCALARS = {}      # (beta, transB) -> one tuple object, compared by identity


def _packed_product(k, b, bias, rows, n_in, n_out, act=None):
    """Set up kernel ``k`` to run ``y[rows, n_out] = act(x[rows, n_in] @ b.T
    + bias)`` on the packed SGEMM (``b``: [n_out, n_in]; ``act``: a
    ``pa_act_params_t *``, None: none); ``k.packed`` from the prior kernel
    when it packed the same arrays (``k.packed_of``: the objects the
    packing depends on, compared by identity)."""
    k.desc = nk.conv2d(nhwc=True, n=1, c_in=n_in, h=1, w=rows, c_out=n_out, h_out=1,
                       w_out=rows, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pad_top=0,
                       pad_left=0, groups=1, act=act or nk.act_params("NONE"))
    p = k.prior
    if k.sizing:        # nothing packed; what packing would keep counted
        k.keep.count(nk.conv2d_packed_floats(k.desc) * 4)
        k.packed = k.packed_ptr = None
    elif _lends_packing(k, nk.conv2d_packed_floats(k.desc)):
        k.packed, k.packed_ptr = p.packed, p.packed_ptr
    else:
        k.packed = k.kept_layout((nk.conv2d_packed_floats(k.desc),), np.float32,
                                 lambda: nk.pack_conv2d(k.desc, b.reshape(n_out, 1, 1, n_in),
                                                        bias, k.kept_empty))
        k.packed_ptr = nk.fptr(k.packed)
    k.runtime = (0,)


def _lends_packing(k, floats):
    """True when ``k``'s prior packed the same arrays (``packed_of``,
    compared by identity) into ``floats`` floats."""
    p = k.prior
    return (p is not None and type(p) is type(k) and getattr(p, "packed", None) is not None
            and len(p.packed_of) == len(k.packed_of)
            and all(u is v for u, v in zip(p.packed_of, k.packed_of))
            and (floats is None or floats == p.packed.size))


def _run_packed(k, x, y):
    st = lib.pa_conv2d_run(k.desc, k.packed_ptr, nk.fptr(x), nk.fptr(y), k.workers)
    if st:
        check(st, f"{k.op.op_type} {k.op.name!r}")


@register
class MatMul(Kernel):
    """MatMul; with constant float32 2-D weights, the packed SGEMM over the
    rows of A (every leading axis), weights packed once at setup.  The
    graph rewrite (runtime/fusion_linear.py) may give it a constant bias
    as input 2 (the Add after it) and an ``activation`` (GELU): the SGEMM
    adds and applies them in registers; the NumPy path adds the bias and
    the registry applies the activation after."""

    op_types = ('MatMul',)
    family = 'linalg'
    inplace = 'none'
    shape_rule = rules.matmul
    fold = 'expanding'

    packed = None

    @property
    def path(self):
        return "numpy" if self.packed is None else "native"

    def setup(self):
        w = self.ins[1].data
        bias = self.ins[2].data if self.has(2) else None
        a = self.shape(0)
        if self.op.notes.tied_weight is not None:
            return      # another op's table: read where it lies (runtime/tied.py)
        if not (self.use_native and self.dtype == NATIVE_DTYPE and w is not None and
                len(self.shape(1)) == 2 and len(a) >= 2 and
                np.dtype(self.ins[0].dtype) == NATIVE_DTYPE and (bias is not None or
                                                               not self.has(2))):
            return
        act = native_act(self.attrs)
        if act is None:
            return
        n_in, n_out = self.shape(1)
        rows = math.prod(a[:-1])
        if math.prod(self.oshape()) != rows * n_out or rows < 1:
            return
        tag = ("MatMul", str(self.attrs.get("activation")))
        self.packed_of = (w, bias, _SCALARS.setdefault(tag, tag))
        _packed_product(self, None if self.sizing else np.asarray(w, np.float32).T,
                        None if bias is None else np.asarray(bias, np.float32).reshape(-1),
                        rows, n_in, n_out, act)
        self.act_fused = True

    def run(self, xs, ys, sc):
        if self.packed is not None:
            _run_packed(self, xs[0], ys[0])
            return
        np.matmul(xs[0], xs[1], out=ys[0])
        if len(xs) > 2 and xs[2] is not None:
            np.add(ys[0], xs[2], out=ys[0])

    def native_call(self, xs, ys):
        """The packed SGEMM as a ``pa_call_t`` record (a run of them and
        of the other C kernels is one C call: a decode step's linear
        layers, each a few microseconds of arithmetic); None on the NumPy
        path."""
        if self.packed is None or self.packed_ptr is None:
            return None
        return ("conv2d", self.desc, self.packed_ptr, nk.fptr(xs[0]), None, nk.fptr(ys[0]), ())


@register
class Gemm(Kernel):
    """y = alpha * A' @ B' + beta * C.  A constant B of float32 runs the C
    core's packed SGEMM (``packed``), except for one row of A: a
    matrix-vector product, where BLAS's gemv reads B once as it lies and
    the packed tile would fill one of its six rows (a streaming LSTM's
    1 x 128 @ 128 x 512 gate product: 5.0 vs 8.5 us; 1 x 256 @ 256 x 1024:
    16.9 vs 29.0 us) -- unless a prior signature of the session packed B
    already (then its packing: B is not held twice)."""

    op_types = ('Gemm',)
    family = 'linalg'
    inplace = 'none'
    shape_rule = rules.gemm
    fold = 'expanding'

    packed = None

    def setup(self):
        self.ta = int(self.attrs.get("transA", 0))
        self.tb = int(self.attrs.get("transB", 0))
        alpha = float(self.attrs.get("alpha", 1.0))
        beta = float(self.attrs.get("beta", 1.0))
        self.alpha = None if alpha == 1.0 else const(alpha, self.dtype)
        self.c = None
        self.beta = None
        if self._setup_packed(beta):
            return
        if self.has(2):
            if self.ins[2].data is not None:
                c = np.asarray(self.ins[2].data, dtype=self.dtype)
                # read where it lies (no weight bytes added) unless scaled or
                # unaligned (a mapped file's: every run's add would copy it)
                self.c = c if beta == 1.0 and c.flags.aligned else \
                    self.keep(np.ascontiguousarray(c * beta))
                self.runtime = (0, 1)
            else:
                self.beta = const(beta, self.dtype) if beta != 1.0 else None
                if self.beta is not None:
                    self.scratch = [(self.oshape(), self.dtype)]

    def _setup_packed(self, beta):
        b = self.ins[1].data
        if self.op.notes.tied_weight is not None:
            return False    # another op's table: read where it lies (runtime/tied.py)
        if not (self.use_native and self.dtype == NATIVE_DTYPE and not self.ta and
                self.alpha is None and b is not None and len(self.shape(0)) == 2):
            return False
        rows, n_in = self.shape(0)
        n_out = self.oshape()[1]
        if self.oshape()[0] != rows:    # the SGEMM writes a row per row of x
            self.malformed(f"output {list(self.oshape())} does not have the {rows} rows "
                           f"of input {list(self.shape(0))}")
        bias, cdata = None, None
        if self.has(2):
            cdata = self.ins[2].data
            if cdata is None:
                return False
            c = np.asarray(cdata, dtype=np.float64)
            if c.size == 1:
                c = np.full(n_out, c.reshape(-1)[0])
            elif c.shape not in ((n_out,), (1, n_out)):
                return False        # one value per row or element: not a bias
            bias = (c.reshape(-1) * beta).astype(np.float32)
        self.packed_of = (b, cdata, _SCALARS.setdefault((beta, self.tb), (beta, self.tb)))
        if rows == 1 and not _lends_packing(self, None):
            return False    # a matrix-vector product: BLAS's gemv (see the class doc)
        if self.sizing:
            _packed_product(self, None, None, rows, n_in, n_out)
        else:
            w = np.asarray(b, dtype=np.float32)
            _packed_product(self, w if self.tb else w.T, bias, rows, n_in, n_out)
        return True

    @property
    def path(self):
        return "numpy" if self.packed is None else "native"

    def run(self, xs, ys, sc):
        if self.packed is not None:
            _run_packed(self, xs[0], ys[0])
            return
        a, b, y = xs[0], xs[1], ys[0]
        if self.ta:
            a = a.T
        if self.tb:
            b = b.T
        np.matmul(a, b, out=y)
        if self.alpha is not None:
            np.multiply(y, self.alpha, out=y)
        if self.c is not None:
            np.add(y, self.c, out=y)
        elif self.has(2):
            c = xs[2]
            if self.beta is not None:
                np.multiply(np.broadcast_to(c, y.shape), self.beta, out=sc[0])
                c = sc[0]
            np.add(y, c, out=y)


@register
class FullyConnected(Kernel):
    """TFLite FULLY_CONNECTED: y = x.reshape(-1, K) @ W.T + b, W (units, K)."""

    op_types = ('FullyConnected',)
    family = 'linalg'
    inplace = 'none'
    tflite = {'FULLY_CONNECTED': ('FullyConnected', {}, tfl.fully_connected)}

    packed = None

    def setup(self):
        self.units, self.k = self.shape(1)
        n = math.prod(self.shape(0))
        if n % self.k:
            self.fail(f"input size {n} is not a multiple of {self.k}")
        self.rows = n // self.k
        if math.prod(self.oshape()) != self.rows * self.units:
            self.malformed(f"output {list(self.oshape())} does not hold {self.rows} rows of "
                           f"{self.units} units")
        w = self.ins[1].data
        bias = self.ins[2].data if len(self.ins) > 2 and self.ins[2] is not None else None
        if self.use_native and self.dtype == NATIVE_DTYPE and w is not None and \
                (len(self.ins) < 3 or self.ins[2] is None or bias is not None):
            self.packed_of = (w, bias)
            _packed_product(self, None if self.sizing else np.asarray(w, np.float32),
                            None if bias is None else np.asarray(bias, np.float32),
                            self.rows, self.k, self.units)

    def run(self, xs, ys, sc):
        if self.packed is not None:
            _run_packed(self, xs[0], ys[0])
            return
        x = xs[0].reshape(self.rows, self.k)
        y = ys[0].reshape(self.rows, self.units)
        np.matmul(x, xs[1].T, out=y)
        if len(xs) > 2 and xs[2] is not None:
            np.add(y, xs[2], out=y)


@register
class Attention(Kernel):
    """Attention (opsets 23-25): softmax(Q K^T * scale + bias) V per head,
    with 3-D inputs split into heads, the past cache concatenated before
    the new keys and values (present_key / present_value), grouped-query
    heads repeated, a boolean or additive attn_mask (padded with "masked"
    to the keys' length), is_causal (aligned to the last query, after the
    cache), a sliding window, nonpad_kv_seqlen, softcap, softmax_precision
    and the qk_matmul_output modes 0-3.  A query row that can attend no key
    (the mask, causality, the window, padding) gives 0, as onnxruntime; a
    row whose scores are all -inf by Q and K themselves gives NaN (0 / 0),
    as onnxruntime.  Batched NumPy matrix products; temporaries per run."""

    op_types = ("Attention",)
    family = "linalg"
    shape_rule = rules.attention
    fold = "never"

    def setup(self):
        a = self.attrs
        self.slots = [k for k, o in enumerate(self.op.outputs) if o]
        self.is_causal = bool(int(a.get("is_causal", 0)))
        self.scale = a.get("scale")
        self.softcap = float(a.get("softcap", 0.0))
        self.mode = int(a.get("qk_matmul_output_mode", 0))
        if self.mode not in (0, 1, 2, 3):
            self.fail(f"qk_matmul_output_mode must be 0-3, not {self.mode}")
        if np.dtype(self.ins[0].dtype).kind == "V":
            # the fused op rounds otherwise than ONNX's reference (1 ulp in a
            # quarter of the values); onnxruntime refuses it too
            self.fail("bfloat16 Attention is not supported (its function body, in "
                      "separate ops, is)")
        prec = int(a.get("softmax_precision", 0))
        self.precision = None if not prec else rules.Node.dtype_of(prec)
        self.left = int(a.get("left_window_size", -1))
        self.right = int(a.get("right_window_size", -1))
        q = self.shape(0)
        if len(q) == 3:
            if "q_num_heads" not in a or "kv_num_heads" not in a:
                self.malformed("3-D inputs need q_num_heads and kv_num_heads")
            self.heads = (int(a["q_num_heads"]), int(a["kv_num_heads"]))
        elif len(q) == 4:
            self.heads = None
        else:
            self.malformed(f"Q must be 3-D or 4-D, not {list(q)}")
        if self.has(4) != self.has(5):
            self.malformed("past_key and past_value go together")

    def run(self, xs, ys, sc):
        x = list(xs) + [None] * (7 - len(xs))
        q, k, v, mask, past_k, past_v, nonpad = x[:7]
        dt = q.dtype
        if self.heads is not None:
            q, k, v = _heads(q, self.heads[0]), _heads(k, self.heads[1]), _heads(v, self.heads[1])
        scale = self.scale if self.scale is not None else 1 / np.sqrt(q.shape[3])
        if past_k is not None:
            k = np.concatenate((past_k, k), axis=2)
            v = np.concatenate((past_v, v), axis=2)
        present_k, present_v = k, v
        sq, skv = q.shape[2], k.shape[2]
        bias = self.bias(mask, past_k, nonpad, sq, skv, q.shape[0], dt)
        y, qk_out, p = attend(q, k, v, bias, scale, softcap=self.softcap,
                              precision=self.precision, split_scale=True,
                              what=f"operator {self.op.name!r} (Attention)")
        if self.mode == 2:
            qk_out = qk_out + bias
        elif self.mode == 3:
            qk_out = p
        if self.heads is not None:
            y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
        got = (y, present_k, present_v, qk_out)
        for slot, out in zip(self.slots, ys):
            np.copyto(out, np.broadcast_to(got[slot], out.shape), casting="unsafe")

    def bias(self, mask, past_k, nonpad, sq, skv, batch, dt):
        """The additive bias: attn_mask, causal, window and padding terms."""
        bias = np.zeros((sq, skv), dt)
        if mask is not None:
            pad = skv - mask.shape[-1]
            if pad > 0:
                mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                              constant_values=False if mask.dtype == np.bool_ else -np.inf)
            bias = bias + (_masked(mask, dt) if mask.dtype == np.bool_ else mask.astype(dt))
        offset = past_k.shape[2] if past_k is not None else \
            (nonpad.reshape(-1, 1, 1, 1).astype(np.int64) - sq) if nonpad is not None else 0
        i = np.arange(sq).reshape(sq, 1)
        j = np.arange(skv).reshape(1, skv)
        if self.is_causal:
            bias = bias + _masked(j <= i + offset, dt)
        if self.left >= 0 or self.right >= 0:
            diff = i + offset - j
            allowed = np.ones_like(diff, dtype=bool)
            if self.left >= 0:
                allowed &= diff <= self.left
            if self.right >= 0:
                allowed &= -diff <= self.right
            bias = bias + _masked(allowed, dt)
        if nonpad is not None:
            keep = np.arange(skv) < nonpad.reshape(-1, 1).astype(np.int64)
            bias = bias + _masked(keep.reshape(batch, 1, 1, skv), dt)
        return bias


@register
class RotaryEmbedding(Kernel):
    """RotaryEmbedding (opset 23): the first ``rotary_embedding_dim`` of each
    head's features rotated pairwise -- halves, or even / odd features
    when ``interleaved`` -- by the cos / sin caches, gathered by
    position_ids when given; the rest copied.  Works on (batch, seq, heads,
    size) views of input and output; scratch: one product."""

    op_types = ("RotaryEmbedding",)
    family = "linalg"
    inplace = "none"
    shape_rule = rules.same

    def setup(self):
        xs = self.shape(0)
        if len(xs) == 4:
            b, h, s, d = xs
            self.to4 = lambda a: a.transpose(0, 2, 1, 3)
        elif len(xs) == 3:
            heads = int(self.attrs.get("num_heads", 0))
            if heads < 1 or xs[2] % heads:
                self.malformed(f"a 3-D input {list(xs)} needs num_heads dividing its last dim")
            b, s, h, d = xs[0], xs[1], heads, xs[2] // heads
            self.to4 = lambda a: a.reshape(b, s, h, d)
        else:
            self.malformed(f"input must be 3-D or 4-D, not {list(xs)}")
        rot = int(self.attrs.get("rotary_embedding_dim", 0)) or d
        if rot % 2 or rot > d:
            self.malformed(f"rotary_embedding_dim {rot} must be even and at most {d}")
        half = rot // 2
        if self.shape(1)[-1] != half or self.shape(2)[-1] != half:
            self.malformed(f"the caches' last dim must be rotary_embedding_dim / 2 = {half}")
        self.parts = rotary_parts(rot, bool(int(self.attrs.get("interleaved", 0))))
        self.scratch = [((b, s, h, half), self.dtype)]

    def run(self, xs, ys, sc):
        cos, sin = xs[1], xs[2]
        if self.has(3):
            pos = xs[3].astype(np.int64, copy=False)
            cos, sin = cos[pos], sin[pos]
        rotate(self.to4(xs[0]), self.to4(ys[0]), cos[:, :, None], sin[:, :, None], self.parts,
               sc[0])


@register
class Det(Kernel):
    """The determinants of a batch of square matrices (LU, ``numpy.linalg``)."""

    op_types = ("Det",)
    family = "linalg"
    shape_rule = moves.det

    def setup(self):
        shp = self.shape(0)
        if len(shp) < 2 or shp[-1] != shp[-2]:
            self.malformed(f"takes square matrices, not shape {list(shp)}")
        if np.dtype(self.ins[0].dtype).kind != "f":
            self.fail(f"takes floats, not {np.dtype(self.ins[0].dtype).name}")

    def run(self, xs, ys, sc):
        x = xs[0]
        if x.dtype.itemsize < 4:        # LAPACK has no float16: in float32, rounded once
            x = x.astype(np.float32)
        np.copyto(ys[0], np.linalg.det(x), casting="unsafe")


@register
class Einsum(Kernel):
    """``numpy.einsum`` of the equation straight into the output (no path
    optimisation: ``optimize=True`` would allocate intermediates).  A
    dtype NumPy's einsum does not know (bfloat16, kind "V") goes through
    float32 copies of the operands and the result (scratch)."""

    op_types = ('Einsum',)
    family = 'linalg'
    inplace = 'none'
    shape_rule = moves.einsum
    fold = 'expanding'

    def setup(self):
        self.eq = str(self.attrs["equation"]).replace(" ", "")
        self.wide = self.dtype.kind == "V"
        if self.wide:
            self.scratch = [(self.shape(i), np.float32) for i in range(len(self.ins))]
            self.scratch.append((self.oshape(), np.float32))

    def run(self, xs, ys, sc):
        if not self.wide:
            np.einsum(self.eq, *xs, out=ys[0])
            return
        for x, w in zip(xs, sc):
            np.copyto(w, x, casting="unsafe")
        np.einsum(self.eq, *sc[:-1], out=sc[-1])
        np.copyto(ys[0], sc[-1], casting="unsafe")
