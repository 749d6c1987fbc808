"""A memory budget counts the kernels' state: what the plan records is what
the bound kernels hold, a budget below arena + state is refused, and
``pyarena run`` shows the split."""
from pathlib import Path

import numpy as np
import pytest

from pyarena import PlanInfeasibleError, plan
from pyarena.cli import main
from pyarena.planning import validate
from pyarena.runtime import Executor, random_feeds, set_scratch
from pyarena.runtime.kernels.patched import PatchedStage
from pyarena.runtime.models import mobilenet_v2

FACE = str(Path(__file__).parent.parent / "data" / "face_detection_short_range.tflite")


def mobilenet():
    return set_scratch(mobilenet_v2(resolution=64, classes=10), None, True)


def _arrays(obj, seen, depth=0):
    """The NumPy arrays a kernel holds (its attributes, its path object's,
    the lists and tuples of them), each once."""
    if depth > 3:
        return
    for v in vars(obj).values() if hasattr(obj, "__dict__") else ():
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, np.ndarray):
                    yield x
        elif hasattr(v, "__dict__") and id(v) not in seen and not isinstance(v, type):
            seen.add(id(v))
            yield from _arrays(v, seen, depth + 1)


def held_beyond_constants(stage, weights):
    """Bytes of the distinct arrays in the weights arena that the band
    kernels of ``stage`` hold (their layouts: packed weights, slopes),
    less the stage's constant inputs -- counted from the arrays, not
    from the kernels' own tally."""
    blocks = {}
    for k in stage.subs.values():
        for a in _arrays(k, {id(stage)}):
            if a.nbytes and weights.owns(a):
                addr = a.__array_interface__["data"][0]
                blocks[addr] = max(blocks.get(addr, 0), a.nbytes)
    consts = sum(t.nbytes for t in stage.ins if t is not None and t.role == "constant")
    return max(0, sum(blocks.values()) - consts)


def budgeted(build, fraction):
    p0 = plan(build())
    g = build()
    return g, plan(g, memory_budget=int(p0.lower_bound_bytes * fraction)), p0


@pytest.mark.parametrize("fraction", [0.7, 0.8])
def test_the_total_recorded_is_the_arena_and_the_bound_kernels_state(fraction):
    g, p, _ = budgeted(mobilenet, fraction)
    b = p.budget
    assert b["patches"], "the budget needs a patched stage"
    ex = Executor(g, p)
    assert b["arena_bytes"] == p.arena_bytes
    assert b["kernel_state_bytes"] == ex.kernel_state_bytes
    assert b["total_bytes"] == p.arena_bytes + ex.kernel_state_bytes <= b["memory_budget"]
    stages = [k for k in ex.kernels if isinstance(k, PatchedStage)]
    # a patched stage's state is its band kernels' layouts beyond the weights
    for k in stages:
        assert k.state_bytes == held_beyond_constants(k, ex.weights)
    assert validate(p) == []


def test_a_tflite_model_records_the_state_its_kernels_hold():
    pytest.importorskip("tflite")
    from pyarena.importers import load_model
    g, p, p0 = budgeted(lambda: load_model(FACE), 0.5)
    ex = Executor(g, p)
    assert p.budget["patches"]
    assert p.budget["kernel_state_bytes"] == ex.kernel_state_bytes
    assert p.budget["total_bytes"] <= p.budget["memory_budget"]
    g0 = load_model(FACE)
    e0 = Executor(g0, p0)
    feeds = random_feeds(g0, seed=4)
    ref = {k: np.array(v) for k, v in e0.run(feeds).items()}
    got = ex.run(feeds)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-4)


def test_a_budget_below_arena_and_state_is_refused():
    g, p, _ = budgeted(mobilenet, 0.7)
    b = p.budget
    total, state = b["total_bytes"], b["kernel_state_bytes"]
    assert state > 0
    # the same plan's arena alone fits a budget of ``total - 1``: not enough
    g2 = mobilenet()
    try:
        q = plan(g2, memory_budget=total - 1)
    except PlanInfeasibleError as exc:
        assert exc.smallest_bytes >= total - 1
        best = min(exc.tried, key=lambda t: t["total_bytes"])
        assert best["total_bytes"] == exc.smallest_bytes
        assert best["total_bytes"] == best["arena_bytes"] + best["kernel_state_bytes"]
    else:           # another plan fits: its arena and state within it
        assert q.budget["total_bytes"] <= total - 1
        assert q.arena_bytes + Executor(g2, q).kernel_state_bytes <= total - 1
    # every candidate the search took records its split
    for t in b["tried"]:
        assert t["total_bytes"] == t["arena_bytes"] + t["kernel_state_bytes"]


def test_a_recorded_split_that_does_not_add_up_is_invalid():
    g, p, _ = budgeted(mobilenet, 0.7)
    p.budget = dict(p.budget, total_bytes=p.budget["total_bytes"] + 64)
    assert any("kernel state" in m for m in validate(p))
    p.budget = dict(p.budget, total_bytes=p.arena_bytes + p.budget["kernel_state_bytes"],
                    memory_budget=p.arena_bytes)
    if p.budget["kernel_state_bytes"]:
        assert any("over the memory budget" in m for m in validate(p))


def test_run_reports_a_split_that_sums_to_the_total(capsys):
    pytest.importorskip("tflite")
    p0 = plan(__import__("pyarena.importers", fromlist=["load_model"]).load_model(FACE))
    budget = p0.lower_bound_bytes // 2
    assert main(["run", FACE, "--repeat", "1", "--no-reference",
                 "--memory-budget", str(budget)]) == 0
    text = capsys.readouterr().out
    line = next(s for s in text.splitlines() if s.startswith("budget     "))
    total, arena, state = (int(line.split(w, 1)[1].split(" B")[0].replace(",", ""))
                           for w in (" holds ", "= arena ", "+ kernel state "))
    assert total == arena + state <= budget
    assert f"kernels    state {state:,} B" in text
