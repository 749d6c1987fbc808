"""Every element-wise, reduction and indexing op onnxruntime runs for a
dtype, run by pyarena on the same one-node file and compared: shapes,
dtypes and values (integers exactly; float16 within its precision).  An op
onnxruntime refuses for a dtype is skipped.  What it found when written:
an integer ReduceMean gave 0 everywhere (the sum times a reciprocal of 0,
where onnxruntime divides, truncating), and float16 Erf left [-1, 1]
(-1.009: its formula evaluated in float16)."""
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.onnx_util import untyped_model

BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Mod", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd"]
UNARY = ["Neg", "Abs", "Relu", "Sign", "Ceil", "Floor", "Round", "Sqrt", "Exp", "Log",
         "Reciprocal", "Sigmoid", "Tanh", "Erf", "IsNaN", "IsInf", "Not", "Identity", "Softplus",
         "Sin", "Cos", "BitwiseNot"]
DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
          np.uint16, np.uint32, np.uint64, np.bool_]


def _arr(rng, dt, shape):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        return rng.integers(max(-5, np.iinfo(dt).min), 6, shape).astype(dt)
    return (rng.standard_normal(shape) * 3).astype(dt)


def _cases(dt, rng):
    N = helper.make_node
    kind = np.dtype(dt).kind
    for op in BINARY:
        x, y = _arr(rng, dt, (3, 4)), _arr(rng, dt, (4,))
        attrs = {}
        if op in ("Div", "Mod") and kind in "iub":
            y[y == 0] = 1
        if op == "Pow" and kind in "iu":
            x, y = x % 5, np.abs(y) % 3
        if op == "BitShift":
            attrs, y = {"direction": "LEFT"}, y % 3 if kind == "u" else y
        if op == "Mod" and kind == "f":
            attrs = {"fmod": 1}
        yield op, [N(op, ["x", "y"], ["z"], **attrs)], {"x": x, "y": y}, ["z"], {}
    for op in UNARY:
        yield op, [N(op, ["x"], ["z"])], {"x": _arr(rng, dt, (3, 4))}, ["z"], {}
    x = _arr(rng, dt, (3, 4))
    big = x * 7 if kind in "iu" else x      # integer means far from 0
    for op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean"):
        yield op, [N(op, ["x"], ["z"], keepdims=0)], {"x": big}, ["z"], {}
        yield op + "-axis", [N(op, ["x", "a"], ["z"])], {"x": big}, ["z"], \
            {"a": np.array([1], np.int64)}
    yield "ArgMax", [N("ArgMax", ["x"], ["z"], axis=1)], {"x": x}, ["z"], {}
    yield "ArgMin", [N("ArgMin", ["x"], ["z"], axis=0)], {"x": x}, ["z"], {}
    yield "CumSum", [N("CumSum", ["x", "a"], ["z"])], {"x": x}, ["z"], \
        {"a": np.array(1, np.int64)}
    yield "Concat", [N("Concat", ["x", "x"], ["z"], axis=1)], {"x": x}, ["z"], {}
    yield "Transpose", [N("Transpose", ["x"], ["z"])], {"x": x}, ["z"], {}
    yield "Gather", [N("Gather", ["x", "i"], ["z"], axis=1)], {"x": x}, ["z"], \
        {"i": np.array([3, 0, -1], np.int64)}
    yield "Where", [N("Where", ["c", "x", "y"], ["z"])], \
        {"c": _arr(rng, np.bool_, (3, 4)), "x": x, "y": _arr(rng, dt, (4,))}, ["z"], {}
    yield "TopK", [N("TopK", ["x", "k"], ["z", "i"])], {"x": x}, ["z", "i"], \
        {"k": np.array([2], np.int64)}
    yield "MatMul", [N("MatMul", ["x", "w"], ["z"])], {"x": x}, ["z"], \
        {"w": _arr(rng, dt, (4, 2))}
    yield "Expand", [N("Expand", ["x", "s"], ["z"])], {"x": x[:1]}, ["z"], \
        {"s": np.array([2, 3, 4], np.int64)}
    yield "Tile", [N("Tile", ["x", "s"], ["z"])], {"x": x}, ["z"], {"s": np.array([2, 1], np.int64)}
    lo, hi = (1, 3) if kind in "ub" else (-2, 3)
    if kind != "b":
        yield "Clip", [N("Clip", ["x", "lo", "hi"], ["z"])], {"x": x}, ["z"], \
            {"lo": np.array(lo).astype(dt), "hi": np.array(hi).astype(dt)}


