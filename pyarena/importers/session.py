"""An ONNX Runtime-style session over a model file, with one plan per
input-shape signature and one activation arena for all of them.

``InferenceSession(path)`` reads the model's inputs and outputs (symbolic
dimensions stay symbolic).  ``run(output_names, feeds)`` binds the feeds'
shapes: the first time a signature is seen the model is imported for it
(shape arithmetic folded on the concrete values, every tensor sized),
planned and bound; later runs of the same signature reuse that plan
without allocating.  Plans are cached least-recently-used
(``max_plans``).  All signatures share

* **one activation arena**, a buffer that grows to the largest plan seen
  (not the sum of the plans): a new larger plan replaces it and the
  cached plans are bound to the new one when next used;
* **one copy of the weights**: every signature's graph reads the first
  signature's constants (views of the model file, or the weights arena),
  so a new signature adds no weight bytes.

**Threads**: ``run`` may be called from several threads at once, as
onnxruntime's ``Run``.  What a signature needs once -- its import, plan and
the kernels' packed weights -- is made once, under a lock, and shared; what
a run writes is each thread's own (:class:`_Context`): its activation block
and the executors bound to it.  So runs of different threads go on at the
same time, and a ``copy=False`` output stays valid until the same thread's
next run; each thread that runs the session holds a block of its own.

``memory_info()`` reports the arena, the largest lower bound, the cached
signatures and the weights.  What cannot run (an unsupported operator, a
dimension no feed fixes) is refused by name when the signature is first
seen.  A signature after the first retargets the last imported graph for
its shapes (:mod:`.retarget`) and builds its kernels once, before the plan
(:func:`pyarena.runtime.keeper.build_kernels`); where that cannot be
done the model is imported again, as for the first.

A 0-d integer or boolean input (a sample rate, a flag) is taken by value:
its value is part of the signature and the model is imported with it
fixed (``load_model(values=...)``), so what is computed from it folds and
an ``If`` on it takes its branch (Silero VAD's ``sr``).  So is an input
found to decide tensor shapes (a fed Reshape target, Resize's scales):
every tensor is then planned for its value (:mod:`.session_keys`).
"""
import gc
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, ModelImportError, PyArenaError, StateError
from ..memory import Arena
from ..memory.huge_pages import huge_page_block
from ..planning import PlanOptions
from ..runtime import Executor, set_blas_threads
from ..runtime.keeper import build_kernels
from ..runtime.slack import plan_to_run
from . import load_model, require_extra, sniff_format
from . import onnx_seqmap
from .import_cache import ImportCache
from .model_bytes import model_path
from .onnx_types import type_string
from .ort_capi import session_settings
from .retarget import Template, retarget_built, retargetable
from .session_buckets import BucketPlans, bucket_policy
from .session_keys import SignatureKeys, value_of
from .session_kv import KvCache
from .session_state import SessionVariables, copied
from .session_step import run_with_state

__all__ = ["InferenceSession", "NodeArg"]


@dataclass(frozen=True)
class NodeArg:
    """An input or output: ``name``, ``shape`` (ints, or strings / None for
    dimensions fixed only by the feeds) and ``type`` (``"tensor(float)"``)."""
    name: str
    shape: tuple
    type: str


_TYPES = {"float32": "float", "float16": "float16", "float64": "double", "int8": "int8",
          "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64",
          "bool": "bool", "object": "string"}


def _arg(name, shape, dtype):
    dt = np.dtype(dtype).name
    return NodeArg(name, tuple(shape), f"tensor({_TYPES.get(dt, dt)})")


def _is_held(arg):
    """A sequence or an optional input: fed as a list / None, not an array."""
    return arg.type.startswith(("seq(", "optional("))


