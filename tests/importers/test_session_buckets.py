"""InferenceSession(buckets=...): one plan per bucket of input lengths.

Small transformer encoders built in code (tests/helpers/encoder_models.py:
MatMul / Softmax attention, LayerNormalization, dynamic batch and
sequence) fed random lengths: every output is compared with onnxruntime's
and, bit for bit, with an unbucketed session's; every plan a length runs
with is given to the independent validator against that length's graph."""
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.encoder_models import encoder, save
from pyarena import InferenceSession
from pyarena.errors import InvalidArgumentError
from pyarena.importers.session_buckets import BucketPlans, bucket_policy
from pyarena.planning import validate


def _ort(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _x(batch, length, hidden, seed):
    return np.random.default_rng(seed).standard_normal((batch, length, hidden)).astype(
        np.float32)


def _entry(s, feeds):
    """The (graph, plan) the session ran ``feeds`` with."""
    sig = s._keys.signature({k: np.asarray(v) for k, v in feeds.items()})
    e = s._plans[sig]
    return e.graph, e.plan


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory):
    return save(encoder(layers=2, hidden=32, heads=4, seed=3),
                tmp_path_factory.mktemp("enc") / "enc.onnx")


def test_random_lengths_match_onnxruntime_and_an_exact_session_bit_for_bit(two_layers):
    bucketed = InferenceSession(two_layers, buckets="pow2", max_shapes=64)
    exact = InferenceSession(two_layers)
    ref = _ort(two_layers)
    rng = np.random.default_rng(0)
    calls = [(int(rng.integers(1, 4)), int(rng.integers(1, 65))) for _ in range(30)]
    for i, (batch, length) in enumerate(calls):
        x = _x(batch, length, 32, i)
        (got,) = bucketed.run(None, {"x": x})
        (same,) = exact.run(None, {"x": x})
        (want,) = ref.run(None, {"x": x})
        assert got.shape == (batch, length, 32)
        np.testing.assert_array_equal(got, same)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        g, p = _entry(bucketed, {"x": x})
        assert validate(p, g) == []
        assert g.tensors["x"].shape == (batch, length, 32)      # the kernels' real shapes
    info = bucketed.memory_info()
    buckets = {(1 << (b - 1).bit_length(), 1 << (n - 1).bit_length()) for b, n in calls}
    assert info["replans"] == info["bucket_plans"] == len(buckets)
    assert info["exact_plans"] == 0
    assert info["rebound"] == len(set(calls))
    assert exact.memory_info()["replans"] >= len(set(calls))


def test_lengths_share_the_bucket_offsets_in_one_block(two_layers):
    s = InferenceSession(two_layers, buckets="pow2")
    plans = []
    for length in (33, 40, 64, 50):        # one bucket: 64
        x = _x(1, length, 32, length)
        s.run(None, {"x": x})
        plans.append(_entry(s, {"x": x})[1])
    assert all(p.offsets == plans[0].offsets for p in plans)
    assert s.memory_info()["replans"] == 1
    assert s.memory_info()["arena_bytes"] == plans[0].arena_bytes


def test_bucket_bounds_given_as_lengths_and_a_length_past_them(two_layers):
    s = InferenceSession(two_layers, buckets=[8, 32])
    ref = _ort(two_layers)
    for length in (3, 8, 20, 31, 40):
        x = _x(2, length, 32, length)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                                   rtol=0, atol=1e-5)
    info = s.memory_info()
    # 3, 8 -> 8; 20, 31 -> 32; 40 is past the bounds: planned exactly; the
    # batch (2) is a symbolic dim too, rounded to 8
    assert (info["bucket_plans"], info["exact_plans"], info["replans"]) == (2, 1, 3)


def _non_monotone(op, const, x):
    """Rows 0 .. 65 - seq of a table computed from ``x`` (the table plus
    x's mean): fewer rows the longer the sequence (its bytes at a bucket's
    length are below those at a shorter length), summed and added to
    every position."""
    table = op("Add", [const(np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32)),
                       op("ReduceMean", [x], axes=[0, 1], keepdims=0)])
    seq = op("Slice", [op("Shape", [x]), const(np.array([1])), const(np.array([2])),
                       const(np.array([0]))])
    end = op("Sub", [const(np.array([65])), seq])
    rows = op("Relu", [op("Slice", [table, const(np.array([0])), end, const(np.array([0]))])])
    return op("Add", [x, op("ReduceSum", [rows, const(np.array([0]))], keepdims=1)])


