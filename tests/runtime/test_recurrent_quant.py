"""onnxruntime's DynamicQuantizeLSTM (runtime/kernels/recurrent_quant.py):
X and h quantized to 8 bits as onnxruntime does, exact integer products
with the 8-bit W and R, float32 scaling in onnxruntime's order.

Checked against onnxruntime's own kernel (equal but for the gate
activations' last ulps), the C core's 8-bit GEMM against the NumPy path
(bit for bit), and zero points onnxruntime does not take (uint8 weights)
against a reference written here from onnxruntime's arithmetic."""
import numpy as np
import onnx
import pytest
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.errors import UnsupportedOpError
from pyarena.importers import load_model
from pyarena.planning import plan
from pyarena.runtime import Executor

ULPS = 0.0         # the same bits as onnxruntime


def _weights(rng, d, inner, H, per_column, dtype=np.int8, zero_points=False):
    lo, hi = (-100, 100) if dtype == np.int8 else (0, 255)
    q = rng.integers(lo, hi, (d, inner, 4 * H)).astype(dtype)
    cols = (d, 4 * H) if per_column else (d,)
    scale = rng.uniform(0.005, 0.02, cols).astype(np.float32)
    zero = (rng.integers(100, 140, cols) if zero_points else np.zeros(cols)).astype(dtype)
    return q, scale, zero


def _model(path, S, N, I, H, direction="forward", per_column=False, seed=0, lens=None,
           initial=False, outputs=("y", "yh", "yc"), dtype=np.int8, zero_points=False,
           peepholes=False):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    w, ws, wz = _weights(rng, d, I, H, per_column, dtype, zero_points)
    r, rs, rz = _weights(rng, d, H, H, per_column, dtype, zero_points)
    inits = {"w": w, "r": r, "b": rng.uniform(-0.5, 0.5, (d, 8 * H)).astype(np.float32),
             "ws": ws, "wz": wz, "rs": rs, "rz": rz}
    feeds = {"x": rng.uniform(-1, 1, (S, N, I)).astype(np.float32)}
    ins = ["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"]
    if lens is not None:
        inits["lens"], ins[4] = np.asarray(lens, np.int32), "lens"
    if initial:
        inits["h0"] = rng.uniform(-1, 1, (d, N, H)).astype(np.float32)
        inits["c0"] = rng.uniform(-1, 1, (d, N, H)).astype(np.float32)
        ins[5], ins[6] = "h0", "c0"
    if peepholes:
        inits["p"], ins[7] = rng.uniform(-0.5, 0.5, (d, 3 * H)).astype(np.float32), "p"
    names = [o if o in outputs else "" for o in ("y", "yh", "yc")]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("DynamicQuantizeLSTM", ins, names, domain="com.microsoft",
                            name="the_lstm", hidden_size=H, direction=direction)
    m = make_model([node], {"x": ([S, N, I], np.float32)},
                   {o: (None, np.float32) for o in names if o}, inits, opset=14)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(path))
    return {k: v for k, v in inits.items()}, feeds


def _ours(path, feeds, native=True):
    g = load_model(str(path), native=native)
    assert [op.op_type for op in g.ops] == ["DynamicQuantizeLSTM"]
    return Executor(g, plan(g)).run(feeds)


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("batch", [1, 3])
def test_equals_onnxruntime(tmp_path, direction, per_column, batch):
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 7, batch, 24, 16, direction, per_column, seed=batch)
    ref, ours = ort_run(path, feeds), _ours(path, feeds)
    for k in ref:
        np.testing.assert_allclose(ours[k], ref[k], rtol=0, atol=ULPS, err_msg=k)


@pytest.mark.parametrize("case", ["initial", "peepholes", "y only", "yh only"])
def test_options_equal_onnxruntime(tmp_path, case):
    kw = {"initial": dict(initial=True), "peepholes": dict(peepholes=True),
          "y only": dict(outputs=("y",)), "yh only": dict(outputs=("yh",))}[case]
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 6, 2, 12, 8, "bidirectional", seed=5, **kw)
    ref, ours = ort_run(path, feeds), _ours(path, feeds)
    assert set(ref) == set(ours)
    for k in ref:
        np.testing.assert_allclose(ours[k], ref[k], rtol=0, atol=ULPS, err_msg=k)


