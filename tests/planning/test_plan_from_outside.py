"""Plans loaded from outside are validated (issue 9, item 4): a plan JSON
whose offsets were tampered with used to run and return garbage."""
import json

import numpy as np
import pytest

from pyarena import PlanValidationError, plan
from pyarena.errors import InvalidArgumentError
from pyarena.graph import Graph
from pyarena.planning import Plan
from pyarena.runtime import Executor


def _graph():
    g = Graph("chain")
    g.add_tensor("x", [64], role="input")
    for i in range(4):
        g.add_tensor(f"t{i}", [64])
    g.add_tensor("y", [64], role="output")
    names = ["x", "t0", "t1", "t2", "t3", "y"]
    for i, (a, b) in enumerate(zip(names, names[1:])):
        g.add_op("Sigmoid" if i % 2 else "Exp", [a], [b], name=f"op{i}")
    return g


def _zeroed(d):
    d = json.loads(json.dumps(d))
    for b in d["buffers"]:
        b["offset"] = 0
    return d


def test_round_trip_of_a_good_plan_still_runs():
    g = _graph()
    p = plan(g, inplace=False)
    q = Plan.from_json(json.loads(json.dumps(p.to_json())), graph=g)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    np.testing.assert_array_equal(Executor(g, q).run({"x": x})["y"],
                                  Executor(g, p).run({"x": x})["y"])


def test_every_offset_zero_is_refused_against_the_graph():
    g = _graph()
    d = _zeroed(plan(g, inplace=False).to_json())
    with pytest.raises(PlanValidationError) as e:
        Plan.from_json(d, graph=g)
    assert any("overlap" in p for p in e.value.problems)


def test_executor_refuses_an_invalid_plan():
    g = _graph()
    bad = Plan.from_json(_zeroed(plan(g, inplace=False).to_json()))   # no graph: not checked
    with pytest.raises(PlanValidationError):
        Executor(g, bad)


def test_plan_of_another_graph_is_refused():
    g, h = _graph(), _graph()
    h.tensors["t1"].shape = (128,)
    with pytest.raises(PlanValidationError):
        Executor(h, plan(g))


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(buffers="nope"), "'buffers' list"),
    (lambda d: d["buffers"].__setitem__(0, 5), "buffer #0"),
    (lambda d: d["buffers"][0].update(size=2 ** 64), "out of range"),
    (lambda d: d["buffers"][0].update(offset=-64), "out of range"),
    (lambda d: d["buffers"][0].update(first="0"), "integer"),
    (lambda d: d["buffers"][0].update(tensors="xy"), "list of names"),
    (lambda d: d["buffers"][0].pop("size"), "has no 'size'"),
    (lambda d: d.pop("arena_bytes"), "arena_bytes"),
    (lambda d: d.update(arena_bytes=1.5), "arena_bytes"),
    (lambda d: d.update(reuses=[1]), "reuses"),
])
def test_malformed_plan_json_is_an_argument_error(mutate, match):
    d = json.loads(json.dumps(plan(_graph()).to_json()))
    mutate(d)
    with pytest.raises(InvalidArgumentError, match=match):
        Plan.from_json(d)
