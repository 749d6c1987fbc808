"""TFLite importer: flatbuffers written in the test, checked against the
TFLite interpreter (ai-edge-litert), and malformed files."""
import numpy as np
import pytest

from helpers.tflite_util import TFLiteBuilder, small_cnn
from pyarena.runtime import Executor, random_feeds
from pyarena.importers import ModelImportError, UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan


# native kernels, and the NumPy paths with their scratch whole or in one-row bands
PATHS = [(True, None), (False, None), (False, 1)]
PATH_IDS = ["native", "numpy-whole", "numpy-row-bands"]


@pytest.mark.parametrize("native,budget", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16-weights"])
def test_small_cnn_matches_tflite_interpreter(tmp_path, fp16, native, budget):
    # budget 1: conv / pool scratch in one-row bands
    path = small_cnn(tmp_path / "m.tflite", fp16=fp16, extra_outputs=True)
    g = load_model(path, scratch_budget=budget, native=native)
    # NHWC kept, TFLite names canonicalised, fused activations as attributes
    convs = [op for op in g.ops if op.op_type == "Conv"]
    assert len(convs) == 3 and all(op.attrs["layout"] == "NHWC" for op in convs)
    assert convs[0].attrs["activation"] == "RELU6"
    assert {"Sigmoid", "HardSwish", "ReduceMean", "FullyConnected", "Resize",
            "Concat", "Pad", "Softmax", "AveragePool", "MaxPool"} <= \
        {op.op_type for op in g.ops}
    # the residual Add after the 1x1 conv: fused into it on the native path
    assert ("Add" in {op.op_type for op in g.ops}) != native
    # fp16 weights: DEQUANTIZE folded into a float32 constant, not an op; its
    # value stays the file's float16 view (the kernels read it as float32)
    assert "DEQUANTIZE" not in {op.op_type for op in g.ops}
    w = g.tensors["conv1/w"]
    assert w.role == "constant" and w.dtype == "float32"
    assert w.data.dtype == (np.float16 if fp16 else np.float32)
    # the depthwise conv and the 3-channel first conv (the few-input-channel
    # kernel) run natively, no workspace; im2col + BLAS without native
    assert (convs[1].scratch_bytes == 0) == native
    assert (convs[0].scratch_bytes == 0) == native
    p = plan(g)
    ex = Executor(g, p)
    feeds = random_feeds(g, seed=4)
    out = ex.run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    assert set(ref) == set(out)
    for k in out:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5, err_msg=k)
    # NHWC kernels, fused activations and resizes allocate nothing either
    from pyarena import Pool, numpy_allocator
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
    assert counter.allocations == 0


