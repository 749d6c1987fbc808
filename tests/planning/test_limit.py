"""The memory budget (issue 9, item 3): load_model, plan, Executor and the
CLI refuse a model whose weights + arena exceed ``max_memory`` (default:
the physical memory) before allocating, naming the tensor, its bytes and
the budget."""
import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena import MemoryLimitError, plan
from pyarena.cli import main
from pyarena.graph import Graph
from pyarena.importers import load_model
from pyarena.planning import physical_memory
from pyarena.runtime import Executor


def _graph(n=1000):
    g = Graph("b")
    g.add_tensor("x", [n], role="input")
    g.add_tensor("w", [n], role="constant", data=np.ones(n, np.float32))
    g.add_tensor("a", [n])
    g.add_tensor("y", [n], role="output")
    g.add_op("Add", ["x", "w"], ["a"], name="add")
    g.add_op("Relu", ["a"], ["y"], name="relu")
    return g


def _huge_input_model(tmp_path):
    path = tmp_path / "huge.onnx"
    make_model([helper.make_node("Relu", ["x"], ["y"])],
               {"x": ([1, 3, 100000, 100000], np.float32)}, {"y": (None, np.float32)},
               path=path)
    return path


def test_absurd_onnx_input_is_refused_by_default(tmp_path):
    path = _huge_input_model(tmp_path)
    need = 3 * 100000 * 100000 * 4
    assert need > physical_memory()        # the default budget
    with pytest.raises(MemoryLimitError) as e:
        load_model(str(path))
    assert e.value.tensor in ("x", "y")
    assert e.value.tensor_bytes == need
    assert e.value.budget == physical_memory()
    assert f"at least {need:,}" in str(e.value) and f"{physical_memory():,}" in str(e.value)
    # the same model is accepted when the budget is raised
    g = load_model(str(path), max_memory=1 << 45)
    assert g.tensors["x"].nbytes == need


def test_plan_and_executor_check_weights_plus_arena():
    g = _graph()
    p = plan(g)
    need = p.arena_bytes + 4000
    assert plan(g, max_memory=need).arena_bytes == p.arena_bytes
    with pytest.raises(MemoryLimitError) as e:
        plan(g, max_memory=need - 1)
    assert e.value.needed == need and e.value.budget == need - 1
    assert f"needs {need:,} bytes" in str(e.value)          # weights + arena: exact
    with pytest.raises(MemoryLimitError):
        Executor(g, p, max_memory=need - 1)
    with pytest.raises(MemoryLimitError):
        Executor(g, max_memory=need - 1)
    ex = Executor(g, p, max_memory=need)
    out = ex.run({"x": np.full(1000, -3.0, np.float32)})["y"]
    assert np.all(out == 0.0)


def test_one_tensor_over_the_budget_is_named_before_planning():
    g = _graph(n=1 << 20)
    with pytest.raises(MemoryLimitError, match="tensor '(x|a|y)' needs 4,194,304 bytes"):
        plan(g, max_memory=1 << 20)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "8G", True])
def test_budget_must_be_a_positive_integral(bad):
    with pytest.raises(ValueError, match="max_memory"):
        plan(_graph(), max_memory=bad)


@pytest.mark.parametrize("kind", [np.int64, np.uint32, np.int32])
def test_budget_accepts_numpy_integers(kind):
    """A NumPy integer is the same limit as the Python int: the same plan
    where it fits, the same refusal one byte below the need."""
    g = _graph()
    p = plan(g)
    need = p.arena_bytes + 4000                     # weights + arena
    assert plan(g, max_memory=kind(need)).arena_bytes == p.arena_bytes
    with pytest.raises(MemoryLimitError) as e:
        plan(g, max_memory=kind(need - 1))
    assert e.value.budget == need - 1 and type(e.value.budget) is int


def test_budget_error_pickles():
    import pickle
    e = MemoryLimitError("t", 10, 20, 5)
    f = pickle.loads(pickle.dumps(e))
    assert (f.tensor, f.tensor_bytes, f.needed, f.budget) == ("t", 10, 20, 5)
    assert str(f) == str(e) and isinstance(f, MemoryError)


@pytest.mark.parametrize("cmd", ["plan", "run"])
def test_cli_refuses_with_one_line_and_exit_2(tmp_path, capsys, cmd):
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ([1000, 1000], np.float32)},
               {"y": (None, np.float32)}, path=path)
    rc = main([cmd, str(path), "--max-memory", "1M"])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
    assert "4,000,000 bytes" in err and f"{1 << 20:,}" in err
    assert main([cmd, str(path), "--max-memory", "1G"] +
                (["--no-reference", "--repeat", "1"] if cmd == "run" else [])) == 0


@pytest.mark.parametrize("text", ["lots", "0", "-5", "1Q", str(1 << 64)])
def test_cli_max_memory_must_be_a_byte_count(tmp_path, capsys, text):
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ([4], np.float32)},
               {"y": (None, np.float32)}, path=path)
    assert main(["plan", str(path), "--max-memory", text]) == 2
    assert "--max-memory" in capsys.readouterr().err


def test_graph_limit_is_inclusive():
    """A need exactly equal to the limit fits: weights (4,000 bytes) plus
    the largest work tensor (4,000 bytes) under max_memory=8,000 is
    accepted, 7,999 is refused (the check before planning)."""
    from pyarena.planning import check_graph_limit
    g = _graph()
    assert check_graph_limit(g, max_memory=8000) == 8000
    with pytest.raises(MemoryLimitError) as e:
        check_graph_limit(g, max_memory=7999)
    assert e.value.needed == 8000 and e.value.budget == 7999
