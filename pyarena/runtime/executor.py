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

Building one takes named steps, each a function or module of its own:
the graph and a given plan checked against the memory limit, or a plan
made (:func:`_checked_plan`, :func:`~.slack.plan_to_run`); the weights
arena chosen (:meth:`Executor._use_weights`); the kernels built
(:func:`~.keeper.executor_kernels`); their threads started
(:func:`_start_workers`); the constants placed in the weights arena
(:mod:`.placement`); and the memory mode picked (:mod:`.modes`:
:class:`~.modes.PlannedRun` or :class:`~.modes.AllocatingRun`), which
then runs every inference.
"""
from collections.abc import Mapping

import numpy as np

from .._native.kernels import Workers
from ..errors import GraphError, InvalidArgumentError, UnsupportedOpError
from ..memory import Arena
from ..planning import PlanOptions, check_graph_limit, check_plan_limit
from ..planning import validate as validate_plan
from .dynamic import PoolTensors
from .keeper import WeightKeeper, executor_kernels
from .modes import AllocatingRun, PlannedRun
from .placement import place_constants, release_setup_reads
from .slack import plan_to_run

__all__ = ["Executor", "UnsupportedOpError", "random_feeds"]


def _checked_plan(graph, plan, plan_checked, max_memory, plan_options, unplanned):
    """The plan to run: ``plan`` checked against ``graph`` and the memory
    budget (only its budget when ``plan_checked``: see the Executor), or
    one made with ``plan_options`` (None in an ``unplanned`` mode: given
    views or an allocator).  MemoryLimitError before anything is
    allocated; PlanValidationError for a plan that breaks a rule."""
    checked = plan is not None and plan_checked
    if checked:     # the planner validated the graph; weights + arena bound the rest
        budget = check_plan_limit(plan, graph, max_memory, plan.weights_bytes)
    else:
        graph.validate()
        budget = check_graph_limit(graph, max_memory)
    if plan is not None and not checked:
        validate_plan(plan, graph, raise_errors=True)
        check_plan_limit(plan, graph, budget)
    elif plan is None and not unplanned:
        # scratch within the slack at each step (a memory budget fits its own)
        plan = plan_to_run(graph, _plan_options(plan_options, budget))
    return plan


def _plan_options(given, max_memory):
    """The PlanOptions of an executor's own plan: ``given`` (PlanOptions,
    or a dict of :func:`pyarena.plan`'s keywords), with the executor's
    ``max_memory`` unless they set one."""
    if given is None or isinstance(given, Mapping):
        return PlanOptions(**{"max_memory": max_memory, **(given or {})})
    given = PlanOptions.of(given)
    return given if given.max_memory is not None else given.replace(max_memory=max_memory)


def _start_workers(threads, kernels):
    """(threads, their pool or None): one pool for every native kernel
    (row / channel blocks); the kernels keep its raw handle, so the
    executor owns it (closed when the executor goes)."""
    n = 1 if threads is None else int(threads)
    if n < 1:
        raise InvalidArgumentError(f"threads must be >= 1, not {threads!r}")
    workers = Workers(n) if n > 1 else None
    if workers is not None:
        for k in kernels:
            k.workers = workers.handle
    return n, workers


def random_feeds(graph, seed=0):
    """Seeded random arrays for every graph input (normal floats, small
    non-negative ints); a variable's input (``graph.variables``: state a
    TFLite model keeps) its first value, as the model starts."""
    rng = np.random.default_rng(seed)
    firsts = {i: v for i, _, v in getattr(graph, "variables", {}).values() if i is not None}
    feeds = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if firsts.get(name) is not None:
            feeds[name] = np.array(firsts[name])
            continue
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
    ones an earlier executor kept are taken from it, not stored again; ``max_memory`` -- the memory limit
    in bytes (None: the physical memory): a graph or plan whose weights +
    arena exceed it raises MemoryLimitError before anything is allocated.
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
        plan = _checked_plan(graph, plan, plan_checked, max_memory, plan_options,
                             unplanned=views is not None or allocator is not None)
        self.graph = graph
        self._use_weights(weights, kernels, weights_memo)
        before = self.weights.stats().used
        self._pool_tensors = pool = PoolTensors()
        self.pool_stats, self.pooled = pool.stats, pool.live
        self.kernels = executor_kernels(graph, self._keep, pool, kernels, allocator)
        packed = self.weights.stats().used > before
        self.threads, self.workers = _start_workers(threads, self.kernels)
        # what setup alone read goes back first: the constants a kernel
        # reads at run time then join the weights arena, once, slab by slab
        release_setup_reads(graph, packed)
        self.constants = place_constants(graph, self.kernels, self.weights)
        self._keeper.done()
        self._choose_mode(plan, views, allocator)

    def _use_weights(self, weights, kernels, memo):
        """The weights arena (``weights``, else the graph's own, else a new
        one) and the keeper of what the kernels lay out there (``kernels``'
        when given: built over the same arena)."""
        if weights is None:     # the graph's own weights arena, else a new one
            weights = getattr(self.graph, "weights", None)
            self._owns_weights = weights is None
        else:
            self._owns_weights = False
        self.weights = weights if weights is not None else Arena(alignment=64)
        if kernels is not None and kernels.keeper.weights is not self.weights:
            raise InvalidArgumentError("kernels= were built over another weights arena")
        self._keeper = WeightKeeper(self.graph, self.weights, memo) if kernels is None \
            else kernels.keeper
        self._keep = self._keeper.keep

    def _choose_mode(self, plan, views, allocator):
        """``mode`` "dynamic" (an ``allocator``) or "plan": the kernels bound
        to ``views``, else to the plan's own arena (then ``self.plan``)."""
        self.plan = None
        self.host_inputs = {}
        if allocator is not None:
            self.mode = "dynamic"
            self._runner = AllocatingRun(self.graph, self.kernels, self.constants, allocator)
            return
        self.mode = "plan"
        if views is None:
            self.plan = plan
            views = plan.bind()
        self._runner = PlannedRun(self.graph, self.kernels, self.constants, views,
                                  self.workers, self._pool_tensors)
        self.arrays, self.bound = self._runner.arrays, self._runner.bound
        #: the inputs held outside the arena (strings...): fed, not in ``arrays``
        self.host_inputs = self._runner.host_inputs

    @property
    def busy(self):
        """What a planned run calls, in order: (kernel or
        :class:`~.batch.Batch`, input views, output views, scratch) per
        item; None in the allocator modes."""
        return self._runner.busy if self.mode == "plan" else None

    # -- what it holds --------------------------------------------------------
    @property
    def weights_bytes(self):
        return self.weights.stats().used

    @property
    def kernel_state_bytes(self):
        """Bytes the kernels laid out beyond the constants they read
        (:attr:`~pyarena.runtime.kernels.Kernel.state_bytes`: packed weights
        of every band geometry of a patched stage, tables), counted from
        what their setups kept: what ``plan.budget["kernel_state_bytes"]``
        predicts for a plan made under a memory budget."""
        return sum(getattr(k, "state_bytes", 0) for k in self.kernels)

    @property
    def last_peak_bytes(self):
        """Allocator modes: the bytes held at the worst moment of the last run."""
        return self._runner.last_peak_bytes

    @property
    def last_allocations(self):
        """Allocator modes: the buffers the last run allocated."""
        return self._runner.last_allocations

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

    # -- running --------------------------------------------------------------
    def run(self, feeds=None):
        """One inference.  ``feeds``: dict input name -> array (converted to
        the input's dtype; missing inputs keep their previous content).
        Returns a dict output name -> array (views into the plan's arena:
        valid until the next run).  One run at a time: every run writes
        the same arena, so threads need an executor each (an
        InferenceSession keeps one per thread)."""
        return self._runner.run(feeds)

    def profile(self, feeds=None, repeat=5):
        """Where the time goes: one warm-up inference, then ``repeat``
        inferences with every operator timed where it runs (planned mode
        only), each fed ``feeds`` afresh (None: :func:`random_feeds`).  Returns a list of (op, kernel path, median seconds) in
        execution order; the path is "native", "numpy" or Conv's mode
        (see Kernel.path)."""
        if self.mode != "plan":
            raise GraphError("profile() needs the planned executor, not "
                             f"allocator mode {self.mode!r}")
        if feeds is None:   # (a run leaves no inputs to time again: the plan
            feeds = random_feeds(self.graph)    # may give their memory away)
        if int(repeat) < 1:
            raise InvalidArgumentError(f"repeat must be >= 1, not {repeat!r}")
        return self._runner.profile(feeds, repeat)
