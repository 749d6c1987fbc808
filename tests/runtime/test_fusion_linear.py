"""The linear-layer rewrite (pyarena.runtime.fusion_linear) and the
MatMul kernel's packed SGEMM: MatMul by constant weights, the bias Add
and the GELU forms or the SiLU after it become one MatMul; the fused graph, the
unfused NumPy path (native=False) and onnxruntime agree on random shapes;
chains whose inner tensors are read elsewhere, and biases that broadcast
over more than the last axis, stay as imported."""
import math

import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor

ROOT2 = np.float32(math.sqrt(2))


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _gelu(form):
    """(nodes from "h" to "y", constants) of one GELU form."""
    c = {"half": np.float32(0.5), "one": np.float32(1)}
    if form == "div":        # Mul(Mul(h, Add(Erf(Div(h, sqrt 2)), 1)), 0.5): a torch export
        return [node("Div", ["h", "r2"], ["d"]), node("Erf", ["d"], ["e"]),
                node("Add", ["e", "one"], ["a"]), node("Mul", ["h", "a"], ["m"]),
                node("Mul", ["m", "half"], ["y"])], dict(c, r2=ROOT2)
    if form == "mul-half-first":   # Mul(Mul(h, 0.5), Add(Erf(Mul(h, 1 / sqrt 2)), 1))
        return [node("Mul", ["rr2", "h"], ["d"]), node("Erf", ["d"], ["e"]),
                node("Add", ["one", "e"], ["a"]), node("Mul", ["h", "half"], ["m"]),
                node("Mul", ["a", "m"], ["y"])], dict(c, rr2=np.float32(1 / math.sqrt(2)))
    if form == "gelu-op":
        return [node("Gelu", ["h"], ["y"])], {}
    if form in ("silu", "silu-swapped"):    # Mul(h, Sigmoid(h)): a decoder's feed-forward
        ins = ["h", "s"] if form == "silu" else ["s", "h"]
        return [node("Sigmoid", ["h"], ["s"]), node("Mul", ins, ["y"])], {}
    return [node("Identity", ["h"], ["y"])], {}


def _linear_model(path, lead, n_in, n_out, form, bias_shape=None, opset=20):
    nodes = [node("MatMul", ["x", "w"], ["mm"])]
    inits = {"w": np.random.default_rng(1).standard_normal((n_in, n_out)).astype(np.float32)
             / np.float32(math.sqrt(n_in))}
    if bias_shape is not None:
        inits["b"] = np.random.default_rng(2).standard_normal(bias_shape).astype(np.float32)
        nodes.append(node("Add", ["mm", "b"], ["h"]))
    else:
        nodes[0].output[0] = "h"
    more, consts = _gelu(form)
    return make_model(nodes + more, {"x": (list(lead) + [n_in], np.float32)},
                      {"y": (None, np.float32)}, dict(inits, **consts), opset=opset, path=path)


def _check(path, x, ops):
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ops
    ref = ort_run(path, {"x": x})["y"]
    ex = Executor(g)
    assert ex.kernels[0].packed is not None         # the packed SGEMM, not NumPy
    fused = ex.run({"x": x})["y"]
    plain = Executor(load_model(str(path), native=False)).run({"x": x})["y"]
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(plain, ref, rtol=1e-5, atol=2e-5)
    return g


@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 5), min_size=1, max_size=3), n_in=st.integers(1, 40),
       n_out=st.integers(1, 40), form=st.sampled_from(["div", "mul-half-first", "gelu-op",
                                                      "silu", "silu-swapped", "none"]),
       bias=st.sampled_from(["row", "flat", None]), seed=st.integers(0, 1000))
def test_linear_layers_fuse_and_match_onnxruntime(tmp_path_factory, lead, n_in, n_out, form,
                                                  bias, seed):
    path = tmp_path_factory.mktemp("lin") / "m.onnx"
    shape = None if bias is None else ((n_out,) if bias == "flat" else
                                       (1,) * len(lead) + (n_out,))
    _linear_model(path, lead, n_in, n_out, form, shape)
    x = (np.random.default_rng(seed).standard_normal(lead + [n_in]) * 2).astype(np.float32)
    g = _check(path, x, ["MatMul"] if form != "none" else ["MatMul", "Identity"])
    mm = g.ops[0]
    assert len(mm.inputs) == (2 if bias is None else 3)
    assert mm.attrs.get("activation") == (None if form == "none" else
                                          "SILU" if form.startswith("silu") else "GELU")


