"""pyarena.onnxruntime next to onnxruntime itself: the same NodeArgs,
metadata, option defaults and enums, the same kinds of errors for bad
feeds, IOBinding and OrtValue round trips, run_options, a positional
SessionOptions; and ``pyarena.patch_onnxruntime()`` with and without
onnxruntime installed (in subprocesses)."""
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import pyarena
import pyarena.onnxruntime as port

ROOT = pathlib.Path(__file__).resolve().parent.parent
VAD = ROOT / "tests" / "data" / "silero_vad_16k_sequence.onnx"
BLAZEFACE = ROOT / "tests" / "data" / "face_detection_short_range.tflite"


def _model(path, declare_output=True):
    """x[N, 3, ?, 4] float, i[2] int64 (unused) -> Relu, + w (an
    overridable initializer: also a graph input) -> y; metadata set."""
    w = numpy_helper.from_array(np.full((4,), 0.5, np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "w"], ["y"])],
        "graph_name", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, None, 4]),
                       helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
                       helper.make_tensor_value_info("w", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["N", 3, None, 4] if declare_output else None)],
        [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    m.metadata_props.add(key="character", value="a\nb\nc")
    m.producer_name, m.doc_string, m.domain = "tests", "model doc", "ai.test"
    g.doc_string = "graph doc"
    m.model_version = 7
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return _model(tmp_path_factory.mktemp("facade") / "m.onnx")


@pytest.fixture(scope="module")
def ort():
    return pytest.importorskip("onnxruntime")


def _feeds(n=1, h=2):
    return {"x": np.linspace(-1, 1, n * 3 * h * 4, dtype=np.float32).reshape(n, 3, h, 4),
            "i": np.zeros(2, np.int64)}


def _args(args):
    return [(a.name, a.shape, a.type) for a in args]


def _both(ort, path, **kw):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]), \
        port.InferenceSession(path, **kw)


# -- the model as onnxruntime describes it -----------------------------------------
@pytest.mark.parametrize("declare_output", [True, False])
def test_node_args_and_metadata_are_onnxruntimes(ort, tmp_path, declare_output):
    path = _model(tmp_path / "m.onnx", declare_output)
    ref, s = _both(ort, path)
    assert _args(s.get_inputs()) == _args(ref.get_inputs())
    assert _args(s.get_outputs()) == _args(ref.get_outputs())
    assert _args(s.get_overridable_initializers()) == _args(ref.get_overridable_initializers())
    assert isinstance(s.get_inputs()[0].shape, list)
    fields = ["custom_metadata_map", "description", "domain", "graph_description",
              "graph_name", "producer_name", "version"]
    got, want = s.get_modelmeta(), ref.get_modelmeta()
    assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert got.custom_metadata_map["character"].split("\n") == ["a", "b", "c"]


def test_a_model_without_a_version_reports_onnxruntimes(ort, tmp_path):
    m = onnx.load(str(VAD))
    assert not m.HasField("model_version")
    ref, s = _both(ort, VAD)
    assert s.get_modelmeta().version == ref.get_modelmeta().version == (1 << 63) - 1
    assert _args(s.get_inputs()) == _args(ref.get_inputs())
    # (its LSTM states' batch dimension: onnxruntime's own inference finds 1
    # from the initial states, ONNX's -- which the facade runs -- leaves it
    # symbolic: a documented difference)
    assert [a.name for a in s.get_outputs()] == [a.name for a in ref.get_outputs()]
    assert s.get_outputs()[0].shape == ref.get_outputs()[0].shape == ["sequence_length"]


