"""Kernels for TFLite data-movement operators: StridedSlice, DepthToSpace
(and its ONNX inverse, SpaceToDepth).

Both copy into the planned output through NumPy views -- no data
allocation at run time -- and neither may write in place (kind "none":
the planner gives them their own output buffer).

``StridedSlice`` follows TFLite / TensorFlow semantics: constant inputs
``begin``, ``end``, ``strides`` and the bit masks ``begin_mask``,
``end_mask``, ``ellipsis_mask``, ``new_axis_mask``, ``shrink_axis_mask``
(attributes) plus ``offset`` (``end`` counts from ``begin``).  Those
semantics are NumPy basic indexing, so setup turns the spec into one index
tuple and checks the shape it yields against the declared output shape.

``DepthToSpace`` (ONNX name; TFLite ``DEPTH_TO_SPACE``): ``blocksize``,
``mode`` ``"DCR"`` (TFLite's and ONNX's default) or ``"CRD"``,
``layout`` ``"NCHW"`` (ONNX) or ``"NHWC"`` (TFLite).
"""
import numpy as np

from ..._native.kernels import copy_call
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .registry import Kernel, register


def strided_slice_index(shape, begin, end, strides, begin_mask=0, end_mask=0,
                        ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0,
                        offset=False):
    """The NumPy index tuple equivalent to a TensorFlow strided slice of an
    array of ``shape``; ValueError naming the bad value if it is invalid."""
    begin = [int(b) for b in np.asarray(begin).reshape(-1)]
    end = [int(e) for e in np.asarray(end).reshape(-1)]
    strides = [int(s) for s in np.asarray(strides).reshape(-1)] if strides is not None \
        else [1] * len(begin)
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"begin {begin}, end {end} and strides {strides} differ in length")
    if bin(int(ellipsis_mask)).count("1") > 1:
        raise ValueError(f"ellipsis_mask {ellipsis_mask} sets more than one bit")
    idx = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            idx.append(Ellipsis)
        elif new_axis_mask & bit:
            idx.append(None)
        elif shrink_axis_mask & bit:
            idx.append(b)
        else:
            if s == 0:
                raise ValueError(f"strides {strides}: stride {i} is 0")
            if offset:
                e = b + e
            idx.append(slice(None if begin_mask & bit else b,
                             None if end_mask & bit else e, s))
    probe = np.broadcast_to(np.zeros((), np.uint8), tuple(shape))   # no memory
    try:
        probe[tuple(idx)]
    except IndexError as exc:
        raise ValueError(f"strided slice begin {begin} of shape {list(shape)}: {exc}") \
            from None
    return tuple(idx)


@register
class StridedSlice(Kernel):
    op_types = ("StridedSlice",)
    family = "movement"
    tflite = {"STRIDED_SLICE": ("StridedSlice", {}, tfl.strided_slice)}
    tflite_int8 = {"STRIDED_SLICE": "select"}

    def setup(self):
        self.runtime = (0,)
        a = self.attrs
        shp = self.shape(0)
        try:
            self.idx = strided_slice_index(
                shp, self.const(1, "begin"), self.const(2, "end"),
                self.const(3, "strides") if self.has(3) else None,
                int(a.get("begin_mask", 0)), int(a.get("end_mask", 0)),
                int(a.get("ellipsis_mask", 0)), int(a.get("new_axis_mask", 0)),
                int(a.get("shrink_axis_mask", 0)), bool(a.get("offset", False)))
        except ValueError as exc:
            self.fail(str(exc))
        got = np.broadcast_to(np.zeros((), np.uint8), shp)[self.idx].shape
        if int(np.prod(got)) != int(np.prod(self.oshape())):
            self.fail(f"the slice of {list(shp)} has shape {list(got)}, the output is "
                      f"declared {list(self.oshape())}")
        self.vshape = got

    def run(self, xs, ys, sc):
        np.copyto(ys[0].reshape(self.vshape), xs[0][self.idx])

    def native_calls(self, xs, ys):
        """The slice as one block-copy record (``copy_call``: a streaming
        model's ring buffer, one run of a native call list), or None."""
        x, y = xs[0], ys[0]
        if self._act is not None or not isinstance(x, np.ndarray) or \
                not isinstance(y, np.ndarray) or y.dtype.hasobject:
            return None
        rec = copy_call(y.reshape(self.vshape), x[self.idx])
        return None if rec is None else [rec]