def _one(name, nodes, feeds, outs, inits):
    import onnxruntime as ort

    import pyarena
    b = untyped_model(nodes, feeds, outs, inits, opset=18).SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        want = ort.InferenceSession(b, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:   # noqa: BLE001 -- onnxruntime does not run it for this dtype
        return None
    try:
        got = pyarena.InferenceSession(b).run(None, feeds)
    except Exception as exc:    # noqa: BLE001
        return f"{name}: refused or failed where onnxruntime runs it ({exc})"[:300]
    for w, o in zip(want, got):
        if w.shape != o.shape or w.dtype != o.dtype:
            return f"{name}: {o.shape} {o.dtype}, onnxruntime {w.shape} {w.dtype}"
        tol = dict(rtol=2e-3, atol=2e-3) if w.dtype == np.float16 else dict(rtol=1e-5, atol=1e-6)
        same = np.allclose(o, w, equal_nan=True, **tol) if w.dtype.kind == "f" else \
            np.array_equal(o, w)
        if not same:
            return f"{name}: {o.ravel()[:6]}, onnxruntime {w.ravel()[:6]}"
    return None


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_op_onnxruntime_runs_for_a_dtype_gives_its_values(dt):
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = [r for r in (_one(*c) for c in _cases(dt, rng)) if r is not None]
    assert not bad, bad


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32], ids=lambda d: np.dtype(d).name)
def test_an_integer_bilinear_resize_has_onnxruntimes_values_to_the_unit(dt):
    """onnxruntime blends an integer image in float32 with its own 2-D
    formula and truncates; pyarena weighted in the integer type (every
    weight 0 or 1: whole rows wrong), then blended axis by axis (a unit off
    where the sum fell on either side of an integer)."""
    rng = np.random.default_rng(9)
    N = helper.make_node
    bad = []
    for ctm in ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners",
                "tf_half_pixel_for_nn"):
        for s in ([1, 1, 2, 1.5], [1, 1, 0.5, 0.75], [1, 1, 3, 2], [1, 1, 1, 2.5],
                  [1, 1, 1.7, 1], [1, 1, 0.6, 3.3]):
            lo = 0 if np.dtype(dt).kind == "u" else -120
            x = rng.integers(lo, 120, (2, 3, 7, 5)).astype(dt)
            r = _one(f"{ctm} {s}", [N("Resize", ["x", "", "s"], ["y"], mode="linear",
                                       coordinate_transformation_mode=ctm)],
                     {"x": x}, ["y"], {"s": np.array(s, np.float32)})
            if r is not None:
                bad.append(r)
    assert not bad, bad