def test_truncated_and_wrong_magic(tmp_path):
    good = open(small_cnn(tmp_path / "m.tflite"), "rb").read()
    for i, blob in enumerate([good[:len(good) // 3], good[:12], b"",
                              b"ABCDEFGH" + good[8:], b"\x00" * 64]):
        p = tmp_path / f"bad{i}.tflite"
        p.write_bytes(blob)
        with pytest.raises(ModelImportError) as e:
            load_model(str(p))
        assert str(p) in str(e.value)


def test_a_sound_flatbuffer_without_the_tflite_identifier_is_refused(tmp_path):
    # the schema's file_identifier "TFL3" sits at bytes 4..8; a flatbuffer
    # reader does not check it, so the importer must
    good = open(small_cnn(tmp_path / "m.tflite"), "rb").read()
    assert good[4:8] == b"TFL3"
    p = tmp_path / "other.tflite"
    p.write_bytes(good[:4] + b"TFL2" + good[8:])
    with pytest.raises(ModelImportError, match="no 'TFL3' identifier"):
        load_model(str(p))


def test_an_external_buffer_ending_at_the_end_of_the_file_is_read(tmp_path):
    # the schema's Buffer.offset / size: data after the flatbuffer, here the
    # file's last bytes; one byte short of them is a truncated file
    c = np.array([[1.5, -2.0, 0.25, 8.0]], np.float32)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    k = B.tensor("k", (1, 4), data=c, external=True)
    y = B.tensor("y", (1, 4))
    B.op("ADD", [x, k], [y])
    path = B.save(tmp_path / "ext.tflite", [x], [y])
    blob = open(path, "rb").read()
    assert blob[-16:] == c.tobytes() and B.external_base == len(blob) - 16
    xv = np.array([[1, 2, 3, 4]], np.float32)
    g = load_model(path)
    np.testing.assert_array_equal(Executor(g, plan(g)).run({"x": xv})["y"], xv + c)
    (tmp_path / "short.tflite").write_bytes(blob[:-1])
    with pytest.raises(ModelImportError, match="outside the file"):
        load_model(str(tmp_path / "short.tflite"))


def test_absurd_and_negative_dimensions(tmp_path):
    for shape, what in [((1 << 20, 1 << 20, 1 << 20), "absurd"), ((1, -3, 4), "negative")]:
        B = TFLiteBuilder()
        x = B.tensor("x", shape)
        y = B.tensor("y", shape)
        B.op("RELU", [x], [y])
        path = B.save(tmp_path / f"{what}.tflite", [x], [y])
        with pytest.raises(ModelImportError, match=what + "|" + "'x'"):
            load_model(path)


def test_quantized_and_unknown_ops_are_named(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4), np.int8, quant=([0.1], [0]))
    y = B.tensor("y", (1, 4), np.int8, quant=([0.1], [0]))
    B.op("TANH", [x], [y])
    path = B.save(tmp_path / "q.tflite", [x], [y])
    with pytest.raises(UnsupportedOpError, match="tanh_0.*int8"):
        load_model(path)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    y = B.tensor("y", (1, 4))
    B.op("CUMSUM", [x, x], [y])
    path = B.save(tmp_path / "u.tflite", [x], [y])
    with pytest.raises(UnsupportedOpError, match="cumsum_0"):
        load_model(path)


def test_int8_weights_dequantized_at_import(tmp_path):
    r = np.random.default_rng(0)
    q = r.integers(-100, 100, (4, 6)).astype(np.int8)
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 6))
    wq = B.tensor("wq", (4, 6), np.int8, data=q, quant=([0.02], [3]))
    w = B.tensor("w", (4, 6))
    B.op("DEQUANTIZE", [wq], [w])
    y = B.tensor("y", (2, 4))
    B.op("FULLY_CONNECTED", [x, w, -1], [y], ("FullyConnectedOptions",
                                             dict(FusedActivationFunction=1)))
    path = B.save(tmp_path / "w8.tflite", [x], [y])
    g = load_model(path)
    np.testing.assert_allclose(g.tensors["w"].data, (q.astype(np.float32) - 3) * 0.02,
                               rtol=1e-6)
    feeds = random_feeds(g)
    out = Executor(g).run(feeds)["y"]
    ref, _ = reference_tflite(path, feeds)
    np.testing.assert_allclose(out, ref["y"], rtol=1e-4, atol=1e-5)


def test_per_channel_int8_weights_dequantized_along_their_axis(tmp_path):
    """Depthwise weights (1, 3, 3, 4) quantized per output channel
    (quantized_dimension 3, one scale and zero point per channel):
    (q - zp[c]) * scale[c], and the conv matches the TFLite interpreter."""
    r = np.random.default_rng(1)
    q = r.integers(-100, 100, (1, 3, 3, 4)).astype(np.int8)
    scales, zps = [0.01, 0.02, 0.05, 0.1], [0, 1, -2, 3]
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 6, 6, 4))
    wq = B.tensor("wq", (1, 3, 3, 4), np.int8, data=q, quant=(scales, zps, 3))
    w = B.tensor("w", (1, 3, 3, 4))
    B.op("DEQUANTIZE", [wq], [w])
    b = B.const("b", np.zeros(4, np.float32))
    y = B.tensor("y", (1, 6, 6, 4))
    B.op("DEPTHWISE_CONV_2D", [x, w, b], [y],
         ("DepthwiseConv2DOptions", dict(Padding=0, StrideW=1, StrideH=1,
                                         DepthMultiplier=1, DilationWFactor=1,
                                         DilationHFactor=1)))
    path = B.save(tmp_path / "pc.tflite", [x], [y])
    g = load_model(path)
    want = (q.astype(np.float64) - np.array(zps)) * np.array(scales)
    np.testing.assert_allclose(g.tensors["w"].data, want, rtol=1e-6)
    feeds = random_feeds(g)
    ref, _ = reference_tflite(path, feeds)
    np.testing.assert_allclose(Executor(g).run(feeds)["y"], ref["y"], rtol=1e-4, atol=1e-5)


