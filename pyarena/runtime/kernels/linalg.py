"""Matrix products: MatMul, Gemm (alpha, beta, transposes; a constant C
folded at build time) and TFLite's FullyConnected.  Gemm with a run-time
C and beta != 1 takes one output-sized scratch buffer.
"""
import math

import numpy as np

from .registry import Kernel, const, register


@register
class MatMul(Kernel):
    op_types = ('MatMul',)
    inplace = 'none'

    def run(self, xs, ys, sc):
        np.matmul(xs[0], xs[1], out=ys[0])


@register
class Gemm(Kernel):
    op_types = ('Gemm',)
    inplace = 'none'

    def setup(self):
        self.ta = int(self.attrs.get("transA", 0))
        self.tb = int(self.attrs.get("transB", 0))
        alpha = float(self.attrs.get("alpha", 1.0))
        beta = float(self.attrs.get("beta", 1.0))
        self.alpha = None if alpha == 1.0 else const(alpha, self.dtype)
        self.c = None
        self.beta = None
        if self.has(2):
            if self.ins[2].data is not None:
                c = np.asarray(self.ins[2].data, dtype=self.dtype) * beta
                self.c = self.keep(np.ascontiguousarray(c))
                self.runtime = (0, 1)
            else:
                self.beta = const(beta, self.dtype) if beta != 1.0 else None
                if self.beta is not None:
                    self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        a, b, y = xs[0], xs[1], ys[0]
        if self.ta:
            a = a.T
        if self.tb:
            b = b.T
        np.matmul(a, b, out=y)
        if self.alpha is not None:
            np.multiply(y, self.alpha, out=y)
        if self.c is not None:
            np.add(y, self.c, out=y)
        elif self.has(2):
            c = xs[2]
            if self.beta is not None:
                np.multiply(np.broadcast_to(c, y.shape), self.beta, out=sc[0])
                c = sc[0]
            np.add(y, c, out=y)


@register
class FullyConnected(Kernel):
    """TFLite FULLY_CONNECTED: y = x.reshape(-1, K) @ W.T + b, W (units, K)."""

    op_types = ('FullyConnected',)
    inplace = 'none'
    tflite = {'FULLY_CONNECTED': ('FullyConnected', {})}

    def setup(self):
        self.units, self.k = self.shape(1)
        n = math.prod(self.shape(0))
        if n % self.k:
            self.fail(f"input size {n} is not a multiple of {self.k}")
        self.rows = n // self.k

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.rows, self.k)
        y = ys[0].reshape(self.rows, self.units)
        np.matmul(x, xs[1].T, out=y)
        if len(xs) > 2 and xs[2] is not None:
            np.add(y, xs[2], out=y)


@register
class Einsum(Kernel):
    """``numpy.einsum`` of the equation straight into the output (no path
    optimisation: ``optimize=True`` would allocate intermediates).  A
    dtype NumPy's einsum does not know (bfloat16, kind "V") goes through
    float32 copies of the operands and the result (scratch)."""

    op_types = ('Einsum',)
    inplace = 'none'

    def setup(self):
        self.eq = str(self.attrs["equation"]).replace(" ", "")
        self.wide = self.dtype.kind == "V"
        if self.wide:
            self.scratch = [(self.shape(i), np.float32) for i in range(len(self.ins))]
            self.scratch.append((self.oshape(), np.float32))

    def run(self, xs, ys, sc):
        if not self.wide:
            np.einsum(self.eq, *xs, out=ys[0])
            return
        for x, w in zip(xs, sc):
            np.copyto(w, x, casting="unsafe")
        np.einsum(self.eq, *sc[:-1], out=sc[-1])
        np.copyto(ys[0], sc[-1], casting="unsafe")
