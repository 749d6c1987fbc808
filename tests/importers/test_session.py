"""InferenceSession: inputs with symbolic dims, one plan per input-shape
signature (LRU), one activation arena that grows to the largest plan,
weights shared across signatures, outputs equal to onnxruntime's."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.model_zoo import ort_run
from helpers.tflite_util import small_cnn
from pyarena import InferenceSession, Pool, numpy_allocator
from pyarena.errors import InvalidArgumentError
from pyarena.importers import UnsupportedOpError


def _model(path):
    """x[N, 8, H, W] -> Conv (36 KiB of weights) -> Relu -> GlobalAveragePool
    -> Reshape to [N, -1] through Shape / Slice / Concat -> MatMul, + N (a
    constant folded from the input's shape) -> y[N, 5]."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Slice", ["s", "z", "one"], ["n"]),
        helper.make_node("Concat", ["n", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["y0"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["y0", "nf"], ["y"]),     # + N: folded per signature
    ]
    c = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(rng.standard_normal((128, 8, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal((128, 5)).astype(np.float32), "wm"),
         c([0], "z"), c([1], "one"), c([-1], "m1")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


SHAPES = [(1, 8, 12, 12), (2, 8, 20, 16), (1, 8, 32, 40), (3, 8, 8, 8)]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_inputs_and_outputs_keep_their_symbols(tmp_path):
    s = InferenceSession(_model(str(tmp_path / "m.onnx")))
    (i,), (o,) = s.get_inputs(), s.get_outputs()
    assert (i.name, i.shape, i.type) == ("x", ("N", 8, "H", "W"), "tensor(float)")
    assert (o.name, o.shape) == ("y", ("N", 5))


def test_signatures_in_a_cycle_match_onnxruntime_in_one_arena(tmp_path):
    path = _model(str(tmp_path / "m.onnx"))
    s = InferenceSession(path)
    arenas, bounds, weights = [], [], None
    for rnd in range(2):
        for k, shape in enumerate(SHAPES):
            x = _x(shape, k)
            (y,) = s.run(None, {"x": x})
            np.testing.assert_allclose(y, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
            info = s.memory_info()
            if rnd == 0:
                arenas.append(s._plans[next(reversed(s._plans))][1].arena_bytes)
                bounds.append(info["max_lower_bound_bytes"])
                weights = weights or info["weights_bytes"]
            # the weights are shared; each signature adds only its folded shape values
            assert weights <= info["weights_bytes"] < weights + 128 * len(SHAPES)
    info = s.memory_info()
    assert info["plans"] == len(SHAPES)
    assert info["arena_bytes"] == max(arenas) < sum(arenas)   # the largest, not the sum
    assert info["max_lower_bound_bytes"] == max(bounds)
    assert info["pool_bytes"] == 0


def test_a_cached_signature_allocates_nothing(tmp_path):
    s = InferenceSession(_model(str(tmp_path / "m.onnx")))
    x = _x(SHAPES[1])
    s.run(None, {"x": x}, copy=False)
    with numpy_allocator(Pool()) as counter:
        s.run(None, {"x": x}, copy=False)
        s.run(["y"], {"x": x}, copy=False)
    assert counter.allocations == 0
    with numpy_allocator(Pool()) as counter:       # the counter does see a copy
        s.run(None, {"x": x})
    assert counter.allocations >= 1


def test_the_plan_cache_is_bounded(tmp_path):
    s = InferenceSession(_model(str(tmp_path / "m.onnx")), max_plans=2)
    for shape in SHAPES:
        s.run(None, {"x": _x(shape)})
    assert s.memory_info()["plans"] == 2
    assert list(s._plans) == [(("x", SHAPES[2], None),), (("x", SHAPES[3], None),)]


def test_bad_feeds_and_names_are_refused_by_name(tmp_path):
    s = InferenceSession(_model(str(tmp_path / "m.onnx")))
    with pytest.raises(InvalidArgumentError, match="'q' is not an input"):
        s.run(None, {"x": _x(SHAPES[0]), "q": 1})
    with pytest.raises(InvalidArgumentError, match=r"no feed for input\(s\) \['x'\]"):
        s.run(None, {})
    with pytest.raises(InvalidArgumentError, match="'z' is not an output"):
        s.run(["z"], {"x": _x(SHAPES[0])})
    with pytest.raises(InvalidArgumentError, match="max_plans"):
        InferenceSession(tmp_path / "m.onnx", max_plans=0)
    with pytest.raises(Exception, match="dimension 1"):
        s.run(None, {"x": _x((1, 7, 8, 8))})      # the model fixes 8 channels


def test_unsupported_operators_are_refused_when_first_seen(tmp_path):
    g = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    path = str(tmp_path / "det.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    s = InferenceSession(path)
    with pytest.raises(UnsupportedOpError, match="Det"):
        s.run(None, {"x": np.eye(3, dtype=np.float32)[None]})


def test_a_tflite_session(tmp_path):
    path = small_cnn(tmp_path / "m.tflite")
    s = InferenceSession(path)
    (i,) = s.get_inputs()
    assert i.shape == (1, 16, 16, 3)
    outs = s.run(None, {"input": _x(i.shape)})
    assert [o.shape for o in outs] == [tuple(a.shape) for a in s.get_outputs()]


def test_a_memory_budget_holds_for_every_signature(tmp_path):
    from pyarena.errors import PlanInfeasibleError
    path = _model(str(tmp_path / "m.onnx"))
    from pyarena.importers import load_model
    from pyarena.planning import plan
    wide = plan(load_model(path, inputs={"x": SHAPES[2]}, native=False)).arena_bytes
    s = InferenceSession(path, native=False, memory_budget=int(wide * 0.8))
    for shape in SHAPES:
        x = _x(shape)
        (y,) = s.run(None, {"x": x})
        np.testing.assert_allclose(y, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
    assert s.memory_info()["arena_bytes"] <= wide * 0.8
    tight = InferenceSession(path, native=False, memory_budget=1024)
    with pytest.raises(PlanInfeasibleError) as ei:
        tight.run(None, {"x": _x(SHAPES[0])})
    assert ei.value.smallest_bytes > 1024
