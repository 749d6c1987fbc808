"""The float32 LSTM's time loop in the C core (runtime/kernels/
recurrent_native.py, kernels/lstm.c): taken exactly where it applies, and
then the same outputs as the NumPy cell (``native=False``) and as
onnxruntime, for each direction x layout x bias x initial state x omitted
output x batch; a model it does not apply to keeps the NumPy cell."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor

S, I, H = 7, 5, 6
OUTS = ("Y", "Y_h", "Y_c")


def _model(path, vals, constant, outs=OUTS, **attrs):
    slots = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
    names = [s if s in vals else "" for s in slots]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("LSTM", names, list(outs), hidden_size=H, **attrs)
    feeds = {k: v for k, v in vals.items() if k not in constant}
    make_model([node], {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
               {o: (None, np.float32) for o in outs if o},
               {k: v for k, v in vals.items() if k in constant}, opset=14, path=path)
    return feeds


def _vals(nd, n, seed, bias=True, init=False, layout=0, peep=False):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)    # noqa: E731
    v = {"X": f(S, n, I) if layout == 0 else f(n, S, I), "W": f(nd, 4 * H, I),
         "R": f(nd, 4 * H, H)}
    if bias:
        v["B"] = f(nd, 8 * H)
    if init:
        st = (nd, n, H) if layout == 0 else (n, nd, H)
        v["initial_h"], v["initial_c"] = f(*st), f(*st)
    if peep:
        v["P"] = f(nd, 3 * H)
    return v


def _run(path, feeds, native=True):
    ex = Executor(load_model(str(path), native=native))
    return ex, ex.run(feeds)


CASES = [   # (direction, layout, batch, bias, initial states, outputs)
    ("forward", 0, 1, True, False, OUTS),
    ("reverse", 0, 3, True, True, OUTS),
    ("bidirectional", 0, 2, False, True, OUTS),
    ("bidirectional", 0, 4, True, False, ("", "Y_h", "")),
    ("forward", 1, 3, True, True, OUTS),
    ("bidirectional", 1, 2, True, False, ("Y", "", "Y_c")),
    ("reverse", 1, 1, False, True, ("Y",)),
]


@pytest.mark.parametrize("direction,layout,n,bias,init,outs", CASES)
def test_native_loop_is_the_numpy_cell_and_onnxruntime(tmp_path, direction, layout, n, bias,
                                                       init, outs):
    nd = 2 if direction == "bidirectional" else 1
    vals = _vals(nd, n, seed=n + layout, bias=bias, init=init, layout=layout)
    feeds = _model(tmp_path / "m.onnx", vals, ("W", "R", "B"), outs, direction=direction,
                   layout=layout)
    ex, ours = _run(tmp_path / "m.onnx", feeds)
    assert ex.kernels[0].native_loop
    assert "xw" not in ex.kernels[0].part_names        # no projection held
    plain, theirs = _run(tmp_path / "m.onnx", feeds, native=False)
    assert not plain.kernels[0].native_loop
    assert set(ours) == set(theirs) == {o for o in outs if o}
    for k in ours:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=2e-6, err_msg=k)
    if layout == 0:     # onnxruntime runs layout 0 only; layout 1 is held to the cell
        ref = ort_run(tmp_path / "m.onnx", feeds)
        for k in ours:
            np.testing.assert_allclose(ours[k], ref[k], rtol=1e-5, atol=2e-6, err_msg=k)


def test_a_stream_of_single_steps_carries_the_state(tmp_path):
    """One step per call, the state fed back (a streaming model): the same
    as the whole sequence in one call."""
    vals = _vals(1, 2, seed=9, init=True)
    whole = _model(tmp_path / "whole.onnx", vals, ("W", "R", "B"))
    _, ref = _run(tmp_path / "whole.onnx", whole)
    one = dict(vals, X=vals["X"][:1])
    _model(tmp_path / "step.onnx", one, ("W", "R", "B"))
    ex = Executor(load_model(str(tmp_path / "step.onnx")))
    assert ex.kernels[0].native_loop
    h, c = vals["initial_h"], vals["initial_c"]
    for t in range(S):
        out = ex.run({"X": vals["X"][t:t + 1], "initial_h": h, "initial_c": c})
        np.testing.assert_allclose(out["Y"][0], ref["Y"][t], rtol=1e-6, atol=1e-6)
        h, c = out["Y_h"].copy(), out["Y_c"].copy()
    np.testing.assert_allclose(h, ref["Y_h"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(c, ref["Y_c"], rtol=1e-6, atol=1e-6)


LEFT = {    # what keeps the NumPy cell: (constant operands, extra operands, attributes)
    "fed weights": ((), {}, {}),
    "peepholes": (("W", "R", "B", "P"), {"peep": True}, {}),
    "clip": (("W", "R", "B"), {}, {"clip": 0.5}),
    "input_forget": (("W", "R", "B"), {}, {"input_forget": 1}),
    "activations": (("W", "R", "B"), {}, {"activations": ["HardSigmoid", "Tanh", "Tanh"]}),
}


@pytest.mark.parametrize("what", sorted(LEFT))
def test_other_lstms_keep_the_numpy_cell(tmp_path, what):
    constant, extra, attrs = LEFT[what]
    vals = _vals(1, 2, seed=4, **extra)
    feeds = _model(tmp_path / "m.onnx", vals, constant, **attrs)
    ex, ours = _run(tmp_path / "m.onnx", feeds)
    assert not ex.kernels[0].native_loop
    ref = ort_run(tmp_path / "m.onnx", feeds)
    for k in ours:
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_sequence_lens_keeps_the_numpy_cell(tmp_path):
    vals = dict(_vals(1, 3, seed=5), sequence_lens=np.array([7, 2, 0], np.int32))
    feeds = _model(tmp_path / "m.onnx", vals, ("W", "R", "B", "sequence_lens"))
    ex, _ = _run(tmp_path / "m.onnx", feeds)
    assert not ex.kernels[0].native_loop


def test_nan_and_inf_reach_the_same_outputs_as_in_the_cell(tmp_path):
    """A NaN and an infinity in X: NaN where the NumPy cell has NaN (its
    row from that step on), the finite values as the cell's."""
    vals = _vals(2, 3, seed=11, init=True)
    vals["X"][2, 0, 1], vals["X"][4, 2, 3] = np.nan, np.inf
    feeds = _model(tmp_path / "m.onnx", vals, ("W", "R", "B"), direction="bidirectional")
    ex, ours = _run(tmp_path / "m.onnx", feeds)
    assert ex.kernels[0].native_loop
    _, theirs = _run(tmp_path / "m.onnx", feeds, native=False)
    for k in ours:
        np.testing.assert_array_equal(np.isnan(ours[k]), np.isnan(theirs[k]), err_msg=k)
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-5, atol=2e-6, err_msg=k)
    assert np.isnan(ours["Y"][2:, 0, 0]).all() and np.isfinite(ours["Y"][:, 0, 1]).all()


