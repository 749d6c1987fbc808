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

Folding never amplifies: a node is folded when its output is known (from
shape inference, or from its inputs for ConstantOfShape) to hold at most
``FOLD_MAX_BYTES`` (shape arithmetic) or at most ``FOLD_GROWTH`` times the
constant bytes it reads (a weight transposed, cast or dequantized).  A
constant-producing node that would be larger (a ConstantOfShape of
8192 x 8192 from a 16-byte shape, a Tile or Expand of a small constant)
stays a run-time op whose output is planned like any tensor.
"""
import math

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import stable_toposort
from ..runtime.kernels import op_fact
from .onnx_contrib import runs_in_domain
from .onnx_control import take_branch
from .onnx_fold import FOLD_MAX_BYTES, _fold_node

__all__ = ["FOLD_GROWTH", "ConstantFolding"]

#: ... or this many times the bytes of the constants it reads
FOLD_GROWTH = 8


def _fold_kind(op_type):
    """How the importer folds ``op_type`` on constant inputs (its kernel's
    ``fold``; an op nothing declares: "capped")."""
    return op_fact(op_type, "fold") or "capped"


def _stored_nbytes(v):
    """Bytes ``v`` really holds: a broadcast (stride 0) axis costs nothing."""
    v = np.asarray(v)
    return v.itemsize * math.prod(d for d, st in zip(v.shape, v.strides) if st)


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
                if res is None:
                    res = _fold_node(onnx, n, vals, imp.shapes, imp.opset) if ok else None
            except (ModelImportError, UnsupportedOpError):
                raise
            except Exception as exc:    # attributes or inputs that do not go together
                raise ModelImportError(
                    f"operator {n.name!r} ({n.op_type}): cannot be evaluated from its "
                    f"constant inputs ({type(exc).__name__}: {str(exc)[:120]})") from None
            if res is not None and kind != "free" and \
                    sum(_stored_nbytes(v) for v in res) > max(
                        FOLD_MAX_BYTES, FOLD_GROWTH * sum(_stored_nbytes(vals[i])
                                                          for i in n.input if i in vals)):
                res = None        # larger than predicted: run it instead
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
        return remaining

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
        cap = max(FOLD_MAX_BYTES, FOLD_GROWTH * read)
        sizes = []
        for o in n.output:
            if not o:
                continue
            shp, et = imp.shapes.get(o), imp.types.get(o)
            if shp is None or et is None or not all(isinstance(d, int) and d >= 0
                                                    for d in shp):
                sizes = None
                break
            try:
                itemsize = np.dtype(imp.onnx.helper.tensor_dtype_to_np_dtype(et)).itemsize
            except Exception:
                itemsize = 8
            sizes.append(math.prod(shp) * itemsize)
        if sizes is not None:
            return sum(sizes) <= cap
        return kind != "expanding"
