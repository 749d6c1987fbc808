"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM: models written in the test, run by
pyarena's LSTM kernel and compared with the TFLite interpreter."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.tflite_util import TFLiteBuilder, hybrid_const
from pyarena.importers import UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.runtime import Executor


def _gates(B, f, pre, I, H, P, peephole=False, cifg=False, projection=False, proj_bias=False,
           hybrid=None):
    """TFLite inputs 1-17 of one direction.  ``hybrid``: "int8" writes the
    weights as int8 with one scale each, "float" the float32 values those
    int8 weights stand for (the same model without the quantization)."""
    def w(name, *shape):
        return hybrid_const(B, name, f(*shape), hybrid)
    ins = []
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else w(f"{pre}wx{k}", H, I))
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else w(f"{pre}wh{k}", H, P))
    for k in range(3):
        ins.append(w(f"{pre}p{k}", H) if peephole and not (cifg and k == 0) else -1)
    for k in range(4):
        ins.append(-1 if cifg and k == 0 else B.const(f"{pre}b{k}", f(H)))
    ins.append(w(f"{pre}proj", P, H) if projection else -1)
    ins.append(B.const(f"{pre}pb", f(P)) if projection and proj_bias else -1)
    return ins


def _lstm_model(path, S=5, N=2, I=3, H=4, time_major=True, peephole=False, act=4,
                cell_clip=0.0, seed=0, cifg=False, projection=False, state=None, scale=0.5,
                P=None, proj_bias=False, proj_clip=0.0, layer_norm=False, hybrid=None):
    """One UNIDIRECTIONAL_SEQUENCE_LSTM; ``P``: the projection's size (H
    if not given); ``layer_norm``: coefficients for every gate (but the
    input gate's under CIFG)."""
    r = np.random.default_rng(seed)
    f = lambda *s: (r.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    P = P if projection and P else H
    B = TFLiteBuilder()
    xs = (S, N, I) if time_major else (N, S, I)
    x = B.tensor("x", xs)
    ins = [x] + _gates(B, f, "", I, H, P, peephole, cifg, projection, proj_bias, hybrid)
    ins.append(B.tensor("h0", (N, P), variable=True))
    ins.append(B.tensor("c0", (N, H), variable=state is None) if state is None else
               B.const("c0", state))
    for k in range(4):
        ln = layer_norm and not (cifg and k == 0)
        ins.append(B.const(f"ln{k}", 1 + f(H)) if ln else -1)
    y = B.tensor("y", (S, N, P) if time_major else (N, S, P))
    B.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], ("UnidirectionalSequenceLSTMOptions", dict(
        FusedActivationFunction=act, CellClip=cell_clip, ProjClip=proj_clip,
        TimeMajor=time_major)))
    return B.save(path, [x], [y])


def _compare(path, seed=1, rtol=1e-4, atol=1e-5, op_type="LSTM"):
    g = load_model(path)
    assert [op.op_type for op in g.ops] == [op_type]
    ex = Executor(g, plan(g))
    x = np.random.default_rng(seed).standard_normal(g.tensors["x"].shape).astype(np.float32)
    out = ex.run({"x": x})
    ref, why = reference_tflite(path, {"x": x})
    assert ref is not None, why
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=rtol, atol=atol)
    return out["y"] if len(out) == 1 else out


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


@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("proj_bias", [False, True])
def test_sequence_lstm_projection(tmp_path, time_major, proj_bias):
    """h = Wp (o * tanh(C)) + bp, of size P = 3 (n_cell 5): R is [4H, P]."""
    path = _lstm_model(tmp_path / "p.tflite", H=5, P=3, projection=True, proj_bias=proj_bias,
                       time_major=time_major, peephole=True, seed=6)
    g = load_model(path)
    assert g.ops[0].inputs[8] == "unidirectional_sequence_lstm_0/proj"
    y = _compare(path, seed=7)
    assert y.shape == ((5, 2, 3) if time_major else (2, 5, 3))


