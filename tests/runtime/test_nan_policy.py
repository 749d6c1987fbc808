"""One NaN policy per op, on every path (native C kernels NCHW and NHWC, the
NumPy path), compared with onnxruntime on inputs holding NaN and +-Inf.

What onnxruntime does (CPU provider, measured):
- Relu, Clip, Max (element-wise), AveragePool, Softmax: a NaN in, NaN out.
- Resize, nearest: a copy (NaN and +-Inf where their source is).
- Resize, linear / cubic: a weighted sum of the taps (upsample.cc), so an
  Inf weighted 0 gives NaN and an Inf beside finite values stays Inf; a
  pixel paired with itself (the clamped edge) weighs 0.5 and 0.5 in its
  NCHW kernel.  pyarena computes the same sums (a pair on one pixel is a
  copy) and its native kernel the NumPy path's bits.  Two differences are
  kept on purpose: an axis not resized is copied here, where onnxruntime's
  bilinear blends it with weights 1 and 0 (an Inf in the next row makes
  NaN); and onnxruntime's NHWC bilinear (its layout pass after a Conv)
  weighs a pixel paired with itself 1 and 0, so these cases are compared
  with its unoptimised graph.
- ArgMax / ArgMin, Hardmax, Shrink, ThresholdedRelu, ReduceLogSumExp,
  Attention, LRN: see their tests below and docs/models.md.
- MaxPool, GlobalMaxPool, ReduceMax, ReduceMin: the result depends on where the NaN
  sits in the window (a vectorised max keeps whichever operand its
  instruction keeps: [1, 2, 3, NaN] gives NaN, [NaN, 2, 3, 4] gives 4).
pyarena's policy is NaN propagation on every op and path: a window or
reduction holding a NaN gives NaN, as the element-wise ops do in both.  So
the max reductions equal onnxruntime on every window without a NaN (+-Inf
included), give NaN on every window with one, and are NaN wherever
onnxruntime is; the other ops equal onnxruntime everywhere.  One more
difference is kept on purpose: onnxruntime's MaxPool / GlobalMaxPool start
from the lowest finite float, so a window of -Inf gives -3.4e38 there; its
maximum is -Inf here (as ReduceMax gives in both).
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyarena.importers import load_model  # noqa: E402
from pyarena.planning import plan  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

PATHS = [(True, "keep"), (True, "nhwc"), (False, "keep")]
PATH_IDS = ["native-nchw", "native-nhwc", "numpy"]
C = 16

#: name -> (op, attributes, constant inputs, a max / "min" reduction (window policy))
CASES = {
    "maxpool-2x2-s2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), (), True),
    "maxpool-3x3-s1-pad": ("MaxPool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), (), True),
    "maxpool-3x2-s2-ceil": ("MaxPool", dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1),
                            (), True),
    "globalmaxpool": ("GlobalMaxPool", {}, (), True),
    "reducemax-w": ("ReduceMax", dict(keepdims=1), (("axes", np.array([3], np.int64)),), True),
    "averagepool": ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2]), (), False),
    "max": ("Max", {}, (("m", np.linspace(-1, 1, 16, dtype=np.float32)
                         .reshape(1, 16, 1, 1)),), False),
    "min": ("Min", {}, (("m", np.linspace(-1, 1, 16, dtype=np.float32)
                         .reshape(1, 16, 1, 1)),), False),
    "reducemin-w": ("ReduceMin", dict(keepdims=1), (("axes", np.array([3], np.int64)),),
                    "min"),
    # the shift over the finite values: an Inf gives +-Inf, not inf - inf
    "reducelogsumexp-w": ("ReduceLogSumExp", dict(keepdims=1), (
        ("axes", np.array([3], np.int64)),), False),
    "reducelogsumexp-c": ("ReduceLogSumExp", dict(keepdims=1), (
        ("axes", np.array([1], np.int64)),), False),
    # selects: NaN (and for ThresholdedRelu -Inf) gives 0, not NaN * 0
    "shrink": ("Shrink", dict(lambd=0.5, bias=0.25), (), False),
    "thresholdedrelu": ("ThresholdedRelu", dict(alpha=0.5), (), False),
    "relu": ("Relu", {}, (), False),
    "clip-0-6": ("Clip", {}, (("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))),
                 False),
    "clip-0-1": ("Clip", {}, (("lo", np.array(0, np.float32)), ("hi", np.array(1, np.float32))),
                 False),
    "softmax": ("Softmax", dict(axis=-1), (), False),
    "logsoftmax": ("LogSoftmax", dict(axis=-1), (), False),
    "layernorm": ("LayerNormalization", dict(axis=-1), (
        ("s", np.linspace(0.5, 2, 9, dtype=np.float32)), ("b", np.full(9, 0.1, np.float32))),
        False),
    "instancenorm": ("InstanceNormalization", {}, (
        ("s", np.linspace(0.5, 2, C, dtype=np.float32)), ("b", np.full(C, 0.1, np.float32))),
        False),
    "meanvariancenorm": ("MeanVarianceNormalization", {}, (), False),
    # nearest copies: an infinity stays one (the native blend gave NaN for
    # (inf - a) * 0 before)
    "resize-nearest-up": ("Resize", dict(mode="nearest"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 1.5], np.float32))),
        False),
    "resize-nearest-down": ("Resize", dict(mode="nearest"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 0.5, 0.6], np.float32))),
        False),
    # linear / cubic: a weighted sum, as onnxruntime's (0 * Inf is NaN, Inf
    # next to a finite value stays Inf); both axes resized, at scales whose
    # source coordinates float32 and float64 both hold exactly
    "resize-linear-up": ("Resize", dict(mode="linear"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 1.5], np.float32))),
        False),
    "resize-linear-down": ("Resize", dict(mode="linear"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 0.5, 0.5], np.float32))),
        False),
    "resize-linear-align-corners": ("Resize", dict(
        mode="linear", coordinate_transformation_mode="align_corners"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32))),
        False),
    "resize-linear-asymmetric": ("Resize", dict(
        mode="linear", coordinate_transformation_mode="asymmetric"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32))),
        False),
    # (sizes: onnxruntime copies the input when every scale is 1, roi or not)
    "resize-crop": ("Resize", dict(
        mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), (
        ("roi", np.array([0, 0, 0, 0.25, 1, 1, 0.5, 0.75], np.float32)), ("", None),
        ("sizes", np.array([1, C, 13, 17], np.int64))), False),
    "resize-crop-extrapolate": ("Resize", dict(
        mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), (
        ("roi", np.array([0, 0, 0, -0.25, 1, 1, 0.5, 1.25], np.float32)), ("", None),
        ("sizes", np.array([1, C, 13, 17], np.int64))), False),
    "resize-cubic": ("Resize", dict(mode="cubic"), (
        ("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 2, 1.5], np.float32))),
        False),
}
#: op -> (rtol, atol) where the arithmetic differs from onnxruntime's (its
#: bilinear weighs the four taps by dx * dy, here one axis after the other)
TOLERANCE = {"Resize": (1e-5, 1e-6)}
#: ops compared with onnxruntime's graph unoptimised: after a Conv its layout
#: pass picks an NHWC bilinear that weighs a pixel paired with itself (the
#: clamped edge) 1 and 0, where its NCHW kernel weighs it 0.5 and 0.5 -- an
#: Inf there is NaN in one, Inf in the other; pyarena follows the NCHW one
UNOPTIMISED = {"Resize"}


def _model(tmp_path, name, op, attrs, consts):
    """x -> a depthwise 1x1 conv of weight 1 (the identity, so the op sits in
    a region the NHWC pass converts, NaN staying in its channel) -> op."""
    inits = [numpy_helper.from_array(np.ones((C, 1, 1, 1), np.float32), "w")]
    inits += [numpy_helper.from_array(v, k) for k, v in consts if k]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], group=C, kernel_shape=[1, 1]),
             helper.make_node(op, ["c"] + [k for k, _ in consts], ["y"], **attrs)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, C, 7, 9])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(m, path)
    return path


def _ort(path, x, optimised=True):
    so = ort.SessionOptions()
    if not optimised:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def _pyarena(path, x, native, layout):
    g = load_model(path, native=native, layout=layout)
    return Executor(g, plan(g)).run({"x": x})["y"]


def _hostile(seed):
    r = np.random.default_rng(seed)
    x = r.standard_normal((1, C, 7, 9)).astype(np.float32)
    flat = x.reshape(-1)
    k = r.choice(flat.size, 160, replace=False)
    flat[k[:50]] = np.nan
    flat[k[50:100]] = np.inf
    flat[k[100:]] = -np.inf
    x[0, 3] = np.nan            # a whole channel NaN, one all +Inf, one all -Inf
    x[0, 4] = np.inf
    x[0, 5] = -np.inf
    x[0, 6, :, -1] = np.nan     # NaN only in the last column / first row:
    x[0, 7, 0, :] = np.nan      # the border taps of a window
    return x


def _same(a, b, where=None, tol=(1e-6, 1e-7)):
    if where is not None:
        a, b = a[where], b[where]
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(a)
    np.testing.assert_array_equal(np.isinf(a[ok]), np.isinf(b[ok]))
    np.testing.assert_allclose(a[ok], b[ok], rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("native,layout", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("case", list(CASES))
def test_nan_and_inf_every_path_as_onnxruntime(tmp_path, case, native, layout):
    op, attrs, consts, window = CASES[case]
    path = _model(tmp_path, case, op, attrs, consts)
    for seed in range(3):
        x = _hostile(seed)
        ref = _ort(path, x, op not in UNOPTIMISED)
        got = _pyarena(path, x, native, layout)
        assert got.shape == ref.shape
        if not window:
            _same(got, ref, tol=TOLERANCE.get(op, (1e-6, 1e-7)))
            continue
        # which outputs read a NaN: the same op in onnxruntime over the NaN mask
        if window == "min":
            nan_in = _ort(path, (~np.isnan(x)).astype(np.float32)) == 0
        else:
            nan_in = _ort(path, np.isnan(x).astype(np.float32)) > 0
        assert nan_in.any() and (~nan_in).any()
        assert np.isnan(got[nan_in]).all(), "a window holding a NaN must give NaN"
        lowest = ref == np.finfo(np.float32).min       # a window of -Inf in onnxruntime
        assert (got[lowest] == -np.inf).all()
        _same(got, ref, ~nan_in & ~lowest)
        assert not (np.isnan(ref) & ~np.isnan(got)).any()


@pytest.mark.parametrize("native,layout", PATHS[:2], ids=PATH_IDS[:2])
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][0] == "Resize"])
def test_resize_native_gives_the_numpy_paths_bits(tmp_path, case, native, layout):
    """The native blend does the NumPy path's operations in its order, so
    the two agree to the bit on every value but NaN (whose sign and payload
    IEEE leaves to the instruction), NaN in the same places."""
    op, attrs, consts, _ = CASES[case]
    path = _model(tmp_path, case, op, attrs, consts)
    for seed in range(3):
        x = _hostile(seed)
        want = _pyarena(path, x, False, "keep")
        got = _pyarena(path, x, native, layout)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


@pytest.mark.parametrize("native,layout", PATHS, ids=PATH_IDS)
def test_resize_copies_an_axis_it_does_not_resize(tmp_path, native, layout):
    """W doubled (align_corners, 3 -> 5: source columns 0, 0.5, 1, 1.5, 2),
    H kept: each row blends its own columns only, worked by hand -- an Inf
    beside a finite value stays Inf, one weighted 0 gives NaN (column 2
    reads columns 1 and 2 at 1 and 0), one paired with itself (the last
    column) is copied; onnxruntime's
    bilinear blends row 0 with row 1 at weight 0 and gives NaN in row 0."""
    attrs = dict(mode="linear", coordinate_transformation_mode="align_corners")
    consts = (("roi", np.zeros(0, np.float32)), ("scales", np.array([1, 1, 1, 5 / 3],
                                                                     np.float32)))
    g = helper.make_graph([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in consts])
    path = str(tmp_path / "w.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    inf = np.inf
    x = np.array([[[[1, 3, 5], [inf, 2, -inf]]]], np.float32)
    want = np.array([[[[1, 2, 3, 4, 5], [inf, inf, np.nan, -inf, -inf]]]], np.float32)
    got = _pyarena(path, x, native, layout)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(_ort(path, x)[0, 0, 0]).any()      # the difference kept


@pytest.mark.parametrize("native,layout", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("tail", [["Relu", "MaxPool"], ["Relu", "MaxPool", "GlobalAveragePool"],
                                  ["Relu", "GlobalMaxPool"], ["Clip", "GlobalAveragePool"]])
def test_batchnorm_bias_nan_reaches_softmax(tmp_path, tail, native, layout):
    """A NaN in one BatchNorm bias (folded into the conv on the native
    path): every class probability NaN, as onnxruntime gives -- not a
    softmax over the channels the max pool let through."""
    r = np.random.default_rng(1)
    inits = [numpy_helper.from_array(v, k) for k, v in [
        ("w", r.standard_normal((4, 3, 3, 3)).astype(np.float32)),
        ("s", np.ones(4, np.float32)), ("b", np.array([0, np.nan, 0, 0], np.float32)),
        ("m", np.zeros(4, np.float32)), ("v", np.ones(4, np.float32))]]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["t"])]
    prev = "t"
    for i, op in enumerate(tail):
        attrs = dict(kernel_shape=[2, 2], strides=[2, 2]) if op == "MaxPool" else {}
        if op == "MaxPool" and len(tail) == 2:
            attrs = dict(kernel_shape=[8, 8])
        nodes.append(helper.make_node(op, [prev], [f"t{i}"], **attrs))
        prev = f"t{i}"
    nodes += [helper.make_node("Flatten", [prev], ["f"]),
              helper.make_node("Softmax", ["f"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "bn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    x = r.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ref = _ort(path, x)
    assert np.isnan(ref).all()
    _same(_pyarena(path, x, native, layout), ref)


#: rows and the index onnxruntime's scan picks (reduction_ops.h: from
#: element 0, move on v > best, >= with select_last_index; a NaN compares
#: false): (row, argmax, argmax last, argmin, argmin last), worked by hand
ARG_ROWS = [([1, np.nan, 3, 2], 2, 2, 0, 0),
            ([np.nan, 1, 3, 2], 0, 0, 0, 0),        # NaN first: no move ever
            ([1, 2, 3, np.nan], 2, 2, 0, 0),
            ([3, np.nan, 3, 1], 0, 2, 3, 3),
            ([-np.inf, np.nan, -np.inf, 1], 3, 3, 0, 2),
            ([np.inf, np.nan, np.inf, 1], 0, 2, 3, 3),
            ([np.nan] * 4, 0, 0, 0, 0)]


def _arg_model(tmp_path, op, axis, last, shape):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=0,
                                            select_last_index=last)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    path = str(tmp_path / f"{op}{axis}{last}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_argmin_skip_nan_as_onnxruntime(tmp_path, native, op, last):
    col = {("ArgMax", 0): 1, ("ArgMax", 1): 2, ("ArgMin", 0): 3, ("ArgMin", 1): 4}[op, last]
    x = np.array([r[0] for r in ARG_ROWS], np.float32)
    want = np.array([r[col] for r in ARG_ROWS], np.int64)
    for axis, xin in ((1, x), (0, np.ascontiguousarray(x.T))):   # the axis last and not
        path = _arg_model(tmp_path, op, axis, last, xin.shape)
        g = load_model(path, native=native)
        np.testing.assert_array_equal(Executor(g, plan(g)).run({"x": xin})["y"], want)
        np.testing.assert_array_equal(_ort(path, xin), want)
    r = np.random.default_rng(last)         # small integers: ties; NaN and +-Inf
    x = r.integers(-3, 3, (5, 6, 7)).astype(np.float32)
    flat = x.reshape(-1)
    k = r.choice(flat.size, 90, replace=False)
    flat[k[:30]], flat[k[30:60]], flat[k[60:]] = np.nan, np.inf, -np.inf
    for axis in (0, 1, 2):
        path = _arg_model(tmp_path, op, axis, last, x.shape)
        g = load_model(path, native=native)
        np.testing.assert_array_equal(Executor(g, plan(g)).run({"x": x})["y"], _ort(path, x))


def _one_op(tmp_path, op, shape, opset=18, **attrs):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / f"{op}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("axis", [-1, 1])
def test_hardmax_row_holding_nan_is_all_zero(tmp_path, native, axis):
    """onnxruntime's Hardmax takes the row maximum, then puts 1 at the first
    element equal to it (hardmax.cc); here the maximum of a row holding a
    NaN is NaN (as ReduceMax gives), so the row is all 0.  onnxruntime's own
    maximum depends on where the NaN sits, so rows holding one are checked
    against this rule, the others against onnxruntime."""
    x = _hostile(2)[0, :, :6, :]                     # (16, 6, 9)
    x[:, :, 0] = np.where(np.isnan(x[:, :, 0]), 0, x[:, :, 0])    # rows without NaN too
    x[1, 2, :] = np.nan
    path = _one_op(tmp_path, "Hardmax", x.shape, axis=axis)
    g = load_model(path, native=native)
    got = Executor(g, plan(g)).run({"x": x})["y"]
    ref = _ort(path, x)
    nan_row = np.isnan(x).any(axis=axis, keepdims=True)
    assert nan_row.any() and (~nan_row).any()
    np.testing.assert_array_equal(got * ~nan_row, ref * ~nan_row)
    assert not (got * nan_row).any()


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
def test_lrn_nan_stays_in_its_windows_as_the_spec_says(tmp_path, native):
    """A NaN or Inf reaches only the windows holding it: the ONNX spec's
    sum of squares over channels [c - 1, c + 1] (size 3), in NumPy here
    (onnx.reference's LRN loops over the batch axis, not the channels);
    onnxruntime's running sum of squares carries it (inf - inf) into every
    later channel."""
    x = np.random.default_rng(4).standard_normal((1, 8, 3, 4)).astype(np.float32)
    x[0, 2, 0, 0], x[0, 1, 1, 1], x[0, 5, 2, 3] = np.nan, np.inf, -np.inf
    path = _one_op(tmp_path, "LRN", x.shape, size=3)
    g = load_model(path, native=native)
    got = Executor(g, plan(g)).run({"x": x})["y"]
    sq = np.square(x.astype(np.float64))
    win = np.stack([sq[:, max(0, c - 1):c + 2].sum(axis=1) for c in range(8)], axis=1)
    with np.errstate(invalid="ignore"):
        want = (x / (1.0 + 1e-4 / 3 * win) ** 0.75).astype(np.float32)
    assert np.isnan(want[0, 1:4, 0, 0]).all() and not np.isnan(want[0, 4:, 0, 0]).any()
    _same(got, want, tol=(1e-5, 1e-6))


def _attention(tmp_path, mask):
    ins = ["q", "k", "v"] + (["m"] if mask is not None else [])
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 8]) for n in "qkv"]
    if mask is not None:
        vi.append(helper.make_tensor_value_info("m", helper.np_dtype_to_tensor_dtype(
            mask.dtype), list(mask.shape)))
    g = helper.make_graph([helper.make_node("Attention", ins, ["y"])], "g", vi,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "att.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), path)
    return path


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
@pytest.mark.parametrize("mask", ["none", "float", "bool"])
def test_attention_nan_and_inf_as_onnxruntime(tmp_path, native, mask):
    """NaN and +-Inf in Q, K or V; a query row the mask empties gives 0, one
    whose scores are all -inf by Q and K gives NaN (0 / 0), both as
    onnxruntime.  (With is_causal, onnxruntime sometimes drops a masked
    +Inf score and sometimes adds -inf to it; pyarena adds, as the ONNX
    function body does, so that case is left out.)"""
    r = np.random.default_rng(7)
    m = None
    if mask == "float":
        m = r.standard_normal((4, 4)).astype(np.float32)
        m[1, :] = -np.inf                           # row 1 attends nothing
    elif mask == "bool":
        m = r.random((4, 4)) > 0.3
        m[1, :] = False
    path = _attention(tmp_path, m)
    g = load_model(path, native=native)
    ex = Executor(g, plan(g))
    for seed in range(9):
        r = np.random.default_rng(seed)
        feeds = {n: r.standard_normal((1, 2, 4, 8)).astype(np.float32) for n in "qkv"}
        flat = feeds["qkv"[seed % 3]].reshape(-1)
        k = r.choice(flat.size, 2, replace=False)
        flat[k] = [(np.nan, np.inf), (np.inf, -np.inf), (-np.inf, np.nan)][seed // 3]
        if seed == 0:       # query 2 of head 0: every score -inf by the data
            feeds["q"][0, 0, 2] = 0
            feeds["q"][0, 0, 2, 0] = np.inf
            feeds["k"][0, 0, :, 0] = -1
        if m is not None:
            feeds["m"] = m
        got, ref = ex.run(feeds)["y"], ort.InferenceSession(
            path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        if seed == 0:
            assert np.isnan(got[0, 0, 2]).all()
        if m is not None and seed % 3 != 2:     # (0 * a NaN or Inf of V is NaN)
            assert (got[0, :, 1] == 0).all()
        _same(got, ref, tol=(1e-5, 1e-6))
