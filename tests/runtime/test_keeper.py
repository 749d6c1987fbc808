"""Kernels built once before the plan (runtime/keeper.py): their scratch
sizes are the kernels' own rules, the executor given them runs those very
kernels and gets the same results, and only a kernel whose op the plan
narrowed, or one bound already, is built again."""
import numpy as np
import pytest

from pyarena.errors import InvalidArgumentError
from pyarena.memory import Arena
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.keeper import build_kernels
from pyarena.runtime.nhwc import to_nhwc
from pyarena.runtime.kernels import set_scratch
from pyarena.runtime.kernels.registry import scratch_bytes_for
from pyarena.runtime.models import mobilenet_v2, resnet
from pyarena.runtime.slack import plan_in_slack


# (native: ResNet, whose convolutions take scratch; MobileNet's native
# kernels take none since its Softmax runs natively)
@pytest.mark.parametrize("make, native", [(lambda: resnet(18, resolution=64), True),
                                          (lambda: resnet(18, resolution=64), False)])
def test_kernels_built_once_size_run_and_match(make, native):
    ref = set_scratch(make(), None, native)
    g = make()
    g.native = native
    weights = Arena(alignment=64)
    prepared = build_kernels(g, weights)
    assert [op.scratch_bytes for op in g.ops] == [op.scratch_bytes for op in ref.ops]
    assert any(op.scratch_bytes for op in g.ops)
    built = list(prepared.kernels)
    p = plan_in_slack(g)
    ex = Executor(g, p, weights=weights, kernels=prepared)
    narrowed = set(p.slack["narrowed"])
    for op, k, b in zip(g.ops, ex.kernels, built):
        assert (k is b) == (op.name not in narrowed)
    feeds = random_feeds(g, seed=1)
    got = ex.run(feeds)
    want = Executor(ref, plan_in_slack(ref)).run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5,
                                   atol=1e-6 * np.abs(want[name]).max())


