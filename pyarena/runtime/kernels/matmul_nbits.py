"""onnxruntime's ``com.microsoft`` MatMulNBits: Y = A @ W^T (+ bias), W
(N, K) stored blockwise in ``bits``-bit integers (2, 4 or 8): B (N,
blocks, block_size * bits / 8) uint8, the values of a byte from its low
bits up; a float scale per (column, block); zero points per (column,
block), packed as B is (uint8, a row of ``ceil(blocks * bits / 8)`` bytes
per column) or floats shaped as the scales, 2^(bits-1) when absent.
W = (q - zero point) * scale.

Natively (float32 A and scales, constant B, scales and zero points, block
<= 4096) the weights stay packed: a few rows of A (up to ROWS_MAX, a
decode step) are multiplied by the C core straight from the blocks
(``pa_nbits_rows``: each block dequantized once into a stack buffer and
dotted with every row); more rows go panel by panel -- as many rows of W
as the scratch budget holds dequantized by ``pa_nbits_panel``, then one
BLAS product per panel (A @ panel^T).  Otherwise (``native=False``, fed or
float16 weights) W is dequantized once at setup when B, the scales and the
zero points are constants (kept as float32 (K, N): 8x the bytes of 4-bit
weights), else every run.  The product is onnxruntime's ``accuracy_level`` 0 (float32
arithmetic on the dequantized weights) whatever that attribute says:
level 4 there also rounds A to 8 bits, which this kernel does not."""
import math

import numpy as np

from ..._native import nbits as native_nbits
from . import shape_rules_contrib as crules
from .registry import Kernel, register

#: the most rows of A multiplied straight from the packed blocks
ROWS_MAX = 4


def unpack(packed, bits, count):
    """The first ``count`` ``bits``-bit values of each row of ``packed``
    (uint8 (..., bytes)), low bits first, as uint8 (..., count)."""
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).reshape(1, per)
    vals = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(packed.shape[:-1] + (-1,))[..., :count]


