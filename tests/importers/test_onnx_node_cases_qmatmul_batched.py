"""QLinearMatMul / MatMulInteger with a B of more than two axes (a batched
matmul, batch axes broadcast): the ONNX node cases with every input fed at
run time, and random constant-B models against onnxruntime exactly
(onnxruntime's requantization: the multiplier in float32, round half to
even, saturation)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_qlinearmatmul_3D\w*", ("qlinearmatmul",))


def test_the_forms_are_covered():
    assert {"test_qlinearmatmul_3D_int8_float16", "test_qlinearmatmul_3D_int8_float32",
            "test_qlinearmatmul_3D_uint8_float16", "test_qlinearmatmul_3D_uint8_float32"} \
        <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _t(name, v):
    return helper.make_tensor(name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype),
                              v.shape, v.reshape(-1).tolist())


@pytest.mark.parametrize("a_shape, b_shape", [((2, 5, 4), (2, 4, 3)), ((5, 4), (3, 4, 6)),
                                              ((3, 1, 2, 4), (2, 4, 7))])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_column", [False, True])
def test_batched_qlinear_matmul_matches_onnxruntime(a_shape, b_shape, dt, per_column, tmp_path):
    import pyarena
    rng = np.random.default_rng(3)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max + 1, a_shape).astype(dt)
    b = rng.integers(info.min, info.max + 1, b_shape).astype(dt)
    n = b_shape[-1]
    # per column of each matrix: (..., 1, N), onnxruntime's form
    shape = b_shape[:-2] + (1, n) if per_column else (1,)
    bs = rng.uniform(0.001, 0.01, shape).astype(np.float32)
    bz = rng.integers(info.min // 2, info.max // 2, shape).astype(dt)
    inits = [_t("as", np.array(0.0066, np.float32)), _t("az", np.array(3, dt)), _t("b", b),
             _t("bs", bs), _t("bz", bz), _t("ys", np.array(0.0107, np.float32)),
             _t("yz", np.array(-5 if dt == np.int8 else 120, dt))]
    g = helper.make_graph(
        [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                          ["y"])], "q",
        [helper.make_tensor_value_info("a", onnx.helper.np_dtype_to_tensor_dtype(
            np.dtype(dt)), list(a_shape))],
        [helper.make_tensor_value_info("y", onnx.helper.np_dtype_to_tensor_dtype(
            np.dtype(dt)), None)], inits)
    path = tmp_path / "q.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    got = pyarena.InferenceSession(str(path)).run(None, {"a": a})[0]
    want = list(ort_run(path, {"a": a}).values())[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_batched_matmul_integer_matches_onnxruntime(tmp_path):
    import pyarena
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (2, 3, 5)).astype(np.uint8)
    b = rng.integers(-128, 128, (2, 5, 4)).astype(np.int8)
    g = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], "q",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [_t("b", b), _t("az", np.array(7, np.uint8)), _t("bz", np.array(-3, np.int8))])
    path = tmp_path / "mi.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    got = pyarena.InferenceSession(str(path)).run(None, {"a": a})[0]
    want = list(ort_run(path, {"a": a}).values())[0]
    np.testing.assert_array_equal(got, want)


def test_batches_that_do_not_chain_are_refused(tmp_path):
    import pyarena
    b = np.zeros((2, 5, 4), np.uint8)
    g = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "q",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)], [_t("b", b)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(pyarena.PyArenaError):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {"a": np.zeros((2, 3, 4), np.uint8)})