def test_a_sigmoid_read_elsewhere_keeps_the_silu_apart(tmp_path):
    """Sigmoid(h) is a graph output too: the SiLU chain stays (the bias
    goes in), and both outputs match onnxruntime."""
    path = tmp_path / "silu.onnx"
    m = _linear_model(path, [1, 1], 16, 20, "silu", (20,))
    m.graph.output.append(helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, None))
    onnx.save(m, str(path))
    x = np.random.default_rng(0).standard_normal((1, 1, 16)).astype(np.float32)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["MatMul", "Sigmoid", "Mul"]
    assert g.ops[0].attrs.get("activation") is None
    out, ref = Executor(g).run({"x": x}), ort_run(path, {"x": x})
    for k in ("y", "s"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=2e-5)


def test_a_bias_over_the_rows_is_not_fused(tmp_path):
    """b (rows, n_out) adds a value per row: not a bias along the last axis."""
    path = tmp_path / "rows.onnx"
    _linear_model(path, [4], 6, 5, "div", (4, 5))
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    g = _check(path, x, ["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"])
    assert len(g.ops[0].inputs) == 2 and g.ops[0].attrs.get("activation") is None


def test_a_bias_read_elsewhere_keeps_the_gelu_apart(tmp_path):
    """h is read by the GELU chain and is a graph output too: the Add goes
    in (its input mm has one reader), the GELU chain stays."""
    path = tmp_path / "shared.onnx"
    m = _linear_model(path, [3, 4], 8, 8, "div", (8,))
    m.graph.output.append(helper.make_tensor_value_info("h", onnx.TensorProto.FLOAT, None))
    onnx.save(m, str(path))
    x = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["MatMul", "Div", "Erf", "Add", "Mul", "Mul"]
    assert len(g.ops[0].inputs) == 3 and g.ops[0].attrs.get("activation") is None
    out, ref = Executor(g).run({"x": x}), ort_run(path, {"x": x})
    for k in ("y", "h"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("name, value", [("r2", 2.0), ("half", 0.25)])
def test_a_wrong_constant_in_the_chain_is_not_a_gelu(tmp_path, name, value):
    """Div by 2 instead of sqrt 2, or a last Mul by 0.25 instead of 0.5:
    not the erf GELU; only the bias fuses."""
    path = tmp_path / "not.onnx"
    m = _linear_model(path, [5], 6, 7, "div", (7,))
    for init in m.graph.initializer:
        if init.name == name:
            init.CopyFrom(onnx.numpy_helper.from_array(np.float32(value), name))
    onnx.save(m, str(path))
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    _check(path, x, ["MatMul", "Div", "Erf", "Add", "Mul", "Mul"])


def test_a_column_of_values_is_not_a_bias(tmp_path):
    """b (N, 1) against a (N, N) product adds a value per row, though it
    holds N values: not fused."""
    path = tmp_path / "col.onnx"
    _linear_model(path, [4], 6, 4, "none", (4, 1))
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    g = _check(path, x, ["MatMul", "Add", "Identity"])
    assert len(g.ops[0].inputs) == 2


def test_bias_gelu_takes_its_bias_into_the_matmul(tmp_path):
    """com.microsoft BiasGelu(MatMul(x, W), b): one MatMul with bias and GELU."""
    rng = np.random.default_rng(3)
    inits = {"w": rng.standard_normal((12, 10)).astype(np.float32) / 3,
             "b": rng.standard_normal(10).astype(np.float32)}
    path = tmp_path / "bg.onnx"
    m = make_model([node("MatMul", ["x", "w"], ["mm"]),
                    helper.make_node("BiasGelu", ["mm", "b"], ["y"], domain="com.microsoft")],
                   {"x": ([2, 3, 12], np.float32)}, {"y": (None, np.float32)}, inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(path))
    x = rng.standard_normal((2, 3, 12)).astype(np.float32) * 2
    g = _check(path, x, ["MatMul"])
    assert g.ops[0].attrs["activation"] == "GELU" and len(g.ops[0].inputs) == 3


def test_a_fused_graph_on_the_numpy_paths_adds_the_bias_and_the_gelu(tmp_path):
    """The rewritten graph run with native kernels off: NumPy's product,
    the bias input added, the GELU applied after (as onnxruntime)."""
    path = tmp_path / "np.onnx"
    _linear_model(path, [3, 5], 7, 6, "div", (6,))
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["MatMul"] and len(g.ops[0].inputs) == 3
    g.native = False
    ex = Executor(g)
    assert ex.kernels[0].packed is None
    x = np.random.default_rng(4).standard_normal((3, 5, 7)).astype(np.float32) * 2
    np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"], rtol=1e-5,
                               atol=2e-5)