def test_providers_and_options_as_onnxruntime_reports_them(ort, model):
    ref, s = _both(ort, model)
    assert s.get_providers() == ref.get_providers() == ["CPUExecutionProvider"]
    assert s.get_provider_options() == ref.get_provider_options()
    given = [("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})]
    assert port.InferenceSession(model, providers=given).get_provider_options() == \
        ort.InferenceSession(str(model), providers=given).get_provider_options()
    s.set_providers(["CPUExecutionProvider"])
    s.disable_fallback()
    s.enable_fallback()
    assert isinstance(s.get_session_options(), port.SessionOptions)
    assert s.end_profiling() == ""
    assert "CPUExecutionProvider" in port.get_available_providers()
    assert port.get_device() == ort.get_device() == "CPU"
    assert set(port.get_all_providers()) == set(ort.get_all_providers())


def test_session_options_have_onnxruntimes_fields_and_defaults(ort):
    mine, theirs = port.SessionOptions(), ort.SessionOptions()
    for name in port.SessionOptions._FIELDS:
        a, b = getattr(mine, name), getattr(theirs, name)
        assert (int(a) if hasattr(a, "value") else a) == (int(b) if hasattr(b, "value") else b), name
    for name in port.RunOptions._FIELDS:
        assert getattr(port.RunOptions(), name) == getattr(ort.RunOptions(), name), name
    for enum in ("GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder"):
        assert {k: int(v) for k, v in getattr(port, enum).__members__.items()} == \
            {k: int(v) for k, v in getattr(ort, enum).__members__.items()}
    with pytest.raises(AttributeError):
        mine.no_such_field = 1
    with pytest.raises(TypeError):
        mine.intra_op_num_threads = "2"
    with pytest.raises(TypeError):
        mine.graph_optimization_level = 1
    mine.add_session_config_entry("session.x", 1)
    assert mine.get_session_config_entry("session.x") == "1"
    with pytest.raises(RuntimeError):
        mine.get_session_config_entry("nope")
    with pytest.raises(RuntimeError):
        port.set_default_logger_severity(7)
    port.set_default_logger_severity(3)


def test_an_op_of_another_domain_no_kernel_runs_is_refused_in_the_constructor(tmp_path):
    import importlib
    dq = importlib.import_module("runtime.test_recurrent_quant")
    qpath = tmp_path / "q.onnx"
    _, feeds = dq._model(qpath, 6, 2, 5, 4)
    s = port.InferenceSession(str(qpath))   # com.microsoft, a kernel runs it
    assert [a.shape for a in s.run(None, feeds)][0][0] == feeds["x"].shape[0]
    m = onnx.load(str(qpath))
    m.graph.node[0].op_type = "FusedConv"   # one of onnxruntime's optimizer's own
    with pytest.raises(port.NotImplemented, match=r"FusedConv \(com.microsoft\)") as e:
        port.InferenceSession(m.SerializeToString())
    assert isinstance(e.value, pyarena.UnsupportedOpError)


def test_the_optimized_model_file_is_the_model_as_given(tmp_path, model):
    so = port.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "cache" / "m.optimized.onnx")
    (tmp_path / "cache").mkdir()
    port.InferenceSession(model, so)
    cached = tmp_path / "cache" / "m.optimized.onnx"
    assert cached.read_bytes() == model.read_bytes()
    s = port.InferenceSession(str(cached))          # what a caching library does next
    np.testing.assert_allclose(s.run(None, _feeds())[0],
                               port.InferenceSession(model).run(None, _feeds())[0])
    so.optimized_model_filepath = str(tmp_path / "m.ort")
    port.InferenceSession(model, so)
    assert not (tmp_path / "m.ort").exists()


# -- running ------------------------------------------------------------------------
def test_outputs_and_run_options_as_onnxruntime(ort, model):
    ref, s = _both(ort, model)
    so = port.SessionOptions()
    so.intra_op_num_threads = 1
    positional = port.InferenceSession(str(model), so, ["CPUExecutionProvider"])
    for n, h in [(1, 2), (2, 5)]:
        feeds = _feeds(n, h)
        want = ref.run(None, feeds)
        for sess in (s, positional):
            for got in (sess.run(None, feeds), sess.run([], feeds), sess.run(["y"], feeds),
                        sess.run(None, feeds, port.RunOptions()),
                        sess.run(None, feeds, run_options=port.RunOptions())):
                np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    stop, theirs = port.RunOptions(), ort.RunOptions()
    stop.terminate = theirs.terminate = True
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail):
        ref.run(None, _feeds(), theirs)
    with pytest.raises(port.Fail, match="terminate"):
        s.run(None, _feeds(), stop)
    # lists are converted to the input's type, as onnxruntime does
    listed = {"x": _feeds()["x"].tolist(), "i": [0, 0]}
    np.testing.assert_allclose(s.run(None, listed)[0], ref.run(None, listed)[0], rtol=1e-6)


BAD_FEEDS = {
    "float64 for float": lambda f: {**f, "x": f["x"].astype(np.float64)},
    "int32 for int64": lambda f: {**f, "i": f["i"].astype(np.int32)},
    "wrong rank": lambda f: {**f, "x": f["x"][0]},
    "fixed dim": lambda f: {**f, "x": np.zeros((1, 4, 2, 4), np.float32)},
    "unknown name": lambda f: {**f, "z": f["i"]},
    "missing input": lambda f: {"x": f["x"]},
    "a Python float": lambda f: {**f, "x": 1.0},
}


