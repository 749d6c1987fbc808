"""The recurrent kernels (LSTM, GRU, RNN): every ONNX backend node case of
the three ops, then models built here for each direction x layout x
sequence_lens x clip x peepholes x initial state x omitted output against
onnxruntime, then the errors.

onnxruntime runs ``layout=0`` only: a ``layout=1`` model is checked
against its ``layout=0`` twin (the same weights, X and the states
transposed) and the twin's outputs transposed back."""
import re

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from helpers.model_zoo import ort_run
from helpers.node_cases import case_dir, node_case_names, read_data
from helpers.onnx_util import make_model
from pyarena import Pool, numpy_allocator
from pyarena.errors import GraphError, UnsupportedOpError
from pyarena.importers import load_model
from pyarena.planning import plan
from pyarena.runtime import Executor

RTOL, ATOL = 1e-5, 1e-6

# -- the ONNX backend node cases ------------------------------------------------
NODE_CASE = re.compile(r"test_(lstm|gru|rnn|simple_rnn)_\w+")
MODULES = ("lstm", "gru", "rnn")
NODE_CASES = node_case_names(NODE_CASE, MODULES)


def test_the_backend_node_cases_are_found():
    assert len(NODE_CASES) >= 18
    for op in ("lstm", "gru", "rnn"):
        assert any(op in n for n in NODE_CASES), op


@pytest.mark.parametrize("weights", ["fed", "constant"])
@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_backend_node_case(tmp_path, name, weights):
    """Imported, planned and run as written (every operand a graph input,
    fed at run time), and with every operand but X made an initializer."""
    d = case_dir(name, tmp_path, NODE_CASE, MODULES)
    model = onnx.load(str(d / "model.onnx"))
    ins, refs = read_data(d)
    path = d / "model.onnx"
    if weights == "constant":
        x = model.graph.input[0].name
        for vi in list(model.graph.input)[1:]:
            model.graph.initializer.append(numpy_helper.from_array(ins.pop(vi.name),
                                                                   vi.name))
        path = tmp_path / f"{name}_constant.onnx"
        onnx.save(model, str(path))
        assert list(ins) == [x]
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] in (["LSTM"], ["GRU"], ["RNN"])
    out = Executor(g, plan(g)).run(ins)
    assert {n for n, _ in refs} == set(out)
    for n, r in refs:
        np.testing.assert_allclose(out[n], r, rtol=RTOL, atol=ATOL, err_msg=f"{name}: {n}")


# -- models built here, against onnxruntime ---------------------------------------
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTPUTS = {"LSTM": ("Y", "Y_h", "Y_c"), "GRU": ("Y", "Y_h"), "RNN": ("Y", "Y_h")}
S, N, I, H = 5, 3, 4, 6


def _operands(op, direction, seed, lens=None, init=False, peep=False, bias=True):
    """Layout-0 operands by input slot name (X [S, N, I], states [dirs, N, H])."""
    rng = np.random.default_rng(seed)
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)   # noqa: E731
    v = {"X": f(S, N, I), "W": f(nd, g * H, I), "R": f(nd, g * H, H)}
    if bias:
        v["B"] = f(nd, 2 * g * H)
    if lens is not None:
        v["sequence_lens"] = np.asarray(lens, np.int32)
    if init:
        v["initial_h"] = f(nd, N, H)
        if op == "LSTM":
            v["initial_c"] = f(nd, N, H)
    if peep:
        v["P"] = f(nd, 3 * H)
    return v


SLOTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
BATCH_FIRST = ("X", "initial_h", "initial_c")      # swap axes 0, 1 for layout 1


