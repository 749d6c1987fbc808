"""Shared by the quantized kernel families (as ``spatial.py`` is by conv
and pooling): the integer ranges, requantization and :class:`QuantKernel`.

Quantized tensors are planned at their own element size, and integer
weights stay in the weights arena in their file dtype.  The arithmetic
runs in floating point on bounded pieces in the op's scratch -- at most a
quarter of the bytes of the op's own tensors (:meth:`QuantKernel.shrink_budget`),
so the float workspace does not set an int8 model's arena.  Results are
requantized with ONNX's semantics: round half to even, saturation to the
output type's range (or a fused activation's narrower clamp).
"""
import math

import numpy as np

from .registry import Kernel, items_per_step

__all__ = ["MIN_SCRATCH", "QRANGES", "axis_vector", "requantize", "dequantize", "QuantKernel"]

QRANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255),
           np.dtype(np.int16): (-32768, 32767), np.dtype(np.uint16): (0, 65535),
           np.dtype(np.int32): (-2**31, 2**31 - 1)}


def axis_vector(v, ndim, axis):
    """A per-axis vector shaped to broadcast along ``axis`` of an
    ``ndim``-D array (a scalar stays a scalar)."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def dequantize(q, scale, zero_point=None, axis=1):
    """``(q - zero_point) * scale`` in float64, per tensor or per ``axis``:
    the importers fold constant dequantizations with it."""
    q = np.asarray(q)
    nd = max(1, q.ndim)
    axis = axis + nd if axis < 0 else axis
    s = axis_vector(np.asarray(scale, np.float64), nd, axis)
    z = 0.0 if zero_point is None else axis_vector(np.asarray(zero_point, np.float64), nd,
                                                    axis)
    return (q.astype(np.float64) - z) * s


def requantize(acc, out, zero_point, lo, hi):
    """``out = saturate(round_half_even(acc) + zero_point)``; ``acc`` (a
    float scratch view shaped like ``out``) is overwritten."""
    np.rint(acc, out=acc)
    np.add(acc, zero_point, out=acc)
    np.clip(acc, lo, hi, out=acc)
    np.copyto(out, acc, casting="unsafe")


#: the least workspace a quantized op is given (see QuantKernel.shrink_budget)
MIN_SCRATCH = 16 << 10
#: the least elements one step of a quantized op takes, whatever its budget:
#: its least workspace in float32 operand pairs (not MIN_STEP_ELEMENTS, whose
#: larger scratch would set the arena of a small int8 model)
STEP_ELEMENTS = MIN_SCRATCH // 8

_INTEGER = tuple(QRANGES)


class QuantKernel(Kernel):
    """Helpers shared by the quantized kernels."""

    def integer_types(self, *tensors):
        """Refuse, by name, a tensor whose type is not an 8/16/32-bit
        integer (float8, int4, ...)."""
        for t in tensors:
            if t is not None and np.dtype(t.dtype) not in _INTEGER:
                self.fail(f"tensor {t.name!r} of type {np.dtype(t.dtype).name} is not "
                          f"supported (8, 16 or 32-bit integers)")

    def shrink_budget(self):
        """Float workspace at most a quarter of the bytes of the op's
        tensors (its 8-bit activations are 4x smaller than the float ones
        its scratch holds), so the scratch does not set the arena of an
        int8 model; at least MIN_SCRATCH, at most the op's budget (its
        steps then still take STEP_ELEMENTS elements: :meth:`step_items`)."""
        def nbytes(t):
            return math.prod(int(d) for d in t.shape) * np.dtype(t.dtype).itemsize
        own = sum(nbytes(t) for t in list(self.ins) + list(self.outs)
                  if t is not None and t.data is None)
        self.scratch_budget = int(min(self.scratch_budget, max(MIN_SCRATCH, own // 4)))

    def step_items(self, item_bytes, total, item_elements=1):
        """Items per step within the budget, at least STEP_ELEMENTS
        elements' worth (``registry.items_per_step``)."""
        return items_per_step(self.scratch_budget, item_bytes, total, item_elements,
                              STEP_ELEMENTS)

    def qparam(self, i, what, default=0.0):
        """A scale or zero point: the constant of input ``i`` (``default``
        when omitted), as a float array."""
        v = self.const(i, what) if self.has(i) else None
        return np.asarray(default if v is None else v, dtype=np.float64)

    def runtime_param(self, i):
        """Whether input ``i`` is a scale / zero point computed at run time
        (DynamicQuantizeLinear's outputs): then it is read per call."""
        return self.has(i) and self.ins[i].data is None

    def out_range(self, i=0):
        """The output type's range, narrowed to ``qmin`` / ``qmax`` (a fused
        activation applied as a clamp of the quantized output)."""
        dt = np.dtype(self.outs[i].dtype)
        if dt not in QRANGES:
            self.fail(f"output type {dt} is not an integer type this kernel writes")
        lo, hi = QRANGES[dt]
        return max(lo, int(self.attrs.get("qmin", lo))), min(hi, int(self.attrs.get("qmax", hi)))

    def rows_per_chunk(self, shape, per_elem_bytes):
        """Outer-axis rows per chunk so a chunk's float scratch fits the
        budget (at least one row, and STEP_ELEMENTS elements)."""
        row = math.prod(shape[1:]) if len(shape) > 1 else 1
        return self.step_items(row * per_elem_bytes, shape[0] if shape else 1, row)
