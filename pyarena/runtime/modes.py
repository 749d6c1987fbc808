"""How an :class:`~pyarena.runtime.Executor`'s runs get their memory.

* :class:`PlannedRun` -- the planned mode: every tensor and scratch
  buffer is a view into the plan's arena, bound to the kernels once;
  ``run(feeds)`` copies the feeds into their views and calls the kernels
  (runs of native kernel calls as one C call each, :mod:`.batch`), so
  after the first inference a run allocates nothing.
* :class:`AllocatingRun` -- the two modes kept for comparison: one
  ``alloc(shape, dtype)`` per output and scratch buffer when its operator
  runs, ``free(array)`` after its last reader (a ``pyarena.Pool``), or a
  fresh ``np.empty`` for each and no reuse at all (``free`` None: what
  plain NumPy code does).
"""
import time

import numpy as np

from ..errors import GraphError, InvalidArgumentError, PyArenaError
from .batch import Batch, batch_runs
from .host_values import host_feed

__all__ = ["PlannedRun", "AllocatingRun", "copy_feed"]


def copy_feed(dst, val, name):
    """Copy a feed into its view; InvalidArgumentError naming the input."""
    try:
        val = np.asarray(val)
        if val.dtype.kind == "c" and dst.dtype.kind != "c":
            raise TypeError("complex values would lose their imaginary part")
        np.copyto(dst, val, casting="same_kind")
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"feed {name!r}: {exc} (the input is "
                                   f"{dst.dtype} {list(dst.shape)})") from None


def _kernel_failed(kernel, exc):
    op = getattr(kernel, "op", None)
    where = f"operator {op.name!r} ({op.op_type})" if op is not None else "an operator"
    return GraphError(f"{where} failed at run time ({type(exc).__name__}: "
                      f"{str(exc)[:200]}): the graph's shapes or attributes contradict "
                      f"each other")


def _as_tensor_view(arr, shape, dtype, name):
    """``arr`` (a planned view, maybe raw bytes) seen as ``shape``/``dtype``."""
    dtype = np.dtype(dtype)
    if arr.shape == tuple(shape) and arr.dtype == dtype:
        return arr
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    flat = arr.reshape(-1).view(np.uint8) if arr.flags.c_contiguous else None
    if flat is None or flat.size < nbytes:
        raise GraphError(f"planned view for tensor {name!r} has {arr.nbytes} bytes, "
                         f"{nbytes} needed for shape {list(shape)} {dtype}")
    return flat[:nbytes].view(dtype).reshape(shape)


def _native_call(bound):
    """A bound op as C kernel calls ([(op name, record)]), or None."""
    k, xs, ys, sc = bound
    if sc is None:
        native = getattr(k, "native_calls", None)     # a pool op's PoolOp has none
        recs = None if native is None else native(xs, ys)
    elif hasattr(k, "native_calls_scratch"):     # calls that take its workspace
        recs = k.native_calls_scratch(xs, ys, sc)
    else:               # a call that takes its workspace
        native = getattr(k, "native_call_scratch", None)
        rec = None if native is None else native(xs, ys, sc)
        recs = None if rec is None else [rec]
    return None if recs is None else [(k.op.name, rec) for rec in recs]


