"""The time loop of the recurrent layers (:class:`TimeLoop`, part of
``_Recurrent`` in :mod:`.recurrent`): the directions (forward, reverse, or
both one after the other), the steps in order, and Y, Y_h and Y_c (each
may be omitted) written straight into their planned views in either
``layout``.  What one step computes is the subclass's ``cell``.

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
"""
import numpy as np

__all__ = ["TimeLoop"]


class TimeLoop:
    """``run`` of ``_Recurrent``: reads what setup decided (``dirs``,
    ``layout``, the shapes, ``wt`` / ``rt``, ``part_names``, ``steps``,
    ``lens``) and calls ``cell`` once per step and direction.  GRU
    overrides :meth:`_bias`."""

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
                self.step = t       # (the step a cell may read)
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
