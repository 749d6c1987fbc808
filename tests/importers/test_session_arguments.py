"""pyarena.InferenceSession takes onnxruntime's constructor arguments --
a path (str or path-like) or the model's bytes, ``sess_options``,
``providers``, ``provider_options`` -- with pyarena's own keyword-only,
``threads=`` for the native kernels, BLAS on one thread by default, and
``run_options`` in ``run``."""
import gc
import os
import pathlib
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyarena import InferenceSession
from pyarena.errors import InvalidArgumentError, StateError
from pyarena.importers.ort_capi import (GraphOptimizationLevel, RunOptions, SessionOptions,
                                        session_settings)
from pyarena.runtime import set_blas_threads


def _model(path):
    """x[N, 4] -> MatMul w[4, 3] -> Relu -> y[N, 3]; ``unused`` an input
    nothing reads."""
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10 - 0.5
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
              helper.make_tensor_value_info("unused", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _feeds(n=2):
    return {"x": np.linspace(-1, 1, n * 4, dtype=np.float32).reshape(n, 4),
            "unused": np.zeros(2, np.int64)}


def test_a_path_a_str_and_the_bytes_give_the_same_outputs(tmp_path):
    path = _model(tmp_path / "m.onnx")
    want = InferenceSession(str(path)).run(None, _feeds())
    for source in (path, str(path), path.read_bytes(), bytearray(path.read_bytes())):
        (y,) = InferenceSession(source).run(None, _feeds())
        np.testing.assert_array_equal(y, want[0])


def test_model_bytes_live_in_a_file_removed_with_the_session(tmp_path):
    s = InferenceSession(_model(tmp_path / "m.onnx").read_bytes())
    s.run(None, _feeds())
    held = s.path
    assert os.path.exists(held) and held.endswith(".onnx")
    del s
    gc.collect()
    assert not os.path.exists(held)


def test_anything_else_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="Unable to load from type"):
        InferenceSession(123)


def test_a_positional_second_argument_is_sess_options_not_max_plans(tmp_path):
    path = _model(tmp_path / "m.onnx")
    with pytest.raises(TypeError, match="max_plans=N"):
        InferenceSession(path, 4)
    s = InferenceSession(path, SessionOptions(), max_plans=3)
    assert s.max_plans == 3


def test_intra_op_num_threads_and_threads_set_the_native_kernels_threads(tmp_path):
    path = _model(tmp_path / "m.onnx")
    so = SessionOptions()
    so.intra_op_num_threads = 2
    s = InferenceSession(path, so)
    s.run(None, _feeds())
    assert s.threads == 2 and s._last.threads == 2
    assert InferenceSession(path, so, threads=3).threads == 3     # the explicit one wins
    assert InferenceSession(path).threads == 1                    # 0 / no options: 1
    with pytest.raises(InvalidArgumentError, match="threads"):
        InferenceSession(path, threads=0)


@pytest.mark.parametrize("level, native, layout", [
    (GraphOptimizationLevel.ORT_DISABLE_ALL, False, "keep"),
    (GraphOptimizationLevel.ORT_ENABLE_BASIC, True, "keep"),
    (GraphOptimizationLevel.ORT_ENABLE_EXTENDED, True, "keep"),
    (GraphOptimizationLevel.ORT_ENABLE_LAYOUT, True, "auto"),
    (GraphOptimizationLevel.ORT_ENABLE_ALL, True, "auto"),
])
def test_the_optimization_level_chooses_fusion_and_the_nhwc_pass(tmp_path, level, native,
                                                                   layout):
    so = SessionOptions()
    so.graph_optimization_level = level
    s = InferenceSession(_model(tmp_path / "m.onnx"), so)
    assert (s.native, s.layout) == (native, layout)
    assert session_settings(so, native=True, layout="nhwc")[:2] == (True, "nhwc")