@register
class DepthToSpace(Kernel):
    op_types = ("DepthToSpace",)
    family = "resize"
    shape_rule = moves.depth_space
    tflite = {"DEPTH_TO_SPACE": ("DepthToSpace", {"layout": "NHWC", "mode": "DCR"},
                                 tfl.depth_to_space)}

    def setup(self):
        self.runtime = (0,)
        b = int(self.attrs.get("blocksize", 0))
        mode = str(self.attrs.get("mode", "DCR")).upper()
        layout = str(self.attrs.get("layout", "NCHW")).upper()
        shp = self.shape(0)
        if len(shp) != 4:
            self.fail(f"input shape {list(shp)} is not 4-D")
        if b < 1:
            self.fail(f"blocksize {b} must be >= 1")
        if mode not in ("DCR", "CRD"):
            self.fail(f"mode {mode!r} is not DCR or CRD")
        if layout == "NHWC":
            n, h, w, c = shp
        else:
            n, c, h, w = shp
        if c % (b * b):
            self.fail(f"{c} channels are not divisible by blocksize^2 = {b * b}")
        co = c // (b * b)
        want = (n, h * b, w * b, co) if layout == "NHWC" else (n, co, h * b, w * b)
        if self.oshape() != want:
            self.fail(f"output is declared {list(self.oshape())}, DepthToSpace gives "
                      f"{list(want)}")
        if layout == "NHWC":
            if mode == "DCR":    # channels split as (b_h, b_w, C')
                self.xshape, self.perm = (n, h, w, b, b, co), (0, 1, 3, 2, 4, 5)
            else:                # (C', b_h, b_w)
                self.xshape, self.perm = (n, h, w, co, b, b), (0, 1, 4, 2, 5, 3)
            self.yshape = (n, h, b, w, b, co)
        else:
            if mode == "DCR":
                self.xshape, self.perm = (n, b, b, co, h, w), (0, 3, 4, 1, 5, 2)
            else:
                self.xshape, self.perm = (n, co, b, b, h, w), (0, 1, 4, 2, 5, 3)
            self.yshape = (n, co, h, b, w, b)

    def run(self, xs, ys, sc):
        np.copyto(ys[0].reshape(self.yshape), xs[0].reshape(self.xshape).transpose(self.perm))


@register
class SpaceToDepth(Kernel):
    """ONNX SpaceToDepth (NCHW): each ``blocksize`` x ``blocksize`` block of
    pixels becomes channels, block offsets first (``mode`` DCR, the default)
    or last (CRD); DepthToSpace's inverse, one strided copy."""

    op_types = ("SpaceToDepth",)
    family = "resize"
    shape_rule = moves.depth_space

    def setup(self):
        self.runtime = (0,)
        b = int(self.attrs.get("blocksize", 0))
        shp = self.shape(0)
        if len(shp) != 4:
            self.fail(f"input shape {list(shp)} is not 4-D")
        if b < 1:
            self.fail(f"blocksize {b} must be >= 1")
        n, c, h, w = shp
        if h % b or w % b:
            self.fail(f"spatial size {h}x{w} is not divisible by blocksize {b}")
        want = (n, c * b * b, h // b, w // b)
        if self.oshape() != want:
            self.fail(f"output is declared {list(self.oshape())}, SpaceToDepth gives "
                      f"{list(want)}")
        mode = str(self.attrs.get("mode", "DCR")).upper()
        if mode not in ("DCR", "CRD"):
            self.fail(f"mode {mode!r} is not DCR or CRD")
        self.xshape = (n, c, h // b, b, w // b, b)
        if mode == "DCR":       # channels as (b_h, b_w, C)
            self.perm, self.yshape = (0, 3, 5, 1, 2, 4), (n, b, b, c, h // b, w // b)
        else:                   # (C, b_h, b_w)
            self.perm, self.yshape = (0, 1, 3, 5, 2, 4), (n, c, b, b, h // b, w // b)

    def run(self, xs, ys, sc):
        np.copyto(ys[0].reshape(self.yshape), xs[0].reshape(self.xshape).transpose(self.perm))
