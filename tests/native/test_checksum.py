"""The C core's CRC-32C (checksum.c) through its binding, against a
bit-by-bit reference written from the polynomial."""
import mmap

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyarena._native.checksum import crc32c

_POLY = 0x82F63B78      # Castagnoli, reflected


def _reference(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def test_check_value():
    assert crc32c(b"123456789") == _reference(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0 and crc32c(b"", 1234) == 1234


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 2**32 - 1), st.integers(0, 200))
def test_matches_the_reference_and_continues(data, seed, cut):
    assert crc32c(data, seed) == _reference(data, seed)
    cut = min(cut, len(data))
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data)


def test_reads_arrays_and_read_only_mappings_where_they_lie(tmp_path):
    a = np.random.default_rng(0).integers(0, 256, 100_003, dtype=np.uint8)
    p = tmp_path / "x.bin"
    p.write_bytes(a.tobytes())
    with open(p, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = np.frombuffer(m, np.uint8)
        assert crc32c(view[3:]) == crc32c(a[3:].tobytes()) == _reference(a[3:].tobytes())
        del view
        m.close()
    assert crc32c(a[:100_000].view(np.float32)[:1000]) == crc32c(a[:4000].tobytes())
