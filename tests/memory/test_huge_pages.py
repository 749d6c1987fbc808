"""Blocks asked for in transparent huge pages (the activation block of a
session's first run)."""
import gc
import mmap

import numpy as np
import pytest

from pyarena.memory.huge_pages import HUGE_PAGE, huge_page_block

needs_thp_advice = pytest.mark.skipif(
    not hasattr(mmap, "MADV_HUGEPAGE") or not hasattr(mmap, "MAP_ANONYMOUS"),
    reason="no MADV_HUGEPAGE / MAP_ANONYMOUS here")


def test_small_blocks_are_left_to_the_caller():
    assert huge_page_block(HUGE_PAGE - 1) is None
    assert huge_page_block(0) is None


@needs_thp_advice
@pytest.mark.parametrize("nbytes", [HUGE_PAGE, 3 * HUGE_PAGE + 4096 + 64])
def test_block_is_aligned_zeroed_writable_and_its_own(nbytes):
    b = huge_page_block(nbytes)
    assert b.dtype == np.uint8 and b.shape == (nbytes,) and b.flags.writeable
    assert b.__array_interface__["data"][0] % HUGE_PAGE == 0
    assert not b.any()
    b[:] = 7
    view = b[-100:]
    del b
    gc.collect()
    assert (view == 7).all()       # the mapping lives while a view does
    other = huge_page_block(nbytes)
    assert not other.any()         # a new block is fresh memory, not the first's