def test_a_tensor_larger_at_the_length_than_at_its_bucket_is_planned_exactly(tmp_path):
    path = save(encoder(layers=1, hidden=32, heads=2, extra=_non_monotone),
                tmp_path / "m.onnx")
    bucketed = InferenceSession(path, buckets="pow2")
    exact = InferenceSession(path)
    ref = _ort(path)
    for length in (40, 64, 33, 5, 8):
        x = _x(1, length, 32, length)
        (got,) = bucketed.run(None, {"x": x})
        np.testing.assert_array_equal(got, exact.run(None, {"x": x})[0])
        np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], rtol=0, atol=1e-5)
        g, p = _entry(bucketed, {"x": x})
        assert validate(p, g) == []
    info = bucketed.memory_info()
    # 64 and 8 are their own buckets; 40, 33 (bucket 64) and 5 (bucket 8)
    # have more table rows than their bucket: each planned exactly
    assert (info["bucket_plans"], info["rebound"], info["exact_plans"]) == (2, 2, 3)
    assert info["replans"] == 5


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 40)), min_size=1, max_size=10))
def test_every_step_of_a_random_length_sequence_keeps_live_tensors_apart(tmp_path, calls):
    path = tmp_path / "h.onnx"
    if not path.exists():
        save(encoder(layers=1, hidden=8, heads=2, seed=1), path)
    s = InferenceSession(str(path), buckets="pow2", max_shapes=3)
    exact = InferenceSession(str(path))
    for i, (batch, length) in enumerate(calls):
        x = _x(batch, length, 8, i)
        (got,) = s.run(None, {"x": x})
        np.testing.assert_array_equal(got, exact.run(None, {"x": x})[0])
        g, p = _entry(s, {"x": x})
        assert validate(p, g) == []     # live tensors (at this length) never overlap
        # and the arrays the kernels ran on are those the plan validated:
        # at its offsets in the thread's block, of this length's shapes
        block = s._context().arena
        base = block.ctypes.data
        assert p.arena_bytes <= block.nbytes
        for name, t in g.tensors.items():
            if name in p.offsets:
                a = s._last.arrays[name]
                assert a.ctypes.data == base + p.offsets[name]
                assert a.shape == tuple(t.shape)


@pytest.mark.parametrize("bad, match", [
    ("fast", "'pow2'"), ("", "'pow2'"), ("pow2/3", "power of two"), ("pow2/1", "pow2/N"),
    ("pow2/", "pow2/N"), ("pow2/x", "pow2/N"), (True, "bool"), (3.5, "float"), ([], "positive"),
    ([0, 8], "positive"), ([8, 4], "increasing"), ([4, 4], "increasing"), ([2.0], "positive"),
    (b"pow2", "bytes")])
def test_nonsense_buckets_are_refused_by_name(two_layers, bad, match):
    with pytest.raises(InvalidArgumentError, match=match):
        InferenceSession(two_layers, buckets=bad)


def test_buckets_with_a_memory_budget_or_no_max_shapes_are_refused(two_layers):
    with pytest.raises(InvalidArgumentError, match="memory_budget"):
        InferenceSession(two_layers, buckets="pow2", memory_budget=1 << 20)
    with pytest.raises(InvalidArgumentError, match="max_shapes"):
        InferenceSession(two_layers, buckets="pow2", max_shapes=0)


def test_the_policies_round_as_documented():
    pow2 = bucket_policy("pow2")
    assert [pow2(n) for n in (0, 1, 2, 3, 4, 5, 255, 256, 257)] == \
        [0, 1, 2, 4, 4, 8, 256, 256, 512]
    quarters = bucket_policy("pow2/4")
    assert [quarters(n) for n in (1, 7, 8, 9, 11, 16, 17, 21, 33, 300, 512, 513)] == \
        [1, 7, 8, 10, 12, 16, 20, 24, 40, 320, 512, 640]
    halves = bucket_policy("pow2/2")
    assert [halves(n) for n in (3, 4, 5, 7, 9, 13, 300)] == [3, 4, 6, 8, 12, 16, 384]
    bounds = bucket_policy((16, 64))
    assert [bounds(n) for n in (1, 16, 17, 64, 65)] == [16, 16, 64, 64, None]
    assert bucket_policy(None) is None


def test_only_the_declared_symbolic_dims_are_rounded():
    from pyarena.importers.session import NodeArg
    b = BucketPlans(bucket_policy("pow2"),
                    [NodeArg("x", ("batch", "seq", 32), "tensor(float)"),
                     NodeArg("m", (3, None), "tensor(float)")], 8)
    assert b.bucket({"x": (3, 5, 32), "m": (3, 9)}) == {"x": (4, 8, 32), "m": (3, 16)}
    # fed at another rank than declared: not rounded
    assert b.bucket({"x": (3, 5), "m": (3, 9)}) == {"x": (3, 5), "m": (3, 16)}