def test_sequence_lstm_proj_clip(tmp_path):
    # weights scaled up: the projection leaves [-0.2, 0.2] and the clip bites
    kw = dict(H=6, P=4, projection=True, proj_bias=True, seed=8, scale=1.5)
    clipped = _compare(_lstm_model(tmp_path / "c.tflite", proj_clip=0.2, **kw), seed=9)
    free = _compare(_lstm_model(tmp_path / "f.tflite", **kw), seed=9)
    assert np.abs(clipped).max() <= 0.2 + 1e-6 < np.abs(free).max()
    assert not np.allclose(clipped[1:], free[1:])      # and it feeds back through R


@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("cifg", [False, True])
def test_sequence_lstm_layer_norm(tmp_path, peephole, cifg):
    """Each gate's pre-activation (peephole included) normalised, scaled by
    its coefficients, then biased: as TFLite's lstm_eval."""
    path = _lstm_model(tmp_path / "ln.tflite", layer_norm=True, peephole=peephole, cifg=cifg,
                       H=6, seed=10, scale=0.8)
    g = load_model(path)
    ln = g.tensors[g.ops[0].inputs[10]].data     # stacked i, o, f, c; CIFG: no i
    assert ln.shape == (1, 24) and (ln[0, :6] == 0).all() == cifg
    _compare(path, seed=11)


def test_sequence_lstm_layer_norm_with_projection(tmp_path):
    path = _lstm_model(tmp_path / "lnp.tflite", layer_norm=True, peephole=True, H=6, P=3,
                       projection=True, proj_bias=True, proj_clip=0.5, time_major=False,
                       seed=12)
    _compare(path, seed=13)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(S=st.integers(1, 6), N=st.integers(1, 3), I=st.integers(1, 5), H=st.integers(1, 6),
       P=st.integers(1, 5), flags=st.lists(st.booleans(), min_size=7, max_size=7),
       act=st.sampled_from([1, 4]), seed=st.integers(0, 2**16))
def test_sequence_lstm_options_property(tmp_path, S, N, I, H, P, flags, act, seed):
    """Any mix of sizes and options runs as the interpreter does."""
    tm, peep, cifg, proj, pbias, ln, clip = flags
    path = _lstm_model(tmp_path / f"h{seed}.tflite", S=S, N=N, I=I, H=H, P=P,
                       time_major=tm, peephole=peep, cifg=cifg, projection=proj,
                       proj_bias=pbias, layer_norm=ln, act=act, seed=seed,
                       cell_clip=0.5 if clip else 0.0, proj_clip=0.3 if clip and proj else 0.0)
    # layer norm over one value is (x - x) / eps: 0 exactly in both
    _compare(path, seed=seed + 1, atol=2e-5)


@pytest.mark.parametrize("kw", [dict(), dict(peephole=True, projection=True, proj_bias=True,
                                             P=3, layer_norm=True)])
def test_sequence_lstm_hybrid_int8_weights(tmp_path, kw):
    """int8 weights (one scale each), float input: dequantized once at
    import.  pyarena then computes the float model those weights stand for
    -- equal to the interpreter on that float model -- while TFLite's hybrid
    kernel also rounds x and h to int8 at every step: close, not equal."""
    base = dict(H=6, I=5, S=6, seed=14, **kw)
    path = _lstm_model(tmp_path / "q.tflite", hybrid="int8", **base)
    fpath = _lstm_model(tmp_path / "f.tflite", hybrid="float", **base)
    g = load_model(path)
    # the weights are held once: only the stacked float32 constants
    consts = [t for t in g.tensors.values() if t.role == "constant"]
    assert {np.dtype(t.dtype) for t in consts} == {np.dtype(np.float32)}
    assert all(n.startswith("unidirectional_sequence_lstm_0/") for n in
               (t.name for t in consts))
    ex = Executor(g, plan(g))
    x = np.random.default_rng(15).standard_normal(g.tensors["x"].shape).astype(np.float32)
    y = ex.run({"x": x})["y"]
    ref_f, _ = reference_tflite(fpath, {"x": x})
    np.testing.assert_allclose(y, ref_f["y"], rtol=1e-4, atol=1e-5)
    ref_q, why = reference_tflite(path, {"x": x})
    assert ref_q is not None, why
    err = np.abs(y - ref_q["y"]).max()
    assert 0 < err < 0.03, err      # the int8 rounding of x and h, no more