class InferenceSession:
    """See the module docstring.  The first arguments are onnxruntime's:
    ``path_or_bytes`` a file name (str or path-like) or the model's bytes;
    ``sess_options`` an onnxruntime-style ``SessionOptions`` (pyarena's
    :class:`pyarena.onnxruntime.SessionOptions` or onnxruntime's own: its
    ``intra_op_num_threads`` and ``graph_optimization_level`` are honoured,
    see :func:`.ort_capi.session_settings`); ``providers`` /
    ``provider_options`` checked as onnxruntime checks them (pyarena's CPU
    kernels run whatever they name).  pyarena's own arguments are
    keyword-only: ``max_plans``: signatures kept (LRU);
    ``native``: the C core's kernels and ``layout``: which NCHW regions run
    in NHWC (see ``load_model``; None: from ``sess_options``, else True and
    "auto"); ``threads``: the native kernels' threads (None: the options'
    ``intra_op_num_threads``, else 1); ``blas_threads``: BLAS threads set
    for the process, as ``pyarena run`` does (default 1; None leaves them);
    ``memory_budget``: bytes every signature's activation arena must fit
    (``plan(g, memory_budget=...)``: the fastest plan that fits, else
    PlanInfeasibleError when the signature is first seen); ``by_value``:
    False keys signatures by shapes alone, but where an import cannot do
    without a value (a Loop body's session, whose iteration number would
    make every iteration a signature of its own); ``kv_cache=MaxContext(n)``
    (a decoder's KV cache, :mod:`.session_kv`) and ``buckets`` /
    ``max_shapes`` (one plan per bucket of lengths, :mod:`.session_buckets`)."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None,
                 provider_options=None, *, max_plans=8, native=None, memory_budget=None,
                 layout=None, threads=None, blas_threads=1, by_value=True, kv_cache=None,
                 buckets=None, max_shapes=16):
        path, self._model_file = model_path(path_or_bytes)
        fmt = sniff_format(path)
        # a compiled model: its graphs and plans as compiled (compiled.py)
        self._compiled = _open_compiled(path, memory_budget) if fmt == "compiled" else None
        if self._compiled is not None and threads is None and sess_options is None:
            threads = self._compiled.threads
        native, layout, self.threads = session_settings(
            sess_options, providers, provider_options, native, layout, threads)
        if int(max_plans) < 1:
            raise InvalidArgumentError(f"max_plans must be >= 1, not {max_plans!r}")
        if blas_threads:
            set_blas_threads(blas_threads)
        self.onnx = require_extra("onnx", "onnx", ".onnx files") if fmt == "onnx" else None
        self.path, self.max_plans, self.native = path, int(max_plans), native
        self.layout = layout
        self.memory_budget = memory_budget
        self._plan_options = PlanOptions(memory_budget=memory_budget)   # checked here
        # Locks.  _lock guards _plans (its entries and their order) and
        # _contexts, and is held only for dictionary operations: a cached
        # run takes it once.  _prepare_lock guards everything a new
        # signature or a new executor changes -- _first, _template, _cache,
        # _lower, _built, _remembered, the weights arena and the packed memo
        # -- and is held while a signature is imported, planned and bound
        # (runs of cached signatures go on meanwhile).  Order: _prepare_lock,
        # then _lock.  A thread's _Context is its own: no lock.
        self._lock = threading.Lock()
        self._prepare_lock = threading.Lock()
        self._first = None          # the first signature's graph: its weights are shared
        self._plans = OrderedDict()  # signature -> _Plan, least recently used first
        self._local = threading.local()     # .ctx: the calling thread's _Context
        self._contexts = weakref.WeakSet()  # every live thread's _Context
        self._lower = 0
        self._built = None          # the executor built last (its kernels: the next prior)
        # what every signature's import shares (the parse, static folds, fused
        # weights); None until the first executor has placed the weights
        self._cache = ImportCache() if self.onnx is not None else None
        self._remembered = False
        self._template = None       # the last imported graph, retargeted for new shapes
        self._io = _Interface(path, *_describe(self.path, self._compiled, self.onnx,
                                               self.native))
        # the inputs whose value is part of the signature (the model is
        # imported with it fixed): 0-d integer / bool inputs, and those
        # found to decide shapes (session_keys.py)
        self._keys = SignatureKeys(self._io.inputs, self._io.held)
        if not by_value:
            self._keys.shapes_only()
        # a decoder's past/present held in caches reserved once (session_kv.py)
        if kv_cache is not None and buckets is not None:
            raise InvalidArgumentError("kv_cache and buckets do not go together: kv_cache "
                                       "plans once per step shape already")
        self._kv = None if kv_cache is None else KvCache(self, kv_cache)
        self._replans = 0           # plans made (a bucket's, or a signature's own)
        self._buckets = _buckets(buckets, self._io.inputs, max_shapes, self._compiled,
                                 memory_budget)
        # signatures kept: with buckets, the lengths kept bound (max_shapes)
        self._max_entries = self.max_plans if self._buckets is None else max_shapes

    # -- the model's interface -------------------------------------------------
    def get_inputs(self):
        return list(self._io.visible_inputs)

    def get_outputs(self):
        return list(self._io.visible_outputs)

    def reset_variables(self):
        """Every variable (state a TFLite model keeps from run to run) back to its first value."""
        self._io.reset_variables()

    # -- running ---------------------------------------------------------------
    def run(self, output_names, feeds, run_options=None, *, copy=True):
        """The outputs named (None or empty: all, in the model's order) for
        ``feeds`` (input name -> array): new arrays, or with ``copy=False``
        views into the calling thread's activation block, valid until that
        thread's next run of this session (then a cached signature
        allocates nothing).  Safe to call from several threads at once
        (module docstring; a model with variables: one run at a time, :mod:`.session_state`).
        ``run_options``: an onnxruntime-style ``RunOptions``, accepted (its
        ``terminate`` set refuses the run)."""
        if self._io.state is not None:
            return run_with_state(self, self._io.state, output_names, feeds, run_options, copy)
        return self._run(output_names, feeds, run_options, copy=copy)

    def _run(self, output_names, feeds, run_options, *, copy):
        io = self._io
        feeds = io.arguments(output_names, feeds, run_options)
        if self._kv is not None:
            return self._kv.run(io.output_names(output_names), io.checked(feeds), copy)
        signature = self._keys.signature(feeds)
        ctx = self._context()
        bound = ctx.executors.get(signature)
        with self._lock:
            entry = self._plans.get(signature)
            if entry is not None:
                self._plans.move_to_end(signature)
        if bound is not None and bound[0] is entry:
            ex = bound[1]                                # the cached fast path
        else:
            io.checked(feeds)
            with self._prepare_lock, _no_gc():
                ex = self._executor(ctx, signature)
                while ex is None:       # inputs found to decide shapes: keyed now
                    signature = self._keys.signature(feeds)
                    ex = self._executor(ctx, signature)
        # (an input nothing reads -- unused, or read only for a shape that
        # folded -- is not in the imported graph, nor is one fixed to its
        # value: its feed is not copied)
        arrays, held = ex.arrays, ex.host_inputs
        out = ex.run({k: v for (k, v), (_, _, fixed) in zip(feeds.items(), signature)
                      if fixed is None and (k in arrays or k in held)})
        ctx.last = ex
        return [copied(v) if copy else v
                for v in _outputs(out, arrays, feeds, io.output_names(output_names))]

    def _context(self):
        """The calling thread's :class:`_Context` (made on its first run)."""
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = _Context()
            with self._lock:
                self._contexts.add(ctx)
        return ctx

    @property
    def _last(self):
        """The executor of the calling thread's last run (None before)."""
        ctx = getattr(self._local, "ctx", None)
        return None if ctx is None else ctx.last

    def _executor(self, ctx, signature):
        """The executor of ``signature`` bound to ``ctx``'s block: the
        signature prepared if new (:meth:`_prepare`), the block grown if
        its plan needs more; None when the import found inputs that decide
        shapes and are now keyed by value (the caller keys the signature
        again).  Under ``_prepare_lock``."""
        with self._lock:
            entry = self._plans.get(signature)
        if entry is None:
            keys = self._keys
            try:
                entry = self._prepare(
                    {k: shape for k, shape, value in signature
                     if value is None and shape is not None},
                    {k: value_of(value, shape) for k, shape, value in signature
                     if value is not None})
            except ModelImportError as exc:     # a shape only a value decides
                if keys.found(getattr(exc, "deciding_inputs", ()), required=True):
                    return None
                raise
            if keys.found(entry.graph.deciding_inputs, required=False):
                return None
            keys.seen(signature)
            with self._lock:
                self._plans[signature] = entry
                while len(self._plans) > self._max_entries:
                    self._plans.popitem(last=False)
        g, p = entry.graph, entry.plan
        current = ctx.block(p.arena_bytes)          # grown if this plan needs more
        bound = ctx.executors.get(signature)
        if bound is not None and bound[0] is entry:
            return bound[1]
        # the kernels built for the new plan's scratch sizes go to its first
        # executor (once bound, an executor's kernels are its own: another
        # thread's, or a re-binding, builds anew)
        kernels, entry.kernels = entry.kernels, None
        # the plan was made from g by the planner in _prepare: not validated again
        ex = Executor(g, p, views=p.bind(current), weights=self._first.weights_arena,
                      weights_memo=self._first.packed, plan_checked=True, kernels=kernels,
                      threads=self.threads)
        with self._lock:    # executors of evicted signatures go
            stale = [k for k, b in ctx.executors.items() if self._plans.get(k) is not b[0]]
        for k in stale:
            del ctx.executors[k]
        ctx.executors[signature] = (entry, ex)
        self._built = ex
        self._remember(g)
        return ex

    def _share(self, g, names=None):
        """``g`` reads the first import's constants: the weights held once."""
        if self._first is None:
            self._first = _Shared(g)
        else:
            self._first.adopt(g, names, getattr(self._cache, "parsed", None))

    def _remember(self, g):
        """Once an executor has placed the weights: what later imports share."""
        if self._cache is not None and not self._remembered:
            self._cache.remember(g, self._first.weights_arena.owns)
            self._remembered = True

    def _prepare(self, shapes, values):
        if self._compiled is not None:
            return self._prepare_compiled(shapes)
        g, kernels, fresh = self._graph(shapes, values)
        p = None
        if self._buckets is not None and not values:
            p = self._buckets.plan(g, shapes, lambda bucket, same: self._plan(
                *((g, fresh) if same else self._graph(bucket, {})[::2]), inplace_concat=False))
        if p is None:
            p = self._plan(g, fresh)
        return _Plan(g, p, kernels)

    def _graph(self, shapes, values):
        """(graph, kernels or None, the derived constants' names when
        retargeted else None) of the model at ``shapes`` / ``values``."""
        g, kernels = self._retargeted(shapes) if not values else (None, None)
        # a retargeted graph shares the last import's constants but for the
        # values computed from the shapes (which that import was adopted with)
        fresh = None if g is None else self._template.derived
        if g is None:
            g = load_model(self.path, inputs=shapes, native=self.native, layout=self.layout,
                           values=values or None, cache=self._cache)
            derived = self._cache.derived if self._cache is not None else None
            self._template = Template(g, derived) if derived is not None and not values \
                and self.memory_budget is None and retargetable(g, derived) else None
        self._share(g, fresh)
        return g, kernels, fresh

    def _plan(self, g, fresh, **options):
        """A plan of ``g`` (``fresh``: as :meth:`_graph` gives), counted."""
        # (a graph retargeted from a validated one is not validated again)
        p = plan_to_run(g, self._plan_options.replace(retargeted=fresh is not None, **options))
        self._replans += 1
        self._lower = max(self._lower, p.lower_bound_bytes)
        return p

    def _prepare_compiled(self, shapes):
        """A compiled signature's graph and plan, as stored (not planned
        again); InvalidArgumentError for shapes it was not compiled for."""
        g, p = _compiled_signature(self._compiled, self.path, shapes)
        self._share(g)
        self._lower = max(self._lower, p.lower_bound_bytes)
        # the kernels take the layouts the file stores (g.stored_layouts: read
        # where they lie)
        kernels = build_kernels(g, self._first.weights_arena, self._first.packed)
        return _Plan(g, p, kernels)

    def _retargeted(self, shapes):
        """(graph, kernels): the last imported signature's graph retargeted
        for ``shapes`` and its kernels (:func:`.retarget.retarget_built`);
        (None, None) when it cannot be (the caller imports in full)."""
        if self._template is None:
            return None, None
        # the last run's kernels lend what does not depend on the shapes;
        # else the last built's (a signature prepared before any run)
        last = self._last if self._last is not None else self._built
        return retarget_built(self._template, self._cache, self.onnx, self.path, shapes,
                              self._first, last.kernels if last is not None else None)

    def memory_info(self):
        """``arena_bytes`` (the activation blocks now: one per thread that
        has run the session and is alive, ``threads`` of them),
        ``max_lower_bound_bytes``, ``plans`` (signatures cached),
        ``weights_bytes``, ``pool_bytes`` (the pool tensors of the calling
        thread's last run, whose sizes depend on data: peak bytes; 0 when
        every tensor is planned), ``replans`` (plans made: a signature's,
        or with buckets a bucket's and the lengths' a bucket's plan did not
        hold for), and with buckets :meth:`.BucketPlans.info`'s."""
        with self._lock:
            blocks = [c.arena for c in self._contexts if c.arena is not None]
            plans = len(self._plans)
        last = self._last
        extra = {} if self._buckets is None else self._buckets.info()
        return {**extra, "replans": self._replans,
                "arena_bytes": sum(int(b.size) for b in blocks),
                "threads": len(blocks),
                "max_lower_bound_bytes": int(self._lower),
                "plans": plans,
                "weights_bytes": 0 if self._first is None else self._first.weights_bytes(),
                "pool_bytes": 0 if last is None else last.pool_stats.peak,
                **({} if self._kv is None else self._kv.info())}


