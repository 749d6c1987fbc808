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

Per step: ``gates = H_{t-1} @ R^T + (X_t @ W^T + Wb + Rb)``, clip, the
gate activations, the state update.  The bracketed term does not depend on
the state: it is computed for a block of steps at once, one GEMM, into
scratch -- the whole sequence when it fits the op's scratch budget, else
as many steps as fit (at least one).

``sequence_lens`` (as onnxruntime runs it): batch entry ``b`` takes steps
``t < L[b]`` only; its state stays put at the other steps and Y is zero
there (Y_h and Y_c too when ``L[b]`` is 0).  Walking ``t`` backwards from
``S - 1`` with that mask is exactly the reverse direction over the entry's
own ``L[b]`` steps (the state waits at its initial value until ``t = L[b] -
1``), so no gather is needed.

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
from . import shape_rules_movement as moves
from .registry import Kernel, const, register


# -- activations: f(x, t) in place on x, t a temporary of x's shape ----------
def _sigmoid(a, b, c):
    half = c(0.5)

    def f(x, t):            # 0.5 * tanh(x / 2) + 0.5: no overflow, no temporary
        np.multiply(x, half, out=x)
        np.tanh(x, out=x)
        np.multiply(x, half, out=x)
        np.add(x, half, out=x)
    return f


def _tanh(a, b, c):
    return lambda x, t: np.tanh(x, out=x)


def _relu(a, b, c):
    zero = c(0)
    return lambda x, t: np.maximum(x, zero, out=x)


def _affine(a, b, c):
    alpha, beta = c(a), c(b)
    return lambda x, t: (np.multiply(x, alpha, out=x), np.add(x, beta, out=x))


def _leaky_relu(a, b, c):
    zero, k = c(0), c(a - 1.0)

    def f(x, t):            # x + (alpha - 1) * min(x, 0)
        np.minimum(x, zero, out=t)
        np.multiply(t, k, out=t)
        np.add(x, t, out=x)
    return f


def _thresholded_relu(a, b, c):
    alpha = c(a)

    def f(x, t):
        np.greater(x, alpha, out=t)
        np.multiply(x, t, out=x)
    return f


def _scaled_tanh(a, b, c):
    alpha, beta = c(a), c(b)

    def f(x, t):
        np.multiply(x, beta, out=x)
        np.tanh(x, out=x)
        np.multiply(x, alpha, out=x)
    return f


def _hard_sigmoid(a, b, c):
    alpha, beta, zero, one = c(a), c(b), c(0), c(1)

    def f(x, t):
        np.multiply(x, alpha, out=x)
        np.add(x, beta, out=x)
        np.maximum(x, zero, out=x)
        np.minimum(x, one, out=x)
    return f


def _elu(a, b, c):
    alpha, zero = c(a), c(0)

    def f(x, t):            # max(x, 0) + alpha * expm1(min(x, 0))
        np.minimum(x, zero, out=t)
        np.expm1(t, out=t)
        np.multiply(t, alpha, out=t)
        np.maximum(x, zero, out=x)
        np.add(x, t, out=x)
    return f


def _softsign(a, b, c):
    one = c(1)

    def f(x, t):
        np.abs(x, out=t)
        np.add(t, one, out=t)
        np.divide(x, t, out=x)
    return f


