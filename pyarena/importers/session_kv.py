"""A decoder's KV cache held in place: ``InferenceSession(model,
kv_cache=MaxContext(n))``.

A decoder exported the onnxruntime way takes its past keys and values as
inputs (batch, heads, past, size) and gives the present ones as outputs
(batch, heads, past + new, size), made in the graph by ``Concat(past,
new, axis=2)``.  Fed in a loop, every token is a new input shape (a new
plan) and every step copies the whole past into the present: O(n^2).

With ``kv_cache=MaxContext(n)`` the session instead

* **pairs** each past input with its present output by the Concat that
  makes one from the other: a graph input of rank 4 concatenated on axis
  2 (or -2) with new rows into a graph output.  The present must be read
  only by the attention (a MatMul, or a Transpose that a MatMul reads),
  and the scores over each present key must reach a Softmax over the
  last axis through element-wise ops (a scale, a mask: Mul, Add, Where).  Any
  other form -- ``com.microsoft`` GroupQueryAttention / Attention /
  MultiHeadAttention or the standard Attention op taking the past, a
  past input left unpaired -- is refused by name when the first step is
  prepared;
* **reserves one cache per pair** (batch, heads, n, size) once, in an
  arena of its own beside the weights, zero-filled;
* **plans each step at the full context**: the graph is imported with
  the past n - new tokens long, each Concat becomes a
  ``KvCacheAppend`` (:mod:`pyarena.runtime.kernels.kv_cache`) that
  writes only the new rows into the cache at the past length, and an
  additive mask (0 for key j <= past + i, the float32 minimum beyond) is
  added to each attention's scores before its Softmax.  So the plan
  depends on the number of new tokens per call (the prompt's, then 1),
  not on the past length: decoding reuses one plan, and a step allocates
  nothing;
* hands back each **present as a view of its cache** (exactly past + new
  rows), whatever ``copy`` says (the other outputs follow ``copy``).  A
  past fed back that is that view -- the same memory, shape and strides:
  the cache's first rows -- is used where it lies; any other past is
  copied into the cache once (counted in ``kv_past_copies``).

What it costs: an attention the import fused (``pyarena.Attention``,
:mod:`pyarena.runtime.fusion_attention`) takes the past length as an
input instead of the mask and reads only the live rows, query i the keys
j <= past + i: a step's attention is O(past).  An attention left unfused
runs over all n keys every step, the dead ones masked to weight 0 (zero
rows, or rows of an earlier longer run, always finite): O(n).  Either
way new tokens attend causally (key j <= past + i), as a decoder's own
mask does.  Results match the plain loop within float rounding, not bit
for bit.  A present stays valid until a step writes over its rows (a
later step fed an earlier, shorter past rewrites what follows it).  A
past longer than n - new tokens is refused (InvalidArgumentError).  One
decode stream: the cache is the session's, and runs are serialised.
"""
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError, UnsupportedOpError
from ..memory import Arena
from ..runtime import Executor
from ..runtime.keeper import build_kernels
from ..runtime.fusion_attention import ATTENTION
from ..runtime.kernels import op_fact, scratch_bytes_for
from ..runtime.slack import plan_to_run
from . import load_model

__all__ = ["MaxContext", "KvCache"]

#: the graph inputs a step's plan adds: the past length and the mask
POSITION, MASK = "pyarena.kv_position", "pyarena.kv_mask"


def _on_scores(op):
    """Whether ``op`` may stand between the attention's scores and its
    Softmax: an element-wise op over broadcast operands (a scale, an
    additive mask) or a Where (a mask)."""
    return op.op_type == "Where" or op_fact(op.op_type, "family") == "binary"


@dataclass(frozen=True)
class MaxContext:
    """``kv_cache=MaxContext(n)``: caches of ``n`` positions (past + new
    tokens) reserved once (see :mod:`pyarena.importers.session_kv`)."""
    tokens: int

    def __post_init__(self):
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, (int, np.integer)) \
                or self.tokens < 1:
            raise InvalidArgumentError(f"MaxContext takes a number of tokens >= 1, not "
                                       f"{self.tokens!r}")


