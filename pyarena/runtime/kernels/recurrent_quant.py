"""onnxruntime's ``com.microsoft`` DynamicQuantizeLSTM, computed as
onnxruntime computes it.

onnxruntime's dynamic quantizer turns an LSTM into DynamicQuantizeLSTM: W
``[dirs, input, 4H]`` and R ``[dirs, H, 4H]`` stored as 8-bit integers (the
transpose of the ONNX LSTM's layout), with a scale and zero point per
direction or per direction and column (inputs 8-11).  Its CPU kernel
(``onnxruntime/contrib_ops/cpu/quantization/dynamic_quantize_lstm.cc`` over
``core/providers/cpu/rnn/uni_directional_lstm.cc``, the GEMMs in
``rnn_helpers.cc``'s quantized ``ComputeGemm``) does, per direction:

* the input product once for the whole sequence: X (``max(sequence_lens)``
  steps) quantized to uint8 with a scale and zero point from its own range
  (``GetQuantizationParameter``: DynamicQuantizeLinear's arithmetic), the
  exact int32 product with W less its zero point, times ``x_scale * w_scale``
  (float32, per column);
* per step, the same with h_{t-1} and R, added to it;
* then the bias (Wb + Rb) is added, and the gates run as the float LSTM's.

This kernel does the same: DynamicQuantizeLinear's native kernel for X and
h, the C core's 8-bit product for a few rows (``pa_qrows_run``: W and R
packed once for the VNNI instruction, int32 out, exact; the integer GEMM
where K passes 32768) or, without the C core, NumPy in float64 (exact for
these integers), then float32 scaling in that order.  The weights stay
8-bit.  With the default gates and no ``sequence_lens``, a direction's
steps run in one C call (``pa_dqlstm_run``).

The gate activations Sigmoid and Tanh are MLAS's approximations, bit for
bit (``pa_ort_logistic`` / ``pa_ort_tanh``), and each gate takes its
peephole, bias and activation in onnxruntime's order: the outputs equal
onnxruntime's.  What still differs: with ``sequence_lens`` of unequal
lengths in a batch, a reverse direction shares one quantization of h among
other rows than onnxruntime (which walks each entry's own steps); the
other activations are NumPy's.
"""
import numpy as np

from ..._native import dqlstm, ort_approx, qrows
from ..._native.qdynamic import dynamic_quantize
from ...errors import InvalidArgumentError
from .recurrent import LSTM, _Recurrent
from .registry import const, register

__all__ = ["DynamicQuantizeLSTM"]

_BYTES = (np.dtype(np.uint8), np.dtype(np.int8))


