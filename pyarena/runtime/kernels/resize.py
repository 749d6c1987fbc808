"""Resize / Upsample: nearest, (bi)linear and (bi)cubic resize of up to
two axes, every ONNX coordinate mode, opset-18 axes and aspect-ratio
policies, TFLite's RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR.  Scratch:
the intermediate after the first resized axis and, for linear / cubic,
the second operand of each blend.
"""
import numpy as np

from .registry import Kernel, const, register


def _coords(out_n, in_n, scale, mode):
    o = np.arange(out_n, dtype=np.float64)
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_n > 1 else np.zeros(out_n)
    if mode == "align_corners":
        return o * (in_n - 1) / (out_n - 1) if out_n > 1 else np.zeros(out_n)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "half_pixel_symmetric":
        # centre of the implicit ROI onto the centre of the output (differs
        # from half_pixel only when scale * in is not an integer)
        adj = out_n / (scale * in_n)
        return in_n / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
    raise ValueError(mode)


@register
class Resize(Kernel):
    """Nearest, (bi)linear and (bi)cubic resize of up to two axes.  Each
    resized axis is a ``np.take`` with precomputed indices (and, for
    linear / cubic, a weighted sum of two / four takes with precomputed
    weights: cubic_coeff_a, exclude_outside, edge-clamped indices as in the
    ONNX reference).  Scratch: the intermediate after the first axis and,
    for linear / cubic, the second operand of each blend."""

    op_types = ('Resize', 'Upsample')
    inplace = 'none'
    tflite = {
        'RESIZE_BILINEAR': ('Resize', {'mode': 'linear'}),
        'RESIZE_NEAREST_NEIGHBOR': ('Resize', {'mode': 'nearest'})}

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        nd = len(xs)
        a = self.attrs
        mode = a.get("mode", "nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode == "bilinear":
            mode = "linear"
        if mode == "bicubic":
            mode = "cubic"
        if mode not in ("nearest", "linear", "cubic"):
            self.fail(f"mode {mode!r} is not supported (nearest, linear, cubic)")
        if mode != "nearest" and int(a.get("antialias", 0)):
            self.fail("antialias=1 is not supported")
        if mode == "cubic" and self.op.op_type == "Upsample":
            self.fail("cubic Upsample is not supported")
        ca = float(a.get("cubic_coeff_a", -0.75))
        excl = int(a.get("exclude_outside", 0))
        ctm = a.get("coordinate_transformation_mode")
        ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
        if ctm is None:
            ctm = "asymmetric" if self.op.op_type == "Upsample" or a.get("_opset", 11) < 11 \
                else "half_pixel"
        nm = a.get("nearest_mode", "round_prefer_floor")
        nm = nm.decode() if isinstance(nm, bytes) else nm
        scales = a.get("scales")
        # Upsample(X, scales) / Resize opset 10 (X, scales) / 11+ (X, roi, scales, sizes)
        if self.op.op_type == "Upsample" or a.get("_opset", 11) < 11:
            if self.has(1):
                scales = self.const(1, "scales")
        elif self.has(2) and self.ins[2].data is not None and np.size(self.ins[2].data):
            scales = self.const(2, "scales")
        # opset 18: scales / sizes may name only ``axes``; keep_aspect_ratio_policy
        # not_larger / not_smaller scales every named axis by the min / max
        # of sizes / input (the output shape already says the rounded sizes)
        axes = a.get("axes")
        axes = list(range(nd)) if axes is None else [int(v) + nd if int(v) < 0 else int(v)
                                                     for v in axes]
        if scales is not None and len(np.atleast_1d(scales)) == len(axes) != nd:
            full = [1.0] * nd
            for ax, v in zip(axes, np.atleast_1d(scales)):
                full[ax] = float(v)
            scales = full
        if scales is None or len(np.atleast_1d(scales)) != nd:
            scales = [o / i for o, i in zip(ys, xs)]
            pol = a.get("keep_aspect_ratio_policy", "stretch")
            pol = pol.decode() if isinstance(pol, bytes) else pol
            if pol in ("not_larger", "not_smaller") and self.has(3):
                sizes = np.atleast_1d(self.const(3, "sizes"))
                r = [float(sz) / xs[ax] for ax, sz in zip(axes, sizes)]
                common = min(r) if pol == "not_larger" else max(r)
                for ax in axes:
                    scales[ax] = common
            elif pol != "stretch":
                self.fail(f"keep_aspect_ratio_policy {pol!r} is not supported")
        scales = [float(s) for s in np.atleast_1d(scales)]
        self.extrap = []
        crop = None
        if ctm == "tf_crop_and_resize":
            roi = self.const(1, "roi") if self.has(1) else None
            if roi is None or np.size(roi) != 2 * len(axes):
                self.fail(f"tf_crop_and_resize needs a constant roi of {2 * len(axes)} values")
            roi = np.asarray(roi, dtype=np.float64).reshape(-1)
            crop = [(0.0, 1.0)] * nd
            for k, ax in enumerate(axes):
                crop[ax] = (float(roi[k]), float(roi[k + len(axes)]))
            self.extrap_value = const(float(a.get("extrapolation_value", 0.0)), self.dtype)
        self.plan = []
        for ax in range(nd):
            if ctm == "tf_crop_and_resize":
                # x = roi_start (in-1) + o (roi_end - roi_start) (in-1) / (out-1);
                # positions outside [0, in-1] get extrapolation_value
                r0, r1 = crop[ax]
                n, o = xs[ax], np.arange(ys[ax], dtype=np.float64)
                c = (r0 * (n - 1) + o * (r1 - r0) * (n - 1) / (ys[ax] - 1) if ys[ax] > 1
                     else np.full(1, (r1 - r0) * (n - 1) / 2 + r0 * (n - 1)))
                if n == ys[ax] and np.array_equal(c, o):
                    continue
                out = (c < 0) | (c > n - 1)
                if out.any():
                    pre = int(np.argmin(out)) if not out.all() else len(out)
                    suf = int(np.argmin(out[::-1])) if not out.all() else 0
                    self.extrap.append((ax, pre, len(out) - suf))
            elif xs[ax] == ys[ax] and scales[ax] == 1.0:
                continue
            else:
                try:
                    c = _coords(ys[ax], xs[ax], scales[ax], ctm)
                except ValueError:
                    self.fail(f"coordinate_transformation_mode {ctm!r} is not supported")
            if mode == "nearest":
                if nm == "round_prefer_floor":
                    i = np.ceil(c - 0.5)
                elif nm == "round_prefer_ceil":
                    i = np.floor(c + 0.5)
                elif nm == "floor":
                    i = np.floor(c)
                elif nm == "ceil":
                    i = np.ceil(c)
                else:
                    self.fail(f"nearest_mode {nm!r} is not supported")
                i = np.clip(i, 0, xs[ax] - 1).astype(np.intp)
                self.plan.append((ax, [(self.keep(i), None)]))
            elif mode == "cubic":
                base = np.floor(c)
                t = c - base
                A = ca
                ws = [((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                      ((A + 2) * t - (A + 3)) * t * t + 1,
                      ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                      ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A]
                idx = [base.astype(np.int64) + k for k in (-1, 0, 1, 2)]
                if excl:
                    ws = [np.where((i < 0) | (i >= xs[ax]), 0.0, w) for i, w in zip(idx, ws)]
                    tot = sum(ws)
                    ws = [w / tot for w in ws]
                bshape = [1] * nd
                bshape[ax] = ys[ax]
                self.plan.append((ax, [
                    (self.keep(np.clip(i, 0, xs[ax] - 1).astype(np.intp)),
                     self.keep(w.astype(self.dtype).reshape(bshape))) for i, w in zip(idx, ws)]))
            else:
                c = np.clip(c, 0, xs[ax] - 1)
                i0 = np.floor(c).astype(np.intp)
                i1 = np.minimum(i0 + 1, xs[ax] - 1)
                f = c - i0
                bshape = [1] * nd
                bshape[ax] = ys[ax]
                w0 = (1 - f).astype(self.dtype).reshape(bshape)
                w1 = f.astype(self.dtype).reshape(bshape)
                self.plan.append((ax, [(self.keep(i0), self.keep(w0)),
                                       (self.keep(i1), self.keep(w1))]))
        if len(self.plan) > 2:
            self.fail("resizing more than two axes is not supported")
        specs = []
        shape = list(xs)
        self.shapes = []
        for k, (ax, _taps) in enumerate(self.plan):
            shape[ax] = ys[ax]
            self.shapes.append(tuple(shape))
        if len(self.plan) == 2:
            specs.append((self.shapes[0], self.dtype))     # intermediate
        if mode != "nearest":
            for shp in self.shapes:
                specs.append((shp, self.dtype))            # blend operand
        self.scratch = specs
        self.linear = mode != "nearest"

    def run(self, xs, ys, sc):
        src = xs[0]
        if not self.plan:
            np.copyto(ys[0], src)
            return
        k = 0
        mid = sc[0] if len(self.plan) == 2 else None
        tmps = list(sc[1:] if mid is not None else sc)
        for step, (ax, taps) in enumerate(self.plan):
            dst = ys[0] if step == len(self.plan) - 1 else mid
            i0, w0 = taps[0]
            np.take(src, i0, axis=ax, out=dst, mode="clip")
            if self.linear:
                t = tmps[step]
                np.multiply(dst, w0, out=dst)
                for i1, w1 in taps[1:]:
                    np.take(src, i1, axis=ax, out=t, mode="clip")
                    np.multiply(t, w1, out=t)
                    np.add(dst, t, out=dst)
            src = dst
            k += 1
        y = ys[0]
        for ax, lo, hi in self.extrap:      # tf_crop_and_resize: outside the image
            pre = (slice(None),) * ax
            if lo:
                y[pre + (slice(0, lo),)].fill(self.extrap_value)
            if hi < y.shape[ax]:
                y[pre + (slice(hi, None),)].fill(self.extrap_value)
