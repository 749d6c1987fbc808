"""Resize / Upsample: nearest, (bi)linear and (bi)cubic resize of up to
two axes, every ONNX coordinate mode, opset-18 axes and aspect-ratio
policies, antialiased downsampling, TFLite's RESIZE_BILINEAR /
RESIZE_NEAREST_NEIGHBOR.  Scratch:
the intermediate after the first resized axis and, for linear / cubic,
the second operand of each blend.
"""
import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from ...planning.resize_rows import resize_coords
from .native import NATIVE_DTYPE, Pointers
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .registry import Kernel, const, register


def _text(v):
    """An attribute that may arrive as bytes, as str (None stays None)."""
    return v.decode() if isinstance(v, bytes) else v


def _cubic_taps(c, n, A, exclude_outside):
    """Indices and weights of the four cubic taps (Keys, coefficient A) at
    coordinates c on an axis of n; with exclude_outside the weights of taps
    outside the axis are zeroed and the rest renormalised."""
    base = np.floor(c)
    t = c - base
    ws = [((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
          ((A + 2) * t - (A + 3)) * t * t + 1,
          ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
          ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A]
    idx = [base.astype(np.int64) + k for k in (-1, 0, 1, 2)]
    if exclude_outside:
        ws = [np.where((i < 0) | (i >= n), 0.0, w) for i, w in zip(idx, ws)]
        tot = sum(ws)
        ws = [w / tot for w in ws]
    return idx, ws


def _antialias_taps(mode, c, n, scale, A, exclude_outside):
    """Indices and weights of an antialiased linear / cubic resize at
    coordinates c on an axis of n (ONNX's reference): the filter stretched
    by 1 / scale when downsampling -- 2 / scale taps (linear: a triangle of
    half-width 1 / scale; cubic: Keys of half-width 2 / scale), the
    weights normalised to sum 1; taps past the edges read the edge pixel
    (or, with exclude_outside, are dropped and the rest renormalised)."""
    s = min(float(scale), 1.0)
    left = np.floor(c)          # the tap offsets count from here
    t = c - left
    start = int(np.floor((-1.0 if mode == "linear" else -2.0) / s) + 1)
    offsets = range(start, 2 - start)
    idx, ws = [], []
    for i in offsets:
        d = np.abs((i - t) * s)
        if mode == "linear":
            w = np.clip(1 - d, 0, 1)
        else:
            w = np.where(d <= 1, ((A + 2) * d - (A + 3)) * d * d + 1,
                         np.where(d < 2, ((A * d - 5 * A) * d + 8 * A) * d - 4 * A, 0.0))
        idx.append((left + i).astype(np.int64))
        ws.append(w)
    if exclude_outside:
        ws = [np.where((i < 0) | (i >= n), 0.0, w) for i, w in zip(idx, ws)]
    tot = sum(ws)
    return idx, [w / tot for w in ws]


def _runs(pos, src):
    """[(start, stop, source index)]: the outputs at the sorted positions
    pos, grouped into runs of consecutive outputs reading one source index."""
    runs = []
    for p in pos.tolist():
        i = int(src[p])
        if runs and runs[-1][1] == p and runs[-1][2] == i:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1, i])
    return [tuple(r) for r in runs]



def _f32(v):
    return np.float32(v)


#: onnxruntime's source coordinate per ``coordinate_transformation_mode``
#: (upsample.h), in float32: (output indices, scale, output length, input length)
_ORT_COORDS = {
    "half_pixel": lambda o, s, lo, li: (o + _f32(0.5)) / s - _f32(0.5),
    "pytorch_half_pixel": lambda o, s, lo, li: (o + _f32(0.5)) / s - _f32(0.5) if lo > 1
    else np.zeros_like(o),
    "asymmetric": lambda o, s, lo, li: o / s,
    "tf_half_pixel_for_nn": lambda o, s, lo, li: (o + _f32(0.5)) / s,
    "align_corners": lambda o, s, lo, li: o * (li - _f32(1)) / (lo - _f32(1)) if lo > 1
    else np.zeros_like(o),
}

