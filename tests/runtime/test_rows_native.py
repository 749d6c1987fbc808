"""The float32 row kernels (kernels/rows.c through kernels/rows.py):
Softmax over the last axis, LayerNormalization and SkipLayerNormalization
run natively; on random shapes and values they agree with the NumPy path
(native=False) and with onnxruntime, a masked logit (-inf) gives 0 and a
row of -inf only NaN (as onnxruntime)."""
import numpy as np
import onnx
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor


def _run_all(path, feeds, native_kind):
    g = load_model(str(path))
    ex = Executor(g)
    assert ex.kernels[0].path == ("native" if native_kind else "numpy")
    got = ex.run(feeds)["y"]
    plain = Executor(load_model(str(path), native=False)).run(feeds)["y"]
    return got, plain, ort_run(path, feeds)["y"]


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=4), scale=st.sampled_from(
    [1.0, 30.0]), seed=st.integers(0, 1000))
def test_softmax_last_axis_native_numpy_and_onnxruntime_agree(tmp_path_factory, shape, scale,
                                                              seed):
    path = tmp_path_factory.mktemp("sm") / "m.onnx"
    make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
               {"x": (shape, np.float32)}, {"y": (None, np.float32)}, path=path)
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    got, plain, ref = _run_all(path, {"x": x}, True)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(plain, ref, rtol=2e-5, atol=1e-7)


def test_softmax_masked_logits_and_empty_rows(tmp_path):
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
               {"x": ([3, 4], np.float32)}, {"y": (None, np.float32)}, path=path)
    x = np.array([[0, -np.inf, 1, 2], [-np.inf] * 4, [5, -10000, 5, 5]], np.float32)
    got, plain, ref = _run_all(path, {"x": x}, True)
    assert got[0, 1] == 0 and got[2, 1] == 0 and np.isnan(got[1]).all()
    np.testing.assert_allclose(got, ref, rtol=2e-6)
    np.testing.assert_allclose(plain, ref, rtol=2e-6)


def test_softmax_on_another_axis_stays_numpy(tmp_path):
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("Softmax", ["x"], ["y"], axis=0)],
               {"x": ([3, 5], np.float32)}, {"y": (None, np.float32)}, path=path)
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    got, plain, ref = _run_all(path, {"x": x}, False)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 20), min_size=1, max_size=3), n=st.integers(1, 300),
       shift=st.sampled_from([0.0, 20.0]), bias=st.booleans(), seed=st.integers(0, 1000))
def test_layer_norm_native_numpy_and_onnxruntime_agree(tmp_path_factory, lead, n, shift, bias,
                                                       seed):
    rng = np.random.default_rng(seed)
    path = tmp_path_factory.mktemp("ln") / "m.onnx"
    inits = {"g": rng.standard_normal(n).astype(np.float32)}
    ins = ["x", "g"]
    if bias:
        inits["b"] = rng.standard_normal(n).astype(np.float32)
        ins.append("b")
    make_model([helper.make_node("LayerNormalization", ins, ["y"], axis=-1, epsilon=1e-5)],
               {"x": (lead + [n], np.float32)}, {"y": (None, np.float32)}, inits, path=path)
    x = (rng.standard_normal(lead + [n]) * 3 + shift).astype(np.float32)
    got, plain, ref = _run_all(path, {"x": x}, True)
    # float32 rounding of x itself moves a row's output by about
    # ulp(|x|) / std * |g|: a short row shifted by 20 can have a tiny spread,
    # and then every runtime is that far from the exact answer
    x64 = x.astype(np.float64)
    spread = np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    cond = 8 * np.finfo(np.float32).eps * np.abs(x64).max(-1, keepdims=True) / spread
    tol = 2e-5 + cond * np.abs(inits["g"]).max() + 1e-4 * np.abs(ref)
    assert (np.abs(got - ref) <= tol).all(), np.abs(got - ref).max()
    assert (np.abs(got - plain) <= tol).all(), np.abs(got - plain).max()


def test_layer_norm_with_its_statistics_read_stays_numpy(tmp_path):
    path = tmp_path / "m.onnx"
    n = 6
    make_model([helper.make_node("LayerNormalization", ["x", "g"], ["y", "mean"], axis=-1)],
               {"x": ([2, n], np.float32)}, {"y": (None, np.float32),
                                              "mean": (None, np.float32)},
               {"g": np.ones(n, np.float32)}, path=path)
    x = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32)
    got, plain, ref = _run_all(path, {"x": x}, False)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 3), seq=st.integers(1, 9), n=st.integers(1, 64),
       seed=st.integers(0, 1000))
def test_skip_layer_norm_native_and_onnxruntime_agree(tmp_path_factory, batch, seq, n, seed):
    rng = np.random.default_rng(seed)
    path = tmp_path_factory.mktemp("sln") / "m.onnx"
    inits = {"g": rng.standard_normal(n).astype(np.float32),
             "be": rng.standard_normal(n).astype(np.float32),
             "bi": rng.standard_normal(n).astype(np.float32)}
    m = make_model([helper.make_node("SkipLayerNormalization", ["x", "s", "g", "be", "bi"],
                                     ["y"], domain="com.microsoft", epsilon=1e-6)],
                   {"x": ([batch, seq, n], np.float32), "s": ([batch, seq, n], np.float32)},
                   {"y": (None, np.float32)}, inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(path))
    feeds = {k: rng.standard_normal((batch, seq, n)).astype(np.float32) for k in "xs"}
    got = Executor(load_model(str(path))).run(feeds)["y"]
    plain = Executor(load_model(str(path), native=False)).run(feeds)["y"]
    ref = ort_run(path, feeds)["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(plain, ref, rtol=1e-4, atol=2e-5)
