"""InferenceSession: inputs with symbolic dims, one plan per input-shape
signature (LRU), one activation arena that grows to the largest plan,
weights shared across signatures, outputs equal to onnxruntime's."""
from dataclasses import replace

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
                arenas.append(s._plans[next(reversed(s._plans))].plan.arena_bytes)
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
    for feeds in (None, [("x", _x(SHAPES[0]))], _x(SHAPES[0])):
        with pytest.raises(InvalidArgumentError, match="feeds must be a dict"):
            s.run(None, feeds)
    with pytest.raises(InvalidArgumentError, match="output_names must be a list"):
        s.run("y", {"x": _x(SHAPES[0])})
    assert len(s.run(None, {"x": _x(SHAPES[0])})) == len(s.get_outputs())


def test_unsupported_operators_are_refused_when_first_seen(tmp_path):
    g = helper.make_graph([helper.make_node("Bernoulli", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 3])])
    path = str(tmp_path / "bernoulli.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), path)
    s = InferenceSession(path)
    with pytest.raises(UnsupportedOpError, match="Bernoulli"):
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


# -- a new signature reuses what does not depend on the shapes ---------------------
def _width_model(path):
    """x[1, 4, 8, W] -> Conv (32 channels) -> BatchNormalization -> Relu (fused
    into the Conv) -> depthwise Conv + Relu (the native kernel: packed
    weights) -> Reshape to [1, 256, W] through Shape / Gather / Concat -> Transpose
    -> MatMul with Transpose(wt) (a static fold) -> + Constant node -> y[1, W, 6]."""
    rng = np.random.default_rng(1)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    i64 = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r0"]),
        helper.make_node("Conv", ["r0", "wd"], ["d"], pads=[1, 1, 1, 1], group=32),
        helper.make_node("Relu", ["d"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "three"], ["width"], axis=0),
        helper.make_node("Concat", ["head", "width"], ["shape"], axis=0),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Transpose", ["f"], ["ft"], perm=[0, 2, 1]),
        helper.make_node("Transpose", ["wt"], ["wm"], perm=[1, 0]),     # static
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(f32(6))),
        helper.make_node("MatMul", ["ft", "wm"], ["y0"]),
        helper.make_node("Add", ["y0", "k"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "W", 6])],
        [numpy_helper.from_array(f32(32, 4, 3, 3), "w"),
         numpy_helper.from_array(f32(32, 1, 3, 3), "wd"),
         numpy_helper.from_array(np.abs(f32(32)) + 0.5, "g"),
         numpy_helper.from_array(f32(32), "b"), numpy_helper.from_array(f32(32), "m"),
         numpy_helper.from_array(np.abs(f32(32)) + 0.1, "v"),
         numpy_helper.from_array(f32(6, 256), "wt"), i64([3], "three"),
         i64([1, 256], "head")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


WIDTHS = [16, 24, 40, 32, 64]


def _wx(w, seed=0):
    return _x((1, 4, 8, w), seed)


def test_a_width_cycle_matches_fresh_imports_and_onnxruntime(tmp_path):
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    path = _width_model(str(tmp_path / "w.onnx"))
    s = InferenceSession(path)
    for rnd in range(2):
        for w in WIDTHS:
            x = _wx(w, w)
            (y,) = s.run(None, {"x": x})
            fresh = Executor(load_model(path, inputs={"x": x.shape})).run({"x": x})["y"]
            np.testing.assert_allclose(y, fresh, rtol=1e-6, atol=1e-6)
            ref = ort_run(path, {"x": x})["y"]
            # float32 sums in another order: a few ulps of the largest
            # values (some hundreds here) apart
            atol = max(1e-5, 1e-6 * float(np.abs(ref).max()))
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=atol)
    assert s.memory_info()["plans"] == len(WIDTHS)


