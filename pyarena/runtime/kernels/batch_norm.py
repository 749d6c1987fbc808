"""BatchNormalization: inference form folded into a per-channel scale and
shift, training form in batch_norm_training.py.

The graph rewrite (:mod:`pyarena.runtime.fusion_norm`) may give an
inference one the constant Mul / Add after it (in its parameters) and the
activation after those (its ``activation`` attribute, as a Conv's), and
the NHWC pass may lay it out NHWC (``layout``: its channels on the last
axis).  float32 with constant statistics runs natively:
``pa_scale_bias_act``, the scale, shift and activation in one pass over
memory (in place when the planner gives the input's memory).
"""
import math

import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .batch_norm_training import run_training, setup_training
from .native import NATIVE_DTYPE, Pointers, native_act
from . import shape_rules as rules
from .registry import Kernel, const, register


@register
class BatchNorm(Kernel):
    """Inference BatchNorm folded at build time into y = x * scale + shift
    (per channel: axis 1, the last axis with ``layout="NHWC"``), then the
    fused activation; natively in one pass, else two in-place-safe ufunc
    passes (and the activation's, applied by :class:`Kernel`).  With a scale, bias, mean or variance
    fed at run time the fold happens every run, into the scratch."""

    op_types = ('BatchNormalization',)
    family = 'reduce'
    inplace = 'unary'
    shape_rule = rules.batch_norm
    rows = 'local'          # a per-channel affine map: row for row
    nhwc = 'attr'           # (the NHWC pass takes inference ones only)

    def setup(self):
        self.runtime = (0,)
        self.training = False
        self.native = None
        if int(self.attrs.get("training_mode", 0)):
            setup_training(self)        # (batch statistics: batch_norm_training.py)
            return
        if len([o for o in self.op.outputs if o]) > 1:
            self.fail("running mean/var outputs need training_mode=1")
        nd = len(self.shape(0))
        nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        if nhwc and nd != 4:
            self.malformed(f"an NHWC input of rank {nd}")
        self.bshape = (-1,) if nhwc else (-1,) + (1,) * (nd - 2)
        self.live = any(self.ins[i].data is None for i in range(1, 5))
        if self.live:       # folded every run
            self.runtime = None
            self.eps = const(float(self.attrs.get("epsilon", 1e-5)), self.dtype)
            self.scratch = [(self.shape(1), self.dtype)] * 2
            return
        # in the data type, in onnxruntime's order (batch_norm.h):
        # 1 / sqrt(var + eps), times scale; bias - mean * that
        dt = self.dtype
        g, b, m, v = (self.const(i, w).astype(dt)
                      for i, w in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "var")))
        eps = const(float(self.attrs.get("epsilon", 1e-5)), dt)
        scale = (dt.type(1) / np.sqrt(v + eps)) * g
        shift = b - m * scale
        self.scale = self.keep(np.ascontiguousarray(scale.reshape(self.bshape)))
        self.shift = self.keep(np.ascontiguousarray(shift.reshape(self.bshape)))
        self._setup_native(nhwc)

    def _setup_native(self, nhwc):
        """The ``pa_scale_bias_act`` call's arguments, float32 only."""
        shape = self.shape(0)
        if not self.use_native or self.dtype != NATIVE_DTYPE or len(shape) < 2 or \
                tuple(self.oshape()) != tuple(shape):
            return
        c = shape[-1] if nhwc else shape[1]
        if self.scale.size != c or min(shape) < 1:
            return
        spatial = math.prod(shape[1:-1]) if nhwc else math.prod(shape[2:])
        self.ptrs = Pointers(self)
        act = native_act(self.attrs)
        if act is None:
            return
        self.act_fused = True
        self.native = (nk.layout("NHWC" if nhwc else "NCHW"), shape[0], c, spatial,
                       nk.fptr(self.scale), nk.fptr(self.shift), act)

    def run(self, xs, ys, sc):
        if self.training:
            run_training(self, xs, ys, sc)
            return
        y = ys[0]
        if self.native is not None:
            lay, n, c, sp, s, b, act = self.native
            x, yp = self.ptrs(xs[0], y)
            st = lib.pa_scale_bias_act(lay, n, c, sp, x, s, b, yp, act, self.workers)
            if st:
                check(st, f"BatchNormalization {self.op.name!r}")
            return
        if not self.live:
            scale, shift = self.scale, self.shift
        else:
            scale, shift = sc
            np.add(xs[4], self.eps, out=scale)
            np.sqrt(scale, out=scale)
            np.divide(1, scale, out=scale)
            np.multiply(scale, xs[1], out=scale)
            np.multiply(xs[3], scale, out=shift)
            np.subtract(xs[2], shift, out=shift)
            scale, shift = scale.reshape(self.bshape), shift.reshape(self.bshape)
        np.multiply(xs[0], scale, out=y)
        np.add(y, shift, out=y)         # (then the activation: Kernel's epilogue)
