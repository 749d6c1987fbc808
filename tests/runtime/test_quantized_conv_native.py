"""The 8-bit convolutions' native path (``pa_qconv2d_run``) against their
NumPy path and onnxruntime, bit for bit: QLinearConv and ConvInteger of
random geometry, types and zero points (hypothesis)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402


def _tp(dt):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _save(path, node, x, inits, y_dtype):
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", _tp(x.dtype), list(x.shape))],
        [helper.make_tensor_value_info("y", _tp(y_dtype), None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _run(path, x, native):
    ex = Executor(load_model(str(path), native=native))
    paths = {k.op.op_type: k.path for k in ex.kernels}
    return np.array(ex.run({"x": x})["y"]), paths


@st.composite
def conv_case(draw):
    depthwise = draw(st.booleans())
    g = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 9))
    cog = draw(st.integers(1, 40))
    if depthwise:
        g = draw(st.integers(2, 24))
        cg, cog = 1, 1
    k = draw(st.sampled_from([1, 2, 3, 5]))
    stride, dil = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = [draw(st.integers(0, k - 1)) for _ in range(4)]
    span = (k - 1) * dil + 1
    h = draw(st.integers(max(1, span - pads[0] - pads[2]), 12))
    w = draw(st.integers(max(1, span - pads[1] - pads[3]), 12))
    return dict(
        qlinear=draw(st.booleans()), g=g, cin=g * cg, cout=g * cog, k=k, stride=stride,
        dil=dil, pads=pads, h=h, w=w, n=draw(st.integers(1, 2)),
        xdt=draw(st.sampled_from([np.uint8, np.int8])),
        wdt=draw(st.sampled_from([np.uint8, np.int8])),
        wzp_per_channel=draw(st.booleans()), seed=draw(st.integers(0, 2**31)))


def _model(c, tmp_path):
    rng = np.random.default_rng(c["seed"])
    xi, wi = np.iinfo(c["xdt"]), np.iinfo(c["wdt"])
    x = rng.integers(xi.min, xi.max + 1, (c["n"], c["cin"], c["h"], c["w"])).astype(c["xdt"])
    w = rng.integers(wi.min, wi.max + 1,
                     (c["cout"], c["cin"] // c["g"], c["k"], c["k"])).astype(c["wdt"])
    xz = np.array(rng.integers(xi.min, xi.max + 1), c["xdt"])
    wz = (rng.integers(wi.min, wi.max + 1, c["cout"]) if c["wzp_per_channel"] else
          np.zeros(c["cout"])).astype(c["wdt"])
    attrs = dict(group=c["g"], strides=[c["stride"]] * 2, dilations=[c["dil"]] * 2,
                 pads=c["pads"], kernel_shape=[c["k"]] * 2)
    if c["qlinear"]:
        y_dt = c["xdt"]
        inits = {"xs": np.array(0.02, np.float32), "xz": xz, "w": w,
                 "ws": rng.uniform(0.0005, 0.01, c["cout"]).astype(np.float32), "wz": wz,
                 "ys": np.array(rng.uniform(0.05, 2.0), np.float32),
                 "yz": np.array(rng.integers(np.iinfo(y_dt).min, np.iinfo(y_dt).max + 1), y_dt),
                 "b": rng.integers(-20000, 20000, c["cout"]).astype(np.int32)}
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz",
                                                "b"], ["y"], **attrs)
    else:
        y_dt = np.int32
        inits = {"w": w, "xz": xz, "wz": wz if c["wzp_per_channel"] else wz[:1].reshape(())}
        node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    path = tmp_path / "qconv.onnx"
    _save(path, node, x, inits, y_dt)
    return path, x


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=conv_case())
def test_native_path_is_the_numpy_path_bit_for_bit(tmp_path, c):
    path, x = _model(c, tmp_path)
    native, paths = _run(path, x, True)
    numpy_, numpy_paths = _run(path, x, False)
    op = "QLinearConv" if c["qlinear"] else "ConvInteger"
    assert paths[op] == "native" and numpy_paths[op] == "numpy"
    assert native.dtype == numpy_.dtype
    np.testing.assert_array_equal(native, numpy_)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=conv_case())
def test_native_path_is_onnxruntime_bit_for_bit(tmp_path, c):
    # onnxruntime's u8 x s8 kernels without VNNI add pairs of products in
    # saturating 16-bit lanes: full-range weights under uint8 activations
    # are compared where that cannot saturate (7-bit weights) only
    # onnxruntime's kernels take uint8 x uint8 ConvInteger (one weight zero
    # point) and QLinearConv of int8 inputs with int8 weights only
    if not c["qlinear"]:
        c = dict(c, xdt=np.uint8, wdt=np.uint8)
    elif c["xdt"] == np.int8:
        c = dict(c, wdt=np.int8)
    if (c["xdt"] == np.uint8 and c["wdt"] == np.int8) or not c["qlinear"]:
        c = dict(c, wzp_per_channel=False)
    path, x = _model(c, tmp_path)
    if c["xdt"] == np.uint8 and c["wdt"] == np.int8:
        m = onnx.load(str(path))
        for t in m.graph.initializer:
            if t.name == "w":
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) // 2, "w"))
        onnx.save(m, str(path))
    ours, _ = _run(path, x, True)
    ref = ort_run(path, {"x": x})["y"]
    np.testing.assert_array_equal(ours, ref)


#: NCHW layers of the 8-bit convolution's panel path (kernels/qconv_nchw.c)
#: larger than the random cases: ShuffleNet's grouped 1x1 layers, a first
#: 3x3 layer of 3 channels at stride 2, a 1x1 at stride 2, a wide 1x1
#: (several pixel blocks); and depthwise ones of the VNNI plane path
#: (kernels/qconv_vnni.c: 3x3 at stride 1 and 2, 5x5, a plane of two
#: bands); (groups, cin, cout, k, stride, pad, h, w)
NCHW_CASES = [(4, 136, 136, 1, 1, 0, 28, 28), (1, 3, 24, 3, 2, 1, 67, 61),
              (1, 24, 40, 1, 2, 0, 30, 31), (1, 160, 20, 1, 1, 0, 45, 33),
              (3, 12, 9, 3, 1, 1, 19, 23),
              (136, 136, 136, 3, 1, 1, 28, 28), (24, 24, 24, 3, 2, 1, 57, 41),
              (40, 40, 40, 5, 1, 2, 20, 21), (2, 2, 2, 3, 1, 1, 300, 140)]


@pytest.mark.parametrize("geo", NCHW_CASES)
@pytest.mark.parametrize("xdt,wdt,per_channel", [(np.uint8, np.int8, False),
                                                 (np.uint8, np.uint8, True),
                                                 (np.int8, np.int8, True)])
def test_nchw_paths_are_numpy_and_onnxruntime(tmp_path, geo, xdt, wdt, per_channel):
    g, cin, cout, k, stride, pad, h, w = geo
    c = dict(qlinear=True, g=g, cin=cin, cout=cout, k=k, stride=stride, dil=1,
             pads=[pad] * 4, h=h, w=w, n=1, xdt=xdt, wdt=wdt, wzp_per_channel=per_channel,
             seed=cin * h + w)
    path, x = _model(c, tmp_path)
    if xdt == np.uint8 and wdt == np.int8:        # (7-bit weights: see above)
        m = onnx.load(str(path))
        for t in m.graph.initializer:
            if t.name == "w":
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) // 2, "w"))
        onnx.save(m, str(path))
    ours, paths = _run(path, x, True)
    assert paths["QLinearConv"] == "native"
    np.testing.assert_array_equal(ours, _run(path, x, False)[0])
    np.testing.assert_array_equal(ours, ort_run(path, {"x": x})["y"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(qlinear=st.booleans(), m=st.lists(st.integers(1, 7), min_size=1, max_size=3),
       k=st.integers(1, 70), n=st.integers(1, 50), adt=st.sampled_from([np.uint8, np.int8]),
       bdt=st.sampled_from([np.uint8, np.int8]), per_column=st.booleans(),
       seed=st.integers(0, 2**31))
def test_native_matmul_is_the_numpy_path_and_onnxruntime(tmp_path, qlinear, m, k, n, adt, bdt,
                                                          per_column, seed):
    """QLinearMatMul / MatMulInteger of a constant B (a 1x1 convolution of
    the rows of A): native = NumPy bit for bit, and = onnxruntime where it
    has a kernel for the types."""
    rng = np.random.default_rng(seed)
    ai, bi = np.iinfo(adt), np.iinfo(bdt)
    x = rng.integers(ai.min, ai.max + 1, tuple(m) + (k,)).astype(adt)
    b = rng.integers(bi.min, bi.max + 1, (k, n)).astype(bdt)
    az = np.array(rng.integers(ai.min, ai.max + 1), adt)
    bz = (rng.integers(bi.min, bi.max + 1, n) if per_column else
          np.array(rng.integers(bi.min, bi.max + 1))).astype(bdt)
    if qlinear:
        y_dt = adt
        inits = {"as": np.array(0.03, np.float32), "az": az, "b": b,
                 "bs": rng.uniform(0.001, 0.02, n if per_column else 1).astype(np.float32)
                 .reshape(-1 if per_column else ()), "bz": bz,
                 "ys": np.array(rng.uniform(0.1, 3.0), np.float32),
                 "yz": np.array(rng.integers(np.iinfo(adt).min, np.iinfo(adt).max + 1), adt)}
        node = helper.make_node("QLinearMatMul", ["x", "as", "az", "b", "bs", "bz", "ys", "yz"],
                                ["y"])
    else:
        y_dt = np.int32
        inits = {"b": b, "az": az, "bz": bz}
        node = helper.make_node("MatMulInteger", ["x", "b", "az", "bz"], ["y"])
    path = tmp_path / "qmatmul.onnx"
    _save(path, node, x, inits, y_dt)
    native, paths = _run(path, x, True)
    numpy_, _ = _run(path, x, False)
    assert paths[node.op_type] == "native"
    np.testing.assert_array_equal(native, numpy_)
    # onnxruntime: uint8 A with int8 B only where 16-bit pair sums cannot
    # saturate (see above); its QLinearMatMul takes A and B of one signedness
    # or u8 x s8, MatMulInteger u8/s8 A with u8/s8 B
    if adt == np.uint8 and bdt == np.int8 and np.abs(b.astype(np.int64)).max() > 63:
        return
    if qlinear and adt == np.int8 and bdt == np.uint8:
        return
    try:
        ref = ort_run(path, {"x": x})["y"]
    except Exception as e:      # a type pair onnxruntime has no kernel for
        assert "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e)
        return
    np.testing.assert_array_equal(native, ref)


def _multiplier_case():
    """Scales whose multiplier x_scale * w_scale / y_scale differs in
    float32 arithmetic (onnxruntime's) from the float64 value rounded once,
    and an accumulator whose requantized value differs between the two."""
    f = np.float32
    rng = np.random.default_rng(5)
    accs = np.arange(-30000, 30001, dtype=np.int64)
    for _ in range(20000):
        xs, ws, ys = (f(v) for v in rng.uniform(0.001, 0.1, 3))
        m32 = xs * ws / ys
        m64 = f(float(xs) * float(ws) / float(ys))
        if m32 == m64:
            continue
        a = accs.astype(np.int32).astype(f)
        r32, r64 = np.rint(a * m32), np.rint(a * m64)
        diff = np.nonzero((r32 != r64) & (np.abs(r32) < 100))[0]    # not clamped
        if diff.size:
            return xs, ws, ys, int(accs[diff[0]])
    raise AssertionError("no case found")


def test_multiplier_is_float32_as_onnxruntime(tmp_path):
    """An accumulator on a rounding boundary that only the float32
    multiplier puts on the right side: with x = x_zero_point the
    accumulator is the bias."""
    xs, ws, ys, acc = _multiplier_case()
    x = np.full((1, 1, 2, 2), 7, np.uint8)
    inits = {"xs": np.array(xs, np.float32), "xz": np.array(7, np.uint8),
             "w": np.ones((1, 1, 1, 1), np.uint8), "ws": np.array([ws], np.float32),
             "wz": np.array([0], np.uint8), "ys": np.array(ys, np.float32),
             "yz": np.array(128, np.uint8), "b": np.array([acc], np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"])
    path = tmp_path / "mult.onnx"
    _save(path, node, x, inits, np.uint8)
    ref = ort_run(path, {"x": x})["y"]
    for native in (True, False):
        np.testing.assert_array_equal(_run(path, x, native)[0], ref)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 9), k=st.integers(1, 90), n=st.integers(17, 40),
       bdt=st.sampled_from([np.uint8, np.int8]), trans_b=st.booleans(),
       bias=st.sampled_from(["none", "scalar", "column"]), per_column=st.booleans(),
       alpha=st.sampled_from([1.0, 0.5, 0.37]), seed=st.integers(0, 2**31))
def test_qgemm_native_is_the_numpy_path_and_onnxruntime(tmp_path, m, k, n, bdt, trans_b, bias,
                                                        per_column, alpha, seed):
    """com.microsoft QGemm with an 8-bit output on the 8-bit GEMM: C as
    the accumulators' bias, alpha * a_scale * b_scale / y_scale in float32
    in onnxruntime's order; native = NumPy = onnxruntime bit for bit."""
    rng = np.random.default_rng(seed)
    bi = np.iinfo(bdt)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    b = rng.integers(bi.min // 2, bi.max // 2 + 1, (n, k) if trans_b else (k, n)).astype(bdt)
    cols = n if per_column else 1
    inits = {"as": np.array(rng.uniform(0.005, 0.05), np.float32),
             "az": np.array(rng.integers(0, 256), np.uint8), "b": b,
             "bs": rng.uniform(0.001, 0.02, cols).astype(np.float32).reshape(-1 if per_column
                                                                              else ()),
             "bz": rng.integers(bi.min // 2, bi.max // 2 + 1, cols).astype(bdt)
             .reshape(-1 if per_column else ()),
             "ys": np.array(rng.uniform(0.05, 2.0), np.float32),
             "yz": np.array(rng.integers(0, 256), np.uint8)}
    ins = ["x", "as", "az", "b", "bs", "bz", ""]
    if bias != "none":
        inits["c"] = rng.integers(-3000, 3000, n if bias == "column" else 1).astype(np.int32)
        ins[-1] = "c"
    node = helper.make_node("QGemm", ins + ["ys", "yz"], ["y"], domain="com.microsoft",
                            alpha=alpha, transB=int(trans_b))
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", _tp(np.uint8), [m, k])],
        [helper.make_tensor_value_info("y", _tp(np.uint8), None)],
        [numpy_helper.from_array(np.asarray(v), kk) for kk, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = tmp_path / "qgemm.onnx"
    onnx.save(model, str(path))
    native, paths = _run(path, x, True)
    numpy_, _ = _run(path, x, False)
    assert paths["QGemm"] == "native"
    np.testing.assert_array_equal(native, numpy_)
    np.testing.assert_array_equal(native, ort_run(path, {"x": x})["y"])


@pytest.mark.parametrize("c_shape", [(5, 1), (5, 20)])
def test_qgemm_bias_per_row_stays_on_numpy_and_matches_onnxruntime(tmp_path, c_shape):
    """A C of one value per row (Gemm's broadcast) is not a per-column bias
    of the native GEMM: the NumPy path adds it, as onnxruntime does."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (5, 8)).astype(np.uint8)
    inits = {"as": np.array(0.02, np.float32), "az": np.array(3, np.uint8),
             "b": rng.integers(-50, 50, (8, 20)).astype(np.int8), "bs": np.array(0.01, np.float32),
             "bz": np.array(0, np.int8), "c": rng.integers(-300, 300, c_shape).astype(np.int32),
             "ys": np.array(0.1, np.float32), "yz": np.array(128, np.uint8)}
    node = helper.make_node("QGemm", ["x", "as", "az", "b", "bs", "bz", "c", "ys", "yz"], ["y"],
                            domain="com.microsoft")
    g = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", _tp(np.uint8), [5, 8])],
        [helper.make_tensor_value_info("y", _tp(np.uint8), None)],
        [numpy_helper.from_array(v, kk) for kk, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    path = tmp_path / "rowc.onnx"
    onnx.save(model, str(path))
    got, paths = _run(path, x, True)
    assert paths["QGemm"] == "numpy"
    np.testing.assert_array_equal(got, ort_run(path, {"x": x})["y"])
