"""A memory budget as the interface: ``plan(g, memory_budget=B)`` returns
the fastest plan whose arena fits ``B`` -- the given order, then the
scheduled one, then smaller operator scratch -- or raises
PlanInfeasibleError naming the smallest arena it reached."""
import json
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.plan_graphs import branches
import pyarena
from pyarena import plan, validate
from pyarena.errors import InvalidArgumentError, PlanInfeasibleError, PlanValidationError
from pyarena.graph import Graph
from pyarena.planning import Plan, PlanOptions, fit, fit_child
from pyarena.planning.fit import fit_plan
from pyarena.runtime import Executor, random_feeds, set_scratch
from pyarena.runtime.kernels import SCRATCH_BUDGET
from pyarena.runtime.models import mobilenet_v2


def mobilenet(scratch_budget=None):
    return set_scratch(mobilenet_v2(resolution=64), scratch_budget, native=False)


def state(g):
    return ([op.name for op in g.ops], [op.scratch_bytes for op in g.ops],
            g.scratch_budget)


def smallest_reachable(build):
    """The arena of the smallest scratch (1 byte per op) in the better order."""
    return min(plan(build(1)).arena_bytes, plan(build(1), schedule=True).arena_bytes)


def outputs(g, p=None):
    ex = Executor(g, p)
    return {k: np.array(v) for k, v in ex.run(random_feeds(g, seed=3)).items()}


def test_without_a_budget_nothing_changes():
    g = branches()
    p = plan(g)
    assert p.budget is None and p.schedule is None
    assert "budget" not in p.to_json() and "budget" not in p.summary()
    assert state(g) == state(branches())


def test_a_budget_the_default_plan_meets_changes_nothing():
    ref = plan(branches())
    g = branches()
    p = plan(g, memory_budget=ref.arena_bytes)
    assert p.arena_bytes == ref.arena_bytes
    assert state(g) == state(branches())
    assert p.to_json()["offsets"] == ref.to_json()["offsets"]
    assert p.budget == {"memory_budget": ref.arena_bytes, "order_changed": False,
                        "scratch_budget": None,
                        "tried": [{"order": "given", "scratch_budget": None,
                                   "arena_bytes": ref.arena_bytes,
                                   "lower_bound_bytes": ref.lower_bound_bytes,
                                   "kernel_state_bytes": 0, "total_bytes": ref.arena_bytes}],
                        "fixed_order_bound_bytes": ref.lower_bound_bytes, "patch": None,
                        "patches": [], "arena_bytes": ref.arena_bytes, "kernel_state_bytes": 0,
                        "total_bytes": ref.arena_bytes}
    assert "fits with the given order, scratch as given (1 plan tried)" in p.summary()
    assert validate(p) == []


def test_a_budget_only_the_scheduled_order_meets_picks_it():
    given = plan(branches()).arena_bytes
    sched_graph = branches()
    scheduled = plan(sched_graph, schedule=True)
    assert scheduled.arena_bytes < given
    g = branches()
    p = plan(g, memory_budget=scheduled.arena_bytes)
    assert p.arena_bytes == scheduled.arena_bytes
    assert p.budget["order_changed"] and p.budget["scratch_budget"] is None
    assert [t["order"] for t in p.budget["tried"]] == ["given", "scheduled"]
    assert p.budget["tried"][0]["arena_bytes"] == given
    assert p.schedule is not None and p.schedule.reordered
    assert [op.name for op in g.ops] == [op.name for op in sched_graph.ops]
    assert {op.name: op.scratch_bytes for op in g.ops} == \
        {op.name: op.scratch_bytes for op in branches().ops}
    assert validate(p) == [] and "scheduled order" in p.summary()
    ref = outputs(branches())
    got = outputs(g, p)
    for k in ref:       # the same ops in another order (and memory): float rounding
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-5, atol=1e-6)


def test_a_budget_needing_smaller_scratch_shrinks_it_and_runs_the_same():
    ref_graph = mobilenet()
    ref_plan = plan(ref_graph)
    ref = outputs(ref_graph, ref_plan)
    g = mobilenet()
    budget = 700_000
    assert ref_plan.arena_bytes > budget
    p = plan(g, memory_budget=budget)
    assert p.arena_bytes <= budget < ref_plan.arena_bytes
    chosen = p.budget["scratch_budget"]
    assert chosen is not None and chosen < SCRATCH_BUDGET
    assert g.scratch_budget == chosen
    # the fastest: the next larger budget (twice this one) does not fit
    larger = [t for t in p.budget["tried"] if t["scratch_budget"] == 2 * chosen]
    assert larger and all(t["arena_bytes"] > budget for t in larger)
    assert max(op.scratch_bytes for op in g.ops) < max(op.scratch_bytes
                                                       for op in ref_graph.ops)
    assert [op.scratch_bytes for op in g.ops] == [op.scratch_bytes for op in mobilenet(chosen).ops]
    assert validate(p) == []
    got = outputs(g, p)
    assert got.keys() == ref.keys()
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-6)


