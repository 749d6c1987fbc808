"""InferenceSession.run from several threads at once: every result equals
a single-threaded run of the same input, whatever the other threads run
meanwhile (other inputs, other signatures, signatures first seen at the
same time in several threads, plans evicted under them); a thread's
``copy=False`` outputs stay as they are until its own next run; a
thread's execution state goes when the thread does.  No run may hang:
every join has a timeout."""
import gc
import threading
import time
import weakref

import numpy as np
import pytest

from helpers.session_models import CHANNELS, MODELS
from pyarena import InferenceSession

JOIN = 120      # seconds a worker may take before the test calls it a hang


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("threads")
    return {name: str(MODELS[name](d / f"{name}.onnx")) for name in ("se", "residual")}


def _inputs(name, signatures, count, seed):
    """``count`` inputs of ``name``'s model, their (N, H, W) cycling
    through ``signatures``."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, CHANNELS[name], h, w)).astype(np.float32)
            for n, h, w in (signatures[i % len(signatures)] for i in range(count))]


def _reference(path, xs):
    """Each input's outputs from one single-threaded session."""
    s = InferenceSession(path)
    return [s.run(None, {"x": x}) for x in xs]


def _in_threads(work, n):
    """``work(t)`` in ``n`` threads started together; the exceptions they
    raised.  Fails the test on a thread still running after JOIN s."""
    errors = []
    start = threading.Barrier(n)

    def body(t):
        try:
            start.wait()
            work(t)
        except BaseException as exc:        # reported by the test, not lost
            errors.append(exc)
    threads = [threading.Thread(target=body, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(JOIN)
    assert not any(th.is_alive() for th in threads), "a run hung (deadlock?)"
    return errors


@pytest.mark.parametrize("name,max_plans", [("se", 8), ("residual", 8), ("se", 2)])
def test_eight_threads_sharing_a_session_get_the_single_threaded_results(models, name,
                                                                          max_plans):
    """8 threads x 40 runs on one new session, inputs of 4 signatures
    (batch and spatial sizes) in a different order in each thread: the
    first runs of each signature prepare it in several threads at once;
    with max_plans=2 the plans are evicted under the other threads' runs.
    Every output equals the single-threaded one, bit for bit."""
    path = models[name]
    sigs = [(1, 5, 6), (3, 5, 6), (2, 3, 4), (5, 1, 1)]
    xs = _inputs(name, sigs, 8 * 40, seed=8)
    want = _reference(path, xs)
    s = InferenceSession(path, max_plans=max_plans)
    wrong = []

    def work(t):
        for i in range(t, len(xs), 8):
            got = s.run(None, {"x": xs[i]})
            if not all(np.array_equal(a, b) for a, b in zip(got, want[i])):
                wrong.append(i)
    errors = _in_threads(work, 8)
    assert errors == [] and wrong == []
    assert s.memory_info()["plans"] == min(max_plans, len(sigs))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_eight_threads_sharing_a_session_get_the_single_threaded_results_slow(tmp_path, name):
    """As above, 8 threads x 300 runs over 6 signatures, every model."""
    path = str(MODELS[name](tmp_path / f"{name}.onnx"))
    sigs = [(1, 5, 6), (3, 5, 6), (2, 3, 4), (5, 1, 1), (1, 9, 2), (4, 6, 6)]
    xs = _inputs(name, sigs, 8 * 300, seed=9)
    want = _reference(path, xs)
    s = InferenceSession(path, max_plans=4)
    wrong = []

    def work(t):
        for i in range(t, len(xs), 8):
            got = s.run(None, {"x": xs[i]})
            if not all(np.array_equal(a, b) for a, b in zip(got, want[i])):
                wrong.append(i)
    assert _in_threads(work, 8) == [] and wrong == []


def test_what_threads_share_is_made_once_and_one_at_a_time(models, monkeypatch):
    """8 threads meeting two new signatures at once: each signature is
    prepared (imported, planned) once, and no two preparations or executor
    builds -- which change the caches, the weights arena and the packed
    memo the threads share -- run at the same time, though each is slowed
    here to let the other threads in.  Each thread gets its own executor."""
    import pyarena.importers.session as session
    path = models["se"]
    sigs = [(2, 5, 6), (1, 3, 4)]
    xs = _inputs("se", sigs, 2, seed=5)
    want = _reference(path, xs)
    s = InferenceSession(path)
    busy, overlaps, prepared, built = [0], [], [], []

    def slowed(fn, log):
        def call(*a, **k):
            busy[0] += 1
            if busy[0] > 1:
                overlaps.append(fn.__name__)
            time.sleep(0.005)           # the other threads run meanwhile
            try:
                out = fn(*a, **k)
            finally:
                busy[0] -= 1
            log.append(threading.get_ident())
            return out
        return call
    monkeypatch.setattr(InferenceSession, "_prepare", slowed(InferenceSession._prepare,
                                                             prepared))
    monkeypatch.setattr(session, "Executor", slowed(session.Executor, built))
    wrong = []

    def work(t):
        for i in (t % 2, 1 - t % 2):
            if not np.array_equal(s.run(None, {"x": xs[i]})[0], want[i][0]):
                wrong.append((t, i))
    assert _in_threads(work, 8) == [] and wrong == []
    assert overlaps == [] and len(prepared) == 2
    assert len(built) == 16 and len(set(built)) == 8


def test_copy_false_outputs_stay_until_the_same_threads_next_run(models):
    """A view returned with copy=False lies in the calling thread's own
    activation block: the other threads' runs -- of the same signature and
    of a larger one -- never write it; that thread's next run does."""
    path = models["se"]
    xs = _inputs("se", [(2, 5, 6)], 2, seed=1)
    big = _inputs("se", [(5, 9, 9)], 1, seed=2)[0]
    want = _reference(path, xs)
    s = InferenceSession(path)
    kept, held = {}, threading.Event()
    others_done = threading.Event()

    def keeper():
        (view,) = s.run(None, {"x": xs[0]}, copy=False)
        kept["view"], kept["copy"] = view, view.copy()
        held.set()
        others_done.wait(JOIN)
        kept["after_others"] = view.copy()
        s.run(None, {"x": xs[1]}, copy=False)       # its own next run: the view changes
        kept["after_own"] = view.copy()

    def others(t):
        held.wait(JOIN)
        for _ in range(20):
            s.run(None, {"x": xs[1]}, copy=False)
            s.run(None, {"x": big}, copy=False)

    th = threading.Thread(target=keeper, daemon=True)
    th.start()
    errors = _in_threads(others, 3)
    others_done.set()
    th.join(JOIN)
    assert not th.is_alive() and errors == []
    np.testing.assert_array_equal(kept["copy"], want[0][0])
    np.testing.assert_array_equal(kept["after_others"], want[0][0])
    np.testing.assert_array_equal(kept["after_own"], want[1][0])


def test_a_threads_execution_state_goes_with_the_thread(models):
    """Each thread that runs the session gets an activation block of its
    own (memory_info counts them); when the thread ends, its block and
    executors go, and the weights stay shared (held once)."""
    path = models["residual"]
    xs = _inputs("residual", [(2, 5, 6)], 1, seed=3)
    s = InferenceSession(path)
    s.run(None, {"x": xs[0]})
    one = s.memory_info()
    running, release = threading.Barrier(4), threading.Event()

    def work(t):
        s.run(None, {"x": xs[0]})
        running.wait(JOIN)
        release.wait(JOIN)

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(3)]
    for th in threads:
        th.start()
    running.wait(JOIN)
    during = s.memory_info()
    release.set()
    for th in threads:
        th.join(JOIN)
    for _ in range(100):        # (a thread's locals are cleared as it ends)
        after = s.memory_info()
        if after["threads"] == 1:
            break
        time.sleep(0.01)
    assert (one["threads"], during["threads"], after["threads"]) == (1, 4, 1)
    assert during["arena_bytes"] == 4 * one["arena_bytes"] and after == one
    assert during["weights_bytes"] == one["weights_bytes"]


def test_a_threads_arena_grown_for_a_larger_plan_lets_the_old_one_go(models):
    """A larger signature replaces the thread's arena: the executors bound
    to the old one go with it (bound again when their signature comes
    back), so the old block is freed, not kept by them."""
    path = models["se"]
    small, large = _inputs("se", [(1, 3, 4), (5, 9, 9)], 2, seed=4)
    want = _reference(path, [small, large, small])
    s = InferenceSession(path)
    got = [s.run(None, {"x": small})]
    old = weakref.ref(s._context().arena)
    got.append(s.run(None, {"x": large}))
    gc.collect()
    assert old() is None
    got.append(s.run(None, {"x": small}))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a[0], b[0])
    assert s.memory_info()["arena_bytes"] == s._context().arena.size