@pytest.mark.parametrize("kw, why", [
    (dict(act=6), "fused activation"),
    (dict(state=np.ones((2, 4), np.float32)), "not a variable tensor")])
def test_sequence_lstm_refused_by_name(tmp_path, kw, why):
    path = _lstm_model(tmp_path / "r.tflite", **kw)
    with pytest.raises(UnsupportedOpError, match=f"UNIDIRECTIONAL_SEQUENCE_LSTM.*{why}"):
        load_model(path)



def _bilstm_model(path, S=5, N=2, I=3, H=4, P=None, time_major=True, merge=True, seed=0,
                  act=4, cell_clip=0.0, proj_clip=0.0, aux=False, bw=None, scale=0.5, **kw):
    """One BIDIRECTIONAL_SEQUENCE_LSTM: forward gates at inputs 1-17,
    backward 18-34 (``bw``: other options for them), states 35-38."""
    r = np.random.default_rng(seed)
    f = lambda *s: (r.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    P = P if kw.get("projection") and P else H
    B = TFLiteBuilder()
    x = B.tensor("x", (S, N, I) if time_major else (N, S, I))
    ins = [x] + _gates(B, f, "fw", I, H, P, **kw) + _gates(B, f, "bw", I, H, P, **(kw if bw is None else bw))
    for d in ("fw", "bw"):
        ins += [B.tensor(f"{d}h0", (N, P), variable=True),
                B.tensor(f"{d}c0", (N, H), variable=True)]
    ins += [B.const("aux", f(*((S, N, I) if time_major else (N, S, I))))] if aux else [-1]
    ins += [-1] * 8
    seq = (S, N) if time_major else (N, S)
    ys = [B.tensor("y", seq + (2 * P,))] if merge else \
        [B.tensor("y", seq + (P,)), B.tensor("y_bw", seq + (P,))]
    B.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, ys, ("BidirectionalSequenceLSTMOptions", dict(
        FusedActivationFunction=act, CellClip=cell_clip, ProjClip=proj_clip,
        MergeOutputs=merge, TimeMajor=time_major)))
    return B.save(path, [x], ys)


def _compare_bi(path, seed, atol=1e-5, **kw):
    """pyarena's outputs against the interpreter's.  Batch-major with
    merged outputs, the interpreter offsets the backward state by the
    merged width (b * 2P in a [batch, P] tensor: past its end for batch >
    1), so the reference is then its unmerged outputs side by side."""
    bad = kw.get("merge", True) and not kw.get("time_major", True)
    path = _bilstm_model(path, seed=seed, **kw)
    ref_path = _bilstm_model(f"{path}.ref", seed=seed, **dict(kw, merge=False)) if bad else path
    g = load_model(path)
    assert [op.op_type for op in g.ops] == ["LSTM"]
    assert g.ops[0].attrs["direction"] == "bidirectional"
    x = np.random.default_rng(seed + 1).standard_normal(g.tensors["x"].shape)
    out = Executor(g, plan(g)).run({"x": x.astype(np.float32)})
    ref, why = reference_tflite(ref_path, {"x": x})
    assert ref is not None, why
    if bad:
        ref = {"y": np.concatenate([ref["y"], ref["y_bw"]], axis=-1)}
    assert sorted(out) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=atol)
    return out


