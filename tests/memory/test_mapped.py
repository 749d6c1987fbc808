"""Read-only views of a file (pyarena.memory.mapped): values, bounds,
read-only, and pages given back while the data stay valid."""
import numpy as np
import pytest

from pyarena.errors import InvalidArgumentError
from pyarena.memory.mapped import is_mapped, map_file, mapped_buffer, release_pages


def _file(tmp_path, arr, lead=0):
    p = tmp_path / "data.bin"
    p.write_bytes(b"\x07" * lead + arr.tobytes())
    return str(p)


@pytest.mark.parametrize("lead", [0, 1, 3, 4096 + 5])
def test_views_hold_the_file_bytes_at_any_offset(tmp_path, lead):
    a = np.random.default_rng(lead).standard_normal((3, 5, 7)).astype("<f4")
    mf = map_file(_file(tmp_path, a, lead))
    v = mf.array(lead, "<f4", (3, 5, 7))
    assert v.shape == (3, 5, 7) and v.dtype == np.float32
    np.testing.assert_array_equal(v, a)
    assert is_mapped(v) and is_mapped(v.reshape(-1)[2:])
    assert mapped_buffer(v) is mapped_buffer(v.T)


def test_views_are_read_only(tmp_path):
    mf = map_file(_file(tmp_path, np.arange(8, dtype="<i4")))
    v = mf.array(0, "<i4", (8,))
    with pytest.raises(ValueError):
        v[0] = 1
    assert mf.array(0, "<i4", (8,))[0] == 0


@pytest.mark.parametrize("offset, shape", [(1, (8,)), (0, (9,)), (-1, (2,)), (0, (-1,))])
def test_a_view_past_the_end_is_refused(tmp_path, offset, shape):
    mf = map_file(_file(tmp_path, np.arange(8, dtype="<i4")))
    with pytest.raises(InvalidArgumentError, match="outside the file"):
        mf.array(offset, "<i4", shape)


def test_an_empty_file_maps_to_nothing(tmp_path):
    p = tmp_path / "empty.bin"
    p.write_bytes(b"")
    mf = map_file(str(p))
    assert len(mf) == 0 and mf.array(0, "<f4", (0,)).size == 0
    assert mf.release() == 0


def test_released_pages_leave_the_data_valid(tmp_path):
    a = np.arange(3 << 18, dtype="<f4")            # 3 MiB
    mf = map_file(_file(tmp_path, a, lead=100))
    v = mf.array(100, "<f4", a.shape)
    assert float(v.sum(dtype=np.float64)) == float(a.sum(dtype=np.float64))   # touch
    given = release_pages(v)
    assert given >= a.nbytes
    np.testing.assert_array_equal(v, a)             # read back from the file
    assert mf.release() >= len(mf)


def test_release_ignores_arrays_that_are_not_mapped():
    assert release_pages(np.ones(10)) == 0
    assert release_pages(np.ones(10), whole_file=True) == 0
    assert not is_mapped(np.ones(3)) and not is_mapped([1, 2])
    assert mapped_buffer(np.ones(3)) is None
