"""The rows of a Resize's input that a band of its output reads.

A patched stage (:mod:`.patch`) may upsample: a decoder's nearest or
bilinear Resize of H (and W).  Its receptive field is not a kernel
window: output row ``o`` reads the input rows around its source
coordinate ``c(o)`` (ONNX's coordinate transformation modes, here and
in the runtime's Resize kernel -- one definition, :func:`resize_coords`).
The coordinates are clamped to the input once, for the whole axis; a
band of output rows ``[a, b)`` then reads input rows ``[floor(c(a)),
floor(c(b-1)) + 2)`` clamped: both taps of a linear blend, and the
rounded tap of nearest whichever way it rounds.  The band kernel is the
ordinary Resize with the band's own coordinates (relative to the first
row it reads) along H: bands whose coordinates are the same share one
kernel, as the middle bands of an integer upscale do.
"""
import numpy as np

__all__ = ["resize_coords", "resize_geometry", "resize_in_rows", "resize_ready"]

#: coordinate modes a band can follow (crop-and-resize has a roi of its own)
MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_half_pixel_for_nn", "half_pixel_symmetric")


def resize_coords(out_n, in_n, scale, mode):
    """Source coordinates of the ``out_n`` output positions of an axis of
    ``in_n`` scaled by ``scale`` (ONNX coordinate_transformation_mode)."""
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


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _scale(op, graph, h_axis, x, y):
    """The H scale the kernel uses: a constant ``scales`` input, else out / in."""
    old = op.op_type == "Upsample" or (op.notes.opset or 11) < 11
    k = 1 if old else 2
    if len(op.inputs) > k and op.inputs[k]:
        t = graph.tensors[op.inputs[k]]
        if t.role != "constant" or t.data is None:
            return None
        s = np.atleast_1d(np.asarray(t.data, dtype=np.float64))
        if s.size == 4:
            return float(s[h_axis])
        if s.size:
            return None
    if op.attrs.get("scales") is not None and not old:
        return None
    return y[h_axis] / x[h_axis]


def resize_geometry(op, graph, h_axis):
    """("resize", clamped source coordinates of every output row) of a
    4-D nearest / linear Resize whose N and C axes stay, or None when a
    band cannot follow it (cubic, antialias, crop-and-resize, axes given,
    a scale not known before running)."""
    x, y = graph.tensors[op.inputs[0]].shape, graph.tensors[op.outputs[0]].shape
    if x is None or y is None or len(x) != 4 or len(y) != 4:
        return None
    c_axis = 3 if h_axis == 1 else 1
    if int(x[0]) != int(y[0]) or int(x[c_axis]) != int(y[c_axis]):
        return None
    a = op.attrs
    mode = _text(a.get("mode", "nearest"))
    mode = {"bilinear": "linear"}.get(mode, mode)
    if mode not in ("nearest", "linear") or int(a.get("antialias", 0)) or \
            a.get("axes") is not None or len(op.inputs) > 3 and op.inputs[3] and \
            _text(a.get("keep_aspect_ratio_policy", "stretch")) != "stretch":
        return None
    ctm = _text(a.get("coordinate_transformation_mode"))
    if ctm is None:
        ctm = "asymmetric" if op.op_type == "Upsample" or (op.notes.opset or 11) < 11 \
            else "half_pixel"
    scale = _scale(op, graph, h_axis, [int(v) for v in x], [int(v) for v in y])
    if ctm not in MODES or not scale or scale <= 0:
        return None
    xh, yh = int(x[h_axis]), int(y[h_axis])
    c = np.clip(resize_coords(yh, xh, scale, ctm), 0, xh - 1)
    if np.any(np.diff(c) < 0):
        return None
    return "resize", c


def resize_in_rows(geo, a, b, size):
    """(input rows, band coordinates relative to the first of them) of
    output rows [a, b): the coordinates are the band kernel's key."""
    c = geo[1]
    r0 = int(np.floor(c[a]))
    r1 = min(size, int(np.floor(c[b - 1])) + 2)
    return (r0, r1), tuple(float(v) for v in c[a:b] - r0)


def resize_ready(geo, have, out_size):
    """Output rows computable from the input's first ``have`` rows."""
    c = geo[1]
    return min(out_size, int(np.searchsorted(np.floor(c) + 2, have, side="right")))
