"""QDQ groups rewritten as onnxruntime's optimiser rewrites them on x86
(pyarena/importers/onnx_qdq.py): small QDQ graphs built here, each run by
pyarena and by onnxruntime with its default optimisations (what its users
get), compared byte for byte on the 8-bit output; and the integer ops
pyarena chose, against the group onnxruntime fuses or leaves in float.

The int8 activation pairs are the point: onnxruntime turns a Q -> DQ pair
read once into uint8 (QDQS8ToU8Transformer) and fuses a group only when
its 8-bit types then agree, so the same Add is a QLinearAdd in one place
and float arithmetic in another -- whose roundings differ by a quantum.
(A Conv / MatMul on int8 activations, which onnxruntime runs in float,
pyarena fuses: its integer kernels take int8.)"""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, version_converter  # noqa: E402

from helpers.onnx_util import make_model  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

I8, U8, I32 = np.int8, np.uint8, np.int32


class Graph:
    """A QDQ graph under construction: float input ``x``, nodes, constants."""

    def __init__(self, shape):
        self.shape = shape
        self.nodes, self.inits, self.k = [], {}, 0

    def const(self, value):
        self.k += 1
        name = f"c{self.k}"
        self.inits[name] = np.asarray(value)
        return name

    def q(self, x, scale, zp):
        out = f"{x}_q{self.k}"
        self.nodes.append(helper.make_node("QuantizeLinear", [x, self.const(np.float32(scale)),
                                                              self.const(zp)], [out]))
        return out

    def dq(self, x, scale, zp, axis=None):
        out = f"{x}_dq{self.k}"
        kw = {} if axis is None else {"axis": axis}
        self.nodes.append(helper.make_node("DequantizeLinear", [x, self.const(scale),
                                                                self.const(zp)], [out], **kw))
        return out

    def qdq(self, x, scale, zp):
        """A Q -> DQ pair (an activation)."""
        return self.dq(self.q(x, scale, zp), np.float32(scale), zp)

    def op(self, op_type, ins, **attrs):
        out = f"{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, ins, [out], **attrs))
        return out

    def out(self, y, scale, zp):
        """The graph output: a DQ of ``y`` (so y's Q -> DQ pair is read once
        and becomes uint8 in onnxruntime, as between two layers)."""
        return {self.dq(y, np.float32(scale), zp): np.float32}

    def save(self, path, outputs):
        """``outputs``: name -> dtype of the graph outputs."""
        make_model(self.nodes, {"x": (list(self.shape), np.float32)},
                   {o: (None, dt) for o, dt in outputs.items()}, self.inits, opset=13,
                   path=path)
        return path


def ort_default(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def check(path, shape, want_ops, native=True, seed=0):
    """pyarena's ops include ``want_ops``; every output equals onnxruntime's
    optimised run byte for byte, with the native kernels and without."""
    g = load_model(str(path), native=native)
    ops = [o.op_type for o in g.ops]
    for op in want_ops:
        assert op in ops, (op, ops)
    feeds = {"x": np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)}
    ours, ref = Executor(g).run(feeds), ort_default(path, feeds)
    for name, r in ref.items():
        assert np.asarray(ours[name]).dtype == r.dtype
        np.testing.assert_array_equal(np.asarray(ours[name]), r, err_msg=name)
    return ops


def rand8(rng, shape, dt=I8):
    lo, hi = (-127, 128) if dt == I8 else (0, 256)
    return rng.integers(lo, hi, shape).astype(dt)