@pytest.mark.parametrize("case", list(BAD_FEEDS))
def test_bad_feeds_raise_onnxruntimes_kinds(ort, model, case):
    ref, s = _both(ort, model)
    feeds = BAD_FEEDS[case](_feeds())
    with pytest.raises(Exception) as theirs:
        ref.run(None, feeds)
    with pytest.raises(Exception) as mine:
        s.run(None, feeds)
    kind = type(theirs.value)
    assert type(mine.value).__name__ == kind.__name__ or isinstance(mine.value, kind)
    assert isinstance(mine.value, ValueError) == isinstance(theirs.value, ValueError) or \
        kind.__name__ == "InvalidArgument"      # pyarena's is also an InvalidArgumentError
    assert isinstance(mine.value, RuntimeError) == isinstance(theirs.value, RuntimeError)
    assert str(mine.value) == str(theirs.value)     # onnxruntime's very message


def test_an_unknown_output_name_is_invalid_argument(ort, model):
    ref, s = _both(ort, model)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument) as theirs:
        ref.run(["nope"], _feeds())
    with pytest.raises(port.InvalidArgument) as mine:
        s.run(["nope"], _feeds())
    assert str(mine.value) == str(theirs.value)


def test_loading_errors_are_onnxruntimes_kinds(ort, tmp_path):
    for source, kind in [(str(tmp_path / "missing.onnx"), "NoSuchFile"),
                         (b"not a model", "InvalidProtobuf")]:
        with pytest.raises(Exception) as theirs:
            ort.InferenceSession(source)
        with pytest.raises(getattr(port, kind)):
            port.InferenceSession(source)
        assert type(theirs.value).__name__ == kind
    with pytest.raises(TypeError):
        port.InferenceSession(42)


def test_the_model_bytes_and_a_path_like(ort, model):
    ref = ort.InferenceSession(model.read_bytes())
    for source in (model.read_bytes(), model, str(model)):
        s = port.InferenceSession(source)
        assert _args(s.get_inputs()) == _args(ref.get_inputs())
        np.testing.assert_allclose(s.run(None, _feeds())[0], ref.run(None, _feeds())[0],
                                   rtol=1e-6)


def test_a_stateful_model_with_a_value_input_runs_as_onnxruntime(ort):
    ref, s = _both(ort, VAD)
    rng = np.random.default_rng(0)
    h = c = np.zeros((1, 1, 128), np.float32)
    hr, cr = h, c
    for n in (3, 5):
        x = rng.standard_normal((n, 576)).astype(np.float32) * 0.1
        got = s.run(None, {"input": x, "h": h, "c": c})
        want = ref.run(None, {"input": x, "h": hr, "c": cr})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        _, h, c = got
        _, hr, cr = want


def test_a_tflite_model_runs_through_the_facade():
    s = port.InferenceSession(BLAZEFACE)
    (i,) = s.get_inputs()
    assert (i.shape, i.type) == ([1, 128, 128, 3], "tensor(float)")
    out = s.run(None, {i.name: np.zeros((1, 128, 128, 3), np.float32)})
    assert [list(o.shape) for o in out] == [a.shape for a in s.get_outputs()]
    assert s.get_modelmeta().custom_metadata_map == {}


# -- values and bindings --------------------------------------------------------------
def test_ortvalues_as_onnxruntimes(ort):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for mod in (ort, port):
        v = mod.OrtValue.ortvalue_from_numpy(x)
        assert (v.shape(), v.data_type(), v.element_type(), v.device_name(), v.is_tensor(),
                v.has_value(), v.tensor_size_in_bytes()) == \
            ([2, 3, 4], "tensor(float)", 1, "cpu", True, True, 96)
        assert np.shares_memory(v.numpy(), x)
        e = mod.OrtValue.ortvalue_from_shape_and_type([2, 5], np.int64)
        assert (e.shape(), e.data_type()) == ([2, 5], "tensor(int64)")
        e.update_inplace(np.ones((2, 5), np.int64))
        assert e.numpy().sum() == 10
    with pytest.raises(port.InvalidArgument):
        port.OrtValue.ortvalue_from_numpy(x, "cuda", 0)


