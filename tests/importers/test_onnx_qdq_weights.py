"""onnxruntime's weight and bias quantization of a float Conv /
ConvTranspose / Gemm between a DequantizeLinear and a QuantizeLinear
(pyarena/importers/onnx_qdq_weights.py): small graphs run by pyarena and by
onnxruntime's default (optimised) session, compared byte for byte; and
the pass left alone where onnxruntime's is."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from test_onnx_qdq_ort import I8, U8, Graph, check, ort_default  # noqa: E402

from pyarena.importers import load_model  # noqa: E402
from pyarena.importers.onnx_qdq_weights import quantize_float_weights, weight_params  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402


def island(op_type, bias, relu=False, w_scale=0.3, shape=(1, 8, 10, 12)):
    """x -> Q/DQ (uint8) -> op with a float32 weight (and bias) -> [Relu]
    -> Q -> DQ: what onnxruntime's quantizer leaves for a ConvTranspose in
    a QOperator file."""
    rng = np.random.default_rng(11)
    g = Graph(shape)
    x = g.qdq("x", 0.0157, U8(128))
    c = shape[1]
    if op_type == "ConvTranspose":
        w = g.const((rng.standard_normal((c, 6, 2, 2)) * w_scale).astype(np.float32))
        attrs = dict(strides=[2, 2], kernel_shape=[2, 2])
        n_out = 6
    elif op_type == "Conv":
        w = g.const((rng.standard_normal((6, c, 3, 3)) * w_scale).astype(np.float32))
        attrs = dict(pads=[1, 1, 1, 1])
        n_out = 6
    else:
        w = g.const((rng.standard_normal((5, shape[1])) * w_scale).astype(np.float32))
        attrs = dict(transB=1)
        n_out = 5
    ins = [x, w] + ([g.const(rng.uniform(-1, 1, n_out).astype(np.float32))] if bias else [])
    y = g.op(op_type, ins, **attrs)
    if relu:
        y = g.op("Relu", [y])
    path_outs = g.out(g.q(y, 0.0411, U8(120)), 0.0411, U8(120))
    return g, shape, path_outs


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_conv_transpose_computes_on_onnxruntimes_rounded_weights(tmp_path, bias, relu):
    g, shape, outs = island("ConvTranspose", bias, relu)
    path = g.save(tmp_path / "m.onnx", outs)
    ops = check(path, shape, ["ConvTranspose"], seed=3)
    assert "QLinearConv" not in ops
    # the weight really was rounded: without the pass the bytes differ
    import pyarena.importers.onnx_qdq as qdq
    feeds = {"x": np.random.default_rng(3).uniform(-2, 2, shape).astype(np.float32)}
    ref = ort_default(path, feeds)
    orig = qdq.quantize_float_weights
    try:
        qdq.quantize_float_weights = lambda *a, **k: 0
        plain = Executor(load_model(str(path))).run(feeds)
    finally:
        qdq.quantize_float_weights = orig
    assert any(not np.array_equal(np.asarray(plain[k]), v) for k, v in ref.items())


@pytest.mark.parametrize("op_type", ["Conv", "Gemm"])
@pytest.mark.parametrize("bias", [False, True])
def test_a_float_conv_or_gemm_becomes_integer_as_in_onnxruntime(tmp_path, op_type, bias):
    shape = (1, 8, 10, 12) if op_type == "Conv" else (3, 8)
    g, shape, outs = island(op_type, bias, shape=shape)
    want = "QLinearConv" if op_type == "Conv" else "QGemm"
    ops = check(g.save(tmp_path / "m.onnx", outs), shape, [want], seed=4)
    assert op_type not in ops


def test_left_alone_without_a_q_after_it(tmp_path):
    """The ConvTranspose's result is a graph output (no Q after it):
    onnxruntime keeps its float weight, and so does pyarena."""
    rng = np.random.default_rng(2)
    shape = (1, 4, 6, 6)
    g = Graph(shape)
    x = g.qdq("x", 0.0157, U8(128))
    w = g.const(rng.standard_normal((4, 3, 2, 2)).astype(np.float32))
    y = g.op("ConvTranspose", [x, w], strides=[2, 2])
    path = g.save(tmp_path / "m.onnx", {y: np.float32})
    model = onnx.load(str(path))
    assert quantize_float_weights(onnx, model.graph) == 0
    check(path, shape, ["ConvTranspose"])


@pytest.mark.parametrize("w", [np.zeros(7), np.linspace(0.1, 2, 7), np.linspace(-3, -0.5, 7),
                               np.linspace(-1, 2, 7)])
def test_weight_parameters_cover_zero(w):
    """The range always includes 0, which is then exactly representable;
    an all-zero weight gets scale 1."""
    scale, zp = weight_params(w.astype(np.float32))
    assert scale.dtype == np.float32 and zp.dtype == np.int8
    if not w.any():
        assert scale == 1
    lo, hi = min(w.min(), 0), max(w.max(), 0)
    assert -128 <= zp <= 127
    assert (np.float32(-128) - zp) * scale <= lo + 1e-6 and (127 - float(zp)) * scale >= hi - 1e-6
