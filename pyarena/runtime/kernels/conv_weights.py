"""The weights of a convolution, as every path of Conv lays them out
(:class:`ConvWeights`, a base of :class:`.conv.Conv`): read in the op's
layout without copying (:meth:`~ConvWeights._weights`: a converted ONNX
Conv's OIHW constant seen as OHWI / 1HWC), with the per-channel scales
fusion folded into the op applied where a path lays them out
(:meth:`~ConvWeights._fold`), or taken as the prior kernel laid them out
-- the same op at the last signature's shapes, when the layout cannot
differ (:meth:`~ConvWeights._lender`).  The graph keeps the file's
constant; a path's layout is the only folded copy.
"""
from dataclasses import replace

import numpy as np

from .weight_scales import fold_scales

__all__ = ["ConvWeights"]

#: attributes that place the window, not the weights (a lender may differ in them)
_GEOMETRY = ("pads", "auto_pad")


class ConvWeights:
    """Conv's weights, shared by its paths (``conv_native.py``,
    ``conv_numpy.py``), which call these through the kernel."""

    def _weights(self):
        """Input 1 as this op reads it, without copying: OIHW, or for NHWC
        OHWI / 1HWC (``weight_layout``) -- a converted ONNX Conv's constant
        is still OIHW (``notes.weights_oihw``, the NHWC pass: pyarena/runtime/nhwc.py) and is
        re-laid out here, not in the graph."""
        w = self._stand_in() if self.sizing else None
        if w is None:
            w = self.const(1, "weight").astype(self.dtype, copy=False)
        if not (self.nhwc and self.op.notes.weights_oihw) or w.ndim != 4:
            return w
        if self.attrs.get("weight_layout") == "1HWC":     # (C, 1, kh, kw) -> 1HWC
            return w.reshape(w.shape[0], w.shape[2], w.shape[3]).transpose(1, 2, 0)[None]
        return w.transpose(0, 2, 3, 1)                    # OIHW -> OHWI

    def _stand_in(self):
        """For a kernel built only for its scratch size: zeros of the
        weight's shape and this op's dtype that take no memory, where
        reading the weight would convert it (a TFLite float16 weight
        declared float32, still a view of the file): the conversion would
        read every page of it from the file and copy it, and a budget
        search sizes each convolution many times.  None otherwise (the
        weight as it is costs nothing)."""
        t = self.ins[1] if len(self.ins) > 1 else None
        d = None if t is None else t.data
        if d is None or (getattr(d, "dtype", None) == np.dtype(t.dtype) == self.dtype):
            return None
        return np.broadcast_to(np.zeros((), self.dtype), np.shape(d))

    def _fold(self, w, axis=0):
        """The weights ``w`` (output channels on ``axis``) with the scales
        fusion folded into them (``notes.weight_scales``,
        :func:`.weight_scales.fold_scales`), where setup lays them
        out: the graph keeps its constant as the file has it, and this op's
        layout of them is the only folded copy.  Not when only the scratch
        size is asked (the values do not matter there)."""
        scales = self.op.notes.weight_scales
        if not scales or self.sizing:
            return w
        return fold_scales(w, scales, axis)

    def _lender(self, mode):
        """The path of the prior kernel (:attr:`Kernel.prior`, the same op at
        other shapes) when its weights as laid out for ``mode`` are this one's: the
        same mode, attributes, weight and bias arrays, dtype, native setting,
        channels, groups and window.  Those layouts (every NumPy mode's, and
        the native depthwise kernel's packing) depend on nothing else -- not
        on the spatial size, which the geometry, bands and scratch follow
        here as for a new kernel; so does the NHWC pointwise packing (the C
        core always tiles NHWC by pixels).  The other native packings do not
        (the C core picks their tiling by the output size: NCHW pointwise,
        the few-input-channel kernel), so they are packed again."""
        p = self.prior
        if p is None or type(p) is not type(self) or getattr(p, "mode", None) != mode or \
                mode == "native" or (mode == "native-gemm" and not self.nhwc) or \
                self.sizing != p.sizing:
            return None
        if (p.dtype, p.use_native, p.nhwc, p.c_in, p.cout, p.G, p.kh, p.kw) != \
                (self.dtype, self.use_native, self.nhwc, self.c_in, self.cout, self.G,
                 self.kh, self.kw):
            return None
        for i in (1, 2):
            a, b = (p.ins[i] if p.has(i) else None), (self.ins[i] if self.has(i) else None)
            if (a is None) != (b is None) or a is not None and a.data is not b.data:
                return None
        try:    # (the scratch budget the slack planner sets changes no weights, nor
            # do the pads -- a patched stage's first and last bands pad
            # their own rows -- in these layouts, which are of the weights alone)
            same = len(p.attrs) == len(self.attrs) and \
                all(k in p.attrs and (p.attrs[k] is v or p.attrs[k] == v)
                    for k, v in self.attrs.items() if k not in _GEOMETRY) and \
                replace(p.op.notes, scratch_budget=None, state_bytes=None) == \
                replace(self.op.notes, scratch_budget=None, state_bytes=None)
        except (TypeError, ValueError):     # array-valued attributes: not compared
            same = False
        return p.impl if same else None
