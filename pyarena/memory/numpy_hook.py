"""NumPy's own allocator routed to a pool (NEP 49): ``numpy_allocator``.

``with numpy_allocator(pool):`` installs a ``PyDataMem_Handler`` whose
context is the pool (the C side is pyarena/_native/glue_numpy.c).  NumPy
keeps the handler in a context variable: the setting applies to the
current thread and asyncio task only.  Every array allocated under it holds
the handler, and the handler holds the pool, so arrays made inside the
block go back to the pool whenever they die.
"""
import threading

from .._native import glue
from ..errors import StateError
from .pool import Pool

__all__ = ["NumpyAllocator", "numpy_allocator"]

_glue_handler_new = glue.handler_new
_glue_handler_counts = glue.handler_counts
_glue_set_handler = glue.set_handler


class NumpyAllocator:
    """NumPy's data allocator (NEP 49) routed to a pool; see
    :func:`numpy_allocator`.  Reusable and re-entrant; counters are
    cumulative over the object's life."""

    def __init__(self, pool):
        if not isinstance(pool, Pool):
            raise TypeError(f"numpy_allocator() needs a pyarena.Pool, not {pool!r}")
        pool._check_open()
        self.pool = pool
        self._handler = _glue_handler_new(pool._hcap)
        self._saved = threading.local()

    def __enter__(self):
        stack = getattr(self._saved, "stack", None)
        if stack is None:
            stack = self._saved.stack = []
        stack.append(_glue_set_handler(self._handler))
        return self

    def __exit__(self, *exc):
        stack = getattr(self._saved, "stack", None)
        # the handler in force must be this one: exiting an outer block while
        # an inner one is active would restore what the outer one saw, and the
        # inner one's exit would then put this pool back for good
        current = _glue_set_handler(self._handler)
        if not stack or current is not self._handler:
            _glue_set_handler(current)
            raise StateError("numpy_allocator: blocks must exit in the reverse order of "
                             "entering (an inner numpy_allocator is still active here)"
                             if stack else "numpy_allocator: exit without enter")
        _glue_set_handler(stack.pop())
        return False

    def _counts(self):
        return _glue_handler_counts(self._handler)

    @property
    def allocations(self):
        """NumPy data allocations served by the pool (malloc, calloc and
        realloc of NULL)."""
        return self._counts()[0]

    @property
    def bytes(self):
        """Bytes asked for by those allocations."""
        return self._counts()[1]

    @property
    def reallocations(self):
        return self._counts()[2]

    @property
    def frees(self):
        return self._counts()[3]

    @property
    def failures(self):
        """Requests answered with NULL (NumPy raised MemoryError)."""
        return self._counts()[4]

    def counts(self):
        """All counters as a dict."""
        a, b, r, f, x = self._counts()
        return {"allocations": a, "bytes": b, "reallocations": r, "frees": f,
                "failures": x}

    def __repr__(self):
        return f"<pyarena.NumpyAllocator {self.counts()}>"


def numpy_allocator(pool):
    """``with numpy_allocator(pool) as alloc:`` -- every NumPy array data
    allocation inside the block (np.empty, ufunc results, concatenate,
    matmul ...) comes from ``pool``; the previous allocator is restored on
    exit, and arrays made inside still go back to the pool when they die
    (each holds the handler, which holds the pool).

    The setting is NumPy's per-context variable: it applies to the current
    thread (and asyncio task) only; other threads keep their allocator.
    ``alloc.allocations`` / ``alloc.bytes`` count the allocations routed.
    Pool exhaustion makes NumPy raise its own MemoryError.
    """
    return NumpyAllocator(pool)
