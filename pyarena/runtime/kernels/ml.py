"""The numeric operators of the ``ai.onnx.ml`` domain: Binarizer,
ArrayFeatureExtractor and TreeEnsemble (string tensors are not handled
here).

TreeEnsemble walks every sample down every tree at once: one step of the
walk moves each (sample, tree) pair that has not reached a leaf to the
next node -- a loop over the depth of the deepest tree, never over samples
or nodes -- and the leaves' weights are then summed (or averaged, or their
minimum / maximum taken) per sample and target by one ``ufunc.at``, as
ONNX's reference aggregates them.
"""
import numpy as np

from ...errors import InvalidArgumentError
from .registry import Kernel, register

__all__ = ["Binarizer", "ArrayFeatureExtractor", "TreeEnsemble"]

ML = "ai.onnx.ml"


def _same(n):
    return [(n.s(0), n.t(0))]


def _features(n):
    x, i = n.s(0), n.s(1)
    if x is None or i is None:
        return [(None, n.t(0))]
    k = 1
    for d in i:
        k = k * d if isinstance(d, int) and isinstance(k, int) else None
    return [(([1] if len(x) == 1 else list(x[:-1])) + [k], n.t(0))]


def _ensemble(n):
    x = n.s(0)
    return [(None if x is None else [x[0], int(n.a.get("n_targets", 1))], n.t(0))]


@register
class Binarizer(Kernel):
    """1 where the input is above ``threshold``, else 0, in its type."""

    op_types = ("Binarizer",)
    onnx_domain = ML
    family = "unary"
    inplace = "unary"
    shape_rule = _same

    def setup(self):
        self.threshold = float(self.attrs.get("threshold", 0.0))
        if self.dtype.kind not in "fiu":
            self.fail(f"type {self.dtype.name} is not supported (numbers)")

    def run(self, xs, ys, sc):
        np.greater(xs[0], self.threshold, out=ys[0], casting="unsafe")


@register
class ArrayFeatureExtractor(Kernel):
    """The input's last axis at the given indices (flattened): one ``take``;
    a 1-D input gives a row.  Indices outside the axis are refused."""

    op_types = ("ArrayFeatureExtractor",)
    onnx_domain = ML
    family = "indexing"
    inplace = "none"
    shape_rule = _features

    def setup(self):
        xs = self.shape(0)
        if not xs:
            self.malformed("the input is a scalar: no feature axis")
        self.n = xs[-1]
        if np.dtype(self.ins[1].dtype).kind not in "iu":
            self.malformed(f"indices of type {np.dtype(self.ins[1].dtype).name} (int64)")

    def run(self, xs, ys, sc):
        idx = xs[1].reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise InvalidArgumentError(
                f"operator {self.op.name!r} (ArrayFeatureExtractor): index "
                f"{int(idx.min()) if idx.min() < 0 else int(idx.max())} is outside the "
                f"{self.n} features")
        xs0 = xs[0].reshape(-1, self.n)
        np.take(xs0, idx, axis=1, out=ys[0].reshape(xs0.shape[0], idx.size))


#: TreeEnsemble nodes_modes
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)


