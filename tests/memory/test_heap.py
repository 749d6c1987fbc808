"""trim_heap: freed malloc memory goes back to the system."""
import sys

import pytest

from pyarena.memory.heap import trim_heap
from pyarena.runtime.footprint import resident


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_pages_go_back():
    trim_heap()
    # 2000-byte blocks come from malloc (not Python's small-object arenas)
    blocks = [bytes(2000) * 1 + bytes([i % 251]) for i in range(20000)]
    keep = blocks[-1]                 # holds the top of the heap in place
    before = resident()[0]
    del blocks
    assert trim_heap() is True
    after = resident()[0]
    assert after < before - 16 * (1 << 20)
    assert keep[-1] == 19999 % 251
