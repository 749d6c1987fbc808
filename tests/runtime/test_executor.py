"""The executor on real models in a planned arena with in-place reuse:
outputs match onnxruntime, no NumPy data allocation after the first
inference, and a forged (unsafe) in-place plan is caught by the reference."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run, randomized_light_model
from helpers.onnx_util import make_model
from pyarena import Pool, numpy_allocator
from pyarena.runtime import Executor, UnsupportedOpError, random_feeds
from pyarena.graph import Graph, GraphError
from pyarena.importers import load_model
from pyarena.runtime.kernels import set_scratch
from pyarena.planning import plan


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    return {n: randomized_light_model(n, str(d / f"{n}.onnx"))
            for n in ("squeezenet", "shufflenet", "inception_v2")}


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v2"])
def test_real_model_matches_onnxruntime_in_planned_arena(models, name):
    path = models[name]
    g = load_model(path)
    p = plan(g, inplace=True)
    # the plan really shares memory: in-place / alias buffers and reuse
    assert any(len(b.tensors) > 1 for b in p.buffers)
    assert p.arena_bytes < p.naive_bytes / 3
    ex = Executor(g, p)
    feeds = random_feeds(g, seed=1)
    out = ex.run(feeds)
    ref = ort_run(path, feeds)
    for k, v in out.items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-4, atol=1e-5)
    # every activation view lies inside the one arena block
    lo = min(a.ctypes.data for n, a in ex.arrays.items() if n not in ex.constants)
    hi = max(a.ctypes.data + a.nbytes for n, a in ex.arrays.items() if n not in ex.constants)
    assert hi - lo <= p.arena_bytes
    # a second input gives a different, still matching, answer
    feeds2 = random_feeds(g, seed=2)
    out2 = {k: v.copy() for k, v in ex.run(feeds2).items()}
    ref2 = ort_run(path, feeds2)
    for k in out2:
        np.testing.assert_allclose(out2[k], ref2[k], rtol=1e-4, atol=1e-5)
        if ref[k].max() < 0.99:      # (shufflenet's random softmax saturates)
            assert not np.allclose(out2[k], ref[k])


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v2"])
def test_no_numpy_allocation_after_first_inference(models, name):
    g = load_model(models[name])
    ex = Executor(g)
    feeds = random_feeds(g)
    ex.run(feeds)
    pool = Pool()
    with numpy_allocator(pool) as counter:
        ex.run(feeds)
        ex.run(feeds)
    assert counter.allocations == 0
    # the counter does see allocations: the unplanned mode makes one per tensor
    naive = Executor(g, allocator="numpy")
    with numpy_allocator(pool) as counter:
        naive.run(feeds)
    assert counter.allocations >= len([t for t in g.tensors.values()
                                       if t.role != "constant"])


def test_dynamic_modes_agree_with_plan(models):
    g = load_model(models["squeezenet"])
    feeds = random_feeds(g)
    planned = {k: v.copy() for k, v in Executor(g).run(feeds).items()}
    fresh = Executor(g, allocator="numpy").run(feeds)
    pool = Pool()
    pooled = Executor(g, allocator=(pool.empty, pool.free)).run(feeds)
    for k in planned:
        np.testing.assert_array_equal(planned[k], fresh[k])
        np.testing.assert_array_equal(planned[k], pooled[k])


def _residual(tmp_path):
    """x -> Conv -> h; r = Relu(h); y = Add(r, h): Relu in place on h would
    destroy the h that Add still reads."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Add", ["r", "h"], ["y"])]
    path = tmp_path / "res.onnx"
    make_model(nodes, {"x": ([1, 2, 6, 6], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.standard_normal((2, 2, 3, 3)).astype(np.float32)}, path=path)
    return str(path)


def test_forged_unsafe_inplace_plan_is_caught(tmp_path):
    path = _residual(tmp_path)
    g = load_model(path)
    feeds = random_feeds(g)
    ref = ort_run(path, feeds)["y"]
    p = plan(g, inplace=True)
    assert p.buffer_of["r"] != p.buffer_of["h"]      # the planner refuses it
    good = Executor(g, p).run(feeds)["y"]
    np.testing.assert_allclose(good, ref, rtol=1e-5, atol=1e-6)
    # forge the unsafe plan: Relu's output view IS h's memory
    views = p.bind()
    views["r"] = views["h"]
    bad = Executor(g, views=views).run(feeds)["y"]
    assert np.max(np.abs(bad - ref)) > 1e-3           # the check can fail


def test_unsupported_ops_are_reported_by_name_before_running():
    g = Graph("u")
    g.add_tensor("x", (1, 4), role="input")
    g.add_tensor("a", (1, 4))
    g.add_tensor("b", (1, 4))
    g.add_tensor("y", (1, 4), role="output")
    g.add_op("Relu", ["x"], ["a"], name="ok")
    g.add_op("Bernoulli", ["a"], ["b"], name="my_bernoulli")
    g.add_op("ImageDecoder", ["b"], ["y"], name="decoder")
    with pytest.raises(UnsupportedOpError) as e:
        set_scratch(g)
    assert "my_bernoulli" in str(e.value) and "Bernoulli" in str(e.value) and \
        "decoder" in str(e.value)
    with pytest.raises(UnsupportedOpError) as e:
        Executor(g, allocator="numpy")
    assert "my_bernoulli" in str(e.value) and "ImageDecoder" in str(e.value)


def test_undeclared_scratch_is_refused(tmp_path):
    g = load_model(_residual(tmp_path))
    conv = g.ops[0]
    conv.notes.kernel_path = "numpy"           # im2col: a padded band + columns
    set_scratch(g)
    assert conv.scratch_bytes > 0
    conv.scratch_bytes = 16
    with pytest.raises(GraphError, match="scratch"):
        Executor(g)


def test_feed_must_be_an_input(models):
    g = load_model(models["squeezenet"])
    ex = Executor(g)
    with pytest.raises(GraphError, match="not a graph input"):
        ex.run({"nope": np.zeros(3)})


@pytest.mark.slow
@pytest.mark.timeout(600)     # vgg19 takes ~25 s here
@pytest.mark.parametrize("name", ["resnet50", "densenet121", "inception_v1", "bvlc_alexnet",
                                  "zfnet512", "vgg19"])
def test_big_real_models(tmp_path, name):
    path = randomized_light_model(name, str(tmp_path / f"{name}.onnx"))
    g = load_model(path)
    ex = Executor(g)
    feeds = random_feeds(g)
    out = ex.run(feeds)
    ref = ort_run(path, feeds)
    for k, v in out.items():
        np.testing.assert_allclose(v, ref[k], rtol=1e-3, atol=1e-5)
    pool = Pool()
    with numpy_allocator(pool) as counter:
        ex.run(feeds)
    assert counter.allocations == 0


def test_dynamic_mode_peak_counts_each_buffer_while_it_is_held():
    """x -> conv 3x3 (scratch S) -> c -> conv 1x1 to 12 channels -> y, with
    an allocator that frees: at the first conv x, c and the scratch are
    held; the scratch goes after its op and x after its last reader, so at
    the second conv only c and y are.  The peak is the larger of the two."""
    g = Graph("peak")
    g.add_tensor("x", (1, 3, 8, 8), role="input")
    g.add_tensor("w", (3, 3, 3, 3), role="constant",
                 data=np.ones((3, 3, 3, 3), np.float32))
    g.add_tensor("w2", (12, 3, 1, 1), role="constant",
                 data=np.ones((12, 3, 1, 1), np.float32))
    g.add_tensor("c", (1, 3, 8, 8))
    g.add_tensor("y", (1, 12, 8, 8), role="output")
    # im2col + BLAS forced: the native few-input-channel kernel takes no scratch
    g.add_op("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]).notes.kernel_path = \
        "numpy"
    g.add_op("Conv", ["c", "w2"], ["y"], name="expand")
    set_scratch(g)
    s = g.ops[0].scratch_bytes
    assert s > 12 * 64 * 4          # the scratch decides the peak
    freed = []
    ex = Executor(g, allocator=(np.empty, freed.append))
    out = ex.run({"x": np.ones((1, 3, 8, 8), np.float32)})["y"]
    assert ex.last_peak_bytes == max(768 + 768 + s, 768 + 3072)
    assert ex.last_allocations == 4         # x, c, the scratch, y
    assert len(freed) == 3                  # all but the output
    # 3x3 ones over 3 channels of ones: 27 inside, fewer on the border
    assert out[0, 0, 4, 4] == 27 * 3 and out[0, 5, 0, 0] == 4 * 3 * 3


def test_transpose_without_perm_reverses_the_axes(tmp_path):
    from helpers.onnx_util import run_both
    run_both(tmp_path, [helper.make_node("Transpose", ["x"], ["y"])],
             {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)})


# -- threads and the per-op profile ---------------------------------------------------

def test_native_threads_give_the_same_outputs():
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(64, width=0.5, classes=10)
    feeds = random_feeds(g)
    one = {k: v.copy() for k, v in Executor(g).run(feeds).items()}
    ex2 = Executor(g, threads=2)
    assert ex2.workers is not None and ex2.workers.n == 2
    two = ex2.run(feeds)
    # row / channel blocks change who computes an element, not how
    for k in one:
        np.testing.assert_array_equal(one[k], two[k])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_native_threads_match_onnxruntime(tmp_path, threads):
    """The threaded native kernels against an independent reference
    (onnxruntime on the same ONNX file), not another executor of pyarena's
    own kernels."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import focus_csp
    from pyarena.importers import load_model
    path = focus_csp(tmp_path / "m.onnx", h=48, w=40, c=16)
    x = np.random.default_rng(3).standard_normal((1, 3, 48, 40)).astype(np.float32)
    ex = Executor(load_model(str(path)), threads=threads)
    assert threads == 1 or ex.workers.n == threads
    got = ex.run({"images": x})["y"]
    np.testing.assert_allclose(got, ort_run(path, {"images": x})["y"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -2])
def test_threads_below_one_are_refused(bad):
    from pyarena.errors import InvalidArgumentError
    from pyarena.runtime.models import mobilenet_v2
    with pytest.raises(InvalidArgumentError, match="threads"):
        Executor(mobilenet_v2(32, width=0.35, classes=4), threads=bad)


def test_profile_times_every_op_and_names_its_path():
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(64, width=0.5, classes=10)
    ex = Executor(g)
    rows = ex.profile(random_feeds(g), repeat=2)
    assert [op.name for op, _, _ in rows] == [op.name for op in g.ops]
    assert all(t >= 0 for _, _, t in rows)
    paths = {op.op_type: set() for op, _, _ in rows}
    for op, path, _ in rows:
        paths[op.op_type].add(path)
    # 3x3 depthwise runs natively, the 1x1 convs stay on BLAS
    assert {"native-dw", "1x1"} <= paths["Conv"]
    assert paths["Softmax"] == {"native"}        # the classifier's, over the last axis
    g2 = mobilenet_v2(64, width=0.5, classes=10)
    g2.native = False
    set_scratch(g2)
    assert not any(p.startswith("native") for _, p, _ in Executor(g2).profile(repeat=1))
    with pytest.raises(GraphError, match="planned"):
        Executor(g, allocator="numpy").profile(repeat=1)


@pytest.mark.parametrize("fed", [True, False])
def test_profile_feeds_every_timed_run_afresh(fed):
    """The plan hands x's memory to b once x is read (MatMuls cannot run in
    place), so a timed run that did not feed x again would multiply b:
    after profile() the output is the one of a plain run of the feeds
    given, or of random_feeds when None."""
    g = Graph("chain")
    g.add_tensor("x", (4, 64), role="input")
    g.add_tensor("a", (4, 64))
    g.add_tensor("b", (4, 64))
    g.add_tensor("y", (4, 64), role="output")
    w = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    g.add_tensor("w", (64, 64), role="constant", data=w)
    g.add_op("MatMul", ["x", "w"], ["a"], name="m1")
    g.add_op("MatMul", ["a", "w"], ["b"], name="m2")
    g.add_op("MatMul", ["b", "w"], ["y"], name="m3")
    ex = Executor(g)
    assert ex.plan.offsets["x"] == ex.plan.offsets["b"]       # the case this test needs
    x = np.random.default_rng(1).random((4, 64)).astype(np.float32) if fed else \
        random_feeds(g)["x"]
    want = np.array(ex.run({"x": x})["y"])
    ex.profile({"x": x} if fed else None, repeat=3)
    np.testing.assert_array_equal(np.asarray(ex._runner.arrays["y"]), want)
    np.testing.assert_allclose(want, x @ w @ w @ w, rtol=1e-5)


def test_a_scalar_gather_index_kept_by_a_kernel_stays_scalar(tmp_path):
    """Silero VAD reads its state with Gather(state, 0-d constant): the index
    the kernel keeps in the weights arena must stay 0-d (a 1-element index
    would add an axis to the output)."""
    nodes = [helper.make_node("Gather", ["s", "i"], ["y"], axis=0)]
    path = tmp_path / "g.onnx"
    make_model(nodes, {"s": ([2, 1, 4], np.float32)}, {"y": (None, np.float32)},
               {"i": np.array(1, np.int64)}, path=path)
    g = load_model(str(path))
    assert g.tensors["y"].shape == (1, 4)
    s = np.arange(8, dtype=np.float32).reshape(2, 1, 4)
    np.testing.assert_array_equal(Executor(g).run({"s": s})["y"], s[1])


def test_an_identity_is_skipped_only_when_its_output_is_its_input():
    """Identity of a graph input: planned in the input's memory, so the
    executor leaves it out; Identity of a constant (weights arena -> arena)
    still copies."""
    g = Graph("alias")
    g.add_tensor("x", (4,), np.float32, role="input")
    g.add_tensor("c", (4,), np.float32, role="constant", data=np.arange(4, dtype=np.float32))
    g.add_tensor("t", (4,), np.float32)
    g.add_tensor("z", (4,), np.float32, role="output")
    g.add_tensor("y", (4,), np.float32, role="output")
    g.add_op("Identity", ["c"], ["t"], name="from_const")
    g.add_op("Add", ["t", "x"], ["z"], name="add")
    g.add_op("Identity", ["x"], ["y"], name="from_input")
    ex = Executor(g, plan(g))
    assert [k.idle for k in ex.kernels] == [False, False, True]
    out = ex.run({"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(out["z"], [1, 2, 3, 4])
    np.testing.assert_array_equal(out["y"], [1, 1, 1, 1])


def test_a_weights_memo_keeps_packed_weights_once_across_shapes(tmp_path):
    from pyarena.memory import Arena
    rng = np.random.default_rng(3)
    path = tmp_path / "dw.onnx"
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("Relu", ["c"], ["y"])]
    make_model(nodes, {"x": (["N", 16, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.standard_normal((16, 1, 3, 3)).astype(np.float32)}, path=path)
    shapes = [(1, 16, 8, 8), (1, 16, 12, 20), (2, 16, 5, 9)]
    graphs = [load_model(str(path), inputs={"x": s}) for s in shapes]
    for g in graphs[1:]:        # one weight array, as InferenceSession hands them
        g.tensors[g.ops[0].inputs[1]].data = graphs[0].tensors[g.ops[0].inputs[1]].data
    used = []
    for memo in ({}, None):
        arena = Arena(alignment=64)
        for g, s in zip(graphs, shapes):
            ex = Executor(g, weights=arena, weights_memo=memo)
            x = rng.standard_normal(s).astype(np.float32)
            np.testing.assert_allclose(ex.run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                                       rtol=1e-4, atol=1e-5)
            used.append(arena.stats().used)
    with_memo, without = used[:3], used[3:]
    assert with_memo[0] == with_memo[1] == with_memo[2]
    assert without[2] > without[0]             # each executor packs its own copy


def test_a_plan_is_validated_unless_the_caller_just_made_it(monkeypatch):
    import pyarena.runtime.executor as executor_module
    from pyarena.errors import PlanValidationError
    g = Graph("two")
    g.add_tensor("x", (4, 4), role="input")
    g.add_tensor("a", (4, 4))
    g.add_tensor("y", (4, 4), role="output")
    g.add_op("Relu", ["x"], ["a"])
    g.add_op("Relu", ["a"], ["y"])
    set_scratch(g)
    p = plan(g)
    checked = []
    real = executor_module.validate_plan
    monkeypatch.setattr(executor_module, "validate_plan",
                        lambda *a, **k: checked.append(1) or real(*a, **k))
    x = np.arange(-8, 8, dtype=np.float32).reshape(4, 4)
    assert np.array_equal(Executor(g, p).run({"x": x})["y"], np.maximum(x, 0))
    assert checked == [1]
    ex = Executor(g, p, plan_checked=True)
    assert np.array_equal(ex.run({"x": x})["y"], np.maximum(x, 0))
    assert checked == [1] and ex.plan is p      # taken as it is
    p.buffers[0].tensors.clear()                # a broken plan: still refused by default
    with pytest.raises(PlanValidationError):
        Executor(g, p)


@pytest.mark.parametrize("spatial, pads, group, budget", [
    ((12, 10), [1, 1, 1, 1], 1, None), ((12, 10), [0, 0, 0, 0], 2, None),
    ((12, 10), [1, 2, 1, 0], 1, 2048), ((64,), [3, 3], 1, None), ((64,), [0, 0], 2, 1024)])
def test_an_im2col_convolution_reads_each_runs_inputs(tmp_path, spatial, pads, group, budget):
    """The views an im2col convolution copies and multiplies through are
    made once on the planned buffers: each run must still read that run's
    input (padded, in bands, grouped, 1-D), as onnxruntime does."""
    from onnx import helper
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from pyarena.importers import load_model
    rng = np.random.default_rng(3)
    k = (3,) * len(spatial)
    path = tmp_path / "conv.onnx"
    make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=pads, group=group,
                                 strides=[2] + [1] * (len(spatial) - 1))],
               {"x": ([1, 4, *spatial], np.float32)}, {"y": (None, np.float32)},
               {"w": rng.standard_normal((6, 4 // group, *k)).astype(np.float32)}, path=path)
    g = load_model(str(path), native=False, scratch_budget=budget)
    ex = Executor(g)
    assert next(kk for kk in ex.kernels if kk.op.op_type == "Conv").path == "im2col"
    for _ in range(3):
        x = rng.standard_normal((1, 4, *spatial)).astype(np.float32)
        got = np.array(ex.run({"x": x})["y"])
        np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