def test_cyclic_graph(tmp_path):
    from pyarena.graph import GraphError
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    a = B.tensor("a", (1, 4))
    b = B.tensor("b", (1, 4))
    y = B.tensor("y", (1, 4))
    B.op("ADD", [x, b], [a])
    B.op("RELU", [a], [b])
    B.op("RELU", [b], [y])
    path = B.save(tmp_path / "cyc.tflite", [x], [y])
    with pytest.raises(GraphError, match="cycle"):
        load_model(path)


# -- NHWC convolutions added in the second round ------------------------------------
def _check_against_interpreter(path, budget=None, native=True):
    """Import, plan, run; match the TFLite interpreter; a second inference
    allocates no NumPy data.  Returns the graph."""
    from pyarena import Pool, numpy_allocator
    g = load_model(path, scratch_budget=budget, native=native)
    ex = Executor(g, plan(g))
    feeds = random_feeds(g, seed=3)
    out = {k: np.array(v) for k, v in ex.run(feeds).items()}
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    assert set(ref) == set(out)
    for k in out:
        assert out[k].shape == ref[k].shape, k
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5, err_msg=k)
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
    assert counter.allocations == 0
    return g


def _f(r, *s):
    return (r.standard_normal(s) * 0.3).astype(np.float32)


@pytest.mark.parametrize("native,budget", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cin,mult,stride,pad", [(3, 2, 1, 0), (1, 4, 2, 0), (4, 3, 2, 1)])
def test_depthwise_multiplier(tmp_path, native, budget, cin, mult, stride, pad):
    r = np.random.default_rng(cin * 10 + mult)
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 9, 8, cin))
    w = B.const("w", _f(r, 1, 3, 3, cin * mult))
    b = B.const("b", _f(r, cin * mult))
    ho = -(-9 // stride) if pad == 0 else (9 - 3) // stride + 1
    wo = -(-8 // stride) if pad == 0 else (8 - 3) // stride + 1
    y = B.tensor("y", (2, ho, wo, cin * mult))
    B.op("DEPTHWISE_CONV_2D", [x, w, b], [y], ("DepthwiseConv2DOptions", dict(
        Padding=pad, StrideW=stride, StrideH=stride, DepthMultiplier=mult,
        FusedActivationFunction=1, DilationWFactor=1, DilationHFactor=1)))
    g = _check_against_interpreter(B.save(tmp_path / "dw.tflite", [x], [y]), budget, native)
    # one input channel is a plain conv of 1 channel: the few-input-channel
    # kernel (dispatch rule), no workspace either
    assert g.ops[0].op_type == "Conv"
    assert (g.ops[0].scratch_bytes == 0) == native


@pytest.mark.parametrize("native,budget", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cin,groups,stride,pad", [(8, 2, 1, 0), (8, 4, 2, 1), (32, 2, 2, 0)])
def test_grouped_conv_nhwc(tmp_path, native, budget, cin, groups, stride, pad):
    """Few channels per group (<= 8: K-major columns) and many (16)."""
    r = np.random.default_rng(groups)
    cout = 12
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 10, 9, cin))
    w = B.const("w", _f(r, cout, 3, 3, cin // groups))
    b = B.const("b", _f(r, cout))
    ho = -(-10 // stride) if pad == 0 else (10 - 3) // stride + 1
    wo = -(-9 // stride) if pad == 0 else (9 - 3) // stride + 1
    y = B.tensor("y", (1, ho, wo, cout))
    B.op("CONV_2D", [x, w, b], [y], ("Conv2DOptions", dict(
        Padding=pad, StrideW=stride, StrideH=stride, FusedActivationFunction=0,
        DilationWFactor=1, DilationHFactor=1)))
    g = _check_against_interpreter(B.save(tmp_path / "gc.tflite", [x], [y]), budget, native)
    assert g.ops[0].attrs["group"] == groups


@pytest.mark.parametrize("budget", [None, 1], ids=["whole", "row-bands"])
@pytest.mark.parametrize("k,stride,pad,out_hw,bias,act", [
    (3, 2, 0, (10, 8), True, 0),      # SAME, 2x upsampling
    (3, 2, 1, (11, 9), True, 1),      # VALID, full size, fused RELU
    (4, 2, 0, (10, 8), False, 0),     # even kernel: asymmetric SAME padding
    (2, 1, 1, (6, 5), True, 0),       # stride 1
])
def test_transpose_conv(tmp_path, request, budget, k, stride, pad, out_hw, bias, act):
    if budget:
        request.getfixturevalue("single_steps")     # one input row per band
    r = np.random.default_rng(k * 7 + stride)
    cin, cout = 5, 3
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 5, 4, cin))
    shape = B.const("oshape", np.array((2,) + out_hw + (cout,), np.int32), np.int32)
    w = B.const("w", _f(r, cout, k, k, cin))
    ins = [shape, w, x]
    if bias:
        ins.append(B.const("b", _f(r, cout)))
    y = B.tensor("y", (2,) + out_hw + (cout,))
    B.op("TRANSPOSE_CONV", ins, [y], ("TransposeConvOptions", dict(
        Padding=pad, StrideW=stride, StrideH=stride, FusedActivationFunction=act)))
    g = _check_against_interpreter(B.save(tmp_path / "tc.tflite", [x], [y]), budget)
    op = g.ops[0]
    assert op.op_type == "ConvTranspose" and op.attrs["layout"] == "NHWC"
    full = cout * k * k * 4 * 4      # one input row of columns per band ...
    assert op.scratch_bytes == (full if budget else full * 5)   # ... or all 5


def test_elementwise_builtins(tmp_path):
    """GELU (exact and tanh), ELU and the plain unary maths builtins, chained:
    canonical names, each one in place, allocation-free, vs the interpreter."""
    chain = [("GELU", ("GeluOptions", dict(Approximate=False))),
             ("GELU", ("GeluOptions", dict(Approximate=True))), ("ELU", None),
             ("ABS", None), ("SQRT", None), ("LOG", None), ("NEG", None), ("SIN", None),
             ("COS", None), ("ROUND", None), ("FLOOR", None), ("CEIL", None)]
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 7, 5, 3))
    cur = x
    for k, (code, opts) in enumerate(chain):
        nxt = B.tensor(f"t{k}", (2, 7, 5, 3))
        B.op(code, [cur], [nxt], opts)
        cur = nxt
    path = B.save(tmp_path / "u.tflite", [x], [cur])
    g = _check_against_interpreter(path)
    assert [op.op_type for op in g.ops] == ["Gelu", "Gelu", "Elu", "Abs", "Sqrt", "Log",
                                            "Neg", "Sin", "Cos", "Round", "Floor", "Ceil"]
    assert [op.attrs["approximate"] for op in g.ops[:2]] == ["none", "tanh"]
    views = plan(g).bind()
    addr = {n: v.__array_interface__["data"][0] for n, v in views.items()}
    names = [op.outputs[0] for op in g.ops]
    assert all(addr[a] == addr[b] for a, b in zip(names, names[1:]))


@pytest.mark.parametrize("padding,stride,out_hw", [(1, 2, (10, 8)), (2, 2, (11, 9)),
                                                   (1, 1, (5, 4))])
def test_mediapipe_convolution2d_transpose_bias(tmp_path, padding, stride, out_hw):
    """MediaPipe's custom op (raw TfLiteTransposeConvParams options) runs as
    NHWC ConvTranspose; the interpreter has no kernel for it, so the reference
    is the same layer written as the builtin TRANSPOSE_CONV."""
    import struct
    from pyarena import Pool, numpy_allocator
    r = np.random.default_rng(padding * 10 + stride)
    w, bias = _f(r, 3, 3, 3, 4), _f(r, 3)
    x_in = _f(r, 1, 5, 4, 4)

    def model(custom):
        B = TFLiteBuilder()
        x = B.tensor("x", (1, 5, 4, 4))
        wt, bt = B.const("w", w), B.const("b", bias)
        y = B.tensor("y", (1,) + out_hw + (3,))
        if custom:
            B.op("CUSTOM:Convolution2DTransposeBias", [x, wt, bt], [y],
                 ("custom", struct.pack("<3i", padding, stride, stride)))
        else:
            shape = B.const("oshape", np.array((1,) + out_hw + (3,), np.int32), np.int32)
            B.op("TRANSPOSE_CONV", [shape, wt, x, bt], [y], ("TransposeConvOptions", dict(
                Padding=padding - 1, StrideW=stride, StrideH=stride)))
        return B.save(tmp_path / f"m{int(custom)}.tflite", [x], [y])

    ref, why = reference_tflite(model(False), {"x": x_in})
    assert ref is not None, why
    g = load_model(model(True))
    assert g.ops[0].op_type == "ConvTranspose"
    ex = Executor(g, plan(g))
    np.testing.assert_allclose(ex.run({"x": x_in})["y"], ref["y"], rtol=1e-4, atol=2e-5)
    with numpy_allocator(Pool()) as counter:
        ex.run({"x": x_in})
    assert counter.allocations == 0


def test_mediapipe_transpose_bias_bad_options_are_named(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 5, 4, 4))
    w, b = B.const("w", np.zeros((3, 3, 3, 4))), B.const("b", np.zeros(3))
    y = B.tensor("y", (1, 10, 8, 3))
    B.op("CUSTOM:Convolution2DTransposeBias", [x, w, b], [y], ("custom", b"\x01\x00"))
    with pytest.raises(UnsupportedOpError, match="Convolution2DTransposeBias.*12 bytes"):
        load_model(B.save(tmp_path / "bad.tflite", [x], [y]))


