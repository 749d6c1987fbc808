"""Property tests: random allocation sequences with marks and rewinds.

After every step: no two live blocks overlap, every block is aligned, and
the pattern written into each block is intact until it is released."""
import numpy as np
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pyarena import Arena

DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex128]


class ArenaMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.arena = Arena(alignment=64, chunk_size=16 << 10)
        self.blocks = []   # (array, fill value, alignment asked)
        self.marks = []    # (mark, number of blocks when taken)

    @rule(shape=st.lists(st.integers(0, 40), min_size=0, max_size=3),
          dtype=st.sampled_from(DTYPES),
          align=st.sampled_from([None, 8, 64, 128, 4096, 1 << 16]),
          value=st.integers(1, 120))
    def alloc(self, shape, dtype, align, value):
        a = self.arena.empty(tuple(shape), dtype, align=align)
        a[...] = value
        self.blocks.append((a, value, align or 64))

    @rule(n=st.integers(1, 300_000))
    def alloc_big(self, n):
        a = self.arena.empty(n, np.uint8)
        a[...] = n % 200 + 1
        self.blocks.append((a, n % 200 + 1, 64))

    @precondition(lambda self: len(self.marks) < 8)
    @rule()
    def mark(self):
        self.marks.append((self.arena.mark(), len(self.blocks)))

    @precondition(lambda self: self.marks)
    @rule(pop=st.booleans())
    def rewind(self, pop):
        m, n = self.marks[-1]
        del self.blocks[n:]
        self.arena.rewind(m)
        if pop:
            self.marks.pop()

    @rule()
    def reset(self):
        self.blocks.clear()
        self.marks.clear()
        self.arena.reset()

    @invariant()
    def blocks_intact_aligned_disjoint(self):
        spans = []
        for a, value, align in self.blocks:
            addr = a.__array_interface__["data"][0]
            assert addr % max(align, 64) == 0
            assert (a == value).all()
            if a.nbytes:
                spans.append((addr, addr + a.nbytes))
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end <= start
        assert self.arena.check() == 0
        st_ = self.arena.stats()
        assert st_.count == len(self.blocks)
        assert st_.requested == sum(a.nbytes for a, _, _ in self.blocks)
        assert st_.used >= st_.requested


ArenaMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40,
                                          deadline=None)
TestArenaMachine = ArenaMachine.TestCase
