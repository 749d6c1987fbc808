"""The fusion rewrite (pyarena.runtime.fusion): small ONNX models whose
Conv is followed by a batch norm, an affine or an activation chain; the
fused graph has fewer ops, matches onnxruntime, and is left alone where a
fused-away tensor is read elsewhere or is a graph output."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.errors import GraphError
from pyarena.importers import load_model
from pyarena.runtime import Executor, fuse

R = np.random.default_rng(7)


def rnd(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _conv(out="c"):
    return node("Conv", ["x", "w", "b"], [out], pads=[1, 1, 1, 1])


INITS = {"w": rnd(8, 8, 3, 3), "b": rnd(8)}
CHAINS = {
    "relu": ([node("Relu", ["c"], ["y"])], {}),
    "clip": ([node("Clip", ["c", "lo", "hi"], ["y"])],
             {"lo": np.array(-0.25, np.float32), "hi": np.array(0.5, np.float32)}),
    "sigmoid": ([node("Sigmoid", ["c"], ["y"])], {}),
    "hardsigmoid": ([node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4)], {}),
    "hardswish": ([node("HardSwish", ["c"], ["y"])], {}),
    "silu": ([node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["y"])], {}),
    "hardswish-as-hardsigmoid": ([node("HardSigmoid", ["c"], ["s"], alpha=1 / 6, beta=0.5),
                                  node("Mul", ["s", "c"], ["y"])], {}),
    "hardswish-decomposed": ([node("Add", ["c", "three"], ["a"]),
                              node("Clip", ["a", "zero", "six"], ["k"]),
                              node("Mul", ["c", "k"], ["m"]),
                              node("Div", ["m", "six"], ["y"])],
                             {"three": np.array(3, np.float32),
                              "zero": np.array(0, np.float32),
                              "six": np.array(6, np.float32)}),
    "batchnorm-relu": ([node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"],
                             epsilon=1e-3),
                        node("Relu", ["n"], ["y"])],
                       {"g": rnd(8), "be": rnd(8), "mu": rnd(8),
                        "var": rnd(8, lo=0.5, hi=2.0)}),
    "affine-silu": ([node("Mul", ["sc", "c"], ["m"]), node("Add", ["m", "sh"], ["a"]),
                     node("Sigmoid", ["a"], ["s"]), node("Mul", ["a", "s"], ["y"])],
                    {"sc": np.array([1.7], np.float32), "sh": rnd(1, 8, 1, 1)}),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_chain_is_fused_and_matches_onnxruntime(tmp_path, chain):
    nodes, extra = CHAINS[chain]
    path = tmp_path / f"{chain}.onnx"
    make_model([_conv()] + nodes, {"x": ([1, 8, 12, 10], np.float32)},
               {"y": (None, np.float32)}, dict(INITS, **extra), path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv"]          # one op left
    assert g.ops[0].outputs == ["y"]
    assert g.ops[0].attrs.get("activation") or "affine" in chain
    kept = load_model(str(path), native=False)               # as imported
    assert len(kept.ops) == 1 + len(nodes)
    x = rnd(1, 8, 12, 10, lo=-4, hi=4)
    ref = ort_run(path, {"x": x})["y"]
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(Executor(kept).run({"x": x})["y"], ref, rtol=1e-4,
                               atol=2e-5)


def test_nothing_is_fused_when_an_inner_tensor_is_read_elsewhere(tmp_path):
    # the conv output feeds the SiLU and a second output: the Sigmoid / Mul
    # stay, and so does the Relu whose input is a graph output
    path = tmp_path / "shared.onnx"
    make_model([_conv(), node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["y"]),
                node("Neg", ["c"], ["z"]),
                node("Conv", ["y", "w", "b"], ["c2"], pads=[1, 1, 1, 1]),
                node("Relu", ["c2"], ["r"])],
               {"x": ([1, 8, 6, 6], np.float32)},
               {"z": (None, np.float32), "c2": (None, np.float32), "r": (None, np.float32)},
               INITS, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Sigmoid", "Mul", "Neg", "Conv", "Relu"]
    assert fuse(g) == 0
    x = rnd(1, 8, 6, 6)
    out = Executor(g).run({"x": x})
    ref = ort_run(path, {"x": x})
    for k in ("z", "c2", "r"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5)


def test_only_the_first_activation_is_fused(tmp_path):
    """Conv -> Relu -> Sigmoid: the Relu goes into the conv, the Sigmoid
    stays an op of its own (a conv holds one activation)."""
    path = tmp_path / "two.onnx"
    make_model([_conv(), node("Relu", ["c"], ["r"]), node("Sigmoid", ["r"], ["y"])],
               {"x": ([1, 8, 6, 6], np.float32)}, {"y": (None, np.float32)}, INITS, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Sigmoid"]
    assert g.ops[0].attrs["activation"].upper() == "RELU"
    x = rnd(1, 8, 6, 6, lo=-4, hi=4)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("chain", ["sigmoid", "silu", "hardswish"])
def test_saturated_activations_stay_finite(tmp_path, chain):
    """Conv outputs in the hundreds: the native exp clamps (no overflow to
    garbage), so sigmoid is exactly 0 or 1 where onnxruntime's is."""
    nodes, extra = CHAINS[chain]
    path = tmp_path / f"big-{chain}.onnx"
    make_model([_conv()] + nodes, {"x": ([1, 8, 5, 5], np.float32)}, {"y": (None, np.float32)},
               dict(INITS, w=INITS["w"] * 400, **extra), path=path)
    g = load_model(str(path))
    x = rnd(1, 8, 5, 5, lo=-4, hi=4)
    ours = Executor(g).run({"x": x})["y"]
    assert np.isfinite(ours).all()
    np.testing.assert_allclose(ours, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-3)