@pytest.mark.parametrize("budget", [None, 1], ids=["whole", "row-bands"])
def test_non_overlapping_pools_nhwc(tmp_path, budget):
    """stride = kernel, VALID (MediaPipe's whole-image average pools): the
    one-reduction path, including rows/cols left over at the edge."""
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 17, 18, 5))
    a = B.tensor("a", (2, 2, 2, 5))
    m = B.tensor("m", (2, 8, 9, 5))
    g1 = B.tensor("g1", (2, 1, 1, 5))
    B.op("AVERAGE_POOL_2D", [x], [a], ("Pool2DOptions", dict(
        Padding=1, StrideW=8, StrideH=8, FilterWidth=8, FilterHeight=8)))
    B.op("MAX_POOL_2D", [x], [m], ("Pool2DOptions", dict(
        Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2)))
    B.op("AVERAGE_POOL_2D", [m], [g1], ("Pool2DOptions", dict(
        Padding=1, StrideW=9, StrideH=8, FilterWidth=9, FilterHeight=8)))
    _check_against_interpreter(B.save(tmp_path / "p.tflite", [x], [a, g1]), budget)


def test_rsqrt_square_squared_difference(tmp_path):
    """The layer-norm builtins: SQUARE, RSQRT, SQUARED_DIFFERENCE (broadcast
    and same-shaped), in place where the table allows, vs the interpreter."""
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 6, 5))
    m = B.tensor("m", (2, 6, 1))
    axes = B.const("axes", np.array([2], np.int32), np.int32)
    B.op("MEAN", [x, axes], [m], ("ReducerOptions", dict(KeepDims=True)))
    d = B.tensor("d", (2, 6, 5))
    B.op("SQUARED_DIFFERENCE", [x, m], [d])
    sq = B.tensor("sq", (2, 6, 5))
    B.op("SQUARE", [d], [sq])
    r = B.tensor("r", (2, 6, 5))
    B.op("RSQRT", [sq], [r])
    y = B.tensor("y", (2, 6, 5))
    B.op("SQUARED_DIFFERENCE", [r, x], [y])
    g = _check_against_interpreter(B.save(tmp_path / "ln.tflite", [x], [y]))
    assert [op.op_type for op in g.ops] == ["ReduceMean", "SquaredDifference", "Square",
                                            "Rsqrt", "SquaredDifference"]
    addr = {n: v.__array_interface__["data"][0] for n, v in plan(g).bind().items()}
    assert addr["d"] == addr["sq"] == addr["r"] == addr["y"]


