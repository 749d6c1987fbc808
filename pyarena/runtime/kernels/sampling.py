"""Grid sampling kernels: GridSample (2-D and 3-D; nearest, linear and
cubic, zeros / border / reflection padding, align_corners) and AffineGrid,
which makes the sampling grid of an affine map.

GridSample gathers: every output point's taps (2, 4 or 4 x 4 x ... per
axis) are read with one ``take_along_axis`` per combination of tap
offsets, so the Python loop runs over tap combinations (at most 16 in
2-D), never over points.  Temporaries per run; no scratch.
"""
import itertools
import math

import numpy as np

from . import shape_rules as rules
from .registry import Kernel, register

_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic",
          "bicubic": "cubic"}
_CUBIC_A = -0.75


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _reflect(x, lo, hi):
    """``x`` reflected at ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    n = np.floor(dx / span)
    r = dx - n * span
    even = n % 2 == 0
    return np.where(below, np.where(even, lo + r, hi - r),
                    np.where(above, np.where(even, hi - r, lo + r), x))


def _cubic(t):
    """Keys' cubic weights (a = -0.75) of the taps at -1, 0, 1, 2 from a
    point ``t`` in [0, 1) past tap 0."""
    a = _CUBIC_A

    def far(d):         # 1 <= d < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d):        # d < 1
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@register
class GridSample(Kernel):
    """Y[n, c, p] = X[n, c] sampled at grid[n, p] (normalised to [-1, 1],
    x first), as ONNX's reference does: the point denormalised, rounded
    (nearest), moved into range by the padding mode (border: clamped;
    reflection: reflected), then each tap read with the padding mode
    (zeros: 0 outside)."""

    op_types = ("GridSample",)
    family = "resize"
    inplace = "none"
    shape_rule = rules.grid_sample

    def setup(self):
        xs, gs = self.shape(0), self.shape(1)
        nd = len(xs) - 2
        if nd not in (2, 3) or len(gs) != nd + 2 or gs[-1] != nd or gs[0] != xs[0]:
            self.malformed(f"grid {list(gs)} does not fit input {list(xs)} (N, C, H, W or "
                           f"N, C, D, H, W; grid N, H_out, W_out, 2 or N, ..., 3)")
        mode = _text(self.attrs.get("mode", "linear" if self.op.notes.opset >= 20 else
                                    "bilinear"))
        if mode not in _MODES:
            self.fail(f"mode {mode!r} is not one of {sorted(_MODES)}")
        self.mode = _MODES[mode]
        if self.mode == "cubic" and nd != 2:
            self.fail("cubic sampling is 2-D only")
        self.padding = _text(self.attrs.get("padding_mode", "zeros"))
        if self.padding not in ("zeros", "border", "reflection"):
            self.fail(f"padding_mode {self.padding!r} is not zeros, border or reflection")
        self.align = bool(int(self.attrs.get("align_corners", 0)))
        self.sizes = xs[2:]
        self.bounds = [(0.0, d - 1.0) if self.align else (-0.5, d - 0.5) for d in self.sizes]
        self.strides = [math.prod(self.sizes[i + 1:]) for i in range(nd)]

    def run(self, xs, ys, sc):
        x, grid = xs[0], xs[1]
        n, c = x.shape[:2]
        pts = math.prod(grid.shape[1:-1])
        flat = x.reshape(n, c, -1)
        y = ys[0].reshape(n, c, pts)
        # the coordinates per axis (D, H, W order: the grid's last axis reversed)
        g = grid.reshape(n, pts, -1)[..., ::-1].astype(np.float64)
        coords = []
        for i, d in enumerate(self.sizes):
            v = (g[..., i] + 1) / 2 * (d - 1) if self.align else ((g[..., i] + 1) * d - 1) / 2
            if self.mode == "nearest":
                v = np.rint(v)
            lo, hi = self.bounds[i]
            if self.padding == "border":
                v = np.where((v < lo) | (v > hi), np.clip(v, 0, d - 1), v)
            elif self.padding == "reflection":
                v = _reflect(v, lo, hi)
            coords.append(v)
        if self.mode == "nearest":
            taps = [[(v.astype(np.int64), None)] for v in coords]
        else:
            taps = []
            for v in coords:
                base = np.floor(v)
                t = v - base
                base = base.astype(np.int64)
                if self.mode == "linear":
                    taps.append([(base, 1 - t), (base + 1, t)])
                else:
                    taps.append([(base + k - 1, w) for k, w in enumerate(_cubic(t))])
        y.fill(0)
        for combo in itertools.product(*taps):
            index = np.zeros((n, pts), np.int64)
            weight = np.ones((n, pts))
            for i, (idx, w) in enumerate(combo):
                idx, ok = self.inside(idx, i)
                index += idx * self.strides[i]
                if w is not None:
                    weight = weight * w
                if ok is not None:
                    weight = weight * ok
            vals = np.take_along_axis(flat, index[:, None, :], axis=2)
            y += (vals * weight[:, None, :]).astype(y.dtype)

    def inside(self, idx, i):
        """(index, mask): a tap's index along axis ``i`` made valid by the
        padding mode; the mask (zeros padding) is 0 for a tap outside."""
        d = self.sizes[i]
        if self.padding == "zeros":
            ok = (idx >= 0) & (idx < d)
            return np.clip(idx, 0, d - 1), ok
        if self.padding == "border":
            return np.clip(idx, 0, d - 1), None
        lo, hi = self.bounds[i]
        return np.clip(_reflect(idx.astype(np.float64), lo, hi).astype(np.int64), 0, d - 1), None


@register
class AffineGrid(Kernel):
    """The sampling grid of the affine maps ``theta`` (N, 2, 3) or (N, 3, 4)
    over an output of ``size`` (N, C, H, W) or (N, C, D, H, W): the
    normalised coordinates (x first, as GridSample reads them) times theta,
    one batched matrix product into the output.  The size is a constant or
    a value the kernel is built for."""

    op_types = ("AffineGrid",)
    family = "resize"
    inplace = "none"
    shape_rule = rules.affine_grid
    fold = "expanding"

    def setup(self):
        self.runtime = (0,)
        size = [int(v) for v in np.asarray(self.const(1, "size")).reshape(-1)]
        th = self.shape(0)
        nd = len(size) - 2
        if nd not in (2, 3) or th != (size[0], nd, nd + 1):
            self.malformed(f"theta {list(th)} does not fit size {size}")
        align = bool(int(self.attrs.get("align_corners", 0)))
        axes = []
        for d in size[2:]:
            if align:
                axes.append(np.linspace(-1, 1, d) if d > 1 else np.full(1, -1.0))
            else:
                axes.append((np.arange(d) * 2 + 1) / d - 1)
        mesh = np.meshgrid(*axes, indexing="ij")               # D, H, W order
        base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size)], axis=1)
        self.base = self.keep(base.astype(self.dtype))         # (points, nd + 1), x first
        self.view = (size[0], base.shape[0], nd)

    def run(self, xs, ys, sc):
        np.matmul(self.base, np.swapaxes(xs[0], 1, 2), out=ys[0].reshape(self.view))