onnx_seqmap.SESSION[:] = [InferenceSession]     # runs SequenceMap bodies


def _outputs(out, arrays, feeds, names):
    """The outputs ``names`` of a run, in order.  An output that is also an
    input (a model may pass one through, as onnxruntime allows) is not an
    output of the imported graph: it is the input's arena copy (its
    declared dtype), or for an input no op reads, its feed."""
    return [out[n] if n in out else arrays[n] if n in arrays else feeds[n] for n in names]


class _Interface:
    """A session's model as its callers see it: ``inputs`` / ``outputs``
    (NodeArgs; ``visible_*`` without a model's variables, whose ``state``
    is kept here: :mod:`.session_state`), ``held`` (sequences and
    optionals: fed as lists / None, held outside the arena), ``optional``;
    and the checks of a run's arguments against them."""

    def __init__(self, path, inputs, outputs, variables):
        self.path, self.inputs, self.outputs = path, inputs, outputs
        # state kept from run to run (a TFLite model's variables), hidden
        self.state = SessionVariables(variables, outputs) if variables else None
        self.visible_inputs, self.visible_outputs = (inputs, outputs) if self.state is None \
            else (self.state.visible(inputs), self.state.visible(outputs))
        self.held = {a.name for a in inputs if _is_held(a)}
        self.optional = {a.name for a in inputs if a.type.startswith("optional(")}
        self._known = frozenset(a.name for a in inputs)
        self._required = self._known - self.optional
        self._all_names = [a.name for a in outputs]

    def reset_variables(self):
        if self.state is not None:
            self.state.reset()

    def arguments(self, output_names, feeds, run_options):
        """``feeds`` as arrays (held inputs as fed), once the types of
        ``run``'s arguments are checked (``run_options``: an
        onnxruntime-style ``RunOptions``, its ``terminate`` refusing the run)."""
        if run_options is not None:
            if not hasattr(run_options, "terminate"):
                raise TypeError(f"run_options must be a RunOptions, not "
                                f"{type(run_options).__name__} (copy is a keyword argument: "
                                f"copy=False)")
            if run_options.terminate:
                raise StateError("run_options.terminate is set: the run is not started")
        if not isinstance(feeds, Mapping):
            raise InvalidArgumentError(f"feeds must be a dict of input name -> array, not "
                                       f"{type(feeds).__name__}")
        if isinstance(output_names, (str, bytes)):
            raise InvalidArgumentError(f"output_names must be a list of names (or None), "
                                       f"not the string {output_names!r}")
        return {k: v if k in self.held else np.asarray(v) for k, v in feeds.items()}

    def checked(self, feeds):
        """``feeds``, InvalidArgumentError unless they name every input
        (but optionals) and nothing else."""
        known = self._known
        for name in feeds:
            if name not in known:
                raise InvalidArgumentError(f"feed {name!r} is not an input of "
                                           f"{self.path}; inputs: {sorted(known)}")
        if not self._required.issubset(feeds):
            missing = sorted(self._required.difference(feeds))
            raise InvalidArgumentError(f"no feed for input(s) {missing}")
        return feeds

    def output_names(self, output_names):
        """The outputs asked for (None or empty: all, in the model's order)."""
        all_names = self._all_names
        if not output_names:
            return list(all_names)
        names = list(output_names)
        for n in names:
            if n not in all_names:
                raise InvalidArgumentError(f"{n!r} is not an output of {self.path}; outputs: "
                                           f"{all_names}")
        return names


