"""Runs of C kernel calls made as one call (runtime/batch.py): which items
are grouped, and the Executor's batched runs giving the bits of the calls
made one by one, on one thread and on three."""
import numpy as np
import pytest

from pyarena import plan
from pyarena.runtime import Executor, random_feeds, set_scratch
from pyarena.runtime import batch as batch_mod
from pyarena.runtime.batch import Batch, batch_runs
from pyarena.runtime.fusion import fuse
from pyarena.runtime.models import mobilenet_v2


def test_runs_of_enough_native_items_become_one_and_order_is_kept():
    items = ["a1", "a2", "p", "a3", "q", "a4", "a5", "a6"]

    def records(item):
        return [(item, (item, 0))] if item.startswith("a") else None
    out = batch_runs(items, records, lambda recs, names: ("B", tuple(names)))
    assert out == [("B", ("a1", "a2")), "p", "a3", "q", ("B", ("a4", "a5", "a6"))]
    out = batch_runs(items, records, lambda recs, names: ("B", tuple(names)), min_run=1)
    assert out == [("B", ("a1", "a2")), "p", ("B", ("a3",)), "q",
                   ("B", ("a4", "a5", "a6"))]
    # an item of several records (a band's copies and its kernel) keeps them all
    out = batch_runs(["x"], lambda i: [("x", 1), ("x", 2)], lambda r, n: (r, n), min_run=1)
    assert out == [([1, 2], ["x", "x"])]


def test_a_long_run_from_a_generator_does_not_hold_its_items():
    """A patched stage's calls come one at a time, each with its band views:
    an item of a run already long enough is dropped once its records are
    taken (a short run's items are held: they may be emitted as they are)."""
    import weakref

    class Item:
        pass
    refs = []

    def items():
        for i in range(6):
            it = Item()
            refs.append(weakref.ref(it))
            yield it
            del it
            if i >= 3:      # the items before the one just taken are gone
                assert all(r() is None for r in refs[2:i])

    out = batch_runs(items(), lambda it: [("n", 0)], lambda recs, names: ("B", len(recs)),
                     min_run=3)
    assert out == [("B", 6)]
    short = batch_runs(iter(["a", "b", "p"]), lambda it: [(it, 0)] if it != "p" else None,
                       lambda recs, names: ("B", tuple(names)), min_run=3)
    assert short == ["a", "b", "p"]


@pytest.mark.parametrize("threads", [1, 3])
def test_batched_runs_give_the_bits_of_one_call_per_kernel(threads, monkeypatch):
    g = mobilenet_v2(96)
    fuse(g)
    set_scratch(g)
    p = plan(g)
    feeds = random_feeds(g, seed=4)
    ex = Executor(g, p, threads=threads)
    batches = [s[0] for s in ex._runner.busy if isinstance(s[0], Batch)]
    assert batches and all(b.calls.n >= 2 for b in batches)
    got = {k: np.array(v) for k, v in ex.run(feeds).items()}
    monkeypatch.setattr(batch_mod.Batch, "__init__", None)      # no batch may be made
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = Executor(g, p, threads=threads)
    assert not any(isinstance(s[0], Batch) for s in one._runner.busy)
    ref = {k: np.array(v) for k, v in one.run(feeds).items()}
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


@pytest.mark.parametrize("rows", [1, 5])
def test_a_layer_norm_between_linear_layers_joins_their_batch(tmp_path, rows, monkeypatch):
    """A transformer block's LayerNormalization between two linear layers
    (a decode step's rows) is a C call record too: the three ops run as
    one batch, whose bits are the ops' one by one, within float rounding
    of onnxruntime."""
    from helpers.model_zoo import ort_run
    from helpers.onnx_util import make_model
    from onnx import helper
    from pyarena.importers import load_model
    rng = np.random.default_rng(rows)
    inits = {"w1": rng.standard_normal((48, 64)).astype(np.float32) / 7,
             "w2": rng.standard_normal((64, 40)).astype(np.float32) / 8,
             "g": (1 + 0.1 * rng.standard_normal(64)).astype(np.float32),
             "b": rng.standard_normal(64).astype(np.float32)}
    path = tmp_path / "ln.onnx"
    make_model([helper.make_node("MatMul", ["x", "w1"], ["h"]),
                helper.make_node("LayerNormalization", ["h", "g", "b"], ["n"], epsilon=1e-5),
                helper.make_node("MatMul", ["n", "w2"], ["y"])],
               {"x": ([1, rows, 48], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)
    x = rng.standard_normal((1, rows, 48)).astype(np.float32)
    ex = Executor(load_model(str(path)))
    (batch, *_), = ex._runner.busy
    assert isinstance(batch, Batch) and batch.calls.kinds == ["conv2d", "layer_norm", "conv2d"]
    got = np.array(ex.run({"x": x})["y"])
    np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-5, atol=2e-5)
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = Executor(load_model(str(path)))
    assert not any(isinstance(s[0], Batch) for s in one._runner.busy)
    np.testing.assert_array_equal(got, one.run({"x": x})["y"])
