"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM: models written in the test, run by
pyarena's LSTM kernel and compared with the TFLite interpreter."""
import numpy as np
import pytest

from helpers.tflite_util import TFLiteBuilder
from pyarena.importers import UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.runtime import Executor


def _lstm_model(path, S=5, N=2, I=3, H=4, time_major=True, peephole=False, act=4,
                cell_clip=0.0, seed=0, cifg=False, projection=False, state=None, scale=0.5):
    r = np.random.default_rng(seed)
    f = lambda *s: (r.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    B = TFLiteBuilder()
    xs = (S, N, I) if time_major else (N, S, I)
    x = B.tensor("x", xs)
    ins = [x]
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else B.const(f"wx{k}", f(H, I)))
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else B.const(f"wh{k}", f(H, H)))
    for k in range(3):
        ins.append(B.const(f"p{k}", f(H)) if peephole and not (cifg and k == 0) else -1)
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else B.const(f"b{k}", f(H)))
    ins.append(B.const("proj", f(H, H)) if projection else -1)
    ins.append(-1)
    ins.append(B.tensor("h0", (N, H), variable=True))
    ins.append(B.tensor("c0", (N, H), variable=state is None) if state is None else
               B.const("c0", state))
    ins += [-1] * 4
    y = B.tensor("y", (S, N, H) if time_major else (N, S, H))
    B.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], ("UnidirectionalSequenceLSTMOptions", dict(
        FusedActivationFunction=act, CellClip=cell_clip, ProjClip=0.0,
        TimeMajor=time_major)))
    return B.save(path, [x], [y])


def _compare(path, seed=1):
    g = load_model(path)
    assert [op.op_type for op in g.ops] == ["LSTM"]
    ex = Executor(g, plan(g))
    x = np.random.default_rng(seed).standard_normal(g.tensors["x"].shape).astype(np.float32)
    out = ex.run({"x": x})
    ref, why = reference_tflite(path, {"x": x})
    assert ref is not None, why
    np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-4, atol=1e-5)
    return out["y"]


@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("peephole", [False, True])
def test_sequence_lstm_matches_interpreter(tmp_path, time_major, peephole):
    y = _compare(_lstm_model(tmp_path / "m.tflite", time_major=time_major, peephole=peephole))
    assert y.shape == ((5, 2, 4) if time_major else (2, 5, 4))
    # the steps differ (the state carries over): not one step repeated
    t = (slice(None),) * (0 if time_major else 1)
    assert not np.allclose(y[t + (0,)], y[t + (4,)])


@pytest.mark.parametrize("peephole", [False, True])
def test_sequence_lstm_cifg(tmp_path, peephole):
    """No input gate: TFLite's i = 1 - f (the kernel's ``cifg``)."""
    path = _lstm_model(tmp_path / "cifg.tflite", cifg=True, peephole=peephole, seed=4)
    g = load_model(path)
    assert g.ops[0].attrs["cifg"] == 1
    _compare(path, seed=5)


def test_sequence_lstm_relu_and_cell_clip(tmp_path):
    # ReLU lets C grow: a clip of 0.3 is reached and changes the outputs
    path = _lstm_model(tmp_path / "c.tflite", act=1, cell_clip=0.3, S=8, seed=3)
    clipped = _compare(path, seed=2)
    free = _compare(_lstm_model(tmp_path / "f.tflite", act=1, S=8, seed=3), seed=2)
    assert not np.allclose(clipped, free)
    assert np.abs(clipped).max() <= 0.3 + 1e-6      # |o * relu(C)| <= |C|


@pytest.mark.parametrize("kw, why", [
    (dict(projection=True), "projection"),
    (dict(act=6), "fused activation"),
    (dict(state=np.ones((2, 4), np.float32)), "not a variable tensor")])
def test_sequence_lstm_refused_by_name(tmp_path, kw, why):
    path = _lstm_model(tmp_path / "r.tflite", **kw)
    with pytest.raises(UnsupportedOpError, match=f"UNIDIRECTIONAL_SEQUENCE_LSTM.*{why}"):
        load_model(path)