def test_iobinding_round_trip_as_onnxruntime(ort, model):
    ref, s = _both(ort, model)
    feeds = _feeds(2, 3)
    want = ref.run(None, feeds)[0]
    for mod, sess in ((ort, ref), (port, s)):
        b = sess.io_binding()
        b.bind_cpu_input("x", feeds["x"])
        b.bind_ortvalue_input("i", mod.OrtValue.ortvalue_from_numpy(feeds["i"]))
        b.bind_output("y")
        sess.run_with_iobinding(b)
        (out,) = b.get_outputs()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], want, rtol=1e-6)
        # into a value given: written in place
        target = mod.OrtValue.ortvalue_from_shape_and_type(list(want.shape), np.float32)
        b.clear_binding_outputs()
        b.bind_ortvalue_output("y", target)
        sess.run_with_iobinding(b, mod.RunOptions())
        np.testing.assert_allclose(target.numpy(), want, rtol=1e-6)
        # into a raw address
        buf = np.zeros_like(want)
        b.clear_binding_outputs()
        b.bind_output("y", "cpu", 0, np.float32, list(want.shape), buf.ctypes.data)
        sess.run_with_iobinding(b)
        np.testing.assert_allclose(buf, want, rtol=1e-6)
        # a value of another shape, or no output at all: RuntimeError
        b.clear_binding_outputs()
        b.bind_ortvalue_output("y", mod.OrtValue.ortvalue_from_shape_and_type([2, 3, 3, 5],
                                                                             np.float32))
        with pytest.raises(RuntimeError, match="invalid dimensions for output"):
            sess.run_with_iobinding(b)
        b.clear_binding_outputs()
        with pytest.raises(RuntimeError, match="At least one output"):
            sess.run_with_iobinding(b)


def test_run_with_ort_values_and_run_async(ort, model):
    ref, s = _both(ort, model)
    feeds = _feeds()
    values = {k: port.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()}
    (y,) = s.run_with_ort_values(None, values)
    assert isinstance(y, port.OrtValue)
    np.testing.assert_allclose(y.numpy(), ref.run(None, feeds)[0], rtol=1e-6)
    import threading
    done, got = threading.Event(), {}

    def callback(results, user_data, err):
        got.update(results=results, user_data=user_data, err=err)
        done.set()
    s.run_async(None, feeds, callback, "data")
    assert done.wait(60)
    assert got["err"] == "" and got["user_data"] == "data"
    np.testing.assert_allclose(got["results"][0], y.numpy())


# -- patch_onnxruntime ------------------------------------------------------------
LIBRARY = '''
"""Written for onnxruntime, as rapidocr_onnxruntime and rapid_layout are."""
from onnxruntime import (GraphOptimizationLevel, InferenceSession, SessionOptions,
                         get_available_providers, get_device)
from onnxruntime.capi import _pybind_state as C
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
import onnxruntime


def labels_and_output(path, x):
    so = SessionOptions()
    so.log_severity_level = 4
    so.enable_cpu_mem_arena = False
    so.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    onnxruntime.set_default_logger_severity(3)
    assert get_device() == "CPU" and "CPUExecutionProvider" in get_available_providers()
    s = InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    labels = s.get_modelmeta().custom_metadata_map["character"].split("\\n")
    try:
        s.run(None, {"x": x.astype("float64"), "i": [0, 0]})
    except InvalidArgument:
        pass
    else:
        raise AssertionError("float64 accepted")
    return labels, s.run(None, {"x": x, "i": [0, 0]})[0], onnxruntime.__file__
'''

HIDE = '''
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
try:
    import onnxruntime
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("onnxruntime still importable")
'''


@pytest.mark.parametrize("hidden", [False, True])
def test_patch_onnxruntime_runs_a_library_unchanged(tmp_path, model, hidden):
    if not hidden:
        pytest.importorskip("onnxruntime")
    (tmp_path / "library.py").write_text(LIBRARY)
    script = (HIDE if hidden else "") + textwrap.dedent(f'''
        import sys
        sys.path[:0] = [{str(tmp_path)!r}, {str(ROOT)!r}]
        import numpy as np
        import pyarena
        pyarena.patch_onnxruntime()
        import library, pyarena.onnxruntime as facade
        x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(1, 3, 2, 4)
        labels, y, where = library.labels_and_output({str(model)!r}, x)
        assert labels == ["a", "b", "c"], labels
        np.testing.assert_allclose(y, np.maximum(x, 0) + 0.5, rtol=1e-6)
        assert where == facade.__file__, where
        assert library.InferenceSession is facade.InferenceSession
        assert library.C.InvalidArgument is facade.InvalidArgument
        import onnxruntime.capi.onnxruntime_inference_collection as coll
        assert coll.OrtValue is facade.OrtValue
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_patch_takes_out_an_onnxruntime_imported_before():
    script = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        try:
            import onnxruntime, onnxruntime.capi
        except ImportError:
            pass
        import pyarena
        facade = pyarena.patch_onnxruntime()
        import onnxruntime
        assert onnxruntime is facade and sys.modules["onnxruntime.capi"] is facade.capi
        print(sorted(n for n in sys.modules if n.startswith("onnxruntime")))
    ''')
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout) == sorted(port.MODULES)


def test_the_facade_is_not_loaded_by_import_pyarena():
    assert "patch_onnxruntime" in pyarena.__all__
    assert pyarena.patch_onnxruntime is port.patch