def test_without_buckets_replans_counts_every_signature(two_layers):
    s = InferenceSession(two_layers, max_plans=2)
    for length in (3, 4, 5, 3):
        s.run(None, {"x": _x(1, length, 32, 0)})
    assert s.memory_info()["replans"] == 4      # 3 evicted by 4 and 5
    assert "exact_plans" not in s.memory_info()


def _concat_tail(op, const, x):
    """x and relu(x) concatenated along the sequence, then halved back by
    a MatMul over positions: a Concat whose slices move with the length."""
    both = op("Concat", [x, op("Relu", [x])], axis=1)
    return op("Add", [x, op("ReduceMean", [both], axes=[1], keepdims=1)])


def test_a_concat_along_the_sequence_runs_with_its_bucket_offsets(tmp_path):
    path = save(encoder(layers=1, hidden=16, heads=2, extra=_concat_tail), tmp_path / "c.onnx")
    s = InferenceSession(path, buckets="pow2")
    ref = _ort(path)
    for length in (20, 32, 17):
        x = _x(1, length, 16, length)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                                   rtol=0, atol=1e-5)
    info = s.memory_info()
    assert (info["bucket_plans"], info["rebound"], info["exact_plans"]) == (1, 3, 0)


def _conv_model(path):
    """x[1, 8, 16, W] -> three 3x3 Convs (32, 32, 4 channels) with Relus:
    im2col workspaces that the slack planner narrows at the peak."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(  # noqa: E731
        np.float32), f"w{s[0]}_{s[1]}")
    conv = lambda x, wt, y: helper.make_node("Conv", [x, wt], [y], pads=[1, 1, 1, 1])  # noqa
    nodes = [conv("x", "w32_8", "c1"), helper.make_node("Relu", ["c1"], ["r1"]),
             conv("r1", "w32_32", "c2"), helper.make_node("Relu", ["c2"], ["r2"]),
             conv("r2", "w4_32", "y")]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, "W"])],
        [w(32, 8, 3, 3), w(32, 32, 3, 3), w(4, 32, 3, 3)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


@pytest.mark.parametrize("native", [False, True])
def test_narrowed_scratch_takes_the_buckets_buffer_as_its_budget(tmp_path, native):
    path = _conv_model(tmp_path / "c.onnx")
    s = InferenceSession(path, buckets="pow2", native=native)
    ref = _ort(path)
    for w in (32, 24, 17, 64, 33, 5, 100):
        x = np.random.default_rng(w).standard_normal((1, 8, 16, w)).astype(np.float32)
        # (sums of 288 products of values near 10: float rounding, whose
        # blocking the workspace's band width decides -- module docstring)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=5e-5)
        g, p = _entry(s, {"x": x})
        assert validate(p, g) == []
    assert any(p.slack["narrowed"] for p in s._buckets.plans.values())
    # every length ran with its bucket's offsets: none needed more scratch
    assert s.memory_info()["exact_plans"] == 0


def test_threads_sharing_a_bucketed_session_get_single_threaded_results(two_layers):
    import threading
    s = InferenceSession(two_layers, buckets="pow2")
    exact = InferenceSession(two_layers)
    lengths = [5, 17, 64, 3, 33, 9, 40, 1]
    want = {n: exact.run(None, {"x": _x(2, n, 32, n)})[0] for n in lengths}
    errors = []

    def work(k):
        try:
            for i in range(12):
                n = lengths[(i + k) % len(lengths)]
                np.testing.assert_array_equal(s.run(None, {"x": _x(2, n, 32, n)})[0], want[n])
        except Exception as exc:        # noqa: BLE001 -- reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    info = s.memory_info()
    assert info["exact_plans"] == 0
    assert info["replans"] == info["bucket_plans"] == 6     # 8, 32, 64, 4, 16, 1


def test_quarter_octave_buckets_match_an_exact_session(two_layers):
    s = InferenceSession(two_layers, buckets="pow2/4")
    exact = InferenceSession(two_layers)
    for n in (33, 40, 35, 64, 50, 9):      # buckets 40, 40, 40, 64, 56, 10
        x = _x(1, n, 32, n)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], exact.run(None, {"x": x})[0])
    info = s.memory_info()
    assert (info["bucket_plans"], info["rebound"], info["exact_plans"]) == (4, 6, 0)


def test_max_shapes_bounds_the_lengths_kept_bound_not_the_bucket_plans(two_layers):
    s = InferenceSession(two_layers, buckets="pow2", max_shapes=2)
    for n in (5, 6, 7, 5, 20):     # 5 evicted by 7, bound again from bucket 8's plan
        s.run(None, {"x": _x(1, n, 32, n)})
    info = s.memory_info()
    assert info["plans"] == 2
    assert (info["replans"], info["bucket_plans"], info["rebound"]) == (2, 2, 5)
