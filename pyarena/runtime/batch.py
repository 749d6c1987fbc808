"""Runs of C kernel calls made as one call.

Calling a native kernel from Python costs a few microseconds (the
kernel's ``__call__``, its pointers, the cffi call) -- as much as a small
convolution's own work.  Where consecutive calls are each one C kernel
call on fixed buffers (``Kernel.native_call``: the Executor's bound views,
a patched stage's band buffers), :func:`batch_runs` replaces each run of
them by one :class:`~pyarena._native.kernels.CallList` (``pa_calls_run``):
the same calls in the same order, the same bits, one round trip.
"""
from .._native.kernels import CallList

__all__ = ["batch_runs", "Batch"]


class Batch:
    """A run of kernel calls as one: called like a kernel (its arguments
    are the bound ones, so ``xs``, ``ys`` and ``sc`` are ignored)."""

    idle = False

    def __init__(self, records, names, workers, what):
        self.calls = CallList(records, names)
        self.records = records      # (held by the list too): a session step merges them
        self.workers = workers
        self.what = what

    def __call__(self, xs=None, ys=None, sc=None):
        self.calls.run(self.workers, self.what)


def batch_runs(items, records_of, wrap, min_run=2):
    """``items`` in order, each run of at least ``min_run`` consecutive
    items whose ``records_of(item)`` is a list of ``(name, records)``
    (not None) replaced by ``wrap(records, names)``; the other items as
    they are.  An item of a run is held only while the run is shorter
    than ``min_run`` (``items`` may be a generator: the items of a long run
    are not all held at once)."""
    out, run, recs, names = [], [], [], []
    count = 0

    def flush():
        nonlocal count
        if count >= min_run:
            out.append(wrap(list(recs), list(names)))
        else:
            out.extend(run)
        run.clear(), recs.clear(), names.clear()
        count = 0

    for item in items:
        got = records_of(item)
        if got is None:
            flush()
            out.append(item)
            continue
        count += 1
        if count < min_run:
            run.append(item)
        else:
            run.clear()
        for name, rec in got:
            recs.append(rec)
            names.append(name)
    flush()
    return out