def find_pairs(g):
    """``[(past, present, new)]``: the Concat(past, new, axis=2) ops of
    imported graph ``g`` that make a graph output from a graph input of
    rank 4.  UnsupportedOpError when there is none, or when a past input
    is read by anything else."""
    inputs, outputs = set(g.inputs), set(g.outputs)
    pairs = []
    for op in g.ops:
        if op.op_type != "Concat" or len(op.inputs) != 2 or op.inputs[0] not in inputs \
                or op.outputs[0] not in outputs:
            continue
        rank = len(g.tensors[op.outputs[0]].shape)
        if rank == 4 and int(op.attrs.get("axis", 0)) in (2, -2):
            pairs.append((op.inputs[0], op.outputs[0], op.inputs[1]))
    pasts = {p for p, _, _ in pairs}
    if not pairs:
        readers = _readers(g)
        other = sorted({f"{op.op_type} {op.name!r}" for n in g.inputs
                        if len(g.tensors[n].shape or ()) == 4
                        for op in readers.get(n, ()) if op.op_type != "Concat"})
        also = f" (inputs of rank 4 are read by {other}: not recognised)" if other else ""
        raise UnsupportedOpError(
            f"kv_cache: no past/present pair found{also}; recognised: a graph input of "
            f"rank 4 (batch, heads, past, size) and a graph output made from it by "
            f"Concat(past, new, axis=2)")
    for op in g.ops:
        for name in op.inputs:
            if name in pasts and op.op_type != "Concat":
                raise UnsupportedOpError(f"kv_cache: past input {name!r} is also read by "
                                         f"{op.op_type} {op.name!r}, not only by its Concat")
    return pairs


def _readers(g):
    out = {}
    for op in g.ops:
        for name in op.inputs:
            out.setdefault(name, []).append(op)
    return out


def _softmax_after(readers, name, what):
    """The Softmax the scores ``name`` reach through element-wise ops."""
    while True:
        ops = readers.get(name, [])
        if len(ops) != 1 or not (ops[0].op_type == "Softmax" or _on_scores(ops[0])):
            raise UnsupportedOpError(f"kv_cache: the scores over {what!r} ({name!r}) reach "
                                     f"no Softmax through element-wise ops alone")
        if ops[0].op_type == "Softmax":
            return ops[0], name
        name = ops[0].outputs[0]


def _attention_softmaxes(g, presents):
    """[(Softmax op, its scores tensor)] of the attention over each
    present key; UnsupportedOpError when a present is read otherwise than
    by a MatMul (or a Transpose a MatMul reads)."""
    readers = _readers(g)
    found = {}
    for present in presents:
        for op in readers.get(present, []):
            if op.op_type == ATTENTION:     # fused: reads the live rows itself
                continue
            mm = [op] if op.op_type == "MatMul" else None
            if op.op_type == "Transpose":
                mm = readers.get(op.outputs[0], [])
            if not mm or any(m.op_type != "MatMul" for m in mm):
                raise UnsupportedOpError(f"kv_cache: present {present!r} is read by "
                                         f"{op.op_type} {op.name!r}: recognised readers are "
                                         f"MatMul and a Transpose read by MatMul")
            for m in mm:
                if m.inputs[1] == present:      # probabilities @ V: masked already
                    continue
                soft, scores = _softmax_after(readers, m.outputs[0], present)
                axis = int(soft.attrs.get("axis", -1))
                rank = len(g.tensors[scores].shape)
                if axis not in (-1, rank - 1):
                    raise UnsupportedOpError(f"kv_cache: Softmax {soft.name!r} is over axis "
                                             f"{axis}, not the keys' (the last)")
                found[soft.name] = (soft, scores)
    return list(found.values())


def _fused_attentions(g, presents):
    """The fused attentions (runtime/fusion_attention.py) whose keys are a
    present, each given POSITION as its input 4: they read the cache's
    live rows only, query i the keys up to the past length + i."""
    fused = []
    for op in g.ops:
        if op.op_type != ATTENTION or not (op.inputs[1] in presents or
                                           op.inputs[2] in presents):
            continue
        if op.inputs[1] not in presents or op.inputs[2] not in presents:
            raise UnsupportedOpError(f"kv_cache: attention {op.name!r} reads the cache for "
                                     f"its keys or its values only")
        op.inputs = (op.inputs + [""])[:4] + [POSITION]
        op.scratch_bytes = scratch_bytes_for(g, op)     # (its live form's)
        fused.append(op)
    return fused


