"""Test helper: a pool's live blocks, for the property tests of the
learning pool (not a test module).

:class:`World` allocates uint8 blocks from a Pool, fills each with its
own tag and checks, at every free and in :meth:`World.invariants`, that
no two live blocks overlap, that every block is aligned, that its data
survived until it was freed, and that the pool's own check passes."""
import numpy as np


def addr(a):
    """The address of an array's first byte."""
    return a.__array_interface__["data"][0]


class World:
    def __init__(self, pool):
        self.pool = pool
        self.live = {}     # id -> (array, tag)
        self.tag = 0

    def alloc(self, n):
        a = self.pool.empty(n, np.uint8)
        assert addr(a) % self.pool.alignment == 0
        self.tag = (self.tag + 37) & 0xFF
        a.fill(self.tag)
        self.live[id(a)] = (a, self.tag)
        return id(a)

    def free(self, key):
        a, tag = self.live.pop(key)
        assert (a == tag).all(), "data changed before the free"
        self.pool.free(a)

    def invariants(self):
        spans = sorted((addr(a), max(a.nbytes, 1)) for a, _ in self.live.values())
        for (a0, n0), (a1, _) in zip(spans, spans[1:]):
            assert a0 + n0 <= a1, "two live blocks overlap"
        for a, tag in self.live.values():
            assert (a == tag).all(), "a live block's data changed"
        assert self.pool.check() == 0
