"""rebind: a plan made at a bucket's shapes, reused at smaller ones.

The graphs are the same ONNX model imported at two lengths; whatever
``rebind`` accepts is given to the independent validator at the smaller
length, and whatever it refuses names why."""
import numpy as np
import onnx
from onnx import TensorProto, helper

from helpers.encoder_models import encoder, save
from pyarena import plan
from pyarena.importers import load_model
from pyarena.planning import validate
from pyarena.planning.buckets import rebind


def _graphs(path, big, small, hidden=16):
    return (load_model(path, inputs={"x": (1, big, hidden)}),
            load_model(path, inputs={"x": (1, small, hidden)}))


def test_a_shorter_length_takes_the_bucket_offsets_and_validates(tmp_path):
    path = save(encoder(layers=2, hidden=16, heads=2), tmp_path / "m.onnx")
    big, small = _graphs(path, 64, 37)
    pb = plan(big, inplace_concat=False)
    p, why = rebind(pb, small)
    assert why is None
    assert validate(p, small) == []
    assert p.offsets == pb.offsets and p.arena_bytes == pb.arena_bytes
    views = p.bind()
    assert views["x"].shape == (1, 37, 16)
    assert all(views[n].shape == tuple(t.shape) for n, t in small.tensors.items()
               if n in views and t.shape is not None)


def _rows_model(path):
    """y = x + sum(relu(rows 0 .. 65 - seq of (table + mean(x)))): a
    tensor with fewer rows the longer the sequence."""
    table = np.linspace(-1, 1, 64 * 16, dtype=np.float32).reshape(64, 16)
    c = lambda n, v: helper.make_tensor(n, TensorProto.INT64, [len(v)], v)   # noqa: E731
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[0, 1], keepdims=0),
        helper.make_node("Add", ["table", "m"], ["t"]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "one", "two", "zero"], ["seq"]),
        helper.make_node("Sub", ["sixty_five", "seq"], ["end"]),
        helper.make_node("Slice", ["t", "zero", "end", "zero"], ["rows"]),
        helper.make_node("Relu", ["rows"], ["r"]),
        helper.make_node("ReduceSum", ["r", "zero"], ["sum"], keepdims=1),
        helper.make_node("Add", ["x", "sum"], ["y"])]
    g = helper.make_graph(
        nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])],
        [onnx.numpy_helper.from_array(table, "table"), c("zero", [0]), c("one", [1]),
         c("two", [2]), c("sixty_five", [65])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_a_tensor_larger_at_the_shorter_length_is_refused_by_name(tmp_path):
    big, small = _graphs(_rows_model(tmp_path / "r.onnx"), 64, 33)
    assert small.tensors["rows"].shape == (32, 16) and big.tensors["rows"].shape == (1, 16)
    p, why = rebind(plan(big, inplace_concat=False), small)
    assert p is None and "'rows' needs 2048 bytes" in why and "64 the bucket planned" in why


def test_another_models_graph_is_refused(tmp_path):
    a = load_model(save(encoder(layers=1, hidden=16, heads=2), tmp_path / "a.onnx"),
                   inputs={"x": (1, 8, 16)})
    b = load_model(save(encoder(layers=2, hidden=16, heads=2), tmp_path / "b.onnx"),
                   inputs={"x": (1, 4, 16)})
    p, why = rebind(plan(b, inplace_concat=False), a)
    assert p is None and "ops here" in why
    p, why = rebind(plan(a, inplace_concat=False), _renamed(a))
    assert p is None and "is not the bucket's op" in why


def _renamed(g):
    """``g`` with an op's inputs swapped: not the same graph."""
    import copy
    g2 = copy.deepcopy(g)
    op = next(op for op in g2.ops if len(set(op.inputs)) > 1)
    op.inputs = list(op.inputs)[::-1]
    return g2


def test_an_in_place_write_no_longer_allowed_at_the_length_is_refused(tmp_path):
    path = save(encoder(layers=1, hidden=16, heads=2), tmp_path / "m.onnx")
    big, small = _graphs(path, 16, 8)
    pb = plan(big, inplace_concat=False)
    op_name, src, dst, mode = next(r for r in pb.reuses if r[3] == "inplace")
    t = small.tensors[src]          # same bytes, another shape: no element-wise overwrite
    t.shape = tuple(reversed(t.shape))
    p, why = rebind(pb, small)
    assert p is None and f"{op_name!r} may not write {dst!r} over {src!r}" in why


def _concat_model(path):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
             helper.make_node("Sigmoid", ["c"], ["y"])]
    g = helper.make_graph(
        nodes, "cat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, 16])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_concat_inputs_in_their_slices_are_refused_and_kept_apart_they_rebind(tmp_path):
    big, small = _graphs(_concat_model(tmp_path / "c.onnx"), 32, 20)
    inplace = plan(big)
    assert any(r[3] == "concat" for r in inplace.reuses)
    p, why = rebind(inplace, small)
    assert p is None and "Concat" in why and "into its slice" in why
    p, why = rebind(plan(big, inplace_concat=False), small)
    assert why is None and validate(p, small) == []


def test_a_tensor_of_another_element_type_is_refused(tmp_path):
    path = save(encoder(layers=1, hidden=16, heads=2), tmp_path / "m.onnx")
    big, small = _graphs(path, 16, 8)
    name = next(n for n, t in small.tensors.items() if t.role == "activation")
    small.tensors[name].dtype = "int32"     # as many bytes as float32
    p, why = rebind(plan(big, inplace_concat=False), small)
    assert p is None and why.startswith(f"{name!r} is int32 here, float32 in")
