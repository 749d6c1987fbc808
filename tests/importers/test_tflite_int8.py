"""Full-integer (int8) TFLite models written here, run by pyarena with int8
activations and int8 weights, against the TFLite interpreter's reference
kernels on the same file: every int8 output within one quantum."""
import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("flatbuffers")

from helpers.tflite_util import TFLiteBuilder  # noqa: E402
from pyarena import plan  # noqa: E402
from pyarena.errors import UnsupportedOpError  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.importers.reference import reference_tflite  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

I8 = np.int8


def q8(s, z=0):
    return ([s], [z])


def int8_weights(r, shape, axis):
    """Symmetric per-channel int8 weights along ``axis`` and their scales."""
    w = r.integers(-127, 128, shape).astype(I8)
    n = shape[axis]
    return w, r.uniform(0.002, 0.01, n).astype(np.float32)


def int8_cnn(path, seed=0):
    """float input -> QUANTIZE -> conv 3x3/2 + RELU6 (per-channel) ->
    depthwise 3x3 + RELU (depth multiplier 2) -> 1x1 conv -> ADD (residual,
    other scales) -> MAX_POOL -> AVERAGE_POOL -> CONCATENATION
    -> MEAN -> FULLY_CONNECTED -> SOFTMAX -> DEQUANTIZE.  Intermediate int8
    tensors are outputs too."""
    r = np.random.default_rng(seed)
    B = TFLiteBuilder()
    x = B.tensor("input", (1, 16, 16, 3))
    s_in, s1, s2, s3, s4 = 0.02, 0.05, 0.04, 0.06, 0.08
    xq = B.tensor("input_q", (1, 16, 16, 3), I8, quant=q8(s_in, 3))
    B.op("QUANTIZE", [x], [xq])
    w1, ws1 = int8_weights(r, (8, 3, 3, 3), 0)
    W1 = B.tensor("c1/w", w1.shape, I8, w1, quant=(ws1, [0] * 8, 0))
    B1 = B.tensor("c1/b", (8,), np.int32, r.integers(-300, 300, 8).astype(np.int32),
                  quant=(s_in * ws1, [0] * 8, 0))
    h1 = B.tensor("h1", (1, 8, 8, 8), I8, quant=q8(s1, -128))
    B.op("CONV_2D", [xq, W1, B1], [h1], ("Conv2DOptions", dict(
        Padding=0, StrideW=2, StrideH=2, FusedActivationFunction=3,
        DilationWFactor=1, DilationHFactor=1)))
    wd, wsd = int8_weights(r, (1, 3, 3, 16), 3)
    WD = B.tensor("dw/w", wd.shape, I8, wd, quant=(wsd, [0] * 16, 3))
    BD = B.tensor("dw/b", (16,), np.int32, r.integers(-300, 300, 16).astype(np.int32),
                  quant=(s1 * wsd, [0] * 16, 0))
    h2 = B.tensor("h2", (1, 8, 8, 16), I8, quant=q8(s2, -128))
    B.op("DEPTHWISE_CONV_2D", [h1, WD, BD], [h2], ("DepthwiseConv2DOptions", dict(
        Padding=0, StrideW=1, StrideH=1, DepthMultiplier=2, FusedActivationFunction=1,
        DilationWFactor=1, DilationHFactor=1)))
    wp, wsp = int8_weights(r, (8, 1, 1, 16), 0)
    WP = B.tensor("pw/w", wp.shape, I8, wp, quant=(wsp, [0] * 8, 0))
    BP = B.tensor("pw/b", (8,), np.int32, r.integers(-300, 300, 8).astype(np.int32),
                  quant=(s2 * wsp, [0] * 8, 0))
    h3 = B.tensor("h3", (1, 8, 8, 8), I8, quant=q8(s3, 5))
    B.op("CONV_2D", [h2, WP, BP], [h3], ("Conv2DOptions", dict(
        Padding=1, StrideW=1, StrideH=1, DilationWFactor=1, DilationHFactor=1)))
    h4 = B.tensor("h4", (1, 8, 8, 8), I8, quant=q8(s4, -10))
    B.op("ADD", [h3, h1], [h4], ("AddOptions", dict(FusedActivationFunction=0)))
    p1 = B.tensor("p1", (1, 4, 4, 8), I8, quant=q8(s4, -10))
    B.op("MAX_POOL_2D", [h4], [p1], ("Pool2DOptions", dict(
        Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2)))
    p2 = B.tensor("p2", (1, 4, 4, 8), I8, quant=q8(s4, -10))
    B.op("AVERAGE_POOL_2D", [h4], [p2], ("Pool2DOptions", dict(
        Padding=0, StrideW=2, StrideH=2, FilterWidth=3, FilterHeight=3)))
    cat = B.tensor("cat", (1, 4, 4, 16), I8, quant=q8(s4, -10))
    B.op("CONCATENATION", [p1, p2], [cat], ("ConcatenationOptions", dict(
        Axis=3, FusedActivationFunction=0)))
    ax = B.const("axes", np.array([1, 2], np.int32), np.int32)
    mn = B.tensor("mean", (1, 16), I8, quant=q8(0.07, 0))
    B.op("MEAN", [cat, ax], [mn], ("ReducerOptions", dict(KeepDims=False)))
    wf, wsf = int8_weights(r, (10, 16), 0)
    WF = B.tensor("fc/w", wf.shape, I8, wf, quant=(wsf, [0] * 10, 0))
    BF = B.tensor("fc/b", (10,), np.int32, r.integers(-300, 300, 10).astype(np.int32),
                  quant=(0.07 * wsf, [0] * 10, 0))
    lg = B.tensor("logits", (1, 10), I8, quant=q8(0.05, 0))
    B.op("FULLY_CONNECTED", [mn, WF, BF], [lg], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    pr = B.tensor("prob_q", (1, 10), I8, quant=q8(1 / 256, -128))
    B.op("SOFTMAX", [lg], [pr], ("SoftmaxOptions", dict(Beta=1.0)))
    y = B.tensor("prob", (1, 10))
    B.op("DEQUANTIZE", [pr], [y])
    return B.save(path, [x], [y, h1, h2, h3, h4, p1, p2, cat, mn, lg, pr])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return int8_cnn(str(tmp_path_factory.mktemp("int8") / "int8_cnn.tflite"))


def feeds(seed):
    return {"input": np.random.default_rng(seed).uniform(-2, 2, (1, 16, 16, 3))
            .astype(np.float32)}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_whole_network_tracks_the_interpreter(model, seed):
    """Differences of one quantum (rounding ties: TFLite's fixed-point
    multipliers vs pyarena's float ones) may grow by one downstream; never
    a bias."""
    ref, why = reference_tflite(model, feeds(seed), reference_kernels=True)
    assert ref is not None, why          # the [reference] extra installs the interpreter
    g = load_model(model)
    ours = {k: np.array(v) for k, v in Executor(g).run(feeds(seed)).items()}
    assert set(ours) == set(ref)
    for name, r in ref.items():
        assert ours[name].dtype == r.dtype, name
        if r.dtype == I8:
            diff = np.abs(ours[name].astype(int) - r.astype(int))
            assert diff.max() <= 2, (name, diff.max())
            if diff.size >= 256:
                assert np.mean(diff) < 0.2, name
        else:
            np.testing.assert_allclose(ours[name], r, atol=2 / 256 + 1e-6)


def single_op(path, code, x_shape, x_q, y_shape, y_q, consts=(), options=None, seed=0):
    """A one-op int8 model: input x (int8), constant inputs ``consts`` as
    (name, array, dtype, quant) tuples, output y."""
    B = TFLiteBuilder()
    x = B.tensor("x", x_shape, I8, quant=x_q)
    ins = [x] + [B.tensor(n, a.shape, dt, a, quant=q) for n, a, dt, q in consts]
    y = B.tensor("y", y_shape, I8, quant=y_q)
    B.op(code, ins, [y], options)
    return B.save(str(path), [x], [y])


def run_single(path, seed):
    x = np.random.default_rng(seed).integers(-128, 128, load_model(path).tensors["x"].shape)
    feed = {"x": x.astype(I8)}
    ref, why = reference_tflite(path, feed, reference_kernels=True)
    assert ref is not None, why          # the [reference] extra installs the interpreter
    ours = np.array(Executor(load_model(path)).run(feed)["y"])
    return ours.astype(int), ref["y"].astype(int)


def conv_case(r, code, mult=2):
    if code == "CONV_2D":
        w, ws = int8_weights(r, (6, 3, 3, 4), 0)
        opts = ("Conv2DOptions", dict(Padding=0, StrideW=2, StrideH=1, DilationWFactor=1,
                                      DilationHFactor=1, FusedActivationFunction=3))
        y_shape = (1, 7, 4, 6)
        qdim = 0
    else:
        w, ws = int8_weights(r, (1, 3, 3, 4 * mult), 3)
        opts = ("DepthwiseConv2DOptions", dict(Padding=1, StrideW=1, StrideH=1,
                                               DepthMultiplier=mult, DilationWFactor=1,
                                               DilationHFactor=1, FusedActivationFunction=1))
        y_shape = (1, 5, 5, 4 * mult)
        qdim = 3
    n = ws.size
    b = r.integers(-500, 500, n).astype(np.int32)
    consts = [("w", w, I8, (ws, [0] * n, qdim)), ("b", b, np.int32, (0.05 * ws, [0] * n, 0))]
    return consts, opts, y_shape


@pytest.mark.parametrize("code, mult", [("CONV_2D", 1), ("DEPTHWISE_CONV_2D", 1),
                                        ("DEPTHWISE_CONV_2D", 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_single_conv_is_the_interpreters_to_the_bit(tmp_path, code, mult, seed):
    """TFLite's fixed-point requantization (runtime/kernels/requant_fixed.py):
    the same bytes as the reference kernels, on the native path and on
    the NumPy one."""
    r = np.random.default_rng(seed)
    consts, opts, y_shape = conv_case(r, code, mult)
    path = single_op(tmp_path / "c.tflite", code, (1, 7, 7, 4), q8(0.05, 7), y_shape,
                     q8(0.08, -20), consts, opts)
    ours, ref = run_single(path, seed)
    np.testing.assert_array_equal(ours, ref)
    x = np.random.default_rng(seed).integers(-128, 128, (1, 7, 7, 4)).astype(I8)
    numpy_path = Executor(load_model(path, native=False)).run({"x": x})["y"]
    np.testing.assert_array_equal(np.asarray(numpy_path).astype(int), ref)


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("pow2", [False, True])
def test_fully_connected_is_the_interpreters_to_the_bit(tmp_path, per_channel, pow2):
    """FULLY_CONNECTED requantizes with TFLite's Q31 multiplier rounded once
    (ruy's MultiplyByQuantizedMultiplier), not conv's two roundings nor
    onnxruntime's float32 product: the interpreter's bytes on the native
    path and the NumPy one, where the conv's rounding is some bytes off
    (and, with scales that are powers of two -- exact ties, half up there,
    half to even in float32 -- the float32 rule too)."""
    from pyarena.runtime.kernels.requant_fixed import requant_fixed, tflite_multipliers
    r = np.random.default_rng(7)
    M, K, N = 300, 64, 12
    w, ws = int8_weights(r, (N, K), 0)
    xs, ys = (0.25, 0.5) if pow2 else (0.05, 0.37)
    if pow2:
        ws = (2.0 ** -r.integers(6, 9, N)).astype(np.float32)
    ws = ws if per_channel else ws[:1]
    b = r.integers(-500, 500, N).astype(np.int32)
    consts = [("w", w, I8, (ws, [0] * ws.size, 0)),
              ("b", b, np.int32, (xs * ws, [0] * ws.size, 0))]
    path = single_op(tmp_path / "fc.tflite", "FULLY_CONNECTED", (M, K), q8(xs, 7), (M, N),
                     q8(ys, -20), consts, ("FullyConnectedOptions",
                                           dict(FusedActivationFunction=0)))
    x = r.integers(-128, 128, (M, K)).astype(I8)
    ref, why = reference_tflite(path, {"x": x}, reference_kernels=True)
    assert ref is not None, why
    for native in (True, False):
        ours = np.asarray(Executor(load_model(path, native=native)).run({"x": x})["y"])
        np.testing.assert_array_equal(ours, ref["y"], err_msg=f"native={native}")
    # the case tells the roundings apart: conv's two give other bytes
    acc = (x.astype(np.int64) - 7) @ w.T.astype(np.int64) + b
    m, sh = (np.broadcast_to(v, (N,)) for v in tflite_multipliers(xs, ws, ys))
    twice = np.zeros((M, N), I8)
    requant_fixed(acc, m, sh, -20, -128, 127, twice)
    assert np.any(twice != ref["y"])
    if pow2:        # and so does onnxruntime's float32 product
        f = np.float32
        y32 = np.clip(np.rint(acc.astype(f) * (f(xs) * np.broadcast_to(ws, (N,)) / f(ys))) - 20,
                      -128, 127)
        assert np.any(y32 != ref["y"])


@pytest.mark.parametrize("code", ["RELU", "RELU6", "RELU_N1_TO_1", "QUANTIZE"])
@pytest.mark.parametrize("scales", [(0.0371, 0.0529, 5, -9), (0.25, 0.5, 3, -20),
                                    (0.5, 0.03125, -1, -128)])
def test_requantizing_builtins_are_the_interpreters_to_the_bit(tmp_path, code, scales):
    """An int8 -> int8 RELU* / QUANTIZE requantizes as TFLite does (the Q31
    multiplier of x_scale / y_scale, two roundings, then the clamp): a
    table of the 256 input bytes, the interpreter's bytes for every one;
    with exact ties (powers of two) onnxruntime's float32 rule would differ."""
    xs, ys, xz, yz = scales
    path = single_op(tmp_path / "r.tflite", code, (1, 16, 16), q8(xs, xz), (1, 16, 16),
                     q8(ys, yz))
    x = np.arange(256, dtype=np.uint8).view(I8).reshape(1, 16, 16)    # every byte
    ref, why = reference_tflite(path, {"x": x}, reference_kernels=True)
    assert ref is not None, why
    g = load_model(path)
    assert [o.op_type for o in g.ops] == ["QLinearLookup"]
    for native in (True, False):
        ours = np.asarray(Executor(load_model(path, native=native)).run({"x": x})["y"])
        np.testing.assert_array_equal(ours, ref["y"], err_msg=f"native={native}")
    if (xs, ys) == (0.25, 0.5):
        f = np.float32
        y32 = np.rint((x.astype(f) - xz) * (f(xs) / f(ys))) + yz
        lo = yz if code.startswith("RELU") and code != "RELU_N1_TO_1" else -128
        assert np.any(np.clip(y32, lo, 127) != ref["y"])


@pytest.mark.parametrize("scales", [(0.0371, 0.0219, 0.0529), (0.25, 0.125, 0.5)])
def test_mul_is_the_interpreters_to_the_bit(tmp_path, scales):
    """MUL requantizes its int32 product with TFLite's Q31 multiplier of
    sa * sb / sy and two roundings (reference_integer_ops/mul.h): the
    interpreter's bytes, also with a fused RELU6, and with exact ties
    (powers of two) where onnxruntime's float32 formula differs."""
    xs, bs, ys = scales
    r = np.random.default_rng(8)
    b = r.integers(-128, 128, (1, 16, 16, 8)).astype(I8)
    for act in (0, 3):
        path = single_op(tmp_path / f"m{act}.tflite", "MUL", (1, 16, 16, 8), q8(xs, 3),
                         (1, 16, 16, 8), q8(ys, -7), [("b", b, I8, q8(bs, -5))],
                         ("MulOptions", dict(FusedActivationFunction=act)))
        x = r.integers(-128, 128, (1, 16, 16, 8)).astype(I8)
        ref, why = reference_tflite(path, {"x": x}, reference_kernels=True)
        assert ref is not None, why
        for native in (True, False):
            ours = np.asarray(Executor(load_model(path, native=native)).run({"x": x})["y"])
            np.testing.assert_array_equal(ours, ref["y"], err_msg=f"native={native}")
        if (xs, ys) == (0.25, 0.5) and act == 0:
            f = np.float32
            prod = (x.astype(f) - 3) * (b.astype(f) + 5)
            y32 = np.clip(np.rint(prod * (f(xs * bs) / f(ys))) - 7, -128, 127)
            assert np.any(y32 != ref["y"])


@pytest.mark.parametrize("padding,act,k", [(1, 0, 2), (0, 0, 3), (0, 1, 3)])
def test_average_pool_is_the_interpreters_to_the_bit(tmp_path, padding, act, k):
    """AVERAGE_POOL_2D averages the raw bytes with C's integer division
    rounded half away from zero (reference_integer_ops/pooling.h), the
    window's count excluding the padding: the interpreter's bytes, where the
    ONNX formula (zero point out, float32, half to even) is a unit off on
    the ties of even counts (2x2 windows)."""
    r = np.random.default_rng(9)
    path = single_op(tmp_path / "p.tflite", "AVERAGE_POOL_2D", (1, 16, 16, 8), q8(0.05, 7),
                     (1, 8, 8, 8), q8(0.05, 7), (), ("Pool2DOptions", dict(
                         Padding=padding, StrideW=2, StrideH=2, FilterWidth=k, FilterHeight=k,
                         FusedActivationFunction=act)))        # (Padding 0: SAME, 1: VALID)
    x = r.integers(-128, 128, (1, 16, 16, 8)).astype(I8)
    ref, why = reference_tflite(path, {"x": x}, reference_kernels=True)
    assert ref is not None, why
    for native in (True, False):
        ours = np.asarray(Executor(load_model(path, native=native)).run({"x": x})["y"])
        np.testing.assert_array_equal(ours, ref["y"], err_msg=f"native={native}")
    if k == 2:
        xf = x.astype(np.float64)[0]
        win = xf[0::2, 0::2] + xf[0::2, 1::2] + xf[1::2, 0::2] + xf[1::2, 1::2]
        onnx_way = np.clip(np.rint((win - 4 * 7) / 4) + 7, -128, 127)
        assert np.any(onnx_way != ref["y"][0])


@pytest.mark.parametrize("code", ["ADD", "MUL", "AVERAGE_POOL_2D", "MEAN", "SOFTMAX",
                                  "FULLY_CONNECTED", "LOGISTIC", "RELU", "RELU6"])
def test_single_op_within_one_quantum(tmp_path, code):
    r = np.random.default_rng(3)
    xq, yq = q8(0.05, 7), q8(0.08, -20)
    shape, y_shape, consts, opts = (1, 6, 6, 4), (1, 6, 6, 4), [], None
    if code in ("ADD", "MUL"):
        consts = [("b", r.integers(-128, 128, (1, 6, 6, 4)).astype(I8), I8, q8(0.03, -5))]
        opts = (code.capitalize() + "Options", dict(FusedActivationFunction=0))
    elif code == "AVERAGE_POOL_2D":
        y_shape, yq = (1, 3, 3, 4), xq
        opts = ("Pool2DOptions", dict(Padding=0, StrideW=2, StrideH=2, FilterWidth=3,
                                      FilterHeight=3))
    elif code == "MEAN":
        y_shape = (1, 1, 1, 4)
        consts = [("axes", np.array([1, 2], np.int32), np.int32, None)]
        opts = ("ReducerOptions", dict(KeepDims=True))
    elif code == "SOFTMAX":
        shape = y_shape = (2, 10)
        yq = q8(1 / 256, -128)
        opts = ("SoftmaxOptions", dict(Beta=1.0))
    elif code == "LOGISTIC":
        yq = q8(1 / 256, -128)
    elif code in ("RELU", "RELU6"):
        yq = q8(0.03, -128)            # requantized and clamped to the output
    else:
        shape, y_shape = (2, 16), (2, 5)
        w, ws = int8_weights(r, (5, 16), 0)
        b = r.integers(-500, 500, 5).astype(np.int32)
        consts = [("w", w, I8, (ws, [0] * 5, 0)), ("b", b, np.int32, (0.05 * ws, [0] * 5, 0))]
        opts = ("FullyConnectedOptions", dict(FusedActivationFunction=1))
    path = single_op(tmp_path / "o.tflite", code, shape, xq, y_shape, yq, consts, opts)
    ours, ref = run_single(path, 0)
    assert ours.shape == ref.shape
    assert np.abs(ours - ref).max() <= 1


def test_int8_model_stays_int8(model):
    g = load_model(model)
    ops = {o.op_type for o in g.ops}
    assert {"QLinearConv", "QGemm", "QLinearAdd", "QLinearConcat", "QLinearSoftmax",
            "QLinearAveragePool", "QLinearGlobalAveragePool", "MaxPool"} <= ops
    big_consts = [t for t in g.tensors.values() if t.role == "constant" and t.nbytes >= 128]
    assert big_consts and all(str(t.dtype) in ("int8", "int32") for t in big_consts)
    acts = [t for t in g.tensors.values() if t.role != "constant" and t.name != "input"
            and t.name != "prob"]
    assert all(np.dtype(t.dtype) == I8 for t in acts)
    p = plan(g)
    assert p.arena_bytes == p.lower_bound_bytes


def test_unsupported_int8_builtin_is_refused_by_name(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4), I8, quant=q8(0.1, 0))
    y = B.tensor("y", (1, 4), I8, quant=q8(0.1, 0))
    B.op("TANH", [x], [y])
    path = B.save(str(tmp_path / "tanh.tflite"), [x], [y])
    with pytest.raises(UnsupportedOpError, match=r"tanh_0.*TANH, int8"):
        load_model(path)


def _select_model(path, code, y_q=None):
    """An int8 STRIDED_SLICE (rows 1.. of 5, every other column) or
    SPLIT_V (sizes [3, -1] along axis 1) of a (1, 5, 1, 8) tensor."""
    B = TFLiteBuilder()
    xq = q8(0.05, 7)
    x = B.tensor("x", (1, 5, 1, 8), I8, quant=xq)
    if code == "STRIDED_SLICE":
        c = [B.tensor(n, (4,), np.int32, np.array(v, np.int32)) for n, v in
             (("begin", [0, 1, 0, 0]), ("end", [1, 5, 1, 8]), ("strides", [1, 1, 1, 2]))]
        y = B.tensor("y", (1, 4, 1, 4), I8, quant=y_q or xq)
        B.op(code, [x] + c, [y], ("StridedSliceOptions", {}))
        return B.save(str(path), [x], [y])
    sizes = B.tensor("sizes", (2,), np.int32, np.array([3, -1], np.int32))
    axis = B.tensor("axis", (), np.int32, np.array(1, np.int32))
    y = B.tensor("y", (1, 3, 1, 8), I8, quant=y_q or xq)
    y2 = B.tensor("y2", (1, 2, 1, 8), I8, quant=xq)
    B.op(code, [x, sizes, axis], [y, y2], ("SplitVOptions", {"NumSplits": 2}))
    return B.save(str(path), [x], [y, y2])


@pytest.mark.parametrize("code", ["STRIDED_SLICE", "SPLIT_V"])
def test_int8_slices_and_splits_copy_the_interpreters_bytes(tmp_path, code):
    path = _select_model(tmp_path / "s.tflite", code)
    x = np.random.default_rng(4).integers(-128, 128, (1, 5, 1, 8)).astype(I8)
    ref, why = reference_tflite(path, {"x": x}, reference_kernels=True)
    assert ref is not None, why
    g = load_model(path)
    assert {o.op_type for o in g.ops} <= {"StridedSlice", "Split"}
    ours = Executor(g).run({"x": x})
    for name, want in ref.items():
        np.testing.assert_array_equal(np.asarray(ours[name]), want, err_msg=name)


@pytest.mark.parametrize("code", ["STRIDED_SLICE", "SPLIT_V"])
def test_int8_slice_quantized_unlike_its_input_is_refused(tmp_path, code):
    path = _select_model(tmp_path / "s.tflite", code, y_q=q8(0.1, 0))
    with pytest.raises(UnsupportedOpError, match="quantized unlike the input"):
        load_model(path)