def _describe(path, compiled, onnx, native):
    """A session's (inputs, outputs) as NodeArgs, and the model's variables
    (``Graph.variables``; {} but for TFLite): ONNX from the model's own
    declarations (symbolic dims kept), a compiled model as compiled,
    TFLite / JSON from an import (``onnx``: the module, for an ONNX model)."""
    if compiled is not None:
        return ([NodeArg(*a) for a in compiled.inputs],
                [NodeArg(*a) for a in compiled.outputs], {})
    if sniff_format(path) != "onnx":
        g = load_model(path, native=native)
        return ([_arg(n, g.tensors[n].shape, g.tensors[n].dtype) for n in g.inputs],
                [_arg(n, g.tensors[n].shape, g.tensors[n].dtype) for n in g.outputs],
                g.variables)
    from .onnx import _dims, _input_dims, _np_dtype, _onnx, parse_model
    model, _ = parse_model(_onnx(), path)
    inits = {i.name for i in model.graph.initializer}

    def args(vis, dims):
        out = []
        for vi in vis:
            if vi.type.WhichOneof("value") != "tensor_type":    # a sequence, an optional
                out.append(NodeArg(vi.name, None, type_string(onnx, vi.type)))
                continue
            tt = vi.type.tensor_type
            dt = _np_dtype(onnx, tt.elem_type, f"tensor {vi.name!r}")
            out.append(_arg(vi.name, tuple(dims(vi) or ()), dt))
        return out
    return (args([v for v in model.graph.input if v.name not in inits], _input_dims),
            args(model.graph.output, _dims), {})


