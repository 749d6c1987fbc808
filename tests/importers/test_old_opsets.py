"""Operators in the forms of older opsets -- attributes that later became
inputs, rules that later changed -- through an InferenceSession against
onnxruntime running the same file.  Real files on the registry are often
opset 9-12 exports; ONNX's own node cases are written at the newest opset,
so these forms are only checked here.  A case is (op, opset, attributes,
inputs, initializers); the shapes, dtypes and values must agree."""
import numpy as np
import onnx
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model

R = np.random.default_rng(11)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


X4 = f32(2, 3, 4, 5)
X3 = f32(2, 3, 4)
I64 = lambda *v: np.array(v, np.int64)  # noqa: E731
F = lambda *v: np.array(v, np.float32)  # noqa: E731


def case(op, opset, attrs=None, feeds=None, inits=None, n_out=1, cid=None, domain=""):
    return pytest.param(op, opset, attrs or {}, {"x": X4} if feeds is None else feeds, inits or {}, n_out,
                        id=cid or f"{op}-{opset}")


CASES = [
    # softmax family: before 13, the input flattened to 2-D from axis on
    case("Softmax", 11, {"axis": 1}, cid="softmax-11-axis1"),
    case("Softmax", 11, {"axis": -1}, cid="softmax-11-axis-1"),
    case("Softmax", 11, {}, cid="softmax-11-default"),
    case("Softmax", 11, {"axis": 0}, cid="softmax-11-axis0"),
    case("LogSoftmax", 9, {"axis": 2}, cid="logsoftmax-9-axis2"),
    case("Hardmax", 11, {"axis": 1}, cid="hardmax-11-axis1"),
    case("Softmax", 13, {"axis": 1}, cid="softmax-13-axis1"),
    # reductions: axes an attribute before 13 (ReduceSum) / 18 (the rest)
    case("ReduceSum", 11, {"axes": [1, -1], "keepdims": 0}),
    case("ReduceSum", 11, {}, cid="reducesum-11-all"),
    case("ReduceMean", 11, {"axes": [2], "keepdims": 1}),
    case("ReduceMax", 13, {"axes": [0, 3], "keepdims": 0}),
    case("ReduceMin", 12, {"axes": [-2]}),
    case("ReduceProd", 11, {"axes": [1]}),
    case("ReduceL2", 11, {"axes": [3], "keepdims": 0}),
    case("ReduceLogSumExp", 11, {"axes": [1]}),
    case("ReduceSumSquare", 11, {"axes": [2, 3]}),
    case("ReduceSum", 13, {"keepdims": 1}, inits={"a": I64(-1)}, cid="reducesum-13-input"),
    # axes attributes
    case("Squeeze", 11, {"axes": [-2]}, feeds={"x": f32(2, 1, 4)}),
    case("Squeeze", 11, {}, feeds={"x": f32(1, 3, 1, 2)}, cid="squeeze-11-all"),
    case("Unsqueeze", 11, {"axes": [0, -1]}, feeds={"x": X3}),
    case("Split", 11, {"axis": 1, "split": [1, 2]}, n_out=2),
    case("Split", 11, {"axis": -1}, feeds={"x": f32(2, 6)}, n_out=3, cid="split-11-equal"),
    case("Split", 2, {"axis": 0, "split": [1, 1]}, n_out=2, cid="split-2"),
    # Pad: attributes before 11
    case("Pad", 2, {"pads": [0, 1, 0, 2, 0, 2, 1, 0], "value": 1.5}),
    case("Pad", 2, {"pads": [0, 0, 1, 2, 0, 0, 2, 1], "mode": "reflect"}, cid="pad-2-reflect"),
    case("Pad", 2, {"pads": [0, 0, 1, 2, 0, 0, 3, 1], "mode": "edge"}, cid="pad-2-edge"),
    case("Pad", 11, {"mode": "constant"}, inits={"p": I64(0, 1, 0, 2, 0, 2, 1, 0),
                                                 "v": F(-2.0)}, cid="pad-11"),
    # Slice: attributes before 10, no steps at 10
    case("Slice", 9, {"starts": [1, -3], "ends": [3, 100], "axes": [1, 3]}),
    case("Slice", 9, {"starts": [0, 1], "ends": [1, -1]}, feeds={"x": X3},
         cid="slice-9-no-axes"),
    case("Slice", 10, {}, inits={"s": I64(1), "e": I64(-1), "a": I64(2)}, cid="slice-10"),
    # Clip: attributes before 11
    case("Clip", 6, {"min": -0.5, "max": 0.7}),
    case("Clip", 6, {"max": 0.1}, cid="clip-6-max"),
    case("Clip", 11, {}, inits={"lo": np.float32(-0.2), "hi": np.float32(0.3)}, cid="clip-11"),
    # (onnxruntime takes one-element bounds of any rank, as some exporters write them)
    case("Clip", 11, {}, inits={"lo": F(-0.2), "hi": F(0.3)}, cid="clip-11-1d-bounds"),
    # TopK: k an attribute at 1, no largest / sorted before 11
    case("TopK", 1, {"k": 2, "axis": 1}, n_out=2),
    case("TopK", 10, {"axis": -1}, inits={"k": I64(3)}, n_out=2, cid="topk-10"),
    case("TopK", 11, {"axis": 2, "largest": 0}, inits={"k": I64(2)}, n_out=2,
         cid="topk-11-smallest"),
    # Resize / Upsample of the old opsets
    case("Upsample", 9, {"mode": "nearest"}, inits={"s": F(1, 1, 2, 3)}, cid="upsample-9"),
    case("Upsample", 9, {"mode": "linear"}, inits={"s": F(1, 1, 2, 2)},
         cid="upsample-9-linear"),
    case("Upsample", 7, {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 2.0]},
         cid="upsample-7"),
    case("Resize", 10, {"mode": "nearest"}, inits={"s": F(1, 1, 2, 1.5)}, cid="resize-10"),
    case("Resize", 10, {"mode": "linear"}, inits={"s": F(1, 1, 0.5, 2)},
         cid="resize-10-linear"),
    case("Resize", 11, {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
         inits={"r": F(), "s": F(1, 1, 2, 2)}, cid="resize-11-align"),
    case("Resize", 11, {"mode": "nearest", "nearest_mode": "floor",
                        "coordinate_transformation_mode": "asymmetric"},
         inits={"r": F(), "s": F(), "z": I64(2, 3, 7, 9)}, cid="resize-11-sizes"),
    case("Resize", 11, {"mode": "cubic"}, inits={"r": F(), "s": F(1, 1, 2, 2)},
         cid="resize-11-cubic"),
    # Dropout (inference) and BatchNormalization of old opsets
    case("Dropout", 7, {"ratio": 0.3}),
    case("Dropout", 10, {"ratio": 0.5}, n_out=1, cid="dropout-10"),
    case("BatchNormalization", 7, {"epsilon": 1e-3, "spatial": 1},
         inits={"s": F(1, 2, 3), "b": F(0.1, 0.2, 0.3), "m": F(0, 1, -1),
                "v": F(1, 2, 0.5)}),
    case("BatchNormalization", 9, {"epsilon": 1e-2},
         inits={"s": F(1, 2, 3), "b": F(0.1, 0.2, 0.3), "m": F(0, 1, -1),
                "v": F(1, 2, 0.5)}, cid="batchnormalization-9"),
    # Gemm's C broadcast (7) and optional C (11)
    case("Gemm", 9, {"transB": 1, "alpha": 0.5, "beta": 2.0}, feeds={"x": f32(3, 4)},
         inits={"w": f32(5, 4), "c": f32(1, 5)}),
    case("Gemm", 11, {"transA": 1}, feeds={"x": f32(4, 3)}, inits={"w": f32(4, 5)},
         cid="gemm-11-no-c"),
    case("Flatten", 9, {"axis": 0}),
    case("Flatten", 11, {"axis": -2}, cid="flatten-11-negative"),
    # argmax's select_last_index (12) on ties
    case("ArgMax", 11, {"axis": 1, "keepdims": 0}, feeds={"x": np.array(
        [[1, 3, 3], [2, 2, 1]], np.float32)}),
    case("ArgMax", 12, {"axis": 1, "select_last_index": 1}, feeds={"x": np.array(
        [[1, 3, 3], [2, 2, 1]], np.float32)}, cid="argmax-12-last"),
    case("ArgMin", 11, {"axis": -1}),
    # pools of old opsets
    case("MaxPool", 8, {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    case("MaxPool", 10, {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
         cid="maxpool-10-ceil"),
    case("MaxPool", 11, {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [1, 1, 1, 1]},
         cid="maxpool-11-dilations"),
    case("AveragePool", 7, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                            "count_include_pad": 1}),
    case("AveragePool", 10, {"kernel_shape": [2, 3], "strides": [2, 2], "ceil_mode": 1,
                             "pads": [0, 1, 1, 0]}, cid="averagepool-10-ceil"),
    case("LpPool", 11, {"kernel_shape": [2, 2], "p": 3}),
    case("GlobalLpPool", 2, {"p": 2}),
    # element-wise ops whose rules changed
    case("Max", 6, {}, feeds={"x": X3, "y": f32(2, 3, 4)}, cid="max-6-same"),
    case("Max", 8, {}, feeds={"x": X3, "y": f32(3, 1)}, cid="max-8-broadcast"),
    case("Sum", 8, {}, feeds={"x": X3, "y": f32(4), "z": f32(3, 1)}),
    case("Mean", 8, {}, feeds={"x": X3, "y": f32(1, 4)}),
    case("Mod", 10, {"fmod": 1}, feeds={"x": f32(3, 4) * 5, "y": f32(3, 4) + 3}),
    case("Pow", 7, {}, feeds={"x": np.abs(X3) + 0.1, "y": f32(4)}),
    case("LeakyRelu", 6, {"alpha": 0.2}),
    case("Elu", 6, {"alpha": 0.7}),
    case("Selu", 6, {}),
    case("HardSigmoid", 6, {"alpha": 0.3, "beta": 0.4}),
    case("ThresholdedRelu", 10, {"alpha": 0.2}),
    case("Shrink", 9, {"bias": 0.1, "lambd": 0.4}),
    case("Celu", 12, {"alpha": 1.5}),
    case("Round", 11, {}, feeds={"x": F(0.5, 1.5, 2.5, -0.5, -1.5, 0.49)}),
    case("Where", 9, {}, feeds={"c": R.random((3, 4)) > 0.5, "x": f32(3, 4), "y": f32(4)}),
    # shape ops of old opsets
    case("Tile", 6, {}, feeds={"x": X3}, inits={"r": I64(1, 2, 3)}),
    case("Expand", 8, {}, feeds={"x": f32(3, 1)}, inits={"s": I64(2, 1, 4)}),
    case("DepthToSpace", 1, {"blocksize": 2}, feeds={"x": f32(1, 8, 2, 3)}),
    case("DepthToSpace", 11, {"blocksize": 2, "mode": "CRD"}, feeds={"x": f32(1, 8, 2, 3)},
         cid="depthtospace-11-crd"),
    case("SpaceToDepth", 1, {"blocksize": 2}, feeds={"x": f32(1, 2, 4, 6)}),
    case("Concat", 4, {"axis": 1}, feeds={"x": X3, "y": f32(2, 2, 4)}),
    case("Concat", 11, {"axis": -1}, feeds={"x": X3, "y": f32(2, 3, 1)},
         cid="concat-11-negative"),
    case("Gather", 11, {"axis": 1}, feeds={"x": X3}, inits={"i": I64(-1, 0, 2)}),
    case("GatherElements", 11, {"axis": -1}, feeds={"x": X3},
         inits={"i": np.array(R.integers(-4, 4, (2, 3, 2)), np.int64)}),
    case("GatherND", 11, {}, feeds={"x": X3}, inits={"i": I64(1, 2).reshape(1, 2)}),
    case("GatherND", 12, {"batch_dims": 1}, feeds={"x": X3},
         inits={"i": np.array([[1], [0]], np.int64)}, cid="gathernd-12-batch"),
    case("ScatterElements", 11, {"axis": 1}, feeds={"x": X3},
         inits={"i": np.array([[[0, 1, 2, 0]]] * 2, np.int64), "u": f32(2, 1, 4)}),
    case("Scatter", 9, {"axis": 0}, feeds={"x": f32(3, 3)},
         inits={"i": np.array([[1, 0, 2]], np.int64), "u": f32(1, 3)}),
    case("CumSum", 11, {"exclusive": 1, "reverse": 1}, feeds={"x": X3},
         inits={"a": np.array(1, np.int64)}),
    case("Shape", 1, {}, feeds={"x": X3}),
    case("Size", 1, {}, feeds={"x": X3}),
    case("NonZero", 9, {}, feeds={"x": np.array([[1, 0, 2], [0, 0, 3]], np.float32)}),
    case("Range", 11, {}, feeds={}, inits={"a": np.float32(1.0), "b": np.float32(4.5),
                                           "d": np.float32(0.75)}),
    case("ConstantOfShape", 9, {"value": onnx.numpy_helper.from_array(np.array([2], np.int32))},
         feeds={}, inits={"s": I64(2, 3)}),
    case("OneHot", 11, {"axis": -1}, feeds={}, inits={
        "i": np.array([0, 2, -1], np.int64), "d": np.array(4, np.int64), "v": F(0, 5)}),
    case("Cast", 9, {"to": onnx.TensorProto.INT32}, feeds={"x": F(1.7, -1.7, 2.5, -0.2)}),
    case("InstanceNormalization", 6, {"epsilon": 1e-3},
         inits={"s": F(1, 2, 3), "b": F(0, 1, -1)}),
    case("LRN", 1, {"size": 3, "alpha": 1e-3, "beta": 0.6, "bias": 1.5}),
    case("Einsum", 12, {"equation": "bij,bjk->bik"}, feeds={"x": X3, "y": f32(2, 4, 2)}),
    case("MatMul", 9, {}, feeds={"x": X3, "y": f32(4, 5)}),
    case("PRelu", 9, {}, feeds={"x": X4}, inits={"s": f32(3, 1, 1)}),
    case("ReverseSequence", 10, {"batch_axis": 1, "time_axis": 0}, feeds={"x": f32(4, 2, 3)},
         inits={"l": I64(3, 2)}),
    case("MeanVarianceNormalization", 9, {"axes": [0, 2, 3]}),
    case("Det", 11, {}, feeds={"x": f32(2, 3, 3)}),
    case("Trilu", 14, {"upper": 0}, feeds={"x": X3}, inits={"k": np.array(1, np.int64)}),
    # convolutions' old attribute forms
    case("Conv", 1, {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, feeds={"x": f32(1, 3, 7, 8)},
         inits={"w": f32(4, 3, 3, 2)}, cid="conv-1-same-lower"),
    case("Conv", 11, {"auto_pad": "SAME_UPPER", "strides": [2, 1]},
         feeds={"x": f32(1, 3, 7, 8)}, inits={"w": f32(4, 3, 2, 3)}, cid="conv-11-same-upper"),
    case("ConvTranspose", 1, {"strides": [2, 2], "output_shape": [9, 10]},
         feeds={"x": f32(1, 3, 4, 5)}, inits={"w": f32(3, 2, 3, 3)}, cid="convtranspose-1-shape"),
    case("ConvTranspose", 11, {"strides": [2, 3], "output_padding": [1, 2], "pads": [1, 0, 0, 1]},
         feeds={"x": f32(1, 3, 4, 5)}, inits={"w": f32(3, 2, 3, 3)}, cid="convtranspose-11-opad"),
    case("ConvTranspose", 11, {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
         feeds={"x": f32(1, 3, 4, 5)}, inits={"w": f32(3, 2, 3, 3)}, cid="convtranspose-11-same"),
    # recurrent ops of opset 7
    case("LSTM", 7, {"hidden_size": 4, "direction": "bidirectional"}, feeds={"x": f32(5, 2, 3)},
         inits={"w": f32(2, 16, 3) / 2, "r": f32(2, 16, 4) / 2, "b": f32(2, 32) / 4}, n_out=3),
    case("GRU", 7, {"hidden_size": 4, "linear_before_reset": 1}, feeds={"x": f32(5, 2, 3)},
         inits={"w": f32(1, 12, 3) / 2, "r": f32(1, 12, 4) / 2, "b": f32(1, 24) / 4}, n_out=2),
    case("GRU", 7, {"hidden_size": 4, "direction": "reverse"}, feeds={"x": f32(5, 2, 3)},
         inits={"w": f32(1, 12, 3) / 2, "r": f32(1, 12, 4) / 2}, n_out=2, cid="gru-7-reverse"),
    case("RNN", 7, {"hidden_size": 4, "activations": ["Relu"]}, feeds={"x": f32(5, 2, 3)},
         inits={"w": f32(1, 4, 3) / 2, "r": f32(1, 4, 4) / 2}, n_out=2),
    # integer forms
    case("Mod", 10, {}, feeds={"x": np.array([-7, 7, -7, 7, 5], np.int32),
                               "y": np.array([3, -3, -3, 3, 5], np.int32)}, cid="mod-10-int"),
    case("Mod", 10, {"fmod": 1}, feeds={"x": np.array([-7, 7, -7, 7], np.int64),
                                        "y": np.array([3, -3, -3, 3], np.int64)},
         cid="mod-10-int-fmod"),
    case("Clip", 12, {}, feeds={"x": np.arange(-5, 6, dtype=np.int32)},
         inits={"lo": np.int32(-2), "hi": np.int32(3)}, cid="clip-12-int"),
    case("Max", 12, {}, feeds={"x": np.array([[1, -4], [3, 9]], np.int64),
                               "y": np.array([2, -7], np.int64)}, cid="max-12-int"),
    case("Div", 7, {}, feeds={"x": np.array([-7, 7, -8, 9], np.int32),
                              "y": np.array([2, -2, 3, 4], np.int32)}, cid="div-7-int"),
    case("Pow", 12, {}, feeds={"x": np.array([2, -3, 4], np.int32),
                               "y": np.array([3, 2, 0], np.int32)}, cid="pow-12-int"),
    case("ReduceSum", 11, {"axes": [1]}, feeds={"x": np.arange(12, dtype=np.int32).reshape(3, 4)},
         cid="reducesum-11-int"),
    case("ArgMax", 11, {"axis": 0}, feeds={"x": np.array([[1, 5], [5, 1], [5, 5]], np.int32)},
         cid="argmax-11-int-ties"),
    # newer forms: inputs that were attributes, opset 18's additions
    case("Reshape", 5, {}, feeds={"x": X4}, inits={"s": I64(0, -1, 5)}),
    case("Reshape", 14, {"allowzero": 0}, feeds={"x": X4}, inits={"s": I64(2, 0, -1)},
         cid="reshape-14"),
    case("ReduceMean", 18, {"keepdims": 0}, inits={"a": I64(1, 3)}, cid="reducemean-18"),
    case("ReduceMax", 18, {"noop_with_empty_axes": 1}, inits={"a": np.zeros(0, np.int64)},
         cid="reducemax-18-noop"),
    case("Squeeze", 13, {}, feeds={"x": f32(2, 1, 4)}, inits={"a": I64(1)}, cid="squeeze-13"),
    case("Unsqueeze", 13, {}, feeds={"x": X3}, inits={"a": I64(-1, 1)}, cid="unsqueeze-13"),
    case("Split", 13, {"axis": 1}, inits={"s": I64(2, 1)}, n_out=2, cid="split-13"),
    case("Split", 18, {"axis": 3, "num_outputs": 2}, n_out=2, cid="split-18-uneven"),
    case("Pad", 18, {"mode": "reflect"}, inits={"p": I64(1, 2, 2, 1), "v": np.float32(0), "a": I64(2, 3)},
         cid="pad-18-axes"),
    case("Resize", 18, {"mode": "linear", "antialias": 1}, inits={"r": F(), "s": F(1, 1, 0.5, 0.6)},
         cid="resize-18-antialias"),
    case("Resize", 18, {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger", "axes": [2, 3]},
         inits={"r": F(), "s": F(), "z": I64(7, 7)}, cid="resize-18-aspect"),
]


def _model(op, opset, attrs, feeds, inits, n_out, domain=""):
    names = list(feeds) + list(inits)
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    return make_model([node], {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
                      {o: (None, np.float32) for o in outs}, inits, opset)


@pytest.mark.parametrize("op,opset,attrs,feeds,inits,n_out", CASES)
def test_an_older_opsets_form_runs_as_onnxruntime_runs_it(op, opset, attrs, feeds, inits,
                                                          n_out, tmp_path):
    import pyarena
    m = _model(op, opset, attrs, feeds, inits, n_out)
    for o in m.graph.output:            # the type is the runtimes' to tell
        o.ClearField("type")
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    want = ort_run(path, feeds)
    got = dict(zip([o.name for o in m.graph.output],
                   pyarena.InferenceSession(str(path)).run(None, feeds)))
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
