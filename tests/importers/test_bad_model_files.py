"""Corrupt ONNX files found by fuzzing (issue 9, items 5-6), each rebuilt
here as a small crafted model: load_model raises a pyarena error naming
the file and the node or tensor, never a KeyError / TypeError /
NotImplementedError from inside onnx or NumPy."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.onnx_util import make_model
from pyarena.errors import GraphError, InvalidArgumentError, ModelImportError
from pyarena.graph import Graph
from pyarena.importers import load_model
from pyarena.runtime import Executor


def _save(tmp_path, nodes, inputs, inits=None, name="m.onnx"):
    path = tmp_path / name
    make_model(nodes, inputs, {"y": (None, np.float32)}, inits, path=path)
    return path


def _raises(path, cls, *needles):
    with pytest.raises(cls) as e:
        load_model(str(path))
    msg = str(e.value)
    assert msg.startswith(str(path)), msg
    for n in needles:
        assert n in msg, msg
    assert "cannot read the model" not in msg     # a specific check, not the last resort
    return e.value


def test_initializer_shorter_than_its_dims(tmp_path):
    for raw in (True, False):
        w = (helper.make_tensor("w", TensorProto.FLOAT, [4], np.ones(4, np.float32).tobytes(),
                                raw=True) if raw else
             helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0] * 4))
        w.dims[:] = [100000, 100000]
        m = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                       {"x": ([1], np.float32)}, {"y": (None, np.float32)})
        m.graph.initializer.append(w)
        path = tmp_path / f"short{raw}.onnx"
        path.write_bytes(m.SerializeToString())
        _raises(path, ModelImportError, "initializer 'w'", "[100000, 100000]",
                "40,000,000,000" if raw else "10,000,000,000")


def test_attribute_of_the_wrong_type_names_the_operator(tmp_path):
    # strides as one INT, not INTS: the pooling kernel could not iterate it
    path = tmp_path / "pool.onnx"
    make_model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                 strides=2)],
               {"x": ([1, 1, 4, 4], np.float32)}, {"y": ([1, 1, 2, 2], np.float32)},
               path=path)
    with pytest.raises(GraphError, match=r"operator 'pool' \(MaxPool\)") as e:
        load_model(str(path))
    assert str(path) in str(e.value)


def test_fold_with_a_missing_attribute_names_the_operator(tmp_path):
    nodes = [helper.make_node("Concat", ["a", "b"], ["s"], name="cat"),   # no axis
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    path = _save(tmp_path, nodes, {"x": ([2, 3], np.float32)},
                 {"a": np.array([3], np.int64), "b": np.array([2], np.int64)})
    with pytest.raises(ModelImportError) as e:
        load_model(str(path))
    assert str(path) in str(e.value)
    assert "cat" in str(e.value) or "shape inference" in str(e.value)


def test_undecodable_attribute_tensor_names_the_attribute(tmp_path):
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    value.data_type = TensorProto.UNDEFINED
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos", value=value),
             helper.make_node("Add", ["x", "c"], ["y"])]
    path = _save(tmp_path, nodes, {"x": ([2], np.float32)}, {"s": np.array([2], np.int64)})
    with pytest.raises(ModelImportError, match="cos") as e:
        load_model(str(path))
    assert str(path) in str(e.value)


def test_attribute_name_that_is_not_utf8(tmp_path):
    path = _save(tmp_path, [helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                                             pads=[0, 0, 0, 0])],
                 {"x": ([1, 1, 4, 4], np.float32)}, {"w": np.ones((1, 1, 3, 3), np.float32)})
    blob = path.read_bytes()
    assert blob.count(b"pads") == 1
    path.write_bytes(blob.replace(b"pads", b"p\xc8ds"))
    with pytest.raises(ModelImportError, match="not UTF-8") as e:
        load_model(str(path))
    assert str(path) in str(e.value)


def test_folded_string_constant_is_named_not_a_protobuf_error(tmp_path):
    # a string Constant read as a Reshape target: re-inference used to hand
    # the object array to numpy_helper.from_array (NotImplementedError)
    value = helper.make_tensor("v", TensorProto.STRING, [2], [b"a", b"b"])
    path = _save(tmp_path, [helper.make_node("Constant", [], ["s"], value=value),
                            helper.make_node("Reshape", ["x", "s"], ["y"])],
                 {"x": ([2, 3], np.float32)})
    _raises(path, ModelImportError, "tensor 's'", "not numeric")


def test_reshape_whose_declared_output_disagrees_is_refused_before_running():
    g = Graph("r")
    g.add_tensor("x", [4, 6], role="input")
    g.add_tensor("y", [], role="output")
    g.add_op("Reshape", ["x"], ["y"], name="rs")
    with pytest.raises(GraphError, match=r"operator 'rs' \(Reshape\).*\[4, 6\]"):
        Executor(g)


def test_bad_feeds_are_argument_errors_naming_the_input():
    g = Graph("f")
    g.add_tensor("x", [2, 3], role="input")
    g.add_tensor("y", [2, 3], role="output")
    g.add_op("Relu", ["x"], ["y"], name="relu")
    ex = Executor(g)
    with pytest.raises(InvalidArgumentError, match="feed 'x'"):
        ex.run({"x": np.zeros((3, 3), np.float32)})
    with pytest.raises(InvalidArgumentError, match="imaginary"):
        ex.run({"x": np.zeros((2, 3), np.complex64)})
    dyn = Executor(g, allocator="numpy")
    with pytest.raises(InvalidArgumentError, match="feed 'x'"):
        dyn.run({"x": np.zeros(7, np.float32)})
    assert np.all(ex.run({"x": -np.ones((2, 3), np.float32)})["y"] == 0)
