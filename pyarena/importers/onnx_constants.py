"""Constant folding for the ONNX import: which nodes fold and when (how one
node is evaluated is ``onnx_fold.py``).

:class:`ConstantFolding` decodes the initializers (a large one stays a
view of the mapped file), orders the nodes, and folds every node that
computes only from constants -- initializers, ``Constant``,
``ConstantOfShape``, ``Shape`` of a tensor whose shape is static, and any
chain of those -- into the import's values (``imp.vals``); an ``If`` on a
known condition is replaced by the branch it takes.  With an
:class:`~.import_cache.ImportCache`, a node computed from static values
alone is folded once per session and its values reused.

Plain folding never amplifies: a node is folded when its output is known
(from shape inference, or from its inputs for ConstantOfShape) to hold at
most ``FOLD_MAX_BYTES`` (shape arithmetic) or at most ``FOLD_GROWTH``
times the constant bytes it reads (a weight transposed, cast or
dequantized).  A larger result (a ConstantOfShape of 8192 x 8192 from a
16-byte shape, a Tile or Expand of a small constant) is a weight fold:

Weight folding: a larger result of a deterministic op whose inputs are all
constants -- a Conv weight made by ``ConstantOfShape`` / ``Expand`` /
``Tile``, a classifier's weight made by ``ConstantOfShape`` -- is folded
once at load and becomes a constant (in the graph's weights arena),
instead of an op every inference runs into the work arena.  Its size is
known from shape inference before anything is computed, and the import
folds at most ``WEIGHT_FOLD_MAX_BYTES`` so, and never more than the
memory limit (``max_memory``) leaves beside the model's own constants and
its largest tensor.  A result over
that cap stays a run-time op, planned like any tensor, and the import says
so once (:class:`FoldingCapWarning`; the op's ``notes.over_fold_cap``).
``ConstantOfShape`` and ``Expand`` fold to broadcast views that stay so
in the graph (``imp.weight_views``): a kernel lays one out at setup, or
the executor places it in its weights arena, once -- never a resident
copy in the graph beside the kernel's.  An intermediate nothing else
reads is dropped as soon as its last reader folds: the import holds one
node's result at a time beside the weights.
"""
import math
import warnings

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import stable_toposort
from ..planning import resolve_max_memory
from ..runtime.kernels import op_fact
from .onnx_contrib import runs_in_domain
from .onnx_control import take_branch
from .onnx_fold import FOLD_MAX_BYTES, _attrs, _fold_node

__all__ = ["FOLD_GROWTH", "WEIGHT_FOLD_MAX_BYTES", "ConstantFolding", "FoldingCapWarning",
           "warn_over_cap"]

#: ... or this many times the bytes of the constants it reads
FOLD_GROWTH = 8
#: the bytes one import folds into the weights arena beyond those caps
#: (weights made by ops on constants), at most; the memory limit may leave less
WEIGHT_FOLD_MAX_BYTES = 1 << 30


class FoldingCapWarning(UserWarning):
    """Constant results over the weight-folding cap: computed at every run."""


def _fold_kind(op_type):
    """How the importer folds ``op_type`` on constant inputs (its kernel's
    ``fold``; an op nothing declares: "capped")."""
    return op_fact(op_type, "fold") or "capped"


def _stored_nbytes(v):
    """Bytes ``v`` really holds: a broadcast (stride 0) axis costs nothing."""
    v = np.asarray(v)
    return v.itemsize * math.prod(d for d, st in zip(v.shape, v.strides) if st)


