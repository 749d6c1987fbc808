"""Bytes of a graph's tensors by dtype (what `pyarena run` / `plan` print)."""
import numpy as np

from pyarena.graph import Graph
from pyarena.graph.dtypes import bytes_by_dtype, format_by_dtype


def test_constants_and_planned_tensors_are_counted_apart():
    g = Graph("t")
    g.add_tensor("x", (1, 3, 8, 8), "float32", role="input")
    g.add_tensor("w", (4, 3, 3, 3), "int8", role="constant", data=np.zeros((4, 3, 3, 3), np.int8))
    g.add_tensor("b", (4,), "int32", role="constant", data=np.zeros(4, np.int32))
    g.add_tensor("q", (1, 4, 8, 8), "int8")
    g.add_tensor("y", (1, 4, 8, 8), "uint8", role="output")
    assert bytes_by_dtype(g, True) == {"int8": 108, "int32": 16}
    assert bytes_by_dtype(g, False) == {"float32": 768, "int8": 256, "uint8": 256}
    assert list(bytes_by_dtype(g, False))[0] == "float32"          # largest first
    assert format_by_dtype({"int8": 2048, "float32": 12}) == "int8 2.0 KiB, float32 12 B"
