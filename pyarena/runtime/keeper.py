"""Where a graph's kernels keep what they lay out, and kernels built once.

A kernel's setup may lay out weights of its own (a convolution's packed
filter): :class:`WeightKeeper` puts such an array in the weights arena,
takes an equal one an earlier executor over the same arena kept instead
(``weights_memo``), and lets the graph constant the array copies share the
arena copy (one copy of each weight).  An :class:`~pyarena.runtime.Executor`
keeps its kernels' weights through one.

:func:`build_kernels` builds a graph's kernels before it is planned and
sets each op's ``scratch_bytes`` from them; an Executor given the result
(``Executor(kernels=...)``) runs those same kernels instead of building
them again, except where the plan changed an op's scratch budget (the slack
planner narrows some).  One build per kernel instead of two (one for the
scratch size, one to run): what an :class:`~pyarena.InferenceSession`
does for a new input-shape signature.  :func:`executor_kernels` is the
executor's own build: those kernels where they fit, the rest built anew.
"""
import numpy as np

from ..errors import GraphError, ModelImportError, UnsupportedOpError
from ..memory.mapped import read_in_place, release_pages
from .dynamic import PoolOp, pool_frees
from .kernels import make_kernel
from .kernels.registry import kernel_budget
from .tied import note_tied_weights

__all__ = ["WeightKeeper", "Prepared", "build_kernels", "build_op", "refuse_unsupported",
           "executor_kernels"]


def _data_key(arr):
    """(address, bytes, dtype): the same bytes seen through another array."""
    return arr.__array_interface__["data"][0], arr.nbytes, arr.dtype.str