def test_new_widths_add_no_weight_bytes_and_share_the_folds(tmp_path):
    path = _width_model(str(tmp_path / "w.onnx"))
    s = InferenceSession(path)
    s.run(None, {"x": _wx(WIDTHS[0])})
    weights = s.memory_info()["weights_bytes"]
    for w in WIDTHS[1:] + WIDTHS:
        s.run(None, {"x": _wx(w)})
        assert s.memory_info()["weights_bytes"] == weights
    graphs = [entry.graph for entry in s._plans.values()]
    conv = [[op for op in g.ops if op.op_type == "Conv"][0] for g in graphs]
    assert all(c.attrs.get("activation") for c in conv)     # BN and Relu fused
    # the fused weights, the folded Transpose and the Constant: one array each
    for pick in (lambda g, c: g.tensors[c.inputs[1]].data,
                 lambda g, c: g.tensors[c.inputs[2]].data,
                 lambda g, c: g.tensors["wm"].data, lambda g, c: g.tensors["k"].data):
        first = pick(graphs[0], conv[0])
        assert all(pick(g, c) is first for g, c in zip(graphs[1:], conv[1:]))


def test_a_retargeted_signature_shares_the_shape_folds_equal_to_the_first(tmp_path):
    """N folded from the input's shape: the retargeted signature with the
    first's N reads the first's arrays, the other its own values."""
    s = InferenceSession(_model(str(tmp_path / "m.onnx")))
    for shape in SHAPES[:3]:                    # N = 1, 2, 1
        s.run(None, {"x": _x(shape)})
    graphs = [entry.graph for entry in s._plans.values()]
    derived = sorted(s._template.derived)
    assert derived
    for name in derived:
        first, other, again = (g.tensors[name].data for g in graphs)
        assert again is first and other is not first
        assert not np.array_equal(other, first)


def test_a_signature_imported_in_full_again_takes_the_static_folds(tmp_path):
    """Under a memory budget a new signature is imported in full (not
    re-sized), from the model without its static nodes: the transposed
    weight that the first import folded is read from the cache -- the same
    array -- and the outputs are those of a fresh import."""
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    path = _width_model(str(tmp_path / "w.onnx"))
    s = InferenceSession(path, memory_budget=1 << 30)
    for w in WIDTHS[:2]:
        x = _wx(w, w)
        (y,) = s.run(None, {"x": x})
        fresh = Executor(load_model(path, inputs={"x": x.shape})).run({"x": x})["y"]
        np.testing.assert_allclose(y, fresh, rtol=1e-6, atol=1e-6)
    assert s._template is None and s._cache.reduced is not None    # no re-sizing
    first, second = (entry.graph for entry in s._plans.values())
    assert "wm" not in [o for op in second.ops for o in op.outputs]
    assert second.tensors["wm"].data is first.tensors["wm"].data


def test_the_file_is_parsed_once_per_session(tmp_path, monkeypatch):
    import pyarena.importers.onnx as onnx_importer
    path = _width_model(str(tmp_path / "w.onnx"))
    calls = []
    real = onnx_importer.parse_model
    monkeypatch.setattr(onnx_importer, "parse_model",
                        lambda o, p: calls.append(p) or real(o, p))
    s = InferenceSession(path)
    described = len(calls)
    for w in WIDTHS:
        s.run(None, {"x": _wx(w)})
    assert len(calls) == described + 1


def test_cached_widths_allocate_nothing_after_the_warm_up(tmp_path):
    s = InferenceSession(_width_model(str(tmp_path / "w.onnx")))
    xs = [_wx(w) for w in WIDTHS]
    for x in xs:                        # the arena grows to the widest plan
        s.run(None, {"x": x}, copy=False)
    for x in xs:                        # the plans bound again to that arena
        s.run(None, {"x": x}, copy=False)
    with numpy_allocator(Pool()) as counter:
        for x in xs + xs:
            s.run(None, {"x": x}, copy=False)
    assert counter.allocations == 0


