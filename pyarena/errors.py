"""Every exception pyarena raises, in one place.

Each C status maps to one class here (``pyarena._native.check``), and
each failure of the Python layers has exactly one class.  The classes also
derive from the built-in exception a user would expect, so
``except MemoryError``, ``except ValueError`` and ``except ImportError``
keep working::

    PyArenaError
    +-- InvalidArgumentError (ValueError)   a bad size, shape, alignment, config
    |   +-- AlignmentError                   alignment not a supported power of two
    |   +-- ForeignPointerError              memory not handed out by this allocator
    |   +-- GraphError                       a malformed graph (names the culprit)
    |       +-- ModelImportError             a model file that cannot be imported
    |       +-- UnsupportedOpError           an operator the executor cannot run
    +-- StateError (RuntimeError)           not valid now: stale mark, closed handle
    |   +-- DoubleFreeError                  a block freed twice
    +-- OutOfMemoryError (MemoryError)      an allocation could not be served
    +-- MemoryLimitError (MemoryError)     a model needs more than max_memory
    +-- PlanInfeasibleError                 no plan within the capacity (or time)
    +-- PlanValidationError                 a plan that breaks a rule
    +-- PlotUnavailableError (ImportError)  matplotlib is not installed

This module imports nothing from pyarena: it is the bottom layer.
"""

__all__ = [
    "PyArenaError", "InvalidArgumentError", "AlignmentError", "ForeignPointerError",
    "StateError", "DoubleFreeError", "OutOfMemoryError", "PlanInfeasibleError",
    "GraphError", "ModelImportError", "UnsupportedOpError", "PlanValidationError",
    "PlotUnavailableError", "MemoryLimitError", "MemoryBudgetError",
]


class PyArenaError(Exception):
    """Base class of every pyarena error."""


class InvalidArgumentError(PyArenaError, ValueError):
    """A bad argument: size, shape, alignment, configuration."""


class AlignmentError(InvalidArgumentError):
    """An alignment that is not a supported power of two."""


class StateError(PyArenaError, RuntimeError):
    """The call is not valid now: a stale mark, memory still referenced,
    a closed handle."""


class DoubleFreeError(StateError):
    """A block was freed twice."""


class ForeignPointerError(InvalidArgumentError):
    """The memory was not handed out by this allocator."""


class PlanInfeasibleError(PyArenaError):
    """No plan fits within the requested capacity (or time), or no plan the
    memory-budget search reaches fits the budget.  ``smallest_bytes`` is
    the smallest arena reached (None when no plan was made), ``limit`` the
    capacity or memory budget asked for, ``tried`` what the budget search
    planned (dicts as in ``Plan.budget["tried"]``)."""

    def __init__(self, message="", *, smallest_bytes=None, limit=None, tried=()):
        super().__init__(message)
        self.smallest_bytes = smallest_bytes
        self.limit = limit
        self.tried = list(tried)

    def __reduce__(self):
        return (_rebuild_infeasible, (str(self), self.smallest_bytes, self.limit, self.tried))


def _rebuild_infeasible(message, smallest_bytes, limit, tried):
    return PlanInfeasibleError(message, smallest_bytes=smallest_bytes, limit=limit,
                               tried=tried)


class OutOfMemoryError(PyArenaError, MemoryError):
    """An allocation could not be served.

    Carries the facts needed to understand why (CuPy's
    ``OutOfMemoryError(size, total, limit)``, extended): ``size`` the
    request, ``used`` the bytes in live blocks, ``reserved`` the bytes
    obtained from the OS (None if unknown), ``limit`` the capacity or hard
    limit (None when unlimited), ``fragmentation`` a figure in [0, 1] for
    pools (None for arenas) and ``what`` the operation that failed.
    ``capacity`` is the same as ``limit``.
    """

    def __init__(self, size, used, *, reserved=None, limit=None,
                 fragmentation=None, what="allocation"):
        self.size = size
        self.used = used
        self.reserved = reserved
        self.limit = limit or None
        self.fragmentation = fragmentation
        self.what = what
        parts = [f"out of memory: {what} of {size:,} bytes failed",
                 f"{used:,} bytes in use"]
        if reserved is not None:
            parts.append(f"{reserved:,} reserved")
        if self.limit:
            parts.append(f"limit {self.limit:,}")
        if fragmentation is not None:
            parts.append(f"fragmentation {fragmentation:.1%}")
        super().__init__(", ".join(parts))

    @property
    def capacity(self):
        """The capacity or hard limit (None when unlimited)."""
        return self.limit

    def __reduce__(self):
        return (_rebuild_oom, (self.size, self.used, self.reserved, self.limit,
                               self.fragmentation, self.what))


