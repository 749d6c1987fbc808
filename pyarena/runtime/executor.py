"""Run a planned graph op by op with NumPy, every tensor in planned memory.

``Executor(graph)`` plans the graph (:func:`pyarena.plan`), binds every
activation, graph input/output and operator scratch buffer as a view into
one aligned arena (``plan.bind()``), copies the weights into a
:class:`pyarena.Arena`, and builds one kernel per operator
(:mod:`pyarena.runtime.kernels`).  ``run(feeds)`` copies the feeds into their planned
views, runs the kernels, each writing into its planned output view, and
returns the graph outputs as views into the arena (copy them if you keep
them across inferences).  A Concat whose inputs the plan placed in their
slices of its output (:mod:`pyarena.planning.concat`) copies only the
others: with all of them in place it is not called at all.  After the first inference a run performs no NumPy
data allocation at all.

Two other memory modes exist for comparison (the demo and benchmarks):

* ``Executor(graph, allocator="numpy")`` -- one fresh ``np.empty`` per
  tensor and scratch buffer, every inference, none reused (what plain NumPy
  code does).
* ``Executor(graph, allocator=(alloc, free))`` -- dynamic allocation: each
  output and scratch buffer is ``alloc(shape, dtype)``-ed when its operator
  runs and ``free(array)``-d after its last reader (e.g. a ``pyarena.Pool``).

In those modes ``last_peak_bytes`` / ``last_allocations`` tell the bytes
held at the worst moment of the last inference and how many buffers it
allocated.

Unsupported operators are reported together, by name, when the executor is
built -- nothing is skipped silently.
"""
import time
from collections.abc import Mapping

import numpy as np

from .._native.kernels import Workers
from ..errors import GraphError, InvalidArgumentError, PyArenaError, UnsupportedOpError
from ..memory import Arena
from ..memory.heap import trim_heap
from ..memory.mapped import release_files, release_pages
from ..planning import PlanOptions, check_graph_budget, check_plan_budget
from ..planning import validate as validate_plan
from .slack import plan_to_run
from .batch import Batch, batch_runs
from .dynamic import PoolStats, PoolStep, _Counted, pool_frees
from .keeper import WeightKeeper, build_op, refuse_unsupported, share as _share

__all__ = ["Executor", "UnsupportedOpError", "random_feeds"]


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


def _feed(dst, val, name):
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


def _native_step(step):
    """A bound step as one C kernel call ([(op name, record)]), or None."""
    k, xs, ys, sc = step
    native = getattr(k, "native_step", None)      # a pool op's PoolStep has none
    rec = None if sc is not None or native is None else native(xs, ys)
    return None if rec is None else [(k.op.name, rec)]


def _plan_options(given, max_memory):
    """The PlanOptions of an executor's own plan: ``given`` (PlanOptions,
    or a dict of :func:`pyarena.plan`'s keywords), with the executor's
    ``max_memory`` unless they set one."""
    if given is None or isinstance(given, Mapping):
        return PlanOptions(**{"max_memory": max_memory, **(given or {})})
    given = PlanOptions.of(given)
    return given if given.max_memory is not None else given.replace(max_memory=max_memory)