@register
class Resize(Kernel):
    """Nearest, (bi)linear and (bi)cubic resize of up to two axes.  Each
    resized axis is a ``np.take`` with precomputed indices (and, for
    linear / cubic, a weighted sum of two / four takes with precomputed
    weights: cubic_coeff_a, exclude_outside, edge-clamped indices as in the
    ONNX reference).  Scratch: the intermediate after the first axis and,
    for linear / cubic, the second operand of each blend.

    Linear blends as onnxruntime's weighted sum (upsample.cc,
    UpsampleBilinear): x0 (1 - f) + x1 f per axis, so 0 * Inf is NaN and
    Inf with a finite neighbour stays Inf; two taps on one pixel (the
    clamped edge) copy it.  The native kernel does the same operations in
    the same order (rows, then columns), so both paths give the same bits."""

    op_types = ('Resize', 'Upsample')
    family = 'resize'
    inplace = 'none'
    shape_rule = moves.resize
    fold = 'expanding'
    nhwc = 'resize'
    rows = 'resize'
    tflite = {
        'RESIZE_BILINEAR': ('Resize', {'mode': 'linear'}, tfl.resize),
        'RESIZE_NEAREST_NEIGHBOR': ('Resize', {'mode': 'nearest'}, tfl.resize)}

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        nd = len(xs)
        a = self.attrs
        mode = self._mode()
        # an integer tensor blends in float32 and is truncated once, as
        # onnxruntime's (its weights in the integer type would be 0 or 1)
        self.work = np.dtype(np.float32) if mode != "nearest" and self.dtype.kind in "iu" \
            else self.dtype
        ctm = _text(a.get("coordinate_transformation_mode"))
        if ctm is None:
            ctm = "asymmetric" if self._old_style() else "half_pixel"
        axes = a.get("axes")
        axes = list(range(nd)) if axes is None else [int(v) + nd if int(v) < 0 else int(v)
                                                     for v in axes]
        scales = self._scales(xs, ys, axes)
        band = self.op.notes.band   # (axis, coordinates relative to the band) or None
        band_axis = None if band is None else band[0]
        crop = self._crop(nd, axes) if ctm == "tf_crop_and_resize" else None
        self.extrap = []
        self.plan = []
        self.copies = {}    # linear axis -> runs of outputs whose two taps are one pixel
        for ax in range(nd):
            if crop is not None:
                c = self._crop_coords(ax, xs[ax], ys[ax], crop[ax])
                if c is None:
                    continue
            elif ax == band_axis:       # one band of a patched stage's rows
                c = np.asarray(band[1], dtype=np.float64)
            elif xs[ax] == ys[ax] and scales[ax] == 1.0:
                continue
            else:
                try:
                    c = resize_coords(ys[ax], xs[ax], scales[ax], ctm)
                except ValueError:
                    self.fail(f"coordinate_transformation_mode {ctm!r} is not supported")
            self.plan.append((ax, self._taps(mode, c, ax, xs, ys, scales[ax])))
        if len(self.plan) > 2:
            self.fail("resizing more than two axes is not supported")
        shape = list(xs)
        self.shapes = []
        for ax, _taps in self.plan:
            shape[ax] = ys[ax]
            self.shapes.append(tuple(shape))
        specs = []
        if len(self.plan) == 2:
            specs.append((self.shapes[0], self.work))     # intermediate
        if mode != "nearest":
            for shp in self.shapes:
                specs.append((shp, self.work))            # blend operand
        if self.work != self.dtype and self.plan:       # the input and output in float32
            specs += [(tuple(xs), self.work), (self.shapes[-1], self.work)]
        self.scratch = specs
        self.linear = mode != "nearest"
        self.ort2d = _ort_bilinear_taps(self, mode, ctm, xs, ys, scales, crop, band)
        self.native = self._setup_native(mode, xs, ys)
        if self.native:
            self.scratch = []
        elif self.ort2d is not None:    # the input in float32, the sum, one gathered term
            self.scratch = [(tuple(xs), self.work)] + [(tuple(ys), self.work)] * 2

    def _setup_native(self, mode, xs, ys):
        """Nearest / linear over the two spatial axes of a 4-D float32
        tensor (NCHW: axes 2, 3; NHWC: 1, 2): the C core's one-pass
        pa_resize2d with this plan's index and weight tables; None
        otherwise (cubic, crop-and-resize, other axes)."""
        if not self.use_native or self.dtype != NATIVE_DTYPE or len(xs) != 4 or \
                mode == "cubic" or self.antialias or self.extrap or not self.plan:
            return None
        axes = {ax for ax, _ in self.plan}
        if axes <= {2, 3}:
            nhwc, (hax, wax) = False, (2, 3)
        elif axes <= {1, 2}:
            nhwc, (hax, wax) = True, (1, 2)
        else:
            return None
        if max(xs) >= 2**31:
            return None
        taps = dict(self.plan)
        tables = []
        for ax in (hax, wax):
            n = ys[ax]
            if ax not in taps:
                i0 = i1 = np.arange(n)
                w1 = np.zeros(n)
            elif len(taps[ax]) == 1:
                i0 = i1 = taps[ax][0][0]
                w1 = np.zeros(n)
            else:
                (i0, _), (i1, w1) = taps[ax]
            tables += [self.keep(np.asarray(i0, np.int32).reshape(-1)),
                       self.keep(np.asarray(i1, np.int32).reshape(-1)),
                       self.keep(np.asarray(w1, np.float32).reshape(-1))]
        self.tables = tables
        self.table_ptrs = [nk.iptr(t) if t.dtype == np.int32 else nk.fptr(t) for t in tables]
        c = xs[3] if nhwc else xs[1]
        self.geom = (nk.layout("NHWC" if nhwc else "NCHW"), xs[0], c, xs[hax], xs[wax],
                     ys[hax], ys[wax])
        self.ptrs = Pointers(self)
        return True

    def _old_style(self):
        """Upsample, or Resize before opset 11: (X, scales) and asymmetric."""
        return self.op.op_type == "Upsample" or (self.op.notes.opset or 11) < 11

    def _mode(self):
        a = self.attrs
        mode = _text(a.get("mode", "nearest"))
        mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
        if mode not in ("nearest", "linear", "cubic"):
            self.fail(f"mode {mode!r} is not supported (nearest, linear, cubic)")
        # antialias: a downsampling linear / cubic filter stretched by 1 / scale
        self.antialias = mode != "nearest" and bool(int(a.get("antialias", 0)))
        if mode == "cubic" and self.op.op_type == "Upsample":
            self.fail("cubic Upsample is not supported")
        return mode

    def _scales(self, xs, ys, axes):
        """One scale per axis.  Upsample(X, scales) / Resize opset 10 (X,
        scales) / 11+ (X, roi, scales, sizes).  Opset 18: scales / sizes may
        name only ``axes``; keep_aspect_ratio_policy not_larger / not_smaller
        scales every named axis by the min / max of sizes / input (the output
        shape already says the rounded sizes)."""
        nd = len(xs)
        scales = self.attrs.get("scales")
        if self._old_style():
            if self.has(1):
                scales = self.const(1, "scales")
        elif self.has(2) and (self.ins[2].data is not None or self.ins[2].shape is None
                              or int(np.prod(self.ins[2].shape))):
            # (a run-time scales input is read as a value: the coordinates
            # follow the scale given, not output / input)
            scales = self.const(2, "scales")
            if not np.size(scales):
                scales = None
        if scales is not None and len(np.atleast_1d(scales)) == len(axes) != nd:
            full = [1.0] * nd
            for ax, v in zip(axes, np.atleast_1d(scales)):
                full[ax] = float(v)
            scales = full
        if scales is None or len(np.atleast_1d(scales)) != nd:
            scales = [o / i for o, i in zip(ys, xs)]
            pol = _text(self.attrs.get("keep_aspect_ratio_policy", "stretch"))
            if pol in ("not_larger", "not_smaller") and self.has(3):
                sizes = np.atleast_1d(self.const(3, "sizes"))
                r = [float(sz) / xs[ax] for ax, sz in zip(axes, sizes)]
                common = min(r) if pol == "not_larger" else max(r)
                for ax in axes:
                    scales[ax] = common
            elif pol != "stretch":
                self.fail(f"keep_aspect_ratio_policy {pol!r} is not supported")
        return [float(s) for s in np.atleast_1d(scales)]

    def _crop(self, nd, axes):
        """tf_crop_and_resize: (start, end) per axis from the constant roi."""
        roi = self.const(1, "roi") if self.has(1) else None
        if roi is None or np.size(roi) != 2 * len(axes):
            self.fail(f"tf_crop_and_resize needs a constant roi of {2 * len(axes)} values")
        roi = np.asarray(roi, dtype=np.float64).reshape(-1)
        crop = [(0.0, 1.0)] * nd
        for k, ax in enumerate(axes):
            crop[ax] = (float(roi[k]), float(roi[k + len(axes)]))
        self.extrap_value = const(float(self.attrs.get("extrapolation_value", 0.0)),
                                  self.dtype)
        return crop

    def _crop_coords(self, ax, n, out_n, crop):
        """x = roi_start (in-1) + o (roi_end - roi_start) (in-1) / (out-1);
        positions outside [0, in-1] get extrapolation_value.  None when the
        axis is unchanged."""
        r0, r1 = crop
        o = np.arange(out_n, dtype=np.float64)
        c = (r0 * (n - 1) + o * (r1 - r0) * (n - 1) / (out_n - 1) if out_n > 1
             else np.full(1, (r1 - r0) * (n - 1) / 2 + r0 * (n - 1)))
        if n == out_n and np.array_equal(c, o):
            return None
        out = (c < 0) | (c > n - 1)
        if out.any():
            pre = int(np.argmin(out)) if not out.all() else len(out)
            suf = int(np.argmin(out[::-1])) if not out.all() else 0
            self.extrap.append((ax, pre, len(out) - suf))
        return c

    def _taps(self, mode, c, ax, xs, ys, scale=1.0):
        """[(indices, weights or None)] of one resized axis at coordinates c."""
        if mode == "nearest":
            nm = _text(self.attrs.get("nearest_mode"))
            if nm is None and self._old_style():
                # before nearest_mode (Upsample, Resize-10) the nearest pixel is
                # the floor up and the ceiling down (onnxruntime's; the ONNX
                # reference repeats each pixel for an integer scale: the floor)
                nm = "floor" if scale >= 1 else "ceil"
            nm = nm or "round_prefer_floor"
            rounding = {"round_prefer_floor": lambda v: np.ceil(v - 0.5),
                        "round_prefer_ceil": lambda v: np.floor(v + 0.5),
                        "floor": np.floor, "ceil": np.ceil}.get(nm)
            if rounding is None:
                self.fail(f"nearest_mode {nm!r} is not supported")
            i = np.clip(rounding(c), 0, xs[ax] - 1).astype(np.intp)
            return [(self.keep(i), None)]
        bshape = [1] * len(xs)
        bshape[ax] = ys[ax]
        if self.antialias:
            idx, ws = _antialias_taps(mode, c, xs[ax], scale,
                                      float(self.attrs.get("cubic_coeff_a", -0.75)),
                                      int(self.attrs.get("exclude_outside", 0)))
        elif mode == "cubic":
            idx, ws = _cubic_taps(c, xs[ax], float(self.attrs.get("cubic_coeff_a", -0.75)),
                                  int(self.attrs.get("exclude_outside", 0)))
        else:
            c = np.clip(c, 0, xs[ax] - 1)
            i0 = np.floor(c).astype(np.intp)
            i1 = np.minimum(i0 + 1, xs[ax] - 1)
            # the weights as the C core forms them: f rounded, 1 - f in the
            # tensor's type (so both paths give the same bits)
            f = (c - i0).astype(self.work)
            idx, ws = [i0, i1], [np.subtract(1, f, dtype=self.work), f]
            self.copies[ax] = _runs(np.flatnonzero(i0 == i1), i0)
        return [(self.keep(np.clip(i, 0, xs[ax] - 1).astype(np.intp)),
                 self.keep(w.astype(self.work).reshape(bshape))) for i, w in zip(idx, ws)]

    def run(self, xs, ys, sc):
        if self.native:
            x, y = self.ptrs(xs[0], ys[0])
            st = lib.pa_resize2d(*self.geom, *self.table_ptrs, x, y, self.workers)
            if st:
                check(st, f"Resize {self.op.name!r}")
            return
        src = xs[0]
        if not self.plan:
            np.copyto(ys[0], src)
            return
        if self.ort2d is not None:
            _run_ort_bilinear(self, src, ys[0], sc)
            return
        k = 0
        last = ys[0]
        if self.work != self.dtype:         # blended in float32 (setup)
            np.copyto(sc[-2], src)
            src, last, sc = sc[-2], sc[-1], sc[:-2]
        mid = sc[0] if len(self.plan) == 2 else None
        tmps = list(sc[1:] if mid is not None else sc)
        for step, (ax, taps) in enumerate(self.plan):
            dst = last if step == len(self.plan) - 1 else mid
            i0, w0 = taps[0]
            np.take(src, i0, axis=ax, out=dst, mode="clip")
            if self.linear:
                t = tmps[step]
                np.multiply(dst, w0, out=dst)
                for i1, w1 in taps[1:]:
                    np.take(src, i1, axis=ax, out=t, mode="clip")
                    np.multiply(t, w1, out=t)
                    np.add(dst, t, out=dst)
                pre = (slice(None),) * ax
                for lo, hi, i in self.copies.get(ax, ()):     # one pixel: a copy
                    np.copyto(dst[pre + (slice(lo, hi),)], src[pre + (slice(i, i + 1),)])
            src = dst
            k += 1
        y = ys[0]
        if last is not y:
            np.trunc(last, out=last)
            np.copyto(y, last, casting="unsafe")
        for ax, lo, hi in self.extrap:      # tf_crop_and_resize: outside the image
            pre = (slice(None),) * ax
            if lo:
                y[pre + (slice(0, lo),)].fill(self.extrap_value)
            if hi < y.shape[ax]:
                y[pre + (slice(hi, None),)].fill(self.extrap_value)


