"""Weights made by ops on constants are folded once at load into the
weights arena (issue "The memory you set is the memory you pay", item 2).

Real exports compute weights from constants -- ConstantOfShape / Expand /
Tile, a Transpose or DequantizeLinear of an initializer, Cast chains.
Each model here has a twin holding the same weights as plain
initializers, whose plan is the activations-only bound: the folded
model's arena must match it, its weights live in the graph's weights
arena, no op that made them is left to run, and its outputs are
onnxruntime's.  A result over the weight-folding cap (or over what the
memory limit leaves) stays a run-time op, with one warning for the
import; a random op or an op reading a run-time input never folds.
"""
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from helpers.weight_models import CONV_WEIGHTS, GEMM_WEIGHTS, classifier, conv_net
from pyarena.errors import UnsupportedOpError
from pyarena.importers import load_model, onnx_constants
from pyarena.importers.onnx_constants import FoldingCapWarning
from pyarena.importers.onnx_fold import FOLD_MAX_BYTES
from pyarena.memory.mapped import is_mapped
from pyarena.planning import plan
from pyarena.runtime import Executor

pytest.importorskip("onnxruntime")

#: ops that make weights from constants: none may be left in a folded graph
MAKERS = {"ConstantOfShape", "Expand", "Tile", "Transpose", "DequantizeLinear", "Cast"}


def _check_folded(tmp_path, path, twin, feeds, held_twice=False):
    """The folded model against its twin of plain initializers and
    onnxruntime.  ``held_twice``: a weight computed at load that a kernel
    packs is held twice, the graph's copy and the packed one (the twin's
    graph copy is a view of the file, which gives its pages back): known,
    docs/footprint.md, "Weights held once"."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FoldingCapWarning)
        g = load_model(str(path))
    bound = load_model(str(twin))
    assert [op.op_type for op in g.ops] == [op.op_type for op in bound.ops]
    assert not MAKERS & {op.op_type for op in g.ops}
    big = [t for t in g.by_role("constant") if t.nbytes > FOLD_MAX_BYTES]
    assert big, "no weight over the shape-arithmetic cap: the test proves nothing"
    for t in big:       # no bytes of the work arena: in the weights arena, a view of the
        d = np.asarray(t.data)      # file, or a broadcast of one value (laid out at setup)
        assert (g.weights is not None and g.weights.owns(d)) or is_mapped(d) or \
            0 in d.strides, t.name
    p, pb = plan(g), plan(bound)
    assert p.arena_bytes <= 1.01 * pb.arena_bytes, (p.arena_bytes, pb.arena_bytes)
    planned = {n for b in p.buffers for n in b.tensors}
    assert not planned & {t.name for t in big}
    ex, ex_bound = Executor(g, p), Executor(bound, pb)
    # the weights held once, as many as the twin's
    assert ex.weights_bytes <= (2.01 if held_twice else 1.01) * ex_bound.weights_bytes + \
        (64 << 10), \
        (ex.weights_bytes, ex_bound.weights_bytes)
    first = {k: np.array(v) for k, v in ex.run(feeds).items()}
    second = ex.run(feeds)
    ref = ex_bound.run(feeds)
    ort = ort_run(path, feeds)
    for k in ort:
        np.testing.assert_array_equal(first[k], second[k])
        np.testing.assert_allclose(first[k], ref[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(first[k], ort[k], rtol=1e-4, atol=1e-5)
    return g


@pytest.mark.parametrize("kind", CONV_WEIGHTS)
def test_conv_weights_made_by_ops_fold_once_into_the_weights_arena(tmp_path, kind):
    path = conv_net(tmp_path / "m.onnx", kind)
    twin = conv_net(tmp_path / "plain.onnx", kind, plain=True)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    _check_folded(tmp_path, path, twin, {"x": x})


@pytest.mark.parametrize("kind", GEMM_WEIGHTS)
def test_a_classifier_weight_made_by_ops_folds_once_into_the_weights_arena(tmp_path, kind):
    path = classifier(tmp_path / "m.onnx", kind)
    twin = classifier(tmp_path / "plain.onnx", kind, plain=True)
    x = np.random.default_rng(2).standard_normal((1, 2048)).astype(np.float32)
    g = _check_folded(tmp_path, path, twin, {"x": x},
                      held_twice=kind in ("dequantize", "cast_chain"))
    assert g.tensors["w"].nbytes == 8 << 20


def test_the_unfolded_run_gives_the_same_outputs(tmp_path, monkeypatch):
    """The same classifier with weight folding off (the cap at shape
    arithmetic's, as before): the weight is made at every run, in the
    arena, and the outputs are the folded run's."""
    path = classifier(tmp_path / "m.onnx", "constant_of_shape")
    x = np.random.default_rng(3).standard_normal((1, 2048)).astype(np.float32)
    folded = Executor(load_model(str(path))).run({"x": x})["y"].copy()
    monkeypatch.setattr(onnx_constants, "WEIGHT_FOLD_MAX_BYTES", FOLD_MAX_BYTES)
    with pytest.warns(FoldingCapWarning):
        g = load_model(str(path))
    assert "ConstantOfShape" in [op.op_type for op in g.ops]
    assert plan(g).arena_bytes >= 8 << 20
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], folded, rtol=1e-5)