def test_errors_of_a_new_signature_are_those_of_load_model(tmp_path):
    from pyarena.importers import load_model
    path = _width_model(str(tmp_path / "w.onnx"))
    s = InferenceSession(path)
    s.run(None, {"x": _wx(16)})             # the import is cached now
    for bad in [(1, 5, 8, 16), (1, 4, 8, 0, 2)]:
        with pytest.raises(Exception) as fresh:
            load_model(path, inputs={"x": bad})
        with pytest.raises(type(fresh.value)) as ours:
            s.run(None, {"x": _x(bad)})
        assert str(ours.value) == str(fresh.value)


def _branch_model(path):
    """y = If(flag) then x + c else x * c, where each branch makes its own
    Constant ``c`` (the same name, other values)."""
    def branch(name, op, value):
        return helper.make_graph(
            [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
                np.full(3, value, np.float32))),
             helper.make_node(op, ["x", "c"], [name])], name, [],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)])
    g = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], then_branch=branch("t", "Add", 2.0),
                          else_branch=branch("e", "Mul", -3.0))], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_if_branches_are_never_taken_from_another_signature(tmp_path):
    path = _branch_model(str(tmp_path / "if.onnx"))
    s = InferenceSession(path)
    for flag, n in [(True, 1), (False, 1), (False, 2), (True, 2), (False, 1)]:
        feeds = {"x": _x((n, 3), n), "flag": np.array(flag)}
        (y,) = s.run(None, feeds)
        np.testing.assert_allclose(y, ort_run(path, feeds)["y"], rtol=1e-6)


# -- a new signature retargeted from the last imported graph ------------------------
def _graph_facts(g):
    """What a plan and the kernels see of a graph: every op (with its
    attributes and notes, but not the slack planner's own) and tensor, and
    the constants' values."""
    ops = [(op.name, op.op_type, op.inputs, op.outputs, op.scratch_bytes,
            sorted((k, repr(v)) for k, v in op.attrs.items()),
            repr(replace(op.notes, scratch_budget=None, infer=None)))
           for op in g.ops]
    tensors = {n: (tuple(t.shape), str(t.dtype), t.role,
                   None if t.data is None else np.asarray(t.data).tobytes())
               for n, t in g.tensors.items()}
    return ops, tensors


def _kernel_facts(ex):
    """What the kernels of an executor are: type, path, scratch, bands and
    the weights they laid out (the bytes)."""
    out = []
    for k in ex.kernels:
        laid = [None if getattr(k, a, None) is None else np.asarray(getattr(k, a)).tobytes()
                for a in ("wm", "wt", "packed", "bias")]
        out.append((k.op.name, type(k).__name__, k.path, k.scratch_bytes,
                    getattr(k, "bands", None), laid))
    return out


def _plan_facts(p):
    return (p.arena_bytes, p.lower_bound_bytes, sorted(p.offsets.items()),
            sorted(p.scratch.items()), p.slack)


@pytest.fixture(scope="module")
def width_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("resize")
    return {"width": (_width_model(str(d / "w.onnx")), _wx),
            "shape": (_model(str(d / "m.onnx")), _x)}


@settings(max_examples=12, deadline=None)
@given(which=st.sampled_from(["width", "shape"]),
       picks=st.lists(st.integers(0, 4), min_size=2, max_size=5))