def _absorb_transposes(g):
    """A KvCacheAppend whose new rows a Transpose makes (heads split from a
    (batch, rows, heads, size) projection) read only by it takes the
    Transpose's input and its ``perm``, and writes the rows through the
    permuted view: the Transpose's copy and its op go."""
    readers, outputs = _readers(g), set(g.outputs)
    writer = {t: op for op in g.ops for t in op.outputs}
    gone = set()
    for op in g.ops:
        if op.op_type != "pyarena.KvCacheAppend":
            continue
        t = writer.get(op.inputs[0])
        if t is None or t.op_type != "Transpose" or op.inputs[0] in outputs or \
                len(readers.get(op.inputs[0], [])) != 1 or t.attrs.get("perm") is None:
            continue
        del g.tensors[op.inputs[0]]
        op.inputs[0] = t.inputs[0]
        op.attrs["perm"] = [int(a) for a in t.attrs["perm"]]
        gone.add(id(t))
    g.ops = [op for op in g.ops if id(op) not in gone]


def to_step_graph(g, pairs, rows, context):
    """Rewrite ``g`` (imported with the past ``context - rows`` long) in
    place: each pair's Concat -> KvCacheAppend(new, POSITION), its past
    input dropped; each attention's scores + MASK before its Softmax (a
    fused attention reads POSITION instead)."""
    g.add_tensor(POSITION, (1,), "int64", role="input")
    concat = {present: (past, new) for past, present, new in pairs}
    for op in g.ops:
        if op.op_type == "Concat" and op.outputs[0] in concat:
            past, new = concat[op.outputs[0]]
            op.op_type, op.inputs, op.attrs = "pyarena.KvCacheAppend", [new, POSITION], {}
            del g.tensors[past]
    _absorb_transposes(g)
    fused = _fused_attentions(g, {p for _, p, _ in pairs})
    softmaxes = _attention_softmaxes(g, [p for _, p, _ in pairs])
    if not softmaxes and not fused:
        raise UnsupportedOpError(f"kv_cache: no attention over the presents "
                                 f"{[p for _, p, _ in pairs]} (MatMul of the queries with "
                                 f"the transposed keys, then a Softmax) found to mask")
    mask_shape = None
    for soft, scores in softmaxes:
        shape = tuple(g.tensors[scores].shape)
        if np.dtype(g.tensors[scores].dtype) != np.float32:
            raise UnsupportedOpError(f"kv_cache: Softmax {soft.name!r} is over "
                                     f"{g.tensors[scores].dtype} scores: float32 only")
        if shape[-2:] != (rows, context):
            raise UnsupportedOpError(f"kv_cache: Softmax {soft.name!r} is over scores "
                                     f"{list(shape)}, not (..., {rows}, {context})")
        if mask_shape is None:
            mask_shape = (1,) * (len(shape) - 2) + (rows, context)
            g.add_tensor(MASK, mask_shape, "float32", role="input")
        masked = f"{soft.name}.kv_masked"
        g.add_tensor(masked, shape, g.tensors[scores].dtype)
        at = g.ops.index(soft)
        g.ops.insert(at, type(soft)(f"{soft.name}.kv_mask", "Add", [scores, MASK], [masked]))
        soft.inputs[0] = masked
    return g


def mask_table(rows, context):
    """(rows, 2 * context) float32: the mask of a step with past ``p`` is
    its columns [context - p, 2 * context - p): 0 where key j <= p + i."""
    i = np.arange(rows)[:, None]
    c = np.arange(2 * context)[None, :]
    return np.where(c <= context + i, np.float32(0), np.finfo(np.float32).min)


class _Step:
    """The plan of one step shape: ``rows`` new tokens per call."""

    __slots__ = ("graph", "plan", "rows", "table", "executor", "kernels")

    def __init__(self, graph, plan, rows, context):
        self.graph, self.plan, self.rows = graph, plan, rows
        self.table = mask_table(rows, context)
        self.executor = None
        self.kernels = None     # built before the plan, for its first executor


