"""Shared geometry of the spatial kernels (convolution and pooling).

Not a family: ``conv.py`` and ``pooling.py`` build on :class:`Spatial`,
which handles NCHW and NHWC, 1-D and 2-D inputs, explicit pads and
``auto_pad``, dilations, ceil-mode overhang, and the row bands that keep a
kernel's scratch (the padded input rows of a band, plus whatever the
kernel needs per output row) within the op's scratch budget.
"""
import numpy as np

from .registry import Kernel, const


def pads_for(attrs, in_sp, k_sp, strides, dil, out_sp=None):
    """Explicit (begin..., end...) pads from ONNX pads / auto_pad."""
    nd = len(in_sp)
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            o = -(-in_sp[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + (k_sp[i] - 1) * dil[i] + 1 - in_sp[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto == "SAME_UPPER" else (big, small)
        return pads
    if auto == "VALID":
        return [0] * (2 * nd)
    p = attrs.get("pads")
    return [int(v) for v in p] if p is not None else [0] * (2 * nd)

class Spatial(Kernel):
    """Shared geometry for Conv / pooling in NCHW or NHWC (1-D or 2-D),
    processed in bands of output rows (see SCRATCH_BUDGET)."""

    def geometry(self, k_sp, pad_value=0.0):
        xs = self.shape(0)
        ys = self.oshape()
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        nsp = len(xs) - 2
        if nsp not in (1, 2):
            self.fail(f"{nsp}-D spatial input {list(xs)} is not supported (1-D or 2-D)")
        if len(ys) != len(xs) or ys[0] != xs[0]:
            # the kernels walk the input's images into the output's: never
            # more than it holds
            self.malformed(f"output {list(ys)} does not have the images of input {list(xs)}")
        if self.nhwc:
            sp_in, sp_out = list(xs[1:-1]), list(ys[1:-1])
            self.c_in = xs[-1]
        else:
            sp_in, sp_out = list(xs[2:]), list(ys[2:])
            self.c_in = xs[1]
        strides = [int(s) for s in self.attrs.get("strides", [1] * nsp)]
        dil = [int(d) for d in self.attrs.get("dilations", [1] * nsp)]
        if len(strides) != nsp or len(dil) != nsp or min(strides + dil) < 1:
            self.malformed(f"strides {strides} and dilations {dil} must be {nsp} positive "
                           f"integers each (input {list(xs)})")
        ks = self.attrs.get("kernel_shape")
        if ks is not None and [int(k) for k in ks] != [int(k) for k in k_sp]:
            # onnxruntime refuses this too: the weight would be read as
            # another window than the one the output's shape was made for
            self.malformed(f"kernel_shape {[int(k) for k in ks]} contradicts the window "
                           f"{[int(k) for k in k_sp]} (the weight's spatial shape)")
        pads = pads_for(self.attrs, sp_in, k_sp, strides, dil)
        if nsp == 1:   # treat 1-D as 2-D with H = 1
            sp_in, sp_out, k_sp = [1] + sp_in, [1] + sp_out, [1] + list(k_sp)
            strides, dil = [1] + strides, [1] + dil
            pads = [0, pads[0], 0, pads[1]]
        self.nsp = nsp
        self.N = xs[0]
        self.H, self.W = sp_in
        self.Ho, self.Wo = sp_out
        self.kh, self.kw = k_sp
        self.sh, self.sw = strides
        self.dh, self.dw = dil
        pt, pl, pb, pr = pads
        need_h = (self.Ho - 1) * self.sh + (self.kh - 1) * self.dh + 1
        need_w = (self.Wo - 1) * self.sw + (self.kw - 1) * self.dw + 1
        # rows/cols read past the end (ceil_mode) count as padding
        self.Hp = max(self.H + pt + pb, need_h)
        self.Wp = max(self.W + pl + pr, need_w)
        self.pt, self.pl, self.pb, self.pr = pt, pl, pb, pr
        self.padded = (self.Hp, self.Wp) != (self.H, self.W) or pt or pl
        self.pad_value = const(pad_value, self.dtype)
        if self.Ho <= 0 or self.Wo <= 0 or self.kh <= 0 or self.kw <= 0:
            self.fail(f"inconsistent output shape {list(ys)} for input {list(xs)}")
        self.bands = [(0, self.Ho)]
        self.band_rows = self.Ho

    def rows_in(self, nr):
        """Input rows (padded coordinates) feeding ``nr`` output rows."""
        return (nr - 1) * self.sh + (self.kh - 1) * self.dh + 1

    def plan_bands(self, extra_per_row=0, channels=None):
        """Split the output rows into bands whose scratch (padded input
        rows + ``extra_per_row`` bytes per output row) fits the budget."""
        c = self.c_in if channels is None else channels
        isz = self.dtype.itemsize
        pad_row = c * self.Wp * isz if self.padded else 0

        def need(nr):
            return pad_row * self.rows_in(nr) + extra_per_row * nr

        budget = self.scratch_budget
        nr = self.Ho
        if need(nr) > budget:
            per = pad_row * self.sh + extra_per_row
            nr = (budget - pad_row * (self.rows_in(1) - self.sh)) // max(per, 1)
            nr = int(max(1, min(self.Ho, nr)))
        self.band_rows = nr
        self.bands = [(r0, min(r0 + nr, self.Ho)) for r0 in range(0, self.Ho, nr)]
        return nr

    def x4(self, x):
        """Input as 4-D (N, C, H, W) or (N, H, W, C)."""
        if self.nsp == 1:
            return x.reshape((self.N, 1, self.W, self.c_in) if self.nhwc else
                             (self.N, self.c_in, 1, self.W))
        return x

    def y4(self, y):
        if self.nsp == 1:
            c = y.shape[-1] if self.nhwc else y.shape[1]
            return y.reshape((self.N, 1, self.Wo, c) if self.nhwc else
                             (self.N, c, 1, self.Wo))
        return y

    def pad_spec(self, channels=None):
        if not self.padded:
            return []
        c = self.c_in if channels is None else channels
        rows = self.rows_in(self.band_rows)
        if self.nhwc:
            return [((rows, self.Wp, c), self.dtype)]
        return [((c, rows, self.Wp), self.dtype)]

    def band_src(self, xn, buf, r0, r1):
        """The input rows output rows [r0, r1) read, padded: a view whose
        row 0 is padded row ``r0 * sh``."""
        a = r0 * self.sh
        nrows = self.rows_in(r1 - r0)
        if buf is None:
            return xn[a:a + nrows] if self.nhwc else xn[:, a:a + nrows]
        pt, pl, H, W = self.pt, self.pl, self.H, self.W
        t0 = min(max(0, pt - a), nrows)
        t1 = max(min(nrows, pt + H - a), t0)
        v = self.pad_value
        if self.nhwc:
            b = buf[:nrows]
            b[:t0].fill(v)
            b[t1:].fill(v)
            b[t0:t1, :pl].fill(v)
            b[t0:t1, pl + W:].fill(v)
            if t1 > t0:
                np.copyto(b[t0:t1, pl:pl + W], xn[a + t0 - pt:a + t1 - pt])
        else:
            b = buf[:, :nrows]
            b[:, :t0].fill(v)
            b[:, t1:].fill(v)
            b[:, t0:t1, :pl].fill(v)
            b[:, t0:t1, pl + W:].fill(v)
            if t1 > t0:
                np.copyto(b[:, t0:t1, pl:pl + W], xn[:, a + t0 - pt:a + t1 - pt])
        return b

    def tap(self, src, i, j, nr=None):
        """The (nr, Wo) window of kernel tap (i, j) over band rows."""
        nr = self.Ho if nr is None else nr
        h0, w0 = i * self.dh, j * self.dw
        hs = slice(h0, h0 + (nr - 1) * self.sh + 1, self.sh)
        ws = slice(w0, w0 + (self.Wo - 1) * self.sw + 1, self.sw)
        return src[hs, ws] if self.nhwc else src[:, hs, ws]

    def windows(self, src, nr, groups=None, kmajor=False):
        """All taps at once: (C, kh, kw, nr, Wo) or (nr, Wo, kh, kw, C); NHWC
        with ``groups``: (G, nr, Wo, kh, kw, C/G), or (G, kh, kw, C/G, nr, Wo)
        if ``kmajor``."""
        s = src.strides
        if self.nhwc and groups and kmajor:
            cg = src.shape[2] // groups
            shape = (groups, self.kh, self.kw, cg, nr, self.Wo)
            strides = (s[2] * cg, s[0] * self.dh, s[1] * self.dw, s[2], s[0] * self.sh,
                       s[1] * self.sw)
        elif self.nhwc and groups:
            cg = src.shape[2] // groups
            shape = (groups, nr, self.Wo, self.kh, self.kw, cg)
            strides = (s[2] * cg, s[0] * self.sh, s[1] * self.sw, s[0] * self.dh,
                       s[1] * self.dw, s[2])
        elif self.nhwc:
            shape = (nr, self.Wo, self.kh, self.kw, src.shape[2])
            strides = (s[0] * self.sh, s[1] * self.sw, s[0] * self.dh, s[1] * self.dw, s[2])
        else:
            shape = (src.shape[0], self.kh, self.kw, nr, self.Wo)
            strides = (s[0], s[1] * self.dh, s[2] * self.dw, s[1] * self.sh, s[2] * self.sw)
        return np.lib.stride_tricks.as_strided(src, shape, strides, writeable=False)

    def out_rows(self, yn, r0, r1):
        return yn[r0:r1] if self.nhwc else yn[:, r0:r1]