def _rebuild_oom(size, used, reserved, limit, fragmentation, what):
    return OutOfMemoryError(size, used, reserved=reserved, limit=limit,
                            fragmentation=fragmentation, what=what)


class MemoryLimitError(PyArenaError, MemoryError):
    """A model (weights + work arena) needs more than the memory limit
    (``max_memory``: the machine's physical memory unless raised), found
    before anything is allocated.  ``tensor`` names the largest tensor,
    ``tensor_bytes`` its size, ``needed`` the bytes the model needs (at
    least: before planning only weights + the largest tensor are known),
    ``limit`` the limit (also readable as ``budget``, its former name)."""

    def __init__(self, tensor, tensor_bytes, needed, limit, detail="", lower_bound=False):
        self.tensor = tensor
        self.tensor_bytes = tensor_bytes
        self.needed = needed
        self.limit = limit
        super().__init__(
            f"over the memory limit: tensor {tensor!r} needs {tensor_bytes:,} bytes"
            f"{detail}; the model needs {'at least ' if lower_bound else ''}{needed:,} "
            f"bytes, max_memory is {limit:,} "
            f"bytes (raise it with max_memory= / --max-memory)")

    @property
    def budget(self):
        return self.limit

    def __reduce__(self):
        return (_rebuild_limit, (self.tensor, self.tensor_bytes, self.needed, self.limit,
                                 str(self)))


def _rebuild_limit(tensor, tensor_bytes, needed, limit, message):
    e = MemoryLimitError(tensor, tensor_bytes, needed, limit)
    e.args = (message,)
    return e


#: the former name of :class:`MemoryLimitError` (the same class)
MemoryBudgetError = MemoryLimitError


class GraphError(InvalidArgumentError):
    """A malformed graph: unknown tensor, cycle, duplicate producer, bad
    size.  The message names the tensor or operator at fault.

    ``unbound_inputs`` (a dict input name -> declared dims, possibly
    empty) lists the graph inputs whose unknown dimensions caused the
    error, so a front end can say how to give them (the CLI's ``--input``).
    """

    def __init__(self, message, unbound_inputs=None):
        super().__init__(message)
        self.unbound_inputs = dict(unbound_inputs or {})


class ModelImportError(GraphError):
    """A model file that cannot be imported: missing, corrupt, truncated, of
    an unknown format, or with sizes that cannot be determined."""


class UnsupportedOpError(GraphError):
    """An operator (or an attribute value of one) the executor cannot run.
    The message names every offending operator."""


class NeedsValueError(UnsupportedOpError):
    """An operator needs as a constant (a K, an axis, a shape, a weight) an
    input computed at run time: the importer then has its kernel built when
    the value is known (``runtime/dynamic.py``).  ``tensor``: that input's
    name (None when not told)."""

    def __init__(self, message="", tensor=None):
        super().__init__(message)
        self.tensor = tensor


class PlanValidationError(PyArenaError):
    """A plan breaks one of the rules; ``problems`` lists them all."""

    def __init__(self, problems):
        self.problems = list(problems)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"invalid plan: {problems[0]}{more}")

    def __reduce__(self):
        return (type(self), (self.problems,))


class PlotUnavailableError(PyArenaError, ImportError):
    """Drawing a plan needs matplotlib, which is not installed."""
