"""The memory layer: NumPy arrays from C allocators.

* :class:`Arena` -- aligned bump allocation (weights, constants; marks).
* :class:`Pool` with its :class:`Policy` -- the dynamic work pool.
* :func:`numpy_allocator` -- NumPy's own allocator routed to a pool.
* statistics as plain data: :class:`ArenaStats`, :class:`PoolStats`,
  :class:`ZoneStats`, :class:`PoolStatistics`.

Imports only the native layer and the errors below it.
"""
from .arena import Arena, Mark
from .numpy_hook import NumpyAllocator, numpy_allocator
from .policy import Policy
from .pool import Block, Pool
from .stats import ArenaStats, PoolStatistics, PoolStats, ZoneStats

__all__ = ["Arena", "Mark", "Pool", "Block", "Policy", "NumpyAllocator",
           "numpy_allocator", "ArenaStats", "PoolStats", "ZoneStats", "PoolStatistics"]
