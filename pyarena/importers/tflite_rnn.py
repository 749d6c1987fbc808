"""TFLite ``UNIDIRECTIONAL_SEQUENCE_RNN`` -> pyarena's ``RNN`` kernel (the
ONNX operator's): ``h = act(W x + R h + b)`` at every step, Y the h's.

TFLite's inputs -- weights ``[units, input]``, recurrent weights ``[units,
units]``, bias ``[units]``, the hidden state (a variable tensor) -- are
ONNX's W, R and B with a direction axis (B's recurrent half zero), new
constants of the graph.  ``time_major`` false is ``layout`` 1 and Y has no
direction axis (``squeeze_y``).  The fused activation is the cell's: TANH,
RELU, or NONE (``Affine`` with its defaults, the identity).  int8 weights
with one scale (TFLite's hybrid RNN) are dequantized at import, as for the
LSTM (:func:`.tflite_lstm.weight`): activations stay float.  Each run
starts from the zero state, as a fresh interpreter does.
"""
import numpy as np

from ..errors import UnsupportedOpError
from .tflite_lstm import weight, zero_state

__all__ = ["convert_sequence_rnn"]

_ACTS = {0: "Affine", 1: "Relu", 4: "Tanh"}


def convert_sequence_rnn(tflite, t, op, ins, outs, opname):
    """(op type, attrs, input indices) of the ``RNN`` running ``op``."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} (UNIDIRECTIONAL_SEQUENCE_RNN): {why}")

    if len(ins) != 5 or min(ins) < 0:
        fail(f"inputs {list(ins)}: input, weights, recurrent weights, bias, state expected")
    if len(outs) != 1:
        fail(f"{len(outs)} outputs (1 expected)")
    o = tflite.SequenceRNNOptions()
    tab = op.BuiltinOptions()
    if tab is None:
        fail("no options")
    o.Init(tab.Bytes, tab.Pos)
    act = _ACTS.get(int(o.FusedActivationFunction()))
    if act is None:
        fail(f"fused activation {int(o.FusedActivationFunction())} (NONE, TANH or RELU "
             f"supported)")
    if t.dtypes[ins[0]] != np.float32:
        fail(f"input is {t.dtypes[ins[0]]}: float32 activations supported")
    if t.dtypes[ins[3]] != np.float32:
        fail(f"bias is {t.dtypes[ins[3]]}, not float32")
    w, r, b = (weight(t, ins[k], fail, what) for k, what in
               ((1, "weights"), (2, "recurrent weights"), (3, "bias")))
    zero_state(t, ins[4], fail)
    new = [ins[0], t.add_const(f"{opname}/W", w[None]), t.add_const(f"{opname}/R", r[None]),
           t.add_const(f"{opname}/B", np.concatenate([b, np.zeros_like(b)])[None])]
    return "RNN", dict(hidden_size=int(r.shape[0]), layout=0 if bool(o.TimeMajor()) else 1,
                       squeeze_y=1, activations=[act]), new
