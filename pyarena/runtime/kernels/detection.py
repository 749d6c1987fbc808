"""Detection post-processing: NonMaxSuppression, whose output's length
the data decides (a pool tensor, see runtime/dynamic.py)."""
import numpy as np

from . import shape_rules as rules
from .indexing import _Declared
from .registry import register


def _corners(boxes, center):
    """(y1, x1, y2, x2) with y1 <= y2, x1 <= x2 from ONNX's two box formats."""
    if center:
        x, y, w, h = (boxes[..., i] for i in range(4))
        return y - h / 2, x - w / 2, y + h / 2, x + w / 2
    a, b, c, d = (boxes[..., i] for i in range(4))
    return np.minimum(a, c), np.minimum(b, d), np.maximum(a, c), np.maximum(b, d)


def _iou(boxes, center):
    """The IoU of every pair of ``boxes`` (0 where they do not overlap or
    a box has no area)."""
    y1, x1, y2, x2 = _corners(boxes, center)
    ih = np.minimum(y2[:, None], y2[None]) - np.maximum(y1[:, None], y1[None])
    iw = np.minimum(x2[:, None], x2[None]) - np.maximum(x1[:, None], x1[None])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0)
    area = (y2 - y1) * (x2 - x1)
    union = area[:, None] + area[None] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, inter / np.where(ok, union, 1), 0)


@register
class NonMaxSuppression(_Declared):
    """Per batch and class: the boxes above ``score_threshold`` by score
    (ties: the lower index first), each kept unless its IoU with one kept
    before exceeds ``iou_threshold``, at most ``max_output_boxes_per_class``
    (0 when omitted).  The IoUs of a class in one array operation; the
    greedy pass steps once per box kept.  Output (selected, 3): batch,
    class, box -- a pool tensor made by ``produce``."""

    op_types = ("NonMaxSuppression",)
    family = "indexing"
    shape_rule = rules.non_max_suppression
    fold = "never"
    data_sized = True

    def setup(self):
        b, s = self.shape(0), self.shape(1)
        if len(b) != 3 or b[2] != 4 or len(s) != 3 or s[0] != b[0] or s[2] != b[1]:
            self.malformed(f"boxes {list(b)} and scores {list(s)} must be (N, boxes, 4) and "
                           f"(N, classes, boxes)")
        self.center = bool(int(self.attrs.get("center_point_box", 0)))

    def produce(self, xs, ys, sc, pool):
        def scalar(i, default):
            v = xs[i] if i < len(xs) and xs[i] is not None else None
            return default if v is None or v.size == 0 else v.reshape(-1)[0]
        boxes, scores = xs[0], xs[1]
        most = max(int(scalar(2, 0)), 0)
        iou_max = float(scalar(3, 0.0))
        floor = scalar(4, None)
        picked = []
        for n in range(boxes.shape[0]):
            iou = _iou(boxes[n], self.center) if most else None
            for c in range(scores.shape[1]):
                s = scores[n, c]
                order = np.lexsort((np.arange(s.size), -s))
                if floor is not None:
                    order = order[s[order] > floor]
                alive = np.ones(order.size, bool)
                kept = 0
                while kept < most:
                    rest = np.flatnonzero(alive)
                    if not rest.size:
                        break
                    i = order[rest[0]]
                    picked.append((n, c, i))
                    kept += 1
                    alive &= iou[i, order] <= iou_max
                    alive[rest[0]] = False
        y = pool.empty((len(picked), 3), np.int64)
        if picked:
            y[...] = picked
        return [y]
