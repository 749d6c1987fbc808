"""DeformConv (2-D): a convolution whose every kernel tap reads the input
at its own offset per output position, bilinearly interpolated (corners
outside the image read 0, as ONNX's reference does through GridSample with
align_corners), optionally scaled by a mask.

Per image, never per element or per tap: the sampling points of every
kernel tap, output position and offset group at once, the four corners
gathered for all the group's channels by one ``take`` per offset group,
weighted and summed into the columns; then one grouped matmul of the
weight with the columns, plus the bias.
Sampling coordinates in float64 (the reference's); the samples, their
weights and the product in the input's type.
"""
import numpy as np

from . import shape_rules as rules
from .registry import Kernel, register

__all__ = ["DeformConv"]


@register
class DeformConv(Kernel):
    op_types = ("DeformConv",)
    family = "conv"
    inplace = "none"
    shape_rule = rules.conv

    def setup(self):
        xs, ws, ys = self.shape(0), self.shape(1), self.oshape()
        if len(xs) != 4:
            self.fail(f"{len(xs) - 2}-D input {list(xs)} is not supported (2-D)")
        N, C, H, W = xs
        a = self.attrs
        g, og = int(a.get("group", 1)), int(a.get("offset_group", 1))
        if len(ws) != 4 or g < 1 or og < 1 or C != ws[1] * g or ws[0] % g or C % og:
            self.malformed(f"weight {list(ws)} does not fit input {list(xs)} (group {g}, "
                           f"offset_group {og})")
        kh, kw = ws[2:]
        ks = [int(v) for v in a.get("kernel_shape", [kh, kw])]
        if ks != [kh, kw]:
            self.malformed(f"kernel_shape {ks} contradicts the weight {list(ws)}")
        st = [int(v) for v in a.get("strides", [1, 1])]
        dl = [int(v) for v in a.get("dilations", [1, 1])]
        pads = [int(v) for v in a.get("pads", [0, 0, 0, 0])]
        if len(st) != 2 or len(dl) != 2 or len(pads) != 4 or min(st + dl) < 1:
            self.malformed(f"strides {st}, dilations {dl} and pads {pads} do not describe a "
                           f"2-D window")
        oh, ow = ys[2:]
        if oh < 1 or ow < 1:
            self.malformed(f"the window {ks} does not fit the padded input {list(xs)}")
        want = {2: (N, og * 2 * kh * kw, oh, ow), 4: (N, og * kh * kw, oh, ow)}
        for i, what in ((2, "offset"), (4, "mask")):
            if self.has(i) and self.shape(i) != want[i]:
                self.malformed(f"{what} {list(self.shape(i))} is not {list(want[i])} (N, "
                               f"offset_group * {'2 * ' if i == 2 else ''}kernel taps, "
                               f"output H, W)")
        if self.has(3) and self.shape(3) != (ws[0],):
            self.malformed(f"bias {list(self.shape(3))} is not one value per output channel "
                           f"({ws[0]})")
        self.geo = (N, C, H, W, g, og, kh, kw, st, dl, pads[:2], oh, ow, ws[0])
        p = oh * ow
        # the columns (C * kh * kw, P) of one image (the grouped product is
        # NumPy's own array: a matmul into a view of the same scratch as its
        # operand leaves BLAS for NumPy's slow loop)
        self.scratch = [((C * kh * kw, p), self.dtype)]

    def run(self, xs, ys, sc):
        N, C, H, W, g, og, kh, kw, st, dl, (pt, pl), oh, ow, oc = self.geo
        cols, = sc
        p = oh * ow
        cg = C // og
        # each output position's window origin, (P,)
        base_h = np.repeat((np.arange(oh) * st[0] - pt).astype(np.float64), ow)
        base_w = np.tile((np.arange(ow) * st[1] - pl).astype(np.float64), oh)
        w = xs[1].reshape(g, oc // g, (C // g) * kh * kw)
        taps = kh * kw
        # each tap's offset from the window origin, (kh, kw, 1)
        tap_h = (np.arange(kh) * dl[0]).astype(np.float64)[:, None, None]
        tap_w = (np.arange(kw) * dl[1]).astype(np.float64)[None, :, None]
        for n in range(N):
            x = xs[0][n].reshape(og, cg, H * W)
            off = xs[2][n].reshape(og, kh, kw, 2, p)
            # every tap's sampling point for every output position, (og, taps * P)
            hh = (base_h + tap_h + off[:, :, :, 0]).reshape(og, taps * p)
            ww = (base_w + tap_w + off[:, :, :, 1]).reshape(og, taps * p)
            v = _bilinear(x, hh, ww, H, W)              # (og, cg, taps * P)
            if self.has(4):
                v *= xs[4][n].reshape(og, 1, taps * p)
            np.copyto(cols.reshape(og, cg, taps * p), v)
            acc = np.matmul(w, cols.reshape(g, (C // g) * kh * kw, p)).reshape(oc, p)
            if self.has(3):
                acc += xs[3].reshape(-1, 1)
            np.copyto(ys[0][n].reshape(oc, p), acc, casting="unsafe")


def _bilinear(x, hh, ww, H, W):
    """x (og, cg, H*W) sampled at (hh, ww) (og, Q), in x's type: the four
    corners gathered by one ``take`` per offset group (og, cg, 4, Q),
    weighted (0 outside the image) and summed."""
    h0, w0 = np.floor(hh), np.floor(ww)
    fh, fw = hh - h0, ww - w0
    r = h0.astype(np.int64)[:, None, :] + np.array([0, 0, 1, 1])[None, :, None]
    c = w0.astype(np.int64)[:, None, :] + np.array([0, 1, 0, 1])[None, :, None]
    gh, gw = fh[:, None, :], fw[:, None, :]
    # (og, 4, Q): the corners' weights, (1 - fh)(1 - fw), (1 - fh) fw, fh (1 - fw), fh fw
    wt = np.concatenate([(1 - gh) * (1 - gw), (1 - gh) * gw, gh * (1 - gw), gh * gw], axis=1)
    inside = (r >= 0) & (r < H) & (c >= 0) & (c < W)
    wt = (wt * inside).astype(x.dtype)
    flat = np.where(inside, r * W + c, 0).reshape(x.shape[0], -1)
    got = np.empty(x.shape[:2] + flat.shape[1:], x.dtype)
    for i in range(x.shape[0]):                 # (the offset groups: a few)
        np.take(x[i], flat[i], axis=1, out=got[i], mode="clip")   # (all in range)
    got = got.reshape(x.shape[:2] + wt.shape[1:])
    got *= wt[:, None]
    return got.sum(axis=2)
