"""The channel shuffle after a grouped pointwise Conv (pyarena.runtime.fusion,
ShuffleNet's Reshape - Transpose - Reshape): the Conv writes the shuffled
channels itself, matching onnxruntime; left alone when the shuffle's groups
are not the Conv's or a tensor inside it is read elsewhere."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor

R = np.random.default_rng(11)


def rnd(*shape):
    return R.uniform(-1, 1, shape).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _model(path, n=2, cin=12, cout=16, hw=5, groups=4, shuffle=None, act="Relu",
           bias=True, extra_reader=False, then_dw=False, then_narrow=False):
    """x -> Conv 1x1 (groups) [-> act] -> Reshape (n, s, cout/s, h, w) ->
    Transpose (0, 2, 1, 3, 4) -> Reshape (n, cout, h, w) [-> depthwise 3x3
    [-> Conv 1x1 to 4 channels]]."""
    s = shuffle or groups
    inits = {"w": rnd(cout, cin // groups, 1, 1), "b": rnd(cout),
             "s5": np.array([n, s, cout // s, hw, hw], np.int64),
             "s4": np.array([n, cout, hw, hw], np.int64)}
    nodes = [node("Conv", ["x", "w"] + (["b"] if bias else []), ["c"], group=groups)]
    last = "c"
    if act:
        nodes.append(node(act, ["c"], ["a"]))
        last = "a"
    nodes += [node("Reshape", [last, "s5"], ["r5"]),
              node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
              node("Reshape", ["t5", "s4"], ["sh"])]
    outs = {"y": (None, np.float32)}
    if then_dw:
        inits["wd"] = rnd(cout, 1, 3, 3)
        nodes.append(node("Conv", ["sh", "wd"], ["d" if then_narrow else "y"], group=cout,
                          pads=[1, 1, 1, 1]))
        if then_narrow:
            inits["wn"] = rnd(4, cout, 1, 1)
            nodes.append(node("Conv", ["d", "wn"], ["y"]))
    else:
        nodes.append(node("Identity", ["sh"], ["y"]))
    if extra_reader:
        nodes.append(node("Neg", ["t5"], ["z"]))
        outs["z"] = (None, np.float32)
    make_model(nodes, {"x": ([n, cin, hw, hw], np.float32)}, outs, inits, path=path)
    return path


def _check(path, g, n=2, cin=12, hw=5):
    x = rnd(n, cin, hw, hw)
    got, want = Executor(g).run({"x": x}), ort_run(path, {"x": x})
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"act": None}, {"bias": False}, {"then_dw": True},
                                {"groups": 2, "cin": 6, "cout": 10}, {"n": 1, "hw": 7}],
                         ids=str)
@pytest.mark.parametrize("layout", ["auto", "nhwc"])
def test_shuffle_is_written_by_the_grouped_conv(tmp_path, kw, layout):
    path = _model(tmp_path / "s.onnx", **kw)
    g = load_model(str(path), layout=layout)
    types = [op.op_type for op in g.ops]
    assert "Reshape" not in types and (layout == "nhwc" or "Transpose" not in types), types
    conv = g.ops[0]
    assert conv.attrs["shuffle_groups"] == kw.get("groups", 4)
    assert conv.attrs.get("layout", "NCHW") == "NCHW"      # not converted to NHWC
    assert Executor(g).kernels[0].path == "1x1"
    _check(path, g, n=kw.get("n", 2), cin=kw.get("cin", 12), hw=kw.get("hw", 5))


def test_shuffle_of_other_groups_is_left_alone(tmp_path):
    path = _model(tmp_path / "s.onnx", groups=4, shuffle=2)
    g = load_model(str(path))
    assert "Transpose" in [op.op_type for op in g.ops]
    assert not g.ops[0].attrs.get("shuffle_groups")
    _check(path, g)


def test_shuffle_read_elsewhere_is_left_alone(tmp_path):
    path = _model(tmp_path / "s.onnx", extra_reader=True)
    g = load_model(str(path))
    assert "Transpose" in [op.op_type for op in g.ops]
    _check(path, g)


def test_unshuffled_output_matches_the_plain_grouped_conv(tmp_path):
    """The fused conv's output is the plain grouped conv's, channels
    permuted: channel j*G + g holds group g's channel j."""
    path = _model(tmp_path / "s.onnx", act=None)
    g = load_model(str(path))
    plain = load_model(str(path), native=False)
    x = rnd(2, 12, 5, 5)
    y = Executor(g).run({"x": x})["y"]
    c = Executor(plain).run({"x": x})
    ref = np.asarray(c["y"])
    assert not np.array_equal(y.reshape(2, 4, 4, 25)[:, 0], y.reshape(2, 4, 4, 25)[:, 1])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["auto", "nhwc"])