def conv_graph(shared):
    """x -> Q/DQ (int8) -> Conv (per-channel int8 weight, int32 bias) ->
    Q (int8); ``shared``: the DQ is also read by a MaxPool, so onnxruntime
    copies it and the pair stays int8, as does y's, its DQ read twice
    (onnxruntime then runs the Conv in float -- no int8 activations into
    QLinearConv on x86 -- where pyarena's integer kernel takes it: the
    scales are powers of two, so both are exact)."""
    rng = np.random.default_rng(1)
    shape = (1, 8, 12, 12)
    g = Graph(shape)
    xq = g.q("x", 0.03125, I8(3))                # powers of two: an exact float Conv
    xd = g.dq(xq, np.float32(0.03125), I8(3))
    ws = (2.0 ** -rng.integers(6, 9, 6)).astype(np.float32)
    w = g.dq(g.const(rand8(rng, (6, 8, 3, 3))), ws, np.zeros(6, I8), axis=0)
    b = g.dq(g.const(rng.integers(-300, 300, 6).astype(I32)), np.float32(0.03125) * ws,
             np.zeros(6, I32), axis=0)
    y = g.q(g.op("Conv", [xd, w, b], pads=[1, 1, 1, 1]), 0.0371, I8(-5))
    if not shared:
        outs = g.out(y, 0.0371, I8(-5))
    else:            # and y's DQ read twice: int8 in and out, types agree, still float
        yd = g.dq(y, np.float32(0.0371), I8(-5))
        outs = {g.op("Relu", [yd]): np.float32, g.op("Neg", [yd]): np.float32}
        outs.update(g.out(g.q(g.op("MaxPool", [xd], kernel_shape=[2, 2], strides=[2, 2]),
                              0.03125, I8(3)), 0.03125, I8(3)))
    return g, shape, outs


@pytest.mark.parametrize("shared", [False, True])
def test_conv_fuses_on_int8_activations_too(tmp_path, shared):
    """The one choice that differs from onnxruntime's: an int8-activation
    Conv runs on the integer kernel (int8 speed and weights), with
    onnxruntime's bytes here."""
    g, shape, outs = conv_graph(shared)
    ops = check(g.save(tmp_path / "m.onnx", outs), shape, ["QLinearConv"])
    assert "QLinearConv" in ops and "Conv" not in ops


def binary_graph(op_type, const_b, shape, b_shape):
    """An Add / Mul of x's int8 pair and either a constant int8 DQ (its type
    stays int8 while the pair becomes uint8: onnxruntime runs it in float)
    or a second activation pair (both uint8: QLinearAdd / QLinearMul)."""
    rng = np.random.default_rng(2)
    g = Graph(shape)
    a = g.qdq("x", 0.0173, I8(-7))
    if const_b:
        b = g.dq(g.const(rand8(rng, b_shape)), np.float32(0.0119), I8(4))
    else:
        b = g.qdq(g.op("Sigmoid", ["x"]), 0.00391, I8(-128))
    ys = 0.0291 if op_type == "Add" else 0.00777
    return g, g.out(g.q(g.op(op_type, [a, b]), ys, I8(2)), ys, I8(2))


@pytest.mark.parametrize("op_type", ["Add", "Mul"])
@pytest.mark.parametrize("const_b,b_shape", [(True, (1, 4, 40, 40)), (True, (1, 4, 1, 1)),
                                             (False, None)])
@pytest.mark.parametrize("native", [True, False])
def test_add_mul_fused_or_float_as_onnxruntime(tmp_path, op_type, const_b, b_shape, native):
    shape = (1, 4, 40, 40)          # inner runs of 1,600: the per-channel table path too
    g, outs = binary_graph(op_type, const_b, shape, b_shape)
    want = ("QDQ" if const_b else "QLinear") + op_type
    check(g.save(tmp_path / "m.onnx", outs), shape, [want], native=native, seed=3)


def test_a_pair_read_twice_stays_int8_and_its_add_in_float(tmp_path):
    """x's pair is read by the Add and by a MaxPool: onnxruntime copies the
    DQ per reader and leaves the pair int8, while the Sigmoid's pair, read
    once, becomes uint8 -- the Add's types differ and it runs in float
    (QDQAdd here), with onnxruntime's bytes."""
    shape = (1, 4, 40, 40)
    g = Graph(shape)
    a = g.qdq("x", 0.0173, I8(-7))
    b = g.qdq(g.op("Sigmoid", ["x"]), 0.00391, I8(-128))
    outs = g.out(g.q(g.op("Add", [a, b]), 0.0291, I8(2)), 0.0291, I8(2))
    outs.update(g.out(g.q(g.op("MaxPool", [a], kernel_shape=[2, 2], strides=[2, 2]),
                          0.0173, I8(-7)), 0.0173, I8(-7)))
    ops = check(g.save(tmp_path / "m.onnx", outs), shape, ["QDQAdd"], seed=5)
    assert "QLinearAdd" not in ops