def random_feeds(graph, seed=0):
    """Seeded random arrays for every graph input (normal floats, small
    non-negative ints)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        dt = np.dtype(t.dtype)
        if dt == np.float32:     # drawn as float32: no float64 temporary
            feeds[name] = rng.standard_normal(t.shape, dtype=np.float32)
        elif dt.kind == "f":
            feeds[name] = rng.standard_normal(t.shape).astype(dt)
        elif dt.kind in "iu":
            feeds[name] = rng.integers(0, 2, size=t.shape).astype(dt)
        else:
            feeds[name] = rng.integers(0, 2, size=t.shape).astype(dt)
    return feeds


class Executor:
    """Executes ``graph`` with NumPy kernels.

    Parameters: ``plan`` -- a plan from :func:`pyarena.plan.plan` (made with
    ``plan_options``, a :class:`~pyarena.planning.PlanOptions` or a dict of
    its fields, if omitted: see :func:`~pyarena.runtime.slack.plan_to_run`);
    ``threads`` -- threads the native
    kernels run on (row or channel blocks; None or 1: the calling thread
    only); ``views`` -- a dict tensor name (and
    ``"<op>::scratch"``) -> array to use instead of ``plan.bind()`` (tests
    forge these); ``allocator`` -- ``"numpy"`` or ``(alloc, free)`` for the
    unplanned comparison modes; ``weights`` -- the :class:`Arena` to put the
    constants in (a new one by default); ``weights_memo`` -- a dict shared by
    executors of one model over the same ``weights`` arena (another input
    shape): weights a kernel lays out (packs) that equal, byte for byte,
    ones an earlier executor kept are taken from it, not stored again; ``max_memory`` -- the memory budget
    in bytes (None: the physical memory): a graph or plan whose weights +
    arena exceed it raises MemoryBudgetError before anything is allocated.
    A ``plan`` given is validated against ``graph`` first
    (PlanValidationError naming every problem), unless ``plan_checked``:
    the caller has just made it from this graph, unchanged since, with
    the planner (InferenceSession does, for each new input shape): the
    graph is not validated again either, and its budget check is the
    plan's (weights + arena, which holds the largest tensor).
    ``kernels``: a :class:`~pyarena.runtime.keeper.Prepared` from
    ``build_kernels(graph, weights, weights_memo)`` (which set the ops'
    scratch sizes): its kernels run here instead of being built again,
    except an op's whose scratch budget the plan changed.
    """

    def __init__(self, graph, plan=None, *, views=None, allocator=None, weights=None,
                 plan_options=None, max_memory=None, threads=None, weights_memo=None,
                 plan_checked=False, kernels=None):
        checked = plan is not None and plan_checked
        if checked:     # the planner validated the graph; weights + arena bound the rest
            budget = check_plan_budget(plan, graph, max_memory, plan.weights_bytes)
        else:
            graph.validate()
            budget = check_graph_budget(graph, max_memory)
        if plan is not None and not checked:
            validate_plan(plan, graph, raise_errors=True)
            check_plan_budget(plan, graph, budget)
        elif views is None and allocator is None:
            # scratch within the slack at each step (a memory budget fits its own)
            plan = plan_to_run(graph, _plan_options(plan_options, budget))
        self.graph = graph
        if weights is None:     # the graph's own weights arena, else a new one
            weights = getattr(graph, "weights", None)
            self._owns_weights = weights is None
        else:
            self._owns_weights = False
        self.weights = weights if weights is not None else Arena(alignment=64)
        if kernels is not None and kernels.keeper.weights is not self.weights:
            raise InvalidArgumentError("kernels= were built over another weights arena")
        self._keeper = WeightKeeper(graph, self.weights, weights_memo) if kernels is None \
            else kernels.keeper
        self._keep = self._keeper.keep
        before = self.weights.stats().used
        self.kernels = kernels = self._make_kernels(graph, allocator, kernels)
        packed = self.weights.stats().used > before
        # -- threads of the native kernels (row / channel blocks) ----------------
        self.threads = 1 if threads is None else int(threads)
        if self.threads < 1:
            raise InvalidArgumentError(f"threads must be >= 1, not {threads!r}")
        # one pool for every kernel; the kernels keep its raw handle, so the
        # Executor owns it (closed when the Executor goes)
        self.workers = Workers(self.threads) if self.threads > 1 else None
        if self.workers is not None:
            for k in kernels:
                k.workers = self.workers.handle
        # -- constants: those a kernel reads at run time go to the weights
        # arena, once; the graph's tensor then shares that copy, and a
        # weight still in its model file gives its pages back
        self.constants = {}
        for op, k in zip(graph.ops, kernels):
            for i, name in enumerate(op.inputs):
                if not name or graph.tensors[name].role != "constant":
                    continue
                if k.runtime is not None and i not in k.runtime:
                    continue
                if name not in self.constants:
                    self.constants[name] = self._place(graph.tensors[name])
        # what kernel setup read of the files (setup-only weights) goes back,
        # and, if it laid weights out, the heap its temporaries used (weights
        # folded and re-laid out before they were packed; not when every
        # kernel took its prior's: the next signature would fault it back)
        release_files(t.data for t in graph.tensors.values() if t.role == "constant")
        if packed:
            trim_heap()
        self._keeper.done()
        self.plan = None
        self.mode = "plan"
        if allocator is not None:
            self.mode = "dynamic"
            if allocator == "numpy":
                self._alloc, self._free = np.empty, None
            else:
                self._alloc, self._free = allocator
            self._setup_dynamic()
            return
        if views is None:
            self.plan = plan
            views = plan.bind()
        self._bind(views)

    # -- helpers ------------------------------------------------------------
    def _make_kernels(self, graph, allocator, prepared=None):
        """One kernel per op (a pool op's built per input signature at run
        time; ``prepared``'s where they still fit); reports every
        unsupported op at once."""
        kernels, bad = [], []
        pool_ops = graph.pool_ops()
        if pool_ops and allocator is not None:
            raise GraphError("a graph with pool tensors (sizes that depend on data) runs "
                             "in the planned mode only, not with allocator=")
        self.pool_stats = PoolStats()
        self.pooled = {}        # the run's pool tensors, by name
        frees = pool_frees(graph)
        for i, op in enumerate(graph.ops):
            k = prepared.take(graph, i, op) if prepared is not None else None
            if k is None:
                pool = None if op.name not in pool_ops else (
                    lambda op=op: PoolStep(graph, op, self._keep, self._pool(), self.pooled,
                                           frees.get(op.name, ())))
                k = build_op(graph, op, self._keep, bad, pool)
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

    def _pool(self):
        """The Pool that serves pool tensors (made on first use), counted."""
        if getattr(self, "_pool_counted", None) is None:
            from ..memory import Pool
            self._pool_counted = _Counted(Pool(), self.pool_stats)
        return self._pool_counted

    def _place(self, t):
        """Constant tensor ``t`` in the weights arena; ``t.data`` becomes a
        read-only view of that copy (one copy of each weight, not two)."""
        if t.data is None:
            raise GraphError(f"constant tensor {t.name!r} has no data")
        src = np.asarray(t.data)
        if self.weights.owns(src) and src.dtype == t.dtype and src.flags.c_contiguous:
            return src.reshape(t.shape)
        arr = self.weights.asarray(src.astype(t.dtype, copy=False).reshape(t.shape))
        _share(t, arr)
        return arr

    @property
    def weights_bytes(self):
        return self.weights.stats().used

    def memory_info(self):
        """What this executor holds and what the process has resident:
        ``weights_bytes`` (its weights arena), ``weights_by_dtype`` (the
        graph's constants held there), ``weights_mapped_bytes`` (constants
        still read from the model file), ``arena_bytes`` (the planned
        activation arena; 0 in the unplanned modes), ``resident_bytes`` and
        ``peak_resident_bytes`` (the whole process, now and at its peak;
        see :mod:`pyarena.runtime.footprint`), ``pool_bytes`` /
        ``pool_allocations`` (the pool tensors of the last run: peak bytes
        held and buffers taken, :mod:`pyarena.runtime.dynamic`)."""
        from .footprint import resident, weights_info
        w = weights_info(self)
        now, peak = resident()
        return {"weights_bytes": w["arena"], "weights_by_dtype": w["by_dtype"],
                "weights_mapped_bytes": w["mapped"],
                "arena_bytes": self.plan.arena_bytes if self.plan is not None else 0,
                "pool_bytes": self.pool_stats.peak,
                "pool_allocations": self.pool_stats.allocations,
                "resident_bytes": now, "peak_resident_bytes": peak}

    def _bind(self, views):
        g = self.graph
        arrays = dict(self.constants)
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
        steps = []
        for op, k in zip(g.ops, self.kernels):
            xs = [arrays.get(n) if n else None for n in op.inputs]
            ys = [arrays.get(n) for n in op.outputs if n]     # None: a pool tensor
            sc = None
            if k.scratch_bytes:
                s = views.get(f"{op.name}::scratch")
                if s is None:
                    raise GraphError(f"no planned scratch buffer for operator {op.name!r}")
                sc = np.asarray(s).reshape(-1).view(np.uint8)
                if sc.size < k.scratch_bytes:
                    raise GraphError(f"scratch of {op.name!r} has {sc.size} bytes, "
                                     f"{k.scratch_bytes} needed")
            steps.append((k, xs, ys, sc))
            k.bind(xs, ys)      # the same views every run: native pointers may be kept
        self.arrays = arrays
        self.steps = steps
        # what run() calls: runs of C kernel calls as one call each
        self._busy = batch_runs([s for s in steps if not s[0].idle], _native_step, self._batch)
        self._inputs = [(n, arrays[n]) for n in g.inputs]
        self._outputs = [(n, arrays.get(n)) for n in g.outputs]

    def _batch(self, records, names):
        workers = self.workers.handle if self.workers is not None else None
        return (Batch(records, names, workers, "native kernels"), None, None, None)

    def _setup_dynamic(self):
        g = self.graph
        last = {}
        for i, op in enumerate(g.ops):
            for n in op.inputs:
                if n:
                    last[n] = i
        outs = set(g.outputs)
        self._frees = [[] for _ in g.ops]
        for n, i in last.items():
            if g.tensors[n].role in ("activation", "input") and n not in outs:
                self._frees[i].append(n)

    # -- running --------------------------------------------------------------
    def run(self, feeds=None):
        """One inference.  ``feeds``: dict input name -> array (converted to
        the input's dtype; missing inputs keep their previous content).
        Returns a dict output name -> array (views into the plan's arena:
        valid until the next run)."""
        if self.mode == "dynamic":
            return self._run_dynamic(feeds or {})
        arrays = self.arrays
        if feeds:
            for name, val in feeds.items():
                dst = arrays.get(name)
                if dst is None or self.graph.tensors[name].role != "input":
                    raise GraphError(f"feed {name!r} is not a graph input; inputs are "
                                     f"{self.graph.inputs}")
                _feed(dst, val, name)
        k = None
        if self.pooled or self.pool_stats.bytes:    # the last run's pool outputs
            self.pooled.clear()
            self.pool_stats.reset()
        try:
            with np.errstate(all="ignore"):
                for k, xs, ys, sc in self._busy:
                    k(xs, ys, sc)
        except (PyArenaError, MemoryError):
            raise
        except Exception as exc:    # a graph whose shapes contradict each other
            raise _kernel_failed(k, exc) from exc
        return {n: self.pooled[n] if a is None else a for n, a in self._outputs}

    def profile(self, feeds=None, repeat=5):
        """Where the time goes: one warm-up inference, then ``repeat``
        inferences with every operator timed where it runs (planned mode
        only).  Returns a list of (op, kernel path, median seconds) in
        execution order; the path is "native", "numpy" or Conv's mode
        (see Kernel.path)."""
        if self.mode != "plan":
            raise GraphError("profile() needs the planned executor, not "
                             f"allocator mode {self.mode!r}")
        if int(repeat) < 1:
            raise InvalidArgumentError(f"repeat must be >= 1, not {repeat!r}")
        self.run(feeds)
        times = [[] for _ in self.steps]
        clock = time.perf_counter
        with np.errstate(all="ignore"):
            for _ in range(int(repeat)):
                for i, (k, xs, ys, sc) in enumerate(self.steps):
                    t0 = clock()
                    k(xs, ys, sc)
                    times[i].append(clock() - t0)
        return [(op, k.path, float(np.median(t)))
                for op, k, t in zip(self.graph.ops, self.kernels, times)]

    def _run_dynamic(self, feeds):
        try:
            return self._run_dynamic_steps(feeds)
        except (PyArenaError, MemoryError):
            raise
        except Exception as exc:
            raise _kernel_failed(None, exc) from exc

    def _run_dynamic_steps(self, feeds):
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
                _feed(a, feeds[name], name)
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
