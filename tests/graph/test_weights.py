"""The graph's weights arena (pyarena/graph/weights.py): a constant kept at
load is a read-only copy in the graph's arena, and one already there is kept
as it is unless another dtype is asked for."""
import numpy as np

from pyarena.graph import Graph


def test_keep_constant_puts_values_once_in_the_graph_arena():
    g = Graph("g")
    assert g.weights is None
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    k = g.keep_constant(v)
    assert g.weights is not None and g.weights.owns(k) and not k.flags.writeable
    assert not np.shares_memory(k, v)
    np.testing.assert_array_equal(k, v)
    used = g.weights.stats().used
    again = g.keep_constant(k)
    assert g.weights.stats().used == used and np.shares_memory(again, k)
    buf = g.constant_buffer((5,), np.int8)
    assert buf.flags.writeable and g.weights.owns(buf)
    assert g.keep_constant(np.zeros(0)).size == 0


def test_a_kept_constant_is_read_only_and_in_the_arena_whatever_its_size():
    g = Graph("g")
    for v in (np.array([7], np.int64), np.linspace(0, 1, 5000)):
        k = g.keep_constant(v)
        assert g.weights.owns(k) and not k.flags.writeable
        np.testing.assert_array_equal(k, v)


def test_an_array_already_in_the_arena_is_converted_when_another_dtype_is_asked():
    g = Graph("g")
    k = g.keep_constant(np.arange(6, dtype=np.float64))
    as32 = g.keep_constant(k, np.float32)
    assert as32.dtype == np.float32 and g.weights.owns(as32)
    np.testing.assert_array_equal(as32, np.arange(6, dtype=np.float32))
    same = g.keep_constant(k, np.float64)
    assert np.shares_memory(same, k)