def test_gemm_becomes_qgemm(tmp_path):
    rng = np.random.default_rng(4)
    shape = (3, 32)
    g = Graph(shape)
    a = g.qdq("x", 0.0157, I8(1))
    ws = rng.uniform(0.002, 0.02, 10).astype(np.float32)
    w = g.dq(g.const(rand8(rng, (10, 32))), ws, np.zeros(10, I8), axis=0)
    c = g.dq(g.const(rng.integers(-2000, 2000, 10).astype(I32)), np.float32(0.0157) * ws,
             np.zeros(10, I32), axis=0)
    y = g.q(g.op("Gemm", [a, w, c], transB=1), 0.0833, I8(-3))
    check(g.save(tmp_path / "m.onnx", g.out(y, 0.0833, I8(-3))), shape, ["QGemm"])


@pytest.mark.parametrize("native", [True, False])
def test_matmul_of_two_activations(tmp_path, native):
    """Attention-style A @ B, both computed at run time: QLinearMatMul with
    B read each run (onnxruntime fuses it once both pairs are uint8)."""
    shape = (2, 6, 16)
    g = Graph(shape)
    a = g.qdq("x", 0.0157, I8(1))
    b = g.qdq(g.op("Transpose", ["x"], perm=[0, 2, 1]), 0.0157, I8(1))
    y = g.q(g.op("MatMul", [a, b]), 0.191, I8(-9))
    check(g.save(tmp_path / "m.onnx", g.out(y, 0.191, I8(-9))), shape, ["QLinearMatMul"],
          native=native)


def test_unary_types_must_agree(tmp_path):
    """Sigmoid between a uint8 pair and an int8 Q read twice: onnxruntime's
    UnarySelector refuses (types differ) and runs it in float -- pyarena
    too, not as QLinearSigmoid."""
    shape = (1, 4, 8, 8)
    g = Graph(shape)
    s = g.op("Sigmoid", [g.qdq("x", 0.0173, I8(-7))])
    sq = g.q(s, 0.00392, I8(-128))
    y1 = g.op("Relu", [g.dq(sq, np.float32(0.00392), I8(-128))])
    y2 = g.op("Neg", [g.dq(sq, np.float32(0.00392), I8(-128))])
    ops = check(g.save(tmp_path / "m.onnx", {y1: np.float32, y2: np.float32}), shape,
                ["Sigmoid"])
    assert "QLinearSigmoid" not in ops


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("dq_params", [True, False])
def test_batch_norm_island_is_a_per_channel_lookup(tmp_path, native, dq_params):
    """DQ -> BatchNormalization -> Q (an unfolded BN in a QDQ file: its scale
    and bias quantized too, or plain float): onnxruntime runs it in float32;
    pyarena looks each channel's byte up in a table of the same steps."""
    rng = np.random.default_rng(6)
    shape = (1, 5, 24, 40)
    g = Graph(shape)
    x = g.qdq("x", 0.0231, I8(9))
    scale = rng.uniform(0.5, 2.0, 5).astype(np.float32)
    bias = rng.uniform(-1, 1, 5).astype(np.float32)
    if dq_params:
        s_name = g.dq(g.const(np.round(scale / 0.0117).astype(I8)), np.float32(0.0117), I8(0))
        b_name = g.dq(g.const(np.round(bias / 0.0107).astype(I32)), np.float32(0.0107),
                      I32(0))
    else:
        s_name, b_name = g.const(scale), g.const(bias)
    mean, var = g.const(rng.uniform(-.5, .5, 5).astype(np.float32)), \
        g.const(rng.uniform(0.3, 2, 5).astype(np.float32))
    y = g.q(g.op("BatchNormalization", [x, s_name, b_name, mean, var], epsilon=1e-3),
            0.0377, I8(-3))
    path = g.save(tmp_path / "m.onnx", g.out(y, 0.0377, I8(-3)))
    # the shapes in value_info, as the quantizer's files have them: the
    # per-channel table is made where a plane has 256+ values
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(path))
    ops = check(path, shape, ["QLinearLookup"], native=native, seed=7)
    assert "BatchNormalization" not in ops