@pytest.mark.parametrize("outputs", [("y", "yh", "yc"), ("yh", "yc")])
def test_sequence_lens_forward(tmp_path, outputs):
    """Forward, entries of unequal lengths: onnxruntime quantizes X over
    the steps it runs, and h with the finished rows read from Y (zeros)
    or from the final state."""
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 6, 3, 10, 8, lens=[6, 2, 4], seed=2, outputs=outputs)
    ref, ours = ort_run(path, feeds), _ours(path, feeds)
    for k in ref:
        np.testing.assert_allclose(ours[k], ref[k], rtol=0, atol=ULPS, err_msg=k)


def test_short_sequences_quantize_only_the_steps_run(tmp_path):
    """Every entry shorter than X: the steps past the longest are not in
    X's range (a large value there would change its scale)."""
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 5, 2, 10, 8, lens=[3, 3], seed=4)
    feeds["x"][3:] = 50.0
    ref, ours = ort_run(path, feeds), _ours(path, feeds)
    for k in ref:
        np.testing.assert_allclose(ours[k], ref[k], rtol=0, atol=ULPS, err_msg=k)


@settings(max_examples=15, deadline=None)
@given(S=st.integers(1, 6), N=st.integers(1, 4), I=st.integers(1, 40), H=st.integers(1, 20),
       bidi=st.booleans(), per_column=st.booleans(), uint8=st.booleans(),
       seed=st.integers(0, 2**16))
def test_native_product_is_the_numpy_one(tmp_path_factory, S, N, I, H, bidi, per_column,
                                         uint8, seed):
    """The C core's 8-bit GEMM and NumPy's float64 product are both exact:
    the outputs agree bit for bit, with int8 and uint8 weights."""
    path = tmp_path_factory.mktemp("q") / "q.onnx"
    _, feeds = _model(path, S, N, I, H, "bidirectional" if bidi else "forward", per_column,
                      seed, dtype=np.uint8 if uint8 else np.int8, zero_points=uint8)
    native, numpy = _ours(path, feeds), _ours(path, feeds, native=False)
    g = load_model(str(path), native=False)
    assert Executor(g, plan(g)).kernels[0].path == "numpy"      # the other path indeed
    for k in native:
        np.testing.assert_array_equal(native[k], numpy[k], err_msg=k)


def _qparams(a):
    f = np.float32
    lo, hi = min(f(a.min()), f(0)), max(f(a.max()), f(0))
    scale = f(1) if hi == lo else f((hi - lo) / f(255))
    return scale, f(np.rint(np.clip(f(0) - lo / scale, 0, 255)))


def _reference(x, q, H):
    """DynamicQuantizeLSTM forward, written from onnxruntime's
    uni_directional_lstm.cc / rnn_helpers.cc arithmetic."""
    f = np.float32
    S, N, _ = x.shape
    sx, zx = _qparams(x)
    qx = np.clip(np.rint(x / sx) + zx, 0, 255) - zx
    W = q["w"][0].astype(np.float64) - q["wz"][0].astype(np.float64)
    R = q["r"][0].astype(np.float64) - q["rz"][0].astype(np.float64)
    xw = (qx.reshape(S * N, -1) @ W).astype(f) * (sx * q["ws"][0]).astype(f)
    bias = (q["b"][0, :4 * H] + q["b"][0, 4 * H:]).astype(f)
    h, c, ys = np.zeros((N, H), f), np.zeros((N, H), f), []
    sig = lambda v: f(1) / (f(1) + np.exp(-v))     # noqa: E731
    for t in range(S):
        sh, zh = _qparams(h)
        qh = np.clip(np.rint(h / sh) + zh, 0, 255) - zh
        g = xw[t * N:(t + 1) * N] + (qh @ R).astype(f) * (sh * q["rs"][0]).astype(f) + bias
        i, o, fg, cc = (g[:, k * H:(k + 1) * H] for k in range(4))
        c = c * sig(fg) + sig(i) * np.tanh(cc)
        h = sig(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys)[:, None]


