"""The ONNX node cases of 3-D MaxPool / AveragePool / LpPool and of
MaxPool's Indices output (kernels/pool_nd.py), through an InferenceSession
against the reference outputs and onnxruntime; random 3-D and 2-D pools
with pads, dilations, ceil mode, count_include_pad and storage_order
against onnxruntime; windows lying in the padding alone refused."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_(averagepool_3d\w*|maxpool_3d\w*|lppool_3d\w*|maxpool_with_argmax\w*)",
              ("averagepool", "maxpool", "lppool"))


def test_the_forms_are_covered():
    assert {"test_averagepool_3d_default", "test_averagepool_3d_dilations_small",
            "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False",
            "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True",
            "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False",
            "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
            "test_maxpool_3d_default", "test_maxpool_3d_dilations",
            "test_maxpool_3d_dilations_use_ref_impl",
            "test_maxpool_3d_dilations_use_ref_impl_large", "test_lppool_3d_default",
            "test_maxpool_with_argmax_2d_precomputed_pads",
            "test_maxpool_with_argmax_2d_precomputed_strides"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _pool(op, x, n_out=1, **attrs):
    outs = ["y", "i"][:n_out]
    g = helper.make_graph(
        [helper.make_node(op, ["x"], outs, **attrs)], "p",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)][:n_out])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _against_ort(model, x, tmp_path):
    import pyarena
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    got = pyarena.InferenceSession(str(path)).run(None, {"x": x})
    want = list(ort_run(path, {"x": x}).values())
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)


GEOMETRIES = [
    dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1]),
    dict(kernel_shape=[3, 3, 3], strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 2, 2], strides=[3, 2, 1], dilations=[2, 1, 2], ceil_mode=1),
    dict(kernel_shape=[3, 1, 2], auto_pad="SAME_UPPER", strides=[2, 1, 2]),
]


@pytest.mark.parametrize("geo", range(len(GEOMETRIES)))
@pytest.mark.parametrize("op, extra", [("MaxPool", {}), ("AveragePool", {}),
                                       ("AveragePool", {"count_include_pad": 1}),
                                       ("LpPool", {"p": 3})])
def test_3d_pools_match_onnxruntime(op, extra, geo, tmp_path):
    attrs = dict(GEOMETRIES[geo], **extra)
    if op == "LpPool":
        attrs.pop("ceil_mode", None)
    x = np.random.default_rng(geo).standard_normal((2, 3, 7, 6, 9)).astype(np.float32)
    _against_ort(_pool(op, x, **attrs), x, tmp_path)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 3], dilations=[2, 1], pads=[0, 1, 1, 1]),
    dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER")])
def test_2d_indices_in_both_storage_orders_match_onnxruntime(attrs, order, tmp_path):
    x = np.random.default_rng(1).standard_normal((2, 3, 7, 5)).astype(np.float32)
    _against_ort(_pool("MaxPool", x, n_out=2, storage_order=order, **attrs), x, tmp_path)


def test_3d_and_1d_indices_match_onnxruntime(tmp_path):
    x = np.random.default_rng(2).standard_normal((1, 2, 5, 6, 4)).astype(np.float32)
    _against_ort(_pool("MaxPool", x, n_out=2, kernel_shape=[2, 2, 3], strides=[1, 2, 1],
                       pads=[1, 0, 1, 0, 1, 1]), x, tmp_path)
    x1 = np.random.default_rng(3).standard_normal((2, 3, 11)).astype(np.float32)
    _against_ort(_pool("MaxPool", x1, n_out=2, kernel_shape=[3], strides=[2]), x1, tmp_path)


def test_ties_take_the_first_tap(tmp_path):
    x = np.zeros((1, 1, 4, 4, 4), np.float32)
    _against_ort(_pool("MaxPool", x, n_out=2, kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
                 x, tmp_path)


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[2, 2, 2], pads=[2, 0, 0, 0, 0, 0]),
                                   dict(kernel_shape=[9, 2, 2])])
def test_windows_in_the_padding_alone_or_a_kernel_too_large_are_refused(attrs):
    import pyarena
    x = np.zeros((1, 1, 4, 4, 4), np.float32)
    with pytest.raises(pyarena.PyArenaError):
        pyarena.InferenceSession(_pool("MaxPool", x, **attrs).SerializeToString()).run(
            None, {"x": x})


@pytest.mark.parametrize("opset", [11, 17, 22])
@pytest.mark.parametrize("op,extra", [("MaxPool", {}), ("AveragePool", {"count_include_pad": 0}),
                                      ("AveragePool", {"count_include_pad": 1})])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_a_ceil_window_that_would_start_in_the_end_padding_is_dropped_at_every_opset(
        opset, op, extra, dims, tmp_path):
    """onnxruntime (and PyTorch, which exported most such files) drops it at
    every opset, ONNX's specification from opset 22 on: the float pools and
    the quantized ones give onnxruntime's shape and values."""
    x = np.random.default_rng(dims).standard_normal([1, 2] + [4] * dims).astype(np.float32)
    m = _pool(op, x, kernel_shape=[2] * dims, strides=[2] * dims, pads=[0] * dims + [1] * dims,
              ceil_mode=1, **extra)
    m.opset_import[0].version = opset
    _against_ort(m, x, tmp_path)
    import pyarena
    path = tmp_path / "m.onnx"
    assert pyarena.InferenceSession(str(path)).run(None, {"x": x})[0].shape[2:] == (2,) * dims
