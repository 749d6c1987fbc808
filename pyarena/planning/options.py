"""What a plan is asked for, as one value: :class:`PlanOptions`.

``plan(graph, options)`` and everything that plans for someone else (the
budget search, the slack planner, the executor, an inference session,
the CLI) take one ``PlanOptions`` instead of passing a dozen keywords
along.  The options are checked once, when they are made, with the
errors ``plan()`` has always raised; a variant is derived with
:meth:`PlanOptions.replace` (checked again), as the budget search does
for each candidate (a capacity, a shorter time limit).
"""
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ..errors import InvalidArgumentError
from ..memory.args import as_size
from .assign import check_alignment, check_capacity, check_strategy, check_time_limit

__all__ = ["PlanOptions", "check_memory_budget"]


def check_memory_budget(memory_budget):
    """``memory_budget`` as a positive int of bytes; InvalidArgumentError
    otherwise."""
    return as_size(memory_budget, "memory_budget", 1)


@dataclass(frozen=True)
class PlanOptions:
    """The options of :func:`pyarena.plan` (see its docstring for each).

    * ``strategy`` -- the offset assignment, one of
      :data:`~pyarena.planning.assign.STRATEGIES`; ``alignment`` -- the
      offset granularity (a power of two; kept as an int);
      ``time_limit`` -- seconds of search (None: 10); ``capacity`` --
      bytes the arena must fit (PlanInfeasibleError otherwise).
    * ``inplace``, ``inplace_concat``, ``rules`` -- buffer sharing.
    * ``max_memory`` -- bytes for weights + arena (None: the physical
      memory).
    * ``schedule`` -- reorder the ops for the least peak first.
    * ``memory_budget`` -- the fastest plan whose arena fits (:mod:`.fit`),
      with ``rescratch`` (None: the kernels' rules; False: keep the
      scratch; a callable ``(graph, scratch_budget)``) and ``patch``.
    * ``retargeted`` -- the graph is a retargeted copy of a validated one: not
      validated again.

    Not with both ``capacity`` and ``memory_budget``.
    """

    strategy: str = "best"
    alignment: int = 64
    inplace: bool = True
    inplace_concat: bool = True
    time_limit: Optional[float] = 10.0
    rules: Any = None
    capacity: Optional[int] = None
    max_memory: Optional[int] = None
    schedule: bool = False
    memory_budget: Optional[int] = None
    rescratch: Union[None, bool, Callable] = None
    patch: bool = True
    retargeted: bool = False

    def __post_init__(self):
        # in the order plan() has always checked them
        check_strategy(self.strategy)
        self._set("alignment", check_alignment(self.alignment))
        if self.max_memory is not None:
            self._set("max_memory", as_size(self.max_memory, "max_memory", 1))
        if self.memory_budget is not None:
            self._set("memory_budget", check_memory_budget(self.memory_budget))
            if self.capacity is not None:
                raise InvalidArgumentError("give capacity or memory_budget, not both "
                                           "(memory_budget plans with the capacity it needs)")
        check_capacity(self.capacity)
        check_time_limit(self.time_limit)
        r = self.rescratch
        if not (r is None or r is False or callable(r)):
            raise InvalidArgumentError(f"rescratch must be a callable (graph, scratch_budget), "
                                       f"False or None, not {r!r}")

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    @classmethod
    def of(cls, options=None, **changes):
        """``options`` (a PlanOptions, a mapping of its fields, or None for
        the defaults) with ``changes`` applied: what ``plan(graph, options,
        **kw)`` plans with.  TypeError for anything else or an unknown
        name."""
        if options is None:
            return cls(**changes)
        if isinstance(options, Mapping):
            return cls(**{**options, **changes})
        if not isinstance(options, cls):
            raise TypeError(f"options must be a PlanOptions (other settings by keyword), "
                            f"not {type(options).__name__}")
        return options.replace(**changes) if changes else options

    def replace(self, **changes):
        """A copy with ``changes`` (checked like a new one)."""
        return dataclasses.replace(self, **changes)

    @property
    def concat(self):
        """Whether Concat inputs may be written into their output's slices."""
        return bool(self.inplace) and bool(self.inplace_concat)
