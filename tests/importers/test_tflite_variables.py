"""TFLite resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE
and CALL_ONCE's init subgraph): state a streaming model keeps from one
invocation to the next, against the TFLite interpreter invoked the same
way, step after step.

The real models are the int8 keyword spotters of the
``pymicro-wakeword`` 2.5.0 wheel (two vendored under tests/data, see its
README): ring buffers of past frames read, concatenated with the new
frame and assigned back at every step."""
import os
import threading

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("flatbuffers")

from helpers.tflite_util import TFLiteBuilder  # noqa: E402
import pyarena  # noqa: E402
from pyarena.errors import (  # noqa: E402
    InvalidArgumentError, ModelImportError, UnsupportedOpError)
from pyarena.importers import load_model  # noqa: E402
from pyarena.importers.compiler import CompileError  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
SPOTTERS = ["hey_mycroft", "okay_nabu"]


def _interpreter(path):
    m = pytest.importorskip("ai_edge_litert.interpreter")
    it = m.Interpreter(model_path=str(path),
                       experimental_op_resolver_type=m.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def _stream(n, seed=1):
    """Spectrogram-like int8 frames (3 of 40 features per step): a slowly
    moving pattern and noise, enough to move the spotters' outputs."""
    rng = np.random.default_rng(seed)
    for step in range(n):
        base = np.sin(np.arange(40) * 0.3 + step * 0.2) * 40 + rng.normal(0, 20, 40)
        x = base[None, None, :] + rng.normal(0, 10, (1, 3, 40)) - 40
        yield np.clip(x, -128, 127).astype(np.int8)


def _steps(it, frames):
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    for x in frames:
        it.set_tensor(i, x)
        it.invoke()
        yield it.get_tensor(o).astype(int)


@pytest.mark.parametrize("name", SPOTTERS)
def test_keyword_spotter_follows_the_interpreter_step_by_step(name):
    """300 steps: every output equal to TFLite's reference kernels' (the
    convolutions requantize with TFLite's fixed-point multipliers: with
    onnxruntime's float32 rounding a unit off in a conv stayed in the ring
    buffers, two quanta at the output) -- and a session that loses its
    state between steps is far from it (what the comparison would catch)."""
    path = os.path.join(DATA, f"{name}.tflite")
    s = pyarena.InferenceSession(path)
    x_name = s.get_inputs()[0].name
    frames = list(_stream(300))
    want = list(_steps(_interpreter(path), frames))
    got = [s.run(None, {x_name: x})[0].astype(int) for x in frames]
    diff = np.array([np.abs(g - w).max() for g, w in zip(got, want)])
    assert diff.max() == 0, diff
    assert sum(int(w.max()) for w in want) > 0      # the stream moves the output
    stateless = []
    for x in frames:
        s.reset_variables()
        stateless.append(s.run(None, {x_name: x})[0].astype(int))
    if name == "hey_mycroft":   # (okay_nabu's output hardly leaves 0 on this stream)
        lost = np.array([np.abs(g - w).max() for g, w in zip(stateless, want)])
        assert (lost > 0).sum() >= 20, lost


def test_the_session_hides_the_variables_and_refuses_them_by_name():
    path = os.path.join(DATA, "okay_nabu.tflite")
    s = pyarena.InferenceSession(path)
    ins, outs = s.get_inputs(), s.get_outputs()
    assert [(a.name, a.shape, a.type) for a in ins] == \
        [("serving_default_input_audio:0", (1, 3, 40), "tensor(int8)")]
    assert [(a.name, a.type) for a in outs] == [("StatefulPartitionedCall:0", "tensor(uint8)")]
    g = load_model(path)
    assert len(g.variables) == 6
    state_in, state_out, first = g.variables["stream_6/states"]
    assert state_in in g.inputs and state_out in g.outputs and first.shape == (1, 2, 1, 40)
    x = np.zeros((1, 3, 40), np.int8)
    with pytest.raises(InvalidArgumentError, match="variables"):
        s.run(None, {ins[0].name: x, state_in: first})
    with pytest.raises(InvalidArgumentError, match="variables"):
        s.run([state_out], {ins[0].name: x})
    with pytest.raises(CompileError, match="variables"):
        pyarena.compile(path, os.devnull)


def test_reset_variables_starts_the_stream_again():
    path = os.path.join(DATA, "hey_mycroft.tflite")
    s = pyarena.InferenceSession(path)
    name = s.get_inputs()[0].name
    frames = list(_stream(40, seed=3))
    first = [s.run(None, {name: x})[0] for x in frames]
    s.reset_variables()
    again = [s.run(None, {name: x})[0] for x in frames]
    np.testing.assert_array_equal(np.array(first), np.array(again))
    fresh = pyarena.InferenceSession(path)
    np.testing.assert_array_equal(np.array(first), np.array([fresh.run(None, {name: x})[0]
                                                            for x in frames]))


def test_threads_sharing_a_session_share_one_state():
    """Four threads run 25 steps each of one frame: the runs take turns,
    so the state is the one of 100 steps in one thread (the same frame
    each step: the order does not matter) -- not four states of 25."""
    path = os.path.join(DATA, "hey_mycroft.tflite")
    x = next(_stream(1, seed=5))
    s = pyarena.InferenceSession(path)
    name = s.get_inputs()[0].name

    def work():
        for _ in range(25):
            s.run(None, {name: x})
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    one = pyarena.InferenceSession(path)
    for _ in range(100):
        one.run(None, {name: x})
    mine, ones = s._io.state.values, one._io.state.values
    assert mine.keys() == ones.keys()
    for k, v in ones.items():
        np.testing.assert_array_equal(mine[k], v, err_msg=k)
    quarter = pyarena.InferenceSession(path)
    for _ in range(25):
        quarter.run(None, {name: x})
    assert any(not np.array_equal(quarter._io.state.values[k], v) for k, v in ones.items())


# -- variables in a model written here -----------------------------------------

def _accumulator(path, *, init=True, read_again=False, init_op="ASSIGN_VARIABLE",
                 first_shape=(1, 2)):
    """y = the variable ``acc`` + x, assigned back to ``acc`` (first value
    [10, 20] from CALL_ONCE's subgraph); ``read_again``: the output is a
    second read of ``acc`` after the assignment, plus x."""
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 2])
    r = b.tensor("acc_handle", [], resource=True)
    v = b.tensor("acc_value", [1, 2])
    s = b.tensor("sum", [1, 2])
    outs = [s]
    if init:
        sub = TFLiteBuilder()
        r2 = sub.tensor("acc_handle", [], resource=True)
        c = sub.const("first", np.arange(1, 1 + np.prod(first_shape)).reshape(first_shape) * 10.0)
        sub.op("VAR_HANDLE", [], [r2], ("VarHandleOptions", {"SharedName": "acc"}))
        if init_op == "ASSIGN_VARIABLE":
            sub.op("ASSIGN_VARIABLE", [r2, c], [])
        else:
            sub.op("ADD", [c, c], [sub.tensor("twice", list(first_shape))], ("AddOptions", {}))
        k = b.subgraph(sub, [], [])
        b.op("CALL_ONCE", [], [], ("CallOnceOptions", {"InitSubgraphIndex": k}))
    b.op("VAR_HANDLE", [], [r], ("VarHandleOptions", {"SharedName": "acc"}))
    b.op("READ_VARIABLE", [r], [v])
    b.op("ADD", [v, x], [s], ("AddOptions", {}))
    b.op("ASSIGN_VARIABLE", [r, s], [])
    if read_again:
        v2 = b.tensor("acc_again", [1, 2])
        y = b.tensor("y", [1, 2])
        b.op("READ_VARIABLE", [r], [v2])
        b.op("ADD", [v2, x], [y], ("AddOptions", {}))
        outs = [y]
    return b.save(path, [x], outs)


