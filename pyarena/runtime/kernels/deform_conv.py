"""DeformConv (2-D): a convolution whose every kernel tap reads the input
at its own offset per output position, bilinearly interpolated (corners
outside the image read 0, as ONNX's reference does through GridSample with
align_corners), optionally scaled by a mask.

Per image and per kernel tap -- a handful -- never per element: the
sampling positions of every output position and every offset group at
once, the four corners gathered for all the group's channels by one
``take_along_axis`` each, weighted and summed into the columns of that tap;
then one grouped matmul of the weight with the columns, plus the bias.
Coordinates and interpolation weights in float64 (the reference's).
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
        # the columns (C * kh * kw, P) of one image, and the grouped product
        self.scratch = [((C * kh * kw, p), np.float64), ((ws[0], p), np.float64)]

    def run(self, xs, ys, sc):
        N, C, H, W, g, og, kh, kw, st, dl, (pt, pl), oh, ow, oc = self.geo
        cols, acc = sc
        p = oh * ow
        cg = C // og
        # each output position's window origin, (P,)
        base_h = np.repeat((np.arange(oh) * st[0] - pt).astype(np.float64), ow)
        base_w = np.tile((np.arange(ow) * st[1] - pl).astype(np.float64), oh)
        w = xs[1].reshape(g, oc // g, (C // g) * kh * kw).astype(np.float64)
        c5 = cols.reshape(og, cg, kh, kw, p)
        for n in range(N):
            x = xs[0][n].reshape(og, cg, H * W)
            off = xs[2][n].reshape(og, kh, kw, 2, p)
            mask = xs[4][n].reshape(og, kh, kw, p) if self.has(4) else None
            for i in range(kh):
                for j in range(kw):
                    hh = (base_h + i * dl[0]) + off[:, i, j, 0]
                    ww = (base_w + j * dl[1]) + off[:, i, j, 1]
                    v = _bilinear(x, hh, ww, H, W)          # (og, cg, P)
                    if mask is not None:
                        v *= mask[:, i, j][:, None, :]
                    c5[:, :, i, j] = v
            np.matmul(w, cols.reshape(g, (C // g) * kh * kw, p),
                      out=acc.reshape(g, oc // g, p))
            if self.has(3):
                acc += xs[3].reshape(-1, 1)
            np.copyto(ys[0][n].reshape(oc, p), acc, casting="unsafe")


def _bilinear(x, hh, ww, H, W):
    """x (og, cg, H*W) sampled at (hh, ww) (og, P): corners outside read 0."""
    h0, w0 = np.floor(hh), np.floor(ww)
    fh, fw = hh - h0, ww - w0
    h0, w0 = h0.astype(np.int64), w0.astype(np.int64)
    out = 0.0
    for dh, dw, wt in ((0, 0, (1 - fh) * (1 - fw)), (0, 1, (1 - fh) * fw),
                       (1, 0, fh * (1 - fw)), (1, 1, fh * fw)):     # (the four corners)
        r, c = h0 + dh, w0 + dw
        inside = (r >= 0) & (r < H) & (c >= 0) & (c < W)
        flat = np.where(inside, r * W + c, 0)
        got = np.take_along_axis(x, flat[:, None, :], axis=2).astype(np.float64)
        out = out + got * (wt * inside)[:, None, :]
    return out
