"""TFLite ``UNIDIRECTIONAL_SEQUENCE_LSTM`` and ``BIDIRECTIONAL_SEQUENCE_LSTM``
-> pyarena's ``LSTM`` kernel (the ONNX operator's, with TFLite's options).

TFLite gives the gates as separate tensors -- input, forget, cell, output
weights ``[n_cell, n_input]``, recurrent weights ``[n_cell, n_output]``,
biases ``[n_cell]``, peepholes ``[n_cell]`` -- ONNX stacks them in the
order i, o, f, c: ``W [dirs, 4H, I]``, ``R [dirs, 4H, P]``, ``B [dirs,
8H]`` (the recurrent half zero) and ``P [dirs, 3H]`` (i, o, f).  The
stacked copies are new constants of the graph.  ``time_major`` false is
ONNX's ``layout`` 1; the output has no direction axis (``squeeze_y``).
The fused activation is the cell's g and h (TANH, RELU), ``cell_clip``
clips C after each update (the kernel's ``cell_clip``).  A projection
(weights ``[n_output, n_cell]``, optional bias, ``proj_clip``) and layer
normalisation (coefficients per gate, stacked i, o, f, c) are the
kernel's inputs 8-10.

Weights may be int8 with one scale per tensor (TFLite's hybrid LSTM, float
activations): they are dequantized here, once, into the stacked float32
constants -- the only copies the graph holds.  Activations stay float
throughout; TFLite's hybrid kernel quantizes the input and the state to
int8 at every step as well, so the two agree to that rounding, not bit
for bit.

The state inputs are TFLite variable tensors, zero when the interpreter
is made and carried over from one invocation to the next; pyarena runs
each inference from the zero state, as a fresh interpreter does.  CIFG
(no input gate weights: ``i = 1 - f``) is the kernel's ``cifg`` with
zeros in the input gate's place.

The bidirectional op is one two-direction ``LSTM`` (the backward one walks
the sequence from its end and writes its output at each step's place):
``merge_outputs`` gives one output, forward then backward on the last axis
(``squeeze_y``), otherwise two (``split_y``).  Both directions must have
the same sizes and the same options (CIFG, peepholes, projection).

Refused by name: an auxiliary input, diagonal recurrent tensors, another
fused activation, per-channel, asymmetric or non-int8 quantized weights,
int8 activations, a state that is not a variable tensor.
"""
import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..runtime.kernels.quantization import dequantize

__all__ = ["convert_sequence_lstm", "convert_bidirectional_lstm", "weight", "zero_state"]

#: TFLite input index of each gate's tensors, in ONNX's i, o, f, c order
#: (unidirectional; the bidirectional op's forward direction too)
_W = (1, 4, 2, 3)
_R = (5, 8, 6, 7)
_B = (12, 15, 13, 14)
_P = (9, 11, 10)        # peepholes i, o, f
_LN = (20, 23, 21, 22)  # layer-norm coefficients i, o, f, c
_ACTS = {1: "Relu", 4: "Tanh"}


def weight(t, i, fail, what):
    """Constant input ``i`` as float32: float32 as it is, int8 with one
    scale (a hybrid op's weights) dequantized."""
    if t.data[i] is None:
        fail(f"{what} ({t.names[i]!r}) must be constant")
    v, dt, q = t.data[i], t.dtypes[i], t.quant[i]
    if dt == np.float32:
        return np.asarray(v, np.float32)
    if dt != np.int8 or q is None:
        fail(f"{what} ({t.names[i]!r}) is {dt}: float32 or int8 weights supported")
    if len(q[0]) != 1:
        fail(f"{what} ({t.names[i]!r}) has {len(q[0])} scales (one per tensor supported)")
    if np.any(q[1]):
        fail(f"{what} ({t.names[i]!r}) has zero point {q[1].tolist()} (symmetric int8 "
             f"weights supported)")
    return np.asarray(dequantize(np.asarray(v), q[0], q[1], q[2]), np.float32)