def test_a_retargeted_signature_is_a_fresh_import(width_models, which, picks):
    """Every signature after the first is retargeted from the last imported
    graph, and its graph, plan, kernels and outputs are those of a fresh
    import at that shape -- its convolutions' weights as laid out taken
    from the last signature's kernels (Conv._lender), the rest built anew."""
    from unittest import mock

    import pyarena.importers.retarget as retarget_mod     # (the session retargets through it)
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels.conv import Conv
    from pyarena.runtime.slack import plan_in_slack
    path, make = width_models[which]
    shapes = [WIDTHS[i] if which == "width" else SHAPES[i % len(SHAPES)] for i in picks]
    made, real = [], retarget_mod.retarget
    lent, lender = [], Conv._lender
    with mock.patch.object(retarget_mod, "retarget",
                           lambda *a: made.append(real(*a)) or made[-1]), \
            mock.patch.object(Conv, "_lender",
                              lambda self, mode: lent.append(lender(self, mode)) or lent[-1]):
        s = InferenceSession(path)
        seen = set()
        for shape in shapes:
            x = make(shape, 3)
            (y,) = s.run(None, {"x": x})
            entry, ex = s._plans[next(reversed(s._plans))], s._last
            g, p = entry.graph, entry.plan
            fresh = load_model(path, inputs={"x": x.shape})
            fp = plan_in_slack(fresh)
            assert _graph_facts(g) == _graph_facts(fresh)
            assert _plan_facts(p) == _plan_facts(fp)
            fresh_ex = Executor(fresh, fp)
            assert _kernel_facts(ex) == _kernel_facts(fresh_ex)
            np.testing.assert_array_equal(y, fresh_ex.run({"x": x})["y"])
            seen.add(x.shape)
    assert len(made) == len(seen) - 1 and all(g is not None for g in made)
    assert any(k is not None for k in lent) == (len(made) > 0)


def test_a_recurrent_layer_lends_its_laid_out_weights_to_new_lengths(tmp_path):
    """A bidirectional LSTM over a sequence of symbolic length (a CRNN's
    head): each new length builds its kernel from the last one's, which
    lends its transposed W and R (the same arrays, not copied again, no
    weight bytes added); outputs equal onnxruntime's at every length."""
    from helpers.onnx_util import make_model
    r = np.random.default_rng(3)
    H, I = 8, 6
    path = tmp_path / "lstm.onnx"
    make_model([helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=H,
                                 direction="bidirectional")],
               {"x": (["S", 1, I], np.float32)}, {"y": (None, np.float32)},
               {"W": r.standard_normal((2, 4 * H, I)).astype(np.float32) * 0.3,
                "R": r.standard_normal((2, 4 * H, H)).astype(np.float32) * 0.3,
                "B": r.standard_normal((2, 8 * H)).astype(np.float32) * 0.1}, path=path)
    s = InferenceSession(str(path))
    laid_out, weights = [], []
    for n in (3, 5, 2, 7):
        x = r.standard_normal((n, 1, I)).astype(np.float32)
        (y,) = s.run(None, {"x": x})
        np.testing.assert_allclose(y, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
        k = next(k for k in s._last.kernels if k.op.op_type == "LSTM")
        laid_out.append((k.wt, k.rt))
        weights.append(s.memory_info()["weights_bytes"])
    assert all(w is laid_out[0][0] and rt is laid_out[0][1] for w, rt in laid_out)
    assert len(set(weights)) == 1


@pytest.mark.parametrize("outs,nodes", [
    (["x"], []),
    (["x", "y"], [helper.make_node("Relu", ["x"], ["y"])]),
    (["y", "x"], [helper.make_node("Relu", ["x"], ["y"])]),
])
def test_an_input_the_model_also_outputs_is_returned_as_onnxruntime_returns_it(
        tmp_path, outs, nodes):
    """A graph output that is a graph input (a model passing a tensor
    through): its value, of the input's dtype, in the model's order -- with
    and without copy, and from the compiled file."""
    import pyarena
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "p.onnx"
    onnx.save(m, str(path))
    pyarena.compile(str(path), str(tmp_path / "p.pa"))
    for src in (path, tmp_path / "p.pa"):
        s = InferenceSession(str(src))
        assert [o.name for o in s.get_outputs()] == outs
        for x in (np.arange(6, dtype=np.float32).reshape(2, 3) - 3, np.full((2, 3), -7.5, np.float32)):
            want = list(ort_run(path, {"x": x}).values())
            for copy in (True, False):
                got = s.run(None, {"x": x}, copy=copy)
                assert len(got) == len(want)
                for a, b in zip(got, want):
                    assert a.dtype == b.dtype and np.array_equal(a, b)
            assert np.array_equal(s.run(["x"], {"x": x})[0], x)
