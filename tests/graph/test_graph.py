"""Tests for pyarena.graph: building, validation, symbols, JSON."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from pyarena.graph import Graph, GraphError, stable_toposort


def chain():
    g = Graph("chain")
    g.add_tensor("x", ["N", 3, 8, 8], role="input")
    g.add_tensor("w", [4, 3, 3, 3], role="constant")
    g.add_tensor("a", ["N", 4, 8, 8])
    g.add_tensor("y", ["N", 4, 8, 8], role="output")
    g.add_op("Conv", ["x", "w"], ["a"], name="conv", scratch_bytes=128)
    g.add_op("Relu", ["a"], ["y"], name="relu")
    return g


def test_bind_inputs_resolves_symbols_everywhere():
    g = chain()
    env = g.bind_inputs({"x": (2, 3, 8, 8)})
    assert env == {"N": 2}
    assert g.tensors["a"].shape == (2, 4, 8, 8)
    assert g.tensors["y"].nbytes == 2 * 4 * 8 * 8 * 4
    g.validate()
    assert [op.name for op in g.ops] == ["conv", "relu"]


def test_unbound_symbol_names_tensor_and_fix():
    g = chain()
    with pytest.raises(GraphError, match=r"'x'.*unknown dimension.*'N'") as e:
        g.validate()
    # the library names the input and its dims; command-line wording is the CLI's
    assert e.value.unbound_inputs == {"x": ["N", 3, 8, 8]}
    assert "--input" not in str(e.value)


@pytest.mark.parametrize("shapes, match", [
    ({"nope": (1, 3, 8, 8)}, "unknown graph input 'nope'"),
    ({"x": (1, 3, 8)}, "rank 3"),
    ({"x": (1, 5, 8, 8)}, "fixed"),
    ({"x": (-1, 3, 8, 8)}, "negative"),
])
def test_bind_inputs_errors(shapes, match):
    with pytest.raises(GraphError, match=match):
        chain().bind_inputs(shapes)


def test_conflicting_symbol_binding():
    g = Graph()
    g.add_tensor("x", ["N", 4], role="input")
    g.add_tensor("z", ["N", 4], role="input")
    g.add_tensor("y", ["N", 4], role="output")
    g.add_op("Add", ["x", "z"], ["y"])
    with pytest.raises(GraphError, match="'N' bound to both"):
        g.bind_inputs({"x": (1, 4), "z": (2, 4)})


def test_out_of_order_ops_are_reordered():
    g = chain()
    g.ops.reverse()
    g.bind_inputs({"x": (1, 3, 8, 8)})
    g.validate()
    assert [op.name for op in g.ops] == ["conv", "relu"]


def test_cycle_names_the_operators():
    g = Graph()
    g.add_tensor("x", [4], role="input")
    g.add_tensor("a", [4])
    g.add_tensor("b", [4])
    g.add_tensor("y", [4], role="output")
    g.add_op("Add", ["x", "b"], ["a"], name="first")
    g.add_op("Relu", ["a"], ["b"], name="second")
    g.add_op("Relu", ["b"], ["y"], name="third")
    with pytest.raises(GraphError, match="cycle.*first|cycle.*second"):
        g.validate()


def test_self_loop():
    g = Graph()
    g.add_tensor("a", [4], role="output")
    g.add_op("Relu", ["a"], ["a"], name="loop")
    with pytest.raises(GraphError, match="loop"):
        g.validate()


@pytest.mark.parametrize("mutate, match", [
    (lambda g: g.add_op("Relu", ["ghost"], ["y"], name="bad"), "unknown tensor 'ghost'"),
    (lambda g: g.add_op("Relu", ["a"], ["ghost"], name="bad"), "unknown tensor 'ghost'"),
    (lambda g: g.add_op("Relu", ["a"], ["a"], name="again"), "produced twice"),
    (lambda g: g.add_op("Relu", ["a"], ["x"], name="bad"), "writes input tensor 'x'"),
    (lambda g: g.add_op("Relu", ["a"], ["w"], name="bad"), "writes constant tensor 'w'"),
    (lambda g: g.add_op("Relu", ["a"], [], name="bad"), "no outputs"),
    (lambda g: g.add_op("Relu", ["a"], ["y"], name="conv"), "used twice"),
])
def test_structural_errors_name_the_culprit(mutate, match):
    g = chain()
    g.bind_inputs({"x": (1, 3, 8, 8)})
    mutate(g)
    with pytest.raises(GraphError, match=match):
        g.validate()


def test_read_but_never_produced():
    g = Graph()
    g.add_tensor("a", [4])
    g.add_tensor("y", [4], role="output")
    g.add_op("Relu", ["a"], ["y"])
    with pytest.raises(GraphError, match="'a'.*no operator produces"):
        g.validate()


def test_output_that_nothing_produces():
    """A graph output no op writes (and no op reads) is an error too: the
    caller would get uninitialised memory back."""
    g = Graph()
    g.add_tensor("x", [4], role="input")
    g.add_tensor("y", [4], role="output")
    g.add_tensor("z", [4], role="output")
    g.add_op("Relu", ["x"], ["y"])
    with pytest.raises(GraphError, match="'z' \\(output\\).*no operator produces"):
        g.validate()


@pytest.mark.parametrize("kwargs, match", [
    (dict(shape=[2, -3]), "negative"),
    (dict(shape=[2.5, 3]), "integer"),
    (dict(nbytes=-5), "negative"),
    (dict(shape=[1 << 30, 1 << 30, 1 << 10]), "absurd"),
    (dict(), "shape or nbytes"),
    (dict(shape=[2], dtype="float33"), "dtype"),
    (dict(shape=[2], role="weights"), "role"),
])
def test_bad_tensors(kwargs, match):
    with pytest.raises(GraphError, match=match):
        Graph().add_tensor("t", **kwargs)


def test_duplicate_tensor_and_bad_names():
    g = Graph()
    g.add_tensor("t", [1])
    with pytest.raises(GraphError, match="twice"):
        g.add_tensor("t", [1])
    with pytest.raises(GraphError, match="non-empty"):
        g.add_tensor("", [1])
    with pytest.raises(GraphError, match="scratch_bytes"):
        g.add_op("Relu", ["t"], ["t"], scratch_bytes=-1)


def test_json_round_trip(tmp_path):
    g = chain()
    path = tmp_path / "g.json"
    g.save(path)
    h = Graph.load(path)
    assert h.to_dict() == g.to_dict()
    h.bind_inputs({"x": (1, 3, 8, 8)})
    h.validate()
    assert h.ops[0].scratch_bytes == 128


def test_bad_json(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(GraphError, match="not valid JSON"):
        Graph.load(p)
    p.write_text(json.dumps({"tensors": []}))
    with pytest.raises(GraphError, match="'tensors' and 'ops'"):
        Graph.load(p)
    p.write_text(json.dumps({"tensors": [{"shape": [1]}], "ops": []}))
    with pytest.raises(GraphError, match="name"):
        Graph.load(p)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.randoms(use_true_random=False))
def test_random_dags_any_order_validate_into_a_topological_order(n, rnd):
    g = Graph()
    g.add_tensor("t0", [4], role="input")
    for i in range(1, n + 1):
        g.add_tensor(f"t{i}", [4], role="output" if i == n else "activation")
    for i in range(1, n + 1):
        ins = rnd.sample([f"t{j}" for j in range(i)], k=min(i, rnd.randint(1, 3)))
        g.add_op("Add" if len(ins) > 1 else "Relu", ins, [f"t{i}"], name=f"op{i}")
    rnd.shuffle(g.ops)
    g.validate()
    pos = {op.outputs[0]: k for k, op in enumerate(g.ops)}
    for k, op in enumerate(g.ops):
        for t in op.inputs:
            assert t == "t0" or pos[t] < k


def test_stable_toposort_keeps_valid_orders_and_reports_cycles():
    users = [[1, 2], [3], [3], []]
    order, stuck = stable_toposort(users, [0, 1, 1, 2])
    assert order == [0, 1, 2, 3] and stuck == []
    order, stuck = stable_toposort([[1], [0]], [1, 1])
    assert order == [] and stuck == [0, 1]
    assert stable_toposort([[] for _ in range(5)], [0] * 5)[0] == list(range(5))


def test_a_tensor_produced_twice_is_reported_after_every_operators_own_checks():
    g = chain()
    g.bind_inputs({"x": (1, 3, 8, 8)})
    g.add_op("Relu", ["a"], ["a"], name="again")
    g.add_op("Relu", ["ghost"], ["y"], name="bad")
    with pytest.raises(GraphError, match="reads unknown tensor 'ghost'"):
        g.validate()
    g.ops.pop()
    g.add_op("Relu", ["a"], ["y"], name="again2")
    # the first tensor produced twice, by its first producer and the next one
    with pytest.raises(GraphError, match="tensor 'a' is produced twice: by 'conv' and 'again'"):
        g.validate()


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.randoms(use_true_random=False), st.booleans())
def test_validate_puts_any_order_of_a_dag_in_a_valid_order(n, rnd, shuffle):
    g = Graph()
    g.add_tensor("t0", [2], role="input")
    for i in range(1, n + 1):
        g.add_tensor(f"t{i}", [2], role="output" if i == n else "activation")
    for i in range(1, n + 1):   # op i reads t(i-1) and maybe an earlier tensor
        extra = f"t{rnd.randrange(i)}"
        g.add_op("Add", [f"t{i - 1}", extra], [f"t{i}"], name=f"op{i}")
    if shuffle:
        rnd.shuffle(g.ops)
    before = [op.name for op in g.ops]
    g.validate()
    done = {"t0"}
    for op in g.ops:
        assert set(op.inputs) <= done, (before, [o.name for o in g.ops])
        done.update(op.outputs)
    if before == sorted(before, key=lambda s: int(s[2:])):
        assert [op.name for op in g.ops] == before      # an ordered graph stays as it is


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=0, max_size=4),
       st.sampled_from(["float32", "float16", "int8", "int64", "bool", "float64"]))
def test_a_tensor_size_follows_its_shape_and_dtype(dims, dtype):
    import math
    import numpy as np
    g = Graph()
    t = g.add_tensor("x", dims, dtype, role="input")
    assert t.nbytes == math.prod(dims) * np.dtype(dtype).itemsize
    t.shape = tuple(d + 1 for d in dims)            # a new shape: sized again
    assert t.nbytes == math.prod(d + 1 for d in dims) * np.dtype(dtype).itemsize
    t.dtype = "float64"
    assert t.nbytes == math.prod(d + 1 for d in dims) * 8