@pytest.mark.parametrize("groups,pad", [(4, 0), (2, 4)], ids=str)
def test_residual_after_a_grouped_pointwise_conv_is_fused(tmp_path, layout, groups, pad):
    """ShuffleNet's Sum(grouped 1x1 conv + batch norm, x) -> Relu: one Conv
    with x as input 3 (r zero-padded on the channel axis or not), matching
    onnxruntime on BLAS per group (NCHW) and on im2col's matmul (NHWC)."""
    cin, cout, hw = 16 - pad, 16, 5
    inits = {"w": rnd(cout, cin // groups, 1, 1), "b": rnd(cout)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], group=groups), node("Neg", ["x"], ["r"])]
    res = "r"
    if pad:
        inits["pads"] = np.array([0, 0, 0, 0, 0, cout - cin, 0, 0], np.int64)
        nodes.append(node("Pad", ["r", "pads"], ["rp"]))
        res = "rp"
    nodes += [node("Sum", ["c", res], ["a"]), node("Relu", ["a"], ["y"])]
    path = tmp_path / "r.onnx"
    make_model(nodes, {"x": ([2, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    g = load_model(str(path), layout=layout)
    convs = [op for op in g.ops if op.op_type == "Conv"]
    assert not {"Sum", "Relu", "Pad"} & {op.op_type for op in g.ops}
    assert convs[0].inputs[3] == "r" and convs[0].attrs["activation"] == "RELU"
    x = rnd(2, cin, hw, hw)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-5)


def test_residual_after_a_depthwise_pointwise_conv_is_not_fused(tmp_path):
    inits = {"w": rnd(8, 1, 1, 1)}
    path = tmp_path / "d.onnx"
    make_model([node("Conv", ["x", "w"], ["c"], group=8), node("Neg", ["x"], ["r"]),
                node("Add", ["c", "r"], ["y"])],
               {"x": ([1, 8, 4, 4], np.float32)}, {"y": (None, np.float32)}, inits, path=path)
    g = load_model(str(path))
    assert "Add" in [op.op_type for op in g.ops]
    x = rnd(1, 8, 4, 4)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


def test_a_shuffling_conv_runs_in_row_bands_under_a_budget(tmp_path):
    """A patched stage runs the shuffling conv band by band (its band
    buffers are whole NCHW tensors of a few rows): the outputs are
    onnxruntime's."""
    from pyarena import PlanInfeasibleError, plan
    path = _model(tmp_path / "s.onnx", n=1, cin=4, cout=64, hw=40, then_dw=True,
                  then_narrow=True)
    with pytest.raises(PlanInfeasibleError) as info:
        plan(load_model(str(path)), memory_budget=1, patch=False)
    g = load_model(str(path))
    p = plan(g, memory_budget=info.value.smallest_bytes * 3 // 4)
    assert p.budget["patch"] is not None
    x = rnd(1, 4, 40, 40)
    np.testing.assert_allclose(Executor(g, p).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-5, atol=1e-5)