@register
class TreeEnsemble(Kernel):
    """ai.onnx.ml TreeEnsemble (opset 5): every sample down every tree at
    once, one step per level; post_transform NONE only (ONNX's reference
    applies none).  MIN / MAX leave 0 for a target no leaf reached, as
    onnxruntime does."""

    op_types = ("TreeEnsemble",)
    onnx_domain = ML
    family = "other"
    inplace = "none"
    shape_rule = _ensemble

    def setup(self):
        a = self.attrs
        xs = self.shape(0)
        if len(xs) != 2 or self.dtype.kind != "f":
            self.fail(f"input {list(xs)} of {self.dtype.name}: a float matrix (N, features)")
        if int(a.get("post_transform", 0)):
            self.fail(f"post_transform {int(a['post_transform'])} is not supported (NONE)")
        self.agg = int(a.get("aggregate_function", SUM))
        if self.agg not in (AVERAGE, SUM, MIN, MAX):
            self.malformed(f"aggregate_function {self.agg} is not 0-3")

        def ints(k):
            return np.asarray(a.get(k, []), np.int64).reshape(-1)

        def floats(k):
            v = a.get(k)
            return np.asarray([] if v is None else v, np.float64).reshape(-1)

        feat, modes = ints("nodes_featureids"), ints("nodes_modes")
        splits = floats("nodes_splits")
        tn, fn = ints("nodes_truenodeids"), ints("nodes_falsenodeids")
        tl, fl = ints("nodes_trueleafs").astype(bool), ints("nodes_falseleafs").astype(bool)
        miss = ints("nodes_missing_value_tracks_true").astype(bool)
        targets, weights = ints("leaf_targetids"), floats("leaf_weights")
        roots = ints("tree_roots")
        n_nodes, n_leaves = feat.size, targets.size
        self.n_targets = int(a.get("n_targets", 1))
        if miss.size == 0:
            miss = np.zeros(n_nodes, bool)
        if any(v.size != n_nodes for v in (modes, splits, tn, fn, tl, fl, miss)) or \
                weights.size != n_leaves:
            self.malformed("the nodes_* attributes (and leaf_targetids / leaf_weights) "
                           "differ in length")
        if n_nodes and (feat.min() < 0 or feat.max() >= xs[1] or modes.min() < 0 or
                        modes.max() > MEMBER):
            self.malformed(f"a node reads a feature outside the input's {xs[1]} or has an "
                           f"unknown mode")
        for ids, leaf in ((tn, tl), (fn, fl)):
            bad = (ids < 0) | np.where(leaf, ids >= n_leaves, ids >= n_nodes)
            if bad.any():
                self.malformed("a branch points outside the nodes or the leaves")
        if roots.size == 0 or roots.min() < 0 or roots.max() >= max(n_nodes, 1) or \
                n_leaves and (targets.min() < 0 or targets.max() >= self.n_targets):
            self.malformed("tree_roots or leaf_targetids out of range")
        # membership sets: the NaN-separated segments, one per MEMBER node in order
        members = floats("membership_values")
        is_member = modes == MEMBER
        segs = np.split(members, np.flatnonzero(np.isnan(members)))
        segs = [s[~np.isnan(s)] for s in segs][:int(is_member.sum())]
        if len(segs) != int(is_member.sum()) or \
                is_member.any() and np.isnan(members).sum() != is_member.sum():
            self.malformed("membership_values does not hold one set per MEMBER node")
        width = max([s.size for s in segs] + [1])
        table = np.full((max(len(segs), 1), width), np.nan)
        for i, s in enumerate(segs):            # (one row per MEMBER node)
            table[i, :s.size] = s
        row = np.zeros(n_nodes, np.int64)
        row[is_member] = np.arange(int(is_member.sum()))
        # node i's children at 2i (false) and 2i + 1 (true): a node's id, or
        # -(leaf + 1) for a leaf
        child = np.empty(2 * n_nodes, np.int64)
        child[0::2] = np.where(fl, -fn - 1, fn)
        child[1::2] = np.where(tl, -tn - 1, tn)
        self.t = dict(feat=feat, modes=modes, splits=splits, child=child,
                      miss=miss, targets=targets, weights=weights, roots=roots,
                      columns=[np.ascontiguousarray(c) for c in table.T], row=row)
        self.steps = n_nodes + 1               # a walk never visits more nodes
        self.modes_used = [int(v) for v in np.unique(modes)] or [LEQ]
        self.any_missing = bool(miss.any())

    #: node mode -> its comparison of the feature value with the split
    COMPARE = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater,
               EQ: np.equal, NEQ: np.not_equal}

    def compare(self, v, cur):
        """Each visited node's condition: its mode's comparison (one pass per
        mode the ensemble uses), a missing value going where it says."""
        t = self.t
        sp = t["splits"].take(cur)
        m = t["modes"].take(cur) if len(self.modes_used) > 1 else None
        cond = None
        for mode in self.modes_used:            # (the few modes in use)
            got = self.COMPARE[mode](v, sp) if mode != MEMBER else self.member(v, cur)
            cond = got if cond is None else np.where(m == mode, got, cond)
        if self.any_missing:
            cond |= np.isnan(v) & t["miss"].take(cur)
        return cond

    def member(self, v, cur):
        """Whether each value is in its node's set: one comparison per
        column of the sets' table (as wide as the largest set)."""
        row = self.t["row"].take(cur)
        got = None
        for col in self.t["columns"]:           # (the largest set's size)
            hit = col.take(row) == v
            got = hit if got is None else got | hit
        return got

    def run(self, xs, ys, sc):
        t = self.t
        x = xs[0].astype(np.float64)
        n, trees = x.shape[0], t["roots"].size
        # every (sample, tree) pair at its node; one level of every tree per
        # step, all pairs at once (those at a leaf already: recomputed, kept)
        cur = np.broadcast_to(t["roots"], (n, trees)).copy()
        leaf = np.zeros((n, trees), np.int64)
        done = np.zeros((n, trees), bool)
        first = (np.arange(n) * x.shape[1])[:, None]     # each sample's first feature
        flat = x.reshape(-1)
        for _ in range(self.steps):
            v = flat.take(first + t["feat"].take(cur))
            cond = self.compare(v, cur)
            nxt = t["child"].take(2 * cur + cond)
            at_leaf = nxt < 0
            np.copyto(leaf, -1 - nxt, where=at_leaf & ~done)
            done |= at_leaf
            if done.all():
                break
            np.copyto(cur, nxt, where=~at_leaf)
        else:
            raise InvalidArgumentError(f"operator {self.op.name!r} (TreeEnsemble): a tree "
                                       f"has a cycle")
        sample = np.broadcast_to(np.arange(n)[:, None], (n, trees))
        y = ys[0]
        if self.agg in (SUM, AVERAGE):
            at = (sample * self.n_targets + t["targets"].take(leaf)).reshape(-1)
            acc = np.bincount(at, weights=t["weights"].take(leaf).reshape(-1),
                              minlength=n * self.n_targets).reshape(n, self.n_targets)
            if self.agg == AVERAGE:
                acc /= trees
        else:
            big = np.finfo(y.dtype).max
            acc = np.full((n, self.n_targets), big if self.agg == MIN else -big, np.float64)
            f = np.minimum if self.agg == MIN else np.maximum
            f.at(acc, (sample, t["targets"][leaf]), t["weights"][leaf])
            # a target no tree's leaf reached: 0, as onnxruntime gives (ONNX's
            # reference leaves the float type's largest / lowest value)
            reached = np.zeros(acc.shape, bool)
            reached[sample, t["targets"][leaf]] = True
            acc[~reached] = 0
        np.copyto(y, acc, casting="unsafe")
