"""Quantized ONNX models made by onnxruntime's own quantizer from a float
CNN built here (QOperator, QDQ and dynamic formats): they run quantized,
match onnxruntime on the same file within one output quantum, keep their
weights in the file's dtype and plan their activations at int8 size."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from onnx import helper, numpy_helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from helpers.onnx_util import make_model  # noqa: E402
from pyarena import plan  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

SHAPE = (1, 3, 32, 32)


def float_cnn(path):
    """Conv/Relu x2, depthwise conv, 1x1 conv, a residual Add, max pool,
    global average pool, MatMul + bias: seeded weights."""
    rng = np.random.default_rng(0)

    def w(*s):
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    def b(n):
        return (rng.standard_normal(n) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Add", ["c3", "r2"], ["s3"]),
        helper.make_node("MaxPool", ["s3"], ["p3"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p3", "w4"], ["c4"]),
        helper.make_node("GlobalAveragePool", ["c4"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["mm"]),
        helper.make_node("Add", ["mm", "bm"], ["y"]),
    ]
    inits = dict(w1=w(8, 3, 3, 3), b1=b(8), w2=w(16, 8, 3, 3), b2=b(16), w3=w(16, 1, 3, 3),
                 b3=b(16), w4=w(24, 16, 1, 1), wm=w(24, 10), bm=b(10))
    make_model(nodes, {"x": (list(SHAPE), np.float32)}, {"y": ([1, 10], np.float32)}, inits,
               opset=13, path=path)


class Calibration(quantization.CalibrationDataReader):
    def __init__(self):
        rng = np.random.default_rng(1)
        self.it = iter([{"x": rng.standard_normal(SHAPE).astype(np.float32)}
                        for _ in range(8)])

    def get_next(self):
        return next(self.it, None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("quantized")
    f = d / "float.onnx"
    float_cnn(f)
    q = quantization
    out = {"float": f}
    # uint8 activations x int8 weights: 7-bit weights (reduce_range), as
    # onnxruntime advises for CPUs without VNNI, where its u8s8 kernels
    # saturate 16-bit pair sums (seen with onnxruntime 1.32 on AVX2)
    for name, fmt, act, wt in [("qop", q.QuantFormat.QOperator, q.QuantType.QUInt8,
                                q.QuantType.QInt8),
                               ("qop_s8", q.QuantFormat.QOperator, q.QuantType.QInt8,
                                q.QuantType.QInt8),
                               ("qdq", q.QuantFormat.QDQ, q.QuantType.QUInt8,
                                q.QuantType.QInt8)]:
        out[name] = d / f"{name}.onnx"
        q.quantize_static(str(f), str(out[name]), Calibration(), quant_format=fmt,
                          per_channel=True, activation_type=act, weight_type=wt,
                          reduce_range=act == q.QuantType.QUInt8)
    out["dyn"] = d / "dyn.onnx"
    q.quantize_dynamic(str(f), str(out["dyn"]), reduce_range=True)
    return out


def feeds():
    return {"x": np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)}


def output_quantum(path):
    """The scale of the DequantizeLinear that makes the output (0: none)."""
    m = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in m.graph.node:
        if n.output and n.output[0] == "y" and n.op_type == "DequantizeLinear":
            return float(inits[n.input[1]])
    return 0.0


def initializer_bytes(path):
    m = onnx.load(str(path))
    return sum(numpy_helper.to_array(i).nbytes for i in m.graph.initializer)


@pytest.mark.parametrize("name", ["qop", "qop_s8", "qdq", "dyn"])
def test_matches_onnxruntime_within_one_quantum(models, name):
    g = load_model(str(models[name]))
    ours = np.asarray(Executor(g).run(feeds())["y"])
    ref = ort_run(models[name], feeds())["y"]
    q = output_quantum(models[name])
    assert np.abs(ours - ref).max() <= max(q, 1e-5 * np.abs(ref).max()) * 1.0001


@pytest.mark.parametrize("name", ["qop", "qdq"])
def test_runs_integer_operators(models, name):
    ops = {o.op_type for o in load_model(str(models[name])).ops}
    assert {"QLinearConv", "QLinearMatMul", "QLinearAdd", "QLinearGlobalAveragePool"} <= ops
    assert not ops & {"Conv", "MatMul", "GlobalAveragePool"}     # nothing left in float
    assert "MaxPool" in ops          # on the int8 tensor itself


@pytest.mark.parametrize("name", ["qop", "qdq", "dyn"])
def test_weights_stay_in_the_file_dtype(models, name):
    g = load_model(str(models[name]))
    consts = [t for t in g.tensors.values() if t.role == "constant"]
    kinds = {str(t.dtype) for t in consts if t.nbytes >= 256}
    assert kinds <= {"int8", "uint8"}, kinds
    held = sum(t.nbytes for t in consts)
    assert held <= 1.1 * initializer_bytes(models[name])
    assert held < 0.4 * initializer_bytes(models["float"])


@pytest.mark.parametrize("name", ["qop", "qdq"])
def test_activations_planned_at_int8_size(models, name):
    g = load_model(str(models[name]))
    p = plan(g)
    pf = plan(load_model(str(models["float"])))
    assert p.arena_bytes == p.lower_bound_bytes
    # the float input (12 KiB) stays float; everything after it is 8-bit
    assert p.arena_bytes < 0.4 * pf.arena_bytes
    big = [t for t in g.tensors.values() if t.role == "activation" and t.nbytes >= 1024]
    assert big and all(np.dtype(t.dtype).itemsize == 1 for t in big)


@pytest.mark.parametrize("name", ["qop", "qdq"])
def test_numpy_paths_keep_the_arena_at_its_lower_bound(models, name):
    """The NumPy paths' float scratch (the element-wise ops' too, which run
    natively by default) does not set the int8 model's arena."""
    p = plan(load_model(str(models[name]), native=False))
    assert p.arena_bytes == p.lower_bound_bytes


