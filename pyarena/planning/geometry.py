"""The row geometry of the ops a patched stage runs (planning/patch.py):
which ops are row-local or spatial along H (each op's row kind, declared
by its kernel: :mod:`.op_facts`), and for a spatial op the input
rows each output row reads -- a Conv or pool's window (stride, dilation,
kernel rows, pads), a Pad's rows of padding, a Slice's 1-row window of
stride ``step`` from row ``start``, the stage input's NCHW -> NHWC
Transpose (row for row), a Resize's source coordinates
(:mod:`.resize_rows`)."""
import numpy as np

from ..graph import conv_weight_shape
from . import op_facts
from .resize_rows import resize_geometry

__all__ = ["row_kind", "is_spatial", "TO_NHWC", "op_geometry",
           "slice_params"]



def row_kind(op):
    """How a patched stage bands ``op`` (:data:`.op_facts.ROW_KINDS`), or
    None when it cannot: also for an op in training mode (a
    BatchNormalization with ``training_mode=1`` reads statistics of the
    whole tensor)."""
    if int(op.attrs.get("training_mode", 0) or 0):
        return None
    return op_facts.rows_kind(op.op_type)


def is_spatial(op):
    """Whether ``op`` has a receptive field along H (a geometry from
    :func:`op_geometry`)."""
    return op_facts.rows_kind(op.op_type) in op_facts.SPATIAL_ROWS

#: the stage input's NCHW -> NHWC Transpose (the NHWC pass's entry): H
#: moves from axis 2 to axis 1, row for row
TO_NHWC = [0, 2, 3, 1]


def _pads(attrs, size, k, s, d):
    """(begin, end) padding along one axis of ``size`` (ONNX pads or auto_pad)."""
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        o = -(-size // s)
        total = max(0, (o - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        return (small, big) if auto == "SAME_UPPER" else (big, small)
    return None


def _pad_geometry(op, graph, h_axis):
    """("pad", top, bottom, begins, ends) of a constant-mode Pad of the H,
    W and channel axes (begins / ends per axis; a channel pad is what a
    BlazeBlock's skip branch writes to widen it), or None."""
    x = graph.tensors[op.inputs[0]].shape
    mode = op.attrs.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    ins = op.inputs
    if x is None or len(x) != 4 or mode != "constant" or len(ins) > 3 and ins[3]:
        return None
    pads = op.attrs.get("pads")
    if len(ins) > 1 and ins[1]:
        t = graph.tensors[ins[1]]
        pads = t.data if t.role == "constant" else None
    if pads is None or np.asarray(pads).size != 8:
        return None
    pads = np.asarray(pads, dtype=np.int64).reshape(-1)
    if op.attrs.get("layout_pairs"):                  # TFLite: [[begin, end], ...]
        pads = pads.reshape(-1, 2).T.reshape(-1)
    begin, end = [int(v) for v in pads[:4]], [int(v) for v in pads[4:]]
    if min(begin + end) < 0 or begin[0] or end[0]:
        return None
    return "pad", begin[h_axis], end[h_axis], begin, end


def slice_params(op, graph):
    """(starts, ends, axes, steps) of a Slice whose inputs after the first
    are constants (opset 10 form), axes made non-negative; or None."""
    x = graph.tensors[op.inputs[0]].shape
    vals = []
    for i in range(1, 5):
        n = op.inputs[i] if len(op.inputs) > i else ""
        t = graph.tensors.get(n) if n else None
        if n and (t is None or t.role != "constant" or t.data is None):
            return None
        vals.append(None if not n else [int(v) for v in np.asarray(t.data).reshape(-1)])
    starts, ends, axes, steps = vals
    if starts is None or ends is None or x is None:
        return None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    return starts, ends, [a + len(x) if a < 0 else a for a in axes], steps


def _slice_geometry(op, graph, h_axis):
    """A Slice as a 1-row window: rows ``start + r * step`` of its input
    along H (step >= 1), i.e. stride ``step`` and top pad ``-start``; the
    identity where it does not slice H.  None for a negative step or a
    slice not expressible so."""
    x, y = graph.tensors[op.inputs[0]].shape, graph.tensors[op.outputs[0]].shape
    params = slice_params(op, graph) if x is not None and len(x) == 4 else None
    if params is None:
        return None
    size, start, step = int(x[h_axis]), 0, 1
    for s_, e, a, st in zip(*params):
        if a != h_axis:
            continue
        if st < 1:
            return None
        start = min(max(s_ + size if s_ < 0 else s_, 0), size)
        step = st
    rows = int(y[h_axis])
    if rows < 1 or start + (rows - 1) * step >= size:
        return None
    return step, 1, 1, -start, 0, 0, 0


def op_geometry(op, graph, h_axis):
    """(stride, dilation, kernel rows, top pad, left pad, bottom pad, right
    pad) along H of a Conv / pool op (a Pad: see :func:`_pad_geometry`; a
    Slice: :func:`_slice_geometry`), or None if it is not a 2-D spatial op
    the stage can band."""
    kind = row_kind(op)
    if kind == "pad":
        return _pad_geometry(op, graph, h_axis)
    if kind == "slice":
        return _slice_geometry(op, graph, h_axis)
    if kind == "transpose":
        perm = [int(v) for v in op.attrs.get("perm", ())]
        return (1, 1, 1, 0, 0, 0, 0) if perm == TO_NHWC and h_axis == 1 else None
    if kind == "resize":
        return resize_geometry(op, graph, h_axis)
    x = graph.tensors[op.inputs[0]].shape
    attrs = op.attrs
    nhwc = attrs.get("layout", "NCHW") == "NHWC"
    if nhwc != (h_axis == 1) or len(x) != 4:
        return None
    if kind == "conv":
        w = conv_weight_shape(op, graph.tensors[op.inputs[1]].shape)
        if w is None or len(w) != 4:
            return None
        kh, kw = (int(w[1]), int(w[2])) if nhwc else (int(w[2]), int(w[3]))
    else:
        kh, kw = (int(v) for v in attrs.get("kernel_shape", (0, 0)))
        if int(attrs.get("ceil_mode", 0)) or len(op.outputs) > 1 and op.outputs[1]:
            return None
    sh, sw = (int(v) for v in attrs.get("strides", (1, 1)))
    dh, dw = (int(v) for v in attrs.get("dilations", (1, 1)))
    H, W = (int(x[1]), int(x[2])) if nhwc else (int(x[2]), int(x[3]))
    ph, pw = _pads(attrs, H, kh, sh, dh), _pads(attrs, W, kw, sw, dw)
    if ph is None:
        p = [int(v) for v in attrs.get("pads", (0, 0, 0, 0))]
        if len(p) != 4:
            return None
        ph, pw = (p[0], p[2]), (p[1], p[3])
    if max(ph) >= dh * (kh - 1) + 1:
        return None                       # rows made of padding alone: not banded
    y = graph.tensors[op.outputs[0]].shape
    ho = int(y[1] if nhwc else y[2])
    if ho != (H + ph[0] + ph[1] - dh * (kh - 1) - 1) // sh + 1:
        return None                       # overhang (ceil mode): not banded
    return sh, dh, kh, ph[0], pw[0], ph[1], pw[1]
