"""Recurrent layers: ONNX LSTM, GRU and RNN over a sequence whose length is
known when the graph is built.

One shared driver (:class:`_Recurrent`) walks the directions (forward,
reverse, or both one after the other), the steps in order, and writes Y,
Y_h and Y_c (each may be omitted) straight into their planned views in
either ``layout``; the three subclasses only say what one step computes.
Every operand may be a graph input fed at run time (the ONNX backend
tests feed W, R and B too).  A constant W or R is kept transposed in the
weights arena, ``[dirs, in, G*H]``, the GEMMs' contiguous right operand
(the one copy of it there); a fed one is read through the transposed view
``W[d].T``, which BLAS takes as it is.  The other constants reach the
weights arena as the executor copies them.

The driver is built from one part per job: this file holds what an op
asks for (its attributes, weights, activations and scratch) and the
cells; the checks of its operand and output shapes are in
:mod:`.recurrent_shapes`, the time loop (the projection of a block of
steps, ``sequence_lens``, the directions) in :mod:`.recurrent_loop`, the
activation functions by name in :mod:`.recurrent_activations`.

Scratch rule (all of the op's dtype; ``G`` gates of ``H``, batch ``N``):
the gates ``(N, G*H)``; the input projection for ``n`` steps ``(n*N,
G*H)``; the state and its next value (``h``, and ``c`` for LSTM) ``(N,
H)``; two temporaries, ``(N, G*H)`` (the sigmoid gates are activated
together) and ``(N, H)``; the summed bias ``(dirs, G*H)`` when B is given;
the step mask ``(S, N, 1)`` (bool) when sequence_lens is given.
"""
import math

import numpy as np

from .normalization import moments
from . import shape_rules as rules
from . import shape_rules_movement as moves
from .recurrent_activations import ACTIVATIONS
from .recurrent_loop import TimeLoop
from .recurrent_native import native_loop_ok, run_direction
from .recurrent_shapes import RecurrentShapes
from .registry import Kernel, const, register

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