def test_onnxruntimes_own_session_options_are_read(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = InferenceSession(_model(tmp_path / "m.onnx"), so)
    assert (s.threads, s.native) == (2, False)


def test_providers_are_checked_as_onnxruntime_checks_them(tmp_path):
    path = _model(tmp_path / "m.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        InferenceSession(path, providers=["CPUExecutionProvider"])
        InferenceSession(path, providers=[("CPUExecutionProvider", {"arena": 1})])
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(ValueError, match="sequence"):
        InferenceSession(path, providers="CPUExecutionProvider")
    with pytest.raises(ValueError, match="same length"):
        InferenceSession(path, providers=["CPUExecutionProvider"], provider_options=[{}, {}])


def test_blas_runs_on_one_thread_unless_told(tmp_path):
    path = _model(tmp_path / "m.onnx")
    if set_blas_threads(2) is None:
        # no OpenBLAS (NumPy's wheels ship it): nothing to set, and a session
        # must not fail for that
        InferenceSession(path)
        assert set_blas_threads(1) is None
        return
    InferenceSession(path)
    assert set_blas_threads(2) == 1
    InferenceSession(path, blas_threads=None)      # left as it is
    assert set_blas_threads(1) == 2


def test_run_options_are_the_third_argument_and_copy_a_keyword(tmp_path):
    s = InferenceSession(_model(tmp_path / "m.onnx"))
    (y,) = s.run(None, _feeds(), RunOptions())
    (v,) = s.run(None, _feeds(), run_options=RunOptions(), copy=False)
    np.testing.assert_array_equal(y, v)
    with pytest.raises(TypeError, match="copy=False"):
        s.run(None, _feeds(), False)
    stop = RunOptions()
    stop.terminate = True
    with pytest.raises(StateError, match="terminate"):
        s.run(None, _feeds(), stop)


def test_an_input_nothing_reads_takes_a_feed_and_no_names_mean_all(tmp_path):
    s = InferenceSession(_model(tmp_path / "m.onnx"))
    assert [a.name for a in s.get_inputs()] == ["x", "unused"]
    (a,), (b,) = s.run(None, _feeds(3)), s.run([], _feeds(3))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 3)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(Exception, match="nope.onnx"):
        InferenceSession(pathlib.Path(tmp_path / "nope.onnx"))


def test_tflite_bytes_are_known_by_their_magic():
    path = pathlib.Path(__file__).resolve().parent.parent / "data" / \
        "face_detection_short_range.tflite"
    s = InferenceSession(path.read_bytes())
    assert s.path.endswith(".tflite")
    (i,) = s.get_inputs()
    out = s.run(None, {i.name: np.zeros(i.shape, np.float32)})
    want = InferenceSession(path).run(None, {i.name: np.zeros(i.shape, np.float32)})
    for a, b in zip(out, want):
        np.testing.assert_array_equal(a, b)


def test_blas_pinning_reaches_every_openblas_loaded(tmp_path):
    """A program that imports SciPy has a second OpenBLAS (SciPy's own copy):
    pinning only the first one found left NumPy's products on every core
    (openwakeword's STFT product 25x slower on a loaded machine).  Here a
    copy of NumPy's library, loaded from a path that sorts first, stands in
    for SciPy's; both end up at one thread."""
    import shutil
    import subprocess
    import sys
    from pyarena.runtime.blas import _NAMES, _libs
    import numpy  # noqa: F401
    libs = [p for p in _libs() if "numpy" in p]
    if not libs:
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    copy = tmp_path / "aaa_openblas_copy.so"
    shutil.copy(libs[0], copy)
    code = f"""
import ctypes, numpy
from pyarena.runtime.blas import _NAMES, set_blas_threads
libs = [ctypes.CDLL({str(copy)!r}), ctypes.CDLL({libs[0]!r})]
names = [n for n in _NAMES if hasattr(libs[1], n[0])][0]
for lib in libs:
    getattr(lib, names[0])(2)
old = set_blas_threads(1)
print(old, [int(getattr(lib, names[1])()) for lib in libs])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "[1,", "1]"], out.stdout