def test_batch_norm_of_small_planes_stays_float(tmp_path):
    """7x7 planes: a 256-entry table per channel would outweigh the
    activation, so the island runs op by op (the same bytes)."""
    shape = (1, 5, 7, 7)
    g = Graph(shape)
    x = g.qdq("x", 0.0231, I8(9))
    p = [g.const(np.linspace(a, b, 5).astype(np.float32))
         for a, b in ((0.5, 2), (-1, 1), (-.5, .5), (0.3, 2))]
    y = g.q(g.op("BatchNormalization", [x] + p), 0.0377, I8(-3))
    path = g.save(tmp_path / "m.onnx", g.out(y, 0.0377, I8(-3)))
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(path))
    ops = check(path, shape, ["BatchNormalization"])
    assert "QLinearLookup" not in ops


CHAINS = {
    "relu": [("Relu", [], {})],
    "clip_shuffle": [("Clip", [np.float32(-0.5), np.float32(1.5)], {}),
                     ("Reshape", [np.array([1, 2, 3, 24, 40])], {}),
                     ("Transpose", [], {"perm": [0, 2, 1, 3, 4]}),
                     ("Reshape", [np.array([1, 6, 24, 40])], {})],
    "relu_maxpool": [("Relu", [], {}),
                     ("MaxPool", [], {"kernel_shape": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]})],
    "moves_only": [("Transpose", [], {"perm": [0, 1, 3, 2]})],
}


@pytest.mark.parametrize("case", sorted(CHAINS))
@pytest.mark.parametrize("native", [True, False])
def test_batch_norm_chain_of_a_qoperator_file_is_a_lookup(tmp_path, case, native):
    """A QOperator file's float island after a convolution (onnxruntime's
    quantizer leaves unfolded BatchNormalization in float): DQ -> BN ->
    Relu / Clip -> Reshape / Transpose / MaxPool -> Q.  pyarena folds the
    element-wise steps into the per-channel table and moves the 8-bit
    values instead; onnxruntime's bytes either way."""
    rng = np.random.default_rng(8)
    shape = (1, 6, 24, 40)
    g = Graph(shape)
    x = g.qdq("x", 0.0231, U8(131))
    p = [g.const(rng.uniform(a, b, 6).astype(np.float32))
         for a, b in ((0.5, 2), (-1, 1), (-.5, .5), (0.3, 2))]
    y = g.op("BatchNormalization", [x] + p, epsilon=1e-3)
    for op_type, consts, attrs in CHAINS[case]:
        y = g.op(op_type, [y] + [g.const(c) for c in consts], **attrs)
    y = g.q(y, 0.0173, U8(40))
    path = g.save(tmp_path / "m.onnx", g.out(y, 0.0173, U8(40)))
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(path))
    ops = check(path, shape, ["QLinearLookup"], native=native, seed=9)
    assert "BatchNormalization" not in ops and "Relu" not in ops and "Clip" not in ops
    # the moves run on the 8-bit values: no float activation is left
    gr = load_model(str(path), native=native)
    floats = [t.name for t in gr.tensors.values() if t.role == "activation" and
              np.dtype(t.dtype) == np.float32]
    assert not floats, floats