class KvCache:
    """The kv_cache mode of one :class:`~.session.InferenceSession` (see
    the module docstring): its caches, step plans and counters."""

    def __init__(self, session, max_context):
        if not isinstance(max_context, MaxContext):
            raise InvalidArgumentError(f"kv_cache must be a MaxContext, not "
                                       f"{type(max_context).__name__}")
        if session.onnx is None:
            raise InvalidArgumentError("kv_cache needs an ONNX model (past/present inputs "
                                       "and outputs)")
        self.session, self.context = session, int(max_context.tokens)
        self._lock = threading.Lock()   # one decode stream: runs serialised
        self._pairs = None              # [(past, present, new)], from the first import
        self._caches = {}               # present name -> (batch, heads, context, size)
        self._arena = Arena(alignment=64)   # the caches' memory, beside the weights
        self._steps = {}                # step key -> _Step
        self._block = None              # the steps' activation block (the largest)
        self._pasts = frozenset()       # the past inputs' names, once paired
        self._handed = {}               # present -> the view of its cache the last run gave
        self.counts = dict(kv_steps=0, kv_plans=0, kv_cache_allocations=0,
                           kv_past_copies=0, kv_past_copied_bytes=0)

    # -- a step's plan -----------------------------------------------------------
    def _import(self, shapes, share=True):
        """The model imported for ``shapes``; ``share``: reading the
        session's shared weights (a probe's graph is dropped unrun: the
        weights it would lend were never placed)."""
        s = self.session
        g = load_model(s.path, inputs=shapes, native=s.native, layout=s.layout,
                       cache=s._cache)
        if share:
            s._share(g)
        return g

    def _prepare(self, feeds):
        """The _Step for ``feeds``' shapes: a probe import at the fed past
        length finds the pairs and how many rows a step adds; the step
        graph is imported with the past at ``context - rows``."""
        shapes = {k: v.shape for k, v in feeds.items()}
        probe = self._import(shapes, share=False)
        pairs = find_pairs(probe)
        if self._pairs is None:
            self._pairs = pairs
            self._pasts = frozenset(p for p, _, _ in pairs)
        elif pairs != self._pairs:
            raise UnsupportedOpError(f"kv_cache: these input shapes pair {pairs}, the first "
                                     f"ones {self._pairs}")
        past, present, _ = pairs[0]
        rows = probe.tensors[present].shape[2] - self._past_length(feeds)
        del probe
        if rows < 1 or rows > self.context:
            raise InvalidArgumentError(f"kv_cache: a step adds {rows} rows, the cache holds "
                                       f"{self.context}")
        shapes.update({p: shapes[p][:2] + (self.context - rows,) + shapes[p][3:]
                       for p, _, _ in pairs})
        g = to_step_graph(self._import(shapes), pairs, rows, self.context)
        kernels = self._kernels(g)
        p = plan_to_run(g, self.session._plan_options)
        self.counts["kv_plans"] += 1
        step = _Step(g, p, rows, self.context)
        step.kernels = kernels
        return step

    def _kernels(self, g):
        """``g``'s kernels built before it is planned (their scratch sizes
        set), taking what does not depend on the shapes -- the packed
        weights -- from a step already bound (the same ops at another row
        count); None for the first step (its executor builds them).  Not
        packed again, the weights are not read from the model file again."""
        prior = next((st.executor.kernels for st in reversed(list(self._steps.values()))
                      if st.executor is not None), None)
        if prior is None:
            return None
        s = self.session
        return build_kernels(g, s._first.weights_arena, s._first.packed, prior)

    def _executor(self, step):
        """``step``'s executor, its presents bound to the caches (made
        once; again only when the block grows)."""
        if step.executor is not None:
            return step.executor
        need = max(int(step.plan.arena_bytes), 64)
        if self._block is None or self._block.size < need:
            for other in self._steps.values():
                other.executor = None
            self._block = None
            self._block = Arena(alignment=64).empty((need,), np.uint8)
        views = step.plan.bind(self._block)
        g = step.graph
        for _, present, _ in self._pairs:
            t = g.tensors[present]
            cache = self._caches.get(present)
            if cache is None:
                cache = self._caches[present] = self._arena.empty(tuple(t.shape), t.dtype)
                cache.fill(0)
                self.counts["kv_cache_allocations"] += 1
            if cache.shape != tuple(t.shape):
                raise InvalidArgumentError(
                    f"kv_cache: the cache {present!r} is reserved as {list(cache.shape)}; "
                    f"this step needs {list(t.shape)} (another batch: another session)")
            views[present] = cache
        s = self.session
        kernels, step.kernels = step.kernels, None      # (an executor's own, once bound)
        step.executor = Executor(g, step.plan, views=views, weights=s._first.weights_arena,
                                 weights_memo=s._first.packed, plan_checked=True,
                                 threads=s.threads, kernels=kernels)
        s._remember(g)
        return step.executor

    # -- running -----------------------------------------------------------------
    def _past_length(self, feeds):
        lengths = {int(feeds[p].shape[2]) for p, _, _ in self._pairs}
        if len(lengths) > 1:
            raise InvalidArgumentError(f"kv_cache: the past inputs have different lengths "
                                       f"{sorted(lengths)}")
        return lengths.pop() if lengths else 0

    def _key(self, feeds):
        """What a step's plan depends on: the feeds' shapes, the pasts'
        without their length."""
        pasts = self._pasts
        return tuple((k, v.shape[:2] + v.shape[3:] if k in pasts else v.shape, v.dtype.str)
                     for k, v in feeds.items())

    def _adopt_past(self, name, present, past, length):
        """The past fed for ``present``'s cache: used where it lies if it is
        the cache's first ``length`` rows, else copied into them.  The view
        the last run handed out (a decode loop feeding its presents back)
        is those rows as it stands: nothing to compare."""
        if past is self._handed.get(present):
            return
        cache = self._caches[present]
        live = cache[:, :, :length]
        if not length or (past.__array_interface__["data"][0] == cache.ctypes.data and
                          past.shape == live.shape and past.strides == live.strides and
                          past.dtype == cache.dtype):
            return
        try:
            np.copyto(live, past, casting="same_kind")
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"feed {name!r}: {exc} (the cache is "
                                       f"{cache.dtype} {list(cache.shape)})") from None
        self.counts["kv_past_copies"] += 1
        self.counts["kv_past_copied_bytes"] += int(past.nbytes)

    def run(self, names, feeds, copy):
        """The outputs ``names`` of one step (see the module docstring)."""
        with self._lock:
            step = None if self._pairs is None else self._steps.get(self._key(feeds))
            if step is None:
                self._handed.clear()        # (a new plan may place the caches anew)
                step = self._prepare(feeds)
                self._steps[self._key(feeds)] = step
            length = self._past_length(feeds)
            if length + step.rows > self.context:
                raise InvalidArgumentError(
                    f"kv_cache: a past of {length} and {step.rows} new tokens pass the "
                    f"cache's max context {self.context} (MaxContext({self.context}))")
            ex = self._executor(step)
            for past, present, _ in self._pairs:
                self._adopt_past(past, present, feeds[past], length)
            arrays = ex.arrays
            arrays[POSITION][0] = length
            if MASK in arrays:
                np.copyto(arrays[MASK].reshape(step.table.shape[0], -1),
                          step.table[:, self.context - length:2 * self.context - length])
            pasts = self._pasts
            out = ex.run({k: v for k, v in feeds.items() if k not in pasts and k in arrays})
            self.counts["kv_steps"] += 1
            end = length + step.rows
            got, handed = [], self._handed
            handed.clear()
            for n in names:
                cache = self._caches.get(n)
                if cache is not None:
                    got.append(cache[:, :, :end])
                    handed[n] = got[-1]
                else:
                    got.append(np.array(out[n]) if copy else out[n])
            return got

    def info(self):
        """The counters, ``kv_cache_bytes`` (the caches reserved) and
        ``kv_arena_bytes`` (the steps' activation block)."""
        return dict(self.counts, kv_cache_bytes=sum(int(c.nbytes) for c in self._caches.values()),
                    kv_arena_bytes=0 if self._block is None else int(self._block.size))
