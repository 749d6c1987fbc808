"""Pool tensors: sizes that depend on data (NonZero, a TopK / Range fed at
run time, a Loop stopping on data) are served from the executor's Pool
and freed after their last reader; the rest of the graph stays planned."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.errors import GraphError
from pyarena.importers import load_model
from pyarena.importers.session import InferenceSession
from pyarena.planning import plan
from pyarena.runtime import Executor

F32 = np.float32


@pytest.fixture
def nonzero_model(tmp_path):
    """x -> x > 0 -> NonZero -> Transpose -> GatherND(x) -> *2 -> y (pool);
    ReduceSum(y) -> s (planned: a scalar); Relu(x) -> r (planned)."""
    path = tmp_path / "nz.onnx"
    make_model([h.make_node("Greater", ["x", "zero"], ["m"]),
                h.make_node("NonZero", ["m"], ["nz"]),
                h.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
                h.make_node("GatherND", ["x", "idx"], ["vals"]),
                h.make_node("Mul", ["vals", "two"], ["y"]),
                h.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
                h.make_node("Relu", ["x"], ["r"])],
               {"x": ([6, 8], F32)}, {"y": (None, F32), "s": (None, F32), "r": (None, F32)},
               {"zero": np.array(0, F32), "two": np.array(2, F32)}, path=path)
    return path


def test_nonzero_and_what_follows_run_from_the_pool(nonzero_model):
    g = load_model(str(nonzero_model))
    pool_names = {n for n, t in g.tensors.items() if t.dynamic}
    assert pool_names == {"nz", "idx", "vals", "y"}
    assert not g.tensors["s"].dynamic and not g.tensors["r"].dynamic
    p = plan(g)
    assert all(g.tensors[n].nbytes == 0 for n in pool_names)     # not in the arena
    ex = Executor(g, p)
    rng = np.random.default_rng(0)
    seen = {}
    for frac in (0.1, 0.5, 0.9, 0.5):
        x = rng.standard_normal((6, 8)).astype(F32)
        x[rng.random((6, 8)) > frac] = -1       # about frac of them positive
        out, ref = ex.run({"x": x}), ort_run(nonzero_model, {"x": x})
        for k in ref:
            assert out[k].shape == ref[k].shape, k
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-6, err_msg=k)
        count = int((x > 0).sum())
        info = ex.memory_info()
        assert info["arena_bytes"] == p.arena_bytes
        # nz and idx (int64, 2 per element) live together at the peak
        assert info["pool_bytes"] >= 2 * count * 8 * 2
        seen[count] = info["pool_bytes"]
        # intermediates went back at their last reader; the output stays
        assert set(ex.pooled) == {"y"}
    assert len(seen) >= 3 and seen[min(seen)] < seen[max(seen)]


def test_a_session_reports_pool_bytes(nonzero_model):
    s = InferenceSession(str(nonzero_model))
    x = np.ones((6, 8), F32)
    y, = s.run(["y"], {"x": x})
    np.testing.assert_array_equal(y, np.full(48, 2, F32))
    assert s.memory_info()["pool_bytes"] >= 48 * 2 * 8 * 2


def test_pool_graphs_refuse_the_unplanned_modes(nonzero_model):
    g = load_model(str(nonzero_model))
    with pytest.raises(GraphError, match="planned mode only"):
        Executor(g, allocator="numpy")


def test_a_loop_stopping_on_data_scans_into_the_pool(tmp_path):
    """acc doubles until its sum passes a limit fed at run time; every
    value is scanned: the scan output's length only the run tells."""
    vi = h.make_tensor_value_info
    body = h.make_graph(
        [h.make_node("Add", ["acc", "acc"], ["acc2"]),
         h.make_node("ReduceSum", ["acc2"], ["s"], keepdims=0),
         h.make_node("Less", ["s", "limit"], ["c2"])], "body",
        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("acc", T.FLOAT, [3])],
        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT, [3]), vi("acc2", T.FLOAT, [3])])
    path = tmp_path / "grow.onnx"
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af", "sc"], body=body),
                h.make_node("Neg", ["sc"], ["y"])],
               {"a0": ([3], F32), "limit": ([], F32)}, {"af": (None, F32), "y": (None, F32)},
               {"M": np.array(100, np.int64)}, path=path)
    g = load_model(str(path))
    assert g.tensors["sc"].dynamic and g.tensors["y"].dynamic and not g.tensors["af"].dynamic
    ex = Executor(g, plan(g))
    for limit in (5.0, 1000.0, 3.5):
        fx = {"a0": np.array([0.5, 0.25, 0.25], F32), "limit": np.array(limit, F32)}
        out, ref = ex.run(fx), ort_run(path, fx)
        for k in ref:
            assert out[k].shape == ref[k].shape, k
            np.testing.assert_allclose(out[k], ref[k], err_msg=k)
    assert out["y"].shape[0] == 2 and ex.memory_info()["pool_bytes"] > 0


def test_an_unbound_input_dimension_is_still_an_error_not_a_pool_tensor(tmp_path):
    path = tmp_path / "sym.onnx"
    make_model([h.make_node("Relu", ["x"], ["y"])], {"x": (["N", 3], F32)},
               {"y": (None, F32)}, path=path)
    with pytest.raises(GraphError, match="cannot size tensor"):
        load_model(str(path))