@pytest.mark.parametrize("time_major", [True, False])
@pytest.mark.parametrize("merge", [True, False])
def test_bidirectional_lstm_matches_interpreter(tmp_path, time_major, merge):
    out = _compare_bi(tmp_path / "bi.tflite", 20, time_major=time_major, merge=merge,
                      peephole=True)
    seq = (5, 2) if time_major else (2, 5)
    if merge:
        assert out["y"].shape == seq + (8,)
    else:
        assert out["y"].shape == out["y_bw"].shape == seq + (4,)
        # the backward direction walks from the end: its outputs are not the forward's
        assert not np.allclose(out["y"], out["y_bw"])


def test_bidirectional_lstm_options(tmp_path):
    """CIFG, projection with bias and its clip, cell clip, RELU, both ways."""
    _compare_bi(tmp_path / "bo.tflite", 22, H=5, P=3, cifg=True, projection=True,
                proj_bias=True, proj_clip=0.4, cell_clip=0.6, act=1, merge=False,
                time_major=False)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(S=st.integers(1, 5), N=st.integers(1, 3), I=st.integers(1, 4), H=st.integers(1, 5),
       P=st.integers(1, 4), flags=st.lists(st.booleans(), min_size=6, max_size=6),
       seed=st.integers(0, 2**16))
def test_bidirectional_lstm_property(tmp_path, S, N, I, H, P, flags, seed):
    tm, merge, peep, cifg, proj, pbias = flags
    _compare_bi(tmp_path / f"b{seed}.tflite", seed, atol=2e-5, S=S, N=N, I=I, H=H, P=P,
                time_major=tm, merge=merge, peephole=peep, cifg=cifg, projection=proj,
                proj_bias=pbias)


def test_bidirectional_lstm_hybrid(tmp_path):
    """Time-major: the interpreter's hybrid bidirectional kernel reads every
    input as time-major."""
    path = _bilstm_model(tmp_path / "bq.tflite", hybrid="int8", seed=24, H=6, I=5)
    fpath = _bilstm_model(tmp_path / "bf.tflite", hybrid="float", seed=24, H=6, I=5)
    g = load_model(path)
    ex = Executor(g, plan(g))
    x = np.random.default_rng(25).standard_normal(g.tensors["x"].shape).astype(np.float32)
    y = ex.run({"x": x})["y"]
    np.testing.assert_allclose(y, reference_tflite(fpath, {"x": x})[0]["y"], rtol=1e-4,
                               atol=1e-5)
    assert np.abs(y - reference_tflite(path, {"x": x})[0]["y"]).max() < 0.03


@pytest.mark.parametrize("kw, why", [
    (dict(aux=True), "auxiliary input"),
    (dict(peephole=True, bw=dict()), "directions differ: P"),
    (dict(act=3), "fused activation")])
def test_bidirectional_lstm_refused_by_name(tmp_path, kw, why):
    path = _bilstm_model(tmp_path / "br.tflite", **kw)
    with pytest.raises(UnsupportedOpError, match=f"BIDIRECTIONAL_SEQUENCE_LSTM.*{why}"):
        load_model(path)


def test_sequence_lstm_wrong_gate_shape_is_named(tmp_path):
    from pyarena.errors import ModelImportError
    r = np.random.default_rng(0)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    B = TFLiteBuilder()
    x = B.tensor("x", (5, 2, 3))
    ins = [x] + _gates(B, f, "", 3, 4, 4)
    ins[13] = B.const("long_bias", f(5))        # the forget gate's bias, n_cell + 1
    ins += [B.tensor("h0", (2, 4), variable=True), B.tensor("c0", (2, 4), variable=True)]
    y = B.tensor("y", (5, 2, 4))
    B.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins + [-1] * 4, [y], (
        "UnidirectionalSequenceLSTMOptions", dict(FusedActivationFunction=4, TimeMajor=True)))
    path = B.save(tmp_path / "bad.tflite", [x], [y])
    with pytest.raises(ModelImportError,
                       match=r"'long_bias' \(input 13\) has shape \[5\]; \[4\]"):
        load_model(path)
