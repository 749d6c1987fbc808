"""The executor with Concat in place: producers write into the Concat's
output, the Concat kernel copies only what is not there already, and the
outputs are those of the plan without it."""
import os

import numpy as np
import pytest

from helpers.model_zoo import randomized_light_model

from pyarena.graph import Graph
from pyarena.importers import load_model
from pyarena.planning import plan, validate
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.models import MODELS


def _compare(make_graph):
    g0, g1 = make_graph(), make_graph()
    p0 = plan(g0, inplace_concat=False)
    p1 = plan(g1)
    assert validate(p1) == []
    assert p1.arena_bytes <= p0.arena_bytes
    e0, e1 = Executor(g0, p0), Executor(g1, p1)
    feeds = random_feeds(g0, seed=4)
    want = {k: np.array(v) for k, v in e0.run(feeds).items()}
    for _ in range(2):
        got = e1.run(feeds)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    cats = [k for k in e1.kernels if k.op.op_type == "Concat"]
    return p0, p1, cats


@pytest.mark.parametrize("name", ["unet", "densenet121"])
def test_builtin_models_same_outputs(name):
    p0, p1, cats = _compare(lambda: MODELS[name](resolution=64 if name == "unet" else 32))
    placed = [r for r in p1.reuses if r[3] == "concat"]
    assert placed
    # the kernels find in their slices exactly the inputs the plan placed
    assert sum(len(k.inputs_in_place()) for k in cats) == len(placed)
    if name == "unet":      # every up-sampled input is placed; some skips too
        assert all(k.inputs_in_place() for k in cats)
        assert any(k.path == "in place" for k in cats)
    else:                   # every feature map feeds several Concats: placed once
        assert any(k.copies for k in cats)


def test_squeezenet_same_outputs(tmp_path):
    path = randomized_light_model("squeezenet", os.path.join(tmp_path, "sq.onnx"))
    # NCHW: a channel Concat of batch 1 is contiguous slices (in NHWC it is
    # not, so the NHWC pass is off here)
    p0, p1, cats = _compare(lambda: load_model(path, layout="keep"))
    assert len(cats) == 8 and all(k.path == "in place" for k in cats)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["inception_v1", "inception_v2", "densenet121",
                                  "shufflenet"])
def test_light_models_same_outputs(tmp_path, name):
    path = randomized_light_model(name, os.path.join(tmp_path, f"{name}.onnx"))
    p0, p1, cats = _compare(lambda: load_model(path, layout="keep"))
    assert any(k.path == "in place" for k in cats)


def test_the_kernel_copies_only_what_is_not_in_place():
    g = Graph("cat")
    g.add_tensor("x", (1, 2, 2, 2), role="input")
    g.add_tensor("w", (2, 2, 1, 1), role="constant",
                 data=np.arange(4, dtype=np.float32).reshape(2, 2, 1, 1))
    g.add_tensor("k", (1, 1, 2, 2), role="constant",
                 data=np.full((1, 1, 2, 2), 7, np.float32))
    g.add_tensor("a", (1, 2, 2, 2))
    g.add_tensor("y", (1, 5, 2, 2), role="output")
    g.add_op("Conv", ["x", "w"], ["a"], name="conv")
    g.add_op("Concat", ["a", "k", "x"], ["y"], name="cat", axis=1)
    g.validate()
    e = Executor(g)
    cat = e.kernels[1]
    assert [i for i, _ in cat.copies] == [1, 2]       # the constant and the graph input,
    assert cat.inputs_in_place() == [0]               # known once the views are bound
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    y = e.run({"x": x})["y"]
    a = np.einsum("oc,nchw->nohw", np.arange(4, dtype=np.float32).reshape(2, 2), x)
    np.testing.assert_array_equal(y, np.concatenate([a, np.full((1, 1, 2, 2), 7), x], 1))
    assert cat.path == "numpy"
    # unplanned, every input is copied, every run
    d = Executor(g, allocator="numpy")
    np.testing.assert_array_equal(d.run({"x": x})["y"], y)
    assert d.kernels[1].copies is None and d.kernels[1].inputs_in_place() == []


def test_a_concat_with_every_input_in_place_is_not_called(monkeypatch):
    g = Graph("cat")
    g.add_tensor("x", (1, 2, 2, 2), role="input")
    g.add_tensor("w", (2, 2, 1, 1), role="constant", data=np.ones((2, 2, 1, 1), np.float32))
    for n in ("a", "b"):
        g.add_tensor(n, (1, 2, 2, 2))
    g.add_tensor("y", (1, 4, 2, 2), role="output")
    g.add_op("Conv", ["x", "w"], ["a"], name="conv_a")
    g.add_op("Sigmoid", ["x"], ["b"], name="sig")
    g.add_op("Concat", ["a", "b"], ["y"], name="cat", axis=1)
    g.validate()
    e = Executor(g)
    cat = e.kernels[2]
    assert cat.idle and cat.path == "in place"
    calls = []
    monkeypatch.setattr(type(cat), "run", lambda self, *a: calls.append(1))
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    y = e.run({"x": x})["y"]
    assert calls == []
    np.testing.assert_allclose(y[:, 2:], 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(y[:, :2], np.repeat(x.sum(1, keepdims=True), 2, 1), rtol=1e-6)