def zero_state(t, i, fail):
    """The initial-state input: -1 (the kernel's zeros) for a variable
    tensor without a buffer, the only kind the interpreter takes."""
    if i < 0:
        return -1
    if t.data[i] is not None or not t.variables[i]:
        fail(f"state {t.names[i]!r} is not a variable tensor (the zero state)")
    return -1


def _options(op, cls, fail):
    o = cls()
    tab = op.BuiltinOptions()
    if tab is None:
        fail("no options")
    o.Init(tab.Bytes, tab.Pos)
    if int(o.FusedActivationFunction()) not in _ACTS:
        fail(f"fused activation {int(o.FusedActivationFunction())} (TANH or RELU supported)")
    return o


def _direction(t, ins, off, fail, ln=False):
    """One direction's stacked weights, its gate tensors at TFLite input
    ``off + k`` (k as in the unidirectional op): a dict of W, R, B, P
    (None: no peepholes), proj, proj_b, ln (None when absent), cifg."""
    have = lambda k: ins[off + k] >= 0      # noqa: E731
    cifg = not have(1)          # no input gate: i = 1 - f (the kernel's cifg)
    if cifg and (have(5) or have(9)):
        fail("CIFG without input weights but with recurrent or peephole ones")
    for k in _W + _R + _B:
        if not have(k) and not (cifg and k in (1, 5, 12)):
            fail(f"input {off + k} is missing")
    if any(have(k) for k in _P) and not all(have(k) for k in _P[cifg:]):
        fail("peepholes must be given for the input, forget and output gates together")
    if ln and any(have(k) for k in _LN) and not all(have(k) for k in _LN[cifg:]):
        fail("layer-norm coefficients must be given for every gate together")
    val = {k: weight(t, ins[off + k], fail, f"input {off + k}") for k in
           _W + _R + _B + _P + (16,) if have(k)}
    for k in (17,) + (_LN if ln else ()):
        if have(k):
            if t.dtypes[ins[off + k]] != np.float32:
                fail(f"input {off + k} is {t.dtypes[ins[off + k]]}, not float32")
            val[k] = weight(t, ins[off + k], fail, f"input {off + k}")
    H = val[_R[1]].shape[0]
    _check_shapes(t, ins, off, val, H)
    zeros = {1: np.zeros_like(val[4]), 5: np.zeros_like(val[8]), 12: np.zeros(H, np.float32),
             9: np.zeros(H, np.float32), 20: np.zeros(H, np.float32)}
    pick = lambda ks: np.concatenate([val[k] if k in val else zeros[k] for k in ks])  # noqa
    d = dict(W=pick(_W), R=pick(_R), B=np.concatenate([pick(_B), np.zeros(4 * H, np.float32)]),
             P=pick(_P) if have(11) else None, proj=val.get(16), proj_b=val.get(17),
             ln=pick(_LN) if ln and have(23) else None, cifg=cifg, H=H)
    if have(17) and not have(16):
        fail("a projection bias without projection weights")
    P = H if d["proj"] is None else d["proj"].shape[0]
    if d["R"].shape[1] != P or (d["proj"] is not None and d["proj"].shape[1] != H):
        fail(f"recurrent weights {list(d['R'].shape)} and projection "
             f"{None if d['proj'] is None else list(d['proj'].shape)} do not fit n_cell {H}")
    return d


def _check_shapes(t, ins, off, val, H):
    """Every gate tensor of a direction fits n_cell H, the input's width
    and one recurrent width: ModelImportError naming the first that does
    not (the stacking would otherwise fail without a name)."""
    width = val[_R[1]].shape[1] if val[_R[1]].ndim == 2 else -1
    want = {k: (H, t.shapes[ins[0]][-1]) for k in _W}
    want.update({k: (H, width) for k in _R})
    want.update({k: (H,) for k in _B + _P + _LN})
    for k, v in val.items():
        if k in want and tuple(v.shape) != want[k]:
            raise ModelImportError(f"tensor {t.names[ins[off + k]]!r} (input {off + k}) has "
                                   f"shape {list(v.shape)}; {list(want[k])} expected "
                                   f"(n_cell {H})")