def test_an_integer_bilinear_resize_runs_in_its_planned_scratch():
    """onnxruntime's formula on an integer image plans exactly what it
    uses -- the input as float32, the sum and one gathered term -- and a
    run allocates nothing of an output's size (it gathered four
    temporaries and built the sum per run, beside an unused plan for the
    axis-by-axis blend)."""
    import tracemalloc
    import pyarena
    from pyarena.runtime.kernels import make_kernel
    from pyarena.graph import Op, Tensor
    N = helper.make_node
    x = np.random.default_rng(2).integers(0, 200, (1, 3, 100, 80)).astype(np.uint8)
    s = np.array([1, 1, 2, 1.5], np.float32)
    g = helper.make_graph([N("Resize", ["x", "", "s"], ["y"], mode="linear")], "r",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
                          [numpy_helper.from_array(s, "s")])
    sess = pyarena.InferenceSession(helper.make_model(g).SerializeToString())
    first = sess.run(None, {"x": x})[0]
    tracemalloc.start()
    try:
        again = sess.run(None, {"x": x})[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(first, again)
    # the returned output, and NumPy's cast buffer: under a quarter of a float32 term
    assert peak < again.nbytes + again.size, peak
    k = make_kernel(Op("r", "Resize", ["x", "", "s"], ["y"], attrs={"mode": b"linear"}),
                    [Tensor("x", x.shape, dtype=np.uint8), None,
                     Tensor("s", s.shape, role="constant", data=s)],
                    [Tensor("y", (1, 3, 200, 120), dtype=np.uint8)])
    assert k.ort2d is not None
    assert [(tuple(sh), np.dtype(d)) for sh, d in k.scratch] == \
        [((1, 3, 100, 80), np.dtype(np.float32))] + [((1, 3, 200, 120), np.dtype(np.float32))] * 2



@pytest.mark.parametrize("op,opset", [("Erf", 13), ("Mish", 18), ("Gelu", 20)])
def test_float16_widened_ops_keep_nan_inf_and_extremes_as_onnxruntime(op, opset):
    """float16 Erf / Mish / Gelu are evaluated in float32 chunks and
    rounded once: NaN stays NaN, the infinities and float16's largest
    values map as onnxruntime maps them, and the rest is within one
    float16 unit (Mish(-20) = -4.1e-8 rounds to the smallest subnormal,
    which onnxruntime flushes to -0)."""
    import onnxruntime as ort
    import pyarena
    x = np.array([np.nan, np.inf, -np.inf, 0, -0.0, 1, -3, 65504, -65504, 20, -20, 1e-7, 11.5,
                  -0.5], np.float16)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, x.shape)])
    b = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()
    want = ort.InferenceSession(b, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = pyarena.InferenceSession(b).run(None, {"x": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    ulp = np.spacing(np.abs(want[fin]).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got[fin].astype(np.float64) - want[fin]) <= ulp), (got, want)


#: (dtype kind, op) pyarena refuses by name where onnxruntime runs it
REFUSED = {("i", "ReduceLogSumExp")}


def _nn_cases(dt, rng):
    N = helper.make_node
    kind = np.dtype(dt).kind

    def f(*s):
        if kind == "f":
            return (rng.standard_normal(s) * 2).astype(dt)
        return rng.integers(-5 if kind == "i" else 0, 6, s).astype(dt)
    x = f(1, 4, 6, 6)
    yield "Conv", [N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {"x": x}, ["y"], \
        {"w": f(3, 4, 3, 3), "b": f(3)}
    yield "ConvTranspose", [N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])], {"x": x}, \
        ["y"], {"w": f(4, 2, 2, 2)}
    yield "MaxPool", [N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                        strides=[2, 2])], {"x": x}, ["y"], {}
    yield "AveragePool", [N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])], {"x": x}, ["y"], {}
    yield "GlobalMaxPool", [N("GlobalMaxPool", ["x"], ["y"])], {"x": x}, ["y"], {}
    yield "BatchNormalization", [N("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])], \
        {"x": x}, ["y"], {"g": f(4), "b": f(4), "m": f(4), "v": np.abs(f(4)) + 1}
    yield "LayerNormalization", [N("LayerNormalization", ["x", "g", "b"], ["y"])], {"x": x}, \
        ["y"], {"g": f(6), "b": f(6)}
    yield "Softmax", [N("Softmax", ["x"], ["y"], axis=1)], {"x": x}, ["y"], {}
    yield "Gemm", [N("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5)], {"a": f(3, 5)}, \
        ["y"], {"w": f(4, 5), "c": f(4)}
    yield "Resize", [N("Resize", ["x", "", "s"], ["y"], mode="linear")], {"x": x}, ["y"], \
        {"s": np.array([1, 1, 2, 1.5], np.float32)}
    yield "Pad", [N("Pad", ["x", "p"], ["y"], mode="reflect")], {"x": x}, ["y"], \
        {"p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}
    yield "DepthToSpace", [N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], {"x": x}, \
        ["y"], {}
    yield "Einsum", [N("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")], {"a": f(3, 4)}, \
        ["y"], {"b": f(4, 2)}
    for op in ("PRelu",):
        yield op, [N(op, ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": f(4, 1, 1)}
    for op in ("LeakyRelu", "HardSwish", "HardSigmoid", "Elu", "Selu", "Mish", "Celu",
               "MeanVarianceNormalization"):
        yield op, [N(op, ["x"], ["y"])], {"x": x}, ["y"], {}
    yield "CumSum", [N("CumSum", ["x", "a"], ["y"], reverse=1, exclusive=1)], {"x": x}, ["y"], \
        {"a": np.array(3)}
    for op in ("ReduceL2", "ReduceL1", "ReduceSumSquare", "ReduceLogSumExp"):
        yield op, [N(op, ["x", "a"], ["y"])], {"x": x}, ["y"], {"a": np.array([2, 3])}
    yield "Range", [N("Range", ["a", "b", "d"], ["y"])], {}, ["y"], \
        {"a": np.array(1).astype(dt), "b": np.array(5).astype(dt), "d": np.array(2).astype(dt)}
    yield "ScatterND", [N("ScatterND", ["x", "i", "u"], ["y"], reduction="add")], {"x": x}, \
        ["y"], {"i": np.array([[0, 1], [0, 1]], np.int64), "u": f(2, 6, 6)}
    yield "Det", [N("Det", ["a"], ["y"])], {"a": f(2, 3, 3)}, ["y"], {}


@pytest.mark.parametrize("dt", [np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_the_network_ops_onnxruntime_runs_for_a_dtype_give_its_values(dt):
    """What it found when written: float16 Det (no LAPACK for it), Mish
    (e^20 overflows float16), integer ReduceL2 (a float root into an
    integer), integer linear Resize (above)."""
    rng = np.random.default_rng(3)
    kind = np.dtype(dt).kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = [r for c in _nn_cases(dt, rng) if (kind, c[0]) not in REFUSED
               for r in [_one(*c)] if r is not None]
    assert not bad, bad