def _buckets(buckets, inputs, max_shapes, compiled, memory_budget):
    """The session's :class:`.BucketPlans`, or None (buckets off)."""
    policy = bucket_policy(buckets)
    if policy is None:
        return None
    if isinstance(max_shapes, bool) or not isinstance(max_shapes, int) or max_shapes < 1:
        raise InvalidArgumentError(f"max_shapes must be an int >= 1, not {max_shapes!r}")
    if compiled is not None or memory_budget is not None:
        raise InvalidArgumentError(
            f"buckets={buckets!r} cannot be used with "
            + ("a compiled model (its plans are made)" if compiled is not None else
               "a memory_budget (its plans may rewrite the graph per length)"))
    return BucketPlans(policy, inputs)


def _compiled_signature(m, path, shapes):
    """(graph, plan) of compiled model ``m`` at ``shapes``, as stored;
    InvalidArgumentError for shapes it was not compiled for."""
    i = m.index(shapes)
    if i is None:
        raise InvalidArgumentError(
            f"{path} is compiled for the input shapes {m.signatures}, not "
            f"{shapes}: compile it for these too (pyarena compile --input ...)")
    return m.load(i)


def _open_compiled(path, memory_budget):
    """The :class:`CompiledModel` at ``path``; a ``memory_budget`` other
    than the one it was compiled with is refused (its plans are made)."""
    from .compiled import CompiledModel
    m = CompiledModel(path)
    if memory_budget is not None and memory_budget != m.memory_budget:
        raise InvalidArgumentError(
            f"{path} was compiled with memory_budget={m.memory_budget}: its plans are "
            f"made; compile it again for memory_budget={memory_budget}")
    return m