class _QWeight:
    """One direction's 8-bit W or R ``[K, 4H]`` with its zero point and
    float32 scale per column: ``acc = (a - a_zp) @ (w - w_zp)`` as int32
    for rows of uint8 ``a``, natively when the C core takes it."""

    def __init__(self, k, q, zp, scale):
        self.K, self.G = q.shape
        self.scale = k.keep(np.ascontiguousarray(np.broadcast_to(scale, (self.G,)),
                                                 np.float32))
        zp = np.broadcast_to(np.asarray(zp).reshape(-1), (self.G,))
        #: pa_qrows_run on W packed once: the recurrent step's one row and
        #: the whole sequence's input product (one thread); NumPy where K
        #: passes 32768
        self.rows = bool(k.use_native and q.flags.c_contiguous and
                         qrows.packed_size(self.K, self.G) > 0)
        self.q = q                  # the constant as it is (a view of the file)
        self.zp = zp.astype(np.float64)
        self.packed = self._packed(k, q, zp) if self.rows else None

    def _packed(self, k, q, zp):
        """W packed for pa_qrows_run (int32 words: 4-byte aligned), kept."""
        words = -(-qrows.packed_size(self.K, self.G) // 4)
        zp32 = np.ascontiguousarray(zp, np.int32) if zp.any() else None

        def pack():
            packed = k.kept_empty(words, np.int32)
            if not k.sizing:
                qrows.pack(q, zp32, packed)
            return packed
        return k.kept_layout((words,), np.int32, pack)

    def product(self, a, a_zp, acc):
        """``acc`` (rows, 4H) int32 = (a - a_zp) @ (w - w_zp); ``a`` uint8
        (rows, K)."""
        if self.rows:
            qrows.run(self.packed, a, a_zp, acc)
            return
        af = np.subtract(a, np.float64(a_zp))
        np.copyto(acc, np.matmul(af, np.subtract(self.q, self.zp)), casting="unsafe")


@register
class DynamicQuantizeLSTM(LSTM):
    """Inputs X, W, R, B, sequence_lens, initial_h, initial_c, P (as LSTM's,
    W and R 8-bit and transposed), W_scale, W_zero_point, R_scale,
    R_zero_point (per direction, or per direction and column); the float
    LSTM's attributes (hidden_size required)."""

    op_types = ("DynamicQuantizeLSTM",)
    onnx_domain = "com.microsoft"
    tflite = {}
    own_dtype = (1, 2, 4)

    def setup(self):
        if "hidden_size" not in self.attrs:
            self.malformed("no hidden_size attribute")
        if int(self.attrs.get("layout", 0)) != 0:
            self.fail("layout 1 (onnxruntime's DynamicQuantizeLSTM runs layout 0 only)")
        if np.dtype(self.ins[0].dtype) != np.float32:
            self.fail(f"X of element type {self.ins[0].dtype} (float32 expected)")
        _Recurrent.setup(self)          # shapes, activations; W and R by _transposed
        self.input_forget = bool(int(self.attrs.get("input_forget", 0)))
        self.cifg, self.proj, self.pwt, self.ln = False, False, None, False
        self.cell_clip = self.proj_clip = None
        self.one = const(1, self.dtype)
        self.runtime = (0, 3, 4, 5, 6, 7)
        self.qparams = (np.empty(1, np.float32), np.empty(1, np.uint8))
        self.xmult = np.empty((len(self.dirs), 4 * self.H), np.float32)
        self.hmult = np.empty(4 * self.H, np.float32)
        #: every step one pa_dqlstm_step (default gates; see _fast)
        self.fast = self.use_native and self._fast()
        #: the products on the C core's 8-bit GEMM (Kernel.path "native")
        self.native = True if all(w.rows for w in self.wt + self.rt) else None

    def _out_size(self):
        return self.H

    def _extra_inputs(self, nd):
        return {1: ("W", (nd, self.I, 4 * self.H)), 2: ("R", (nd, self.H, 4 * self.H))}

    def _transposed(self, i):
        """W (i = 1) or R (i = 2) of each direction as a :class:`_QWeight`."""
        what = "W" if i == 1 else "R"
        q = self.ins[i].data
        if q is None:
            self.fail(f"{what} fed at run time (a constant expected)")
        q = np.asarray(q)
        if q.dtype not in _BYTES:
            self.fail(f"{what} of element type {q.dtype} (int8 or uint8 expected)")
        nd, cols = len(self.dirs), 4 * self.H
        scale = self._param(6 + 2 * i, f"{what}_scale", nd, cols, np.float32)
        zp = self._param(7 + 2 * i, f"{what}_zero_point", nd, cols, q.dtype)
        if not np.all(np.isfinite(scale)):
            self.malformed(f"{what}_scale is not finite")
        return [_QWeight(self, q[d], zp[d], scale[d]) for d in range(nd)]

    def _param(self, i, what, nd, cols, dtype):
        """A scale or zero point: per direction (nd,) or per column (nd, 4H)."""
        if not self.has(i) or self.ins[i].data is None:
            self.fail(f"{what} absent or fed at run time (a constant expected)")
        v = np.asarray(self.ins[i].data)
        if np.dtype(v.dtype) != np.dtype(dtype):
            self.malformed(f"{what} is {v.dtype}, {np.dtype(dtype)} expected")
        if v.shape == (nd,):
            return v.reshape(nd, 1)
        if v.shape == (nd, cols):
            return v
        self.malformed(f"{what} has shape {list(v.shape)}; [{nd}] or [{nd}, {cols}] expected")

    def _extra_scratch(self):
        S, N, I, H = self.S, self.N, self.I, self.H
        return [("xq", (S * N * I,), np.uint8), ("hq", (N * H,), np.uint8),
                ("acc", (S * N, 4 * H), np.int32), ("hz", (N, H), np.float32)]

    def _plan_scratch(self):
        super()._plan_scratch()
        self.steps = self.S             # the input product over the whole sequence
        self.scratch[0] = ((self.S * self.N, 4 * self.H), self.dtype)

    def run(self, xs, ys, sc):
        s = dict(zip(self.part_names, sc))
        rows = self.S * self.N
        if self.lens is not None:       # onnxruntime quantizes the steps it runs
            rows = min(max(int(xs[4].max(initial=0)), 0), self.S) * self.N
        x = xs[0].reshape(-1)[:rows * self.I]
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        scale, zp = self.qparams
        dynamic_quantize(x, s["xq"][:rows * self.I], scale, zp)
        self.x_zp = int(zp[0])
        for d, w in enumerate(self.wt):
            np.multiply(w.scale, scale[0], out=self.xmult[d])
        self._parts = s
        super().run(xs, ys, sc)

    def _project(self, x, wt, b, t0, t1, xw):
        """X @ W as onnxruntime's quantized GEMM, the whole sequence at once
        (``wt``: one direction's :class:`_QWeight`)."""
        s, N = self._parts, self.N
        d = self.wt.index(wt)
        acc = s["acc"][:self.S * N]
        wt.product(s["xq"].reshape(self.S * N, self.I), self.x_zp, acc)
        out = xw[:self.S * N]
        np.copyto(out, acc, casting="unsafe")
        np.multiply(out, self.xmult[d], out=out)
        return lambda t: out[t * N:(t + 1) * N]

    def _direction(self, xs, d, rev, bias, mask, y, state, s):
        """Without ``sequence_lens`` and with the default gates, every step
        of the direction in one ``pa_dqlstm_run`` (h and c updated in place:
        the final state stays in ``state[0]``, ``state[2]``); else the time
        loop's walk, a call per step."""
        if not self.fast or mask is not None:
            return super()._direction(xs, d, rev, bias, mask, y, state, s)
        S, N = self.S, self.N
        self._project(xs[0], self.wt[d], None, 0, S, s["xw"])
        dqlstm.run(s["xw"][:S * N].reshape(S, N, 4 * self.H), rev,
                   None if xs[3] is None else s["bias"][d], self.rt[d].packed, self.rt[d].scale,
                   state[0], state[2], y, s["g"], s["hq"], s["acc"][:N], self.hmult)
        return state

    def _h_rows(self, h, s, d):
        """h_{t-1} as onnxruntime reads it: with sequence_lens and Y asked
        for, the rows already past their length read Y's zeros (the rows
        the step before left out: its mask)."""
        prev = self.step + (1 if self.dirs[d] else -1)    # the step walked before
        if self.lens is None or not 0 <= prev < self.S or not self.present[0]:
            return h
        hz = s["hz"]
        hz.fill(0)
        np.copyto(hz, h, where=s["mask"][prev])
        return hz

    def _activations(self):
        """The float LSTM's, with Sigmoid and Tanh as onnxruntime's MLAS
        computes them (bits that decide the next step's 8-bit h)."""
        acts = super()._activations()
        names, k = self._activation_names(), len(self.default_acts)
        exact = {"sigmoid": _ort_act(ort_approx.logistic), "tanh": _ort_act(ort_approx.tanh)}
        return [tuple(exact.get(names[d * k + j].lower(), fn) for j, fn in enumerate(fns))
                for d, fns in enumerate(acts)]

    def _gate(self, x, bias, act, t, peep=None, c=None):
        """One gate as onnxruntime's GateComputations: its peephole
        product, then the bias (and clip), then the activation."""
        if peep is not None:
            self._peep(x, c, peep, t)
        if bias is not None:
            np.add(x, bias, out=x)
        self.clipped(x, act, t)

    def _fast(self):
        """Whether every step runs as one ``pa_dqlstm_step``: the default
        gates (sigmoid, tanh, tanh), no peepholes, clip or input_forget, R
        on the few-rows product."""
        names = [n.lower() for n in self._activation_names()]
        return names == ["sigmoid", "tanh", "tanh"] * len(self.dirs) and \
            self.clip is None and not self.input_forget and not self.has(7) and \
            all(r.rows for r in self.rt)

    def cell(self, d, xw, rt, xs, state, s):
        H = self.H
        h, hn, c, cn = state
        if self.fast:           # the whole step in C: the same arithmetic, one call
            dqlstm.step(self._h_rows(h, s, d), c, xw, None if xs[3] is None else s["bias"][d],
                        rt.packed, rt.scale, s["g"], cn, hn, s["hq"], s["acc"][:self.N],
                        self.hmult)
            return
        g, tmp, t1 = s["g"], s["t1"], s["t1"][:, :H]
        f, gact, hact = self.acts[d]
        scale, zp = self.qparams
        hq = s["hq"]
        src = self._h_rows(h, s, d)
        dynamic_quantize(np.ascontiguousarray(src).reshape(-1), hq, scale, zp)
        acc = s["acc"][:self.N]
        rt.product(hq.reshape(self.N, H), int(zp[0]), acc)
        np.multiply(rt.scale, scale[0], out=self.hmult)
        np.copyto(g, acc, casting="unsafe")
        np.multiply(g, self.hmult, out=g)
        np.add(xw, g, out=g)            # onnxruntime: C += scale * acc
        b = None if xs[3] is None else s["bias"][d]     # Wb + Rb, after the products
        bi, bo, bf, bc = (None,) * 4 if b is None else (b[k * H:(k + 1) * H] for k in range(4))
        ig, og, fg, cg = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        p = None if xs[7] is None else xs[7][d]
        if p is None and b is not None:
            np.add(g, b, out=g)
            bi = bo = bf = bc = None
        if p is None and not self.input_forget:
            self.clipped(g[:, :3 * H], f, tmp[:, :3 * H])      # i, o, f at once
        else:
            self._gate(ig, bi, f, t1, None if p is None else p[:H], c)
            if not self.input_forget:
                self._gate(fg, bf, f, t1, p[2 * H:], c)
        if self.input_forget:
            np.subtract(self.one, ig, out=fg)
        self._gate(cg, bc, gact, t1)
        np.multiply(c, fg, out=cn)          # C = C_prev * f + i * c
        np.multiply(ig, cg, out=cg)
        np.add(cn, cg, out=cn)
        if p is not None or self.input_forget:
            self._gate(og, bo, f, t1, None if p is None else p[H:2 * H], cn)
        np.copyto(t1, cn)                   # H = h(C) * o
        hact(t1, s["t2"])
        np.multiply(t1, og, out=hn)


def _ort_act(fn):
    """An activation ``f(x, t)`` in place by ``fn`` (the C core's
    onnxruntime-exact one), row by row where ``x``'s rows are not one
    block."""
    def f(x, t):
        if x.flags.c_contiguous:
            fn(x, x)
            return
        for row in x.reshape(-1, x.shape[-1]):
            fn(row, row)
    return f