# -- the residual Add after a pointwise conv ------------------------------------

def _residual_model(path, cin, cout, hw, pad_channels=0, act="Relu", residual_after=False,
                    add="Add"):
    """x -> Conv 1x1 (cin -> cout) -> Add(., r) [-> act]; r = a Neg of x's
    first ... channels or, with pad_channels, a zero Pad of them on the
    channel axis (r computed after the conv when residual_after)."""
    cres = cout - pad_channels
    w1 = rnd(cres, cin, 1, 1)
    nodes = [node("Conv", ["x", "w1"], ["r0"]), node("Neg", ["r0"], ["r1"])]
    conv = node("Conv", ["x", "w", "b"], ["c"])
    nodes = nodes + [conv] if not residual_after else [conv] + nodes
    r = "r1"
    inits = {"w": rnd(cout, cin, 1, 1), "b": rnd(cout), "w1": w1}
    if pad_channels:
        nodes.append(node("Pad", ["r1", "pads"], ["rp"]))
        inits["pads"] = np.array([0, 0, 0, 0, 0, pad_channels, 0, 0], np.int64)
        r = "rp"
    nodes.append(node(add, [r, "c"], ["a" if act else "y"]))
    if act:
        nodes.append(node(act, ["a"], ["y"]))
    make_model(nodes, {"x": ([2, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    return path


@pytest.mark.parametrize("path_", ["native", "numpy"])
@pytest.mark.parametrize("cin,cout,hw,pad", [(5, 9, 3, 0), (7, 20, 11, 6), (300, 13, 9, 4),
                                             (40, 33, 7, 0)], ids=str)
def test_residual_add_is_fused_into_a_pointwise_conv(tmp_path, cin, cout, hw, pad, path_):
    """Conv 1x1 -> Add(r) -> Relu (r zero-padded on the channel axis or not):
    one Conv left with r as input 3, matching onnxruntime on the native
    SGEMM (pixel tiles, strips with a long reduction) and on BLAS."""
    path = _residual_model(tmp_path / "res.onnx", cin, cout, hw, pad)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Neg", "Conv"]
    conv = g.ops[-1]
    assert conv.inputs[3] == "r1" and conv.attrs["residual_channels"] == cout - pad
    assert conv.attrs["activation"] == "RELU" and conv.outputs == ["y"]
    conv.notes.kernel_path = path_
    ex = Executor(g)
    assert ex.kernels[-1].path == ("native-gemm" if path_ == "native" else "1x1")
    x = rnd(2, cin, hw, hw)
    np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("layout", ["keep", "nhwc"])
def test_a_two_input_sum_is_a_residual_too(tmp_path, layout):
    """Caffe2's ResNets add the shortcut with Sum(c, r): fused as Add is,
    in both layouts, matching onnxruntime and the unfused graph."""
    path = _residual_model(tmp_path / "sum.onnx", 6, 10, 5, add="Sum")
    g = load_model(str(path), layout=layout)
    assert "Sum" not in [op.op_type for op in g.ops]
    conv = [op for op in g.ops if op.op_type == "Conv"][-1]
    assert conv.attrs["residual_channels"] == 10 and conv.attrs["activation"] == "RELU"
    x = rnd(2, 6, 5, 5)
    ours = Executor(g).run({"x": x})["y"]
    np.testing.assert_allclose(ours, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=2e-5)
    kept = Executor(load_model(str(path), native=False)).run({"x": x})["y"]
    np.testing.assert_allclose(ours, kept, rtol=1e-4, atol=2e-5)


def test_fusing_again_leaves_a_conv_with_its_residual_as_it_is(tmp_path):
    """Conv 1x1 -> Add(r1) -> Add(r2): the first Add is fused (input 3);
    fuse() run again on the fused graph keeps r1 and the second Add, and
    the result still matches onnxruntime."""
    cin, cout, hw = 5, 8, 4
    nodes = [node("Conv", ["x", "w1"], ["q1"]), node("Neg", ["q1"], ["r1"]),
             node("Conv", ["x", "w2"], ["q2"]), node("Neg", ["q2"], ["r2"]),
             node("Conv", ["x", "w", "b"], ["c"]),
             node("Add", ["r1", "c"], ["a"]), node("Add", ["r2", "a"], ["y"])]
    inits = {"w": rnd(cout, cin, 1, 1), "b": rnd(cout), "w1": rnd(cout, cin, 1, 1),
             "w2": rnd(cout, cin, 1, 1)}
    path = tmp_path / "two.onnx"
    make_model(nodes, {"x": ([1, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    g = load_model(str(path))
    conv = [op for op in g.ops if op.op_type == "Conv"][-1]
    assert conv.inputs[3] == "r1"
    fuse(g)
    assert conv.inputs[3] == "r1" and [op.op_type for op in g.ops].count("Add") == 1
    x = rnd(1, cin, hw, hw)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


def test_a_zero_pad_of_the_convs_own_output_is_not_its_residual(tmp_path):
    """Conv 1x1 -> c; Add(Pad(c, zeros), c): the residual would be the
    conv's own output, which does not exist before the conv runs."""
    cin, cout, hw = 5, 8, 4
    nodes = [node("Conv", ["x", "w", "b"], ["c"]), node("Pad", ["c", "pads"], ["p"]),
             node("Add", ["p", "c"], ["y"])]
    inits = {"w": rnd(cout, cin, 1, 1), "b": rnd(cout), "pads": np.zeros(8, np.int64)}
    path = tmp_path / "own.onnx"
    make_model(nodes, {"x": ([1, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    g = load_model(str(path))
    assert all(len(op.inputs) < 4 for op in g.ops if op.op_type == "Conv")
    x = rnd(1, cin, hw, hw)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


def test_a_residual_padded_by_an_opset_10_pad_matches_onnxruntime(tmp_path):
    """Opset 10's Pad takes its pads as an attribute (one input): the
    channel-padded residual is fused as with opset 11's pads input."""
    cin, cout, hw, pad = 7, 20, 5, 6
    nodes = [node("Conv", ["x", "w1"], ["r0"]), node("Neg", ["r0"], ["r1"]),
             node("Conv", ["x", "w", "b"], ["c"]),
             node("Pad", ["r1"], ["rp"], pads=[0, 0, 0, 0, 0, pad, 0, 0]),
             node("Add", ["rp", "c"], ["a"]), node("Relu", ["a"], ["y"])]
    inits = {"w": rnd(cout, cin, 1, 1), "b": rnd(cout), "w1": rnd(cout - pad, cin, 1, 1)}
    path = tmp_path / "pad10.onnx"
    make_model(nodes, {"x": ([2, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, opset=10, path=path)
    g = load_model(str(path))
    assert "Pad" not in [op.op_type for op in g.ops]
    x = rnd(2, cin, hw, hw)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("path_", ["native", "numpy"])
@pytest.mark.parametrize("shape", [(1, 9, 3, 3), (2, 9, 3, 1), (2, 10, 3, 3), (9, 3, 3),
                                   (2, 9, 3, 3, 1)], ids=str)
def test_a_residual_not_of_the_outputs_shape_is_refused_at_setup(tmp_path, shape, path_):
    """The kernels read a fused residual as a tensor of the output's shape
    (channels may be fewer): any other shape -- a residual of batch 1 under
    an output of batch 2, other pixels, more channels, another rank -- is
    refused when the kernel is built, never read past its end."""
    path = _residual_model(tmp_path / "res.onnx", 5, 9, 3)
    g = load_model(str(path))
    conv = g.ops[-1]
    g.add_tensor("bad", shape, "float32", role="constant", data=rnd(*shape))
    conv.inputs[3] = "bad"
    conv.notes.kernel_path = path_
    with pytest.raises(GraphError, match=r"residual input 'bad' of shape \[.*\] does not "
                                         r"match the output's \[2, 9, 3, 3\]"):
        Executor(g)


def test_a_residual_of_another_dtype_is_refused_at_setup(tmp_path):
    path = _residual_model(tmp_path / "res.onnx", 5, 9, 3)
    g = load_model(str(path))
    g.add_tensor("half", (2, 9, 3, 3), "float16", role="constant",
                 data=rnd(2, 9, 3, 3).astype(np.float16))
    g.ops[-1].inputs[3] = "half"
    with pytest.raises(GraphError, match="residual input 'half' is float16"):
        Executor(g)


def _squeeze_excitation(path, shift_shape=(1, 8, 1, 1), batch=1):
    """x (N, 8, 5, 5) -> GlobalAveragePool -> Conv 1x1 (no bias) -> Add(.,
    a constant ``shift_shape``) -> Relu -> Conv 1x1 -> Sigmoid -> Mul(x, .):
    PP-LCNet's squeeze-excitation, whose bias Paddle exports as a
    reshaped constant; at batch 1 the constant has the first conv's
    output shape."""
    make_model([node("GlobalAveragePool", ["x"], ["p"]), node("Conv", ["p", "w1"], ["c1"]),
                node("Add", ["c1", "shift"], ["a"]), node("Relu", ["a"], ["r"]),
                node("Conv", ["r", "w2", "b2"], ["c2"]), node("Sigmoid", ["c2"], ["s"]),
                node("Mul", ["x", "s"], ["y"])],
               {"x": ([batch, 8, 5, 5], np.float32)}, {"y": (None, np.float32)},
               {"w1": rnd(8, 8, 1, 1), "shift": rnd(*shift_shape), "w2": rnd(8, 8, 1, 1),
                "b2": rnd(8)}, path=path)
    return path


@pytest.mark.parametrize("shift_shape", [(1, 8, 1, 1), (8, 1, 1), (1,)], ids=str)
def test_a_constant_per_channel_add_after_a_conv_is_a_bias_shift(tmp_path, shift_shape):
    """An Add of a constant per-channel (or scalar) value after a Conv is
    folded into its bias -- never made its residual, though at batch 1 the
    constant has the output's shape -- and its Relu is fused after it."""
    path = _squeeze_excitation(tmp_path / "se.onnx", shift_shape)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["GlobalAveragePool", "Conv", "Conv", "Mul"]
    conv = g.ops[1]
    assert len(conv.inputs) == 3 and conv.inputs[2] and conv.attrs["activation"] == "RELU"
    assert conv.notes.weight_scales == ()       # a shift alone: the weights as they are
    x = rnd(1, 8, 5, 5)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


def test_a_constant_of_the_outputs_shape_is_never_a_residual(tmp_path):
    """A constant that is not per channel stays an Add: a residual's shape
    must follow the output's at every batch size, a constant's cannot."""
    path = tmp_path / "c.onnx"
    make_model([node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "k"], ["y"])],
               {"x": ([1, 8, 4, 4], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(8, 8, 1, 1), "k": rnd(1, 8, 4, 4)}, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Add"]
    # refused before any shape was compared
    assert not [d for d in g.shape_decisions if d.what.startswith("fusion")]


def test_a_residual_fused_by_its_shapes_is_recorded_as_a_shape_decision(tmp_path):
    """The residual test compares shapes, so fusion records it
    (``graph.shape_decisions``) with what it chose; the rule asked again of
    other shapes says whether it would still fuse (a retarget declines
    where not)."""
    path = _residual_model(tmp_path / "res.onnx", 5, 9, 3)
    g = load_model(str(path))
    (d,) = [d for d in g.shape_decisions if d.what.startswith("fusion")]
    assert d.choice is True and d.tensors == ("r1", "c", "a", "r1", "x")
    shapes = {n: g.tensors[n].shape if n in g.tensors else (2, 9, 3, 3) for n in d.tensors}
    assert d.holds(shapes)
    assert d.holds({n: (5, 9, 4, 7) for n in d.tensors})       # another batch and size
    assert not d.holds(dict(shapes, r1=(1, 9, 3, 3)))           # r would broadcast
    assert not d.holds(dict(shapes, r1=None))                   # unknown: not the same


@pytest.mark.parametrize("path_", ["native", "numpy"])
def test_residual_computed_after_the_conv_moves_the_conv_to_the_add(tmp_path, path_):
    """r written after the conv (a ResNet's stride-2 shortcut): the conv
    takes it and runs where the Add was, after r's producer."""
    path = _residual_model(tmp_path / "late.onnx", 6, 8, 5, residual_after=True)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Neg", "Conv"]
    conv = g.ops[-1]
    assert conv.inputs[0] == "x" and conv.inputs[3] == "r1" and conv.outputs == ["y"]
    assert conv.attrs["activation"] == "RELU"
    conv.notes.kernel_path = path_
    x = rnd(2, 6, 5, 5)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


def test_residual_is_not_fused_after_a_3x3_conv_or_an_activation(tmp_path):
    """The residual needs a pointwise conv, and comes before its activation."""
    path = tmp_path / "no.onnx"
    make_model([_conv(), node("Add", ["c", "x"], ["y"]),
                node("Conv", ["y", "w1"], ["c1"]), node("Relu", ["c1"], ["q"]),
                node("Add", ["q", "y"], ["z"])],
               {"x": ([1, 8, 6, 6], np.float32)}, {"z": (None, np.float32)},
               dict(INITS, w1=rnd(8, 8, 1, 1)), path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Add", "Conv", "Add"]
    x = rnd(1, 8, 6, 6)
    np.testing.assert_allclose(Executor(g).run({"x": x})["z"], ort_run(path, {"x": x})["z"],
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("chain", ["batchnorm-relu", "affine-silu"])
def test_a_memo_reuses_the_biases_folded_from_the_same_arrays(tmp_path, chain):
    nodes, extra = CHAINS[chain]
    path = tmp_path / f"{chain}.onnx"
    make_model([_conv()] + nodes, {"x": (["N", 8, "H", "W"], np.float32)},
               {"y": (None, np.float32)}, dict(INITS, **extra), path=path)
    a = load_model(str(path), inputs={"x": [1, 8, 12, 10]}, native=False)
    b = load_model(str(path), inputs={"x": [2, 8, 6, 16]}, native=False)
    c = load_model(str(path), inputs={"x": [1, 8, 5, 5]}, native=False)
    for name, t in b.tensors.items():       # b reads a's very arrays, c copies
        if t.role == "constant":
            t.data = a.tensors[name].data
    memo = {}
    for g in (a, b, c):
        fuse(g, memo=memo)
    ba, bb, bc = (g.tensors[g.ops[0].inputs[2]].data for g in (a, b, c))
    assert bb is ba and bc is not ba
    np.testing.assert_array_equal(bc, ba)
    # the weights keep their constants; the scales folded into them are
    # recorded, equal (so a session's kernels lend each other their layouts)
    wa, wb = (g.tensors[g.ops[0].inputs[1]].data for g in (a, b))
    assert wb is wa and g.ops[0].inputs[1] == "w"
    assert a.ops[0].notes.weight_scales == b.ops[0].notes.weight_scales == \
        c.ops[0].notes.weight_scales
    x = rnd(2, 8, 6, 16, lo=-4, hi=4)
    np.testing.assert_allclose(Executor(b).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


# -- a zero spatial Pad folded into the Conv after it ------------------------

def _pad_conv_model(path, pads, conv_attrs, pad_value=None, mode="constant", wshape=(8, 8, 3, 3),
                    group=1, second_reader=False):
    """x -> Pad(pads) -> Conv(conv_attrs) -> y (and the padded tensor as an
    output too when ``second_reader``)."""
    ins = ["x", "p"] + (["v"] if pad_value is not None else [])
    inits = {"p": np.array(pads, np.int64), "w": rnd(*wshape), "b": rnd(wshape[0])}
    if pad_value is not None:
        inits["v"] = np.array(pad_value, np.float32)
    nodes = [node("Pad", ins, ["xp"], mode=mode),
             node("Conv", ["xp", "w", "b"], ["y"], group=group, **conv_attrs)]
    outs = {"y": (None, np.float32)}
    if second_reader:
        outs["xp"] = (None, np.float32)
    make_model(nodes, {"x": ([1, 8, 11, 13], np.float32)}, outs, inits, path=path)
    return path


@pytest.mark.parametrize("pads, conv_attrs", [
    ([0, 0, 1, 2, 0, 0, 3, 0], {}),                                       # no conv pads
    ([0, 0, 2, 0, 0, 0, 1, 1], {"pads": [1, 0, 0, 2], "strides": [2, 2]}),  # both, stride 2
    ([0, 0, 1, 1, 0, 0, 1, 1], {"auto_pad": "VALID", "strides": [2, 1], "dilations": [1, 2]}),
    ([0, 0, 0, 3, 0, 0, 2, 0], {"kernel_shape": [3, 3], "strides": [1, 2]}),
])
def test_a_zero_spatial_pad_is_folded_into_the_conv(tmp_path, pads, conv_attrs):
    path = _pad_conv_model(tmp_path / "pad.onnx", pads, conv_attrs)
    x = rnd(1, 8, 11, 13, lo=-3, hi=3)
    ref = ort_run(path, {"x": x})["y"]
    for layout in ("auto", "keep"):
        g = load_model(str(path), layout=layout)
        assert "Pad" not in [op.op_type for op in g.ops]
        conv = next(op for op in g.ops if op.op_type == "Conv")
        assert conv.attrs["auto_pad"] == "NOTSET" and len(conv.attrs["pads"]) == 4
        np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ref, rtol=1e-4, atol=2e-5)
    kept = load_model(str(path), native=False)                # as imported: the Pad stays
    assert [op.op_type for op in kept.ops] == ["Pad", "Conv"]
    np.testing.assert_allclose(Executor(kept).run({"x": x})["y"], ref, rtol=1e-4, atol=2e-5)


def test_a_folded_depthwise_pad_matches_and_the_arena_does_not_grow(tmp_path):
    from pyarena.planning import plan
    path = _pad_conv_model(tmp_path / "dw.onnx", [0, 0, 1, 0, 0, 0, 2, 1],
                           {"strides": [2, 2]}, wshape=(8, 1, 3, 3), group=8)
    x = rnd(1, 8, 11, 13)
    g, kept = load_model(str(path)), load_model(str(path), native=False)
    assert len(g.ops) == len(kept.ops) - 1
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)
    assert plan(g).arena_bytes <= plan(kept).arena_bytes


@pytest.mark.parametrize("case", ["value", "reflect", "channels", "second-reader", "same"])
def test_a_pad_that_is_not_plain_zero_spatial_padding_stays(tmp_path, case):
    kw = {"value": dict(pad_value=0.5), "reflect": dict(mode="reflect"),
          "second-reader": dict(second_reader=True), "same": {}, "channels": {}}[case]
    pads = [0, 1, 1, 1, 0, 0, 1, 1] if case == "channels" else [0, 0, 1, 1, 0, 0, 1, 1]
    wshape = (8, 9, 3, 3) if case == "channels" else (8, 8, 3, 3)
    conv_attrs = {"auto_pad": "SAME_UPPER"} if case == "same" else {}
    path = _pad_conv_model(tmp_path / f"{case}.onnx", pads, conv_attrs, wshape=wshape, **kw)
    g = load_model(str(path))
    assert "Pad" in [op.op_type for op in g.ops]
    x = rnd(1, 8, 11, 13)
    ref = ort_run(path, {"x": x})
    out = Executor(g).run({"x": x})
    for name in ref:
        np.testing.assert_allclose(out[name], ref[name], rtol=1e-4, atol=2e-5)


def _transpose_chain(path, group, kernel):
    """ConvTranspose -> bias Add -> BatchNormalization -> Relu (PaddleOCR's
    export of a detector head's upsampling), saved at ``path``."""
    cin, cout = 6, 4
    make_model([node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], group=group),
                node("Add", ["t", "b"], ["c"]),
                node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], epsilon=1e-3),
                node("Relu", ["n"], ["y"])],
               {"x": ([2, cin, 5, 7], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(cin, cout // group, kernel, kernel), "b": rnd(1, cout, 1, 1),
                "g": rnd(cout), "be": rnd(cout), "mu": rnd(cout),
                "var": rnd(cout, lo=0.5, hi=2.0)}, path=path)


@pytest.mark.parametrize("kernel", [2, 3])       # the native path (disjoint taps), NumPy's
def test_a_conv_transposes_bias_batchnorm_and_relu_are_folded_into_it(tmp_path, kernel):
    path = tmp_path / "ct.onnx"
    _transpose_chain(path, 1, kernel)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["ConvTranspose"]
    assert g.ops[0].attrs["activation"] == "RELU" and len(g.ops[0].notes.weight_scales) == 1
    ex = Executor(g)
    assert ex.kernels[0].path == ("native" if kernel == 2 else "numpy")
    kept = load_model(str(path), native=False)
    assert len(kept.ops) == 4
    x = rnd(2, 6, 5, 7, lo=-3, hi=3)
    ref = ort_run(path, {"x": x})["y"]
    assert (ref == 0).any() and (ref > 0).any()             # the Relu clips some
    np.testing.assert_allclose(ex.run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Executor(kept).run({"x": x})["y"], ref, rtol=1e-5, atol=1e-5)


def test_a_grouped_conv_transpose_is_not_folded(tmp_path):
    path = tmp_path / "ct.onnx"
    _transpose_chain(path, 2, 2)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops][:3] == ["ConvTranspose", "Add", "BatchNormalization"]
    x = rnd(2, 6, 5, 7)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-5)
