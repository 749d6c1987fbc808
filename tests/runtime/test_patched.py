"""Patch-based execution: a stage run in row bands gives the outputs of the
unpatched run (up to float rounding), on random geometries, on the
built-in MobileNetV2 and on an ONNX model, within the memory budget."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyarena import PlanInfeasibleError, plan
from pyarena.graph import GraphBuilder
from pyarena.planning import Plan, validate
from pyarena.planning.patch import PATCH_OP, Stage, patch_graph, stages
from pyarena.planning.plot import patch_marks
from pyarena.runtime import Executor, random_feeds, set_scratch
from pyarena.runtime.models import mobilenet_v2


def _conv(b, x, cout, k, stride, dil, pad, group):
    """A dilated conv (the builder's has no dilation)."""
    n, c, h, w = b.shapes[x]
    ext = dil * (k - 1) + 1
    ho, wo = (h + 2 * pad - ext) // stride + 1, (w + 2 * pad - ext) // stride + 1
    op = b._name("conv")
    wt = b.rng.standard_normal((cout, c // group, k, k)) * 0.3
    ins = [x, b.const(f"{op}.weight", wt), b.const(f"{op}.bias", b.rng.uniform(-1, 1, cout))]
    y = b.tensor((n, cout, ho, wo))
    b.g.add_op("Conv", ins, [y], name=op, kernel_shape=[k, k], strides=[stride, stride],
               pads=[pad, pad, pad, pad], dilations=[dil, dil], group=group)
    return y


LAYER = st.tuples(st.sampled_from(["conv", "dw", "maxpool", "avgpool", "relu", "bn", "res",
                                   "res2", "block", "pad", "up", "cat", "slice"]),
                  st.sampled_from([1, 3, 5]), st.sampled_from([1, 2]),
                  st.sampled_from([1, 2]), st.booleans())


UP_MODES = {1: "half_pixel", 3: "asymmetric", 5: "align_corners"}


def chain(layers, h, w, c=3):
    """Input -> the layers -> a 1x1 conv: a graph whose whole body is one
    stage (Stage built by hand: no resolution condition)."""
    b = GraphBuilder("chain", seed=5)
    x = b.input((1, c, h, w))
    t = x
    for kind, k, s, d, padded in layers:
        n, c, hh, ww = b.shapes[t]
        if kind in ("conv", "dw"):
            ext = d * (k - 1) + 1
            pad = ext // 2 if padded else 0
            if hh + 2 * pad < ext or ww + 2 * pad < ext:
                continue
            t = _conv(b, t, c if kind == "dw" else c + 2, k, s, d, pad,
                      c if kind == "dw" else 1)
        elif kind in ("maxpool", "avgpool"):
            k = min(k, 3)
            pad = k // 2 if padded else 0
            if hh + 2 * pad < k or ww + 2 * pad < k:
                continue
            t = b.pool(t, k, s, "MaxPool" if kind == "maxpool" else "AveragePool", pad)
        elif kind == "pad":   # rows, columns (and a channel) of 0 (padded) or of 0.5
            top, bottom, left = k // 2 + padded, s - 1, d - 1
            pads = b._name("pads")
            b.g.add_tensor(pads, (8,), "int64", role="constant",
                           data=np.array([0, 0, top, left, 0, d - 1, bottom, 1], np.int64))
            ins = [t, pads]
            if not padded:
                ins.append(b.const(b._name("value"), np.array(0.5, np.float32)))
            y = b.tensor((n, c + d - 1, hh + top + bottom, ww + left + 1))
            b.g.add_op("Pad", ins, [y], name=b._name("pad"), mode="constant")
            t = y
        elif kind == "up":    # a decoder's Resize: x2, or by 1.5 and a row (no integer)
            if hh > 24:
                continue
            shape = (n, c, hh * 2, ww * 2) if s == 2 else (n, c, hh + hh // 2 + 1, ww + 1)
            y = b.tensor(shape)
            b.g.add_op("Resize", [t], [y], name=b._name("resize"),
                       mode="linear" if padded else "nearest",
                       coordinate_transformation_mode=UP_MODES[k])
            t = y
        elif kind == "cat":         # a CSP-like pair of branches, channels concatenated
            t = b.concat([b.relu(t), _conv(b, t, 2, k, 1, 1, k // 2, 1)])
        elif kind == "slice":       # rows from k // 2 with step s, every other column
            if hh <= k // 2:
                continue
            rows = (hh - k // 2 - 1) // s + 1
            names = [b._name("sl") for _ in range(4)]
            for nm, v in zip(names, ([k // 2, 0], [1 << 30, 1 << 30], [2, 3], [s, 2])):
                b.g.add_tensor(nm, (2,), "int64", role="constant", data=np.array(v, np.int64))
            y = b.tensor((n, c, rows, (ww + 1) // 2))
            b.g.add_op("Slice", [t] + names, [y], name=b._name("slice"))
            t = y
        elif kind == "relu":
            t = b.relu(t)
        elif kind == "bn":
            t = b.bn(t)
        elif kind == "res":         # a residual: t + conv3x3(t)
            t = b.add(t, _conv(b, t, c, 3, 1, 1, 1, 1))
        elif kind == "block":       # a basic block: t + conv(relu(conv3x3(t))), k x k
            u = b.relu(_conv(b, t, c, 3, 1, 1, 1, 1))
            t = b.add(_conv(b, u, c, k, 1, 1, k // 2, c if padded else 1), t)
        else:   # relu(t) + conv3x3(t): t's first reader needs fewer rows than its second
            t = b.add(b.relu(t), _conv(b, t, c, 3, 1, 1, 1, 1))
    t = b.conv(t, 2, 1)
    return b.finish([t])


def run(g, p=None, seed=0):
    ex = Executor(g, p if p is not None else plan(g))
    return {k: np.array(v) for k, v in ex.run(random_feeds(g, seed=seed)).items()}


def patched_copy(build, n_bands, first=0, last=None, reuse=True):
    g = build()
    ops = g.ops
    last = len(ops) - 1 if last is None else last
    st_ = Stage(g, first, last, ops[first].inputs[0], ops[last].outputs[0], 2)
    record = patch_graph(g, st_, n_bands, reuse=reuse)
    return set_scratch(g, None, getattr(g, "native", True)), record


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LAYER, min_size=1, max_size=4), st.integers(6, 19), st.integers(4, 9),
       st.integers(1, 8), st.booleans(), st.booleans())
def test_bands_give_the_unpatched_outputs(layers, h, w, n_bands, native, reuse):
    def build():
        return set_scratch(chain(layers, h, w), None, native)
    ref = run(build())
    g, record = patched_copy(build, n_bands, reuse=reuse)
    assert [op.op_type for op in g.ops] == [PATCH_OP]
    p = plan(g)
    assert validate(p) == []
    got = run(g, p)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-4)
    bands = record["bands"]
    assert bands[0][0] == 0 and all(a[1] == b[0] for a, b in zip(bands, bands[1:]))
    assert record["macs"] > 0      # the last 1x1 conv at least
    if len(bands) == 1 or reuse:      # row reuse: no row computed twice
        assert record["recompute_macs"] == 0


def test_a_stage_inside_a_graph_writes_its_output_in_place():
    """Ops before and after the stage run as usual around it."""
    def build():
        b = GraphBuilder("mid", seed=2)
        x = b.relu(b.input((1, 4, 24, 16)))
        y = b.pool(b.relu6(b.bn(b.conv(x, 8, 3, 2))), 3, 2)
        return set_scratch(b.finish([b.conv(b.relu(y), 4, 1)]))
    ref = run(build())
    g, _ = patched_copy(build, 3, first=1, last=4)
    assert [op.op_type for op in g.ops] == ["Relu", PATCH_OP, "Relu", "Conv"]
    got = run(g)
    np.testing.assert_allclose(got[g.outputs[0]], ref[g.outputs[0]], rtol=1e-5, atol=1e-5)


def test_a_tensor_read_twice_is_computed_for_both_readers_rows():
    """relu(t) + conv3x3(t): t's first reader needs the band's rows, its
    second one row more on each side; t is computed for the hull."""
    layers = [("conv", 3, 2, 1, True), ("res2", 3, 1, 1, True)]

    def build():
        return set_scratch(chain(layers, 20, 8))
    ref = run(build())
    g, _ = patched_copy(build, 3)
    got = run(g)
    np.testing.assert_allclose(got[g.outputs[0]], ref[g.outputs[0]], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("k", [3, 5])
def test_row_reuse_keeps_the_rows_a_skip_was_computed_ahead_to_the_last_band(k, native):
    """A residual block t + conv_k(relu(conv3x3(t))) in one-row bands: t is
    read by the block's first conv (k // 2 + 1 rows ahead of the Add) and
    by the Add.  In the last bands the first conv is done, t's window
    shrinks to the Add's one row, and the rows computed ahead must still be
    kept: MediaPipe's pose landmark (5x5 depthwise blocks) gave outputs
    940 off when only the window's rows were moved."""
    layers = [("conv", 3, 1, 1, True), ("block", k, 1, 1, True), ("block", k, 1, 1, False)]

    def build():
        return set_scratch(chain(layers, 12, 6, c=4), None, native)
    ref = run(build())
    g, record = patched_copy(build, 12, reuse=True)
    assert record["recompute_macs"] == 0 and len(record["bands"]) == 12
    got = run(g)
    np.testing.assert_allclose(got[g.outputs[0]], ref[g.outputs[0]], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("native", [True, False])
def test_row_reuse_keeps_shared_rows_in_less_workspace_than_recomputing_them(native):
    """Five 3x3 convs (a residual around two) in one-row bands: recomputing
    needs the receptive field of every band (11 rows at the input side);
    reuse keeps the rows two bands share (three per tensor), in less
    workspace and with no MAC twice; the outputs are the same."""
    layers = [("conv", 3, 1, 1, True), ("res", 3, 1, 1, True), ("conv", 3, 1, 1, True),
              ("dw", 3, 1, 1, True), ("conv", 3, 2, 1, True)]

    def build():
        return set_scratch(chain(layers, 40, 12, c=6), None, native)
    ref = run(build())
    sizes = {}
    for reuse in (False, True):
        g, record = patched_copy(build, 20, reuse=reuse)
        sizes[reuse] = g.ops[0].scratch_bytes
        assert (record["recompute_macs"] == 0) == reuse
        got = run(g)
        np.testing.assert_allclose(got[g.outputs[0]], ref[g.outputs[0]], rtol=1e-4,
                                   atol=1e-4)
    assert sizes[True] < sizes[False]


@pytest.mark.parametrize("reuse", [True, False])
def test_a_side_branch_of_the_stage_input_runs_before_the_stage(reuse):
    """x feeds the stage and a branch read after it (as a decoder reads an
    early map): the branch is run whole before the patched op, so the stage
    ends with one live tensor; outputs as unpatched."""
    def build():
        b = GraphBuilder("side", seed=3)
        x = b.relu(b.input((1, 4, 32, 12)))
        a = b.conv(x, 8, 3, 1)
        side = b.relu(b.conv(x, 4, 3, 1))      # read only at the end
        y = b.conv(b.relu(a), 8, 3, 2)
        return set_scratch(b.finish([b.conv(y, 4, 1), side]))
    ref = run(build())
    g = build()
    found = [st for st in stages(g) if st.hoisted]
    assert found and all(g.ops[i].inputs[0] != st.y for st in found for i in st.hoisted)
    st_ = max(found, key=lambda st: len(st.ops))
    hoisted = [g.ops[i].name for i in st_.hoisted]
    patch_graph(g, st_, 5, reuse=reuse)
    set_scratch(g)
    at = [op.op_type for op in g.ops].index(PATCH_OP)
    assert [op.name for op in g.ops[at - len(hoisted):at]] == hoisted
    got = run(g)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)


def mobilenet(native=True):
    return set_scratch(mobilenet_v2(resolution=64, classes=10), None, native)


@pytest.mark.parametrize("native", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_mobilenet_under_a_budget_runs_patched_and_gives_the_same_outputs(native, tmp_path):
    g0 = mobilenet(native)
    p0 = plan(g0)
    ref = run(g0, p0, seed=1)
    with pytest.raises(PlanInfeasibleError) as info:
        plan(mobilenet(native), memory_budget=1, patch=False)
    unpatched = info.value.smallest_bytes
    g = mobilenet(native)
    budget = unpatched * 3 // 4
    p = plan(g, memory_budget=budget)
    assert p.arena_bytes <= budget
    rec = p.budget["patch"]
    assert rec is not None and rec["grid"][0] >= 2
    assert [op.op_type for op in g.ops].count(PATCH_OP) == 1
    assert p.budget["fixed_order_bound_bytes"] == p0.lower_bound_bytes
    assert "patches" in p.summary()
    _coarser_does_not_fit(native, rec, budget)
    # the fewest bands of any candidate that fits (the finest of each stage
    # was planned first, then candidates fewest bands first up to this one)
    fits = [t["patch"]["grid"][0] for t in p.budget["tried"]
            if "patch" in t and t["arena_bytes"] <= budget]
    assert rec["grid"][0] == min(fits)
    got = run(g, p, seed=1)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)
    # the plan JSON keeps what was done and validates against the patched graph
    back = Plan.from_json(p.to_json(), g)
    assert back.budget["patch"] == rec and back.arena_bytes == p.arena_bytes
    # the plot marks the patched op
    (at, label), = patch_marks(p)
    assert g.ops[at].op_type == PATCH_OP and f"{rec['grid'][0]} x 1 patches" in label
    if native:
        pytest.importorskip("matplotlib")
        assert p.plot(str(tmp_path / "p.png")) and (tmp_path / "p.png").stat().st_size > 0


def _coarser_does_not_fit(native, rec, budget):
    """The same stage in fewer bands (the next coarser grid) is over the budget."""
    g = mobilenet(native)
    stage = [s for s in stages(g) if [op.name for op in s.ops] == rec["ops"]][0]
    n = rec["grid"][0]
    rows = stage.rows
    coarser = [k for k in range(1, n) if -(-rows // k) != -(-rows // n)]
    if not coarser:
        return
    patch_graph(g, stage, coarser[-1], reuse=rec["reuse"])
    set_scratch(g, None, native)
    p = plan(g)
    assert p.arena_bytes > budget
    if p.lower_bound_bytes <= budget:
        with pytest.raises(PlanInfeasibleError):
            plan(g, capacity=budget)


def test_a_stage_never_ends_where_two_of_its_tensors_are_read_later():
    b = GraphBuilder("two", seed=1)
    x = b.input((1, 3, 16, 16))
    a, c = b.conv(x, 4, 3, 2), b.conv(x, 4, 3, 2)
    cat = b.concat([a, c])
    g = set_scratch(b.finish([cat]))
    # from the first conv: after it x is still read, after both a and c are
    # live (no stage ends there); the second conv alone is a stage, and so
    # are both convs with their channel Concat (one tensor left)
    assert [(s.first, s.last, s.y) for s in stages(g)] == [(1, 1, c), (0, 2, cat)]


def test_an_impossible_budget_names_the_smallest_arena_and_leaves_the_graph():
    g = mobilenet()
    before = ([op.name for op in g.ops], sorted(g.tensors))
    with pytest.raises(PlanInfeasibleError) as info:
        plan(g, memory_budget=1)
    exc = info.value
    assert f"{exc.smallest_bytes:,} bytes" in str(exc) and " x 1 patches" in str(exc)
    patched = [t for t in exc.tried if "patch" in t]
    assert patched and exc.smallest_bytes == min(t["total_bytes"] for t in exc.tried)
    assert ([op.name for op in g.ops], sorted(g.tensors)) == before
    # asking for exactly that smallest arena gets it
    p = plan(mobilenet(), memory_budget=exc.smallest_bytes)
    assert p.arena_bytes <= exc.smallest_bytes


def test_stages_of_mobilenet_end_where_one_tensor_is_left():
    g = mobilenet()
    found = stages(g)
    assert found
    last_use = {}
    for i, op in enumerate(g.ops):
        for n in op.inputs:
            last_use[n] = i
    for s in found:
        assert g.tensors[s.y].shape[2] < g.tensors[s.x].shape[2]
        made = {op.outputs[0] for op in s.ops}
        assert [n for n in made if last_use.get(n, -1) > s.last] == [s.y]


def _onnx_cnn(path):
    """A small ONNX CNN: conv s2 + relu, depthwise 3x3, a residual add,
    max pool, 1x1 conv, global average pool."""
    from onnx import helper
    from helpers.onnx_util import make_model
    r = np.random.default_rng(0)
    w = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1] * 4),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], group=16, pads=[1] * 4),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"]),
        helper.make_node("Add", ["c3", "r1"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["m"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1] * 4),
        helper.make_node("Conv", ["m", "w4"], ["c4"]),
        helper.make_node("GlobalAveragePool", ["c4"], ["y"])]
    inits = {"w1": w(16, 3, 3, 3), "b1": w(16), "w2": w(16, 1, 3, 3), "w3": w(16, 16, 1, 1),
             "w4": w(8, 16, 1, 1), "lo": np.float32(0), "hi": np.float32(6)}
    make_model(nodes, {"x": ([1, 3, 64, 48], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)


def test_an_onnx_cnn_runs_patched_under_a_budget(tmp_path):
    pytest.importorskip("onnx")
    from pyarena.importers import load_model
    path = tmp_path / "cnn.onnx"
    _onnx_cnn(path)
    g0 = load_model(str(path))
    p0 = plan(g0)
    feeds = random_feeds(g0, seed=4)
    ref = np.array(Executor(g0, p0).run(feeds)["y"])
    with pytest.raises(PlanInfeasibleError) as info:
        plan(load_model(str(path)), memory_budget=1, patch=False)
    g = load_model(str(path))
    budget = info.value.smallest_bytes * 3 // 4
    p = plan(g, memory_budget=budget)
    assert p.arena_bytes <= budget and p.budget["patch"] is not None
    got = np.array(Executor(g, p).run(feeds)["y"])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_an_nhwc_tflite_model_runs_patched_under_a_budget():
    """BlazeFace (tests/data): NHWC, TFLite depthwise weights, fused
    activations and residuals; its band slices need no staging copy."""
    pytest.importorskip("tflite")
    from pathlib import Path
    from pyarena.importers import load_model
    path = str(Path(__file__).parent.parent / "data" / "face_detection_short_range.tflite")
    g0 = load_model(path)
    p0 = plan(g0)
    feeds = random_feeds(g0, seed=2)
    ref = {k: np.array(v) for k, v in Executor(g0, p0).run(feeds).items()}
    g = load_model(path)
    budget = p0.lower_bound_bytes // 2
    p = plan(g, memory_budget=budget)
    assert p.arena_bytes <= budget and p.budget["patch"] is not None
    assert g.ops[[op.name for op in g.ops].index(p.budget["patch"]["op"])].attrs["h_axis"] == 1
    got = Executor(g, p).run(feeds)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-4)


def _nhwc_pad_model():
    """TFLite-like, NHWC: a 1x1 stem, an explicit zero Pad of one row and
    column at the bottom / right (as TFLite writes before a stride-2 conv),
    the VALID stride-2 depthwise conv (TFLite weights), a 1x1 conv and a
    small head."""
    from pyarena.graph import Graph
    rng = np.random.default_rng(4)
    g = Graph("nhwc_pad")
    g.add_tensor("x", (1, 40, 32, 3), role="input")

    def const(name, arr, dtype="float32"):
        arr = np.asarray(arr, dtype)
        g.add_tensor(name, arr.shape, dtype, role="constant", data=arr)
        return name

    def conv(name, x, w, s, pad, shape, role="activation", **attrs):
        g.add_tensor(name, shape, role=role)
        g.add_op("Conv", [x, const(name + ".w", rng.standard_normal(w) * 0.3),
                          const(name + ".b", rng.uniform(-1, 1, shape[3]))], [name], name=name,
                 layout="NHWC", strides=[s, s], dilations=[1, 1], auto_pad=pad,
                 activation="RELU", **attrs)
        return name
    t = conv("stem", "x", (16, 1, 1, 3), 1, "VALID", (1, 40, 32, 16), group=1)
    g.add_tensor("padded", (1, 41, 33, 16))
    g.add_op("Pad", [t, const("pads", [[0, 0], [0, 1], [0, 1], [0, 0]], "int32")], ["padded"],
             name="pad", layout_pairs=1)
    t = conv("down", "padded", (1, 3, 3, 16), 2, "VALID", (1, 20, 16, 16), group=16,
             weight_layout="1HWC")
    t = conv("expand", t, (8, 1, 1, 16), 1, "VALID", (1, 20, 16, 8), group=1)
    conv("head", t, (4, 1, 1, 8), 2, "VALID", (1, 10, 8, 4), role="output", group=1)
    return set_scratch(g)


def test_an_nhwc_stage_with_an_explicit_pad_runs_patched_under_half_its_bound():
    g0 = _nhwc_pad_model()
    p0 = plan(g0)
    feeds = random_feeds(g0, seed=3)
    ref = {k: np.array(v) for k, v in Executor(g0, p0).run(feeds).items()}
    g = _nhwc_pad_model()
    budget = p0.lower_bound_bytes // 2
    with pytest.raises(PlanInfeasibleError):
        plan(_nhwc_pad_model(), memory_budget=budget, patch=False)
    p = plan(g, memory_budget=budget)
    assert p.arena_bytes <= budget and validate(p) == []
    rec = p.budget["patch"]
    assert "pad" in rec["ops"] and rec["grid"][0] > 1
    assert g.ops[[op.name for op in g.ops].index(rec["op"])].attrs["h_axis"] == 1
    got = Executor(g, p).run(feeds)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reuse", [True, False])
def test_bands_run_as_one_native_call_list_give_the_same_bits(reuse, monkeypatch):
    """The bands' C kernel calls and the copies between them run as lists
    (``pa_calls_run``), with no interpreter round trip per op and band: the
    outputs are bit for bit those of the same calls made one by one from
    Python; NCHW row slices (several channels) are strided copies in the
    lists."""
    from pyarena._native.kernels import CallList
    from pyarena.runtime.kernels.patched import PatchedStage
    layers = [("conv", 3, 1, 1, True), ("dw", 3, 2, 1, True), ("maxpool", 3, 1, 1, True),
              ("block", 3, 1, 1, True), ("relu", 1, 1, 1, True)]

    def build():
        return set_scratch(chain(layers, 24, 10, c=4), None, True)
    outs, lists = {}, {}
    for batch in (True, False):
        monkeypatch.setattr(PatchedStage, "batch_native", batch)
        g, _ = patched_copy(build, 6, reuse=reuse)
        ex = Executor(g, plan(g))
        outs[batch] = {k: np.array(v) for k, v in ex.run(random_feeds(g, seed=1)).items()}
        stage = next(k for k in ex.kernels if isinstance(k, PatchedStage))
        lists[batch] = [s for s in stage._all if isinstance(s, CallList)]
    for k in outs[True]:
        np.testing.assert_array_equal(outs[True][k], outs[False][k])
    assert not lists[False]
    kinds = [k for s in lists[True] for k in s.kinds]
    assert {"conv2d", "maxpool", "act", "copy"} <= set(kinds)


@pytest.mark.parametrize("reuse", [True, False])
@pytest.mark.parametrize("n_bands", [3, 16])
@pytest.mark.parametrize("start", ["Slice", "Transpose"])
def test_a_focus_layer_and_a_csp_block_run_in_bands(tmp_path, reuse, n_bands, start):
    """YOLOv5's Focus (step-2 Slices of the image, concatenated) and a CSP
    block (two branches concatenated on the channels) are stage ops: a
    Slice is a 1-row window of stride ``step`` from row ``start``, a
    channel Concat is row-local.  A stage from the first Slice -- or from
    the NHWC pass's Transpose of the NCHW image before it: the stage
    input's H is its axis 2, the others' axis 1 -- to the block's last
    conv, in bands, gives the unpatched outputs."""
    pytest.importorskip("onnx")
    from helpers.onnx_util import focus_csp
    from pyarena.importers import load_model
    path = str(focus_csp(tmp_path / "focus.onnx"))
    g0 = load_model(path, layout="nhwc")
    ref = run(g0)
    g = load_model(path, layout="nhwc")
    types = [op.op_type for op in g.ops]
    first = types.index(start)
    found = [st for st in stages(g) if st.first == first and st.y == g.ops[-2].outputs[0]]
    assert found, [(st.first, st.last) for st in stages(g)]
    st_ = found[0]
    assert (st_.x, st_.x_axis) == (("images", 2) if start == "Transpose" else
                                   (g.ops[0].outputs[0], 1))
    assert {"Slice", "Concat", "Conv"} <= {op.op_type for op in st_.ops}
    record = patch_graph(g, st_, n_bands, reuse=reuse)
    set_scratch(g)
    assert [op.op_type for op in g.ops].count(PATCH_OP) == 1
    got = run(g)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)
    assert len(record["bands"]) == min(n_bands, st_.rows)


@pytest.mark.parametrize("n_bands", [1, 3, 12])
def test_a_feature_pyramid_join_runs_in_bands_with_its_lateral_map_whole(n_bands):
    """A neck: a lateral map made early and a deep map upsampled to its size
    are concatenated, then convolved.  A stage from the Resize reads the
    lateral map whole as a second input (``Stage.extra``); in bands (band
    edges recomputed: no row reuse with a second input) it gives the
    unpatched outputs, and it is found around the join."""
    def build():
        b = GraphBuilder("neck", seed=4)
        x = b.input((1, 3, 24, 20))
        lat = b.relu(b.conv(x, 6, 3, 1, bias=True))          # the lateral map
        deep = b.relu(b.conv(b.pool(lat, 2, 2, pad=0), 8, 3, 1, bias=True))
        up = b.tensor((1, 8, 24, 20))
        b.g.add_op("Resize", [deep], [up], name="up", mode="nearest",
                   coordinate_transformation_mode="asymmetric")
        y = b.conv(b.relu(b.conv(b.concat([up, lat]), 6, 3, 1, bias=True)), 4, 1)
        return set_scratch(b.finish([y]))
    g0 = build()
    ref = run(g0)
    g = build()
    at = [op.op_type for op in g.ops].index("Concat")
    found = [st for st in stages(g, around=at)
             if st.extra and g.ops[st.first].op_type == "Resize"]
    assert found
    st_ = max(found, key=lambda st: st.last)
    lat = next(n for n in g.ops[at].inputs if n not in [o for op in st_.ops for o in op.outputs])
    assert st_.extra == (lat,)
    record = patch_graph(g, st_, n_bands, reuse=True)
    assert record["reuse"] is False
    op = next(op for op in g.ops if op.op_type == PATCH_OP)
    assert op.inputs[:2] == [st_.x, lat]
    set_scratch(g)
    p = plan(g)
    assert validate(p) == []
    got = run(g, p)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LAYER, min_size=1, max_size=4), st.integers(6, 19), st.integers(4, 9),
       st.integers(1, 19), st.booleans())
def test_the_band_plan_walks_its_bands_again_and_its_facts_hold_for_every_band(
        layers, h, w, n_bands, reuse):
    """The band plan holds no band's dicts: walking its needs again gives
    the planner's list each time, and what it gathered in one walk (the
    rows kept, the held buffers' layout, the first band's pieces, the
    in-place writes) is what the whole list gives."""
    from pyarena.runtime.kernels.patched_bands import BandPlan
    from pyarena.planning.patch import stage_needs
    from pyarena.runtime.kernels.registry import KERNELS

    g, _ = patched_copy(lambda: set_scratch(chain(layers, h, w)), n_bands, reuse=reuse)
    op = g.ops[0]
    bp = BandPlan(op.attrs, op.inputs[0], op.outputs[0], [g.tensors[n] for n in op.inputs],
                  lambda why: pytest.fail(why))
    ref = stage_needs(bp.ops, bp.plain, bp.y_name, bp.bands, bp.h, bp.geos, bp.reuse)
    assert not isinstance(bp.needs, list)
    assert list(bp.needs) == ref and list(bp.needs) == ref and len(bp.needs) == len(ref)
    assert len(bp.moves) == len(ref)
    assert bp.cap == {n: max(nd[n][1] - nd[n][0] for nd, _ in ref if n in nd)
                      for n in bp.held}
    chunk = {}
    if bp.reuse and len(bp.bands) > 1:
        for _, per_op in ref[len(ref) - len(bp.bands) + 1:]:
            for i, v in per_op.items():
                if v is not None:
                    chunk[i] = max(chunk.get(i, 1), v[2][1] - v[2][0])
    assert bp.chunk == chunk
    last, root = {}, {}             # the in-place writes, asked of the whole list
    for i, o in enumerate(bp.ops):
        for n in o.inputs:
            last[n] = i
    for i, o in enumerate(bp.ops):
        kind = getattr(KERNELS.get(o.op_type), "inplace", "none")
        if kind not in ("unary", "binary") or any(per_op[i] is None for _, per_op in ref):
            continue
        out = o.outputs[0]
        for j, n in enumerate(o.inputs[:1 if kind == "unary" else 2]):
            if n in bp.whole or n == bp.y_name or n not in bp.shapes or last.get(n) != i or \
                    out == bp.y_name or bp.shapes[n] != bp.shapes[out] or {n, out} & bp.held:
                continue
            if all(per_op[i][0].get(j) == nd.get(n) for nd, per_op in ref):
                root[out] = root.get(n, n)
                break
    assert bp.root == root