class _Recurrent(RecurrentShapes, TimeLoop, Kernel):
    """The driver shared by LSTM, GRU and RNN (see the module docstring):
    setup here, the shape checks from :class:`RecurrentShapes`, ``run``
    from :class:`TimeLoop`.  A subclass sets ``gates``, ``default_acts``,
    ``n_state`` (1: h, 2: h and c) and implements ``cell``."""

    family = "recurrent"
    inplace = "none"
    shape_rule = moves.recurrent
    #: never folded: the ONNX reference evaluator ignores their direction,
    #: activations, clip and sequence_lens; the kernels run them
    fold = "never"
    outputs_by_position = True
    gates = 1
    default_acts = ("Tanh",)
    n_state = 1
    #: the bias is added in the cell, not to the input projection (TFLite's
    #: layer-normalised LSTM adds it after the normalisation)
    late_bias = False

    def setup(self):
        self.layout = int(self.attrs.get("layout", 0))
        if self.layout not in (0, 1):
            self.fail(f"layout {self.layout} (0 or 1 expected)")
        direction = str(self.attrs.get("direction", "forward")).lower()
        if direction not in _DIRECTIONS:
            self.fail(f"direction {direction!r} (forward, reverse or bidirectional)")
        self.dirs = _DIRECTIONS[direction]
        if self.dtype.kind != "f":
            self.fail(f"element type {self.dtype} (a floating type expected)")
        self._check_shapes()
        self.wt, self.rt = self._transposed(1), self._transposed(2)
        kept = {1: self.wt, 2: self.rt}
        self.runtime = tuple(i for i in range(len(self.ins)) if kept.get(i) is None)
        clip = self.attrs.get("clip")
        self.clip = None if clip is None else (const(-float(clip), self.dtype),
                                               const(float(clip), self.dtype))
        if self.clip is not None and not float(clip) > 0:
            self.malformed(f"clip {clip} (a positive threshold expected)")
        self.acts = self._activations()
        self.native_loop = self._native_loop()
        self._plan_scratch()

    # -- setup helpers ---------------------------------------------------------
    def _transposed(self, i):
        """A constant W / R kept transposed, [dirs, in, G*H]: contiguous GEMM
        operands in the weights arena (None for one fed at run time, read
        through a transposed view).  Only the scratch asked (sizing): the
        constant as it is, nothing copied.  The same op at another input
        shape (:attr:`Kernel.prior`, an InferenceSession's new signature)
        lends its transposed copy of the same array: not copied again (35
        ms of a new signature of ddddocr's CRNN, whose LSTM weights are 6
        MiB)."""
        data = self.ins[i].data
        if data is None:
            return None
        if self.sizing:
            return data
        p = self.prior
        if p is not None and type(p) is type(self) and p.dtype == self.dtype and \
                len(p.ins) > i and p.ins[i].data is data:
            lent = p.wt if i == 1 else p.rt
            if lent is not None:
                return lent
        src = np.asarray(data).transpose(0, 2, 1)
        out = self.kept_empty(src.size, self.dtype).reshape(src.shape)
        np.copyto(out, src, casting="unsafe")       # transposed straight into the arena
        return self.keep(out)

    def _extra_scratch(self):
        """(name, shape, dtype) of a subclass's further scratch parts."""
        return []

    def _native_loop(self):
        """True when the whole time loop runs in the C core (LSTM)."""
        return False

    def _activation_names(self):
        """The activation names, k per direction in order (the defaults
        when absent; one direction's given for both directions)."""
        k = len(self.default_acts)
        names = self.attrs.get("activations")
        names = list(self.default_acts) * len(self.dirs) if names is None else \
            [str(n) for n in names]
        if len(names) == k and len(self.dirs) == 2:
            names = names * 2
        if len(names) != k * len(self.dirs):
            self.malformed(f"{len(names)} activations; {k} per direction expected")
        return names

    def _activations(self):
        """Per direction, the tuple of activation functions (f[, g[, h]])."""
        k = len(self.default_acts)
        names = self._activation_names()
        alphas = [float(a) for a in self.attrs.get("activation_alpha", ())]
        betas = [float(b) for b in self.attrs.get("activation_beta", ())]
        c = lambda v: const(v, self.dtype)      # noqa: E731
        fns = []
        for name in names:
            entry = ACTIVATIONS.get(name.lower())
            if entry is None:
                self.fail(f"activation {name!r} is not supported (known: "
                          f"{', '.join(sorted(ACTIVATIONS))})")
            make, a, b = entry
            if a is not None and alphas:    # consumed in order by those that take one
                a = alphas.pop(0)
            if b is not None and betas:
                b = betas.pop(0)
            fns.append(make(a, b, c))
        return [tuple(fns[d * k:(d + 1) * k]) for d in range(len(self.dirs))]

    def _plan_scratch(self):
        """The scratch layout (see the module docstring); the projection
        takes as many steps as the budget leaves room for."""
        N, H, GH, it = self.N, self.H, self.gates * self.H, self.dtype.itemsize
        fixed = [("g", (N, GH), self.dtype), ("h", (N, self.P), self.dtype),
                 ("hn", (N, self.P), self.dtype)]
        fixed += [(n, (N, H), self.dtype) for n in ("c", "cn")[:2 * self.n_state - 2]]
        fixed += [("t1", (N, GH), self.dtype), ("t2", (N, H), self.dtype)]
        fixed += self._extra_scratch()
        if self.has(3):
            fixed.append(("bias", (len(self.dirs), GH), self.dtype))
        if self.lens is not None:
            fixed.append(("mask", (self.S, N, 1), np.bool_))
        used = sum(-(-math.prod(s) * np.dtype(d).itemsize // 64) * 64 for _, s, d in fixed)
        self.steps = max(1, min(self.S, (self.scratch_budget - used) // max(N * GH * it, 1)))
        parts = fixed if self.native_loop else [("xw", (self.steps * N, GH), self.dtype)] + fixed
        self.part_names = [p[0] for p in parts]
        self.scratch = [(s, d) for _, s, d in parts]
        if self.lens is not None:
            lens_dt = np.dtype(self.ins[4].dtype)
            self.step_ids = np.arange(self.S, dtype=lens_dt).reshape(self.S, 1, 1)

    # -- what the cells share ----------------------------------------------------
    def clipped(self, x, act, t):
        """Clip (if asked) then apply an activation, in place."""
        if self.clip is not None:
            np.clip(x, self.clip[0], self.clip[1], out=x)
        act(x, t)

    def cell(self, d, xw, rt, xs, state, s):
        """One step: from state[0] (and state[2]), the projected input ``xw``
        and ``rt`` = R[d]^T, write the next h into state[1] (and c into
        state[3])."""
        raise NotImplementedError


@register
class RNN(_Recurrent):
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""

    op_types = ("RNN",)
    tflite = {"UNIDIRECTIONAL_SEQUENCE_RNN": ("RNN", {}, "sequence_rnn")}
    gates = 1
    default_acts = ("Tanh",)

    def cell(self, d, xw, rt, xs, state, s):
        h, hn = state[0], state[1]
        np.matmul(h, rt, out=hn)
        np.add(hn, xw, out=hn)
        self.clipped(hn, self.acts[d][0], s["t1"])


@register
class GRU(_Recurrent):
    """Gates z, r, h (in that order in W, R, B); ``linear_before_reset``
    applies the reset gate after the recurrent product (with its bias Rbh)."""

    op_types = ("GRU",)
    gates = 3
    default_acts = ("Sigmoid", "Tanh")

    def setup(self):
        super().setup()
        self.lbr = bool(int(self.attrs.get("linear_before_reset", 0)))

    def _bias(self, b, s):
        bias = super()._bias(b, s)
        if bias is not None and self.lbr:   # Rbh is added inside r * (...)
            H = self.H
            np.copyto(bias[:, 2 * H:], b[:, 2 * H:3 * H])
        return bias

    def cell(self, d, xw, rt, xs, state, s):
        H = self.H
        h, hn, g, tmp = state[0], state[1], s["g"], s["t1"]
        t1 = tmp[:, :H]
        f, gact = self.acts[d]
        zr, hh = g[:, :2 * H], g[:, 2 * H:]
        if self.lbr:
            np.matmul(h, rt, out=g)
            if xs[3] is not None:
                np.add(hh, xs[3][d, 5 * H:], out=hh)
        else:
            np.matmul(h, rt[:, :2 * H], out=zr)
        np.add(zr, xw[:, :2 * H], out=zr)
        self.clipped(zr, f, tmp[:, :2 * H])     # z and r at once
        z, rg = g[:, :H], g[:, H:2 * H]
        if self.lbr:
            np.multiply(rg, hh, out=hh)
        else:
            np.multiply(rg, h, out=t1)
            np.matmul(t1, rt[:, 2 * H:], out=hh)
        np.add(hh, xw[:, 2 * H:], out=hh)
        self.clipped(hh, gact, t1)
        np.subtract(h, hh, out=t1)          # H = (1 - z) * hh + z * h
        np.multiply(z, t1, out=t1)
        np.add(hh, t1, out=hn)


@register
class LSTM(_Recurrent):
    """Gates i, o, f, c (in that order in W, R, B), peepholes P (i, o, f);
    ``input_forget`` couples the forget gate to the input gate (f = 1 - i).

    Options only the TFLite import sets: ``cifg``, the input gate coupled to
    the forget gate (i = 1 - f); ``cell_clip`` clips C to [-cell_clip,
    cell_clip] after each update; inputs 8 and 9, a projection ``[dirs,
    P, H]`` and its bias ``[dirs, P]``: h = proj_clip(Wp (o * h(C)) + bp),
    of size P (R is then ``[dirs, 4H, P]``); input 10, layer-norm
    coefficients ``[dirs, 4H]`` (i, o, f, c): each gate's pre-activation
    (peephole included) is normalised over its H values (mean 0, variance
    1, epsilon 1e-8), scaled by its coefficients, and only then given its
    bias (``late_bias``), as TFLite's lstm_eval does."""

    op_types = ("LSTM",)
    tflite = {"UNIDIRECTIONAL_SEQUENCE_LSTM": ("LSTM", {}, "sequence_lstm"),
              "BIDIRECTIONAL_SEQUENCE_LSTM": ("LSTM", {}, "bidirectional_lstm")}
    gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
    n_state = 2

    def setup(self):
        self.input_forget = bool(int(self.attrs.get("input_forget", 0)))
        self.cifg = bool(int(self.attrs.get("cifg", 0)))
        self.one = const(1, self.dtype)
        self.cell_clip = self._threshold("cell_clip")   # C clipped after its update
        self.proj_clip = self._threshold("proj_clip")
        self.proj = self.has(8)
        self.ln = self.has(10)
        self.late_bias = self.ln
        super().setup()
        self.pwt = self._transposed(8) if self.proj else None
        if self.pwt is not None:
            self.runtime = tuple(i for i in self.runtime if i != 8)
        self.eps, self.inv_h = const(1e-8, self.dtype), const(1 / max(self.H, 1), self.dtype)

    def _native_loop(self):         # (a subclass computing otherwise opts in itself)
        return type(self) is LSTM and native_loop_ok(self)

    def _direction(self, xs, d, rev, bias, mask, y, state, s):
        if self.native_loop:
            return run_direction(self, xs, d, rev, bias, y, state, s)
        return super()._direction(xs, d, rev, bias, mask, y, state, s)

    def _threshold(self, name):
        """(-v, v) of a positive attribute ``name``; None if absent."""
        v = self.attrs.get(name)
        if v is not None and not float(v) > 0:
            self.malformed(f"{name} {v} (a positive threshold expected)")
        return None if v is None else (const(-float(v), self.dtype), const(float(v), self.dtype))

    def _out_size(self):
        s = self.shape(8) if self.has(8) else ()
        return s[1] if len(s) == 3 else self.H

    def _extra_inputs(self, nd):
        return {8: ("projection", (nd, self.P, self.H)), 9: ("projection bias", (nd, self.P)),
                10: ("layer-norm coefficients", (nd, 4 * self.H))}

    def _extra_scratch(self):
        return [("mu", (self.N, 4, 1), self.dtype)] if self.has(10) else []

    def cell(self, d, xw, rt, xs, state, s):
        H = self.H
        h, hn, c, cn = state
        g, tmp, t2 = s["g"], s["t1"], s["t2"]
        t1 = tmp[:, :H]
        f, gact, hact = self.acts[d]
        p = None if xs[7] is None else xs[7][d]
        np.matmul(h, rt, out=g)
        np.add(g, xw, out=g)
        ig, og, fg, cg = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        if p is None:       # i, o, f at once (no peephole waits for the new C)
            if self.ln:     # every gate at once
                self._norm(g, 0, 4, d, xs, s)
            self.clipped(g[:, :3 * H], f, tmp[:, :3 * H])
        else:
            self._peep(ig, c, p[:H], t1)
            if not self.input_forget:
                self._peep(fg, c, p[2 * H:], t1)
            if self.ln:     # o waits for its peephole on the new C
                self._norm(g, 0, 1, d, xs, s)
                self._norm(g, 2, 4, d, xs, s)
            self.clipped(ig, f, t1)
            if not self.input_forget:
                self.clipped(fg, f, t1)
        if self.input_forget:
            np.subtract(self.one, ig, out=fg)
        elif self.cifg:
            np.subtract(self.one, fg, out=ig)
        self.clipped(cg, gact, t1)
        np.multiply(fg, c, out=cn)          # C = f * C_prev + i * c
        np.multiply(ig, cg, out=cg)
        np.add(cn, cg, out=cn)
        if self.cell_clip is not None:
            np.clip(cn, self.cell_clip[0], self.cell_clip[1], out=cn)
        if p is not None:
            self._peep(og, cn, p[H:2 * H], t1)
            if self.ln:
                self._norm(g, 1, 2, d, xs, s)
            self.clipped(og, f, t1)
        np.copyto(t1, cn)                   # H = o * h(C)
        hact(t1, t2)
        if self.proj:
            np.multiply(og, t1, out=t1)
            self._project_h(d, t1, hn, xs)
        else:
            np.multiply(og, t1, out=hn)

    def _norm(self, g, k0, k1, d, xs, s):
        """TFLite's layer normalisation of gates k0 .. k1 - 1 (i, o, f, c):
        each normalised over its H values, times its coefficients, plus its
        bias; in place in ``g``."""
        N, H = self.N, self.H
        x = g.reshape(N, 4, H)[:, k0:k1]
        sq = s["t1"].reshape(N, 4, H)[:, k0:k1]
        mu = s["mu"][:, k0:k1]
        moments(x, mu, mu, x, self.inv_h, self.eps, sq=sq)   # in place in x
        np.multiply(x, mu, out=x)
        np.multiply(x, xs[10][d].reshape(4, H)[k0:k1], out=x)
        if xs[3] is not None:
            np.add(x, s["bias"][d].reshape(4, H)[k0:k1], out=x)

    def _project_h(self, d, m, hn, xs):
        """h = proj_clip(m @ Wp^T + bp): TFLite's projection of o * h(C)."""
        np.matmul(m, xs[8][d].T if self.pwt is None else self.pwt[d], out=hn)
        if xs[9] is not None:
            np.add(hn, xs[9][d], out=hn)
        if self.proj_clip is not None:
            np.clip(hn, self.proj_clip[0], self.proj_clip[1], out=hn)

    @staticmethod
    def _peep(gate, c, p, t):
        np.multiply(c, p, out=t)
        np.add(gate, t, out=gate)


def _heads4(x, heads):
    """(B, T, H * D) -> (B, H, T, D) in float32."""
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).transpose(0, 2, 1, 3).astype(np.float32)


@register
class LinearAttention(Kernel):
    """LinearAttention: a (d_k, d_v) state per key head updated each time
    step -- decayed by exp(decay) (gated rules), the value corrected by
    what the state already retrieves for the key, times beta (delta
    rules), plus k v^T -- and read by the query heads of its group, times
    ``scale`` (1 / sqrt(d_k) by default).  float32 throughout; one batched
    step per time step."""

    op_types = ("LinearAttention",)
    family = "recurrent"
    inplace = "none"
    shape_rule = rules.linear_attention
    outputs_by_position = True

    def setup(self):
        a = self.attrs
        rule = a.get("update_rule", "gated_delta")
        rule = rule.decode() if isinstance(rule, bytes) else str(rule)
        if rule not in ("linear", "gated", "delta", "gated_delta"):
            self.fail(f"update_rule {rule!r} is not linear, gated, delta or gated_delta")
        self.hq, self.hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if self.hq < 1 or self.hkv < 1 or self.hq % self.hkv:
            self.malformed(f"q_num_heads {self.hq} must be a positive multiple of "
                           f"kv_num_heads {self.hkv}")
        self.gated, self.delta = "gated" in rule, "delta" in rule
        if self.gated != self.has(4) or self.delta != self.has(5):
            self.malformed(f"update_rule {rule!r} takes decay: {self.gated}, beta: "
                           f"{self.delta}")
        q = self.shape(0)
        if len(q) != 3 or len(self.shape(1)) != 3 or len(self.shape(2)) != 3:
            self.malformed("query, key and value must be (B, T, heads * size)")
        scale = float(a.get("scale", 0.0))
        self.scale = scale if scale else 1 / math.sqrt(q[2] // self.hq)
        self.slots = [i for i, o in enumerate(self.op.outputs) if o]

    def run(self, xs, ys, sc):
        q, k, v = (_heads4(x, h) for x, h in zip(xs[:3], (self.hq, self.hkv, self.hkv)))
        b, _, t, dk = k.shape
        dv = v.shape[3]
        state = np.zeros((b, self.hkv, dk, dv), np.float32) if not self.has(3) else \
            xs[3].astype(np.float32)
        if self.gated:
            g = xs[4]
            g = g.reshape(b, t, self.hkv, -1).transpose(0, 2, 1, 3).astype(np.float32)
            g = np.exp(g)[..., None]                        # (B, H, T, 1 or d_k, 1)
        if self.delta:
            beta = xs[5].reshape(b, t, -1, 1).transpose(0, 2, 1, 3).astype(np.float32)
        group = self.hq // self.hkv
        out = np.empty((b, self.hq, t, dv), np.float32)
        for i in range(t):
            kt, vt = k[:, :, i], v[:, :, i]
            if self.gated:
                state = state * g[:, :, i]
            if self.delta:
                seen = np.einsum("bhdm,bhd->bhm", state, kt)
                vt = beta[:, :, i] * (vt - seen)
            state = state + kt[..., :, None] * vt[..., None, :]
            read = state if group == 1 else np.repeat(state, group, axis=1)
            out[:, :, i] = self.scale * np.einsum("bhd,bhdm->bhm", q[:, :, i], read)
        got = (out.transpose(0, 2, 1, 3).reshape(b, t, -1), state)
        for slot, y in zip(self.slots, ys):
            np.copyto(y, got[slot], casting="unsafe")
