"""Tensors with no element (a batch of 0: no detections for the next stage
to classify) and 0-d scalars through single ops, against onnxruntime on
the same file: the same shapes, dtypes and values, or a refusal by both."""
import numpy as np
import onnx
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import untyped_model

N = helper.make_node
E = np.zeros((2, 0, 3), np.float32)
S = np.array(2.5, np.float32)


def I(*v):  # noqa: E743
    return np.array(v, np.int64)


def f32(*shape):
    return np.ones(shape, np.float32)


CASES = {
    "relu": ([N("Relu", ["x"], ["y"])], {"x": E}, {}),
    "add-broadcast": ([N("Add", ["x", "z"], ["y"])], {"x": E, "z": f32(1, 1, 3)}, {}),
    "concat-with-empty": ([N("Concat", ["x", "z"], ["y"], axis=1)], {"x": E, "z": f32(2, 2, 3)}, {}),
    "reducesum-over-empty": ([N("ReduceSum", ["x", "a"], ["y"], keepdims=0)], {"x": E},
                             {"a": I(1)}),
    "reducemean-other-axis": ([N("ReduceMean", ["x"], ["y"], axes=[2], keepdims=1)], {"x": E}, {}),
    "reduceprod-over-empty": ([N("ReduceProd", ["x"], ["y"], axes=[1], keepdims=0)], {"x": E}, {}),
    "argmax-other-axis": ([N("ArgMax", ["x"], ["y"], axis=2)], {"x": E}, {}),
    "softmax-empty-axis": ([N("Softmax", ["x"], ["y"], axis=1)], {"x": E}, {}),
    "softmax-empty-rows": ([N("Softmax", ["x"], ["y"], axis=-1)], {"x": E}, {}),
    "matmul-k0": ([N("MatMul", ["x", "z"], ["y"])],
                  {"x": np.zeros((2, 0), np.float32), "z": np.zeros((0, 3), np.float32)}, {}),
    "gemm-k0-with-c": ([N("Gemm", ["x", "z", "c"], ["y"])],
                       {"x": np.zeros((2, 0), np.float32), "z": np.zeros((0, 3), np.float32),
                        "c": f32(3)}, {}),
    "matmul-m0": ([N("MatMul", ["x", "z"], ["y"])],
                  {"x": np.zeros((0, 4), np.float32), "z": f32(4, 3)}, {}),
    "transpose": ([N("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {"x": E}, {}),
    "reshape-minus-one": ([N("Reshape", ["x", "s"], ["y"])], {"x": E}, {"s": I(0, -1)}),
    "gather-no-index": ([N("Gather", ["x", "i"], ["y"], axis=0)],
                        {"x": f32(3, 2), "i": np.zeros((0,), np.int64)}, {}),
    "slice-to-empty": ([N("Slice", ["x", "s", "e"], ["y"])], {"x": f32(3, 2)},
                       {"s": I(2), "e": I(1)}),
    "topk-k0": ([N("TopK", ["x", "k"], ["y", "i"])], {"x": f32(2, 3)}, {"k": I(0)}),
    "expand-to-empty": ([N("Expand", ["x", "s"], ["y"])], {"x": f32(1, 3)}, {"s": I(0, 3)}),
    "tile-zero": ([N("Tile", ["x", "r"], ["y"])], {"x": f32(2, 3)}, {"r": I(0, 2)}),
    "conv-batch0": ([N("Conv", ["x", "w"], ["y"])], {"x": np.zeros((0, 2, 4, 4), np.float32)},
                    {"w": f32(3, 2, 3, 3)}),
    "conv-bias-relu-batch0": ([N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                               N("Relu", ["c"], ["y"])],
                              {"x": np.zeros((0, 2, 4, 4), np.float32)},
                              {"w": f32(3, 2, 3, 3), "b": f32(3)}),
    "depthwise-batch0": ([N("Conv", ["x", "w"], ["y"], group=2, pads=[1, 1, 1, 1])],
                         {"x": np.zeros((0, 2, 5, 5), np.float32)}, {"w": f32(2, 1, 3, 3)}),
    "maxpool-batch0": ([N("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])],
                       {"x": np.zeros((0, 2, 4, 4), np.float32)}, {}),
    "avgpool-batch0": ([N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                       {"x": np.zeros((0, 2, 4, 4), np.float32)}, {}),
    "globalavgpool-batch0": ([N("GlobalAveragePool", ["x"], ["y"])],
                             {"x": np.zeros((0, 2, 4, 4), np.float32)}, {}),
    "resize-batch0": ([N("Resize", ["x", "", "s"], ["y"])],
                      {"x": np.zeros((0, 1, 2, 2), np.float32)},
                      {"s": np.array([1, 1, 2, 2], np.float32)}),
    "batchnorm-batch0": ([N("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])],
                         {"x": np.zeros((0, 2, 3, 3), np.float32)},
                         {"g": f32(2), "b": f32(2), "m": f32(2), "v": f32(2)}),
    "layernorm-no-rows": ([N("LayerNormalization", ["x", "g"], ["y"], axis=-1)], {"x": E},
                          {"g": f32(3)}),
    "cumsum": ([N("CumSum", ["x", "a"], ["y"])], {"x": E}, {"a": np.array(1, np.int64)}),
    "pad-empty": ([N("Pad", ["x", "p"], ["y"])], {"x": E}, {"p": I(0, 1, 0, 0, 1, 0)}),
    "split-zero-part": ([N("Split", ["x", "s"], ["a", "y"], axis=0)], {"x": f32(3, 2)},
                        {"s": I(0, 3)}),
    "nonzero-none": ([N("NonZero", ["x"], ["y"])], {"x": np.zeros((2, 3), np.float32)}, {}),
    "range-empty": ([N("Range", ["a", "b", "d"], ["y"])], {},
                    {"a": np.array(5, np.int64), "b": np.array(1, np.int64),
                     "d": np.array(1, np.int64)}),
    "scalar-relu": ([N("Relu", ["x"], ["y"])], {"x": S}, {}),
    "scalar-plus-vector": ([N("Add", ["x", "z"], ["y"])], {"x": S, "z": f32(3)}, {}),
    "scalar-times-itself": ([N("Mul", ["x", "x"], ["y"])], {"x": S}, {}),
    "unsqueeze-scalar": ([N("Unsqueeze", ["x", "a"], ["y"])], {"x": S}, {"a": I(0)}),
    "squeeze-to-scalar": ([N("Squeeze", ["x"], ["y"])], {"x": f32(1, 1)}, {}),
    "reducesum-to-scalar": ([N("ReduceSum", ["x"], ["y"], keepdims=0)], {"x": f32(2, 3)}, {}),
    "where-scalar-condition": ([N("Where", ["c", "x", "z"], ["y"])],
                               {"c": np.array(True), "x": f32(2, 2),
                                "z": np.zeros((2, 2), np.float32)}, {}),
    "einsum-trace": ([N("Einsum", ["x"], ["y"], equation="ii->")], {"x": f32(3, 3)}, {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_empty_and_scalar_tensors_as_onnxruntime(name, tmp_path):
    import pyarena
    nodes, feeds, inits = CASES[name]
    outs = [o for n in nodes[-1:] for o in n.output]
    m = untyped_model(nodes, feeds, outs, inits)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = ort_run(path, feeds)
    s = pyarena.InferenceSession(str(path))
    for _ in range(2):          # the cached signature too
        got = dict(zip(outs, s.run(None, feeds)))
        for o in outs:
            assert got[o].shape == want[o].shape, (o, got[o].shape, want[o].shape)
            assert got[o].dtype == want[o].dtype
            np.testing.assert_allclose(got[o], want[o], rtol=1e-6, atol=1e-6)