def _itemsize(onnx, et):
    """Bytes of one element of ONNX element type ``et`` (8 if unknown)."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(et)).itemsize
    except Exception:
        return 8


def _toposort(nodes, produced_outside):
    """Nodes in a valid order; ModelImportError on a cycle or a missing input."""
    prod = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                prod[o] = i
    indeg = [0] * len(nodes)
    users = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for t in set(x for x in n.input if x):
            if t in prod:
                if prod[t] == i:
                    raise ModelImportError(f"node {n.name or n.op_type!r} reads its own "
                                           f"output {t!r} (cyclic graph)")
                users[prod[t]].append(i)
                indeg[i] += 1
            elif t not in produced_outside:
                raise ModelImportError(f"node {n.name or n.op_type!r} reads tensor {t!r} "
                                       f"that nothing produces")
    order, stuck = stable_toposort(users, indeg)
    if stuck:
        names = [nodes[i].name or nodes[i].op_type for i in stuck]
        raise ModelImportError(f"the graph has a cycle through node(s) {names[:5]}")
    return [nodes[i] for i in order]


class ConstantFolding:
    """The folding of one import (``imp``: its state; values go to
    ``imp.vals``, the shapes they fix to ``imp.shapes``).  ``fold`` False:
    only the initializers and the mapped ``Constant`` nodes are read, no
    node is evaluated."""

    def __init__(self, imp, fold):
        self.imp = imp
        self.fold = fold
        self.changes = 0        # nodes folded or inlined so far
        self.readers = {}       # tensor -> nodes still to fold that read it
        self.kept_names = set()     # read by a body or the model's output: never dropped
        self.large = set()      # folded values over FOLD_MAX_BYTES (dropped once unread)
        self.room = None        # bytes weight folding may still add (None: not yet known)
        self.over_cap = {}      # node name -> bytes of its result, over the cap

    def first_pass(self):
        """Evaluate every node computable from constants into ``imp.vals``;
        returns the nodes left to run, in a valid order."""
        imp = self.imp
        self._initializers()
        outside = set(imp.vals) | {i.name for i in imp.model.graph.input}
        nodes = _toposort(list(imp.model.graph.node), outside)
        for i, n in enumerate(nodes):
            if not n.name:
                n.name = f"{n.op_type}_{i}"
        for n in nodes:
            if n.domain not in ("", "ai.onnx") and not runs_in_domain(n.op_type, n.domain):
                raise UnsupportedOpError(f"operator {n.name!r}: op {n.op_type!r} from "
                                         f"domain {n.domain!r} is not supported")
        for n in nodes:
            for i in n.input:
                if i:
                    self.readers[i] = self.readers.get(i, 0) + 1
        self.kept_names = _body_reads(imp.onnx, nodes) | {o.name for o in imp.model.graph.output}
        return self.fold_pass(nodes)

    def _initializers(self):
        """The initializers' values (the mapped ones as views of the file,
        the static ones from the cache), and with a cache the values of the
        static nodes folded by the first import."""
        imp = self.imp
        vals = imp.vals
        cached = imp.cache.values if imp.cache is not None else {}
        for init in imp.model.graph.initializer:
            if init.name in imp.mapped:     # a view of the file: nothing read yet
                vals[init.name] = cached.get(init.name, imp.mapped[init.name])
                continue
            if init.name in cached and init.name in imp.static:
                vals[init.name] = cached[init.name]
                continue
            try:
                vals[init.name] = imp.onnx.numpy_helper.to_array(init)
            except Exception as exc:
                raise ModelImportError(f"initializer {init.name!r} (dims {list(init.dims)}) "
                                       f"cannot be decoded: {exc}") from None
            if init.name in imp.static:
                imp.cache.values[init.name] = vals[init.name]
        if imp.cache is not None and imp.cache.reduced is not None:
            for name in imp.cache.values.keys() - vals.keys():   # the static folds
                vals[name] = imp.cache.values[name]
                imp.shapes[name] = list(vals[name].shape)
                imp.static.add(name)

    def fold_pass(self, nodes):
        """One pass of folding over ``nodes`` (in order); the nodes left.
        Counts what it folded or inlined in ``changes``."""
        imp, fold = self.imp, self.fold
        onnx, vals = imp.onnx, imp.vals
        remaining = []
        for n in nodes:
            if n.op_type == "Constant" and n.output and n.output[0] in imp.mapped:
                vals[n.output[0]] = imp.mapped[n.output[0]]   # read in place
                if imp.cache is not None and n.output[0] not in imp.unstable:
                    vals[n.output[0]] = imp.cache.values.get(n.output[0], vals[n.output[0]])
                    imp.cache.store(n, [vals[n.output[0]]])     # static: skipped next time
                continue
            if fold and n.op_type == "If" and n.domain in ("", "ai.onnx") and \
                    n.input and n.input[0] in vals:     # the branch it takes, inlined
                sub, inits = take_branch(onnx, n, vals[n.input[0]])
                vals.update(inits)
                imp.unstable.update(o for m in sub for o in m.output)
                self.changes += 1
                remaining.extend(self.fold_pass(sub))
                continue
            kind = _fold_kind(n.op_type)
            can = fold and kind != "never"
            if can and op_fact(n.op_type, "needs_values") is False:
                ok = True
            else:
                ok = can and all((not i) or i in vals for i in n.input)
            ok = ok and self.small_enough(n)
            static = ok and imp.cache is not None and \
                imp.cache.static_node(n, imp.static, imp.unstable)
            try:
                res = imp.cache.lookup(n) if static else None
                if res is None and ok:
                    res = self.within_growth(n, kind, _fold_node(onnx, n, vals, imp.shapes,
                                                                 imp.opset))
                if res is None and fold:
                    res = self.fold_weight(n)
                    static = res is not None and imp.cache is not None and \
                        imp.cache.static_node(n, imp.static, imp.unstable)
            except (ModelImportError, UnsupportedOpError):
                raise
            except Exception as exc:    # attributes or inputs that do not go together
                raise ModelImportError(
                    f"operator {n.name!r} ({n.op_type}): cannot be evaluated from its "
                    f"constant inputs ({type(exc).__name__}: {str(exc)[:120]})") from None
            if res is None:
                remaining.append(n)
                continue
            self.changes += 1
            if static:      # the same for every input shape: kept for the next
                imp.cache.store(n, res)
                imp.static.update(o for o in n.output if o)
            for name, v in zip(n.output, res):
                if name:
                    vals[name] = v
                    imp.shapes[name] = list(v.shape)
                    if np.asarray(v).nbytes > FOLD_MAX_BYTES:
                        self.large.add(name)
            self.drop_unread(n)
        return remaining

    def within_growth(self, n, kind, res):
        """``res`` (``n``'s evaluated outputs), or None when it is larger
        than the growth rule predicted: run it instead."""
        if res is not None and kind != "free" and \
                sum(_stored_nbytes(v) for v in res) > max(
                    FOLD_MAX_BYTES, FOLD_GROWTH * sum(_stored_nbytes(self.imp.vals[i])
                                                      for i in n.input if i in self.imp.vals)):
            return None
        return res

    def small_enough(self, n):
        """Whether folding ``n`` amplifies nothing: every output's inferred
        size is known and within max(FOLD_MAX_BYTES, FOLD_GROWTH x the bytes
        it reads); an op whose output size is unknown is folded only if it
        cannot expand its inputs.  ConstantOfShape checks its own size."""
        kind = _fold_kind(n.op_type)
        if kind == "free":
            return True
        imp = self.imp
        read = sum(_stored_nbytes(imp.vals[i]) for i in n.input if i and i in imp.vals)
        size = self.output_bytes(n)
        if size is not None:
            return size <= max(FOLD_MAX_BYTES, FOLD_GROWTH * read)
        return kind != "expanding"

    def output_bytes(self, n):
        """Bytes of ``n``'s outputs from the inferred shapes and types, or
        None while one is unknown (nothing computed)."""
        imp = self.imp
        total = 0
        for o in n.output:
            if not o:
                continue
            shp, et = imp.shapes.get(o), imp.types.get(o)
            if shp is None or et is None or not all(isinstance(d, int) and d >= 0
                                                    for d in shp):
                return None
            total += math.prod(shp) * _itemsize(imp.onnx, et)
        return total

    # -- weight folding ----------------------------------------------------
    def weight_bytes(self, n):
        """Bytes of ``n``'s outputs if it may fold as a weight: a
        deterministic standard op whose inputs are all constants and whose
        outputs' sizes are known; else None."""
        if n.domain not in ("", "ai.onnx") or _fold_kind(n.op_type) == "never":
            return None
        if not all(i in self.imp.vals for i in n.input if i):
            return None
        return self.output_bytes(n)

    def fold_weight(self, n):
        """``n``'s outputs folded as weights (module docstring), or None:
        not a weight, or over the cap (noted once per node)."""
        size = self.weight_bytes(n)
        if size is None or size <= FOLD_MAX_BYTES:
            return None
        if self.room is None:
            self.room = self.weight_room()
        if size > self.room:
            self.over_cap[n.name] = size
            return None
        res = self._evaluate_weight(n)
        if res is None or sum(np.asarray(v).nbytes for v in res) != size:
            return None     # not what shape inference said: run it instead
        self.room -= size
        self.over_cap.pop(n.name, None)
        if n.op_type in ("ConstantOfShape", "Expand"):
            self.imp.weight_views.update(o for o in n.output if o)
        return res

    def weight_room(self):
        """Bytes weight folding may add: WEIGHT_FOLD_MAX_BYTES, or less when
        the memory limit leaves less beside the constants the model holds
        and its largest tensor (which the work arena holds at least, as
        ``check_graph_limit`` counts)."""
        imp = self.imp
        held = sum(np.asarray(v).nbytes for v in imp.vals.values())
        largest = 0
        for name, shp in imp.shapes.items():
            et = imp.types.get(name)
            if name in imp.vals or et is None or shp is None or \
                    not all(isinstance(d, int) for d in shp):
                continue
            largest = max(largest, math.prod(shp) * _itemsize(imp.onnx, et))
        limit = resolve_max_memory(imp.max_memory)
        return max(0, min(WEIGHT_FOLD_MAX_BYTES, limit - held - largest))

    def _evaluate_weight(self, n):
        """``n``'s outputs; a ConstantOfShape or Expand as a broadcast view
        (no bytes until the graph's weights arena holds it)."""
        imp = self.imp
        if n.op_type == "ConstantOfShape":
            val = _attrs(imp.onnx, n).get("value")
            val = np.asarray(np.float32(0) if val is None else val).reshape(-1)[:1]
            shp = [int(d) for d in np.asarray(imp.vals[n.input[0]]).reshape(-1)]
            return [np.broadcast_to(val.reshape(()), shp)]
        if n.op_type == "Expand":
            x, shp = np.asarray(imp.vals[n.input[0]]), imp.vals[n.input[1]]
            return [np.broadcast_to(x, np.broadcast_shapes(
                x.shape, tuple(int(d) for d in np.asarray(shp).reshape(-1))))]
        return _fold_node(imp.onnx, n, imp.vals, imp.shapes, imp.opset)

    def drop_unread(self, n):
        """A weight-sized value that ``n`` (just folded) was the last to read
        is dropped: the import holds no intermediate of a folded chain."""
        for i in n.input:
            if i in self.readers:
                self.readers[i] -= 1
                if self.readers[i] <= 0 and i in self.large and i not in self.kept_names:
                    self.imp.vals.pop(i, None)


def warn_over_cap(over_cap):
    """One warning naming the constant results left to run time because
    they are over the weight-folding cap (``over_cap``: op name -> bytes)."""
    if over_cap:
        names = ", ".join(sorted(over_cap)[:5])
        more = f" and {len(over_cap) - 5} more" if len(over_cap) > 5 else ""
        warnings.warn(
            f"{len(over_cap)} constant result(s) of {sum(over_cap.values()):,} bytes are over "
            f"the weight-folding cap (WEIGHT_FOLD_MAX_BYTES = {WEIGHT_FOLD_MAX_BYTES:,}, and "
            f"what max_memory leaves beside the weights): computed at every run instead of "
            f"once at load ({names}{more})", FoldingCapWarning, stacklevel=4)


def _body_reads(onnx, nodes):
    """Names the bodies of ``nodes`` (If / Loop / Scan subgraphs) read."""
    out = set()
    graphs = [a.g for n in nodes for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    graphs += [g for n in nodes for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS
               for g in a.graphs]
    while graphs:
        g = graphs.pop()
        for m in g.node:
            out.update(i for i in m.input if i)
            graphs.extend(a.g for a in m.attribute if a.type == onnx.AttributeProto.GRAPH)
            graphs.extend(x for a in m.attribute if a.type == onnx.AttributeProto.GRAPHS
                          for x in a.graphs)
    return out