@contextmanager
def _no_gc():
    """The cyclic GC paused while a signature is imported and planned: it
    would rescan the thousands of small objects made on the way, again and
    again (a third of the time of a new signature); what is left in
    cycles is collected after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Plan:
    """A signature's graph and plan, shared by every thread; ``kernels``:
    those built for the plan (``build_kernels``), until its first executor
    takes them."""

    __slots__ = ("graph", "plan", "kernels")

    def __init__(self, graph, plan, kernels):
        self.graph, self.plan, self.kernels = graph, plan, kernels


class _Context:
    """One thread's execution state: ``arena``, its activation block (as
    large as the largest plan it ran), ``executors`` bound to that block
    (signature -> (its _Plan, the executor)) and ``last``, the executor of
    its last run.  Only its thread touches it; it goes when the thread
    ends (``threading.local``)."""

    __slots__ = ("arena", "executors", "last", "step", "__weakref__")

    def __init__(self):
        self.arena, self.executors, self.last = None, {}, None
        self.step = None        # a model with variables: :mod:`.session_step`

    def block(self, need):
        """The activation block, grown (replaced) if ``need`` is more: the
        executors bound to the old one go (their views would hold it), and
        are bound to the new one when next used.  A block of 2 MiB or more
        is asked for in huge pages (:mod:`pyarena.memory.huge_pages`: the
        first run faults it in 512 times faster)."""
        if self.arena is None or self.arena.size < need:
            self.executors.clear()
            self.arena = None
            block = huge_page_block(need)
            self.arena = block if block is not None else \
                Arena(alignment=64).empty((max(need, 64),), np.uint8)
        return self.arena


class _Shared:
    """The first signature's constants, which later signatures read."""

    def __init__(self, g):
        self.constants = {n: t for n, t in g.tensors.items() if t.role == "constant"}
        self.weights_arena = g.weights if g.weights is not None else Arena(alignment=64)
        self.packed = {}    # weights the kernels lay out: Executor(weights_memo=)
        g.weights = self.weights_arena

    def adopt(self, g, names=None, parsed=None):
        """``g`` (a later signature's graph) reads the shared constants.
        ``names``: only those constants (a graph retargeted from one that was
        adopted: the others hold its arrays already).  ``parsed``: the
        ImportCache's (model, the initializers' views of the model file,
        names): a constant that is still such a view holds what the first
        import's did (initializers do not depend on the shapes), taken
        without reading the file to compare."""
        tensors = g.tensors
        mapped = parsed[1] if parsed else {}
        for name in tensors if names is None else names:
            t = tensors[name]
            s = self.constants.get(name)
            if s is None or s.data is t.data:   # not shared, or shared already
                continue
            if t.role == "constant" and s.data is not None and t.data is not None and \
                    t.data is mapped.get(name) and s.shape == t.shape and s.dtype == t.dtype:
                t.data = s.data
                continue
            # the same name can hold another value: a shape folded for
            # these inputs, so only equal values are shared
            if t.role == "constant" and s is not None and s.shape == t.shape and \
                    s.dtype == t.dtype and s.data is not None and t.data is not None \
                    and np.array_equal(np.asarray(s.data), np.asarray(t.data)):
                t.data = s.data
        g.weights = self.weights_arena       # its own arena (folds made again) is dropped

    def weights_bytes(self):
        return self.weights_arena.stats().used
