"""Exceptions raised by pyarena.

Every C status maps to one class here (see ``_binding.check``).  The classes
also derive from the built-in exception a user would expect, so
``except MemoryError`` and ``except ValueError`` keep working.
"""


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
    """No plan fits within the requested capacity (or time)."""


class OutOfMemoryError(PyArenaError, MemoryError):
    """An allocation could not be served.

    Carries the facts needed to understand why: the requested size, the
    bytes in use, the bytes reserved, the capacity or limit (None when
    unlimited) and, for pools, a fragmentation figure in [0, 1].
    """

    def __init__(self, size, used, capacity=None, reserved=None, limit=None,
                 fragmentation=None, what="allocation"):
        self.size = size
        self.used = used
        self.capacity = capacity
        self.reserved = reserved
        self.limit = limit if limit is not None else capacity
        self.fragmentation = fragmentation
        parts = [f"out of memory: {what} of {size:,} bytes failed",
                 f"{used:,} bytes in use"]
        if reserved is not None:
            parts.append(f"{reserved:,} reserved")
        if self.limit:
            parts.append(f"limit {self.limit:,}")
        if fragmentation is not None:
            parts.append(f"fragmentation {fragmentation:.1%}")
        super().__init__(", ".join(parts))

    def __reduce__(self):
        return (type(self), (self.size, self.used, self.capacity, self.reserved,
                             self.limit, self.fragmentation))
