"""The 8-bit kernels as call records (runtime/batch.py): a quantized
model's runs of QLinearConv / QLinearAdd / QLinearMul / lookups /
Quantize / DequantizeLinear become one ``pa_calls_run`` each, and the
batched Executor gives the bits of the kernels called one by one and of
onnxruntime (its own quantizer's QOperator and QDQ files)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyarena import plan
from pyarena.importers import load_model
from pyarena.runtime import Executor
from pyarena.runtime import batch as batch_mod
from pyarena.runtime.batch import Batch

ort = pytest.importorskip("onnxruntime")
quant = pytest.importorskip("onnxruntime.quantization")

SHAPE = (1, 8, 12, 20)


def _float_model(path, seed):
    """x -> depthwise 3x3 -> 1x1 (16) -> sigmoid gate (Mul) -> + 1x1 of x."""
    rng = np.random.default_rng(seed)

    def w(name, shape):
        return numpy_helper.from_array(rng.normal(0, 0.5, shape).astype(np.float32), name)
    inits = [w("dw", (8, 1, 3, 3)), w("dwb", (8,)), w("pw", (16, 8, 1, 1)), w("pwb", (16,)),
             w("sk", (16, 8, 1, 1)), w("skb", (16,))]
    nodes = [helper.make_node("Conv", ["x", "dw", "dwb"], ["a"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "pw", "pwb"], ["p"]),
             helper.make_node("Sigmoid", ["p"], ["s"]),
             helper.make_node("Mul", ["p", "s"], ["g"]),
             helper.make_node("Conv", ["x", "sk", "skb"], ["k"]),
             helper.make_node("Add", ["g", "k"], ["y"])]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)


def _quantized(tmp_path, fmt, seed):
    f, q = str(tmp_path / "f.onnx"), str(tmp_path / f"q_{fmt}.onnx")
    _float_model(f, seed)
    rng = np.random.default_rng(seed + 1)

    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.uniform(-1, 1, SHAPE).astype(np.float32)}
                            for _ in range(3)])

        def get_next(self):
            return next(self.it, None)
    fmt_value = {"qop": quant.QuantFormat.QOperator, "qdq": quant.QuantFormat.QDQ}[fmt]
    # QDQ with uint8 activations: every group fuses into an integer op, in
    # onnxruntime's optimiser as in pyarena (int8 activations leave its
    # Convs in float: tests/importers/test_onnx_qdq_ort.py)
    act = {"qop": quant.QuantType.QInt8, "qdq": quant.QuantType.QUInt8}[fmt]
    quant.quantize_static(f, q, Reader(), quant_format=fmt_value, per_channel=True,
                          activation_type=act)
    return q


def _onnxruntime(path, x, fmt):
    """onnxruntime's run of the file as written (QOperator) or optimised
    (QDQ: the integer ops its optimiser makes, which pyarena makes too)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if fmt == "qop":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]


@pytest.mark.parametrize("fmt", ["qop", "qdq"])
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_quantized_kernels_give_the_bits_of_one_call_each_and_onnxruntime(
        tmp_path, monkeypatch, fmt, seed):
    path = _quantized(tmp_path, fmt, seed)
    x = np.random.default_rng(seed + 7).uniform(-1, 1, SHAPE).astype(np.float32)
    g = load_model(path)
    p = plan(g)
    ex = Executor(g, p)
    batches = [s[0] for s in ex._runner.busy if isinstance(s[0], Batch)]
    kinds = {kind for b in batches for kind in b.calls.kinds}
    assert {"qconv2d", "qbinary", "qlookup", "quantize", "dequantize"} <= kinds
    got = np.array(ex.run({"x": x})["y"])
    monkeypatch.setattr(batch_mod.Batch, "__init__", None)      # no batch may be made
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = Executor(load_model(path), p)
    assert not any(isinstance(s[0], Batch) for s in one._runner.busy)
    ref = np.array(one.run({"x": x})["y"])
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got, _onnxruntime(path, x, fmt))


def test_a_fully_connected_layer_joins_the_batch_with_the_same_bits(monkeypatch):
    """QGemm's native path as call records (a TFLite FULLY_CONNECTED: the
    GEMM then TFLite's requantization): the keyword spotter's step is one
    batch, and gives the bits of its kernels called one by one."""
    import os
    from pyarena.runtime import random_feeds
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                        "hey_mycroft.tflite")
    g = load_model(path)
    feeds = random_feeds(g)
    feeds["serving_default_input_audio:0"] = np.random.default_rng(3).integers(
        -128, 128, (1, 3, 40)).astype(np.int8)
    ex = Executor(g)
    assert len(ex.busy) == 1 and isinstance(ex.busy[0][0], Batch)
    fc = [n for n in ex.busy[0][0].calls.names if n.startswith("fully_connected")]
    assert fc, ex.busy[0][0].calls.names
    got = {k: np.array(v) for k, v in ex.run(dict(feeds)).items()}
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = Executor(load_model(path))
    assert not any(isinstance(s[0], Batch) for s in one.busy)
    ref = one.run(dict(feeds))
    assert got.keys() == ref.keys()
    for k, v in ref.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
