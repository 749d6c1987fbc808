"""The planning layer: static memory plans for whole graphs.

* :func:`plan` -- a graph's work arena: lifetimes, in-place sharing,
  offsets from the C core (:mod:`.planner`; one plan as the graph stands:
  :mod:`.single`, :mod:`.sharing`, :mod:`.assign`), with its options as
  one :class:`PlanOptions` (:mod:`.options`).
* :func:`plan_intervals` -- bare intervals; :mod:`.intervals` reads and
  writes MiniMalloc CSV.
* :class:`Plan` / :class:`Buffer` -- the result, JSON, ``bind()``, ``plot()``.
* :mod:`.inplace` -- the in-place rule table (kinds declared by the
  kernels, extended with :func:`register_rule`); :mod:`.concat` -- which
  Concat inputs are written straight into their slices of the output.
* :func:`validate` -- the independent checker.
* :func:`schedule` -- the op order of least peak (:mod:`.schedule`).
* :mod:`.limit` -- the memory limit (``max_memory``) every entry point
  checks before allocating.
* :mod:`.fit` -- ``plan(graph, memory_budget=B)``: the fastest plan whose
  arena fits ``B`` (order, then smaller operator scratch).

Imports the memory and graph layers below it, never the runtime,
importers or CLI above.
"""
from ..errors import PlanInfeasibleError, PlanValidationError
from .assign import STRATEGIES
from . import fit, op_facts
from .limit import (check_graph_limit, check_plan_limit, physical_memory,
                     resolve_max_memory)
from .inplace import DEFAULT_RULES, KINDS, RuleTable, register_rule
from .intervals import load_intervals_csv, write_intervals_csv
from .options import PlanOptions
from .result import Buffer, Plan, scratch_name
from .planner import plan, plan_intervals
from .schedule import Schedule, schedule, live_bytes
from .sharing import tensor_lifetimes
from .validate import validate

__all__ = ["plan", "plan_intervals", "PlanOptions", "Plan", "Buffer", "validate", "STRATEGIES",
           "RuleTable", "DEFAULT_RULES", "KINDS", "register_rule", "load_intervals_csv",
           "write_intervals_csv", "scratch_name", "tensor_lifetimes",
           "PlanInfeasibleError", "PlanValidationError", "schedule", "Schedule", "live_bytes",
           "check_graph_limit", "check_plan_limit", "physical_memory", "resolve_max_memory"]
