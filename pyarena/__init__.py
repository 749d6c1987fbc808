"""pyarena: tensor memory management for on-device neural-net inference.

The package is built in layers, each importing only the ones below it
(docs/architecture.md)::

    errors -> _native -> memory -> graph -> planning -> runtime -> importers -> cli

* memory: :class:`Arena` (bump allocation for weights and constants),
  :class:`Pool` / :class:`Policy` (the dynamic work pool),
  :func:`numpy_allocator` (NumPy's allocator routed to a pool),
  :mod:`trace` (record a program's allocations: ``pyarena.trace.record``).
* graph: :class:`Graph`, :class:`GraphBuilder`.
* planning: :func:`plan` (a static memory plan for a whole graph; its
  options as one :class:`PlanOptions`), :func:`plan_intervals`,
  :class:`Plan`, :func:`validate`, :func:`register_rule`.
* runtime: :class:`Executor` (run a planned graph with NumPy kernels).
* importers: :func:`load_model` (ONNX, TFLite, JSON graphs, compiled
  models), :class:`InferenceSession` (``kv_cache=MaxContext(n)``: a
  decoder's KV cache held in place), :func:`compile` (a model to a file
  that loads by mmap without the model-format packages).
* :mod:`pyarena.onnxruntime`: onnxruntime's Python API run by pyarena;
  :func:`patch_onnxruntime` installs it as ``onnxruntime``.
* :func:`get_include`, :func:`get_library` -- the C core for C programs.

``import pyarena`` loads the errors, memory, graph and planning layers;
the runtime (kernels), the importers (onnx, tflite) and matplotlib load
when first used.
"""
from . import planning as _planning
from .errors import (AlignmentError, DoubleFreeError, ForeignPointerError, GraphError,
                     InvalidArgumentError, MemoryBudgetError, MemoryLimitError,
                     ModelImportError, OutOfMemoryError, PlanInfeasibleError, PlanValidationError,
                     PlotUnavailableError, PyArenaError, StateError, UnsupportedOpError)
from .graph import Graph, GraphBuilder, Op, Tensor
from .memory import (Arena, ArenaStats, Block, Mark, NumpyAllocator, Policy, Pool,
                     PoolStatistics, PoolStats, ZoneStats, numpy_allocator)
from .planning import (Buffer, Plan, PlanOptions, RuleTable, load_intervals_csv, plan,
                       plan_intervals, register_rule, validate, write_intervals_csv)
from .planning import inplace

__version__ = "0.1.0"

# name -> (module, attribute): loaded on first use
_LAZY = {
    "Executor": ("pyarena.runtime", "Executor"),
    "random_feeds": ("pyarena.runtime", "random_feeds"),
    "load_model": ("pyarena.importers", "load_model"),
    "InferenceSession": ("pyarena.importers.session", "InferenceSession"),
    "MaxContext": ("pyarena.importers.session_kv", "MaxContext"),
    "compile": ("pyarena.importers.compiler", "compile_model"),
    "load_graph": ("pyarena.importers", "load_model"),   # the former name
    "get_include": ("pyarena._native.paths", "get_include"),
    "get_library": ("pyarena._native.paths", "get_library"),
    "trace": ("pyarena.memory.trace", None),             # the module
    "patch_onnxruntime": ("pyarena.onnxruntime", "patch"),
}

__all__ = [
    "Arena", "Mark", "ArenaStats", "Pool", "Block", "Policy", "PoolStats", "ZoneStats",
    "PoolStatistics", "NumpyAllocator", "numpy_allocator",
    "Graph", "GraphBuilder", "Op", "Tensor",
    "plan", "plan_intervals", "PlanOptions", "Plan", "Buffer", "validate", "register_rule",
    "RuleTable", "inplace", "load_intervals_csv", "write_intervals_csv",
    "PyArenaError", "InvalidArgumentError", "AlignmentError", "StateError",
    "DoubleFreeError", "ForeignPointerError", "OutOfMemoryError", "PlanInfeasibleError",
    "PlanValidationError", "GraphError", "ModelImportError", "UnsupportedOpError",
    "PlotUnavailableError", "MemoryLimitError", "MemoryBudgetError", *_LAZY,
]


def __getattr__(name):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'pyarena' has no attribute {name!r}")
    import importlib
    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def _load_kernel_registry():
    # Each kernel declares its operators' facts when it registers and
    # pushes down those the planner reads (pyarena/planning/op_facts.py);
    # the planning layer cannot import the runtime, so the package root
    # (the one place above every layer) names this loader, run on first use.
    from .runtime import kernels  # noqa: F401


_planning.op_facts.add_source(_load_kernel_registry)
