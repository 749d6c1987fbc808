"""A model with variables run as one native call list per step
(pyarena/importers/session_step.py): the keyword spotters' steps give the
bits of the session's checked path and of TFLite's reference kernels,
from one thread or several, with copy=False views, after a reset, and
when runs that do not fit the cached step come in between."""
import os
import threading
import types

import numpy as np
import pytest

import pyarena
from pyarena.errors import InvalidArgumentError
from pyarena.importers import session_step
from pyarena.runtime.batch import Batch

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
SPOTTERS = ["hey_mycroft", "okay_nabu"]


def _stream(n, seed=1):
    rng = np.random.default_rng(seed)
    for step in range(n):
        base = np.sin(np.arange(40) * 0.3 + step * 0.2) * 40 + rng.normal(0, 20, 40)
        x = base[None, None, :] + rng.normal(0, 10, (1, 3, 40)) - 40
        yield np.clip(x, -128, 127).astype(np.int8)


def _checked(feeds):
    """A feed mapping that is not a dict: the session's checked path."""
    return types.MappingProxyType(feeds)


def _counting(monkeypatch, session):
    """How many runs of ``session`` take the checked path."""
    state = session._io.state
    calls = []
    run = state.run

    def counted(*a, **k):
        calls.append(1)
        return run(*a, **k)
    monkeypatch.setattr(state, "run", counted)
    return calls


def _reference(path, frames):
    m = pytest.importorskip("ai_edge_litert.interpreter")
    it = m.Interpreter(model_path=path, experimental_op_resolver_type=m.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    out = []
    for x in frames:
        it.set_tensor(i, x)
        it.invoke()
        out.append(it.get_tensor(o).copy())
    return np.array(out)


@pytest.mark.parametrize("name", SPOTTERS)
@pytest.mark.parametrize("threads", [1, 2])
def test_steps_give_the_checked_paths_and_the_interpreters_bits(monkeypatch, name, threads):
    path = os.path.join(DATA, f"{name}.tflite")
    fast, slow = (pyarena.InferenceSession(path, threads=threads) for _ in range(2))
    x_name = fast.get_inputs()[0].name
    frames = list(_stream(150, seed=threads))
    checked = _counting(monkeypatch, fast)
    got = np.array([np.array(fast.run(None, {x_name: x}, copy=False)[0]) for x in frames])
    assert len(checked) == 1            # the first run only: then the cached step
    step = fast._local.ctx.step
    assert len(step.segments) == 1 and isinstance(step.segments[0][0], Batch)
    want = np.array([slow.run(None, _checked({x_name: x}))[0] for x in frames])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _reference(path, frames))
    for k, v in slow._io.state.values.items():
        np.testing.assert_array_equal(fast._io.state.values[k], v, err_msg=k)
    if name == "hey_mycroft":
        assert got.max() > got.min()        # the stream moves the output


def test_runs_off_the_step_in_between_keep_one_stream(monkeypatch):
    """Every third run on the checked path (a mapping proxy, output names
    asked, a list of output names), a reset in the middle: the outputs
    those of a session that only ever takes the checked path."""
    path = os.path.join(DATA, "hey_mycroft.tflite")
    mixed, slow = (pyarena.InferenceSession(path) for _ in range(2))
    x_name = mixed.get_inputs()[0].name
    out_name = mixed.get_outputs()[0].name
    checked = _counting(monkeypatch, mixed)
    got, want = [], []
    for i, x in enumerate(_stream(90, seed=4)):
        if i == 45:
            mixed.reset_variables(), slow.reset_variables()
        feeds = _checked({x_name: x}) if i % 3 == 0 else {x_name: x}
        names = [out_name] if i % 3 == 1 else None
        got.append(mixed.run(names, feeds)[0])
        want.append(slow.run(None, _checked({x_name: x}))[0])
    np.testing.assert_array_equal(np.array(got), np.array(want))
    assert len(checked) == 30
    assert len(set(map(bytes, want))) > 1


def test_feeds_the_step_does_not_take_are_checked_and_refused_by_name():
    path = os.path.join(DATA, "okay_nabu.tflite")
    s = pyarena.InferenceSession(path)
    x_name = s.get_inputs()[0].name
    state_in, state_out = sorted(s._io.state.hidden)[:2]
    x = np.zeros((1, 3, 40), np.int8)
    s.run(None, {x_name: x})
    assert s._local.ctx.step.segments is not None
    before = {k: v.copy() for k, v in s._io.state.values.items()}
    with pytest.raises(InvalidArgumentError, match="variables"):
        s.run(None, {x_name: x, state_in: before[state_in]})
    with pytest.raises(InvalidArgumentError, match="variables"):
        s.run([state_out], {x_name: x})
    with pytest.raises(InvalidArgumentError, match="feed"):
        s.run(None, {x_name: np.full((1, 3, 40), 0.5, np.float32)})
    with pytest.raises(InvalidArgumentError, match="no feed"):
        s.run(None, {})
    for k, v in before.items():         # the refused runs changed no variable
        np.testing.assert_array_equal(s._io.state.values[k], v, err_msg=k)
    # a feed of another dtype the session converts: the checked path's values
    wide = np.zeros((1, 3, 40), np.int16)
    a = s.run(None, {x_name: wide})[0]
    s.reset_variables()
    s.run(None, {x_name: x})
    np.testing.assert_array_equal(a, s.run(None, {x_name: x})[0])


def test_threads_take_turns_on_one_state():
    """Three threads, each with its own cached step and activation block:
    the variables are the session's, the state that of 60 steps of one
    thread (the same frame each step)."""
    path = os.path.join(DATA, "hey_mycroft.tflite")
    x = next(_stream(1, seed=5))
    s = pyarena.InferenceSession(path)
    name = s.get_inputs()[0].name
    steps = []

    def work():
        for _ in range(20):
            s.run(None, {name: x}, copy=False)
        steps.append(s._local.ctx.step)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(st) for st in steps}) == 3 and all(st.segments for st in steps)
    one = pyarena.InferenceSession(path)
    for _ in range(60):
        one.run(None, _checked({name: x}))
    for k, v in one._io.state.values.items():
        np.testing.assert_array_equal(s._io.state.values[k], v, err_msg=k)


def test_an_executor_that_does_not_fit_gives_no_step():
    """An executor with pool tensors (or in an allocator mode) is not made
    a step: its runs stay on the checked path."""
    class Ex:
        busy = None
        host_inputs = {}
    step = session_step.VariableStep(Ex(), None, {})
    assert step.segments is None and step.run(None, {}, True) is None
