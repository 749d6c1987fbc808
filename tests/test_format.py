"""pyarena._format.human_bytes: the byte counts of every table and summary."""
import pytest

from pyarena._format import human_bytes


@pytest.mark.parametrize("n, text", [
    (0, "0 B"),
    (512, "512 B"),
    (1023, "1,023 B"),          # the last count below a KiB stays in bytes
    (1024, "1.0 KiB"),          # a KiB is a KiB, not "1,024 B"
    (1536, "1.5 KiB"),
    (1024 ** 2 - 1, "1,024.0 KiB"),   # 1023.999 KiB rounds, but stays in KiB
    (1024 ** 2, "1.0 MiB"),
    (3 * 1024 ** 3, "3.0 GiB"),
    (5 * 1024 ** 5, "5,120.0 TiB"),    # nothing above TiB
    (-2048, "-2.0 KiB"),
])
def test_human_bytes(n, text):
    assert human_bytes(n) == text
