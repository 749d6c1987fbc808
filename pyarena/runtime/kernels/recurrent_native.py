"""The float32 LSTM's time loop in the C core (``pa_lstm_run``): one call
per direction instead of a dozen NumPy calls per step (a streaming model
runs one step per inference; a sequence of 200 steps spent most of its
time in the Python cell).

It takes the common case only: float32, the default gates (Sigmoid, Tanh,
Tanh), no clip, peepholes, ``input_forget``, ``sequence_lens``, TFLite
projection / CIFG / layer norm / cell clip, and W and R constants (kept
transposed in the weights arena).  The input product is computed a row at
a time inside the loop, so no projection of the sequence is held: the
op's scratch has no ``xw`` part.  The arithmetic is onnxruntime's gates
(its activations are MLAS's approximations); the NumPy cell (exact sigmoid
and tanh, BLAS products) agrees within float rounding, and
tests/runtime/test_recurrent_native.py compares the two and onnxruntime.
"""
import numpy as np

from ..._native import lstm as native_lstm

__all__ = ["native_loop_ok", "run_direction"]

_DEFAULT = ("sigmoid", "tanh", "tanh")


def native_loop_ok(k):
    """True when the LSTM kernel ``k`` runs natively; called by its setup
    once the shapes, W / R and the LSTM options are known, before the
    scratch is planned."""
    names = tuple(n.lower() for n in k._activation_names())
    return bool(k.use_native and k.dtype == np.float32 and k.wt is not None
                and k.rt is not None and k.lens is None and k.clip is None and not k.has(7)
                and not (k.input_forget or k.cifg or k.proj or k.ln)
                and k.cell_clip is None and names == _DEFAULT * len(k.dirs))


def run_direction(k, xs, d, rev, bias, y, state, s):
    """Every step of direction ``d`` natively (as TimeLoop._direction);
    the state is updated in place in state[0] (h) and state[2] (c)."""
    x = xs[0] if k.layout == 0 else xs[0].swapaxes(0, 1)
    if x.strides[-1] != x.itemsize:     # (a fed view with a strided last axis)
        x = np.ascontiguousarray(x)
    out = y if y is None or y.strides[-1] == y.itemsize else np.empty(y.shape, y.dtype)
    native_lstm.run(x, k.wt[d], None if bias is None else bias[d], k.rt[d], state[0],
                    state[2], out, rev, s["g"])
    if out is not y:
        np.copyto(y, out)
    return state
