"""TFLite UNIDIRECTIONAL_SEQUENCE_RNN: models written in the test, run by
pyarena's RNN kernel and compared with the TFLite interpreter."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.tflite_util import TFLiteBuilder, hybrid_const
from pyarena.importers import UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.runtime import Executor


def _rnn_model(path, S=5, N=2, I=3, H=4, time_major=True, act=4, seed=0, hybrid=None,
               state=True, scale=0.5):
    r = np.random.default_rng(seed)
    f = lambda *s: (r.standard_normal(s) * scale).astype(np.float32)  # noqa: E731

    def w(name, *shape):
        return hybrid_const(B, name, f(*shape), hybrid)
    B = TFLiteBuilder()
    x = B.tensor("x", (S, N, I) if time_major else (N, S, I))
    ins = [x, w("w", H, I), w("r", H, H), B.const("b", f(H)),
           B.tensor("h0", (N, H), variable=True) if state else B.const("h0", f(N, H))]
    y = B.tensor("y", (S, N, H) if time_major else (N, S, H))
    B.op("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [y], ("SequenceRNNOptions", dict(
        TimeMajor=time_major, FusedActivationFunction=act)))
    return B.save(path, [x], [y])


def _run(path, seed):
    g = load_model(path)
    assert [op.op_type for op in g.ops] == ["RNN"]
    x = np.random.default_rng(seed).standard_normal(g.tensors["x"].shape).astype(np.float32)
    return Executor(g, plan(g)).run({"x": x})["y"], x


def _compare(path, seed=1, atol=1e-5):
    y, x = _run(path, seed)
    ref, why = reference_tflite(path, {"x": x})
    assert ref is not None, why
    np.testing.assert_allclose(y, ref["y"], rtol=1e-4, atol=atol)
    return y


@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("act", [0, 1, 4])
def test_sequence_rnn_matches_interpreter(tmp_path, time_major, act):
    y = _compare(_rnn_model(tmp_path / "r.tflite", time_major=time_major, act=act, seed=act))
    assert y.shape == ((5, 2, 4) if time_major else (2, 5, 4))
    if act == 1:
        assert y.min() == 0 and y.max() > 0          # RELU: some clamped, some not
    t = (slice(None),) * (0 if time_major else 1)
    assert not np.allclose(y[t + (0,)], y[t + (4,)])


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(S=st.integers(1, 7), N=st.integers(1, 4), I=st.integers(1, 6), H=st.integers(1, 6),
       tm=st.booleans(), act=st.sampled_from([0, 1, 4]), seed=st.integers(0, 2**16))
def test_sequence_rnn_property(tmp_path, S, N, I, H, tm, act, seed):
    _compare(_rnn_model(tmp_path / f"r{seed}.tflite", S=S, N=N, I=I, H=H, time_major=tm,
                        act=act, seed=seed), seed=seed + 1, atol=2e-5)


def test_sequence_rnn_hybrid_int8_weights(tmp_path):
    """int8 weights dequantized at import: pyarena computes the float model
    they stand for; TFLite's hybrid kernel also rounds x and h to int8."""
    kw = dict(S=6, I=5, H=6, seed=3)
    path = _rnn_model(tmp_path / "q.tflite", hybrid="int8", **kw)
    y, x = _run(path, 4)
    ref_f, _ = reference_tflite(_rnn_model(tmp_path / "f.tflite", hybrid="float", **kw),
                                {"x": x})
    np.testing.assert_allclose(y, ref_f["y"], rtol=1e-4, atol=1e-5)
    ref_q, why = reference_tflite(path, {"x": x})
    assert ref_q is not None, why
    assert 0 < np.abs(y - ref_q["y"]).max() < 0.03


@pytest.mark.parametrize("kw, why", [(dict(act=3), "fused activation 3"),
                                     (dict(state=False), "not a variable tensor")])
def test_sequence_rnn_refused_by_name(tmp_path, kw, why):
    with pytest.raises(UnsupportedOpError, match=f"UNIDIRECTIONAL_SEQUENCE_RNN.*{why}"):
        load_model(_rnn_model(tmp_path / "r.tflite", **kw))
