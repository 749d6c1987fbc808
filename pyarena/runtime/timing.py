"""The one timing loop: medians of interleaved runs.

The demo, ``pyarena run`` and the benchmarks all time inferences with
:func:`time_calls`: each callable is run ``warmup`` times untimed, then
``repeat`` rounds in which every callable runs once, in turn (so a drift
of the shared machine's speed hits all of them alike); the figures to
quote are medians and ratios from the same run.  ``clock="cpu"`` times
each call by the calling thread's CPU time (``time.thread_time``) instead
of the wall clock: on a machine shared with other jobs a call preempted
half-way keeps its own cost, not the other jobs' -- meaningful for
single-threaded calls only (other threads' time is not counted).
``rotate=True`` starts each round one callable later (a, b, c; b, c, a;
...): a call that runs right after a large one starts with caches that one
emptied, and in a fixed order always the same call pays for it (measured:
BlazeFace 2.5 vs 5.9 ms for the same graph, after pyarena and after the
NumPy path, loaded machine).
"""
import statistics
import time

from ..errors import InvalidArgumentError

__all__ = ["time_calls", "median"]


def time_calls(calls, repeat=10, warmup=1, clock="wall", rotate=False):
    """``calls``: a dict name -> zero-argument callable.  Returns a dict
    name -> list of ``repeat`` seconds (wall clock, or the calling
    thread's CPU time for ``clock="cpu"``), one per round; ``rotate``: each
    round starts one callable later (module docstring)."""
    if repeat < 1:
        raise InvalidArgumentError(f"repeat must be >= 1, not {repeat}")
    if clock not in ("wall", "cpu"):
        raise InvalidArgumentError(f"clock must be 'wall' or 'cpu', not {clock!r}")
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times = {name: [] for name in calls}
    now = time.perf_counter if clock == "wall" else time.thread_time
    items = list(calls.items())
    for r in range(repeat):
        k = r % len(items) if rotate and items else 0
        for name, fn in items[k:] + items[:k]:
            t0 = now()
            fn()
            times[name].append(now() - t0)
    return times


def median(samples):
    """The median of a list of seconds (``statistics.median``)."""
    return statistics.median(samples)
