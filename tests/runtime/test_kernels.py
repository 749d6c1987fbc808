"""Per-kernel tests: one ONNX node, imported and executed by pyarena in a
planned arena, against onnxruntime."""
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers.onnx_util import run_both

R = np.random.default_rng(0)


def rnd(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


CONV_CASES = [
    dict(x=(1, 3, 9, 9), w=(4, 3, 3, 3), attrs=dict(pads=[1, 1, 1, 1])),
    dict(x=(2, 4, 10, 11), w=(6, 4, 3, 3), attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    dict(x=(1, 8, 7, 7), w=(5, 8, 1, 1), attrs={}),
    dict(x=(1, 8, 7, 7), w=(5, 8, 1, 1), attrs=dict(strides=[2, 2])),
    dict(x=(1, 6, 9, 9), w=(6, 1, 3, 3), attrs=dict(group=6, pads=[1, 1, 1, 1])),
    dict(x=(2, 6, 9, 9), w=(6, 1, 3, 3), attrs=dict(group=6, strides=[2, 2],
                                                      pads=[0, 0, 1, 1])),
    dict(x=(1, 4, 8, 8), w=(6, 2, 3, 3), attrs=dict(group=2)),
    dict(x=(2, 12, 5, 6), w=(8, 3, 1, 1), attrs=dict(group=4)),
    dict(x=(1, 6, 8, 8), w=(12, 1, 3, 3), attrs=dict(group=6, pads=[1, 1, 1, 1])),
    dict(x=(1, 3, 12, 12), w=(4, 3, 3, 3), attrs=dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    dict(x=(1, 3, 10, 10), w=(4, 3, 3, 3), attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    dict(x=(1, 3, 10, 10), w=(4, 3, 4, 4), attrs=dict(auto_pad="SAME_LOWER")),
    dict(x=(1, 3, 17), w=(5, 3, 3), attrs=dict(pads=[1, 2], strides=[2])),
    dict(x=(1, 3, 7, 8), w=(4, 3, 2, 3), attrs=dict(pads=[0, 1, 2, 0]), bias=False),
]


@pytest.fixture(params=["whole", "row-bands"])
def budget(request):
    """Run with the default scratch budget (one band) and with a budget so
    small that every band is one output row (the least work per step,
    MIN_STEP_ELEMENTS, lowered to one element for it): the scratch_budget
    to give."""
    if request.param == "whole":
        return None
    request.getfixturevalue("single_steps")
    return 1


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c['x']}-{c['w']}-{c['attrs']}")
def test_conv(tmp_path, case, budget, native):
    inits = {"w": rnd(*case["w"])}
    ins = ["x", "w"]
    if case.get("bias", True):
        inits["b"] = rnd(case["w"][0])
        ins.append("b")
    g, _, _ = run_both(tmp_path, [node("Conv", ins, **case["attrs"])],
                       {"x": rnd(*case["x"])}, inits, scratch_budget=budget, native=native)
    # the planner got the kernel's workspace, exactly
    conv = g.ops[0]
    from pyarena.runtime.kernels import scratch_bytes_for
    assert conv.scratch_bytes == scratch_bytes_for(g, conv)


BAND_CASES = [
    dict(x=(2, 6, 10, 11), w=(7, 6, 3, 3), attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    dict(x=(1, 8, 9, 9), w=(9, 8, 3, 3), attrs=dict(auto_pad="SAME_UPPER")),
    dict(x=(1, 5, 7, 8), w=(6, 5, 2, 3), attrs=dict(pads=[0, 1, 2, 0])),
    dict(x=(1, 6, 9, 9), w=(5, 6, 3, 3), attrs={}),                   # VALID: no padding
    dict(x=(1, 5, 12, 7), w=(6, 5, 5, 3), attrs=dict(strides=[3, 1], pads=[2, 1, 2, 1])),
]


@pytest.mark.parametrize("case", BAND_CASES, ids=lambda c: f"{c['x']}-{c['w']}-{c['attrs']}")
def test_full_nhwc_conv_runs_the_sgemm_on_the_whole_tensor(tmp_path, case, budget):
    """A full NHWC convolution (groups 1, no dilation, more than 4 input and
    output channels, padded or not) runs the packed SGEMM on the whole
    tensor, the taps in the padding read as zeros: no scratch whatever the
    budget (no padded band), one native call record, the same bits at one
    and three threads, and it matches onnxruntime and the NumPy path."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    path = tmp_path / "full.onnx"
    make_model([node("Conv", ["x", "w", "b"], **case["attrs"])], {"x": (case["x"], np.float32)},
               {"y": (None, np.float32)}, {"w": rnd(*case["w"]), "b": rnd(case["w"][0])},
               path=path)
    x = rnd(*case["x"], lo=-3, hi=3)
    g = load_model(str(path), layout="nhwc", scratch_budget=budget)
    ex = Executor(g, plan(g))
    conv = next(k for k in ex.kernels if k.op.op_type == "Conv")
    assert conv.path == "native-gemm"
    op = next(o for o in g.ops if o.op_type == "Conv")
    assert op.scratch_bytes == 0
    assert conv.native_call([x], [x]) is not None       # batched with its neighbours
    ref = ort_run(path, {"x": x})["y"]
    got = ex.run({"x": x})["y"].copy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    g3 = load_model(str(path), layout="nhwc", scratch_budget=budget)
    np.testing.assert_array_equal(Executor(g3, plan(g3), threads=3).run({"x": x})["y"], got)
    numpy_path = load_model(str(path), native=False, scratch_budget=budget)
    np.testing.assert_allclose(Executor(numpy_path, plan(numpy_path)).run({"x": x})["y"], ref,
                               rtol=1e-4, atol=1e-4)


def test_past_the_padded_window_channels_the_sgemm_runs_band_by_band(tmp_path, budget):
    """Over more than PAD_WINDOW_MAX_CIN input channels (the C core's zero
    row is that long) a padded full NHWC convolution keeps the packed SGEMM
    over each band of padded input rows: its scratch is that band alone, one
    output row per band under the small budget, and it matches onnxruntime."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels.conv import PAD_WINDOW_MAX_CIN
    cin = PAD_WINDOW_MAX_CIN + 1
    path = tmp_path / "band.onnx"
    make_model([node("Conv", ["x", "w", "b"], strides=[2, 1], pads=[1, 1, 1, 1])],
               {"x": ([1, cin, 9, 6], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(6, cin, 3, 3) * 0.05, "b": rnd(6)}, path=path)
    x = rnd(1, cin, 9, 6, lo=-3, hi=3)
    g = load_model(str(path), layout="nhwc", scratch_budget=budget)
    ex = Executor(g, plan(g))
    conv = next(k for k in ex.kernels if k.op.op_type == "Conv")
    assert conv.path == "native-band" and conv.padded
    assert next(o for o in g.ops if o.op_type == "Conv").scratch_bytes > 0
    if budget is not None:
        assert conv.band_rows == 1 and len(conv.bands) == conv.Ho
    np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)


def test_a_shorter_last_band_has_its_own_geometry(tmp_path):
    """11 output rows in bands of 2: five bands and a last one of 1 row
    (input channels past PAD_WINDOW_MAX_CIN: the band path)."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels.conv import PAD_WINDOW_MAX_CIN
    cin = PAD_WINDOW_MAX_CIN + 1
    path = tmp_path / "bands.onnx"
    make_model([node("Conv", ["x", "w", "b"], pads=[1, 1, 1, 1])],
               {"x": ([1, cin, 11, 3], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(7, cin, 3, 3) * 0.05, "b": rnd(7)}, path=path)
    row = 5 * cin * 4                         # a padded input row, NHWC
    g = load_model(str(path), layout="nhwc", scratch_budget=4 * row + 8)
    ex = Executor(g, plan(g))
    conv = next(k for k in ex.kernels if k.op.op_type == "Conv")
    assert conv.path == "native-band" and conv.band_rows == 2
    assert conv.bands[-1] == (10, 11) and sorted(conv.descs) == [1, 2]
    x = rnd(1, cin, 11, 3)
    np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)


def test_conv_scratch_is_the_im2col_rule(tmp_path):
    # 3x3 stride 1 pad 1 on 3x9x9: im2col 3*3*3 * 9*9 floats + padded 3*11*11
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 3, 9, 9)}, {"w": rnd(4, 3, 3, 3)}, native=False)
    pad = 3 * 11 * 11 * 4
    cols = 3 * 3 * 3 * 9 * 9 * 4
    assert g.ops[0].scratch_bytes == -(-pad // 64) * 64 + cols
    # 1x1 stride 1: no workspace at all
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"])],
                       {"x": rnd(1, 3, 9, 9)}, {"w": rnd(4, 3, 1, 1)}, native=False)
    assert g.ops[0].scratch_bytes == 0
    # grouped 1x1 NCHW: one batched matmul over the input as it is, none either
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], group=4)],
                       {"x": rnd(2, 12, 5, 6)}, {"w": rnd(8, 3, 1, 1)})
    assert g.ops[0].scratch_bytes == 0
    # the native depthwise convolution: none either
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], pads=[1, 1, 1, 1], group=8)],
                       {"x": rnd(1, 8, 9, 9)}, {"w": rnd(8, 1, 3, 3)})
    assert g.ops[0].scratch_bytes == 0
    # ... and the few-input-channel kernel (3 input channels): none either
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 3, 9, 9)}, {"w": rnd(4, 3, 3, 3)})
    assert g.ops[0].scratch_bytes == 0
    # a full convolution over 5 channels stays on im2col + BLAS (the dispatch rule)
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 5, 9, 9)}, {"w": rnd(4, 5, 3, 3)})
    pad5 = 5 * 11 * 11 * 4
    assert g.ops[0].scratch_bytes == -(-pad5 // 64) * 64 + 5 * 3 * 3 * 9 * 9 * 4


@pytest.mark.parametrize("case", [
    dict(x=(1, 8, 9, 9), w=(4, 8, 3, 3), attrs=dict(pads=[1, 1, 1, 1])),
    dict(x=(2, 12, 10, 7), w=(6, 4, 3, 3), attrs=dict(strides=[2, 1], group=3,
                                                        pads=[1, 0, 1, 2])),
    dict(x=(1, 16, 8, 8), w=(8, 16, 1, 1), attrs=dict()),
    dict(x=(1, 8, 11, 11), w=(8, 8, 5, 5), attrs=dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
], ids=str)
def test_conv_forced_onto_the_native_direct_kernel(tmp_path, case):
    """The dispatch rule keeps full, grouped and 1x1 convolutions on BLAS;
    forced (``_path``, what the benchmarks do) the native direct kernel
    runs them with no workspace and matches onnxruntime, bias + ReLU fused."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels import set_scratch
    cout = case["w"][0]
    feeds = {"x": rnd(*case["x"])}
    path = tmp_path / "c.onnx"
    make_model([node("Conv", ["x", "w", "b"], ["c"], **case["attrs"]),
                node("Relu", ["c"])], {"x": (list(case["x"]), np.float32)},
               {"y": (None, np.float32)}, {"w": rnd(*case["w"]), "b": rnd(cout)}, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv"]        # Relu fused
    g.ops[0].notes.kernel_path = "native"
    set_scratch(g)
    ex = Executor(g)
    assert ex.kernels[0].path.startswith("native") and g.ops[0].scratch_bytes == 0
    np.testing.assert_allclose(ex.run(feeds)["y"], ort_run(path, feeds)["y"],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("x,cout", [((1, 7, 5, 9), 13), ((2, 20, 7, 7), 37),
                                     ((1, 270, 9, 9), 17), ((1, 3, 1, 1), 5)], ids=str)
def test_pointwise_conv_on_the_packed_sgemm(tmp_path, x, cout):
    """1x1 convolutions forced onto the native packed SGEMM (odd channel
    counts, plane tails, a reduction past one panel, a 1x1 plane; pixel
    tiles and strips) match onnxruntime with bias + Clip fused, no workspace."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels import set_scratch
    path = tmp_path / "p.onnx"
    make_model([node("Conv", ["x", "w", "b"], ["c"]), node("Clip", ["c", "lo", "hi"])],
               {"x": (list(x), np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(cout, x[1], 1, 1), "b": rnd(cout), "lo": np.float32(-0.5),
                "hi": np.float32(0.75)}, path=path)
    g = load_model(str(path), layout="keep")        # the NCHW SGEMM (not the NHWC tile)
    g.ops[0].notes.kernel_path = "native"
    set_scratch(g)
    ex = Executor(g)
    assert ex.kernels[0].path == "native-gemm" and g.ops[0].scratch_bytes == 0
    feeds = {"x": rnd(*x)}
    np.testing.assert_allclose(ex.run(feeds)["y"], ort_run(path, feeds)["y"],
                               rtol=1e-4, atol=1e-5)


def test_grouped_and_depthwise_conv_scratch_rules(tmp_path):
    """The rules of the conv module's docstring, worked by hand: grouped
    im2col -- C_in * kh * kw * H_out * W_out; depthwise -- the padded input
    rows + one band-sized product buffer (C * H_out * W_out).  The NumPy
    paths (native=False); the native depthwise kernel needs none."""
    # group 2, 4 -> 6 channels, 3x3 on 8x8, no padding: 6x6 out
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], group=2)],
                       {"x": rnd(1, 4, 8, 8)}, {"w": rnd(6, 2, 3, 3)}, name="grouped",
                       native=False)
    assert g.ops[0].scratch_bytes == 4 * 3 * 3 * 6 * 6 * 4
    # depthwise 6 channels, 3x3 pad 1 on 9x9: padded 6x11x11, product 6x9x9
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], group=6, pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 6, 9, 9)}, {"w": rnd(6, 1, 3, 3)}, name="dw",
                       native=False)
    pad = 6 * 11 * 11 * 4
    assert g.ops[0].scratch_bytes == -(-pad // 64) * 64 + 6 * 9 * 9 * 4
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], group=6, pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 6, 9, 9)}, {"w": rnd(6, 1, 3, 3)}, name="dwn")
    assert g.ops[0].scratch_bytes == 0


def test_conv_scratch_is_bounded_by_the_budget(tmp_path):
    # one output row per band: 3 padded input rows of 3x11 + 27x9 columns
    g, _, _ = run_both(tmp_path, [node("Conv", ["x", "w"], pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 3, 9, 9)}, {"w": rnd(4, 3, 3, 3)}, scratch_budget=1,
                       native=False)
    pad = 3 * 3 * 11 * 4
    cols = 3 * 3 * 3 * 1 * 9 * 4
    assert g.ops[0].scratch_bytes == -(-pad // 64) * 64 + cols


@pytest.mark.parametrize("case", [
    dict(x=(1, 4, 5, 5), w=(4, 3, 3, 3), attrs=dict(strides=[2, 2])),
    dict(x=(1, 4, 5, 5), w=(4, 3, 3, 3), attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                     output_padding=[1, 1])),
    dict(x=(2, 4, 4, 6), w=(4, 2, 2, 2), attrs=dict(strides=[2, 2], group=2)),
    dict(x=(1, 3, 4, 4), w=(3, 2, 3, 3), attrs=dict(dilations=[2, 2])),
    dict(x=(2, 3, 6, 5), w=(3, 4, 4, 3), attrs=dict(strides=[3, 2], pads=[2, 1, 1, 0])),
    dict(x=(1, 2, 5, 4), w=(2, 3, 3, 3), attrs=dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    dict(x=(1, 2, 5, 4), w=(2, 3, 3, 2), attrs=dict(strides=[2, 1], output_shape=[10, 5])),
    dict(x=(2, 4, 7), w=(4, 3, 3), attrs=dict(strides=[2], pads=[1, 0], output_padding=[1])),
    dict(x=(1, 4, 6), w=(4, 1, 4), attrs=dict(strides=[3], group=2, dilations=[2])),
], ids=str)
def test_conv_transpose(tmp_path, case, budget):  # noqa: D103
    run_both(tmp_path, [node("ConvTranspose", ["x", "w", "b"], **case["attrs"])],
             {"x": rnd(*case["x"])},
             {"w": rnd(*case["w"]), "b": rnd(case["w"][1] * case["attrs"].get("group", 1))},
             scratch_budget=budget)


@pytest.mark.parametrize("ta,tb,alpha,beta", [(0, 0, 1.0, 1.0), (1, 0, 0.5, 2.0),
                                               (0, 1, 1.0, 0.5), (1, 1, 2.0, 1.0)])
def test_gemm(tmp_path, ta, tb, alpha, beta):
    a = rnd(7, 5) if ta else rnd(5, 7)
    b = rnd(6, 7) if tb else rnd(7, 6)
    run_both(tmp_path, [node("Gemm", ["a", "b", "c"], transA=ta, transB=tb, alpha=alpha,
                             beta=beta)], {"a": a}, {"b": b, "c": rnd(6)})


def test_gemm_runtime_c(tmp_path):
    run_both(tmp_path, [node("Gemm", ["a", "b", "c"], beta=0.5)],
             {"a": rnd(3, 4), "c": rnd(3, 5)}, {"b": rnd(4, 5)})


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                                   ((2, 1, 3, 4), (5, 4, 6)), ((4,), (4, 3))])
def test_matmul(tmp_path, sa, sb):
    run_both(tmp_path, [node("MatMul", ["a", "b"])], {"a": rnd(*sa), "b": rnd(*sb)})


@pytest.mark.parametrize("op,attrs,extra", [
    ("Relu", {}, {}), ("Sigmoid", {}, {}), ("Tanh", {}, {}),
    ("LeakyRelu", dict(alpha=0.2), {}), ("HardSigmoid", dict(alpha=0.3, beta=0.4), {}),
    ("HardSwish", {}, {}), ("Clip", {}, {"lo": np.float32(-0.3), "hi": np.float32(0.5)}),
    ("Softplus", {}, {}), ("Exp", {}, {}), ("Neg", {}, {}), ("Abs", {}, {}),
    ("Erf", {}, {}), ("Mish", {}, {}), ("Celu", dict(alpha=0.7), {}),
    ("ThresholdedRelu", dict(alpha=0.3), {}), ("Shrink", dict(lambd=0.6, bias=0.2), {}),
    ("Round", {}, {}), ("Elu", dict(alpha=0.6), {}), ("Selu", {}, {}), ("Softsign", {}, {}),
    # the ONNX defaults of the attributes (HardSigmoid alpha 0.2 beta 0.5,
    # LeakyRelu alpha 0.01, Elu alpha 1), and Clip with neither bound
    ("HardSigmoid", {}, {}), ("LeakyRelu", {}, {}), ("Elu", {}, {}), ("Clip", {}, {}),
])
@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
def test_unary(tmp_path, op, attrs, extra, native):
    ins = ["x"] + list(extra)
    x = rnd(2, 3, 4, 5, lo=-4, hi=4)
    run_both(tmp_path, [node(op, ins, **attrs)], {"x": x},
             {k: np.asarray(v) for k, v in extra.items()}, opset=18 if op == "Mish" else 17,
             native=native)


def test_prelu_per_channel(tmp_path):
    run_both(tmp_path, [node("PRelu", ["x", "s"])], {"x": rnd(2, 3, 4, 5)},
             {"s": rnd(3, 1, 1)})


def test_batchnorm(tmp_path):
    c = 4
    run_both(tmp_path, [node("BatchNormalization", ["x", "g", "b", "m", "v"], epsilon=1e-3)],
             {"x": rnd(2, c, 5, 5)},
             {"g": rnd(c), "b": rnd(c), "m": rnd(c), "v": rnd(c, lo=0.5, hi=2)})


@pytest.mark.parametrize("live", [False, True], ids=["constant", "fed"])
def test_batchnorm_bit_for_bit_with_onnxruntime(tmp_path, live):
    """The per-channel scale and shift in float32, in onnxruntime's order
    (1 / sqrt(var + eps), times scale; bias - mean * that): the float
    islands of its quantizer's files (a BatchNormalization between
    DequantizeLinear and QuantizeLinear) then quantize to the same bytes.
    Folded in float64 they differed by an ulp on a seventh of ResNet-50's
    values, 14 quanta at its output."""
    c, rng = 64, np.random.default_rng(3)
    params = {"g": rng.uniform(0.2, 3, c), "b": rng.uniform(-2, 2, c),
              "m": rng.uniform(-2, 2, c), "v": rng.uniform(1e-3, 5, c)}
    params = {k: v.astype(np.float32) for k, v in params.items()}
    feeds = {"x": rng.uniform(-8, 8, (2, c, 6, 7)).astype(np.float32)}
    if live:
        feeds.update(params)
    run_both(tmp_path, [node("BatchNormalization", ["x", "g", "b", "m", "v"], epsilon=1e-3)],
             feeds, None if live else params, atol=0, rtol=0)


def test_batchnorm_default_epsilon(tmp_path):
    """No epsilon attribute: ONNX's 1e-5, visible with variances near it."""
    c = 4
    run_both(tmp_path, [node("BatchNormalization", ["x", "g", "b", "m", "v"])],
             {"x": rnd(2, c, 5, 5)},
             {"g": rnd(c), "b": rnd(c), "m": rnd(c), "v": rnd(c, lo=1e-5, hi=1e-4)},
             rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("eps", [None, 1e-2])
def test_instance_normalization(tmp_path, eps):
    """Per (image, channel) statistics over H x W, biased variance, against
    onnxruntime."""
    attrs = {} if eps is None else dict(epsilon=eps)
    run_both(tmp_path, [node("InstanceNormalization", ["x", "s", "b"], **attrs)],
             {"x": rnd(2, 3, 4, 5, lo=-3, hi=3)}, {"s": rnd(3, lo=0.5, hi=2), "b": rnd(3)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (3, 1, 1)),
                                   ((1, 3, 1, 5), (2, 1, 4, 1)), ((4, 5), (5,))])
def test_binary_broadcast(tmp_path, op, sa, sb):
    run_both(tmp_path, [node(op, ["a", "b"])], {"a": rnd(*sa), "b": rnd(*sb, lo=0.5, hi=2)})


def test_variadic_sum_mean_max(tmp_path):
    feeds = {"a": rnd(2, 3), "b": rnd(2, 3), "c": rnd(3)}
    for op in ("Sum", "Mean", "Max", "Min"):
        run_both(tmp_path, [node(op, ["a", "b", "c"])], feeds, name=op)


def test_concat_reshape_flatten_squeeze_unsqueeze_transpose(tmp_path):
    nodes = [node("Concat", ["a", "b"], ["c"], axis=1),
             node("Reshape", ["c", "shape"], ["r"]),
             node("Flatten", ["r"], ["f"], axis=2),
             node("Unsqueeze", ["f", "ax"], ["u"]),
             node("Squeeze", ["u", "ax"], ["s"]),
             node("Transpose", ["s"], ["y"], perm=[1, 0])]
    run_both(tmp_path, nodes, {"a": rnd(2, 3, 4), "b": rnd(2, 5, 4)},
             {"shape": np.array([2, 8, 2, 2], np.int64), "ax": np.array([1], np.int64)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(tmp_path, mode):
    run_both(tmp_path, [node("Pad", ["x", "p", "v"], mode=mode)], {"x": rnd(1, 2, 5, 6)},
             {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
              "v": np.array(0.5 if mode == "constant" else 0.0, np.float32)})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[3, 2], strides=[1, 2], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2]),          # YOLOv8's SPPF
], ids=str)
@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
def test_pool(tmp_path, op, attrs, budget, native):
    if op == "MaxPool":
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    g, _, _ = run_both(tmp_path, [node(op, ["x"], **attrs)], {"x": rnd(2, 3, 9, 10)},
                       scratch_budget=budget, native=native)
    if native:
        assert g.ops[0].scratch_bytes == 0


def test_dilated_maxpool_keeps_the_numpy_path(tmp_path):
    g, _, _ = run_both(tmp_path, [node("MaxPool", ["x"], kernel_shape=[2, 2], strides=[2, 2],
                                       dilations=[2, 2], pads=[1, 1, 1, 1])],
                       {"x": rnd(1, 3, 9, 10)})
    assert g.ops[0].scratch_bytes > 0      # the padded band: not the native kernel


def test_global_pools_and_reduce(tmp_path):
    x = {"x": rnd(2, 3, 5, 6)}
    run_both(tmp_path, [node("GlobalAveragePool", ["x"])], x, name="gap")
    run_both(tmp_path, [node("GlobalMaxPool", ["x"])], x, name="gmp")
    for kd in (0, 1):
        run_both(tmp_path, [node("ReduceMean", ["x", "ax"], keepdims=kd)], x,
                 {"ax": np.array([2, -1], np.int64)}, opset=18, name=f"rm{kd}")
    run_both(tmp_path, [node("ReduceMean", ["x"], axes=[1], keepdims=1)], x, opset=13,
             name="rm13")


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis,opset", [(1, 13), (-1, 13), (1, 11), (2, 11),
                                        (None, 13), (None, 11)])
def test_softmax(tmp_path, op, axis, opset):
    """With and without ``axis``: the default is -1 from opset 13 on, and 1
    (over the flattened trailing axes) before."""
    attrs = {} if axis is None else dict(axis=axis)
    run_both(tmp_path, [node(op, ["x"], **attrs)], {"x": rnd(2, 3, 4, 5, lo=-5, hi=5)},
             opset=opset)


@pytest.mark.parametrize("opset,axis,coerced", [(13, -1, False), (11, 1, True)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_default_axis_per_opset(tmp_path, op, opset, axis, coerced):
    """The ONNX defaults for a node without ``axis`` (the operator spec:
    -1 from opset 13, 1 with the input coerced to 2-D before)."""
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    path = tmp_path / f"{op}{opset}.onnx"
    make_model([node(op, ["x"])], {"x": ([2, 3, 4], np.float32)},
               {"y": (None, np.float32)}, opset=opset, path=path)
    from pyarena.importers.onnx import _OnnxImport
    from pyarena.importers.onnx_build import GraphBuild
    imp = _OnnxImport(str(path))
    attrs = GraphBuild(imp).attrs(imp.model.graph.node[0])
    assert attrs["axis"] == axis
    assert bool(attrs.get("coerce_2d", 0)) == coerced
    assert load_model(str(path)).ops[0].attrs["axis"] == axis


@pytest.mark.parametrize("shape", [(2, 7), (2, 3, 5), (1, 2, 3, 4)])
def test_softmax_kernel_without_axis_is_over_the_last_axis(shape):
    """A Softmax op without ``axis`` (TFLite's SOFTMAX imports that way) is
    over the last axis."""
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    g = Graph("sm")
    g.add_tensor("x", shape, role="input")
    g.add_tensor("y", shape, role="output")
    op = g.add_op("Softmax", ["x"], ["y"])
    k = make_kernel(op, [g.tensors["x"]], [g.tensors["y"]])
    x = rnd(*shape, lo=-4, hi=4)
    y = np.empty_like(x)
    k([x], [y], np.empty(k.scratch_bytes, np.uint8))
    e = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op_type,attrs", [("Conv", {}), ("MaxPool", {"kernel_shape": [1, 1]}),
                                            ("AveragePool", {"kernel_shape": [1, 1]})])
@pytest.mark.parametrize("native", [True, False])
def test_a_spatial_kernel_refuses_an_output_of_other_images(op_type, attrs, native):
    """The spatial kernels walk the input's images into the output: an
    output of fewer (a shape no rule gives, e.g. a graph retargeted
    wrongly) is refused when the kernel is built, never written past."""
    from pyarena.errors import GraphError
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    g = Graph("images")
    g.add_tensor("x", (3, 4, 5, 5), role="input")
    g.add_tensor("y", (1, 4, 5, 5), role="output")
    ins = ["x"]
    if op_type == "Conv":
        g.add_tensor("w", (4, 4, 1, 1), role="constant", data=rnd(4, 4, 1, 1))
        ins.append("w")
    op = g.add_op(op_type, ins, ["y"], **attrs)
    with pytest.raises(GraphError, match=r"output \[1, 4, 5, 5\] does not have the images "
                                         r"of input \[3, 4, 5, 5\]"):
        make_kernel(op, [g.tensors[n] for n in ins], [g.tensors["y"]], native=native)


@pytest.mark.parametrize("op_type,x,y,consts,attrs,msg", [
    ("Relu", (2, 8), (1, 8), {}, {}, "differ in size"),
    ("Sigmoid", (2, 3, 4), (2, 3, 5), {}, {}, "differ in size"),
    ("PRelu", (2, 4, 3), (1, 4, 3), {"s": (4, 1, 1)}, {}, "differ"),
    ("Gemm", (3, 5), (1, 6), {"b": (5, 6)}, {}, "does not have the 3 rows"),
    ("FullyConnected", (3, 5), (1, 6), {"w": (6, 5)}, {}, "does not hold 3 rows"),
    ("GlobalAveragePool", (2, 3, 3, 8), (1, 1, 1, 8), {}, {"layout": "NHWC"},
     "does not hold the 2 x 8 means")], ids=lambda v: v if isinstance(v, str) else None)
def test_a_native_kernel_refuses_an_output_its_call_would_overrun(op_type, x, y, consts, attrs,
                                                                  msg):
    """A native kernel's C call takes one count for its input and its
    output (an activation's elements, PRelu's planes, the SGEMM's rows, a
    plane mean's channels): where the tensors disagree -- a graph that
    contradicts itself -- it is refused when the kernel is built, never run
    past either."""
    from pyarena.errors import GraphError
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    g = Graph("overrun")
    g.add_tensor("x", x, role="input")
    g.add_tensor("y", y, role="output")
    for name, shape in consts.items():
        g.add_tensor(name, shape, role="constant", data=rnd(*shape))
    ins = ["x", *consts]
    op = g.add_op(op_type, ins, ["y"], **attrs)
    with pytest.raises(GraphError, match=msg):
        make_kernel(op, [g.tensors[n] for n in ins], [g.tensors["y"]])


def resize_inputs(scales, sizes):
    """Resize's node inputs and initializers for either ``scales`` or
    ``sizes`` (the other one left empty, as ONNX requires)."""
    inits = {"roi": np.zeros(0, np.float32)}
    ins = ["x", "roi"]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        ins.append("scales")
    else:
        inits["scales"] = np.zeros(0, np.float32)
        inits["sizes"] = np.array(sizes, np.int64)
        ins += ["scales", "sizes"]
    return ins, inits


@pytest.mark.parametrize("attrs,scales,sizes", [
    (dict(mode="nearest"), [1, 1, 2, 2], None),
    (dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
     [1, 1, 2, 3], None),
    (dict(mode="nearest", coordinate_transformation_mode="half_pixel"), None, [1, 2, 7, 5]),
    (dict(mode="linear"), [1, 1, 2, 2], None),
    (dict(mode="linear", coordinate_transformation_mode="align_corners"), None, [1, 2, 9, 11]),
    (dict(mode="linear", coordinate_transformation_mode="asymmetric"), [1, 1, 0.5, 1.5], None),
    (dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), None,
     [1, 2, 3, 1]),
    # nearest on exact ties (x.5): the default round_prefer_floor rounds down
    (dict(mode="nearest", coordinate_transformation_mode="asymmetric"), [1, 1, 2, 2], None),
    (dict(mode="nearest"), [1, 1, 0.5, 0.5], None),
], ids=str)
def test_resize(tmp_path, attrs, scales, sizes):
    ins, inits = resize_inputs(scales, sizes)
    run_both(tmp_path, [node("Resize", ins, **attrs)], {"x": rnd(1, 2, 4, 6)}, inits,
             opset=13)