@pytest.mark.parametrize("in_place", [True, False])
def test_lookup_tables_join_the_weights_read_in_place(tmp_path, in_place):
    """With the file's weights read in place (views), the tables the
    rewrite adds are views too -- no data in the protobuf, which the
    session caches (parsed and reduced); without, they are in it."""
    from pyarena.importers.onnx_qdq import fuse_qdq
    shape = (1, 6, 24, 40)
    g = Graph(shape)
    x = g.qdq("x", 0.0231, U8(131))
    p = [g.const(np.linspace(a, b, 6).astype(np.float32))
         for a, b in ((0.5, 2), (-1, 1), (-.5, .5), (0.3, 2))]
    y = g.q(g.op("Relu", [g.op("BatchNormalization", [x] + p)]), 0.0173, U8(40))
    path = g.save(tmp_path / "m.onnx", g.out(y, 0.0173, U8(40)))
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    views = {} if in_place else None
    assert fuse_qdq(onnx, model, views) == 1
    tables = [t for t in model.graph.initializer if t.name.endswith("/lookup")]
    assert len(tables) == 1 and list(tables[0].dims) == [6, 256]
    if in_place:
        assert not tables[0].raw_data and views[tables[0].name].shape == (6, 256)
    else:
        assert onnx.numpy_helper.to_array(tables[0]).shape == (6, 256)


def test_batch_norm_chain_read_twice_stays_float(tmp_path):
    """The Relu's result is also a graph output: the island stays float."""
    shape = (1, 6, 24, 40)
    g = Graph(shape)
    x = g.qdq("x", 0.0231, U8(131))
    p = [g.const(np.linspace(a, b, 6).astype(np.float32))
         for a, b in ((0.5, 2), (-1, 1), (-.5, .5), (0.3, 2))]
    r = g.op("Relu", [g.op("BatchNormalization", [x] + p)])
    outs = g.out(g.q(r, 0.0173, U8(40)), 0.0173, U8(40))
    outs[r] = np.float32
    path = g.save(tmp_path / "m.onnx", outs)
    onnx.save(onnx.shape_inference.infer_shapes(onnx.load(str(path))), str(path))
    ops = check(path, shape, ["BatchNormalization"])
    assert "QLinearLookup" not in ops