def _skip_norm_model(path, first_reads=("mm", "res"), extra_outputs=(), seed=4, bias=True):
    """x -> MatMul(W) -> SkipLayerNormalization(mm, res, gamma, beta, bias)
    -> MatMul(W2) -> y: the attention output projection and norm of an
    encoder fused by onnxruntime's transformer optimizer."""
    rng = np.random.default_rng(seed)
    inits = {"w": rng.standard_normal((16, 16)).astype(np.float32) / 4,
             "w2": rng.standard_normal((16, 8)).astype(np.float32) / 4,
             "gamma": 1 + rng.standard_normal(16).astype(np.float32) / 10,
             "beta": rng.standard_normal(16).astype(np.float32) / 10,
             "bias": rng.standard_normal(16).astype(np.float32)}
    outs = ["n"] + list(extra_outputs)
    m = make_model([node("MatMul", ["x", "w"], ["mm"]),
                    helper.make_node("SkipLayerNormalization",
                                     list(first_reads) + ["gamma", "beta"] +
                                     (["bias"] if bias else []), outs,
                                     domain="com.microsoft", epsilon=1e-5),
                    node("MatMul", ["n", "w2"], ["y"])],
                   {"x": ([2, 5, 16], np.float32), "res": ([2, 5, 16], np.float32)},
                   {"y": (None, np.float32), **{o: (None, np.float32)
                                                for o in extra_outputs}}, inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(path))
    return {"x": rng.standard_normal((2, 5, 16)).astype(np.float32),
            "res": rng.standard_normal((2, 5, 16)).astype(np.float32)}


@pytest.mark.parametrize("first_reads", [("mm", "res"), ("res", "mm")])
def test_a_skip_norms_bias_moves_into_the_matmul_and_the_norm_runs_in_the_call_list(
        tmp_path, first_reads):
    path = tmp_path / "skip.onnx"
    feeds = _skip_norm_model(path, first_reads)
    g = load_model(str(path))
    mm, skip = g.ops[0], g.ops[1]
    assert len(mm.inputs) == 3 and len(skip.inputs) == 4       # the bias moved
    ex = Executor(g)
    got = ex.run(feeds)["y"]
    np.testing.assert_allclose(got, ort_run(path, feeds)["y"], rtol=1e-5, atol=1e-5)
    # the norm is two records of a call list (no Python call of its own) ...
    names = [n for b in ex._runner.busy if hasattr(b[0], "calls") for n in b[0].calls.names]
    assert names.count(skip.name) == 2
    # ... which compute what its own run computes, bit for bit
    from pyarena._native.kernels import CallList
    k, xs, ys, sc = next(b for b in ex._runner.bound if b[0].op is skip)
    CallList(k.native_calls_scratch(xs, ys, sc)).run(None, "records")
    by_records = ys[0].copy()
    ys[0].fill(np.nan)
    k(xs, ys, sc)
    assert np.array_equal(by_records, ys[0])


def test_non_finite_rows_through_the_skip_norms_records_match_its_own_run_and_onnxruntime(
        tmp_path):
    """A NaN in the skip input and an inf in the input poison their own rows
    only, as onnxruntime's kernel does, on the call-list records and on the
    norm's own run alike."""
    path = tmp_path / "skip.onnx"
    feeds = _skip_norm_model(path)
    feeds["res"][0, 1, 3] = np.nan
    feeds["x"][1, 4, 0] = np.inf
    g = load_model(str(path))
    ex = Executor(g)
    got = ex.run(feeds)["y"]
    want = ort_run(path, feeds)["y"]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 1]).all() and np.isfinite(got[0, 0]).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    from pyarena._native.kernels import CallList
    skip = g.ops[1]
    k, xs, ys, sc = next(b for b in ex._runner.bound if b[0].op is skip)
    CallList(k.native_calls_scratch(xs, ys, sc)).run(None, "records")
    by_records = ys[0].copy()
    ys[0].fill(0)
    k(xs, ys, sc)
    assert np.array_equal(by_records, ys[0], equal_nan=True)
    assert np.isnan(by_records).any()


@pytest.mark.parametrize("bias", [True, False])
def test_a_skip_norm_whose_statistics_are_read_keeps_its_bias_and_its_own_run(tmp_path, bias):
    path = tmp_path / "skip.onnx"
    feeds = _skip_norm_model(path, extra_outputs=("mean",), bias=bias)
    g = load_model(str(path))
    assert len(g.ops[0].inputs) == 2 and len(g.ops[1].inputs) == 4 + bias
    got = Executor(g).run(feeds)
    want = ort_run(path, feeds)
    for name in ("y", "mean"):
        np.testing.assert_allclose(got[name].reshape(want[name].shape), want[name],
                                   rtol=1e-5, atol=1e-5)