def _digest(arr):
    """A key of ``arr``'s (C-contiguous) content: shape, dtype and a sample
    of 64 values spread over it.  Not a hash of every byte (that pass cost
    more than packing the weights again): arrays of one key are told apart
    by comparing them whole (:meth:`WeightKeeper.kept_before`)."""
    flat = arr.reshape(-1).view(np.uint8)
    step = max(1, flat.size // 64)
    return arr.shape, arr.dtype.str, flat[::step][:64].tobytes()


def share(t, copy):
    """Constant ``t`` gives its file pages back and takes a read-only view
    of ``copy`` (its copy in the weights arena) as its data."""
    release_pages(t.data)
    shared = copy.reshape(t.shape).view()
    shared.flags.writeable = False
    t.data = shared


class WeightKeeper:
    """``keep(arr)`` for the kernels of ``graph``: see the module docstring.
    ``memo``: a dict shared by the keepers of one model over ``weights``
    (a key -> the arrays kept under it).

    A compiled model's layouts: ``journal`` (a list) records every array
    kept, in the order the kernels keep them (``pyarena.compile`` stores
    them); ``layouts`` (those arrays, read back from the file) are handed
    out again in that order instead of being stored -- by :meth:`keep`
    when the array given has the same shape, dtype and sampled content,
    by :meth:`stored_layout` (a packing not computed at all) when the next
    one has the shape and dtype asked.  The first that differs (the build
    went another way) ends the replay: what follows is laid out afresh."""

    def __init__(self, graph, weights, memo=None, layouts=None):
        self.graph, self.weights, self.memo = graph, weights, memo
        self._sources = None        # made when first needed (most keeps are shared)
        self.journal = None
        if layouts is None:         # a compiled model's graph brings its own
            layouts = getattr(graph, "stored_layouts", None)
        self._layouts, self._next = (None if layouts is None else list(layouts)), 0
        self._stored_count = 0 if layouts is None else len(self._layouts)
        self._pending = None        # (mark, address, bytes, arena used) of empty()'s block

    def empty(self, n, dtype):
        """``n`` elements of ``dtype`` in the weights arena, for a kernel's
        setup to compute a layout into and then :meth:`keep` (no temporary
        built and copied).  With a memo, the block stays the arena's last
        one until it is kept: if an earlier executor kept the same bytes,
        :meth:`keep` gives it back (the arena rewound to before it) and
        hands out that copy instead."""
        if self.memo is None:
            return self.weights.empty((n,), dtype)
        self._settle_pending()
        mark = self.weights.mark()
        arr = self.weights.empty((n,), dtype)
        self._pending = (mark, arr.__array_interface__["data"][0], arr.nbytes,
                         self.weights.stats().used)
        return arr

    def _settle_pending(self):
        """empty()'s block kept as it is (no longer given back)."""
        if self._pending is not None:
            self.weights.forget(self._pending[0])
            self._pending = None

    def _keep_pending(self, arr):
        """``arr`` (empty()'s block, filled) kept: the memo's equal copy
        when an earlier executor kept one (the block given back if nothing
        was taken from the arena after it), else ``arr``, noted in the memo."""
        mark, _, _, used = self._pending
        self._pending = None
        key = _digest(arr)
        found = self.kept_before(arr, key)
        if found is None:
            self.weights.forget(mark)
            self.memo.setdefault(key, []).append(arr)
            return arr
        if self.weights.stats().used == used:
            del arr     # (the caller drops its own reference as this returns)
            self.weights.rewind(mark, force=True)
        else:
            self.weights.forget(mark)
        return found

    def _is_pending(self, arr):
        p = self._pending
        return p is not None and arr.nbytes == p[2] and \
            arr.__array_interface__["data"][0] == p[1]

    def keep(self, arr):
        """A kernel's setup keeps ``arr`` (weights in its own layout) in the
        weights arena.  When ``arr`` holds exactly a graph constant's bytes
        (a reshape of it), the constant then shares the arena copy, so the
        weight is held once, not as the graph's array plus the kernel's."""
        src = np.asarray(arr)
        arr = np.ascontiguousarray(src).reshape(src.shape)   # a 0-d value stays 0-d
        stored = self._stored(arr.shape, arr.dtype, arr)
        if stored is not None:
            return self._noted(stored)
        if self._is_pending(arr):
            return self._noted(self._keep_pending(arr))
        if self.weights.owns(arr) or read_in_place(arr):   # in the weights arena, or a
            return self._noted(arr)   # compiled model's constant read where it lies
        key = _digest(arr) if self.memo is not None else None
        kept = self.kept_before(arr, key)
        if kept is not None:    # the keeper that stored it shared its graph's constant,
            return self._noted(kept)    # which a session's next graphs read as they are
        kept = self.weights.asarray(arr)
        if key is not None:
            self.memo.setdefault(key, []).append(kept)
        if self._sources is None:
            self._sources = self._constant_sources()
        t = self._sources.pop(_data_key(arr), None) if arr.nbytes else None
        if t is not None and t.data is not None and not self.weights.owns(t.data):
            share(t, kept)
        return self._noted(kept)

    def stored_layout(self, shape, dtype):
        """The next stored layout (a compiled model's) when it is ``shape``
        of ``dtype``, else None (the caller lays it out and keeps it)."""
        stored = self._stored(tuple(shape), np.dtype(dtype), None)
        return None if stored is None else self._noted(stored)

    def _stored(self, shape, dtype, arr):
        layouts = self._layouts
        if layouts is None:
            return None
        v = layouts[self._next] if self._next < len(layouts) else None
        if v is None or v.shape != shape or v.dtype != dtype or \
                (arr is not None and _digest(v) != _digest(arr)):
            self._layouts = None        # the build went another way: afresh from here
            return None
        self._next += 1
        return v

    def _noted(self, kept):
        if self.journal is not None:
            self.journal.append(kept)
        return kept

    @property
    def replayed(self):
        """Stored layouts handed out so far (those of a compiled model)."""
        return self._next

    def kept_before(self, arr, key=None):
        """The same bytes kept by a keeper sharing ``memo``, or None.
        ``key``: ``arr``'s digest when the caller has it."""
        if self.memo is None:
            return None
        for prev in self.memo.get(_digest(arr) if key is None else key, ()):
            if np.array_equal(prev, arr):
                return prev
        return None

    def done(self):
        """The kernels are built: no constant is looked up any more.
        ModelImportError when the graph needed every stored layout
        (``graph.layouts_required``: a compiled model without the constants
        they are made of) and the kernels took fewer."""
        self._sources = {}
        self._settle_pending()
        if getattr(self.graph, "layouts_required", False) and \
                (self._layouts is None or self._next < self._stored_count):
            raise ModelImportError(
                f"{self.graph.name}: the compiled model holds its kernels' layouts but not "
                f"the weights they are made of, and this pyarena's kernels took "
                f"{self._next if self._layouts is not None else 'not all'} of its "
                f"{self._stored_count}: compile the model again with this pyarena")

    def _constant_sources(self):
        """(address, bytes, dtype) -> constant tensor, for ``keep`` (which
        skips one already in the weights arena: asked only on a match)."""
        out = {}
        for t in self.graph.tensors.values():
            d = t.data
            if t.role != "constant" or not isinstance(d, np.ndarray):
                continue
            if d.flags.c_contiguous and d.dtype == np.dtype(t.dtype):
                out[_data_key(d)] = t
        return out


class Prepared:
    """Kernels built by :func:`build_kernels`: ``keeper`` and ``kernels``
    (one per op of ``graph``), handed to one Executor (then None)."""

    def __init__(self, graph, keeper, kernels):
        self.graph, self.keeper, self.kernels = graph, keeper, kernels

    def take(self, graph, i, op):
        """The kernel built for ``op`` (index ``i``) if it still fits the op
        (the same op object and scratch budget), else None."""
        if self.kernels is None or graph is not self.graph:
            return None
        k = self.kernels[i]
        if k.op is not op or k.scratch_budget != kernel_budget(op, graph.scratch_budget):
            return None
        return k


def build_kernels(graph, weights, memo=None, prior=None, layouts=None, journal=None):
    """A :class:`Prepared` of one kernel per op of ``graph`` (a graph
    without pool tensors), their weights kept in ``weights``; every op's
    ``scratch_bytes`` set from its kernel.  UnsupportedOpError naming every
    op the executor cannot run (:func:`refuse_unsupported`).  ``prior``:
    the kernels of a graph with the same ops at other shapes (the last
    signature's, over the same ``weights``), which a kernel's setup may
    take its weights from
    (:attr:`~pyarena.runtime.kernels.Kernel.prior`; an op of another name
    at that place gets none).  ``layouts`` / ``journal``: a compiled
    model's stored layouts to hand out, a list recording what is kept
    (:class:`WeightKeeper`)."""
    note_tied_weights(graph)
    keeper = WeightKeeper(graph, weights, memo, layouts)
    keeper.journal = journal
    kernels, bad = [], []
    prior = list(prior or ())
    for i, op in enumerate(graph.ops):
        p = prior[i] if i < len(prior) else None
        k = build_op(graph, op, keeper.keep, bad,
                     prior=p if p is not None and p.op.name == op.name else None)
        if k is not None:
            op.scratch_bytes = k.scratch_bytes
            op.notes.state_bytes = k.state_bytes
            kernels.append(k)
    refuse_unsupported(bad)
    if getattr(graph, "layouts_required", False):
        keeper.done()       # (every stored layout taken, or a clear error now)
    return Prepared(graph, keeper, kernels)


def executor_kernels(graph, keep, pool, prepared=None, allocator=None):
    """An executor's kernels, one per op of ``graph`` (weights through
    ``keep``): ``prepared``'s (a :class:`Prepared`) where they still fit,
    the others built; a pool op's a PoolOp taking its tensors from
    ``pool`` (:class:`~pyarena.runtime.dynamic.PoolTensors`), its kernel
    built per input signature at run time.  Reports every unsupported op
    at once; GraphError for pool tensors with an ``allocator`` mode, or a
    kernel needing more scratch than its op declares."""
    kernels, bad = [], []
    if prepared is None:
        note_tied_weights(graph)
    pool_ops = graph.pool_ops()
    if pool_ops and allocator is not None:
        raise GraphError("a graph with pool tensors (sizes that depend on data) runs "
                         "in the planned mode only, not with allocator=")
    frees = pool_frees(graph)
    for i, op in enumerate(graph.ops):
        k = prepared.take(graph, i, op) if prepared is not None else None
        if k is None:
            make = None if op.name not in pool_ops else (
                lambda op=op: PoolOp(graph, op, keep, pool.pool(), pool.live,
                                       frees.get(op.name, ())))
            k = build_op(graph, op, keep, bad, make)
        if k is not None:
            kernels.append(k)
    refuse_unsupported(bad)
    if prepared is not None:
        prepared.kernels = None     # bound by this executor: never handed on
    for op, k in zip(graph.ops, kernels):
        if k.scratch_bytes > op.scratch_bytes:
            raise GraphError(
                f"operator {op.name!r} needs {k.scratch_bytes} scratch bytes but the "
                f"graph declares {op.scratch_bytes}; fill Op.scratch_bytes with "
                f"pyarena.runtime.kernels.set_scratch(graph) before planning")
    return kernels


def build_op(graph, op, keep, bad, make=None, prior=None):
    """The kernel of ``op`` in ``graph`` (its weights through ``keep``; the
    graph's scratch budget and native setting; ``prior`` as for
    :func:`build_kernels`), or ``make()`` when given (a kernel built
    another way); None, with the reason appended to ``bad``, when the
    executor cannot run it."""
    try:
        if make is not None:
            return make()
        tensors = graph.tensors
        ins = [tensors[t] if t else None for t in op.inputs]
        k = make_kernel(op, ins, [tensors[t] for t in op.outputs if t], keep=keep,
                        scratch_budget=graph.scratch_budget,
                        native=getattr(graph, "native", True), prior=prior)
    except UnsupportedOpError as exc:
        bad.append(str(exc))
        return None
    if prior is None and k.runtime is not None:
        # what setup alone read of the file goes back now, not once every
        # kernel is built: one layer's weights resident at a time (a kernel
        # with a prior mostly took its weights from it and read nothing)
        for i, t in enumerate(ins):
            if t is not None and i not in k.runtime and t.role == "constant":
                release_pages(t.data)
    return k


def refuse_unsupported(bad):
    """UnsupportedOpError listing the reasons ``bad`` gathered by
    :func:`build_op` (the first ten), if any."""
    if bad:
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise UnsupportedOpError("cannot run this graph: " + "; ".join(bad[:10]) + more)