def _ort_bilinear_taps(k, mode, ctm, xs, ys, scales, crop, band):
    """An integer NCHW tensor resized linearly over H and / or W:
    onnxruntime's UpsampleBilinear tables (upsample.cc), so its values
    to the last unit -- float32 source coordinates, the weights
    |c - i1| and |c - i2| (0.5 and 0.5 where the two taps are one
    pixel), and per output ``(dx2 dy2) X11 + (dx1 dy2) X21 + (dx2 dy1)
    X12 + (dx1 dy1) X22`` truncated.  None for anything else."""
    if k.work == k.dtype or mode != "linear" or len(xs) != 4 or crop is not None \
            or band is not None or k.antialias or k.extrap or \
            {ax for ax, _ in k.plan} - {2, 3} or ctm not in _ORT_COORDS:
        return None
    f = np.float32
    tabs = []
    for ax in (2, 3):
        n_in, n_out, sc = xs[ax], ys[ax], f(scales[ax])
        o = np.arange(n_out, dtype=f)
        c = o if sc == 1 else _ORT_COORDS[ctm](o, sc, f(n_out), f(n_in))
        c = np.clip(c.astype(f), f(0), f(n_in - 1))
        i1 = np.minimum(c.astype(np.intp), n_in - 1)
        i2 = np.minimum(i1 + 1, n_in - 1)
        d1, d2 = np.abs(c - i1.astype(f)), np.abs(c - i2.astype(f))
        same = i1 == i2
        d1[same], d2[same] = 0.5, 0.5
        tabs.append((i1, i2, d1, d2))
    (y1, y2, dy1, dy2), (x1, x2, dx1, dx2) = tabs
    w = [k.keep(np.multiply.outer(a, b).astype(f)) for a, b in
         ((dy2, dx2), (dy2, dx1), (dy1, dx2), (dy1, dx1))]
    # each tap as one flat index into an H*W plane: one gather per term
    idx = [k.keep(np.add.outer(r * xs[3], c)) for r, c in ((y1, x1), (y1, x2), (y2, x1), (y2, x2))]
    return list(zip(idx, w))


def _run_ort_bilinear(k, x, y, sc):
    """The four terms gathered and summed in the planned scratch: the
    input as float32, the sum and one term (no allocation per run)."""
    xf, acc, t = sc[0], sc[1], sc[2]
    np.copyto(xf, x)
    n, c = xf.shape[:2]
    plane = xf.reshape(n, c, -1)
    for i, (idx, w) in enumerate(k.ort2d):
        dst = acc if i == 0 else t
        np.take(plane, idx, axis=2, out=dst, mode="clip")   # "raise" buffers out
        np.multiply(dst, w, out=dst)
        if i:
            np.add(acc, t, out=acc)
    np.trunc(acc, out=acc)
    np.copyto(y, acc, casting="unsafe")