def test_an_impossible_budget_names_the_smallest_arena_and_restores_the_graph():
    g = branches()
    before = state(g)
    smallest = smallest_reachable(branches)
    with pytest.raises(PlanInfeasibleError) as info:     # (patching: channel Concat is
        plan(g, memory_budget=smallest - 1, patch=False)  # a stage op: it goes lower)
    exc = info.value
    assert exc.smallest_bytes == smallest
    assert exc.limit == smallest - 1
    assert f"smallest total reached is {smallest:,} bytes" in str(exc)
    assert f"memory budget of {smallest - 1:,} bytes" in str(exc)
    assert min(t["total_bytes"] for t in exc.tried) == smallest
    assert state(g) == before
    again = pickle.loads(pickle.dumps(exc))
    assert again.smallest_bytes == smallest and str(again) == str(exc)
    # ... and exactly that budget fits, with the smallest scratch reached
    p = plan(g, memory_budget=smallest, patch=False)
    assert p.arena_bytes == smallest and validate(p) == []
    assert p.budget["scratch_budget"] is not None and p.budget["order_changed"]
    # with patching the whole graph (both branches and their Concat) runs in
    # bands, below that: its arena and the weights its band kernels lay out
    # again (the bands' convs share one packing) together
    p = plan(branches(), memory_budget=smallest - 1)
    b = p.budget
    assert b["patches"]
    assert p.arena_bytes + b["kernel_state_bytes"] == b["total_bytes"] <= smallest - 1


def test_the_smallest_arena_of_mobilenet_is_the_one_byte_scratch_plan():
    smallest = smallest_reachable(mobilenet)
    with pytest.raises(PlanInfeasibleError) as info:
        plan(mobilenet(), memory_budget=smallest // 2, patch=False)
    assert info.value.smallest_bytes == smallest
    # running a leading stage in row bands reaches below it
    with pytest.raises(PlanInfeasibleError) as info:
        plan(mobilenet(), memory_budget=smallest // 2)
    assert info.value.smallest_bytes < smallest
    assert any("patch" in t for t in info.value.tried)


def test_rescratch_false_searches_the_order_only():
    smallest_order = plan(branches(), schedule=True).arena_bytes
    with pytest.raises(PlanInfeasibleError, match="kept as given") as info:
        plan(branches(), memory_budget=smallest_order - 1, rescratch=False)
    assert info.value.smallest_bytes == smallest_order
    calls = []

    def knob(graph, budget):       # a caller's own scratch rule
        calls.append(budget)
        return set_scratch(graph, budget)
    p = plan(branches(), memory_budget=smallest_order - 1, rescratch=knob)
    assert calls[0] == SCRATCH_BUDGET // 2 and p.budget["scratch_budget"] == calls[-1]


def test_op_types_the_runtime_cannot_size_keep_their_scratch():
    g = Graph("custom")
    g.add_tensor("x", nbytes=256, role="input")
    g.add_tensor("y", nbytes=256, role="output")
    g.add_op("MyOp", ["x"], ["y"], name="m", scratch_bytes=4096)
    before = state(g)
    with pytest.raises(PlanInfeasibleError, match="cannot be narrowed") as info:
        plan(g, memory_budget=1024)
    assert info.value.smallest_bytes == plan(g).arena_bytes
    assert state(g) == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, "1M", True, [1]])
def test_bad_budgets_are_refused(bad):
    with pytest.raises(InvalidArgumentError, match="memory_budget"):
        plan(branches(), memory_budget=bad)


def test_budget_and_capacity_together_are_refused():
    with pytest.raises(InvalidArgumentError, match="not both"):
        plan(branches(), memory_budget=10**9, capacity=10**9)
    with pytest.raises(InvalidArgumentError, match="rescratch"):
        plan(branches(), memory_budget=1000, rescratch="set_scratch")


def test_the_plan_round_trips_json_with_its_budget():
    g = mobilenet()
    p = plan(g, memory_budget=700_000)
    d = json.loads(json.dumps(p.to_json()))
    assert d["budget"]["memory_budget"] == 700_000
    q = Plan.from_json(d, g)
    assert q.budget == p.budget and q.arena_bytes == p.arena_bytes
    assert q.to_json()["budget"] == p.to_json()["budget"]
    over = dict(d, budget=dict(d["budget"], memory_budget=p.arena_bytes - 1))
    with pytest.raises(PlanValidationError, match="over the memory budget"):
        Plan.from_json(over, g)
    for bad in ([1], {"memory_budget": 1}, dict(d["budget"], tried=[3]),
                dict(d["budget"], memory_budget="1M")):
        with pytest.raises(InvalidArgumentError, match="budget"):
            Plan.from_json(dict(d, budget=bad), g)