def test_a_narrowed_op_gets_a_new_kernel_that_fits_its_scratch():
    g = resnet(18, resolution=64)
    g.native = False
    weights = Arena(alignment=64)
    prepared = build_kernels(g, weights)
    op = max(g.ops, key=lambda o: o.scratch_bytes)
    wide = op.scratch_bytes
    op.notes.scratch_budget = max(1, wide // 4)
    op.scratch_bytes = scratch_bytes_for(g, op)
    assert op.scratch_bytes < wide
    i = g.ops.index(op)
    old = prepared.kernels[i]
    ex = Executor(g, plan_in_slack(g), weights=weights, kernels=prepared)
    assert ex.kernels[i] is not old and ex.kernels[i].scratch_bytes <= op.scratch_bytes
    ex.run(random_feeds(g, seed=2))


def test_bound_kernels_are_never_handed_to_a_second_executor():
    g = mobilenet_v2(32)
    weights = Arena(alignment=64)
    prepared = build_kernels(g, weights)
    p = plan_in_slack(g)
    first = Executor(g, p, weights=weights, kernels=prepared)
    second = Executor(g, p, weights=weights, kernels=prepared)
    assert not any(a is b for a, b in zip(first.kernels, second.kernels))
    feeds = random_feeds(g, seed=3)
    a = {k: np.array(v) for k, v in first.run(feeds).items()}
    b = second.run(feeds)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_kernels_over_another_weights_arena_are_refused():
    g = mobilenet_v2(32)
    prepared = build_kernels(g, Arena(alignment=64))
    with pytest.raises(InvalidArgumentError, match="another weights arena"):
        Executor(g, plan_in_slack(g), weights=Arena(alignment=64), kernels=prepared)


def test_the_memo_tells_apart_arrays_its_key_samples_alike():
    """The memo's key samples the bytes; arrays under one key are compared
    whole, so each keeps its own copy and is found again by content."""
    from pyarena.graph import Graph
    from pyarena.runtime.keeper import WeightKeeper, _digest
    weights, memo = Arena(alignment=64), {}
    a = np.linspace(-1, 1, 1000).astype(np.float32)
    b = a.copy()
    b[1] += 1                                   # a value the key does not sample
    assert _digest(a) == _digest(b)
    first = WeightKeeper(Graph("g"), weights, memo)
    ka, kb = first.keep(a), first.keep(b)
    assert ka is not kb and np.array_equal(ka, a) and np.array_equal(kb, b)
    used = weights.stats().used
    later = WeightKeeper(Graph("h"), weights, memo)
    assert later.keep(b.copy()) is kb and later.keep(a.copy()) is ka
    assert weights.stats().used == used         # nothing stored again


def test_a_weight_is_sampled_once_when_it_is_kept_and_once_when_found(monkeypatch):
    import pyarena.runtime.keeper as keeper_mod
    from pyarena.graph import Graph
    calls = []
    real = keeper_mod._digest
    monkeypatch.setattr(keeper_mod, "_digest", lambda a: calls.append(a.shape) or real(a))
    weights, memo = Arena(alignment=64), {}
    a = np.arange(300, dtype=np.float32).reshape(3, 100)
    kept = keeper_mod.WeightKeeper(Graph("g"), weights, memo).keep(a)
    assert calls == [(3, 100)]                  # a miss: one key, looked up and stored
    assert keeper_mod.WeightKeeper(Graph("h"), weights, memo).keep(a.copy()) is kept
    assert calls == [(3, 100)] * 2              # a hit: one key


def test_build_kernels_and_the_executor_refuse_unsupported_ops_alike():
    """Both build each op through one helper: the same error, naming every
    op they cannot run."""
    from pyarena.errors import UnsupportedOpError
    from pyarena.graph import Graph
    g = Graph("g")
    g.add_tensor("x", (1, 4), role="input")
    for name in ("a", "b", "c"):
        g.add_tensor(name, (1, 4))
    g.add_tensor("y", (1, 4), role="output")
    g.add_op("Relu", ["x"], ["a"], name="fine")
    g.add_op("NoSuchOp", ["a"], ["b"], name="odd")
    g.add_op("Relu", ["b"], ["c"], name="fine2")
    g.add_op("AlsoMissing", ["c"], ["y"], name="odder")
    with pytest.raises(UnsupportedOpError) as built:
        build_kernels(g, Arena(alignment=64))
    with pytest.raises(UnsupportedOpError) as executed:
        Executor(g)
    assert str(built.value) == str(executed.value)
    assert "'odd'" in str(built.value) and "'odder'" in str(built.value)
    assert "'fine'" not in str(built.value)


def _laid(k):
    return [None if getattr(k, a, None) is None else np.asarray(getattr(k, a)).tobytes()
            for a in ("wm", "wt", "packed", "bias")]


def _nhwc_mobilenet_v2(r):
    g = mobilenet_v2(r)
    assert to_nhwc(g, "nhwc") > 0
    return g


@pytest.mark.parametrize("make, native", [(lambda r: mobilenet_v2(r), True),
                                          (lambda r: mobilenet_v2(r), False),
                                          (_nhwc_mobilenet_v2, True),
                                          (lambda r: resnet(18, resolution=r), False)])
def test_kernels_built_from_a_prior_signature_are_those_built_anew(make, native):
    """build_kernels(prior=): a convolution takes the weights its prior (the
    same op at other shapes) laid out where their layout cannot differ --
    NumPy modes, the native depthwise and NHWC pointwise packings -- and is
    otherwise the kernel built anew: the same path, scratch, bands and
    weights, the same outputs."""
    small, large = make(32), make(64)
    small.native = native
    shapes = {n: t.shape for n, t in large.tensors.items() if t.role != "constant"}
    weights = Arena(alignment=64)
    before = build_kernels(small, weights, {})
    g = small.retargeted(shapes)
    lent = build_kernels(g, weights, {}, prior=before.kernels)
    fresh, fresh_weights = small.retargeted(shapes), Arena(alignment=64)
    anew = build_kernels(fresh, fresh_weights)
    took = nhwc_gemm = 0
    for k, a, p in zip(lent.kernels, anew.kernels, before.kernels):
        assert (type(k), k.path, k.scratch_bytes, getattr(k, "bands", None), _laid(k)) == \
            (type(a), a.path, a.scratch_bytes, getattr(a, "bands", None), _laid(a))
        # (the prior may have taken another path: the rule reads output sizes)
        shared = [getattr(k, n, None) is getattr(p, n, None) for n in ("wm", "wt", "packed")
                  if getattr(k, n, None) is not None]
        took += any(shared)
        if k.path == "native" or (k.path == "native-gemm" and not k.nhwc):
            assert not any(shared)          # packed for the new output size
        elif k.path == "native-gemm":
            assert all(shared)              # NHWC: tiled by pixels at every size
            nhwc_gemm += 1
    assert took >= 10
    assert nhwc_gemm >= (10 if make is _nhwc_mobilenet_v2 else 0)
    feeds = random_feeds(g, seed=4)
    p = plan_in_slack(g)
    got = Executor(g, p, weights=weights, kernels=lent).run(feeds)
    want = Executor(fresh, plan_in_slack(fresh), weights=fresh_weights, kernels=anew).run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5,
                                   atol=1e-6 * np.abs(want[name]).max())


def test_a_prior_of_other_weights_lends_nothing():
    a, b = mobilenet_v2(32, seed=1), mobilenet_v2(32, seed=2)
    weights = Arena(alignment=64)
    prior = build_kernels(a, weights, {}).kernels
    built = build_kernels(b, weights, {}, prior=prior).kernels
    for k, p in zip(built, prior):
        for n in ("wm", "wt", "packed", "bias"):
            if getattr(k, n, None) is not None:
                assert getattr(k, n) is not getattr(p, n, None)


