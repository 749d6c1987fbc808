"""ONNX weights read in place (pyarena.importers.onnx_data): the model
parsed without its large initializers, those as views of the file; the
external-data format; bad external references."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyarena.importers import ModelImportError, load_model
from pyarena.importers.onnx_data import INLINE_BYTES, read_model
from pyarena.memory.mapped import is_mapped
from pyarena.runtime import Executor, random_feeds


def _model(rng, c=16, dtype=np.float32):
    w = rng.standard_normal((c, c, 3, 3)).astype(dtype)          # 9 KiB+: mapped
    b = rng.standard_normal(c).astype(dtype)                     # small: inline
    s = np.array([1, -1], np.int64)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["y", "s"], ["z"])]
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", et, [1, c, 8, 8])],
        [helper.make_tensor_value_info("z", et, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(s, "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"w": w, "b": b, "s": s}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_large_initializers_are_views_of_the_file(tmp_path, dtype):
    m, arrays = _model(np.random.default_rng(0), dtype=dtype)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    model, views = read_model(onnx, path)
    assert set(views) == {"w"}                    # b and s are small: inline
    assert is_mapped(views["w"])
    np.testing.assert_array_equal(views["w"], arrays["w"])
    stripped = {i.name: i for i in model.graph.initializer}
    assert stripped["w"].data_location == TensorProto.EXTERNAL
    assert not stripped["w"].raw_data and list(stripped["w"].dims) == list(arrays["w"].shape)
    np.testing.assert_array_equal(numpy_helper.to_array(stripped["b"]), arrays["b"])
    assert model.ByteSize() < m.ByteSize() - arrays["w"].nbytes + INLINE_BYTES


def test_a_mapped_model_runs_as_the_inline_one(tmp_path):
    from helpers.model_zoo import ort_run
    m, arrays = _model(np.random.default_rng(1))
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    g = load_model(path)
    feeds = random_feeds(g, seed=3)
    out = Executor(g).run(feeds)["z"]
    np.testing.assert_allclose(out, ort_run(path, feeds)["z"], rtol=1e-5, atol=1e-5)


def test_external_data_files_are_mapped(tmp_path):
    m, arrays = _model(np.random.default_rng(2))
    path = str(tmp_path / "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.data", size_threshold=0)
    assert os.path.getsize(path) < 2048
    model, views = read_model(onnx, path)
    assert {"w", "b"} <= set(views)
    for k in ("w", "b"):
        assert is_mapped(views[k])
        np.testing.assert_array_equal(views[k], arrays[k])
    g = load_model(path)
    out = Executor(g).run(random_feeds(g, seed=0))["z"]
    m_inline = str(tmp_path / "inline.onnx")
    onnx.save(_model(np.random.default_rng(2))[0], m_inline)
    g2 = load_model(m_inline)
    np.testing.assert_array_equal(out, Executor(g2).run(random_feeds(g2, seed=0))["z"])


def _external(tmp_path, location, offset=0, length=None, write=True):
    w = np.arange(16 * 16 * 9, dtype=np.float32).reshape(16, 16, 3, 3)
    if write:
        (tmp_path / "w.bin").write_bytes(w.tobytes())
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=w.shape,
                         data_location=TensorProto.EXTERNAL)
    for k, v in (("location", location), ("offset", str(offset)),
                 ("length", str(w.nbytes if length is None else length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


@pytest.mark.parametrize("location, kw, match", [
    ("../w.bin", {}, "relative path inside"),
    ("/etc/passwd", {}, "relative path inside"),
    ("missing.bin", {"write": False}, "external data file 'missing.bin'"),
    ("w.bin", {"length": 100}, "does not hold its dims"),
    ("w.bin", {"offset": 8}, "does not hold its dims"),
    ("w.bin", {"offset": "x"}, "not integers"),
])
def test_bad_external_references_are_refused_by_name(tmp_path, location, kw, match):
    path = _external(tmp_path, location, **kw)
    with pytest.raises(ModelImportError, match=match) as ei:
        load_model(path)
    assert "'w'" in str(ei.value)


def test_a_good_external_reference_loads(tmp_path):
    g = load_model(_external(tmp_path, "w.bin"))
    w = g.tensors["w"].data
    assert is_mapped(w) and float(w.reshape(-1)[5]) == 5.0


def test_a_file_the_walk_cannot_follow_gets_onnx_s_own_error(tmp_path):
    m, _ = _model(np.random.default_rng(0))
    data = m.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelImportError, match="not a readable ONNX model"):
        load_model(str(path))


@pytest.mark.parametrize("nbytes", [8000, 20000])
def test_raw_data_of_the_wrong_size_is_refused_by_name(tmp_path, nbytes):
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[64, 64],
                         raw_data=b"\x00" * nbytes)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    path = str(tmp_path / "m.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
                .SerializeToString())
    with pytest.raises(ModelImportError, match=f"'w' holds {nbytes:,} bytes of raw data"):
        load_model(path)


def test_constant_node_values_are_read_in_place(tmp_path):
    """Paddle2ONNX stores every weight as a Constant node's value."""
    from helpers.model_zoo import ort_run
    rng = np.random.default_rng(5)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)),
             helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(
                 np.ones(32, np.float32))),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 16, 6, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "const.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    model, views = read_model(onnx, path)
    assert set(views) == {"w"} and is_mapped(views["w"])
    np.testing.assert_array_equal(views["w"], w)
    assert model.ByteSize() < w.nbytes // 4
    gr = load_model(path, native=False)
    assert is_mapped(gr.tensors["w"].data)
    feeds = random_feeds(gr, seed=1)
    np.testing.assert_allclose(Executor(gr).run(feeds)["y"], ort_run(path, feeds)["y"],
                               rtol=1e-5, atol=1e-5)


