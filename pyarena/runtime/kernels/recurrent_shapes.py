"""The operands and outputs of a recurrent layer, checked against ONNX's
shapes (:class:`RecurrentShapes`, part of ``_Recurrent`` in :mod:`.recurrent`).

From X and R it reads the sequence length ``S``, the batch ``N``, the
input size ``I`` and the hidden size ``H`` (``P``: h's size, H or an LSTM's
projection); every other operand -- W, R, B, sequence_lens, initial_h,
initial_c, the peepholes, a subclass's further inputs -- and every output
asked for must agree, in either ``layout``, or the graph is malformed
(GraphError naming the op).  It also decides which outputs are present
and how Y is laid out (TFLite's ``squeeze_y`` / ``split_y``), and whether
``sequence_lens`` needs a step mask at run time.
"""
import numpy as np

__all__ = ["RecurrentShapes"]


class RecurrentShapes:
    """Shape checks of ``_Recurrent.setup``: set ``S``, ``N``, ``I``, ``H``,
    ``P``, ``lens``, ``present``, ``squeeze`` and ``split``.  A subclass
    with further inputs or another h size overrides :meth:`_extra_inputs`
    and :meth:`_out_size`; inputs whose element type is not X's
    (sequence_lens, 8-bit weights) are listed in ``own_dtype``."""

    own_dtype = (4,)

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
            if self.has(i) and i not in self.own_dtype and \
                    np.dtype(self.ins[i].dtype) != self.dtype:
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

    def _static_lens(self):
        """"runtime" when sequence_lens is read at run time; None when it is a
        constant that keeps every entry's full length (no mask needed)."""
        if self.ins[4].data is None:
            return "runtime"
        lens = np.asarray(self.ins[4].data)
        if lens.min(initial=0) < 0 or lens.max(initial=0) > self.S:
            self.malformed(f"sequence_lens {lens.tolist()} outside [0, {self.S}]")
        return None if (lens == self.S).all() else "runtime"