def _two_constants_model(path, n=256):
    """y = x + a + b, a and b ConstantOfShape of (n, n) float32."""
    cos = [helper.make_node("ConstantOfShape", ["s"], [c],
                            value=helper.make_tensor(f"v{c}", TensorProto.FLOAT, [1], [v]))
           for c, v in (("a", 1.5), ("b", -0.25))]
    make_model(cos + [helper.make_node("Add", ["x", "a"], ["t"]),
                      helper.make_node("Add", ["t", "b"], ["y"])],
               {"x": ([n, n], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([n, n], np.int64)}, path=path)


@pytest.mark.parametrize("cap, folded", [(FOLD_MAX_BYTES, 0), (300 << 10, 1)])
def test_results_over_the_cap_run_at_every_inference_with_one_warning(tmp_path, monkeypatch,
                                                                      cap, folded):
    path = tmp_path / "two.onnx"
    _two_constants_model(path)
    monkeypatch.setattr(onnx_constants, "WEIGHT_FOLD_MAX_BYTES", cap)
    with pytest.warns(FoldingCapWarning) as rec:
        g = load_model(str(path))
    caps = [w for w in rec if issubclass(w.category, FoldingCapWarning)]
    assert len(caps) == 1
    assert f"{2 - folded} constant result(s) of {(2 - folded) * (256 << 10):,} bytes" in \
        str(caps[0].message)
    left = [op for op in g.ops if op.op_type == "ConstantOfShape"]
    assert len(left) == 2 - folded
    assert all(op.notes.over_fold_cap == 256 << 10 for op in left)
    x = np.random.default_rng(4).standard_normal((256, 256)).astype(np.float32)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], x + 1.25, rtol=1e-6)
    np.testing.assert_allclose(ort_run(path, {"x": x})["y"], x + 1.25, rtol=1e-6)


def test_weight_folding_keeps_within_the_memory_limit(tmp_path):
    """The 8 MiB weight folds when the limit leaves room for it beside the
    largest tensor; under a tighter limit it runs at every inference (and
    the model still loads, where folding it would have refused it)."""
    path = classifier(tmp_path / "m.onnx", "constant_of_shape")
    g = load_model(str(path), max_memory=20 << 20)
    assert "ConstantOfShape" not in [op.op_type for op in g.ops]
    with pytest.warns(FoldingCapWarning, match="max_memory"):
        g = load_model(str(path), max_memory=12 << 20)
    assert "ConstantOfShape" in [op.op_type for op in g.ops]
    x = np.ones((1, 2048), np.float32)
    np.testing.assert_allclose(Executor(g, max_memory=12 << 20).run({"x": x})["y"],
                               np.full((1, 1024), 2048 * 0.01, np.float32), rtol=1e-5)


def test_a_random_op_on_large_constants_is_never_folded(tmp_path):
    """RandomUniformLike of a 1 MiB constant: not deterministic, so not a
    weight -- it stays a run-time op (which no kernel runs: named)."""
    path = tmp_path / "random.onnx"
    make_model([helper.make_node("RandomUniformLike", ["c"], ["r"]),
                helper.make_node("Add", ["r", "x"], ["y"])],
               {"x": ([512, 512], np.float32)}, {"y": ([512, 512], np.float32)},
               {"c": np.zeros((512, 512), np.float32)}, path=path)
    with pytest.raises(UnsupportedOpError, match="RandomUniformLike"):
        load_model(str(path))


