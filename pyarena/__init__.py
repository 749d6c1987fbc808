"""pyarena: tensor memory management for on-device neural-net inference.

* :class:`Arena` -- aligned bump allocation for weights and constants.
* :mod:`pyarena.plan` -- static memory plans for whole model graphs.
* :func:`get_include`, :func:`get_library` -- the C core for C programs.
"""
from ._paths import get_include, get_library
from .arena import Arena, Mark
from .errors import (AlignmentError, DoubleFreeError, ForeignPointerError,
                     InvalidArgumentError, OutOfMemoryError, PlanInfeasibleError,
                     PyArenaError, StateError)
from .stats import ArenaStats

__version__ = "0.1.0"

__all__ = [
    "Arena", "Mark", "ArenaStats",
    "PyArenaError", "InvalidArgumentError", "AlignmentError", "StateError",
    "DoubleFreeError", "ForeignPointerError", "OutOfMemoryError",
    "PlanInfeasibleError",
    "get_include", "get_library",
]

# -- static memory planner (pyarena issue 4: plan-py) --------------------------
from . import inplace, plan, validate  # noqa: E402  (modules: pyarena.plan.plan(...))
from .graph import Graph, GraphError, Op, Tensor  # noqa: E402
from .inplace import register_rule  # noqa: E402
from .plan import Buffer, Plan, load_graph, load_intervals_csv  # noqa: E402
from .validate import PlanValidationError  # noqa: E402

__all__ += ["plan", "validate", "inplace", "Graph", "GraphError", "Op", "Tensor",
            "Plan", "Buffer", "load_graph", "load_intervals_csv", "register_rule",
            "PlanValidationError"]

# -- work pool, Python layer (issue 3): Pool, Policy, PoolStats, numpy_allocator
from .policy import Policy  # noqa: E402
from .pool import NumpyAllocator, Pool, PoolStatistics, numpy_allocator  # noqa: E402
from .stats import PoolStats, ZoneStats  # noqa: E402

__all__ += ["Pool", "Policy", "PoolStats", "ZoneStats", "PoolStatistics",
            "NumpyAllocator", "numpy_allocator"]

# -- models end to end (issue 5: models): importers, executor, built-in nets
from .executor import Executor  # noqa: E402
from .kernels import UnsupportedOpError  # noqa: E402

__all__ += ["Executor", "load_model", "ModelImportError", "UnsupportedOpError"]


def __getattr__(name):
    # the importers subpackage is loaded on first use (its extras are lazy too)
    if name in ("load_model", "ModelImportError"):
        from . import importers
        return getattr(importers, name)
    raise AttributeError(f"module 'pyarena' has no attribute {name!r}")
