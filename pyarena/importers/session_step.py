"""The cached run of a model with variables (a streaming keyword spotter:
one small step per audio frame) without the session's per-run Python.

:class:`~.session_state.SessionVariables` keeps a model's variables in
fixed arrays; a run feeds each into its input's view, runs the executor
and copies what the run assigned back -- each a NumPy call, and the
session's own checks and signature on top, several times the work of a
step of thirty small int8 ops.  Once a thread has run a signature,
:class:`VariableStep` makes the same run as one native call list where
the executor's ops are all native kernel calls
(:class:`~pyarena.runtime.batch.Batch`): the copies of the variables
into their input views, the ops' records, then the copies of the
assigned values back into the variables' arrays, in that order -- what
the slow path does, the same bits.  Ops that stay on a Python path run
between the lists as the executor runs them.

It applies while the thread's last run was this executor's (``ctx.last``:
a run of another signature, or a block grown, builds the step again),
for a feed dict naming exactly the inputs with arrays of the signature's
shapes and the inputs' own dtypes, no ``run_options``, and output names
among the visible outputs; anything else takes the session's checked path
(:func:`run_with_state`), which refuses what it refuses, by name.
"""
from collections.abc import Mapping

import numpy as np

from .._native.kernels import copy_call
from ..runtime.batch import Batch

__all__ = ["VariableStep", "run_with_state"]


def run_with_state(session, state, output_names, feeds, run_options, copy):
    """``session.run`` of a model with variables (``state``, its
    SessionVariables): the calling thread's cached step if it applies,
    else the checked run, after which the step is made for its executor."""
    ctx = session._context()
    step = ctx.step
    if step is not None and step.ex is ctx.last and run_options is None:
        got = step.run(output_names, feeds, copy)
        if got is not None:
            return got
    got = state.run(session._run, output_names, feeds, run_options, copy)
    ex = ctx.last
    if ex is not None and (step is None or step.ex is not ex):
        ctx.step = VariableStep(ex, state, feeds)
    return got


class VariableStep:
    """A run of executor ``ex`` with ``state``'s variables (``feeds``: the
    last run's, which gave the signature).  ``segments`` is None when the
    executor does not fit (pool tensors, held inputs, keyed values...):
    :meth:`run` then always gives None."""

    def __init__(self, ex, state, feeds):
        self.ex = ex
        self.segments = None
        try:
            self._build(ex, state, feeds)
        except (TypeError, ValueError, AttributeError):
            self.segments = None

    def _build(self, ex, state, feeds):
        busy = ex.busy
        if busy is None or ex.host_inputs or not isinstance(feeds, Mapping):
            return
        arrays = ex.arrays
        if any(t.dynamic for t in ex.graph.tensors.values()):
            return
        self.inputs = []
        for name, v in feeds.items():
            v = np.asarray(v)
            dst = arrays.get(name)
            if dst is not None and dst.dtype != v.dtype:
                return
            self.inputs.append((name, dst, v.dtype, v.shape))
        pre, post = state.copy_pairs(arrays)
        copies = [copy_call(dst, src) for dst, src in pre + post]
        if any(c is None for c in copies):
            return
        self.views = {n: arrays.get(n) for n in state.outputs}
        if any(v is None for v in self.views.values()):
            return
        self.all = [self.views[n] for n in state.outputs]
        self.lock = state.lock
        workers = ex.workers.handle if ex.workers is not None else None
        segs = _segments(copies[:len(pre)], busy, copies[len(pre):], workers)
        self.single = segs[0][0] if len(segs) == 1 and isinstance(segs[0][0], Batch) else None
        # one call list: its pa_calls_run with the arguments bound
        self.call = self.single.calls.bound(workers) if self.single is not None else None
        self.segments = segs

    def run(self, output_names, feeds, copy):
        """The outputs, or None where the step does not apply."""
        segs = self.segments
        if segs is None or type(feeds) is not dict or len(feeds) != len(self.inputs):
            return None
        if output_names:
            views = self.views
            outs = [views.get(n) for n in output_names] if not isinstance(output_names, str) \
                else [None]
            if any(v is None for v in outs):
                return None
        else:
            outs = self.all
        for name, dst, dtype, shape in self.inputs:
            v = feeds.get(name)
            if type(v) is not np.ndarray or v.shape != shape or \
                    (v.dtype is not dtype and v.dtype != dtype):
                return None
        with self.lock:
            for name, dst, _, _ in self.inputs:
                if dst is not None:
                    dst[...] = feeds[name]      # (same dtype and shape: checked above)
            call = self.call
            if call is not None:            # one call list: called as it is
                st = call()
                if st:
                    self.single.calls.fail(st, self.single.what)
            else:
                for k, xs, ys, sc in segs:
                    k(xs, ys, sc)
            return [np.array(v) for v in outs] if copy else list(outs)


def _segments(pre, busy, post, workers):
    """The executor's ``busy`` items with its batches merged into one with
    their neighbours (``pre`` before the first, ``post`` after the last)."""
    segs, recs, names = [], list(pre), ["variable"] * len(pre)

    def flush():
        if recs:
            segs.append((Batch(list(recs), list(names), workers, "native kernels"),
                         None, None, None))
            recs.clear(), names.clear()

    for item in busy:
        k = item[0]
        if isinstance(k, Batch):
            recs.extend(k.records)
            names.extend(k.calls.names or ["?"] * len(k.records))
            continue
        flush()
        segs.append(item)
    recs.extend(post)
    names.extend(["variable"] * len(post))
    flush()
    return segs
