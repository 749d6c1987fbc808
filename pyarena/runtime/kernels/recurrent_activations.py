"""The activations of the recurrent layers (ONNX LSTM, GRU, RNN), by name.

ONNX names a recurrent op's gate activations per direction
(``activations``, with ``activation_alpha`` / ``activation_beta``); each
name here makes, from its alpha, beta and a constant maker ``c`` (a value
in the op's dtype), a function ``f(x, t)`` that applies it in place on
``x`` with ``t`` a temporary of ``x``'s shape -- no allocation per step.
The cells in :mod:`.recurrent` call them through ``_Recurrent.clipped``.
"""
import numpy as np

__all__ = ["ACTIVATIONS"]


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