def test_upsample_opset9(tmp_path):
    run_both(tmp_path, [node("Upsample", ["x", "s"], mode="nearest")], {"x": rnd(1, 2, 3, 4)},
             {"s": np.array([1, 1, 2, 2], np.float32)}, opset=9)


def test_lrn_split_slice_gather(tmp_path):
    x = {"x": rnd(1, 6, 4, 5)}
    run_both(tmp_path, [node("LRN", ["x"], size=3, alpha=1e-2, beta=0.75, bias=1.0)], x,
             name="lrn")
    run_both(tmp_path, [node("Split", ["x", "sp"], ["y", "z"], axis=1)], x,
             {"sp": np.array([2, 4], np.int64)}, outputs=("y", "z"), name="split")
    run_both(tmp_path, [node("Slice", ["x", "s", "e", "a", "st"])], x,
             {"s": np.array([1, 4], np.int64), "e": np.array([5, 0], np.int64),
              "a": np.array([1, 3], np.int64), "st": np.array([2, -2], np.int64)},
             name="slice")
    run_both(tmp_path, [node("Gather", ["x", "i"], axis=1)], x,
             {"i": np.array([[0, 5], [-1, 2]], np.int64)}, name="gather")


# -- aliasing: every kernel the in-place table lets the planner run in place
ALIAS_CASES = [("Relu", {}), ("Clip", dict(min=-0.5, max=0.5)), ("LeakyRelu", dict(alpha=0.1)),
               ("Sigmoid", {}), ("HardSigmoid", {}), ("HardSwish", {}), ("Tanh", {}),
               ("Softplus", {}), ("Exp", {}), ("Neg", {}), ("Abs", {}), ("Sqrt", {}),
               ("Elu", dict(alpha=0.7)), ("Selu", {}), ("Softsign", {}), ("Sign", {}),
               ("BatchNormalization", dict(epsilon=1e-3)), ("PRelu", {}),
               ("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {}), ("Max", {}), ("Min", {}),
               ("Sum", {}), ("Mean", {}), ("Pow", {}),
               ("Erf", {}), ("Gelu", {}), ("Gelu", dict(approximate="tanh")), ("Mish", {}),
               ("Celu", dict(alpha=0.5)), ("ThresholdedRelu", dict(alpha=1.1)),
               ("Shrink", dict(lambd=1.0, bias=0.3)), ("Round", {}),
               ("Rsqrt", {}), ("Square", {}), ("SquaredDifference", {})]


@pytest.mark.parametrize("op_type,attrs", ALIAS_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("which", [0, 1])
def test_kernels_are_correct_when_the_output_is_an_input(op_type, attrs, which):
    """The planner may hand a "unary" op its input's memory as output, and
    a "binary" op the memory of any same-shaped input: results must not
    change."""
    from pyarena.graph import Graph
    from pyarena.planning.inplace import rule_for
    from pyarena.runtime.kernels import make_kernel
    kind = rule_for(op_type)
    assert kind in ("unary", "binary")
    if kind == "unary" and which == 1:
        return          # only input 0 may be aliased
    shape = (2, 3, 4, 5)
    g = Graph("a")
    g.add_tensor("x", shape, role="input")
    ins = ["x"]
    if op_type == "BatchNormalization":
        for n in "gbmv":
            g.add_tensor(n, (3,), role="constant", data=rnd(3, lo=0.5, hi=1.5))
            ins.append(n)
    elif op_type == "PRelu":
        g.add_tensor("s", (3, 1, 1), role="constant", data=rnd(3, 1, 1))
        ins.append("s")
    elif kind == "binary":
        g.add_tensor("z", shape, role="input")
        ins.append("z")
        if op_type in ("Sum", "Mean"):
            g.add_tensor("w", (5,), role="input")
            ins.append("w")
    g.add_tensor("y", shape, role="output")
    op = g.add_op(op_type, ins, ["y"], **attrs)
    k = make_kernel(op, [g.tensors[i] for i in ins], [g.tensors["y"]])
    xs = [rnd(*g.tensors[i].shape, lo=0.5, hi=2.0) if g.tensors[i].role == "input"
          else g.tensors[i].data for i in ins]
    sc = np.empty(k.scratch_bytes, np.uint8) if k.scratch_bytes else None
    sep = np.empty(shape, np.float32)
    k([x.copy() for x in xs], [sep], sc)
    aliased = [x.copy() for x in xs]
    # like the executor: the output is another view of the input's memory,
    # not the same Python object
    out = aliased[which].view()
    k(aliased, [out], sc)
    np.testing.assert_array_equal(out, sep)


_VARIADIC = {"Sum": lambda xs: sum(np.broadcast_arrays(*xs)),
             "Mean": lambda xs: sum(np.broadcast_arrays(*xs)) / len(xs),
             "Max": lambda xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
             "Min": lambda xs: np.minimum.reduce(np.broadcast_arrays(*xs))}


@pytest.mark.parametrize("op_type", sorted(_VARIADIC))
@pytest.mark.parametrize("n,which", [(3, 0), (3, 1), (3, 2), (4, 2), (4, 3)])
def test_variadic_kernels_with_the_output_over_any_input(op_type, n, which):
    """Sum / Mean / Max / Min of 3 and 4 same-shaped inputs plus a broadcast
    one, the output planned over input ``which`` (a separate view of its
    memory, as the executor passes it): NumPy's answer."""
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    shape = (2, 3, 4)
    g = Graph("v")
    ins = [f"x{i}" for i in range(n)] + ["w"]
    for name in ins[:-1]:
        g.add_tensor(name, shape, role="input")
    g.add_tensor("w", (4,), role="input")
    g.add_tensor("y", shape, role="output")
    op = g.add_op(op_type, ins, ["y"])
    k = make_kernel(op, [g.tensors[i] for i in ins], [g.tensors["y"]])
    r = np.random.default_rng(n * 10 + which)
    xs = [r.uniform(-2, 2, g.tensors[i].shape).astype(np.float32) for i in ins]
    want = _VARIADIC[op_type]([x.astype(np.float64) for x in xs])
    memory = xs[which]
    k(xs, [memory.view()], None)
    np.testing.assert_allclose(memory, want, rtol=1e-6, atol=1e-6)


def test_sum_planned_over_its_third_input_in_the_executor():
    """a = Relu(x), b = Neg(x), c = Exp(x), y = Sum(a, b, c), with a and b
    read again later: the planner writes y over c (input 2) and the result
    is NumPy's."""
    from pyarena.graph import Graph
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels import set_scratch
    shape = (2, 3, 5)
    g = Graph("sum3")
    g.add_tensor("x", shape, role="input")
    for t in ("a", "b", "c", "y", "s"):
        g.add_tensor(t, shape)
    g.add_tensor("out", shape, role="output")
    g.add_op("Relu", ["x"], ["a"], name="relu")
    g.add_op("Neg", ["x"], ["b"], name="neg")
    g.add_op("Exp", ["x"], ["c"], name="exp")
    g.add_op("Sum", ["a", "b", "c"], ["y"], name="sum")
    g.add_op("Add", ["a", "b"], ["s"], name="later")
    g.add_op("Mul", ["y", "s"], ["out"], name="mul")
    set_scratch(g)
    p = plan(g)
    assert ("sum", "c", "y", "inplace") in p.reuses
    x = np.random.default_rng(5).uniform(-2, 2, shape).astype(np.float32)
    got = Executor(g, p).run({"x": x})["out"]
    xd = x.astype(np.float64)
    a, b = np.maximum(xd, 0), -xd
    want = (a + b + np.exp(xd)) * (a + b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# -- elementwise ops added in the second round -----------------------------------
@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu_opset20(tmp_path, approximate, budget):
    attrs = {} if approximate is None else dict(approximate=approximate)
    g, _, _ = run_both(tmp_path, [node("Gelu", ["x"], **attrs)],
                       {"x": rnd(2, 3, 4, 5, lo=-6, hi=6)}, opset=20, scratch_budget=budget)
    # temporaries: 3 for erf, 1 for tanh; with a one-byte budget each chunk
    # is a single element (64-byte aligned parts)
    nbuf = 1 if approximate == "tanh" else 3
    part = 120 * 4 if budget is None else 4
    assert g.ops[0].scratch_bytes == (nbuf - 1) * (-(-part // 64) * 64) + part


def test_erf_accuracy_against_math_erf():
    import math
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    x = np.concatenate([np.linspace(-7, 7, 20001), np.float32(10.0) ** np.linspace(-30, 0, 301),
                        [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    g = Graph("e")
    g.add_tensor("x", x.shape, role="input")
    g.add_tensor("y", x.shape, role="output")
    op = g.add_op("Erf", ["x"], ["y"])
    k = make_kernel(op, [g.tensors["x"]], [g.tensors["y"]])
    y = np.empty_like(x)
    k([x], [y], np.empty(k.scratch_bytes, np.uint8))
    ref = np.array([math.erf(float(v)) for v in x])
    assert np.abs(y - ref).max() < 5e-7
    small = np.abs(x) < 1e-3
    assert np.all(np.abs(y[small] - ref[small]) <= 1e-6 * np.abs(ref[small]) + 1e-37)


def test_mish_accuracy_against_float64():
    """Mish as x n / (n + 2), n = e^x (e^x + 2): within 1e-6 relative of
    x tanh(softplus(x)) in float64 over [-100, 100] (tails: -x e^x and x),
    exact at 0, x itself far right, NaN in, NaN out."""
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import make_kernel
    x = np.concatenate([np.linspace(-100, 100, 200001), [0.0, 1e30, -1e30, np.nan]]
                       ).astype(np.float32)
    g = Graph("m")
    g.add_tensor("x", x.shape, role="input")
    g.add_tensor("y", x.shape, role="output")
    op = g.add_op("Mish", ["x"], ["y"])
    k = make_kernel(op, [g.tensors["x"]], [g.tensors["y"]])
    y = np.empty_like(x)
    k([x], [y], np.empty(k.scratch_bytes, np.uint8))
    xd = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = xd * np.tanh(np.logaddexp(xd, 0))
    ref[-3:-1] = [1e30, -0.0]
    tiny = np.abs(ref) < 1e-37          # subnormal results: absolute error only
    assert np.all(np.abs(y[:-1] - ref[:-1]) <= 1e-6 * np.abs(ref[:-1]) + tiny[:-1] * 1e-37)
    assert y[-4] == 0 and np.isnan(y[-1])


def test_chunked_elementwise_scratch_is_bounded(tmp_path, single_steps):
    g, _, _ = run_both(tmp_path, [node("Gelu", ["x"])], {"x": rnd(4, 64, 64, lo=-4, hi=4)},
                       opset=20, name="big")
    # three whole-tensor temporaries (64-byte aligned) with the default budget
    assert g.ops[0].scratch_bytes == 3 * 4 * 64 * 64 * 4
    g, _, _ = run_both(tmp_path, [node("Gelu", ["x"])], {"x": rnd(4, 64, 64, lo=-4, hi=4)},
                       opset=20, name="banded", scratch_budget=3 * 4 * 1000)
    # 1000-element chunks: 17 chunks, the last one partial
    assert g.ops[0].scratch_bytes == 2 * 4032 + 4000


@pytest.mark.parametrize("op, attrs, nbuf, per_elem", [
    ("Gelu", {}, 3, 4), ("Erf", {}, 2, 4), ("Mish", {}, 2, 4)])
def test_a_one_byte_budget_still_takes_min_step_elements_per_step(tmp_path, op, attrs, nbuf,
                                                                   per_elem):
    """However small the budget (the slack planner may leave an op one
    byte), a chunked kernel's step covers MIN_STEP_ELEMENTS elements: its
    scratch is that many per buffer, and it still matches onnxruntime."""
    from pyarena.runtime.kernels import registry
    n = registry.MIN_STEP_ELEMENTS
    g, _, _ = run_both(tmp_path, [node(op, ["x"], **attrs)], {"x": rnd(3, n, lo=-4, hi=4)},
                       opset=20, name="tiny", scratch_budget=1)
    assert g.ops[0].scratch_bytes == (nbuf - 1) * (-(-n * per_elem // 64) * 64) + n * per_elem
    k = registry.graph_kernel(g, g.ops[0])
    assert k.chunk == n and k.n == 3 * n


NEW_ELEMENTWISE = [("Erf", {}), ("Gelu", {}), ("Gelu", dict(approximate="tanh")),
                   ("Mish", {}), ("Celu", {}), ("ThresholdedRelu", {}), ("Shrink", {}),
                   ("Round", {})]


def test_new_elementwise_in_place_and_allocation_free(tmp_path):
    """A chain of the new ops: the plan runs each one in its input's memory
    and a second inference allocates no NumPy data."""
    from pyarena import Pool, numpy_allocator
    from pyarena.runtime import Executor
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from helpers.onnx_util import make_model
    from helpers.model_zoo import ort_run
    names = ["x"] + [f"t{i}" for i in range(len(NEW_ELEMENTWISE) - 1)] + ["y"]
    nodes = [node(op, [names[i]], [names[i + 1]], **attrs)
             for i, (op, attrs) in enumerate(NEW_ELEMENTWISE)]
    path = tmp_path / "chain.onnx"
    x = rnd(2, 8, 16, 16, lo=-3, hi=3)
    make_model(nodes, {"x": (list(x.shape), np.float32)}, {"y": (None, np.float32)},
               opset=20, path=path)
    g = load_model(str(path))
    p = plan(g)
    ex = Executor(g, p)
    out = np.array(ex.run({"x": x})["y"])
    np.testing.assert_allclose(out, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
    views = p.bind()
    addr = {n: v.__array_interface__["data"][0] for n, v in views.items() if n in names}
    # every op but the first (whose input is the graph input) writes in place
    for a, b in zip(names[1:-1], names[2:]):
        assert addr[a] == addr[b], (a, b)
    with numpy_allocator(Pool()) as counter:
        ex.run({"x": x})
    assert counter.allocations == 0


def test_conv_transpose_scratch_is_banded(tmp_path, single_steps):
    case = dict(strides=[2, 2], pads=[1, 1, 1, 1])
    inits = {"w": rnd(4, 3, 3, 3), "b": rnd(3)}
    g, _, _ = run_both(tmp_path, [node("ConvTranspose", ["x", "w", "b"], **case)],
                       {"x": rnd(1, 4, 10, 7)}, inits)
    # whole image: C_out*kh*kw * H_in*W_in columns, no uncropped output buffer
    assert g.ops[0].scratch_bytes == 3 * 3 * 3 * 10 * 7 * 4
    g, _, _ = run_both(tmp_path, [node("ConvTranspose", ["x", "w", "b"], **case)],
                       {"x": rnd(1, 4, 10, 7)}, inits, name="banded",
                       scratch_budget=3 * 3 * 3 * 7 * 4 * 3)
    assert g.ops[0].scratch_bytes == 3 * 3 * 3 * 3 * 7 * 4      # 3 input rows per band


@pytest.mark.parametrize("attrs,scales,sizes", [
    (dict(), [1, 1, 2, 2], None),
    (dict(cubic_coeff_a=-0.5), [1, 1, 1.5, 0.5], None),
    (dict(exclude_outside=1), None, [1, 2, 9, 5]),
    (dict(exclude_outside=1, cubic_coeff_a=-0.5), [1, 1, 0.6, 1.7], None),
    (dict(coordinate_transformation_mode="align_corners"), None, [1, 2, 7, 11]),
    (dict(coordinate_transformation_mode="asymmetric"), [1, 1, 2, 3], None),
    (dict(coordinate_transformation_mode="pytorch_half_pixel"), None, [1, 2, 1, 9]),
    (dict(coordinate_transformation_mode="pytorch_half_pixel", exclude_outside=1), None,
     [1, 2, 3, 4]),
], ids=str)
def test_resize_cubic(tmp_path, attrs, scales, sizes):
    ins, inits = resize_inputs(scales, sizes)
    g, _, _ = run_both(tmp_path, [node("Resize", ins, mode="cubic", **attrs)],
                       {"x": rnd(1, 2, 5, 6)}, inits, opset=13)
    assert g.ops[0].scratch_bytes > 0


def test_resize_cubic_allocation_free(tmp_path):
    from pyarena import Pool, numpy_allocator
    from pyarena.runtime import Executor
    from pyarena.importers import load_model
    from helpers.onnx_util import make_model
    path = tmp_path / "cubic.onnx"
    make_model([node("Resize", ["x", "roi", "s"], mode="cubic", exclude_outside=1)],
               {"x": ([1, 3, 6, 7], np.float32)}, {"y": (None, np.float32)},
               {"roi": np.zeros(0, np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
               opset=13, path=path)
    ex = Executor(load_model(str(path)))
    x = rnd(1, 3, 6, 7)
    ex.run({"x": x})
    with numpy_allocator(Pool()) as counter:
        ex.run({"x": x})
    assert counter.allocations == 0


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias_matches_onnxruntime(tmp_path, mode):
    """Antialiased downsampling by 0.4 and 0.5 (several taps per output
    pixel), planned and run: onnxruntime's values."""
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    path = tmp_path / "aa.onnx"
    make_model([node("Resize", ["x", "roi", "s"], mode=mode, antialias=1, name="aa_rs")],
               {"x": ([1, 3, 10, 8], np.float32)}, {"y": (None, np.float32)},
               {"roi": np.zeros(0, np.float32), "s": np.array([1, 1, 0.4, 0.5], np.float32)},
               opset=18, path=path)
    x = np.random.default_rng(5).standard_normal((1, 3, 10, 8)).astype(np.float32)
    g = load_model(str(path))
    got = Executor(g, plan(g)).run({"x": x})["y"]
    want = ort_run(path, {"x": x})["y"]
    assert got.shape == want.shape == (1, 3, 4, 4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("budget_bytes", [None, 1])
def test_conv_transpose_and_depthwise_multiplier_allocation_free(tmp_path, budget_bytes):
    """ConvTranspose (whole and one input row per band) and an NCHW depthwise
    conv with multiplier 2, planned: match onnxruntime and a second inference
    allocates no NumPy data."""
    from pyarena import Pool, numpy_allocator
    from pyarena.runtime import Executor
    from pyarena.importers import load_model
    from helpers.onnx_util import make_model
    from helpers.model_zoo import ort_run
    path = tmp_path / "ct.onnx"
    make_model([node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2],
                     pads=[1, 1, 0, 0], group=2),
                node("Conv", ["t", "wd"], ["y"], group=4, pads=[1, 1, 1, 1])],
               {"x": ([2, 4, 5, 6], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(4, 2, 3, 3), "b": rnd(4), "wd": rnd(8, 1, 3, 3)}, path=path)
    g = load_model(str(path), scratch_budget=budget_bytes)
    ex = Executor(g)
    x = rnd(2, 4, 5, 6)
    np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=1e-5)
    with numpy_allocator(Pool()) as counter:
        ex.run({"x": x})
    assert counter.allocations == 0


def test_float_only_elementwise_refuse_integers_by_name():
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import UnsupportedOpError, make_kernel
    g = Graph("i")
    g.add_tensor("x", (2, 3), np.int32, role="input")
    g.add_tensor("y", (2, 3), np.int32, role="output")
    op = g.add_op("Erf", ["x"], ["y"], name="int_erf")
    with pytest.raises(UnsupportedOpError, match="int_erf.*int32"):
        make_kernel(op, [g.tensors["x"]], [g.tensors["y"]])
    op = g.add_op("Shrink", ["x"], ["y"], name="int_shrink", lambd=1.0, bias=1.0)
    k = make_kernel(op, [g.tensors["x"]], [g.tensors["y"]])
    x = np.array([[-3, -1, 0], [1, 2, 5]], np.int32)
    y = np.empty_like(x)
    k([x], [y], np.empty(k.scratch_bytes, np.uint8))
    np.testing.assert_array_equal(y, [[-2, 0, 0], [0, 1, 4]])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("attrs,scales,sizes", [
    (dict(axes=[2, 3]), [2.0, 1.5], None),
    (dict(axes=[-1]), None, [9]),
    (dict(axes=[2, 3], keep_aspect_ratio_policy="not_larger"), None, [8, 8]),
    (dict(axes=[3, 2], keep_aspect_ratio_policy="not_smaller"), None, [7, 7]),
], ids=str)
def test_resize_opset18_axes_and_aspect_ratio(tmp_path, mode, attrs, scales, sizes):
    ins, inits = resize_inputs(scales, sizes)
    run_both(tmp_path, [node("Resize", ins, mode=mode, **attrs)], {"x": rnd(1, 2, 4, 6)},
             inits, opset=18)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("roi,sizes,ort,outside", [
    ([0, 0, 0.15, -0.3, 1, 1, 0.8, 1.4], [1, 2, 5, 9], True, True),  # crop rows, overhang cols
    ([0, 0, -0.5, 0, 1, 1, 1.5, 1], [1, 2, 8, 6], True, True),       # outside on both ends
    ([0, 0, 0.9, 0.12, 1, 1, 0.1, 0.74], [1, 2, 4, 3], False, False),  # flipped rows
], ids=str)
def test_resize_tf_crop_and_resize(tmp_path, mode, roi, sizes, ort, outside):
    """Against the ONNX reference evaluator (the spec's formula) and, where
    it agrees, onnxruntime: for a flipped roi (start > end) onnxruntime
    ignores the roi of that axis, the reference and pyarena follow
    x = start (in-1) + o (end - start) (in-1) / (out-1)."""
    from onnx.reference import ReferenceEvaluator
    from pyarena import Pool, numpy_allocator
    from pyarena.runtime import Executor
    from pyarena.importers import load_model
    from helpers.onnx_util import make_model
    from helpers.model_zoo import ort_run
    path = tmp_path / "crop.onnx"
    m = make_model([node("Resize", ["x", "roi", "scales", "sizes"], mode=mode,
                         coordinate_transformation_mode="tf_crop_and_resize",
                         extrapolation_value=-7.5)],
                   {"x": ([1, 2, 4, 6], np.float32)}, {"y": (None, np.float32)},
                   {"roi": np.array(roi, np.float32), "scales": np.zeros(0, np.float32),
                    "sizes": np.array(sizes, np.int64)}, opset=13, path=path)
    x = rnd(1, 2, 4, 6)
    ex = Executor(load_model(str(path)))
    out = np.array(ex.run({"x": x})["y"])
    np.testing.assert_allclose(out, ReferenceEvaluator(m).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)
    assert (out == -7.5).any() == outside
    ref = ort_run(path, {"x": x})["y"]
    assert np.allclose(out, ref, rtol=1e-4, atol=1e-5) == ort
    with numpy_allocator(Pool()) as counter:
        ex.run({"x": x})
    assert counter.allocations == 0


@pytest.mark.parametrize("size", [64, 97])
def test_mobilenet_stem_on_the_few_input_kernel(size):
    """MobileNetV2's first convolution (3 -> 32 channels, 3x3, stride 2)
    runs the native few-input-channel kernel by default, with no
    workspace; the network's outputs match im2col + BLAS on that layer
    within float rounding."""
    from pyarena.runtime import Executor, random_feeds
    from pyarena.runtime.kernels import set_scratch
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(size, width=0.5, classes=10)
    feeds = random_feeds(g)
    ex = Executor(g)
    stem = [k for op, k in zip(g.ops, ex.kernels) if op.op_type == "Conv"][0]
    assert stem.c_in == 3 and stem.path == "native" and stem.op.scratch_bytes == 0
    got = {k: v.copy() for k, v in ex.run(feeds).items()}
    stem.op.notes.kernel_path = "numpy"
    set_scratch(g)
    ex2 = Executor(g)
    assert [k for op, k in zip(g.ops, ex2.kernels) if op.op_type == "Conv"][0].path == "im2col"
    want = ex2.run(feeds)
    for k in got:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cin, cout, k, stride, pad, length, path", [
    (1, 258, 256, 128, 0, 640, "im2col"),     # a streaming STFT: 1 input channel
    (8, 16, 5, 1, 2, 16, "native"),
    (129, 128, 3, 1, 1, 4, "native"),         # a VAD encoder layer
    (64, 64, 3, 2, 1, 8, "native"),
    (64, 64, 3, 1, 1, 17, "im2col"),          # 17 output samples: past FEW_PIXELS
    (256, 256, 3, 1, 1, 16, "im2col"),        # 3.1 M multiply-adds: past FEW_PIXELS_MACS
])
def test_convolutions_of_few_output_pixels_run_the_direct_kernel(tmp_path, cin, cout, k, stride,
                                                                 pad, length, path):
    """A convolution of at most 16 output pixels and 2^20 multiply-adds
    takes the C core's direct kernel (no im2col columns); its outputs match
    onnxruntime's and the NumPy path's on three new inputs."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    rng = np.random.default_rng(cin + cout + length)
    p = tmp_path / "conv1d.onnx"
    make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[pad, pad],
                                 strides=[stride])],
               {"x": ([1, cin, length], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.standard_normal((cout, cin, k)).astype(np.float32),
                "b": rng.standard_normal(cout).astype(np.float32)}, path=p)
    ex = Executor(load_model(str(p)))
    ex_numpy = Executor(load_model(str(p), native=False))
    conv = next(kk for kk in ex.kernels if kk.op.op_type == "Conv")
    assert conv.path == path
    for _ in range(3):
        x = rng.standard_normal((1, cin, length)).astype(np.float32)
        got = np.array(ex.run({"x": x})["y"])
        want = ort_run(p, {"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got, ex_numpy.run({"x": x})["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("trans_b,c_shape,beta,packed,rows", [
    (1, (9,), 1.0, True, 5), (0, (1, 9), 0.5, True, 5), (1, (), 2.0, True, 5),
    (0, None, 1.0, True, 5),
    (1, (5, 9), 1.0, False, 5),                    # C per element: not a bias
    (1, (9,), 1.0, False, 1), (0, (1, 9), 0.5, False, 1),   # one row: BLAS's gemv
], ids=str)
def test_gemm_of_constant_weights_runs_the_packed_sgemm(tmp_path, trans_b, c_shape, beta,
                                                      packed, rows):
    """Gemm with a constant B (alpha 1, A not transposed) and a constant C of
    one value per output column (or none) packs B once for the C core's
    SGEMM, for more than one row of A; other C's and one row keep NumPy;
    both match onnxruntime."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    b = rnd(9, 7) if trans_b else rnd(7, 9)
    inits, ins = {"b": b}, ["a", "b"]
    if c_shape is not None:
        inits["c"], ins = rnd(*c_shape), ins + ["c"]
    path = tmp_path / "gemm.onnx"
    make_model([node("Gemm", ins, transB=trans_b, beta=beta)], {"a": ([rows, 7], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    a = rnd(rows, 7)
    ex = Executor(load_model(str(path)))
    assert (ex.kernels[0].packed is not None) == packed
    assert ex.kernels[0].path == ("native" if packed else "numpy")
    np.testing.assert_allclose(ex.run({"a": a})["y"], ort_run(path, {"a": a})["y"],
                               rtol=1e-5, atol=1e-5)


def test_a_one_row_gemm_of_an_unaligned_bias_allocates_nothing_per_run():
    """A one-row Gemm (BLAS's gemv) whose constant C lies unaligned (a
    mapped file's raw data can) keeps an aligned copy: NumPy would copy an
    unaligned operand of the add on every run."""
    from pyarena import Pool, numpy_allocator
    from pyarena.graph import Graph
    from pyarena.runtime import Executor
    raw = np.frombuffer(b"\0" + rnd(64).tobytes(), np.uint8)[1:].view(np.float32)
    assert not raw.flags.aligned
    g = Graph("gemv")
    g.add_tensor("a", (1, 32), role="input")
    g.add_tensor("b", (64, 32), role="constant", data=rnd(64, 32))
    g.add_tensor("c", (64,), role="constant", data=raw)
    g.add_tensor("y", (1, 64), role="output")
    g.add_op("Gemm", ["a", "b", "c"], ["y"], name="gemv", transB=1)
    ex = Executor(g)
    assert ex.kernels[0].packed is None
    a = rnd(1, 32)
    np.testing.assert_allclose(ex.run({"a": a})["y"], a @ g.tensors["b"].data.T + raw,
                               rtol=1e-5, atol=1e-6)
    with numpy_allocator(Pool()) as counter:
        ex.run({"a": a})
    assert counter.allocations == 0


def test_packed_products_lend_their_weights_to_new_row_counts(tmp_path):
    """A session's new signature (other rows of A) takes the prior Gemm's
    packed B: the same array, no weight bytes added, one row too; a session
    whose first signature has one row runs BLAS's gemv on B as the file
    holds it: nothing packed."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena import InferenceSession
    path = tmp_path / "rows.onnx"
    make_model([node("Gemm", ["a", "b", "c"], transB=1)], {"a": (["M", 16], np.float32)},
               {"y": (None, np.float32)}, {"b": rnd(40, 16), "c": rnd(40)}, path=path)
    s = InferenceSession(str(path))
    packs, held = [], []
    for m in (3, 8, 2, 1):
        a = rnd(m, 16)
        (y,) = s.run(None, {"a": a})
        np.testing.assert_allclose(y, ort_run(path, {"a": a})["y"], rtol=1e-5, atol=1e-5)
        packs.append(s._last.kernels[0].packed)
        held.append(s.memory_info()["weights_bytes"])
    assert packs[0] is not None and all(p is packs[0] for p in packs)
    assert len(set(held)) == 1
    s1 = InferenceSession(str(path))
    a = rnd(1, 16)
    np.testing.assert_allclose(s1.run(None, {"a": a})[0], ort_run(path, {"a": a})["y"],
                               rtol=1e-5, atol=1e-5)
    assert s1._last.kernels[0].packed is None


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 2), st.integers(1, 9), st.integers(1, 6),
       st.integers(1, 5), st.sampled_from([1, 200, None]))
@example(3, 1, 3, 5, 5, 200)        # three-row bands, the last of two rows
def test_lrn_in_row_bands_gives_the_whole_tensors_bits(size, n, c, h, w, budget):
    """LRN's scratch is the window sums of a band of rows (a one-byte budget:
    one row); any band gives the bits of the whole tensor at once, and both
    the definition's values (a zero-padded channel window)."""
    from unittest import mock

    from pyarena import plan
    from pyarena.graph import Graph
    from pyarena.runtime import Executor, set_scratch
    from pyarena.runtime.kernels import registry
    rows = mock.patch.object(registry, "MIN_STEP_ELEMENTS", 1)     # a row per band
    rows.start()

    def graph(b):
        g = Graph("lrn")
        g.add_tensor("x", (n, c, h, w), "float32", role="input")
        g.add_tensor("y", (n, c, h, w), "float32", role="output")
        g.add_op("LRN", ["x"], ["y"], name="lrn", size=size, alpha=0.3, beta=0.75, bias=2.0)
        if b is not None:
            g.ops[0].notes.scratch_budget = b
        return set_scratch(g)
    x = np.random.default_rng(size * 100 + c).standard_normal((n, c, h, w)).astype(np.float32)
    try:
        g_band, g_whole = graph(budget), graph(None)
        if budget == 1:
            assert g_band.ops[0].scratch_bytes == n * c * w * 4       # one row's sums
        got = np.array(Executor(g_band, plan(g_band)).run({"x": x})["y"])
        whole = np.array(Executor(g_whole, plan(g_whole)).run({"x": x})["y"])
    finally:
        rows.stop()
    np.testing.assert_array_equal(got, whole)
    lo = (size - 1) // 2
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (lo, size - 1 - lo), (0, 0), (0, 0)))
    win = sum(sq[:, i:i + c] for i in range(size))
    ref = x / (2.0 + 0.3 / size * win) ** 0.75
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 2), st.integers(1, 9), st.integers(1, 9), st.integers(1, 40),
       st.booleans(), st.booleans())
def test_plane_means_of_nhwc_tensors_run_natively_and_match_numpy(n, h, w, c, keep, glob):
    """ReduceMean over axes 1 and 2 of a 4-D tensor (TFLite's MEAN of an
    NHWC map) and an NHWC GlobalAveragePool take the C core's average
    pooling over the whole plane; the NumPy path (native off) agrees."""
    from pyarena import plan
    from pyarena.graph import Graph
    from pyarena.runtime import Executor, set_scratch

    def graph(native):
        g = Graph("mean")
        g.native = native
        g.add_tensor("x", (n, h, w, c), "float32", role="input")
        if glob:
            g.add_tensor("y", (n, 1, 1, c), "float32", role="output")
            g.add_op("GlobalAveragePool", ["x"], ["y"], name="m", layout="NHWC")
        else:
            g.add_tensor("y", (n, 1, 1, c) if keep else (n, c), "float32", role="output")
            g.add_op("ReduceMean", ["x"], ["y"], name="m", axes=[1, 2], keepdims=int(keep))
        return set_scratch(g, None, native)
    x = np.random.default_rng(h * 10 + w).standard_normal((n, h, w, c)).astype(np.float32)
    outs = {}
    for native in (True, False):
        g = graph(native)
        ex = Executor(g, plan(g))
        assert ex.kernels[0].path == ("native" if native else "numpy")
        outs[native] = np.array(ex.run({"x": x})["y"])
    ref = x.astype(np.float64).mean(axis=(1, 2)).reshape(outs[False].shape)
    np.testing.assert_allclose(outs[True], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[False], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["keep", "nhwc"])
@pytest.mark.parametrize("width, path", [(224, "native"), (400, "im2col")])
def test_a_7x7_stride_2_stem_on_the_few_input_kernel(tmp_path, layout, width, path):
    """ResNet's / DenseNet's / Inception's first convolution (3 input
    channels, 7x7, stride 2, pads 3) at 224 columns fits the few-input
    kernel's stack tile (21 rows x 2 halves x 115 floats); at 400 columns
    (8,526 floats) it does not and keeps im2col.  Either way the outputs
    match onnxruntime's and the other path's."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from onnx import helper
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    rng = np.random.default_rng(3)
    p = tmp_path / "stem.onnx"
    make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[3] * 4, strides=[2, 2]),
                helper.make_node("Relu", ["c"], ["y"])],
               {"x": ([1, 3, 9, width], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.uniform(-1, 1, (10, 3, 7, 7)).astype(np.float32),
                "b": rng.uniform(-1, 1, 10).astype(np.float32)}, path=p)
    x = {"x": rng.uniform(-2, 2, (1, 3, 9, width)).astype(np.float32)}
    g = load_model(str(p), layout=layout)
    ex = Executor(g)
    conv = next(k for op, k in zip(g.ops, ex.kernels) if op.op_type == "Conv")
    assert conv.path == path
    got = ex.run(x)["y"].copy()
    np.testing.assert_allclose(got, ort_run(p, x)["y"], rtol=1e-4, atol=1e-5)
    from pyarena.runtime.kernels import set_scratch
    conv.op.notes.kernel_path = "numpy" if path == "native" else "native"
    set_scratch(g)
    other = Executor(g)
    assert next(k for op, k in zip(g.ops, other.kernels) if op.op_type == "Conv").path != path
    np.testing.assert_allclose(other.run(x)["y"], got, rtol=1e-4, atol=1e-5)