def test_weights_laid_out_at_setup_are_written_into_the_arena_directly():
    """A kernel's packed weights are written straight into the weights
    arena (``Kernel.kept_empty``) and kept as they are: no temporary of
    their size during bind (NumPy's allocations, traced, stay far below
    it), with a session's memo too (equal bytes kept before are reused and
    the block given back: the tests above)."""
    import tracemalloc
    from pyarena.graph import Op, Tensor
    from pyarena.runtime.keeper import WeightKeeper
    from pyarena.runtime.kernels import make_kernel
    g = mobilenet_v2(32, seed=3)
    b = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)

    def gemm(keeper):
        ins = [Tensor("a", (3, 512)), Tensor("b", b.shape, role="constant", data=b)]
        tracemalloc.start()
        try:
            k = make_kernel(Op("fc", "Gemm", ["a", "b"], ["y"], attrs={"transB": 1}), ins,
                            [Tensor("y", (3, 256))], keep=keeper.keep)
            return k, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    arena = Arena(alignment=64)
    k, peak = gemm(WeightKeeper(g, arena))
    assert k.packed is not None and arena.owns(k.packed)
    assert peak < k.packed.nbytes // 4
    memo_arena = Arena(alignment=64)
    k2, peak2 = gemm(WeightKeeper(g, memo_arena, memo={}))
    assert memo_arena.owns(k2.packed) and peak2 < k2.packed.nbytes // 4
    np.testing.assert_array_equal(k.packed, k2.packed)


def _filled(keeper, n, start):
    a = keeper.empty(n, np.float32)
    a[:] = np.arange(start, start + n, dtype=np.float32)
    return a


def _addr(a):
    return a.__array_interface__["data"][0]


def test_a_layout_computed_in_the_arena_is_kept_where_it_lies_with_a_memo():
    from pyarena.graph import Graph
    from pyarena.runtime.keeper import WeightKeeper
    arena, memo = Arena(alignment=64), {}
    first = WeightKeeper(Graph("g"), arena, memo)
    a = _filled(first, 1000, 0)
    kept = first.keep(a)
    assert _addr(kept) == _addr(a) and arena.owns(kept)     # no copy
    used = arena.stats().used
    # an equal layout from another executor: its block given back, the first taken
    second = WeightKeeper(Graph("g"), arena, memo)
    b = _filled(second, 1000, 0)
    got = second.keep(b)
    assert _addr(got) == _addr(kept) and arena.stats().used == used
    np.testing.assert_array_equal(got, np.arange(1000, dtype=np.float32))
    # other bytes: kept as they lie, and found again by the next keeper
    c = _filled(second, 1000, 7)
    other = second.keep(c)
    assert _addr(other) == _addr(c) and arena.stats().used > used
    third = WeightKeeper(Graph("g"), arena, memo)
    assert _addr(third.keep(_filled(third, 1000, 7))) == _addr(other)
    np.testing.assert_array_equal(kept, np.arange(1000, dtype=np.float32))


def test_an_equal_layout_is_not_given_back_once_the_arena_took_more_after_it():
    from pyarena.graph import Graph
    from pyarena.runtime.keeper import WeightKeeper
    arena, memo = Arena(alignment=64), {}
    k = WeightKeeper(Graph("g"), arena, memo)
    kept = k.keep(_filled(k, 500, 3))
    b = _filled(k, 500, 3)
    later = arena.empty((64,), np.uint8)        # taken after the block
    later[:] = 9
    used = arena.stats().used
    assert _addr(k.keep(b)) == _addr(kept)
    assert arena.stats().used == used           # nothing rewound under ``later``
    assert (later == 9).all()
    k.done()
    assert not arena._marks                     # no mark left behind


def test_a_session_packs_a_linear_layer_once_straight_into_the_weights_arena(
        tmp_path, monkeypatch):
    # the packed weights are computed where they are kept (no temporary copied
    # in), and an InferenceSession's second signature takes the same copy
    from helpers.onnx_util import make_model
    from onnx import helper
    from pyarena import InferenceSession
    from pyarena.runtime import keeper
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 96)).astype(np.float32)
    path = tmp_path / "lin.onnx"
    make_model([helper.make_node("MatMul", ["x", "w"], ["y"])],
               {"x": (["N", 64], np.float32)}, {"y": (None, np.float32)}, {"w": w}, path=path)
    blocks, empty = [], keeper.WeightKeeper.empty

    def recorded(self, n, dtype):
        a = empty(self, n, dtype)
        blocks.append(_addr(a))
        return a
    monkeypatch.setattr(keeper.WeightKeeper, "empty", recorded)
    s = InferenceSession(str(path))
    sizes, packed = [], set()
    for rows in (8, 24, 8):
        x = rng.standard_normal((rows, 64)).astype(np.float32)
        (y,) = s.run(None, {"x": x})
        np.testing.assert_allclose(y, x @ w, rtol=1e-5, atol=1e-5)
        sizes.append(s.memory_info()["weights_bytes"])
        packed |= {_addr(k.packed) for k in s._built.kernels
                   if getattr(k, "packed", None) is not None}
    assert sizes[0] == sizes[1] == sizes[2]
    assert len(packed) == 1 and packed <= set(blocks)