def _save(path, op, vals, outs, constant, layout=0, **attrs):
    """One-node model: the operands in ``constant`` are initializers, the
    others graph inputs; returns the feeds."""
    names = [s if s in vals else "" for s in SLOTS]
    while names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, list(outs), hidden_size=H, layout=layout, **attrs)
    feeds = {k: v for k, v in vals.items() if k not in constant}
    inits = {k: v for k, v in vals.items() if k in constant}
    make_model([node], {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
               {o: (None, np.float32) for o in outs if o}, inits, opset=14, path=path)
    return feeds


def check_against_ort(tmp_path, op, vals, *, layout=0, outs=None, constant=(),
                      scratch_budget=None, **attrs):
    """pyarena on the model (in ``layout``), onnxruntime on its layout-0 twin;
    returns pyarena's executor, feeds and outputs."""
    outs = OUTPUTS[op] if outs is None else outs
    twin = tmp_path / "twin.onnx"
    ref = ort_run(twin, _save(twin, op, vals, outs, constant, **attrs))
    if layout == 1:
        vals = {k: v.swapaxes(0, 1).copy() if k in BATCH_FIRST else v for k, v in vals.items()}
        ref = {k: v.transpose(2, 0, 1, 3) if k == "Y" else v.swapaxes(0, 1)
               for k, v in ref.items()}
    path = tmp_path / "model.onnx"
    feeds = _save(path, op, vals, outs, constant, layout=layout, **attrs)
    g = load_model(str(path), scratch_budget=scratch_budget)
    ex = Executor(g)
    ours = ex.run(feeds)
    assert set(ours) == {o for o in outs if o}
    for k, r in ref.items():
        assert ours[k].shape == r.shape, k
        np.testing.assert_allclose(ours[k], r, rtol=RTOL, atol=ATOL, err_msg=k)
    return ex, feeds, ours


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_plain_against_onnxruntime(tmp_path, op, direction, layout):
    vals = _operands(op, direction, seed=1)
    check_against_ort(tmp_path, op, vals, layout=layout, direction=direction)


# (sequence_lens, initial states, clip, peepholes, constant operands, outputs)
VARIANTS = {
    "lens": ([5, 3, 1], True, None, False, (), None),
    "lens-zero-clip": ([2, 0, 5], True, 0.6, True, ("W", "R", "B", "P"), None),
    "lens-constant": ([4, 5, 2], False, None, True,
                      ("W", "R", "B", "sequence_lens", "P"), None),
    "full-lens-constant": ([5, 5, 5], True, 0.8, True, ("sequence_lens", "initial_h"), None),
    "only-y": ([1, 2, 3], True, None, True, (), ("Y",)),
    "no-y": (None, True, 0.5, True, (), ("", "Y_h", "Y_c")),
    "last-only": ([3, 5, 4], False, None, False, ("W",), ("", "", "Y_c")),
}


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_options_against_onnxruntime(tmp_path, op, direction, layout, variant):
    lens, init, clip, peep, constant, outs = VARIANTS[variant]
    peep = peep and op == "LSTM"
    if outs is not None and op != "LSTM":
        outs = tuple(o for o in outs if o != "Y_c")
        if not any(outs):
            outs = ("", "Y_h")
    vals = _operands(op, direction, seed=2, lens=lens, init=init, peep=peep)
    attrs = {} if clip is None else {"clip": clip}
    check_against_ort(tmp_path, op, vals, layout=layout, outs=outs,
                      constant=[c for c in constant if c in vals], direction=direction,
                      **attrs)


ACTIVATION_CASES = [
    ("LSTM", dict(activations=["HardSigmoid", "LeakyRelu", "Softsign"],
                  activation_alpha=[0.3, 0.05], activation_beta=[0.4])),
    ("LSTM", dict(activations=["Sigmoid", "Elu", "Softplus"], activation_alpha=[0.7])),
    ("LSTM", dict(activations=["HardSigmoid", "LeakyRelu", "Elu"])),    # their defaults
    ("LSTM", dict(input_forget=1)),
    ("LSTM", dict(input_forget=1, direction="bidirectional", clip=0.5)),
    ("GRU", dict(linear_before_reset=1)),
    ("GRU", dict(linear_before_reset=1, direction="bidirectional", clip=0.4)),
    ("GRU", dict(activations=["Sigmoid", "ScaledTanh"], activation_alpha=[1.5],
                 activation_beta=[0.7])),
    ("GRU", dict(activations=["Sigmoid", "Affine", "HardSigmoid", "Relu"],
                 activation_alpha=[0.5, 0.3], activation_beta=[0.1, 0.6],
                 direction="bidirectional")),
    ("RNN", dict(activations=["ThresholdedRelu"], activation_alpha=[0.2])),
    ("RNN", dict(activations=["Relu", "Softplus"], direction="bidirectional")),
    ("RNN", dict(activations=["Elu"], activation_alpha=[0.4], clip=0.9)),
]


@pytest.mark.parametrize("lens", [None, [4, 1, 5]])
@pytest.mark.parametrize("op,attrs", ACTIVATION_CASES,
                         ids=[f"{o}-{i}" for i, (o, _) in enumerate(ACTIVATION_CASES)])
def test_activations_and_gate_options_against_onnxruntime(tmp_path, op, attrs, lens):
    vals = _operands(op, attrs.get("direction", "forward"), seed=3, lens=lens, init=True)
    check_against_ort(tmp_path, op, vals, **attrs)


def test_activation_defaults_are_the_onnx_operators():
    """ThresholdedRelu (alpha 1), Affine (1, 0), ScaledTanh (1, 1: tanh) when
    no alpha / beta is given (onnxruntime takes 0 for these three)."""
    from pyarena.runtime.kernels.recurrent import ACTIVATIONS
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    want = {"thresholdedrelu": np.where(x > 1, x, 0), "affine": x, "scaledtanh": np.tanh(x),
            "leakyrelu": np.where(x >= 0, x, 0.01 * x), "elu": np.where(x >= 0, x, np.expm1(x)),
            "hardsigmoid": np.clip(0.2 * x + 0.5, 0, 1)}
    for name, w in want.items():
        make, a, b = ACTIVATIONS[name]
        y, t = x.copy(), np.empty_like(x)
        make(a, b, lambda v: np.array(v, np.float32))(y, t)
        np.testing.assert_allclose(y, w, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_projection_in_blocks_of_steps_without_allocation(tmp_path, op):
    """A scratch budget too small for the whole sequence's X @ W^T: the
    projection runs in blocks of steps (one here); the same answers, no
    NumPy allocation after the first run, and a second input (other
    sequence lengths) is answered too."""
    vals = _operands(op, "bidirectional", seed=4, lens=[5, 2, 0], init=True,
                     peep=op == "LSTM")
    ex, feeds, _ = check_against_ort(tmp_path, op, vals, direction="bidirectional",
                                     scratch_budget=256, clip=2.0)
    assert ex.kernels[0].steps == 1
    full = load_model(str(tmp_path / "model.onnx"))
    assert Executor(full, plan(full)).kernels[0].steps == S      # the default rule
    feeds2 = {k: (v * 0.5 if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    # an entry that ran in the first inference is empty in the second: its
    # Y_h / Y_c become 0, not what the planned output held from before
    feeds2["sequence_lens"] = np.array([0, 5, 3], np.int32)
    with numpy_allocator(Pool()) as counter:
        ours = ex.run(feeds2)
    assert counter.allocations == 0
    ref = ort_run(tmp_path / "twin.onnx", feeds2)
    for k, r in ref.items():
        np.testing.assert_allclose(ours[k], r, rtol=RTOL, atol=ATOL, err_msg=k)


def test_omitted_outputs_take_no_memory(tmp_path):
    vals = _operands("LSTM", "forward", seed=5)
    ex, _, _ = check_against_ort(tmp_path, "LSTM", vals, outs=("", "Y_h"))
    g = ex.graph
    assert g.ops[0].outputs == ["", "Y_h"]
    assert set(g.tensors) == set(SLOTS[:4]) | {"Y_h"}
    with_y, _, _ = check_against_ort(tmp_path, "LSTM", vals, outs=("Y", "Y_h"))
    assert ex.plan.arena_bytes + 4 * S * N * H <= with_y.plan.arena_bytes


def test_a_y_nothing_reads_is_left_out_at_import(tmp_path):
    """A model that names Y but reads only Y_h (a classifier on the last
    state): the importer omits Y, as the kernel allows, so it takes no memory."""
    vals = _operands("GRU", "bidirectional", seed=8, lens=[3, 5, 1])
    path = tmp_path / "model.onnx"
    node = helper.make_node("GRU", list(SLOTS[:5]), ["Y", "Y_h"], hidden_size=H,
                            direction="bidirectional")
    relu = helper.make_node("Relu", ["Y_h"], ["out"])
    make_model([node, relu], {k: (list(v.shape), v.dtype) for k, v in vals.items()},
               {"out": (None, np.float32)}, opset=14, path=path)
    g = load_model(str(path))
    assert g.ops[0].outputs == ["", "Y_h"] and "Y" not in g.tensors
    out = Executor(g).run(vals)["out"]
    np.testing.assert_allclose(out, ort_run(path, vals)["out"], rtol=RTOL, atol=ATOL)


def test_stacked_bidirectional_layers_as_exported(tmp_path):
    """Two bidirectional LSTM layers joined the way exporters write them
    (Y [S, 2, N, H] -> Transpose -> Reshape [S, N, 2H]), then a GRU on the
    result and a Tanh on its Y_h: the Reshapes alias, the Tanh runs in
    place on Y_h, the GRU's unread Y is left out; equal to onnxruntime on
    two different inputs."""
    rng = np.random.default_rng(9)
    f = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)     # noqa: E731
    inits = {"W1": f(2, 4 * H, I), "R1": f(2, 4 * H, H), "B1": f(2, 8 * H),
             "W2": f(2, 4 * H, 2 * H), "R2": f(2, 4 * H, H), "P2": f(2, 3 * H),
             "Wg": f(1, 3 * H, 2 * H), "Rg": f(1, 3 * H, H),
             "shape": np.array([S, N, 2 * H], np.int64)}
    nodes = [helper.make_node("LSTM", ["X", "W1", "R1", "B1"], ["Y1", "h1", "c1"],
                              hidden_size=H, direction="bidirectional"),
             helper.make_node("Transpose", ["Y1"], ["Y1t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["Y1t", "shape"], ["X2"]),
             helper.make_node("LSTM", ["X2", "W2", "R2", "", "", "", "", "P2"], ["Y2"],
                              hidden_size=H, direction="bidirectional", clip=1.5),
             helper.make_node("Transpose", ["Y2"], ["Y2t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["Y2t", "shape"], ["X3"]),
             helper.make_node("GRU", ["X3", "Wg", "Rg"], ["Y3", "h3"], hidden_size=H,
                              linear_before_reset=1),
             helper.make_node("Tanh", ["h3"], ["out"])]
    path = tmp_path / "stacked.onnx"
    make_model(nodes, {"X": ([S, N, I], np.float32)}, {"out": (None, np.float32)},
               inits, opset=14, path=path)
    g = load_model(str(path))
    assert [op.outputs for op in g.ops if op.op_type in ("LSTM", "GRU")] == \
        [["Y1"], ["Y2"], ["", "h3"]]
    ex = Executor(g)
    assert {(r[1], r[2], r[3]) for r in ex.plan.reuses} == {
        ("Y1t", "X2", "alias"), ("Y2t", "X3", "alias"), ("h3", "out", "inplace")}
    for seed in (1, 2):
        x = np.random.default_rng(seed).standard_normal((S, N, I)).astype(np.float32)
        ours = np.array(ex.run({"X": x})["out"])
        np.testing.assert_allclose(ours, ort_run(path, {"X": x})["out"], rtol=RTOL, atol=ATOL)


def test_constant_inputs_are_run_not_folded(tmp_path):
    """Every operand constant: the op still runs (the ONNX reference
    evaluator would ignore direction, clip and sequence_lens)."""
    vals = _operands("GRU", "reverse", seed=6, lens=[2, 5, 3])
    ex, _, _ = check_against_ort(tmp_path, "GRU", vals, direction="reverse", clip=0.5,
                                 constant=list(vals))
    assert [op.op_type for op in ex.graph.ops] == ["GRU"]
    # W and R are in the weights arena once, transposed by the kernel
    assert set(ex.constants) == {"X", "B", "sequence_lens"}
    k = ex.kernels[0]
    assert k.wt.shape == (1, I, 3 * H) and k.rt.shape == (1, H, 3 * H)
    assert ex.weights_bytes < 2 * sum(v.nbytes for v in vals.values())


# -- errors -------------------------------------------------------------------
def _load(tmp_path, op, vals, **attrs):
    path = tmp_path / "bad.onnx"
    _save(path, op, vals, OUTPUTS[op], (), **attrs)
    return load_model(str(path))


def test_wrong_weight_shape_names_the_op(tmp_path):
    vals = _operands("LSTM", "forward", seed=7)
    vals["W"] = vals["W"][:, :-1]          # 4H - 1 rows
    with pytest.raises(GraphError, match=r"LSTM.*W has shape \[1, 23, 4\]; \[1, 24, 4\]"):
        _load(tmp_path, "LSTM", vals)


def test_wrong_state_shape_names_the_op(tmp_path):
    vals = _operands("GRU", "bidirectional", seed=7, init=True)
    vals["initial_h"] = vals["initial_h"][:1]
    with pytest.raises(GraphError, match=r"GRU.*initial_h has shape \[1, 3, 6\]"):
        _load(tmp_path, "GRU", vals, direction="bidirectional")


def test_unknown_activation_is_refused_by_name(tmp_path):
    vals = _operands("RNN", "forward", seed=7)
    with pytest.raises(UnsupportedOpError, match=r"RNN.*activation 'Gelu' is not supported"):
        _load(tmp_path, "RNN", vals, activations=["Gelu"])


def test_wrong_number_of_activations_names_the_op(tmp_path):
    vals = _operands("LSTM", "forward", seed=7)
    with pytest.raises(GraphError, match=r"LSTM.*2 activations; 3 per direction"):
        _load(tmp_path, "LSTM", vals, activations=["Sigmoid", "Tanh"])


def test_unknown_direction_is_refused_by_name(tmp_path):
    from pyarena.graph import Graph
    from pyarena.runtime.kernels import set_scratch
    g = Graph()
    for name, shape in (("X", (S, N, I)), ("W", (1, H, I)), ("R", (1, H, H))):
        g.add_tensor(name, shape, role="input")
    g.add_tensor("Y_h", (1, N, H), role="output")
    g.add_op("RNN", ["X", "W", "R"], ["", "Y_h"], name="rnn", direction="sideways")
    with pytest.raises(UnsupportedOpError, match=r"'rnn' \(RNN\): direction 'sideways'"):
        set_scratch(g)


def _tflite_style_lstm(y_shapes, P=H, **attrs):
    """An LSTM graph with the TFLite import's options (a projection to P)."""
    from pyarena.graph import Graph
    g = Graph()
    for name, shape in (("X", (S, N, I)), ("W", (1, 4 * H, I)), ("R", (1, 4 * H, P))):
        g.add_tensor(name, shape, role="input")
    g.add_tensor("Wp", (1, P, H), role="constant", data=np.ones((1, P, H), np.float32))
    outs = [f"Y{k}" for k in range(len(y_shapes))]
    for name, shape in zip(outs, y_shapes):
        g.add_tensor(name, shape, role="output")
    g.add_op("LSTM", ["X", "W", "R", "", "", "", "", "", "Wp"], outs, name="lstm",
             hidden_size=H, **attrs)
    return g


def test_tflite_output_options_are_checked():
    from pyarena.runtime.kernels import set_scratch
    with pytest.raises(GraphError, match=r"'lstm' \(LSTM\): squeeze_y and split_y together"):
        set_scratch(_tflite_style_lstm([(S, N, 3)], P=3, squeeze_y=1, split_y=1))
    # a projection to P = 3: Y's last axis is P, not H
    with pytest.raises(GraphError, match=r"output 'Y0' has shape \[5, 3, 6\]; \[5, 3, 3\]"):
        set_scratch(_tflite_style_lstm([(S, N, H)], P=3, squeeze_y=1))
    with pytest.raises(GraphError, match=r"'lstm' \(LSTM\): 2 outputs; at most 1 expected"):
        set_scratch(_tflite_style_lstm([(S, N, 3)] * 2, P=3, split_y=1))


def test_a_constant_projection_is_kept_transposed_and_not_fed():
    from pyarena.runtime.kernels import set_scratch
    g = _tflite_style_lstm([(S, N, 3)], P=3, squeeze_y=1)
    set_scratch(g)
    ex = Executor(g)
    k = ex.kernels[0]
    assert k.pwt.shape == (1, H, 3) and 8 not in k.runtime
    rng = np.random.default_rng(0)
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32),
             "W": rng.standard_normal((1, 4 * H, I)).astype(np.float32),
             "R": rng.standard_normal((1, 4 * H, 3)).astype(np.float32)}
    y = ex.run(feeds)["Y0"]
    # all-ones projection: the three outputs are one sum, |o * tanh(C)| < 1 each
    assert np.allclose(y[..., 0], y[..., 2]) and np.abs(y).max() < H


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_a_prior_kernel_lends_its_transposed_weights(op):
    """The same layer at another sequence length (``prior``): W and R are
    not transposed again nor kept a second time; only the scratch asked
    (sizing): nothing copied at all."""
    from pyarena.graph import Op, Tensor
    from pyarena.runtime.kernels import make_kernel
    from pyarena.runtime.kernels.registry import sizing_only
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    r = np.random.default_rng(1)
    H, I = 5, 3
    W = r.standard_normal((1, g * H, I)).astype(np.float32)
    R = r.standard_normal((1, g * H, H)).astype(np.float32)

    def build(seq, prior=None, keep=None):
        ins = [Tensor("x", (seq, 2, I)), Tensor("W", W.shape, role="constant", data=W),
               Tensor("R", R.shape, role="constant", data=R)]
        kept = []
        k = make_kernel(Op("rnn", op, ["x", "W", "R"], ["y"], attrs={"hidden_size": H}), ins,
                        [Tensor("y", (seq, 1, 2, H))],
                        keep=keep or (lambda a: kept.append(a) or a), prior=prior)
        return k, kept

    first, kept_first = build(3)
    assert sum(a.shape[-1] == g * H for a in kept_first) == 2      # W and R, transposed
    second, kept_second = build(6, prior=first)
    assert second.wt is first.wt and second.rt is first.rt
    assert not any(a.shape[-1] == g * H for a in kept_second)
    sized = make_kernel(Op("rnn", op, ["x", "W", "R"], ["y"], attrs={"hidden_size": H}),
                        [Tensor("x", (4, 2, I)),
                         Tensor("W", W.shape, role="constant", data=W),
                         Tensor("R", R.shape, role="constant", data=R)],
                        [Tensor("y", (4, 1, 2, H))], keep=sizing_only)
    assert sized.wt is W and sized.rt is R