class PlannedRun:
    """The kernels of ``graph`` bound to ``views`` (tensor name, and
    ``"<op>::scratch"`` -> array) and ``constants`` (name -> array in the
    weights arena): ``arrays`` (every tensor's view), ``bound`` (kernel,
    input views, output views, scratch view) per op.  ``workers``: the
    native kernels' thread pool, or None; ``pool``: the executor's
    :class:`~pyarena.runtime.dynamic.PoolTensors`."""

    def __init__(self, graph, kernels, constants, views, workers, pool):
        self.graph, self.kernels, self.workers, self.pool = graph, kernels, workers, pool
        self._bind(constants, views)

    def _bind(self, constants, views):
        g = self.graph
        arrays = dict(constants)
        for name, t in g.tensors.items():
            if t.role == "constant" or t.dynamic:   # pool tensors: taken at run time
                continue
            v = views.get(name)
            if v is None:
                used = any(name in op.inputs or name in op.outputs for op in g.ops)
                if not used and t.role != "input":
                    continue
                raise GraphError(f"no planned view for tensor {name!r}")
            arrays[name] = _as_tensor_view(np.asarray(v), t.shape, t.dtype, name)
        bound = []
        for op, k in zip(g.ops, self.kernels):
            xs = [arrays.get(n) if n else None for n in op.inputs]
            ys = [arrays.get(n) for n in op.outputs if n]     # None: a pool tensor
            bound.append((k, xs, ys, self._scratch(views, op, k)))
            k.bind(xs, ys)      # the same views every run: native pointers may be kept
        self.arrays = arrays
        self.bound = bound
        # what run() calls: runs of C kernel calls as one call each
        self.busy = batch_runs([s for s in bound if not s[0].idle], _native_call, self._batch)
        self._outputs = [(n, arrays.get(n)) for n in g.outputs]
        #: inputs held outside the arena (strings...): name -> Tensor, and
        #: their last feeds (kept, as a planned input keeps its view)
        self.host_inputs = {n: g.tensors[n] for n in g.inputs if g.tensors[n].host}
        self._host_fed = {}

    @staticmethod
    def _scratch(views, op, k):
        """The scratch view of ``op`` (bytes), or None if its kernel needs none."""
        if not k.scratch_bytes:
            return None
        s = views.get(f"{op.name}::scratch")
        if s is None:
            raise GraphError(f"no planned scratch buffer for operator {op.name!r}")
        sc = np.asarray(s).reshape(-1).view(np.uint8)
        if sc.size < k.scratch_bytes:
            raise GraphError(f"scratch of {op.name!r} has {sc.size} bytes, "
                             f"{k.scratch_bytes} needed")
        return sc

    def _batch(self, records, names):
        workers = self.workers.handle if self.workers is not None else None
        return (Batch(records, names, workers, "native kernels"), None, None, None)

    def run(self, feeds=None):
        """One inference (see :meth:`pyarena.runtime.Executor.run`)."""
        self._feed(feeds)
        k = None
        pooled = self.pool.live
        self.pool.clear()       # the last run's pool outputs
        if self.host_inputs:
            self._take_host_feeds(pooled)
        try:
            with np.errstate(all="ignore"):
                for k, xs, ys, sc in self.busy:
                    k(xs, ys, sc)
        except (PyArenaError, MemoryError):
            raise
        except Exception as exc:    # a graph whose shapes contradict each other
            raise _kernel_failed(k, exc) from exc
        return {n: pooled[n] if a is None else a for n, a in self._outputs}

    def _feed(self, feeds):
        """The feeds copied into the inputs' planned views (host inputs
        kept as fed)."""
        arrays = self.arrays
        for name, val in (feeds or {}).items():
            dst = arrays.get(name)
            if dst is None and name in self.host_inputs:
                self._host_fed[name] = host_feed(self.host_inputs[name], val, name)
                continue
            if dst is None or self.graph.tensors[name].role != "input":
                raise GraphError(f"feed {name!r} is not a graph input; inputs are "
                                 f"{self.graph.inputs}")
            copy_feed(dst, val, name)

    def _take_host_feeds(self, pooled):
        """The host inputs' feeds among the run's pool tensors."""
        missing = sorted(n for n, t in self.host_inputs.items()
                         if n not in self._host_fed and t.host != "optional")
        if missing:
            raise InvalidArgumentError(f"no feed for input(s) {missing}: an input held "
                                       f"outside the arena (strings...) has no previous value")
        for n, t in self.host_inputs.items():
            pooled[n] = self._host_fed.get(n)     # (an optional left unfed: None)

    def profile(self, feeds, repeat):
        """(op, kernel path, median seconds) per op over ``repeat`` timed
        inferences after one warm-up (see :meth:`pyarena.runtime.Executor.profile`)."""
        self.run(feeds)
        times = [[] for _ in self.bound]
        clock = time.perf_counter
        with np.errstate(all="ignore"):
            for _ in range(int(repeat)):
                # afresh each time: the plan may give an input's memory to
                # a later tensor once it is read (untimed)
                self._feed(feeds)
                for i, (k, xs, ys, sc) in enumerate(self.bound):
                    t0 = clock()
                    k(xs, ys, sc)
                    times[i].append(clock() - t0)
        return [(op, k.path, float(np.median(t)))
                for op, k, t in zip(self.graph.ops, self.kernels, times)]


class AllocatingRun:
    """Runs of ``graph``'s ``kernels`` with every activation and scratch
    buffer allocated when made: ``allocator`` is ``"numpy"`` (``np.empty``,
    nothing freed) or ``(alloc, free)``.  ``last_peak_bytes`` /
    ``last_allocations``: the bytes held at the worst moment of the last
    run and the buffers it allocated."""

    def __init__(self, graph, kernels, constants, allocator):
        self.graph, self.kernels, self.constants = graph, kernels, constants
        if allocator == "numpy":
            self._alloc, self._free = np.empty, None
        else:
            self._alloc, self._free = allocator
        self._frees = self._last_reads()

    def _last_reads(self):
        """Per op: the activations and inputs it is the last to read (not
        graph outputs): freed after it."""
        g = self.graph
        last = {}
        for i, op in enumerate(g.ops):
            for n in op.inputs:
                if n:
                    last[n] = i
        outs = set(g.outputs)
        frees = [[] for _ in g.ops]
        for n, i in last.items():
            if g.tensors[n].role in ("activation", "input") and n not in outs:
                frees[i].append(n)
        return frees

    def run(self, feeds=None):
        """One inference; the outputs are the arrays allocated for them."""
        try:
            return self._run_bound(feeds or {})
        except (PyArenaError, MemoryError):
            raise
        except Exception as exc:
            raise _kernel_failed(None, exc) from exc

    def _run_bound(self, feeds):
        g = self.graph
        alloc, free = self._alloc, self._free
        live = dict(self.constants)
        held = 0        # bytes of activations + scratch held right now
        peak = 0
        count = 0
        for name in g.inputs:
            t = g.tensors[name]
            a = alloc(t.shape, t.dtype)
            count += 1
            held += a.nbytes
            if name in feeds:
                copy_feed(a, feeds[name], name)
            live[name] = a
        peak = held
        with np.errstate(all="ignore"):
            for i, (op, k) in enumerate(zip(g.ops, self.kernels)):
                xs = [live.get(n) if n else None for n in op.inputs]
                ys = []
                for n in op.outputs:
                    if n:
                        t = g.tensors[n]
                        a = alloc(t.shape, t.dtype)
                        held += a.nbytes
                        count += 1
                        live[n] = a
                        ys.append(a)
                sc = None
                if k.scratch_bytes:
                    sc = alloc((k.scratch_bytes,), np.uint8)
                    held += sc.nbytes
                    count += 1
                peak = max(peak, held)
                k(xs, ys, sc)
                if free is not None:
                    if sc is not None:
                        held -= sc.nbytes
                        free(sc)
                    del xs, ys, sc
                    for n in self._frees[i]:
                        a = live.pop(n)
                        held -= a.nbytes
                        free(a)
        self.last_peak_bytes = peak
        self.last_allocations = count
        return {n: live[n] for n in g.outputs}