def test_format_is_sniffed_from_the_content_without_an_extension(tmp_path):
    # the TFLite flatbuffer's file identifier "TFL3" sits at bytes 4..8,
    # after the root table's offset; a JSON graph starts with "{"
    from pyarena.importers import sniff_format
    src = small_cnn(tmp_path / "m.tflite")
    bare = tmp_path / "model"
    bare.write_bytes(open(src, "rb").read())
    assert open(bare, "rb").read(8)[4:8] == b"TFL3"
    assert sniff_format(bare) == "tflite"
    assert [op.op_type for op in load_model(bare).ops] == \
        [op.op_type for op in load_model(src).ops]
    (tmp_path / "graph").write_text('{"name": "g"}')
    assert sniff_format(tmp_path / "graph") == "json"
    (tmp_path / "other").write_bytes(b"\x08\x07TFL3xx")   # TFL3 at the wrong place
    assert sniff_format(tmp_path / "other") == "onnx"


@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16"])
def test_weights_are_file_views_or_converted_once_into_the_arena(tmp_path, fp16):
    from helpers.tflite_util import TFLiteBuilder
    from pyarena.memory.mapped import is_mapped
    r = np.random.default_rng(3)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 256))
    w = (r.standard_normal((64, 256)) * 0.1).astype(np.float32)     # 64 KiB
    if fp16:
        w16 = B.const("fc/w16", w, np.float16)
        wi = B.tensor("fc/w", (64, 256))
        B.op("DEQUANTIZE", [w16], [wi])
    else:
        wi = B.const("fc/w", w)
    y = B.tensor("y", (1, 64))
    B.op("FULLY_CONNECTED", [x, wi, B.const("fc/b", np.zeros(64, np.float32))], [y],
         ("FullyConnectedOptions", dict(FusedActivationFunction=0)))
    path = B.save(str(tmp_path / "fc.tflite"), [x], [y])
    g = load_model(path)
    t = g.tensors["fc/w"]
    d = t.data
    assert t.dtype == "float32" and is_mapped(d) and not d.flags.writeable
    # float16 in the file stays a float16 view (no float32 copy at load)
    assert d.dtype == (np.float16 if fp16 else np.float32)
    np.testing.assert_array_equal(d, w.astype(d.dtype))
    assert g.weights is None or not g.weights.owns(d)
    feeds = random_feeds(g, seed=2)
    ex = Executor(g)
    out = ex.run(feeds)
    # once, in float32: the executor's arena copy (the fully connected layer
    # reads it at run time) or the file's view beside the kernel's layout
    d = np.asarray(g.tensors["fc/w"].data)
    assert ex.weights.owns(d) and d.dtype == np.float32 or is_mapped(d)
    assert ex.weights_bytes < 1.2 * w.nbytes
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-4, atol=1e-4)
