"""``Pool``: NumPy arrays from the C work pool, and NumPy's own allocator.

Lifetime rules (the reason for most of this file and of
pyarena/_native/glue_handle.c, the arena's and the pool's one scheme):

* The C pool is owned by a handle capsule that destroys it when the last
  reference is gone.  The ``Pool`` object holds one reference, every
  block holds one (the block's owner capsule is the array's ``base``), and
  every NumPy allocator made by :func:`numpy_allocator` holds one.  So an
  array keeps its block, a block keeps the pool, and dropping or closing
  the ``Pool`` before its arrays is fine.
* Deferred reclamation: a block goes back to the pool when its array and
  every view of it are gone (NumPy points every view at the array that owns
  the block, and the array holds the owner capsule).
* ``pool.free(arr)`` returns the block early, and refuses while anything
  else still sees it (:mod:`.pool_free`).
* Destructors are C capsule destructors: they never raise and do nothing
  while the interpreter finalizes.

Thread safety: the C pool is thread-safe (one lock); ``empty``, ``free``
and NumPy's allocator run with the GIL held, the other calls release it.
No Python callback ever runs under the pool lock (:mod:`.pool_walk`); the
one Python lock and fork() are in :mod:`.pool_snapshots`.

This file makes the pool, hands out its arrays (``empty``, ``zeros``,
``full``, ``empty_like``, ``asarray``), marks its steps and closes it; the
other jobs of :class:`Pool` are parts of their own, one module each:
early free and ownership (:mod:`.pool_free`), reclamation and limits
(:mod:`.pool_limits`), statistics snapshots and peaks
(:mod:`.pool_snapshots`), PyTorch-style reports (:mod:`.pool_reports`),
the block walk and invariant check (:mod:`.pool_walk`).
"""
import contextlib
import functools

import numpy as np

from .._native import check, ffi, glue, lib
from ..errors import StateError
from . import dtypes
from .closable import Closable
from .policy import Policy
from .pool_free import EarlyFree
from .pool_limits import Limits
from .pool_reports import Reports
from .pool_snapshots import Snapshots, raw_stats
from .pool_walk import Block, Walk
from .stats import out_of_memory

__all__ = ["Pool", "Block"]


def _alloc_failed(h, hcap, nbytes, status, align):
    """Called by the native ``empty`` when the pool refused a block (after
    the one retry): OVERFLOW is a valid size no pool could ever serve."""
    if status in (lib.PA_ERR_NOMEM, lib.PA_ERR_OVERFLOW):
        raise out_of_memory(nbytes, raw_stats(h, hcap))
    check(status, f"pool allocation of {nbytes:,} bytes")
    raise StateError("pool allocation failed without a status")


class Pool(EarlyFree, Limits, Snapshots, Reports, Walk, Closable):
    """A dynamic work pool handing out NumPy arrays.

    ``Pool(policy=Policy(...))``, or ``Pool(limit=..., mode=...)`` as a
    shortcut for the same policy fields.  See :class:`~pyarena.Policy`.
    """

    _kind = "pool"

    def __init__(self, policy=None, **fields):
        if policy is None:
            policy = Policy(**fields)
        elif fields:
            policy = policy.replace(**fields)
        elif not isinstance(policy, Policy):
            raise TypeError(f"policy must be a pyarena.Policy, not {policy!r}")
        cfg = ffi.new("pa_pool_config_t *")
        lib.pa_pool_config_default(cfg)
        policy.fill_config(cfg)
        status = ffi.new("pa_status_t *")
        h = lib.pa_pool_create(cfg, status)
        if h == ffi.NULL:
            if status[0] == lib.PA_ERR_NOMEM:
                need = policy.chunk_size or policy.limit or (1 << 20)
                raise out_of_memory(int(need), limit=policy.limit, what="pool creation")
            check(status[0], f"pool creation with {policy}")
        try:
            self._hcap = glue.handle(glue.POOL, int(ffi.cast("uintptr_t", h)))
        except BaseException:
            lib.pa_pool_destroy(h)
            raise
        self._h = h
        self.policy = policy
        self.alignment = int(cfg.alignment)
        self._freed = {}           # id(array) -> weakref, for DoubleFreeError
        self._init_snapshots()     # peaks, recorders and their lock
        # The native empty() / zeros(): one C call each, holding the handle
        # (so a kept bound method keeps the C pool, like an array does).
        failed = functools.partial(_alloc_failed, h, self._hcap)
        self._empty, self._zeros = (
            glue.empty_function(self._hcap, self.alignment, None, dtypes.CACHE,
                                dtypes.resolve_dtype, failed, zero) for zero in (False, True))
        self.empty, self.zeros = self._empty, self._zeros

    # -- allocation -----------------------------------------------------------
    def empty(self, shape, dtype=np.float64, align=None):
        """An uninitialised C-contiguous array over a pool block, aligned to
        the pool's granularity (or to ``align``, a larger power of two).
        The block returns to the pool when the array and all its views are
        gone, or at :meth:`free`.  (An instance attribute replaces this
        method with the native call of the same signature.)"""
        self._check_open()
        return self._empty(shape, dtype, align)

    def zeros(self, shape, dtype=np.float64, align=None):
        """Like :meth:`empty`, filled with zeros."""
        self._check_open()
        return self._zeros(shape, dtype, align)

    def full(self, shape, fill_value, dtype=None):
        """Like :meth:`empty`, filled with ``fill_value``."""
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        a = self.empty(shape, dtype)
        a.fill(fill_value)
        return a

    def empty_like(self, a, dtype=None):
        """An uninitialised pool array with ``a``'s shape (and dtype)."""
        a = np.asarray(a)
        return self.empty(a.shape, a.dtype if dtype is None else dtype)

    def asarray(self, obj, dtype=None):
        """A copy of ``obj`` in the pool."""
        src = np.asarray(obj, dtype=dtype)
        out = self.empty(src.shape, src.dtype)
        np.copyto(out, src)
        return out

    # -- steps -------------------------------------------------------------------------
    def step(self):
        """Mark the end of one step (one inference, one loop iteration).

        With ``Policy.learn`` (the default) the pool records each step's
        allocations and frees; once a step has repeated
        ``Policy.learn_repeats`` times it is planned, and the steps that
        repeat it are served at planned offsets from one region (see
        docs/pool.md).  A step that differs falls back to the zones for the
        rest of it; nothing handed out is ever moved."""
        self._check_open()
        check(lib.pa_pool_step(self._h), "pool step")

    @contextlib.contextmanager
    def step_scope(self):
        """``with pool.step_scope():`` -- the block is one step: the step
        ends when the block is left (also on an exception)."""
        self._check_open()
        try:
            yield self
        finally:
            if not self._closed:
                self.step()

    # -- lifetime -------------------------------------------------------------------
    def _drop(self):
        # arrays keep the C pool alive; it is destroyed when the last is gone
        self._empty.__self__.close()                  # kept bound methods refuse too
        self._zeros.__self__.close()
        self._empty = self._zeros = None
        self.__dict__.pop("empty", None)
        self.__dict__.pop("zeros", None)
        self._hcap = None
        self._h = ffi.NULL
        self._freed = {}

    def __repr__(self):
        if self._closed:
            return "<pyarena.Pool closed>"
        st = self.stats()
        return (f"<pyarena.Pool {self.policy.mode} used={st.allocated:,} "
                f"reserved={st.reserved:,} live={st.live} alignment={st.alignment}>")