@pytest.mark.parametrize("read_again", [False, True])
def test_a_variable_written_here_matches_the_interpreter(tmp_path, read_again):
    """A running sum, and a read after the assignment in the same
    invocation (the value just assigned, as the interpreter reads it)."""
    path = _accumulator(tmp_path / "acc.tflite", read_again=read_again)
    it = _interpreter(path)
    s = pyarena.InferenceSession(path)
    assert [a.name for a in s.get_inputs()] == ["x"]
    frames = [np.array([[1.5, -2.0]], np.float32) * k for k in range(1, 6)]
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    want = []
    for f in frames:
        it.set_tensor(i, f)
        it.invoke()
        want.append(np.array(it.get_tensor(o)))
    got = [s.run(None, {"x": f})[0] for f in frames]
    np.testing.assert_array_equal(np.array(got), np.array(want))
    total = np.array([[10.0, 20.0]]) + sum(frames)
    np.testing.assert_allclose(got[-1], total + (frames[-1] if read_again else 0))


def test_a_variable_read_before_any_value_is_refused(tmp_path):
    path = _accumulator(tmp_path / "acc.tflite", init=False)
    with pytest.raises(UnsupportedOpError, match="read before anything gives it a value"):
        load_model(path)


def test_an_init_subgraph_that_computes_is_refused_by_name(tmp_path):
    path = _accumulator(tmp_path / "acc.tflite", init_op="ADD")
    with pytest.raises(UnsupportedOpError, match="init subgraph .* runs ADD"):
        load_model(path)


def test_a_first_value_of_another_shape_is_refused(tmp_path):
    path = _accumulator(tmp_path / "acc.tflite", first_shape=(1, 3))
    with pytest.raises(ModelImportError, match="contradicts itself"):
        load_model(path)


def test_keyword_spotter_runs_as_native_call_lists():
    """Its int8 slices and concatenations are block copies and table
    lookups in the native call lists, with the convolutions: a step is a
    few C calls, not one Python call per operator."""
    from pyarena.runtime.batch import Batch
    s = pyarena.InferenceSession(os.path.join(DATA, "hey_mycroft.tflite"))
    s.run(None, {s.get_inputs()[0].name: np.zeros((1, 3, 40), np.int8)})
    busy = s._last._runner.busy
    batched = sum(b[0].calls.n for b in busy if isinstance(b[0], Batch))
    assert len(busy) <= 4 and batched >= 25, [type(b[0]).__name__ for b in busy]


def test_random_feeds_start_the_variables_at_their_first_values():
    """What ``pyarena run`` feeds a model with variables: its real inputs
    at random, its variables as the model starts (random state made its
    comparison with the interpreter 255 quanta apart)."""
    from pyarena.runtime import Executor, random_feeds
    from pyarena.importers.reference import reference_tflite
    path = os.path.join(DATA, "okay_nabu.tflite")
    g = load_model(path)
    feeds = random_feeds(g)
    for name, (state_in, _, first) in g.variables.items():
        np.testing.assert_array_equal(feeds[state_in], first, err_msg=name)
    x = next(_stream(1, seed=7))
    feeds["serving_default_input_audio:0"] = x
    ref, why = reference_tflite(path, {"serving_default_input_audio:0": x},
                                reference_kernels=True)
    assert ref is not None, why
    ours = Executor(g).run(feeds)
    np.testing.assert_array_equal(np.asarray(ours["StatefulPartitionedCall:0"]),
                                  ref["StatefulPartitionedCall:0"])
