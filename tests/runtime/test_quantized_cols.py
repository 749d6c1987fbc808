"""MatMulInteger with a few columns of B on the C core's few-columns
product (``pa_qcols_run``, runtime/kernels/quantized_cols.py): bit for bit
the NumPy path and onnxruntime, A's zero point a constant or fed at run
time (as DynamicQuantizeLinear gives it), k across the 64-byte steps'
tails; wider B stays on the 8-bit GEMM."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels.quantized_cols import MAX_COLUMNS, QColsNative  # noqa: E402


def _tp(dt):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _model(path, a_shape, b, bz, az, fed_zp):
    """MatMulInteger (x, b, az, bz); az a graph input when ``fed_zp``."""
    inputs = [helper.make_tensor_value_info("x", _tp(np.uint8), list(a_shape))]
    inits = {"b": b, "bz": bz}
    if fed_zp:
        inputs.append(helper.make_tensor_value_info("az", _tp(np.uint8), []))
    else:
        inits["az"] = az
    g = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "b", "az", "bz"], ["y"])], "q", inputs,
        [helper.make_tensor_value_info("y", _tp(np.int32), None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _run(path, feeds, native):
    ex = Executor(load_model(str(path), native=native))
    return np.array(ex.run(feeds)["y"]), ex.kernels[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.lists(st.integers(1, 9), min_size=1, max_size=3), k=st.integers(1, 300),
       n=st.integers(1, MAX_COLUMNS), bdt=st.sampled_from([np.uint8, np.int8]),
       per_column=st.booleans(), fed_zp=st.booleans(), seed=st.integers(0, 2**31))
def test_few_columns_are_the_numpy_path_and_onnxruntime(tmp_path, m, k, n, bdt, per_column,
                                                        fed_zp, seed):
    rng = np.random.default_rng(seed)
    bi = np.iinfo(bdt)
    x = rng.integers(0, 256, tuple(m) + (k,)).astype(np.uint8)
    b = rng.integers(bi.min, bi.max + 1, (k, n)).astype(bdt)
    if bdt == np.int8:          # onnxruntime's u8 x s8 product saturates 16-bit
        b = (b // 2).astype(bdt)  # pair sums past 63 (its AVX2 kernel): stay below
    az = np.array(rng.integers(0, 256), np.uint8)
    bz = (rng.integers(bi.min, bi.max + 1, n) if per_column else
          np.array(rng.integers(bi.min, bi.max + 1))).astype(bdt)
    path = tmp_path / "cols.onnx"
    _model(path, x.shape, b, bz, az, fed_zp)
    feeds = {"x": x, "az": az} if fed_zp else {"x": x}
    native, kernel = _run(path, feeds, True)
    numpy_, _ = _run(path, feeds, False)
    assert isinstance(kernel.native, QColsNative)
    np.testing.assert_array_equal(native, numpy_)
    want = (x.astype(np.int64) - int(az)) @ (b.astype(np.int64) - bz.astype(np.int64))
    np.testing.assert_array_equal(native, want)
    np.testing.assert_array_equal(native, ort_run(path, feeds)["y"])


def test_the_extremes_stay_exact(tmp_path):
    """A of 0 and 255 against weights of -128 and 127 (zero point 127) over
    k = 4099: sums near 2^27 with every tail; and one row."""
    rng = np.random.default_rng(2)
    for m in (1, 7):
        x = (rng.integers(0, 2, (m, 4099)) * 255).astype(np.uint8)
        b = np.where(rng.integers(0, 2, (4099, 3)) == 1, 127, -128).astype(np.int8)
        bz = np.array([127, -128, 0], np.int8)
        path = tmp_path / f"ext{m}.onnx"
        _model(path, x.shape, b, bz, np.array(255, np.uint8), False)
        got, kernel = _run(path, {"x": x}, True)
        assert isinstance(kernel.native, QColsNative)
        want = (x.astype(np.int64) - 255) @ (b.astype(np.int64) - bz)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n, cols", [(MAX_COLUMNS, True), (MAX_COLUMNS + 1, False)])
def test_wider_b_stays_on_the_gemm(tmp_path, n, cols):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (5, 40)).astype(np.uint8)
    b = rng.integers(-60, 60, (40, n)).astype(np.int8)
    path = tmp_path / "w.onnx"
    _model(path, x.shape, b, np.array(0, np.int8), np.array(3, np.uint8), False)
    got, kernel = _run(path, {"x": x}, True)
    assert isinstance(kernel.native, QColsNative) == cols
    assert kernel.path == "native"
    np.testing.assert_array_equal(got, (x.astype(np.int64) - 3) @ b.astype(np.int64))


def test_long_rows_on_the_gemm_sum_exactly(tmp_path):
    """Wider B on the 8-bit GEMM with a weight zero point: the row sums of
    9000 bytes of 255 (16-bit lanes emptied every 256 blocks of 32)."""
    rng = np.random.default_rng(4)
    x = np.full((3, 9000), 255, np.uint8)
    x[1, ::7] = 0
    b = rng.integers(-60, 60, (9000, MAX_COLUMNS + 1)).astype(np.int8)
    path = tmp_path / "long.onnx"
    _model(path, x.shape, b, np.array(5, np.int8), np.array(0, np.uint8), False)
    got, kernel = _run(path, {"x": x}, True)
    assert kernel.path == "native" and not isinstance(kernel.native, QColsNative)
    np.testing.assert_array_equal(got, x.astype(np.int64) @ (b.astype(np.int64) - 5))