def test_qdq_with_per_channel_scales_read_in_place(tmp_path):
    """1100 output channels: the int8 weights and their per-channel scales
    are both larger than INLINE_BYTES, so the QDQ rewrite reads views."""
    from onnxruntime import quantization as q
    from helpers.model_zoo import ort_run
    rng = np.random.default_rng(6)
    w1 = (rng.standard_normal((1100, 8, 1, 1)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((4, 1100, 1, 1)) * 0.03).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 4, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4, 4, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    f = str(tmp_path / "f.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f)
    feeds = {"x": rng.standard_normal((1, 8, 4, 4)).astype(np.float32)}

    class Data(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([feeds])

        def get_next(self):
            return next(self.it, None)
    path = str(tmp_path / "qdq.onnx")
    q.quantize_static(f, path, Data(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    m = onnx.load(path)          # the quantizer writes scales as float_data: make it raw
    raw = [numpy_helper.from_array(numpy_helper.to_array(i), i.name) for i in m.graph.initializer]
    del m.graph.initializer[:]
    m.graph.initializer.extend(raw)
    onnx.save(m, path)
    _, views = read_model(onnx, path)
    assert any(v.dtype == np.float32 and v.shape == (1100,) for v in views.values())
    gr = load_model(path)
    assert "DequantizeLinear" not in {op.op_type for op in gr.ops[:-1]}
    ours = np.asarray(Executor(gr).run(feeds)["y"])
    ref = ort_run(path, feeds)["y"]
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    quantum = max(float(inits[n.input[1]]) for n in m.graph.node
                  if n.op_type == "DequantizeLinear" and n.output[0] == "y")
    assert np.abs(ours - ref).max() <= quantum * 1.0001


def test_reading_the_same_file_again_starts_from_an_untouched_copy(tmp_path):
    m, arrays = _model(np.random.default_rng(8))
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    a, va = read_model(onnx, path)
    a.graph.node[0].op_type = "Changed"            # the importer edits its copy
    b, vb = read_model(onnx, path)
    assert b is not a and b.graph.node[0].op_type == "Conv"
    assert set(vb) == {"w"} and np.shares_memory(va["w"], vb["w"])   # one mapping
    m2, _ = _model(np.random.default_rng(9))       # the file changes: read again
    onnx.save(m2, path)
    os.utime(path, ns=(1, 1))
    c, vc = read_model(onnx, path)
    np.testing.assert_array_equal(vc["w"], numpy_helper.to_array(
        next(i for i in m2.graph.initializer if i.name == "w")))


@pytest.mark.parametrize("dtype, et", [(np.float32, TensorProto.FLOAT),
                                       (np.float64, TensorProto.DOUBLE)])
def test_float_data_and_double_data_are_read_in_place_too(tmp_path, dtype, et):
    """Some exporters (PP-OCRv3) write weights as packed float_data, not
    raw_data: the packed field holds the same little-endian bytes."""
    w = np.random.default_rng(4).standard_normal((40, 40)).astype(dtype)
    t = helper.make_tensor("w", et, w.shape, w.reshape(-1).tolist())     # not raw
    assert not t.raw_data
    nodes = [helper.make_node("Constant", [], ["c"], value=t),
             helper.make_node("MatMul", ["x", "c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", et, [2, 40])],
                          [helper.make_tensor_value_info("y", et, None)])
    path = str(tmp_path / "fd.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    model, views = read_model(onnx, path)
    assert set(views) == {"c"} and views["c"].dtype == dtype
    np.testing.assert_array_equal(views["c"], w)
    assert model.ByteSize() < w.nbytes // 4
    gr = load_model(path, native=False)
    x = np.ones((2, 40), dtype)
    np.testing.assert_allclose(Executor(gr).run({"x": x})["y"], x @ w, rtol=1e-6)


def test_damaged_files_give_a_clear_error_or_load(tmp_path):
    """Bytes flipped anywhere in a file whose weights are read in place:
    the walk never reads outside the file, and the import either works or
    raises a pyarena error (never another exception)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from pyarena.errors import PyArenaError
    m, _ = _model(np.random.default_rng(11))
    m.graph.node.insert(0, helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
        np.ones((40, 40), np.float32))))
    data = m.SerializeToString()
    path = tmp_path / "f.onnx"

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)),
                    min_size=1, max_size=4))
    def check(flips):
        b = bytearray(data)
        for i, v in flips:
            b[i] = v
        path.write_bytes(bytes(b))
        try:
            model, views = read_model(onnx, str(path))
        except Exception:       # protobuf's own decode error: load_model words it
            with pytest.raises(PyArenaError):
                load_model(str(path))
            return
        for v in views.values():
            assert v.nbytes <= len(b)
        try:
            load_model(str(path))
        except PyArenaError:
            pass
    check()
