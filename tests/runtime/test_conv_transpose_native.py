"""ConvTranspose's native path (kernels/conv_transpose_native.py, the C
core's pa_deconv2d): taken where the taps do not overlap (stride = kernel,
no dilation, no padding, groups 1, NCHW) and there equal to the NumPy path
(native=False) and to onnxruntime within float32 rounding, on random
shapes (odd widths: short vector tiles; 1 to 9 output channels: the
one-channel tile and a short last block of four; kernels 1 to 4 wide);
overlapping taps, padding, groups, dilations and 1-D keep the NumPy path."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor


def _model(path, rng, x_shape, w_shape, bias, **attrs):
    inits = {"w": rng.standard_normal(w_shape).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(np.float32)
        ins.append("b")
    make_model([helper.make_node("ConvTranspose", ins, ["y"], **attrs)],
               {"x": (list(x_shape), np.float32)}, {"y": (None, np.float32)}, inits, path=path)
    return {"x": rng.standard_normal(x_shape).astype(np.float32)}


def _both(path, feeds):
    fast, plain = Executor(load_model(str(path))), Executor(load_model(str(path), native=False))
    return fast, plain, fast.run(feeds)["y"].copy(), plain.run(feeds)["y"].copy()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), c_in=st.integers(1, 40), c_out=st.integers(1, 9),
       h=st.integers(1, 6), w=st.integers(1, 70), kh=st.integers(1, 4), kw=st.integers(1, 4),
       bias=st.booleans(), seed=st.integers(0, 1000))
def test_disjoint_taps_run_native_and_match_numpy_and_onnxruntime(
        tmp_path_factory, n, c_in, c_out, h, w, kh, kw, bias, seed):
    path = tmp_path_factory.mktemp("ct") / "m.onnx"
    feeds = _model(path, np.random.default_rng(seed), (n, c_in, h, w), (c_in, c_out, kh, kw),
                   bias, strides=[kh, kw], kernel_shape=[kh, kw])
    fast, plain, got, want = _both(path, feeds)
    assert fast.kernels[0].path == "native" and plain.kernels[0].path == "numpy"
    assert fast.kernels[0].scratch_bytes == 0
    assert got.shape == (n, c_out, h * kh, w * kw)
    tol = dict(rtol=1e-5, atol=1e-5 * np.sqrt(c_in))
    np.testing.assert_allclose(got, want, **tol)
    np.testing.assert_allclose(got, ort_run(path, feeds)["y"], **tol)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 4, 5, 7), (4, 3, 3, 3), dict(strides=[2, 2])),                 # overlapping taps
    ((1, 4, 5, 7), (4, 3, 2, 2), dict(strides=[2, 2], pads=[1, 0, 1, 0])),
    ((1, 4, 5, 7), (4, 3, 2, 2), dict(strides=[2, 2], group=2)),
    ((1, 4, 5, 7), (4, 3, 2, 2), dict(strides=[2, 2], output_padding=[1, 1])),
    ((1, 4, 5, 7), (4, 3, 2, 2), dict(strides=[3, 3], dilations=[2, 2])),
    ((1, 4, 9), (4, 3, 2), dict(strides=[2])),                          # 1-D
], ids=str)
def test_other_geometries_keep_the_numpy_path(tmp_path, x_shape, w_shape, attrs):
    path = tmp_path / "m.onnx"
    feeds = _model(path, np.random.default_rng(0), x_shape, w_shape, True, **attrs)
    fast, _, got, want = _both(path, feeds)
    assert fast.kernels[0].path == "numpy"
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, ort_run(path, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_the_2x2_stride_2_upsampling_of_a_text_detector(tmp_path):
    """PP-OCRv4's head: 24 -> 24 channels at 80x80 (blocks of four, rows of
    32 + 32 + 16 pixels) and 24 -> 1 at 160x160 (the one-channel tile)."""
    rng = np.random.default_rng(3)
    for c_out, side in ((24, 80), (1, 160)):
        path = tmp_path / f"m{c_out}.onnx"
        feeds = _model(path, rng, (1, 24, side, side), (24, c_out, 2, 2), True,
                       strides=[2, 2], kernel_shape=[2, 2], pads=[0, 0, 0, 0])
        fast, _, got, want = _both(path, feeds)
        assert fast.kernels[0].path == "native"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, ort_run(path, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_the_executor_batches_the_native_path_as_call_records(tmp_path):
    """Two native ConvTransposes in a row run as two ``deconv2d`` records of
    one call list, with the bits of the op-by-op run (``profile`` calls each
    kernel alone)."""
    rng = np.random.default_rng(5)
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["t"], strides=[2, 2]),
                helper.make_node("ConvTranspose", ["t", "w2"], ["y"], strides=[2, 2])],
               {"x": ([1, 8, 6, 9], np.float32)}, {"y": (None, np.float32)},
               {"w1": rng.standard_normal((8, 5, 2, 2)).astype(np.float32),
                "b1": rng.standard_normal(5).astype(np.float32),
                "w2": rng.standard_normal((5, 1, 2, 2)).astype(np.float32)}, path=path)
    ex = Executor(load_model(str(path)))
    kinds = [list(getattr(getattr(s[0], "calls", None), "kinds", [])) for s in ex._runner.busy]
    assert ["deconv2d", "deconv2d"] in kinds
    feeds = {"x": rng.standard_normal((1, 8, 6, 9)).astype(np.float32)}
    got = ex.run(feeds)["y"].copy()
    ex._runner._feed(feeds)     # (the plan may have lent the input's memory out)
    k0, xs, ys, sc = ex._runner.bound[0]
    k1, xs1, ys1, sc1 = ex._runner.bound[1]
    k0(xs, ys, sc)
    k1(xs1, ys1, sc1)
    np.testing.assert_array_equal(ys1[0], got)
    np.testing.assert_allclose(got, ort_run(path, feeds)["y"], rtol=1e-5, atol=1e-5)
