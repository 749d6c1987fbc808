"""Constant folding never amplifies (issue 9, item 2).

A 176-byte model whose ConstantOfShape makes an 8192 x 8192 float tensor
used to be folded with np.full and copied back into protobuf for a second
shape inference: ``pyarena plan`` peaked at 2.1 GB.  Now a large
constant-producing op stays a run-time op, planned like any tensor, and
re-inference gets no tensor data but shape arithmetic.  The subprocess
tests run ``pyarena plan`` under an address-space limit the old import
could not live in.

Since then (issue "The memory you set is the memory you pay", item 2) a
large constant that is a weight -- within the weight-folding cap and the
memory limit -- is folded once at load into the weights arena, from a
broadcast view, never through protobuf; over the cap it is the run-time op
above, with one warning.
"""
import os
import resource
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.importers import onnx_constants
from pyarena.importers.onnx_constants import FoldingCapWarning
from pyarena.importers.onnx_fold import FOLD_MAX_BYTES
from pyarena.runtime import Executor

AS_LIMIT = 1 << 30          # the old import needed 2 GiB for the first model


def _cos(value):
    return helper.make_node("ConstantOfShape", ["s"], ["c"],
                            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value]))


def _big_constant_model(path):
    """ConstantOfShape(8192 x 8192) -> Add(x) -> Reshape(-1): runnable."""
    make_model([_cos(1.0), helper.make_node("Add", ["c", "x"], ["a"]),
                helper.make_node("Reshape", ["a", "t"], ["y"])],
               {"x": ([1], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([8192, 8192], np.int64), "t": np.array([-1], np.int64)},
               path=path)


def _unsizable_model(path):
    """The issue's shape: everything folds but a Reshape to a run-time shape
    (once unsizable; now a pool tensor)."""
    make_model([_cos(1.0), helper.make_node("Add", ["c", "one"], ["a"]),
                helper.make_node("Reshape", ["a", "x"], ["y"])],
               {"x": ([2], np.int64)}, {"y": (None, np.float32)},
               {"s": np.array([8192, 8192], np.int64), "one": np.array(1.0, np.float32)},
               path=path)


@pytest.fixture
def no_weight_folding(monkeypatch):
    """The weight-folding cap lowered to shape arithmetic's: what the
    import did before weights were folded."""
    monkeypatch.setattr(onnx_constants, "WEIGHT_FOLD_MAX_BYTES", FOLD_MAX_BYTES)


def test_large_constant_of_shape_over_the_cap_is_a_planned_run_time_op(tmp_path,
                                                                        no_weight_folding):
    path = tmp_path / "cos.onnx"
    _big_constant_model(path)
    with pytest.warns(FoldingCapWarning, match="1 constant result"):
        g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["ConstantOfShape", "Add", "Reshape"]
    assert g.ops[0].notes.over_fold_cap == 8192 * 8192 * 4
    assert g.tensors["c"].role == "activation"
    weights = sum(t.nbytes for t in g.by_role("constant"))
    assert weights < 64                     # the two shape vectors, not 256 MiB
    out = Executor(g).run({"x": np.array([2.0], np.float32)})["y"]
    assert out.shape == (8192 * 8192,)
    assert np.all(out == 3.0)


def test_large_constant_of_shape_within_the_cap_folds_into_the_weights_arena(tmp_path):
    path = tmp_path / "cos.onnx"
    _big_constant_model(path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Add", "Reshape"]
    c = g.tensors["c"]
    assert c.role == "constant" and 0 in c.data.strides     # no bytes until placed
    ex = Executor(g)
    assert ex.weights.owns(np.asarray(c.data))              # once, in the weights arena
    out = ex.run({"x": np.array([2.0], np.float32)})["y"]
    assert out.shape == (8192 * 8192,)
    assert np.all(out == 3.0)


def test_small_constant_of_shape_is_still_folded(tmp_path):
    path = tmp_path / "small.onnx"
    make_model([_cos(2.0), helper.make_node("Add", ["c", "x"], ["y"])],
               {"x": ([4, 4], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([4, 4], np.int64)}, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Add"]
    assert g.tensors["c"].role == "constant"
    np.testing.assert_array_equal(g.tensors["c"].data, np.full((4, 4), 2.0, np.float32))


def test_constant_of_shape_weight_becomes_a_broadcast_constant(tmp_path, no_weight_folding):
    # a Conv weight made by ConstantOfShape (ONNX's "light" models) over the
    # weight-folding cap: the Conv kernel needs it at build time, so it is a
    # constant -- held as a read-only broadcast until the executor copies it
    # into the weights arena
    path = tmp_path / "w.onnx"
    make_model([helper.make_node("ConstantOfShape", ["ws"], ["w"],
                                 value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
                helper.make_node("Conv", ["x", "w"], ["y"])],
               {"x": ([1, 64, 4, 4], np.float32)}, {"y": (None, np.float32)},
               {"ws": np.array([128, 64, 3, 3], np.int64)}, path=path)
    g = load_model(str(path))
    w = g.tensors["w"]
    assert w.role == "constant" and w.nbytes > FOLD_MAX_BYTES
    assert w.data.strides == (0, 0, 0, 0)      # nothing materialised at import
    x = np.random.default_rng(0).standard_normal((1, 64, 4, 4)).astype(np.float32)
    y = Executor(g).run({"x": x})["y"]
    expect = np.array([[x[0, :, i:i + 3, j:j + 3].sum() * 0.5 for j in range(2)]
                       for i in range(2)], np.float32)
    assert y.shape == (1, 128, 2, 2)
    np.testing.assert_allclose(y[0, 0], expect, rtol=1e-4)
    np.testing.assert_allclose(y[0, 127], expect, rtol=1e-4)


@pytest.mark.parametrize("node, inits", [
    (helper.make_node("Expand", ["k", "s"], ["big"]),
     {"k": np.ones((1, 1), np.float32), "s": np.array([4096, 4096], np.int64)}),
    (helper.make_node("Tile", ["k", "s"], ["big"]),
     {"k": np.ones((2, 2), np.float32), "s": np.array([2048, 2048], np.int64)}),
])
def test_expanding_ops_of_small_constants_fold_only_within_the_cap(tmp_path, node, inits,
                                                                   monkeypatch):
    path = tmp_path / "e.onnx"
    make_model([node, helper.make_node("Add", ["big", "x"], ["y"])],
               {"x": ([1], np.float32)}, {"y": (None, np.float32)}, inits, path=path)
    g = load_model(str(path))           # 64 MiB: a weight folded at load
    assert g.tensors["big"].role == "constant"
    assert node.op_type not in [op.op_type for op in g.ops]
    ex = Executor(g)                    # (an Expand's broadcast placed now)
    assert ex.weights.owns(np.asarray(g.tensors["big"].data))
    monkeypatch.setattr(onnx_constants, "WEIGHT_FOLD_MAX_BYTES", 32 << 20)
    with pytest.warns(FoldingCapWarning):
        g = load_model(str(path))
    assert g.tensors["big"].role == "activation"
    assert node.op_type in [op.op_type for op in g.ops]
    assert sum(t.nbytes for t in g.by_role("constant")) <= 64


def _plan_under_limit(path):
    # the limit is set by the child itself (no preexec_fn in a threaded process)
    code = ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_AS, ({AS_LIMIT}, {AS_LIMIT})); "
            f"sys.argv = ['pyarena', 'plan', {str(path)!r}]; "
            "runpy.run_module('pyarena', run_name='__main__')")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS")
def test_plan_of_a_big_constant_fits_in_one_gib(tmp_path):
    path = tmp_path / "cos.onnx"
    _big_constant_model(path)
    r = _plan_under_limit(path)
    assert r.returncode == 0, r.stderr
    assert "weights" in r.stdout


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="needs RLIMIT_AS")
def test_reshape_to_a_run_time_shape_plans_in_one_gib(tmp_path):
    """The Reshape's target is fed at run time: its output is a pool tensor
    (sized by that value), the rest is planned within the limit."""
    path = tmp_path / "cos2.onnx"
    _unsizable_model(path)
    r = _plan_under_limit(path)
    assert r.returncode == 0, r.stderr
    assert "weights" in r.stdout
    g = load_model(str(path))
    assert g.tensors["y"].dynamic and not g.tensors["a"].dynamic


def test_a_random_op_is_never_folded_even_on_constant_inputs(tmp_path):
    """A random generator's kernel record says ``fold = "never"`` (each run
    draws anew): a RandomUniformLike of a constant stays a run-time op --
    here one no kernel runs, so the import names it -- instead of becoming
    one frozen draw."""
    from pyarena.errors import UnsupportedOpError
    path = str(tmp_path / "random.onnx")
    make_model([helper.make_node("RandomUniformLike", ["c"], ["r"]),
                helper.make_node("Add", ["r", "x"], ["y"])],
               {"x": ([4], np.float32)}, {"y": ([4], np.float32)},
               {"c": np.zeros(4, np.float32)}, path=path)
    with pytest.raises(UnsupportedOpError, match="RandomUniformLike"):
        load_model(path)