def _lstm(t, dirs, ins0, opname, o, layout, fail):
    """(op type, attrs, inputs) of the LSTM over the directions ``dirs``."""
    first = dirs[0]
    for d in dirs[1:]:
        for k in ("P", "proj", "proj_b", "ln"):
            if (d[k] is None) != (first[k] is None):
                fail(f"the directions differ: {k} in one only")
        if d["cifg"] != first["cifg"] or d["W"].shape != first["W"].shape or \
                d["R"].shape != first["R"].shape:
            fail("the directions differ in CIFG or in their sizes")
    const = lambda k: t.add_const(f"{opname}/{k}", np.stack([d[k] for d in dirs]))  # noqa
    new = [ins0, const("W"), const("R"), const("B"), -1, -1, -1,
           -1 if first["P"] is None else const("P"),
           -1 if first["proj"] is None else const("proj"),
           -1 if first["proj_b"] is None else const("proj_b"),
           -1 if first["ln"] is None else const("ln")]
    while new[-1] < 0:
        new.pop()
    act = _ACTS[int(o.FusedActivationFunction())]
    attrs = dict(hidden_size=int(first["H"]), layout=layout, activations=["Sigmoid", act, act],
                 direction="forward" if len(dirs) == 1 else "bidirectional")
    if first["cifg"]:
        attrs["cifg"] = 1
    if float(o.CellClip()) > 0:
        attrs["cell_clip"] = float(o.CellClip())
    if first["proj"] is not None and float(o.ProjClip()) > 0:
        attrs["proj_clip"] = float(o.ProjClip())
    return "LSTM", attrs, new


def convert_sequence_lstm(tflite, t, op, ins, outs, opname):
    """(op type, attrs, input indices) of the ``LSTM`` running ``op``; new
    stacked constants are added to ``t`` (the importer's tensors)."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} (UNIDIRECTIONAL_SEQUENCE_LSTM): {why}")

    ins = list(ins) + [-1] * (24 - len(ins))
    o = _options(op, tflite.UnidirectionalSequenceLSTMOptions, fail)
    if bool(o.DiagonalRecurrentTensors()):
        fail("diagonal recurrent tensors are not supported")
    if t.dtypes[ins[0]] != np.float32:
        fail(f"input is {t.dtypes[ins[0]]}: float32 activations supported")
    if len(outs) != 1:
        fail(f"{len(outs)} outputs (1 expected)")
    d = _direction(t, ins, 0, fail, ln=True)
    for i in (18, 19):
        zero_state(t, ins[i], fail)
    op_type, attrs, new = _lstm(t, [d], ins[0], opname, o, 0 if bool(o.TimeMajor()) else 1,
                                fail)
    attrs["squeeze_y"] = 1
    return op_type, attrs, new


def convert_bidirectional_lstm(tflite, t, op, ins, outs, opname):
    """(op type, attrs, input indices) of the two-direction ``LSTM``
    running ``op``: forward weights at inputs 1-17, backward at 18-34,
    states 35-38, the auxiliary input (refused) at 39-47."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} (BIDIRECTIONAL_SEQUENCE_LSTM): {why}")

    ins = list(ins) + [-1] * (48 - len(ins))
    o = _options(op, tflite.BidirectionalSequenceLSTMOptions, fail)
    if any(i >= 0 for i in ins[39:48]):
        fail("an auxiliary input (inputs 39-47) is not supported")
    if t.dtypes[ins[0]] != np.float32:
        fail(f"input is {t.dtypes[ins[0]]}: float32 activations supported")
    merge = bool(o.MergeOutputs())
    if len(outs) != (1 if merge else 2):
        fail(f"{len(outs)} outputs ({1 if merge else 2} expected with merge_outputs "
             f"{merge})")
    dirs = [_direction(t, ins, 0, fail), _direction(t, ins, 17, fail)]
    for i in range(35, 39):
        zero_state(t, ins[i], fail)
    op_type, attrs, new = _lstm(t, dirs, ins[0], opname, o, 0 if bool(o.TimeMajor()) else 1,
                                fail)
    attrs["squeeze_y" if merge else "split_y"] = 1
    return op_type, attrs, new