@pytest.mark.parametrize("steps,n", [(3, 0), (0, 2)])
def test_an_empty_batch_or_sequence(tmp_path, steps, n):
    """A batch of 0 (the op's scratch parts all empty: no buffer is
    planned) or a sequence of 0 steps: empty outputs, or the initial state,
    as the cell gives them."""
    rng = np.random.default_rng(12)
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)    # noqa: E731
    vals = {"X": f(steps, n, I), "W": f(1, 4 * H, I), "R": f(1, 4 * H, H),
            "initial_h": f(1, n, H), "initial_c": f(1, n, H)}
    feeds = _model(tmp_path / "m.onnx", vals, ("W", "R"))
    ex, ours = _run(tmp_path / "m.onnx", feeds)
    # (a batch of 0: every output empty, nothing to compute, no kernel set up)
    assert ex.kernels[0].native_loop if n else type(ex.kernels[0]).__name__ == "NothingToWrite"
    _, theirs = _run(tmp_path / "m.onnx", feeds, native=False)
    assert ours["Y"].shape == theirs["Y"].shape == (steps, 1, n, H)
    for k in ("Y_h", "Y_c"):
        np.testing.assert_array_equal(ours[k], theirs[k])
    if steps == 0:      # no step taken: the state as given
        np.testing.assert_array_equal(ours["Y_h"], vals["initial_h"])
        np.testing.assert_array_equal(ours["Y_c"], vals["initial_c"])
