"""Offsets from the C core: ``pa_plan_assign`` over parallel arrays.

The one place the planning layer calls the C planner (strategies, the
alignment and time-limit checks, turning PA_ERR_INFEASIBLE /
PA_ERR_TIMEOUT into :class:`PlanInfeasibleError` with the lower bound).
Buffers cross the boundary as one NumPy structured array, the twin of
``pa_plan_buffer_t``, copied in one go.
"""
import numpy as np

from .._native import check, ffi, lib
from ..errors import InvalidArgumentError, PlanInfeasibleError
from ..memory.args import pow2_range

__all__ = ["STRATEGIES", "assign_offsets", "check_alignment", "check_strategy",
           "check_time_limit", "check_capacity"]

STRATEGIES = {
    "first-fit": lib.PA_PLAN_FIRST_FIT,
    "greedy-by-size": lib.PA_PLAN_GREEDY_BY_SIZE,
    "greedy-by-breadth": lib.PA_PLAN_GREEDY_BY_BREADTH,
    "best": lib.PA_PLAN_BEST,
    "exact": lib.PA_PLAN_EXACT,
}
_STRATEGY_NAMES = {v: k for k, v in STRATEGIES.items()}
_MAX_ALIGN = 1 << 30

# The numpy twin of pa_plan_buffer_t (checked against cffi at import).
_CBUF_DTYPE = np.dtype([("size", "<u8"), ("first", "<i8"), ("last", "<i8"),
                        ("offset", "<u8")])
assert ffi.sizeof("pa_plan_buffer_t") == _CBUF_DTYPE.itemsize
assert [ffi.offsetof("pa_plan_buffer_t", f) for f in _CBUF_DTYPE.names] == \
    [_CBUF_DTYPE.fields[f][1] for f in _CBUF_DTYPE.names]


def check_alignment(alignment):
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise InvalidArgumentError(f"alignment must be an integer, not {alignment!r}")
    a = int(alignment)
    if a < 1 or a > _MAX_ALIGN or a & (a - 1):
        raise InvalidArgumentError(
            f"alignment {alignment!r} is not {pow2_range(1, _MAX_ALIGN)}")
    return a


def check_strategy(strategy):
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"unknown strategy {strategy!r}; choose one of "
                                   f"{', '.join(STRATEGIES)}")
    return STRATEGIES[strategy]


def check_time_limit(time_limit):
    """Seconds of search as a float > 0 (None: 10); InvalidArgumentError
    otherwise."""
    if time_limit is None:
        return 10.0
    try:
        seconds = float(time_limit)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"time_limit must be a number of seconds, "
                                   f"not {time_limit!r}") from None
    if not seconds > 0:
        raise InvalidArgumentError(f"time_limit must be > 0 seconds, not {time_limit!r}")
    return seconds


def check_capacity(capacity):
    """None or a positive whole number of bytes; InvalidArgumentError
    otherwise."""
    if capacity is not None and (isinstance(capacity, bool) or int(capacity) != capacity
                                 or capacity <= 0):
        raise InvalidArgumentError(f"capacity must be a positive number of bytes, "
                                   f"not {capacity!r}")
    return capacity


def assign_offsets(sizes, firsts, lasts, strategy, alignment, time_limit, capacity):
    """pa_plan_assign over parallel size/first/last sequences.  Returns a
    dict: ``arena``, ``bound`` (lower bound), ``optimal``, ``chosen`` (the
    strategy whose answer was kept), ``seconds`` (in C) and ``offsets``
    (a uint64 array in input order)."""
    code = check_strategy(strategy)
    n = len(sizes)
    time_limit = check_time_limit(time_limit)
    check_capacity(capacity)
    if n == 0:
        return {"arena": 0, "bound": 0, "optimal": True, "chosen": strategy,
                "seconds": 0.0, "offsets": np.zeros(0, np.uint64)}
    arr = np.empty(n, _CBUF_DTYPE)
    arr["size"] = sizes
    arr["first"] = firsts
    arr["last"] = lasts
    arr["offset"] = 0
    cbufs = ffi.new("pa_plan_buffer_t[]", n)
    cview = ffi.buffer(cbufs)
    cview[:] = arr.tobytes()
    opt = ffi.new("pa_plan_options_t *")
    lib.pa_plan_options_default(opt)
    opt.strategy = code
    opt.alignment = alignment
    opt.time_limit = time_limit
    opt.capacity = int(capacity or 0)
    result = ffi.new("pa_plan_result_t *")
    status = lib.pa_plan_assign(cbufs, n, opt, result)
    if status in (lib.PA_ERR_INFEASIBLE, lib.PA_ERR_TIMEOUT):
        why = "no plan found within the time limit" if status == lib.PA_ERR_TIMEOUT \
            else "no plan fits"
        lb = int(lib.pa_plan_lower_bound(cbufs, n, alignment))
        best = int(result.arena_bytes)
        found = f", best plan found {best:,} bytes" if best > (capacity or 0) else ""
        raise PlanInfeasibleError(f"{why}: capacity {int(capacity or 0):,} bytes "
                                  f"(lower bound {lb:,} bytes{found}, strategy {strategy})",
                                  smallest_bytes=best if found else None,
                                  limit=int(capacity or 0))
    check(status, f"planning {n} buffers with strategy {strategy!r}")
    offsets = np.frombuffer(cview, _CBUF_DTYPE)["offset"].copy()
    chosen = _STRATEGY_NAMES.get(result.strategy, strategy)
    arena = int(result.arena_bytes)
    bound = int(result.lower_bound)
    return {"arena": arena, "bound": bound, "optimal": bool(result.optimal) or
            arena == bound, "chosen": chosen, "seconds": float(result.seconds),
            "offsets": offsets}