def dequantize(b, scales, zeros, n, k, bits, block):
    """W^T (K, N) float32 from MatMulNBits' B, scales and zero points."""
    blocks = -(-k // block)
    q = unpack(b.reshape(n, blocks, -1), bits, block).astype(np.float32)
    s = np.asarray(scales, np.float32).reshape(n, blocks, 1)
    if zeros is None:
        z = np.float32(1 << (bits - 1))
    elif zeros.dtype == np.uint8:
        z = unpack(zeros.reshape(n, -1), bits, blocks).astype(np.float32).reshape(n, blocks, 1)
    else:
        z = np.asarray(zeros, np.float32).reshape(n, blocks, 1)
    w = (q - z) * s
    return np.ascontiguousarray(w.reshape(n, blocks * block)[:, :k].T)


@register
class MatMulNBits(Kernel):
    """MatMulNBits(A, B, scales, zero_points?, g_idx?, bias?) with
    attributes K, N, bits, block_size (g_idx: not supported)."""

    op_types = ("MatMulNBits",)
    onnx_domain = "com.microsoft"
    family = "linalg"
    shape_rule = crules.matmul_nbits
    fold = "never"

    def setup(self):
        a = self.attrs
        self.k, self.n = int(a["K"]), int(a["N"])
        self.bits, self.block = int(a.get("bits", 4)), int(a["block_size"])
        if self.bits not in (2, 4, 8):
            self.fail(f"bits={self.bits} is not supported (2, 4, 8)")
        if self.block < 16 or self.block & (self.block - 1):
            self.malformed(f"block_size {self.block} is not a power of 2 of at least 16")
        if self.has(4):
            self.fail("g_idx is not supported")
        blocks = -(-self.k // self.block)
        if self.shape(0)[-1] != self.k or \
                math.prod(self.shape(1)) != self.n * blocks * self.block * self.bits // 8 or \
                math.prod(self.shape(2)) != self.n * blocks:
            self.malformed(f"A {list(self.shape(0))}, B {list(self.shape(1))} and scales "
                           f"{list(self.shape(2))} do not hold K={self.k}, N={self.n} in "
                           f"blocks of {self.block}")
        self.zp = 3 if self.has(3) else None
        if self.zp:     # packed as B (uint8) or one float per (column, block)
            want = self.n * (-(-blocks * self.bits // 8) if np.dtype(self.ins[3].dtype) ==
                             np.uint8 else blocks)
            if math.prod(self.shape(3)) != want:
                self.malformed(f"zero points {list(self.shape(3))} do not hold {want} values "
                               f"for N={self.n} in blocks of {self.block}")
        if self.has(5) and math.prod(self.shape(5)) != self.n:
            self.malformed(f"bias {list(self.shape(5))} does not hold N={self.n} values")
        weights = [1, 2] + ([3] if self.zp else [])
        self.w = None
        constant = all(self.ins[i].data is not None for i in weights)
        self.packed = bool(constant and self.use_native and self.block <= 4096 and
                           self.dtype == np.float32 and all(
                               np.dtype(self.ins[i].dtype) == np.float32 for i in (2, 5)
                               if self.has(i)) and
                           (self.zp is None or np.dtype(self.ins[3].dtype) in
                            (np.uint8, np.float32)))
        if self.packed:
            self.m = math.prod(self.shape(0)[:-1])
            if self.m > ROWS_MAX:     # panels of W's rows: as many as the budget holds
                self.panel = max(16, min(self.n, self.scratch_budget // (4 * self.k)))
                self.scratch = [((self.panel, self.k), np.float32)]
            else:       # A's even and odd columns split (4 bits), or a column of W
                self.scratch = [((self.m, blocks * self.block), np.float32)]
            return
        if constant:
            self.w = self.keep(self.weight([None] + [self.const(i) for i in (1, 2, 3)]))
            self.runtime = (0,) + ((5,) if self.has(5) else ())

    def weight(self, xs):
        """W^T (K, N) from inputs B, scales, zero points (in ``xs``)."""
        zeros = None if self.zp is None else np.asarray(xs[3])
        return dequantize(np.asarray(xs[1]), xs[2], zeros, self.n, self.k, self.bits,
                          self.block)

    def run(self, xs, ys, sc):
        if self.packed:
            return self._run_packed(xs, ys, sc)
        w = self.w if self.w is not None else self.weight(xs)
        np.matmul(xs[0], w, out=ys[0])
        if self.has(5):
            np.add(ys[0], xs[5], out=ys[0])

    def _run_packed(self, xs, ys, sc):
        a = np.ascontiguousarray(xs[0]).reshape(self.m, self.k)
        if ys[0].flags.c_contiguous:
            self._run_rows_or_panels(a, xs, ys[0].reshape(self.m, self.n), sc)
        else:                           # (a strided output view: computed aside)
            y = np.empty((self.m, self.n), np.float32)
            self._run_rows_or_panels(a, xs, y, sc)
            np.copyto(ys[0], y.reshape(ys[0].shape))

    def _run_rows_or_panels(self, a, xs, y, sc):
        b, scales = xs[1], xs[2]
        zp = xs[3] if self.zp else None
        bias = xs[5] if self.has(5) else None
        if self.m <= ROWS_MAX:
            native_nbits.rows(a, b, scales, zp, self.bits, self.block, self.n, bias, y, sc[0])
            return
        panel = sc[0]
        for n0 in range(0, self.n, self.panel):
            n1 = min(self.n, n0 + self.panel)
            p = panel[:n1 - n0]
            native_nbits.panel(b, scales, zp, self.bits, self.block, self.k, self.n, n0, n1, p)
            np.matmul(a, p.T, out=y[:, n0:n1])
        if bias is not None:
            np.add(y, bias, out=y)