def _softplus(a, b, c):
    zero = c(0)

    def f(x, t):            # max(x, 0) + log1p(exp(-|x|)): no overflow
        np.abs(x, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.log1p(t, out=t)
        np.maximum(x, zero, out=x)
        np.add(x, t, out=x)
    return f


#: lower-case name -> (maker, alpha default or None if it takes no alpha,
#: beta default or None); defaults of the ONNX operators of the same name
ACTIVATIONS = {
    "sigmoid": (_sigmoid, None, None),
    "tanh": (_tanh, None, None),
    "relu": (_relu, None, None),
    "affine": (_affine, 1.0, 0.0),
    "leakyrelu": (_leaky_relu, 0.01, None),
    "thresholdedrelu": (_thresholded_relu, 1.0, None),
    "scaledtanh": (_scaled_tanh, 1.0, 1.0),
    "hardsigmoid": (_hard_sigmoid, 0.2, 0.5),
    "elu": (_elu, 1.0, None),
    "softsign": (_softsign, None, None),
    "softplus": (_softplus, None, None),
}

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


class _Recurrent(Kernel):
    """The driver shared by LSTM, GRU and RNN (see the module docstring).
    A subclass sets ``gates``, ``default_acts``, ``n_state`` (1: h, 2: h and
    c) and implements ``cell``."""

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

    def _check_shapes(self):
        """S, N, I, H from X and R; every other operand and output must agree."""
        xs = self.shape(0)
        if len(xs) != 3:
            self.malformed(f"X has shape {list(xs)}; [seq, batch, input] expected")
        self.S, self.N, self.I = xs if self.layout == 0 else (xs[1], xs[0], xs[2])
        nd, G = len(self.dirs), self.gates
        rs = self.shape(2)
        self.H = int(self.attrs.get("hidden_size", rs[-1] if len(rs) == 3 else 0))
        H, N = self.H, self.N
        self.P = P = self._out_size()      # h's size: H, or an LSTM's projection
        state = (nd, N, H) if self.layout == 0 else (N, nd, H)
        hstate = state[:2] + (P,)
        want = {1: ("W", (nd, G * H, self.I)), 2: ("R", (nd, G * H, P)),
                3: ("B", (nd, 2 * G * H)), 4: ("sequence_lens", (N,)),
                5: ("initial_h", hstate), 6: ("initial_c", state), 7: ("P", (nd, 3 * H))}
        want.update(self._extra_inputs(nd))
        for i, (what, shape) in want.items():
            if self.has(i) and self.shape(i) != shape:
                self.malformed(f"{what} has shape {list(self.shape(i))}; {list(shape)} "
                               f"expected (direction {len(self.dirs)}, hidden_size {H})")
            if self.has(i) and i != 4 and np.dtype(self.ins[i].dtype) != self.dtype:
                self.malformed(f"{what} is {self.ins[i].dtype}, X is {self.dtype}")
        shapes = self._output_shapes(hstate, state)
        for t, s in zip(self.outs, shapes):
            if tuple(int(d) for d in t.shape) != s:
                self.malformed(f"output {t.name!r} has shape {list(t.shape)}; {list(s)} "
                               f"expected")
        self.lens = None
        if self.has(4):
            if np.dtype(self.ins[4].dtype).kind not in "iu":
                self.malformed(f"sequence_lens is {self.ins[4].dtype}, not integer")
            self.lens = self._static_lens()

    def _output_shapes(self, hstate, state):
        """Which outputs are asked for (``self.present``) and their shapes.
        TFLite's sequence ops give Y without its direction axis:
        ``squeeze_y``, the directions side by side on the last axis (a
        bidirectional LSTM's merged output), or ``split_y``, one Y per
        direction and no final states."""
        nd, N, P = len(self.dirs), self.N, self.P
        y = (self.S, nd, N, P) if self.layout == 0 else (N, self.S, nd, P)
        self.squeeze = bool(int(self.attrs.get("squeeze_y", 0)))
        self.split = bool(int(self.attrs.get("split_y", 0)))
        if self.squeeze and self.split:
            self.malformed("squeeze_y and split_y together")
        if self.squeeze or self.split:
            y = y[:2] + (nd * P,) if self.layout == 1 else (y[0], y[2], nd * P)
        shapes = (y[:2] + (P,),) * nd if self.split else (y, hstate, state)
        names = list(self.op.outputs) + [""] * 3
        self.present = [bool(k) for k in names[:len(shapes)]]
        if any(names[len(shapes):]):
            self.malformed(f"{len([k for k in names if k])} outputs; at most {len(shapes)} "
                           f"expected")
        return [s for s, p in zip(shapes, self.present) if p]

    def _out_size(self):
        """The size of h (and of Y's last axis)."""
        return self.H

    def _extra_inputs(self, nd):
        """index -> (what, shape) of a subclass's further inputs."""
        return {}

    def _extra_scratch(self):
        """(name, shape, dtype) of a subclass's further scratch parts."""
        return []

    def _static_lens(self):
        """"runtime" when sequence_lens is read at run time; None when it is a
        constant that keeps every entry's full length (no mask needed)."""
        if self.ins[4].data is None:
            return "runtime"
        lens = np.asarray(self.ins[4].data)
        if lens.min(initial=0) < 0 or lens.max(initial=0) > self.S:
            self.malformed(f"sequence_lens {lens.tolist()} outside [0, {self.S}]")
        return None if (lens == self.S).all() else "runtime"

    def _activations(self):
        """Per direction, the tuple of activation functions (f[, g[, h]])."""
        k = len(self.default_acts)
        names = self.attrs.get("activations")
        names = list(self.default_acts) * len(self.dirs) if names is None else \
            [str(n) for n in names]
        if len(names) == k and len(self.dirs) == 2:
            names = names * 2
        if len(names) != k * len(self.dirs):
            self.malformed(f"{len(names)} activations; {k} per direction expected")
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
        parts = [("xw", (self.steps * N, GH), self.dtype)] + fixed
        self.part_names = [p[0] for p in parts]
        self.scratch = [(s, d) for _, s, d in parts]
        if self.lens is not None:
            lens_dt = np.dtype(self.ins[4].dtype)
            self.step_ids = np.arange(self.S, dtype=lens_dt).reshape(self.S, 1, 1)

    # -- run ---------------------------------------------------------------------
    def run(self, xs, ys, sc):
        s = dict(zip(self.part_names, sc))
        xs = list(xs) + [None] * (11 - len(xs))
        ydir, yh, yc = self._y_views(ys)
        if self.layout == 1:        # the same [dir, batch, hidden] order for both
            yh = None if yh is None else yh.swapaxes(0, 1)
            yc = None if yc is None else yc.swapaxes(0, 1)
            xs[5] = None if xs[5] is None else xs[5].swapaxes(0, 1)
            xs[6] = None if xs[6] is None else xs[6].swapaxes(0, 1)
        bias = self._bias(xs[3], s)
        mask = None
        if self.lens is not None:
            mask = s["mask"]
            np.less(self.step_ids, xs[4].reshape(1, self.N, 1), out=mask)
        for d, rev in enumerate(self.dirs):
            state = self._initial_state(xs, d, s)
            state = self._direction(xs, d, rev, bias, mask, ydir[d], state, s)
            for out, st in zip((yh, yc), state[::2]):
                if out is None:
                    continue
                if mask is None:
                    np.copyto(out[d], st)
                else:               # as onnxruntime: 0 for an empty sequence
                    out[d].fill(0)
                    np.copyto(out[d], st, where=mask[0])

    def _y_views(self, ys):
        """Y of each direction as a [seq, batch, hidden] view (None when Y
        is not asked for), Y_h, Y_c."""
        it = iter(ys)
        if self.split:              # one output per direction
            ydir = [next(it) if p else None for p in self.present]
            return [y if y is None or self.layout == 0 else y.swapaxes(0, 1)
                    for y in ydir], None, None
        y, yh, yc = (next(it) if p else None for p in (self.present + [False])[:3])
        P, nd = self.P, len(self.dirs)
        if y is None:
            return [None] * nd, yh, yc
        if self.squeeze:            # [seq, batch, dirs * P] (batch first in layout 1)
            y = y if self.layout == 0 else y.swapaxes(0, 1)
            return [y[:, :, d * P:(d + 1) * P] for d in range(nd)], yh, yc
        y = y if self.layout == 0 else y.transpose(1, 2, 0, 3)     # [seq, dir, batch, P]
        return [y[:, d] for d in range(nd)], yh, yc

    def _bias(self, b, s):
        """Wb + Rb per direction (the bias added to the input projection)."""
        if b is None:
            return None
        GH = self.gates * self.H
        bias = s["bias"]
        np.add(b[:, :GH], b[:, GH:], out=bias)
        return bias

    def _initial_state(self, xs, d, s):
        """[h, h_next] (+ [c, c_next] for LSTM), h and c set to their initial values."""
        state = [s[n] for n in ("h", "hn", "c", "cn")[:2 * self.n_state]]
        for k, i in enumerate((5, 6)[:self.n_state]):
            if xs[i] is None:
                state[2 * k].fill(0)
            else:
                np.copyto(state[2 * k], xs[i][d])
        return state

    def _chunks(self, rev):
        """(t0, t1) blocks of steps the projection covers, in walking order."""
        blocks = [(t, min(t + self.steps, self.S)) for t in range(0, self.S, self.steps)]
        return blocks[::-1] if rev else blocks

    def _project(self, x, wt, b, t0, t1, xw):
        """X[t0:t1] @ W^T (+ b) into xw; returns the step -> view function."""
        n, N, GH = t1 - t0, self.N, self.gates * self.H
        if self.layout == 0:
            out = xw[:n * N]
            np.matmul(x[t0:t1].reshape(n * N, self.I), wt, out=out)
            view = lambda t: out[(t - t0) * N:(t - t0 + 1) * N]    # noqa: E731
        else:
            out = xw[:n * N].reshape(N, n, GH)
            np.matmul(x[:, t0:t1], wt, out=out)
            view = lambda t: out[:, t - t0]                         # noqa: E731
        if b is not None:
            np.add(out, b, out=out)
        return view

    def _direction(self, xs, d, rev, bias, mask, y, state, s):
        """Every step of direction ``d`` (``y``: its Y, [seq, batch, hidden]);
        returns the final state list."""
        x = xs[0]
        wt = xs[1][d].T if self.wt is None else self.wt[d]
        rt = xs[2][d].T if self.rt is None else self.rt[d]
        b = None if bias is None or self.late_bias else bias[d]
        for t0, t1 in self._chunks(rev):
            view = self._project(x, wt, b, t0, t1, s["xw"])
            for t in (range(t1 - 1, t0 - 1, -1) if rev else range(t0, t1)):
                self.cell(d, view(t), rt, xs, state, s)
                m = None if mask is None else mask[t]
                if m is None:       # the next state becomes the state
                    state[0], state[1] = state[1], state[0]
                    if self.n_state == 2:
                        state[2], state[3] = state[3], state[2]
                else:
                    np.copyto(state[0], state[1], where=m)
                    if self.n_state == 2:
                        np.copyto(state[2], state[3], where=m)
                if y is not None:
                    if m is None:
                        np.copyto(y[t], state[0])
                    else:
                        y[t].fill(0)
                        np.copyto(y[t], state[1], where=m)
        return state

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
        super().setup()
        self.input_forget = bool(int(self.attrs.get("input_forget", 0)))
        self.cifg = bool(int(self.attrs.get("cifg", 0)))
        self.one = const(1, self.dtype)
        self.cell_clip = self._threshold("cell_clip")   # C clipped after its update
        self.proj_clip = self._threshold("proj_clip")
        self.proj = self.has(8)
        self.pwt = self._transposed(8) if self.proj else None
        if self.pwt is not None:
            self.runtime = tuple(i for i in self.runtime if i != 8)
        self.ln = self.has(10)
        self.late_bias = self.ln
        self.eps, self.inv_h = const(1e-8, self.dtype), const(1 / max(self.H, 1), self.dtype)

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