POOLS = {"avg": ("AveragePool", (1, 32, 9, 12), dict(kernel_shape=[3, 2], strides=[3, 2])),
         "avg_pads": ("AveragePool", (1, 16, 7, 9), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
         "global": ("GlobalAveragePool", (1, 24, 5, 7), {}),
         "global_large": ("GlobalAveragePool", (1, 8, 19, 23), {})}   # (a pairwise sum differs)


@pytest.mark.parametrize("case", sorted(POOLS))
@pytest.mark.parametrize("native", [True, False])
def test_float_pools_on_a_dq_sum_in_onnxruntimes_order(tmp_path, case, native):
    """A float AveragePool / GlobalAveragePool between a DQ and a Q (a QDQ
    file's float island): MLAS's order -- the NCHWc pool's taps row by row
    then a division, the global kernel's four lanes -- so the float output
    and its QuantizeLinear are onnxruntime's bytes (PP-OCRv4 rec's first
    differing tensors).  NumPy's order (a product with the inverse, a
    pairwise mean) gives other float bits on the same input."""
    op, shape, attrs = POOLS[case]
    g = Graph(shape)
    y = g.op(op, [g.qdq("x", 0.0173, I8(-7))], **attrs)
    outs = {y: np.float32}
    outs.update(g.out(g.q(y, 0.0119, I8(3)), 0.0119, I8(3)))
    path = g.save(tmp_path / "m.onnx", outs)
    check(path, shape, [op], native=native, seed=6)
    assert [o.attrs.get("mlas_order") for o in load_model(str(path)).ops
            if o.op_type == op] == [1]
    x = np.random.default_rng(6).uniform(-2, 2, shape).astype(np.float32)
    xd = ((np.clip(np.rint(x / np.float32(0.0173)) - 7, -128, 127) + 7) *
          np.float32(0.0173)).astype(np.float32)
    ref = ort_default(path, {"x": x})[y]
    if op == "GlobalAveragePool":
        numpy_way = xd.reshape(shape[0], shape[1], -1).mean(axis=2, dtype=np.float32)
    else:
        kh, kw = attrs["kernel_shape"]
        numpy_way = None if "pads" in attrs else sum(
            xd[:, :, i::kh, j::kw] for i in range(kh) for j in range(kw)) * \
            np.float32(1 / (kh * kw))
    if numpy_way is not None:
        assert np.any(numpy_way.reshape(ref.shape) != ref)


MODELS = "/work/models/rapidocr_onnxruntime-1.4.4-py3-none-any/rapidocr_onnxruntime/models"
DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


def quantized_real_model(tmp_path, name, dims):
    """A real float model (input dims fixed, onnxruntime's quant_pre_process)
    quantized by onnxruntime's quantizer to QDQ as benchmarks/bench_quantized.py
    does: per-channel int8 weights and activations, 4 random calibration inputs
    (opset 13 first)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    from onnxruntime.quantization.shape_inference import quant_pre_process
    src = os.path.join(DATA, name)          # vendored (the classifier)
    if not os.path.exists(src):
        src = os.path.join(MODELS, name)
    if not os.path.exists(src):
        pytest.skip(f"{src} is not on this machine")
    m = onnx.load(src)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    for dim, v in zip(inp.type.tensor_type.shape.dim, dims):
        dim.Clear()
        dim.dim_value = v
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    fixed, pre, out = (tmp_path / f for f in ("fixed.onnx", "pre.onnx", "qdq.onnx"))
    onnx.save(m, str(fixed))
    quant_pre_process(str(fixed), str(pre), skip_symbolic_shape=True)
    m = onnx.load(str(pre))
    if m.opset_import[0].version < 13:     # per-channel DQ axis: opset 13
        onnx.save(version_converter.convert_version(m, 13), str(pre))
    rng = np.random.default_rng(0)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{inp.name: rng.standard_normal(dims).astype(np.float32)}
                            for _ in range(4)])

        def get_next(self):
            return next(self.it, None)
    quantization.quantize_static(str(pre), str(out), Reader(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True)
    return out, inp.name


@pytest.mark.parametrize("name,dims", [
    pytest.param("ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192),
                 marks=pytest.mark.slow),
    pytest.param("ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320), marks=pytest.mark.slow)])
def test_real_qdq_files_match_onnxruntime_optimised(tmp_path, name, dims):
    """The PaddleOCR classifier and the PP-OCRv4 detector (a QDQ chain of
    ~300 groups, 15 quanta from onnxruntime's optimised run before these
    rewrites followed its selectors) give onnxruntime's bytes: 0 quanta."""
    path, feed = quantized_real_model(tmp_path, name, dims)
    x = {feed: np.random.default_rng(5).uniform(-1, 1, dims).astype(np.float32)}
    g = load_model(str(path))
    ours, ref = Executor(g).run(x), ort_default(path, x)
    for k, r in ref.items():
        np.testing.assert_array_equal(np.asarray(ours[k]), r, err_msg=k)


@pytest.mark.slow
def test_real_rec_qdq_file_stays_within_its_float_convolutions(tmp_path):
    """PP-OCRv4 rec QDQ: 15 quanta from onnxruntime's optimised run before
    its float pools followed MLAS's order, 12 after.  What is left starts at
    a Conv on int8 activations, which onnxruntime leaves in float (MLAS's
    SGEMM: one FMA chain per output over k) and pyarena fuses into
    QLinearConv: one value in 4,800 a quantum apart there, then carried."""
    dims = (1, 3, 48, 320)
    path, feed = quantized_real_model(tmp_path, "ch_PP-OCRv4_rec_infer.onnx", dims)
    x = {feed: np.random.default_rng(5).uniform(-1, 1, dims).astype(np.float32)}
    ours, ref = Executor(load_model(str(path))).run(x), ort_default(path, x)
    m = onnx.load(str(path))
    out = m.graph.output[0].name
    dq = [n for n in m.graph.node if n.output[0] == out][0]
    q = float(onnx.numpy_helper.to_array(
        [i for i in m.graph.initializer if i.name == dq.input[1]][0]))
    diff = np.abs(np.asarray(ours[out], np.float64) - ref[out]).max() / q
    assert diff <= 12.5, diff