@pytest.mark.parametrize("per_column", [False, True])
def test_zero_points_against_a_reference(tmp_path, per_column):
    """uint8 weights with zero points (onnxruntime takes int8 with zero
    point 0 only): against the reference above."""
    path = tmp_path / "q.onnx"
    q, feeds = _model(path, 5, 2, 9, 6, per_column=per_column, seed=3, dtype=np.uint8,
                      zero_points=True)
    ours = _ours(path, feeds)
    np.testing.assert_allclose(ours["y"], _reference(feeds["x"], q, 6), rtol=0, atol=1e-5)


def test_weights_stay_eight_bit(tmp_path):
    """The executor keeps no float copy of W or R: its weights arena holds
    far less than the float32 weights would take."""
    path = tmp_path / "q.onnx"
    q, feeds = _model(path, 4, 1, 256, 128, "bidirectional")
    g = load_model(str(path))
    ex = Executor(g, plan(g))
    ex.run(feeds)
    assert ex.kernels[0].path == "native"
    # the few-rows product on W and R packed once
    assert all(w.rows for w in ex.kernels[0].rt + ex.kernels[0].wt)
    float_bytes = 4 * (q["w"].size + q["r"].size)
    assert ex.weights_bytes < float_bytes / 2


def test_computed_weights_are_refused_by_name(tmp_path):
    rng = np.random.default_rng(1)
    r, rs, rz = _weights(rng, 1, 4, 4, False)
    _, ws, wz = _weights(rng, 1, 5, 4, False)
    node = helper.make_node("DynamicQuantizeLSTM",
                            ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"],
                            ["y"], domain="com.microsoft", name="fed_lstm", hidden_size=4)
    m = make_model([node], {"x": ([3, 1, 5], np.float32), "w": ([1, 5, 16], np.int8)},
                   {"y": ([3, 1, 1, 4], np.float32)},
                   {"r": r, "ws": ws, "wz": wz, "rs": rs, "rz": rz}, opset=14)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    path = tmp_path / "fed.onnx"
    onnx.save(m, str(path))
    with pytest.raises(UnsupportedOpError, match="fed_lstm.*DynamicQuantizeLSTM.*W fed"):
        g = load_model(str(path))
        Executor(g, plan(g))


@pytest.mark.parametrize("batch", [1, 3])
def test_one_call_step_is_the_python_cell(tmp_path, batch):
    """The default gates run each step as one pa_dqlstm_step; the Python
    cell (which options such as peepholes take) gives the same bits."""
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 6, batch, 20, 12, "bidirectional", per_column=True, seed=9,
                      initial=True)
    g = load_model(str(path))
    ex = Executor(g, plan(g))
    k = ex.kernels[0]
    assert k.fast
    fast = {n: a.copy() for n, a in ex.run(feeds).items()}
    k.fast = False
    cell = ex.run(feeds)
    for n in fast:
        np.testing.assert_array_equal(fast[n], cell[n], err_msg=n)
    np.testing.assert_array_equal(fast["y"], ort_run(path, feeds)["y"])


@pytest.mark.parametrize("lens, direction, expected", [
    (None, "bidirectional", {"run": 2, "step": 0}),
    ([4, 2, 3], "forward", {"run": 0, "step": 4})])
def test_a_direction_is_one_c_call(tmp_path, monkeypatch, lens, direction, expected):
    """Without sequence_lens a direction's steps run in one pa_dqlstm_run
    (no step called from Python); with them, one pa_dqlstm_step a step.
    Both equal onnxruntime."""
    from pyarena._native import dqlstm
    path = tmp_path / "q.onnx"
    _, feeds = _model(path, 4, 3, 10, 8, direction, seed=4, lens=lens)
    g = load_model(str(path))
    ex = Executor(g, plan(g))
    calls = {"run": 0, "step": 0}
    for name in calls:
        def counted(*a, _fn=getattr(dqlstm, name), _name=name):
            calls[_name] += 1
            return _fn(*a)
        monkeypatch.setattr(dqlstm, name, counted)
    out = ex.run(feeds)
    assert calls == expected
    np.testing.assert_array_equal(out["y"], ort_run(path, feeds)["y"])
