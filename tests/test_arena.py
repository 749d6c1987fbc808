import gc

import numpy as np
import pytest

import pyarena


def test_empty_is_aligned_view():
    a = pyarena.Arena()
    x = a.empty((3, 5), np.float32)
    assert x.shape == (3, 5) and x.dtype == np.float32
    assert x.flags.c_contiguous and x.flags.writeable
    assert x.ctypes.data % 64 == 0
    assert a.owns(x)
    assert not a.owns(np.empty(3))
