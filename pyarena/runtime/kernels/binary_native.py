"""Element-wise Add as a C call record (``pa_add``), for the executor's
batches: a residual Add between two native kernels (a YOLO-style
detector's bottlenecks) would otherwise return to the interpreter and run
NumPy's add on one thread.  The same float32 additions, so NumPy's bits."""
import numpy as np

from .native import NATIVE_DTYPE

__all__ = ["add_calls"]


def _addr(a):
    return a.__array_interface__["data"][0]


def add_calls(k, xs, ys):
    """[the ``add`` record] of Elementwise kernel ``k`` on its bound views
    when it is a two-operand float32 Add of three C-contiguous arrays of one
    shape, the output either operand or apart from both; else None."""
    if k.op.op_type != "Add" or not k.binary or k._act is not None or len(xs) != 2:
        return None
    a, b, y = xs[0], xs[1], ys[0]
    arrays = (a, b, y)
    if not all(isinstance(v, np.ndarray) and v.dtype == NATIVE_DTYPE and v.flags.c_contiguous
               and v.shape == y.shape for v in arrays):
        return None
    for x in (a, b):
        if _addr(x) != _addr(y) and np.may_share_memory(x, y):
            return None     # partly overlapping: not what pa_add takes
    return [("add", None, None, a, b, y, (y.size,))]
