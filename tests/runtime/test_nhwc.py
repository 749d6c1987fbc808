"""The NHWC pass (pyarena.runtime.nhwc): small NCHW ONNX models whose
convolution regions run in NHWC; the converted graph matches onnxruntime
and the unconverted run, keeps its inputs and outputs as they are, and is
left alone where nothing converts or the rule declines."""
import os
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena import InferenceSession
from pyarena.errors import InvalidArgumentError
from pyarena.graph import conv_weight_shape
from pyarena.importers import load_model
from pyarena.planning import plan
from pyarena.runtime import Executor

R = np.random.default_rng(11)


def rnd(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _run(g, feeds):
    return {k: np.array(v) for k, v in Executor(g, plan(g)).run(feeds).items()}


def _check(path, feeds, outputs, rule="auto"):
    """The graph imported with ``rule`` and with the pass off, both run,
    compared with each other and with onnxruntime; returns the graphs."""
    g = load_model(str(path), layout=rule)
    kept = load_model(str(path), layout="keep")
    assert kept.relaid is None
    ours, plain, ref = _run(g, feeds), _run(kept, feeds), ort_run(path, feeds)
    for o in outputs:
        assert ours[o].shape == ref[o].shape == plain[o].shape
        # float32 sums in another order differ by a few ulps of the
        # largest values summed: an output near 0 among outputs of some
        # hundreds is off by more than 1e-5 on some machines' BLAS
        atol = max(1e-5, 1e-6 * float(np.abs(ref[o]).max(initial=0.0)))
        np.testing.assert_allclose(ours[o], plain[o], rtol=1e-4, atol=atol, err_msg=o)
        np.testing.assert_allclose(ours[o], ref[o], rtol=1e-4, atol=atol, err_msg=o)
    assert g.inputs == kept.inputs and g.outputs == kept.outputs
    for n in g.inputs + g.outputs:
        assert g.tensors[n].shape == kept.tensors[n].shape
    return g, kept


def _inverted_residual(n=1, c=8, h=10, w=9):
    """MobileNetV2's block: 1x1 expand + Clip, depthwise 3x3 + Clip, 1x1
    project, residual Add with the block input, then pool and classify."""
    e = 6 * c
    nodes = [node("Conv", ["x", "w1", "b1"], ["e"]),
             node("Clip", ["e", "lo", "hi"], ["e6"]),
             node("Conv", ["e6", "wd", "bd"], ["d"], group=e, pads=[1, 1, 1, 1]),
             node("Clip", ["d", "lo", "hi"], ["d6"]),
             node("Conv", ["d6", "w2", "b2"], ["p"]),
             node("Add", ["p", "x"], ["r"]),
             node("GlobalAveragePool", ["r"], ["gp"]),
             node("Flatten", ["gp"], ["f"]),
             node("Gemm", ["f", "wf"], ["y"], transB=1)]
    inits = {"w1": rnd(e, c, 1, 1), "b1": rnd(e), "wd": rnd(e, 1, 3, 3), "bd": rnd(e),
             "w2": rnd(c, e, 1, 1), "b2": rnd(c), "wf": rnd(5, c),
             "lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    return nodes, inits, {"x": ([n, c, h, w], np.float32)}


@pytest.mark.parametrize("batch", [1, 3])
def test_inverted_residual_runs_nhwc_and_matches(tmp_path, batch):
    nodes, inits, inputs = _inverted_residual(n=batch)
    path = tmp_path / "block.onnx"
    make_model(nodes, inputs, {"y": (None, np.float32)}, inits, path=path)
    x = rnd(batch, 8, 10, 9, lo=-3, hi=3)
    g, kept = _check(path, {"x": x}, ["y"])
    convs = [op for op in g.ops if op.op_type == "Conv"]
    assert len(convs) == 3 and all(op.attrs.get("layout") == "NHWC" for op in convs)
    dw = [op for op in convs if op.attrs.get("weight_layout") == "1HWC"]
    # the constants stay OIHW (no re-laid out copy); the kernels read them
    # as 1HWC / OHWI
    assert len(dw) == 1 and g.tensors[dw[0].inputs[1]].shape == (48, 1, 3, 3)
    assert all(op.notes.weights_oihw for op in convs)
    assert conv_weight_shape(dw[0], g.tensors[dw[0].inputs[1]].shape) == (1, 3, 3, 48)
    assert conv_weight_shape(convs[0], g.tensors[convs[0].inputs[1]].shape) == (48, 1, 1, 8)
    assert g.relaid["regions"] == 1 and g.relaid["transposes"] == 2
    # the input goes in once, transposed; the pool's output comes back
    ts = [op for op in g.ops if op.op_type == "Transpose"]
    assert [op.inputs[0] for op in ts][0] == "x"
    assert ts[1].outputs == ["gp"] and ts[1].attrs["perm"] == [0, 3, 1, 2]
    assert g.tensors["gp"].shape == kept.tensors["gp"].shape == (batch, 8, 1, 1)
    assert "NHWC" in plan(g).summary()
    assert "NHWC" not in plan(kept).summary()


TAILS = {
    # Concat on the channel axis (1, and the same as -3): axis 3 in NHWC
    "concat": ([node("Concat", ["a", "b"], ["y"], axis=1)], {}),
    "concat-negative-axis": ([node("Concat", ["a", "b"], ["y"], axis=-3)], {}),
    "concat-height": ([node("Concat", ["a", "b"], ["y"], axis=2)], {}),
    # broadcast constants (C, 1, 1) and (1, C, 1, 1), a scalar, a (W,) row
    "mul-add-consts": ([node("Mul", ["a", "s"], ["m"]), node("Add", ["m", "t"], ["u"]),
                        node("Sub", ["u", "k"], ["v"]), node("Add", ["v", "row"], ["y"])],
                       {"s": rnd(8, 1, 1), "t": rnd(1, 8, 1, 1),
                        "k": np.array(0.5, np.float32), "row": rnd(7)}),
    "two-activations": ([node("Add", ["a", "b"], ["s"]), node("Relu", ["s"], ["y"])], {}),
    "sum-of-three": ([node("Sum", ["a", "b", "a"], ["y"])], {}),
    "pad-maxpool": ([node("Pad", ["a", "pads"], ["p"], mode="reflect"),
                     node("MaxPool", ["p"], ["y"], kernel_shape=[3, 3], strides=[2, 2])],
                    {"pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)}),
    "avgpool-sigmoid": ([node("AveragePool", ["a"], ["q"], kernel_shape=[2, 2],
                              pads=[1, 0, 0, 1], count_include_pad=0),
                         node("Sigmoid", ["q"], ["y"])], {}),
    "leaky-globalmax": ([node("LeakyRelu", ["b"], ["l"], alpha=0.2),
                         node("GlobalMaxPool", ["l"], ["y"])], {}),
}


@pytest.mark.parametrize("tail", list(TAILS))
def test_ops_after_the_convolutions_convert(tmp_path, tail):
    # two branches off one input (a depthwise conv and a 1x1 conv), then
    # the tail; "a" is also a graph output, read as NCHW
    extra, more = TAILS[tail]
    nodes = [node("Conv", ["x", "wd"], ["a"], group=8, pads=[1, 1, 1, 1]),
             node("Conv", ["x", "w1", "b1"], ["b"])] + extra
    inits = dict({"wd": rnd(8, 1, 3, 3), "w1": rnd(8, 8, 1, 1), "b1": rnd(8)}, **more)
    path = tmp_path / f"{tail}.onnx"
    make_model(nodes, {"x": ([2, 8, 6, 7], np.float32)},
               {"y": (None, np.float32), "a": (None, np.float32)}, inits, path=path)
    g, kept = _check(path, {"x": rnd(2, 8, 6, 7)}, ["y", "a"], rule="nhwc")
    assert g.relaid is not None
    converted = [op for op in g.ops if op.op_type != "Transpose"]
    assert all(op.attrs.get("layout") == "NHWC" for op in converted
               if op.op_type in ("Conv", "MaxPool", "AveragePool", "GlobalMaxPool"))
    # "a" stays the NCHW graph output, written by a Transpose back
    prod = {o: op for op in g.ops for o in op.outputs}
    assert prod["a"].op_type == "Transpose" and prod["y"].op_type == "Transpose"
    if tail.startswith("concat"):
        cat = next(op for op in g.ops if op.op_type == "Concat")
        assert cat.attrs["axis"] == (1 if tail == "concat-height" else 3)


def test_nothing_converts_without_a_convolution(tmp_path):
    nodes = [node("Relu", ["x"], ["r"]), node("MaxPool", ["r"], ["m"], kernel_shape=[2, 2]),
             node("Flatten", ["m"], ["f"]), node("Gemm", ["f", "w"], ["y"], transB=1)]
    path = tmp_path / "noconv.onnx"
    make_model(nodes, {"x": ([1, 3, 4, 4], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(2, 27)}, path=path)
    g, kept = _check(path, {"x": rnd(1, 3, 4, 4)}, ["y"], rule="nhwc")
    assert g.relaid is None
    assert [op.op_type for op in g.ops] == [op.op_type for op in kept.ops]
    assert all(g.tensors[n].shape == kept.tensors[n].shape for n in g.tensors)


def _split_by_reshapes(tmp_path):
    """1x1 convs each between two Reshapes: every region would copy its
    input and output through Transposes."""
    nodes, inits = [], {"shape": np.array([1, 8, 6, 6], np.int64)}
    src = "x"
    for i in range(3):
        inits[f"w{i}"] = rnd(8, 8, 1, 1)
        nodes += [node("Conv", [src, f"w{i}"], [f"c{i}"]),
                  node("Reshape", [f"c{i}", "shape"], [f"r{i}"])]
        src = f"r{i}"
    nodes.append(node("Relu", [src], ["y"]))
    path = tmp_path / "split.onnx"
    make_model(nodes, {"x": ([1, 8, 6, 6], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    return path


def test_auto_declines_regions_that_would_mostly_transpose(tmp_path):
    path = _split_by_reshapes(tmp_path)
    feeds = {"x": rnd(1, 8, 6, 6)}
    g, _ = _check(path, feeds, ["y"], rule="auto")
    assert g.relaid is None
    forced, _ = _check(path, feeds, ["y"], rule="nhwc")
    assert forced.relaid["regions"] == 3 and forced.relaid["transposes"] == 6


def test_auto_declines_a_region_of_full_convolutions_only(tmp_path):
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])]
    path = tmp_path / "full.onnx"
    make_model(nodes, {"x": ([1, 4, 5, 5], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(6, 4, 3, 3)}, path=path)
    feeds = {"x": rnd(1, 4, 5, 5)}
    assert _check(path, feeds, ["y"])[0].relaid is None
    assert _check(path, feeds, ["y"], rule="nhwc")[0].relaid["ops"] == 1   # Conv + Relu fused


def test_layout_rule_is_checked(tmp_path):
    nodes, inits, inputs = _inverted_residual()
    path = tmp_path / "block.onnx"
    make_model(nodes, inputs, {"y": (None, np.float32)}, inits, path=path)
    with pytest.raises(InvalidArgumentError, match="layout"):
        load_model(str(path), layout="NHWC")
    # native=False keeps the graph as imported, whatever the rule
    assert load_model(str(path), native=False, layout="nhwc").relaid is None


def test_session_retargets_a_converted_graph(tmp_path):
    nodes, inits, _ = _inverted_residual()
    path = tmp_path / "block.onnx"
    make_model(nodes, {"x": (["n", 8, "h", "w"], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    s = InferenceSession(str(path))
    off = InferenceSession(str(path), layout="keep")
    made, real = [], InferenceSession._retargeted       # the second shape: retargeted

    def retargeted(self, shapes):
        got = real(self, shapes)
        if self is s:
            made.append(got)
        return got
    with mock.patch.object(InferenceSession, "_retargeted", retargeted):
        for shape in [(1, 8, 10, 9), (2, 8, 7, 12), (1, 8, 10, 9)]:
            x = rnd(*shape)
            ref = ort_run(path, {"x": x})["y"]
            got, = s.run(None, {"x": x})
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(got, off.run(None, {"x": x})[0], rtol=1e-4,
                                       atol=1e-5)
    assert len(made) == 2 and made[0][0] is None and made[1][0] is not None
    g = s._plans[(("x", (2, 8, 7, 12), None),)].graph
    assert g is made[1][0]
    assert g.relaid is not None and g.tensors["e6"].shape == (2, 7, 12, 48)


# -- random conv chains -----------------------------------------------------------------

_LAYERS = ("dw", "1x1", "3x3", "group", "relu", "clip", "bias", "scale", "maxpool",
           "avgpool", "pad", "concat", "add")


def _layer(kind, i, src, c, prev):
    """(nodes, inits, channels) of one random layer reading ``src`` (c
    channels); ``prev``: an earlier tensor of the same shape, or None.
    Convolution weights are scaled by 1 / sqrt(fan-in), so values stay
    near 1 along a chain: unscaled, three 3x3 layers summed values in the
    hundreds before a final Clip, and float32's rounding of those (summed
    in another order by the two layouts) exceeded the tolerance."""
    o, w = f"t{i}", f"w{i}"
    if kind == "dw":
        return [node("Conv", [src, w], [o], group=c, pads=[1, 1, 1, 1])], \
            {w: rnd(c, 1, 3, 3) / np.float32(3.0)}, c
    if kind in ("1x1", "3x3", "group"):
        g = 2 if kind == "group" and c % 2 == 0 else 1
        k = 1 if kind == "1x1" else 3
        co = c + 2 if g == 1 else c
        return [node("Conv", [src, w, f"b{i}"], [o], group=g, pads=[k // 2] * 4)], \
            {w: rnd(co, c // g, k, k) / np.float32(np.sqrt(c // g * k * k)), f"b{i}": rnd(co)}, co
    if kind in ("relu", "clip"):
        return ([node("Relu", [src], [o])] if kind == "relu" else
                [node("Clip", [src, "lo", "hi"], [o])]), {}, c
    if kind in ("bias", "scale"):
        return [node("Add" if kind == "bias" else "Mul", [src, w], [o])], \
            {w: rnd(c, 1, 1)}, c
    if kind in ("maxpool", "avgpool"):
        op = "MaxPool" if kind == "maxpool" else "AveragePool"
        return [node(op, [src], [o], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], {}, c
    if kind == "pad":
        return [node("Pad", [src, w], [o])], \
            {w: np.array([0, 0, 0, 0, 0, 0, 0, 0], np.int64)}, c
    if prev is None:
        return [node("Relu", [src], [o])], {}, c
    if kind == "concat":
        return [node("Concat", [src, prev[0]], [o], axis=1)], {}, c + prev[1]
    return ([node("Add", [src, prev[0]], [o])], {}, c) if prev[1] == c else \
        ([node("Relu", [src], [o])], {}, c)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(_LAYERS), min_size=1, max_size=7),
       batch=st.integers(1, 2), c=st.sampled_from([2, 3, 4]), seed=st.integers(0, 99))
def test_random_conv_chains_match_unconverted(tmp_path, kinds, batch, c, seed):
    global R
    R = np.random.default_rng(seed)
    nodes, inits = [node("Conv", ["x", "w0"], ["t0"], group=c, pads=[1, 1, 1, 1])], \
        {"w0": rnd(c, 1, 3, 3), "lo": np.array(-0.5, np.float32),
         "hi": np.array(0.5, np.float32)}
    src, prev = "t0", None
    for i, kind in enumerate(kinds, 1):
        more, ini, c2 = _layer(kind, i, src, c, prev)
        nodes += more
        inits.update(ini)
        if c2 == c:
            prev = (src, c)
        src, c = more[-1].output[0], c2
    nodes.append(node("Identity", [src], ["y"]))
    path = tmp_path / "chain.onnx"
    make_model(nodes, {"x": ([batch, inits["w0"].shape[0], 5, 6], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    x = rnd(batch, inits["w0"].shape[0], 5, 6)
    g, _ = _check(path, {"x": x}, ["y"], rule="nhwc")
    assert g.relaid is not None


def test_auto_without_depthwise_declines_large_weights(tmp_path, monkeypatch):
    # 1x1 convs only: converted while the conv weights are within
    # MAX_WEIGHTS (the NHWC kernels keep a second copy of them), not above
    # -- where the BLAS is as wide as the tiles
    from pyarena.runtime import nhwc
    monkeypatch.setattr(nhwc, "_WIDER", [False])
    nodes = [node("Conv", ["x", "w1"], ["a"]), node("Relu", ["a"], ["r"]),
             node("Conv", ["r", "w2"], ["b"]), node("GlobalAveragePool", ["b"], ["y"])]
    path = tmp_path / "pw.onnx"
    make_model(nodes, {"x": ([1, 4, 8, 8], np.float32)}, {"y": (None, np.float32)},
               {"w1": rnd(32, 4, 1, 1), "w2": rnd(32, 32, 1, 1)}, path=path)
    feeds = {"x": rnd(1, 4, 8, 8)}
    assert _check(path, feeds, ["y"])[0].relaid["ops"] == 3
    monkeypatch.setattr(nhwc, "MAX_WEIGHTS", 32 * 36 * 4 - 1)      # one byte short
    assert _check(path, feeds, ["y"])[0].relaid is None
    assert _check(path, feeds, ["y"], rule="nhwc")[0].relaid["ops"] == 3

def _plain_convs(tmp_path, name, k, c=32, hw=8):
    """x -> Conv(k x k, c -> c) -> Relu -> Conv(k x k) -> GlobalAveragePool:
    no depthwise convolution; returns (path, feeds)."""
    nodes = [node("Conv", ["x", "w1"], ["a"], pads=[k // 2] * 4), node("Relu", ["a"], ["r"]),
             node("Conv", ["r", "w2"], ["b"], pads=[k // 2] * 4),
             node("GlobalAveragePool", ["b"], ["y"])]
    path = tmp_path / name
    make_model(nodes, {"x": ([1, c, hw, hw], np.float32)}, {"y": (None, np.float32)},
               {"w1": rnd(c, c, k, k), "w2": rnd(c, c, k, k)}, path=path)
    return path, {"x": rnd(1, c, hw, hw)}


def test_auto_where_the_tiles_are_wider_than_the_blas_weighs_work(tmp_path, monkeypatch):
    """Where the tiles are AVX-512 and the BLAS's SGEMM is not, "auto"
    converts a region without depthwise convolutions -- 3x3 ones, large
    weights -- when its multiply-adds are at least DENSITY per byte its
    boundary Transposes move; the outputs as unconverted and as
    onnxruntime either way."""
    from pyarena.runtime import nhwc
    monkeypatch.setattr(nhwc, "_WIDER", [True])
    assert os.environ["PYARENA_NHWC_WIDE"] == "0"       # (the suite's own rule)
    path, feeds = _plain_convs(tmp_path, "c3.onnx", 3)
    # work: 2 convs x 32*8*8 outputs x 32*9 = 1,179,648; moved: the input's
    # 8 KiB; the ops: two Conv (the Relu fused) and the pool
    assert _check(path, feeds, ["y"])[0].relaid["ops"] == 3
    monkeypatch.setattr(nhwc, "MAX_WEIGHTS", 1)         # not the narrow rule's cap
    assert _check(path, feeds, ["y"])[0].relaid["ops"] == 3
    monkeypatch.setattr(nhwc, "DENSITY", 1_179_648 // 8192 + 1)   # one short
    assert _check(path, feeds, ["y"])[0].relaid is None
    monkeypatch.setattr(nhwc, "DENSITY", 1_179_648 // 8192)
    assert _check(path, feeds, ["y"])[0].relaid["ops"] == 3
    # the narrow rule declines the same region: no 1x1 convolution
    monkeypatch.setattr(nhwc, "_WIDER", [False])
    assert _check(path, feeds, ["y"])[0].relaid is None


def test_the_environment_decides_the_rule(monkeypatch):
    from pyarena.runtime import nhwc
    for value, want in (("1", True), ("0", False)):
        monkeypatch.setattr(nhwc, "_WIDER", [])
        monkeypatch.setenv("PYARENA_NHWC_WIDE", value)
        assert nhwc._tiles_wider() is want
        monkeypatch.setenv("PYARENA_NHWC_WIDE", "1" if value == "0" else "0")
        assert nhwc._tiles_wider() is want                 # asked once


def test_tiles_wider_than_blas_follows_the_core_and_the_tiles(monkeypatch):
    from pyarena._native import lib
    from pyarena.runtime import blas
    core = blas.blas_core()
    assert core is None or (isinstance(core, str) and core)
    monkeypatch.setattr(blas, "blas_core", lambda: "Haswell")
    assert blas.tiles_wider_than_blas() == bool(lib.pa_kernels_isa() & lib.PA_ISA_AVX512)
    monkeypatch.setattr(blas, "cpu_vendor", lambda: "GenuineIntel")
    for wide in ("SkylakeX", "COOPERLAKE", "SapphireRapids"):
        monkeypatch.setattr(blas, "blas_core", lambda w=wide: w)
        assert blas.tiles_wider_than_blas() is False
    # on an AMD processor the tiles beat even the 512-bit SGEMM (measured)
    monkeypatch.setattr(blas, "cpu_vendor", lambda: "AuthenticAMD")
    assert blas.tiles_wider_than_blas() == bool(lib.pa_kernels_isa() & lib.PA_ISA_AVX512)
    monkeypatch.setattr(blas, "blas_core", lambda: None)
    assert blas.tiles_wider_than_blas() is False


def test_cpu_vendor_reads_proc_cpuinfo(monkeypatch, tmp_path):
    import builtins
    from pyarena.runtime import blas
    v = blas.cpu_vendor()
    assert v is None or (isinstance(v, str) and v)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: X\n")
    real = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: real(
        info if p == "/proc/cpuinfo" else p, *a, **k))
    assert blas.cpu_vendor() == "AuthenticAMD"
    info.write_text("processor\t: 0\n")
    assert blas.cpu_vendor() is None


def test_a_focus_layer_slices_in_nhwc_after_one_transpose(tmp_path):
    """YOLOv5's Focus: four step-2 Slices of the NCHW image.  The Slices
    convert (their axes remapped), so the image is transposed once on its
    way in, not each slice; outputs as unconverted and as onnxruntime."""
    from helpers.onnx_util import focus_csp
    path = focus_csp(tmp_path / "focus.onnx")
    g, kept = _check(path, {"images": rnd(1, 3, 32, 24)}, ["y"], rule="nhwc")
    ts = [op for op in g.ops if op.op_type == "Transpose"]
    # in once (the image), out once (the graph output)
    assert [op.inputs for op in ts] == [["images"], ["y.nhwc"]] and g.ops[0] is ts[0]
    slices = [op for op in g.ops if op.op_type == "Slice"]
    assert len(slices) == 4 and all(op.inputs[0] == ts[0].outputs[0] for op in slices)
    for op in slices:       # H, W of NCHW are axes 1, 2 of NHWC
        assert list(np.asarray(g.tensors[op.inputs[3]].data)) == [1, 2]
        assert g.tensors[op.outputs[0]].shape == (1, 16, 12, 3)


@pytest.mark.parametrize("by", ["scales", "sizes"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_a_resize_between_convolutions_runs_nhwc(tmp_path, by, mode):
    """An FPN's upsampling: Conv -> Resize (constant scales, or sizes) ->
    Conv.  The Resize converts (its four values permuted), so no Transpose
    pair surrounds it; outputs as unconverted and as onnxruntime."""
    scales = np.array([1, 1, 2, 2], np.float32)
    sizes = np.array([1, 6, 12, 10], np.int64)
    ins = ["c1", "", "scales"] if by == "scales" else ["c1", "", "", "sizes"]
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Resize", ins, ["up"], mode=mode),
             node("Conv", ["up", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    inits = {"w1": rnd(6, 4, 3, 3), "b1": rnd(6), "w2": rnd(5, 6, 3, 3), "b2": rnd(5)}
    inits.update({"scales": scales} if by == "scales" else {"sizes": sizes})
    path = tmp_path / "up.onnx"
    make_model(nodes, {"x": ([1, 4, 6, 5], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)
    g, kept = _check(path, {"x": rnd(1, 4, 6, 5)}, ["y"], rule="nhwc")
    resize = next(op for op in g.ops if op.op_type == "Resize")
    assert g.tensors[resize.outputs[0]].shape == (1, 12, 10, 6)
    assert [op.op_type for op in g.ops].count("Transpose") == 2     # in and out only


def _c2f(path, opset=17, axis=1, sizes=(4, 4), form="input"):
    """A YOLOv8 C2f block: a 1x1 conv, Split of its channels, a 3x3
    bottleneck on the second half, Concat of all three, a 1x1 conv."""
    c = sum(sizes)
    split_ins, attrs, inits = ["h"], {"axis": axis}, {
        "w0": rnd(c, 6, 1, 1), "w1": rnd(sizes[1], sizes[1], 3, 3), "w2": rnd(5, c + sizes[1], 1, 1)}
    if form == "input":
        inits["sizes"] = np.array(sizes, np.int64)
        split_ins.append("sizes")
    elif form == "attr":
        attrs["split"] = list(sizes)
    elif form == "num_outputs":
        attrs["num_outputs"] = 2
    nodes = [node("Conv", ["x", "w0"], ["h0"]), node("Sigmoid", ["h0"], ["s0"]),
             node("Mul", ["h0", "s0"], ["h"]),
             node("Split", split_ins, ["p", "q"], **attrs),
             node("Conv", ["q", "w1"], ["r0"], pads=[1, 1, 1, 1]), node("Relu", ["r0"], ["r"]),
             node("Concat", ["p", "q", "r"], ["cat"], axis=1),
             node("Conv", ["cat", "w2"], ["y"])]
    make_model(nodes, {"x": ([1, 6, 9, 8], np.float32)}, {"y": (None, np.float32)}, inits,
               opset=opset, path=path)


@pytest.mark.parametrize("opset, axis, sizes, form", [
    (17, 1, (4, 4), "input"), (17, -3, (3, 5), "input"), (11, 1, (2, 6), "attr"),
    (18, 1, (4, 4), "num_outputs")])
def test_a_c2f_block_splits_its_channels_in_nhwc(tmp_path, opset, axis, sizes, form):
    """Split is convertible (its axis remapped): the block is one region,
    transposed once in and once out, and matches onnxruntime and NCHW."""
    path = tmp_path / "c2f.onnx"
    _c2f(path, opset, axis, sizes, form)
    g, _ = _check(path, {"x": rnd(1, 6, 9, 8)}, ["y"], rule="nhwc")
    assert g.relaid["regions"] == 1 and g.relaid["transposes"] == 2
    split = next(op for op in g.ops if op.op_type == "Split")
    assert split.attrs["axis"] == 3
    assert all(g.tensors[t].shape[3] == s for t, s in zip(split.outputs, sizes))


def test_a_split_along_height_stays_a_split_along_height(tmp_path):
    nodes = [node("Conv", ["x", "w"], ["h"]), node("Split", ["h", "sizes"], ["a", "b"], axis=2),
             node("Add", ["a", "b"], ["y"])]
    path = tmp_path / "hsplit.onnx"
    make_model(nodes, {"x": ([1, 3, 8, 5], np.float32)}, {"y": (None, np.float32)},
               {"w": rnd(4, 3, 1, 1), "sizes": np.array([4, 4], np.int64)}, path=path)
    g, _ = _check(path, {"x": rnd(1, 3, 8, 5)}, ["y"], rule="nhwc")
    split = next(op for op in g.ops if op.op_type == "Split")
    assert split.attrs["axis"] == 1


def test_auto_takes_a_region_whose_edges_copy_a_fifth_of_what_its_convolutions_write():
    """The bar of the byte test (MOVED_SHARE): YOLOv8n's region, whose edges
    copy 1/7.5 of its convolutions' output, measured 1.77x faster in NHWC;
    Inception-v1's (1/2.5) and ShuffleNet's (1/1.2) are not taken."""
    from pyarena.runtime.nhwc import _cheap_rule
    cheap = _cheap_rule(1, (4, 4))
    assert cheap((1, 4, 8, 8), (1, 24, 8, 8))        # edges 1/6 of the output
    assert cheap((1, 4, 8, 8), (1, 20, 8, 8))        # 1/5: at the bar
    assert not cheap((1, 4, 8, 8), (1, 16, 8, 8))    # 1/4
    assert cheap((1, 64, 1, 1), (1, 8, 8, 8))        # a 1x1-pixel edge is a view: free


def _max_pool_same(c, k):
    """NumPy's stride-1 k x k max pool of NCHW c padded by k // 2."""
    pad = np.pad(c, [(0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)],
                 constant_values=-np.inf)
    return np.lib.stride_tricks.sliding_window_view(pad, (k, k), axis=(2, 3)).max(axis=(4, 5))


def test_an_spp_block_pools_in_nhwc_with_the_bits_of_every_path(tmp_path):
    """YOLOv5's SPP: 5x5, 9x9 and 13x13 stride-1 max pools of one NHWC
    tensor (the native separable path), as the unconverted NCHW kernels
    and the NumPy path, give the bits of NumPy's maximum over the windows
    of the convolution's output, a NaN in the input too; onnxruntime's
    results to float tolerance (its MaxPool lets some NaNs through and not
    others: compared without)."""
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1])]
    for k in (5, 9, 13):
        nodes.append(node("MaxPool", ["c1"], [f"m{k}"], kernel_shape=[k, k],
                          pads=[k // 2] * 4, strides=[1, 1]))
    nodes += [node("Concat", ["c1", "m5", "m9", "m13"], ["cat"], axis=1),
              node("Conv", ["cat", "w2", "b2"], ["y"])]
    inits = {"w1": rnd(20, 4, 3, 3), "b1": rnd(20), "w2": rnd(6, 80, 1, 1), "b2": rnd(6)}
    outs = ["m5", "m9", "m13", "c1", "y"]
    path = tmp_path / "spp.onnx"
    make_model(nodes, {"x": ([1, 4, 13, 15], np.float32)}, {o: (None, np.float32) for o in outs},
               inits, path=path)
    x = rnd(1, 4, 13, 15)
    g, kept = _check(path, {"x": x}, outs, rule="nhwc")
    assert [op.attrs.get("layout") for op in g.ops if op.op_type == "MaxPool"] == ["NHWC"] * 3
    x[0, 1, 3, 4] = np.nan
    ours, plain = _run(g, {"x": x}), _run(kept, {"x": x})
    numpy_path = _run(load_model(str(path), layout="nhwc", native=False), {"x": x})
    for k in (5, 9, 13):
        o = f"m{k}"
        assert np.isnan(ours[o]).any()
        for run in (ours, plain, numpy_path):       # each over its own convolution's output
            np.testing.assert_array_equal(run[o], _max_pool_same(run["c1"], k), err_msg=o)


@pytest.mark.parametrize("c_out,stride", [(16, 2), (24, 1), (14, 2)])
def test_a_first_layer_over_rgb_in_nhwc_matches(tmp_path, c_out, stride):
    """A detector's first layer: 3 -> c_out channels, 3x3, SiLU (the
    few-input-channel kernel, 16 output channels a tile in NHWC) as the
    unconverted NCHW kernel and onnxruntime compute it."""
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[stride] * 2),
             node("Sigmoid", ["c1"], ["s1"]), node("Mul", ["c1", "s1"], ["a1"]),
             node("Conv", ["a1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    inits = {"w1": rnd(c_out, 3, 3, 3), "b1": rnd(c_out), "w2": rnd(8, c_out, 3, 3),
             "b2": rnd(8)}
    path = tmp_path / "rgb.onnx"
    make_model(nodes, {"x": ([1, 3, 34, 30], np.float32)},
               {"a1": (None, np.float32), "y": (None, np.float32)}, inits, path=path)
    g, _ = _check(path, {"x": rnd(1, 3, 34, 30, lo=0.0)}, ["a1", "y"], rule="nhwc")
    conv = next(op for op in g.ops if op.op_type == "Conv")
    assert conv.attrs.get("layout") == "NHWC" and conv.attrs.get("activation") == "SILU"


def _pool_walk(c, op, stride, pads, include_pad=0):
    """The C kernels' 3x3 pool arithmetic in NumPy, NCHW: the taps in
    window order from -inf (a NaN tap wins) or a float32 sum from +0 of
    the taps inside, times 1 / count; pads (top, left, bottom, right)."""
    t, lft, b, r = pads
    h, w = c.shape[2:]
    ho, wo = (h + t + b - 3) // stride + 1, (w + lft + r - 3) // stride + 1
    fill = -np.inf if op == "MaxPool" else 0.0
    pad = np.pad(c, [(0, 0), (0, 0), (t, b), (lft, r)], constant_values=fill)
    inside = np.pad(np.ones((h, w), np.float32), [(t, b), (lft, r)])
    acc = np.full(c.shape[:2] + (ho, wo), fill, np.float32)
    cnt = np.zeros((ho, wo), np.int64)
    for i in range(3):
        for j in range(3):
            tap = pad[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
            if op == "MaxPool":
                with np.errstate(invalid="ignore"):
                    acc = np.where((tap > acc) | np.isnan(tap), tap, acc)
            else:
                with np.errstate(invalid="ignore"):     # inf + -inf
                    acc = acc + tap
                cnt += 1 if include_pad else inside[i:i + stride * ho:stride,
                                                   j:j + stride * wo:stride].astype(np.int64)
    if op == "MaxPool":
        return acc
    return acc * (np.float32(1.0) / cnt.astype(np.float32))


def test_pools_of_many_channels_give_the_bits_of_either_layout(tmp_path):
    """3x3 max and average pools over 40 channels, stride 2 and 1, padded
    (NHWC: four channel vectors at a time and an overlapping tail, the
    tap walk instead of the separable path; NCHW: the band tiles, +0-padded
    for the sums) give, in an NHWC region and unconverted, the bits of the
    kernels' arithmetic over each run's own convolution output (NaNs and
    infinities among them); onnxruntime's to float tolerance."""
    pools = [("MaxPool", "m2", 2, [0, 0, 1, 1], {}), ("MaxPool", "m1", 1, [1] * 4, {}),
             ("AveragePool", "a2", 2, [1] * 4, {}),
             ("AveragePool", "a1", 1, [1] * 4, {"count_include_pad": 1})]
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1])]
    nodes += [node(op, ["c1"], [o], kernel_shape=[3, 3], strides=[s, s],
                   pads=[p[0], p[1], p[2], p[3]], **kw) for op, o, s, p, kw in pools]
    nodes += [node("Concat", ["m1", "a1"], ["cat"], axis=1),
              node("Conv", ["cat", "w2", "b2"], ["y"])]
    inits = {"w1": rnd(40, 5, 3, 3), "b1": rnd(40), "w2": rnd(6, 80, 1, 1), "b2": rnd(6)}
    outs = ["c1", "m2", "m1", "a2", "a1", "y"]
    path = tmp_path / "pools.onnx"
    make_model(nodes, {"x": ([1, 5, 13, 15], np.float32)}, {o: (None, np.float32) for o in outs},
               inits, path=path)
    x = rnd(1, 5, 13, 15)
    g, kept = _check(path, {"x": x}, outs, rule="nhwc")
    assert {op.attrs.get("layout") for op in g.ops if "Pool" in op.op_type} == {"NHWC"}
    x[0, 1, 3, 4], x[0, 2, 9, 9] = np.nan, np.inf
    for graph in (g, kept):
        got = _run(graph, {"x": x})
        assert np.isnan(got["c1"]).any() and np.isinf(got["c1"]).any()
        for op, o, s, p, kw in pools:
            ref = _pool_walk(got["c1"], op, s, p, kw.get("count_include_pad", 0))
            np.testing.assert_array_equal(got[o], ref, err_msg=o)
