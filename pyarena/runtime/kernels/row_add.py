"""A float32 Add of a matrix and rows broadcast against it, in C.

Additive (Bahdanau) attention adds ``W(h)`` of shape (P, 1, C) to
``U(h)`` of shape (1, Q, C): a (P, Q, C) sum that NumPy's broadcasting
loop writes at about half the speed of the C core's ``pa_bias_act``
(NHWC, no activation), which adds a row of C values to each of Q rows.
Here row p of the first operand is that bias for the Q x C matrix of the
second: P calls.  A bias over the last axis of a full operand is the
same with P = 1.  One float32 addition per value, and addition commutes:
NumPy's bits."""
import math

import numpy as np

from ..._native import check, ffi, lib
from ..._native.kernels import act_params

__all__ = ["row_plan", "RowAdd"]

_NONE = act_params("NONE")


def _split(rows, full, y):
    """(P, Q, C) when ``rows`` is y's leading axes then ones then y's last
    axis, and ``full`` ones then y's other axes (both aligned to y's rank);
    else None."""
    nd = len(y)
    if nd < 1 or y[-1] < 1:
        return None
    rows = (1,) * (nd - len(rows)) + tuple(rows)
    full = (1,) * (nd - len(full)) + tuple(full)
    if rows[-1] != y[-1] or full[-1] != y[-1]:
        return None
    for k in range(nd):         # rows: y[:k], ones; full: ones, y[k:]
        if rows[:k] == y[:k] and all(d == 1 for d in rows[k:-1]) and \
                all(d == 1 for d in full[:k]) and full[k:] == y[k:]:
            return math.prod(y[:k]), math.prod(y[k:-1]), y[-1]
    return None


def row_plan(a_shape, b_shape, y_shape):
    """(swap, P, Q, C): y (P, Q, C) = rows (P, C) + full (Q, C), the
    rows operand b when ``swap``, the form of fewest calls (least P); None
    when the shapes are not of that form (or are all one shape:
    ``pa_add``'s case)."""
    a_shape, b_shape, y_shape = tuple(a_shape), tuple(b_shape), tuple(y_shape)
    if a_shape == b_shape:
        return None
    plans = []
    for swap, (r, f) in enumerate(((a_shape, b_shape), (b_shape, a_shape))):
        s = _split(r, f, y_shape)
        if s is not None and math.prod(s) > 0:
            plans.append((s[0], bool(swap)) + s)
    return min(plans)[1:] if plans else None


def _fits(v, n):
    return isinstance(v, np.ndarray) and v.dtype == np.float32 and \
        v.flags.c_contiguous and v.size == n


class RowAdd:
    """The plan of one Add kernel; :meth:`run` is False (nothing done) when
    the bound arrays are not C-contiguous float32 or overlap in a way
    ``pa_bias_act`` does not take -- the caller then adds with NumPy."""

    def __init__(self, plan):
        self.swap, self.P, self.Q, self.C = plan

    def run(self, a, b, y, workers=ffi.NULL):
        if self.swap:
            a, b = b, a
        P, Q, C = self.P, self.Q, self.C
        if not (_fits(a, P * C) and _fits(b, Q * C) and _fits(y, P * Q * C)):
            return False
        if np.may_share_memory(a, y) or (np.may_share_memory(b, y) and not (
                P == 1 and b.__array_interface__["data"][0] == y.__array_interface__["data"][0])):
            return False
        pa, pb, py = (ffi.from_buffer("float[]", v) for v in (a, b, y))
        for p in range(P):
            st = lib.pa_bias_act(lib.PA_LAYOUT_NHWC, 1, C, Q, pb, pa + p * C,
                                 py + p * Q * C, _NONE, workers)
            if st:
                check(st, "row add")
        return True