def test_element_wise_float_islands_become_lookups(tmp_path):
    """QDQ around HardSwish, HardSigmoid, Tanh and a Mul / Div by a
    constant: each becomes a 256-entry lookup on the 8-bit tensor, and the
    output stays within one quantum of onnxruntime's."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 1, 1)) * 0.4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c"], ["h"]),
             helper.make_node("Conv", ["h", "w2"], ["c2"]),
             helper.make_node("HardSigmoid", ["c2"], ["s"], alpha=0.25, beta=0.5),
             helper.make_node("Tanh", ["s"], ["t"]),
             helper.make_node("Div", ["t", "six"], ["d"]),
             helper.make_node("Mul", ["d", "k"], ["y"])]
    f = tmp_path / "f.onnx"
    make_model(nodes, {"x": (list(SHAPE), np.float32)}, {"y": (None, np.float32)},
               {"w": w, "w2": w2, "six": np.array(6, np.float32),
                "k": np.array(-3, np.float32)}, opset=14, path=f)
    out = tmp_path / "qdq.onnx"
    quantization.quantize_static(str(f), str(out), Calibration(),
                                 quant_format=quantization.QuantFormat.QDQ,
                                 op_types_to_quantize=["Conv", "HardSwish", "HardSigmoid",
                                                       "Tanh", "Div", "Mul"])
    g = load_model(str(out))
    ops = [o.op_type for o in g.ops]
    assert ops.count("QLinearLookup") >= 3
    assert not {"HardSwish", "HardSigmoid", "Tanh"} & set(ops)
    ours = np.asarray(Executor(g).run(feeds())["y"])
    ref = ort_run(out, feeds())["y"]
    assert np.abs(ours - ref).max() <= output_quantum(out) * 1.0001


def test_unfolded_batch_norm_island_of_a_qoperator_file(tmp_path):
    """ShuffleNet's unit as onnxruntime's quantizer writes it without
    pre-processing: QLinearConv -> DQ -> BatchNormalization -> Relu ->
    channel shuffle (Reshape / Transpose / Reshape) -> Q, all in float.
    pyarena runs one per-channel lookup and shuffles the bytes, with
    onnxruntime's output bytes, an arena with no float activation left."""
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 1, 1)) * 0.4).astype(np.float32)
    bn = [rng.uniform(a, b, 8).astype(np.float32) for a, b in ((0.5, 2), (-1, 1), (-.5, .5),
                                                              (0.3, 2))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Reshape", ["r", "s5"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t5", "s4"], ["sh"]),
             helper.make_node("Conv", ["sh", "w2"], ["y"])]
    f = tmp_path / "f.onnx"
    make_model(nodes, {"x": (list(SHAPE), np.float32)}, {"y": (None, np.float32)},
               dict(w=w, w2=w2, g=bn[0], b=bn[1], m=bn[2], v=bn[3],
                    s5=np.array([1, 2, 4, 32, 32]), s4=np.array([1, 8, 32, 32])),
               opset=13, path=f)
    out = tmp_path / "qop.onnx"
    quantization.quantize_static(str(f), str(out), Calibration(),
                                 quant_format=quantization.QuantFormat.QOperator,
                                 per_channel=True, op_types_to_quantize=["Conv"])
    assert "BatchNormalization" in {n.op_type for n in onnx.load(str(out)).graph.node}
    g = load_model(str(out))
    ops = [o.op_type for o in g.ops]
    assert "QLinearLookup" in ops and not {"BatchNormalization", "Relu"} & set(ops)
    float_acts = [t.name for t in g.tensors.values() if t.role == "activation" and
                  np.dtype(t.dtype) == np.float32]
    assert not float_acts           # (op by op: the BN's, the Relu's, the shuffle's)
    ours = np.asarray(Executor(g).run(feeds())["y"])
    np.testing.assert_array_equal(ours, ort_run(out, feeds())["y"])


@pytest.mark.parametrize("name", ["qop", "qop_s8", "qdq", "dyn"])
def test_two_threads_give_one_threads_bytes(models, name):
    """The 8-bit kernels split rows and channel blocks between workers:
    that changes who computes an output, never its value."""
    g = load_model(str(models[name]))
    one = np.asarray(Executor(g).run(feeds())["y"]).copy()
    ex2 = Executor(load_model(str(models[name])), threads=2)
    assert ex2.workers is not None and ex2.workers.n == 2
    np.testing.assert_array_equal(one, np.asarray(ex2.run(feeds())["y"]))