class _FakePlan:
    def __init__(self, arena, bound):
        self.arena_bytes, self.lower_bound_bytes = arena, bound


def test_a_candidate_over_the_budget_above_its_bound_is_planned_with_capacity(monkeypatch):
    g = branches()
    asked = []

    def plan_once(graph, options, weights=None):
        capacity = options.capacity
        asked.append(capacity)
        if capacity is None:
            return _FakePlan(1000, 600)        # the heuristics' answer
        if capacity >= 800:
            return _FakePlan(capacity, 600)     # the search reaches the target
        raise PlanInfeasibleError("no plan fits")
    monkeypatch.setattr(fit, "plan_once", plan_once)
    monkeypatch.setattr(fit_child, "ENABLED", False)   # the calls are counted here

    def fit_to(budget):
        return fit_plan(g, PlanOptions(memory_budget=budget, rescratch=False))
    p = fit_to(900)
    assert asked == [None, 900] and p.arena_bytes == 900
    asked.clear()
    with pytest.raises(PlanInfeasibleError) as info:
        fit_to(700)
    assert asked[:2] == [None, 700] and info.value.smallest_bytes == 1000
    asked.clear()
    with pytest.raises(PlanInfeasibleError):
        fit_to(500)     # below the bound: no search
    assert None in asked and 500 not in asked


def test_the_facade_plans_within_a_budget():
    g = mobilenet()
    p = pyarena.plan(g, memory_budget=700_000)
    assert p.arena_bytes <= 700_000 and p.budget["scratch_budget"] is not None
    q = pyarena.plan(mobilenet(), memory_budget=700_000, time_limit=None)
    assert q.budget["scratch_budget"] == p.budget["scratch_budget"]


def test_schedule_true_with_a_budget_tries_the_scheduled_order_only():
    g = branches()
    p = plan(g, memory_budget=10**9, schedule=True)
    assert [t["order"] for t in p.budget["tried"]] == ["scheduled"]
    assert p.budget["order_changed"] and p.schedule.reordered
    assert p.arena_bytes == plan(branches(), schedule=True).arena_bytes


def test_the_executor_plans_within_a_budget_given_in_plan_options():
    g = mobilenet()
    ex = Executor(g, plan_options={"memory_budget": 700_000})
    assert ex.plan.arena_bytes <= 700_000 and g.scratch_budget == ex.plan.budget[
        "scratch_budget"] < SCRATCH_BUDGET
    assert all(k.scratch_bytes <= op.scratch_bytes for k, op in zip(ex.kernels, g.ops))


@st.composite
def budget_cases(draw):
    """A random graph of 2-6 element-wise ops (sizes only, some scratch)
    and a budget around its default arena."""
    n = draw(st.integers(2, 6))
    g = Graph("r")
    g.add_tensor("x", nbytes=draw(st.integers(1, 32)) * 64, role="input")
    names = ["x"]
    for i in range(n):
        ins = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        g.add_tensor(f"t{i}", nbytes=draw(st.integers(1, 32)) * 64)
        g.add_op("Add" if len(ins) == 2 else "Relu", ins, [f"t{i}"], name=f"op{i}",
                 scratch_bytes=draw(st.sampled_from([0, 0, 64, 640])))
        names.append(f"t{i}")
    g.tensors[names[-1]].role = "output"
    return g, draw(st.floats(0.3, 1.2))


@given(budget_cases())
@settings(max_examples=60, deadline=None)
def test_a_budget_is_met_or_refused_with_the_graph_untouched(case):
    g, frac = case
    default = plan(g).arena_bytes
    before = state(g)
    budget = max(1, int(default * frac))
    try:
        p = plan(g, memory_budget=budget)
    except PlanInfeasibleError as exc:
        assert exc.smallest_bytes > budget and state(g) == before
        assert exc.smallest_bytes == min(t["arena_bytes"] for t in exc.tried)
        assert exc.smallest_bytes <= default
    else:
        assert p.arena_bytes <= budget and validate(p) == []
        assert validate(p, g) == []
        if budget >= default:
            assert state(g) == before and p.arena_bytes == default


def test_the_halving_starts_below_the_graphs_own_scratch_budget():
    with pytest.raises(PlanInfeasibleError) as info:
        plan(mobilenet(1 << 16), memory_budget=1)
    levels = [t["scratch_budget"] for t in info.value.tried if "patch" not in t]
    assert levels[0] is None and levels[1] == 1 << 15
    assert all(b < 1 << 16 for b in levels[1:])
    assert levels[1:] == sorted(levels[1:], reverse=True)
