"""TFLite ``UNIDIRECTIONAL_SEQUENCE_LSTM`` (float32) -> pyarena's ``LSTM``
kernel (the ONNX operator's).

TFLite gives the gates as separate tensors -- input, forget, cell, output
weights ``[n_cell, n_input]``, recurrent weights ``[n_cell, n_output]``,
biases ``[n_cell]``, peepholes ``[n_cell]`` -- ONNX stacks them in the
order i, o, f, c: ``W [1, 4H, I]``, ``R [1, 4H, H]``, ``B [1, 8H]`` (the
recurrent half zero) and ``P [1, 3H]`` (i, o, f).  The stacked copies are
new constants of the graph.  ``time_major`` false is ONNX's ``layout`` 1;
the output has no direction axis (``squeeze_y``).  The fused activation
is the cell's g and h (TANH, RELU), ``cell_clip`` clips C after each
update (the kernel's ``cell_clip``).

The state inputs (18, 19) are TFLite variable tensors, zero when the
interpreter is made and carried over from one invocation to the next;
pyarena runs each inference from the zero state, as a fresh interpreter
does.  CIFG (no input gate weights: ``i = 1 - f``) is the kernel's
``cifg`` with zeros in the input gate's place.  Refused by name: a
projection, layer normalisation, quantized weights, a state that
is not a variable tensor.
"""
import numpy as np

from ..errors import UnsupportedOpError

__all__ = ["convert_sequence_lstm"]

#: TFLite input index of each gate's tensors, in ONNX's i, o, f, c order
_W = (1, 4, 2, 3)
_R = (5, 8, 6, 7)
_B = (12, 15, 13, 14)
_P = (9, 11, 10)        # peepholes i, o, f
_ACTS = {1: "Relu", 4: "Tanh"}


def convert_sequence_lstm(tflite, t, op, ins, outs, opname):
    """(op type, attrs, input indices) of the ``LSTM`` running ``op``; new
    stacked constants are added to ``t`` (the importer's tensors)."""
    code = "UNIDIRECTIONAL_SEQUENCE_LSTM"

    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} ({code}): {why}")

    ins = list(ins) + [-1] * (24 - len(ins))
    have = [i >= 0 for i in ins]
    o = tflite.UnidirectionalSequenceLSTMOptions()
    tab = op.BuiltinOptions()
    if tab is None:
        fail("no options")
    o.Init(tab.Bytes, tab.Pos)
    act = _ACTS.get(int(o.FusedActivationFunction()))
    if act is None:
        fail(f"fused activation {int(o.FusedActivationFunction())} (TANH or RELU supported)")
    cifg = not have[1]          # no input gate: i = 1 - f (the kernel's cifg)
    if cifg and (have[5] or have[9]):
        fail("CIFG without input weights but with recurrent or peephole ones")
    if have[16] or have[17]:
        fail("a projection layer is not supported")
    if any(have[20:24]):
        fail("layer normalisation is not supported")
    if bool(o.DiagonalRecurrentTensors()):
        fail("diagonal recurrent tensors are not supported")
    weights = tuple(i for i in _W + _R + _B if not (cifg and i in (1, 5, 12))) + \
        tuple(i for i in _P if have[i])
    for i in weights:
        if not have[i]:
            fail(f"input {i} is missing")
        if t.data[ins[i]] is None:
            fail(f"input {i} ({t.names[ins[i]]!r}) must be constant")
        if t.dtypes[ins[i]] != np.float32 or t.dtypes[ins[0]] != np.float32:
            fail("only float32 is supported")
    if any(have[i] for i in _P) and not all(have[i] for i in _P[cifg:]):
        fail("peepholes must be given for the input, forget and output gates together")
    H = t.shapes[ins[_R[1]]][0]

    def val(i):                 # CIFG's missing input gate: zeros, overwritten
        if not have[i] or (cifg and i in (1, 5, 12)):
            shape = list(t.shapes[ins[_W[1] if i == 1 else _R[1] if i == 5 else _B[1]]])
            return np.zeros(shape if i in (1, 5) else [H], np.float32)
        return np.asarray(t.data[ins[i]], np.float32)
    w = np.concatenate([val(i) for i in _W])[None]
    r = np.concatenate([val(i) for i in _R])[None]
    if r.shape[2] != H:
        fail(f"recurrent weights {list(r.shape[1:])}: n_output differs from n_cell "
             f"(a projection)")
    b = np.concatenate([np.concatenate([val(i) for i in _B]),
                        np.zeros(4 * H, np.float32)])[None]
    layout = 0 if bool(o.TimeMajor()) else 1
    new = [ins[0], t.add_const(f"{opname}/W", w), t.add_const(f"{opname}/R", r),
           t.add_const(f"{opname}/B", b), -1]
    new += [_state(t, ins[i], fail) for i in (18, 19)]
    if have[_P[1]]:
        new.append(t.add_const(f"{opname}/P", np.concatenate([val(i) for i in _P])[None]))
    while new[-1] < 0:
        new.pop()
    attrs = dict(hidden_size=int(H), layout=layout, squeeze_y=1,
                 activations=["Sigmoid", act, act])
    if cifg:
        attrs["cifg"] = 1
    if float(o.CellClip()) > 0:
        attrs["cell_clip"] = float(o.CellClip())
    if len(outs) != 1:
        fail(f"{len(outs)} outputs (1 expected)")
    return "LSTM", attrs, new


def _state(t, i, fail):
    """The initial-state input: -1 (the kernel's zeros) for a variable
    tensor without a buffer, the only kind the interpreter takes."""
    if i < 0:
        return -1
    if t.data[i] is not None or not t.variables[i]:
        fail(f"state {t.names[i]!r} is not a variable tensor (the zero state)")
    return -1
