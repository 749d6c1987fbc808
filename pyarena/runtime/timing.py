"""The one timing loop: medians of interleaved runs.

The demo, ``pyarena run`` and the benchmarks all time inferences with
:func:`time_calls`: each callable is run ``warmup`` times untimed, then
``repeat`` rounds in which every callable runs once, in turn (so a drift
of the shared machine's speed hits all of them alike); the figures to
quote are medians and ratios from the same run.
"""
import statistics
import time

from ..errors import InvalidArgumentError

__all__ = ["time_calls", "median"]


def time_calls(calls, repeat=10, warmup=1):
    """``calls``: a dict name -> zero-argument callable.  Returns a dict
    name -> list of ``repeat`` wall-clock seconds, one per round."""
    if repeat < 1:
        raise InvalidArgumentError(f"repeat must be >= 1, not {repeat}")
    for _ in range(warmup):
        for fn in calls.values():
            fn()
    times = {name: [] for name in calls}
    clock = time.perf_counter
    for _ in range(repeat):
        for name, fn in calls.items():
            t0 = clock()
            fn()
            times[name].append(clock() - t0)
    return times


def median(samples):
    """The median of a list of seconds (``statistics.median``)."""
    return statistics.median(samples)
