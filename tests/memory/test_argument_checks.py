"""Consistent argument checks in the memory layer (issue 9, item 7)."""
import numpy as np
import pytest

import pyarena
from pyarena.errors import AlignmentError, InvalidArgumentError


@pytest.mark.parametrize("dtype", ["U", "S", "V"])
@pytest.mark.parametrize("make", [pyarena.Arena, pyarena.Pool])
def test_unsized_dtypes_are_refused_by_both_allocators(make, dtype):
    # Arena.empty(3, 'U') used to return a <U0 array; Pool refused it
    with pytest.raises(InvalidArgumentError, match="has no size"):
        make().empty(3, dtype)


def test_small_capacity_with_default_growth_is_one_page_arena():
    # Arena(4096) failed with "arena creation of 65,536 bytes ... limit 4,096"
    a = pyarena.Arena(4096)
    x = a.empty(10)
    assert x.shape == (10,) and a.stats().reserved == 4096
    with pytest.raises(pyarena.OutOfMemoryError, match="allocation of 5,000 bytes.*limit 4,096"):
        a.empty(5000, np.uint8)


def test_capacity_below_a_page_and_chunk_above_capacity_are_named():
    with pytest.raises(InvalidArgumentError, match="capacity 100 is below one page"):
        pyarena.Arena(100)
    with pytest.raises(InvalidArgumentError, match="chunk_size 65,536 exceeds the capacity 8,192"):
        pyarena.Arena(8192, chunk_size=65536)


@pytest.mark.parametrize("cap", [2**64, 2**70])
def test_capacity_past_size_t_is_an_argument_error(cap):
    # was a bare OverflowError
    with pytest.raises(InvalidArgumentError, match="capacity .* does not fit in a size_t"):
        pyarena.Arena(cap)


def test_alignment_messages_state_one_range_in_one_wording():
    msgs = []
    for call in (lambda: pyarena.Arena().empty(3, align=2**64),
                 lambda: pyarena.Arena().empty(3, align=3),
                 lambda: pyarena.Pool().empty(3, align=2**40),
                 lambda: pyarena.Arena(alignment=3),
                 lambda: pyarena.Policy(alignment=3)):
        with pytest.raises(AlignmentError) as ei:
            call()
        msgs.append(str(ei.value))
    assert all("is not a power of two from " in m for m in msgs), msgs
    assert msgs[0].endswith("from 1 to 2**30") and msgs[2].endswith("from 1 to 2**30")
    assert msgs[3].endswith("from 8 to 2**30")
    assert msgs[4].endswith("from 8 to 2**12")
    with pytest.raises(InvalidArgumentError, match="alignment .* does not fit in a size_t"):
        pyarena.Arena(alignment=2**64)


def test_fixed_pool_too_small_for_a_buddy_region_is_refused_at_creation():
    # with a buddy zone (slab_max under large_threshold) every allocation
    # it serves used to fail later with OutOfMemoryError
    with pytest.raises(InvalidArgumentError,
                       match=r"growth='none' with a 65,536-byte chunk cannot hold one buddy "
                             r"region \(1,048,576 bytes\)"):
        pyarena.Pool(growth="none", chunk_size=1 << 16, slab_max=4096)
    # the same chunk with a region that fits works above 4 KiB
    pool = pyarena.Pool(growth="none", chunk_size=1 << 16, slab_max=4096,
                        buddy_region=1 << 16, large_threshold=1 << 15)
    a = pool.empty(5000, np.uint8)
    assert a.nbytes == 5000 and pool.stats().zone("buddy").live == 1
    # the defaults have no buddy zone (slabs up to 16 KiB, pages above):
    # one slab fits the chunk
    pool = pyarena.Pool(growth="none", chunk_size=1 << 16)
    b = pool.empty(9000, np.uint8)
    assert b.nbytes == 9000 and pool.stats().zone("slab").live == 1
    # slab-only needs a slab to fit
    with pytest.raises(InvalidArgumentError, match="slab size"):
        pyarena.Pool(mode="slab-only", growth="none", chunk_size=8192)


def test_huge_geometry_names_the_field():
    with pytest.raises(AlignmentError, match=r"Policy\.buddy_region .* from 2\*\*16 to 2\*\*30"):
        pyarena.Pool(buddy_region=2**62)
    with pytest.raises(InvalidArgumentError, match="Policy.size_classes: .* largest slab class"):
        pyarena.Pool(size_classes=(64, 2**62))


@pytest.mark.parametrize("value", [np.int64(1 << 30), np.uint32(1 << 20), np.int16(4096)])
def test_policy_accepts_any_integral(value):
    p = pyarena.Policy(limit=value, chunk_size=value)
    assert p.limit == int(value) and type(p.limit) is int
    assert pyarena.Pool(p).stats().limit == int(value)


def test_policy_still_refuses_bool_and_float():
    with pytest.raises(InvalidArgumentError, match="Policy.limit must be an int or None, not True"):
        pyarena.Policy(limit=True)
    with pytest.raises(InvalidArgumentError, match="Policy.limit"):
        pyarena.Policy(limit=1.5)