def test_an_op_reading_a_run_time_input_is_not_a_weight(tmp_path):
    """Expand of the graph input to 4 MiB: its shape is a constant, its
    data is not -- it runs at every inference."""
    path = tmp_path / "expand.onnx"
    make_model([helper.make_node("Expand", ["x", "s"], ["e"]),
                helper.make_node("Relu", ["e"], ["y"])],
               {"x": ([1, 1024], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([1024, 1024], np.int64)}, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Expand", "Relu"]
    x = np.random.default_rng(5).standard_normal((1, 1024)).astype(np.float32)
    y = Executor(g).run({"x": x})["y"]
    np.testing.assert_array_equal(y, np.broadcast_to(np.maximum(x, 0), (1024, 1024)))


def test_a_folded_chain_holds_one_intermediate_at_a_time(tmp_path):
    """Eight Casts of a 4 MiB float16 weight, widening to float64 and back:
    each intermediate (8 or 16 MiB) is dropped once the next Cast has read
    it, so the import's heap peak is two of them, not the chain's 96 MiB."""
    import tracemalloc
    n = 1024 * 2048
    chain, x = [], "h"
    for i in range(8):
        to = TensorProto.DOUBLE if i % 2 else TensorProto.FLOAT
        chain.append(helper.make_node("Cast", [x], [f"c{i}"], to=to))
        x = f"c{i}"
    path = tmp_path / "chain.onnx"
    make_model(chain + [helper.make_node("Cast", [x], ["w"], to=TensorProto.FLOAT),
                        helper.make_node("MatMul", ["x", "w"], ["y"])],
               {"x": ([1, 1024], np.float32)}, {"y": (None, np.float32)},
               {"h": np.ones((1024, 2048), np.float16)}, path=path)
    tracemalloc.start()
    try:
        g = load_model(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [op.op_type for op in g.ops] == ["MatMul"]
    assert peak < 4 * n * 8, peak         # two intermediates and change, not eight
    y = Executor(g).run({"x": np.ones((1, 1024), np.float32)})["y"]
    np.testing.assert_array_equal(y, np.full((1, 2048), 1024, np.float32))


def test_a_session_folds_the_weight_once_for_every_input_shape(tmp_path):
    """An InferenceSession imports the model again for a new batch size:
    the folded weight is reused from its import cache (a broadcast view,
    laid out by the Gemm), and each signature's outputs are right."""
    from pyarena import InferenceSession
    path = tmp_path / "session.onnx"
    make_model([helper.make_node("ConstantOfShape", ["s"], ["w"],
                                 value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
                helper.make_node("Gemm", ["x", "w"], ["y"])],
               {"x": (["N", 512], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([512, 256], np.int64)}, path=path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FoldingCapWarning)
        sess = InferenceSession(str(path))
        for n in (1, 3, 1):
            x = np.random.default_rng(n).standard_normal((n, 512)).astype(np.float32)
            y = sess.run(None, {"x": x})[0]
            np.testing.assert_allclose(y, np.repeat(x.sum(1, keepdims=True) * 0.5, 256, 1),
                                       rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, reps", [((2, 3), (1, 1)), ((2, 3), (3, 2)), ((1, 4, 1), (2, 1, 5)),
                                         ((3,), (0,)), ((2, 2), (1, 0))])
def test_the_tile_evaluator_is_the_reference_evaluators(shape, reps):
    """Tile folds by its own NumPy evaluator (not the ONNX reference one,
    seconds slower on large weights): the same values, 0 repeats included;
    repeats that do not match the rank are left to the reference."""
    from onnx import helper as oh
    from onnx.reference import ReferenceEvaluator
    from pyarena.runtime.kernels import evaluators as ev
    from pyarena.runtime.kernels.shape_rules import Node
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    r = np.array(reps, np.int64)
    node = oh.make_node("Tile", ["x", "r"], ["y"])
    vals = {"x": x, "r": r}
    got = ev.tile(Node(node, {}, 18, None, None, vals.get))
    m = oh.make_model(oh.make_graph([node], "t", [oh.make_tensor_value_info(k, 0, None)
                                                  for k in ("x", "r")],
                                    [oh.make_tensor_value_info("y", 0, None)]),
                      opset_imports=[oh.make_opsetid("", 18)])
    want = ReferenceEvaluator(m).run(None, vals)[0]
    assert got[0].dtype == want.dtype
    np.testing.assert_array_equal(got[0], want)
    bad = {"x": x, "r": np.array(list(reps) + [2], np.int64)}
    assert ev.tile(Node(node, {}, 18, None, None, bad.get)) is NotImplemented
