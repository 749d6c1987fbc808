"""The budget search in a forked child (``planning.fit_child``): the plan
this process makes from the child's choice is the plan the search makes
here -- the same order, scratch, stages and bands, offsets and record of
what was tried, or the same refusal -- and a child that fails, an answer
that does not fit again, or another thread running keeps the search here."""
import threading

import numpy as np
import pytest

from helpers.plan_graphs import branches
from pyarena import plan
from pyarena.errors import PlanInfeasibleError
from pyarena.planning import fit_child
from pyarena.runtime import Executor, random_feeds, set_scratch
from pyarena.runtime.models import mobilenet_v2


def mobilenet(native=True):
    return set_scratch(mobilenet_v2(resolution=64, classes=10), None, native)


def facts(g, p):
    """What the search decided and what it planned, all of it."""
    return (p.arena_bytes, p.kernel_state_bytes, p.budget, g.scratch_budget,
            [(op.name, op.op_type, op.scratch_bytes) for op in g.ops],
            [(b.offset, b.size, b.first, b.last, tuple(b.tensors)) for b in p.buffers],
            None if p.schedule is None else p.schedule.order)


@pytest.fixture
def answers(monkeypatch):
    """The child's answers (None: no child ran)."""
    got = []
    real = fit_child.search_in_child

    def spy(run):
        got.append(real(run))
        return got[-1]
    monkeypatch.setattr(fit_child, "search_in_child", spy)
    return got


def both(monkeypatch, build, budget):
    """facts() of the plan with the search here and in a child."""
    out = {}
    for child in (False, True):
        monkeypatch.setattr(fit_child, "ENABLED", child)
        g = build()
        out[child] = facts(g, plan(g, memory_budget=budget))
    return out


def unpatched_smallest():
    with pytest.raises(PlanInfeasibleError) as info:
        plan(mobilenet(), memory_budget=1, patch=False)
    return info.value.smallest_bytes


@pytest.mark.parametrize("case", ["scheduled", "scratch", "patched"])
def test_the_childs_choice_planned_here_is_the_plan_the_search_makes(case, monkeypatch,
                                                                        answers):
    if case == "scheduled":
        build, budget = branches, plan(branches(), schedule=True).arena_bytes
    elif case == "scratch":
        build, budget = (lambda: mobilenet(False)), 700_000
    else:
        build, budget = mobilenet, unpatched_smallest() * 3 // 4
    out = both(monkeypatch, build, budget)
    assert out[True] == out[False]
    assert answers[-1] is not None and answers[-1]["found"]     # the child searched
    p_budget = out[True][2]
    if case == "scheduled":
        assert p_budget["order_changed"]
    elif case == "scratch":
        assert p_budget["scratch_budget"] is not None and not p_budget["patches"]
    else:
        assert p_budget["patches"] and answers[-1]["chosen"]


def test_the_patched_plan_from_the_childs_choice_runs_as_the_unpatched_one(monkeypatch):
    monkeypatch.setattr(fit_child, "ENABLED", True)
    g0 = mobilenet()
    ref = Executor(g0, plan(g0)).run(random_feeds(g0, seed=1))
    g = mobilenet()
    p = plan(g, memory_budget=unpatched_smallest() * 3 // 4)
    got = Executor(g, p).run(random_feeds(g, seed=1))
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)


def test_a_budget_nothing_meets_is_refused_alike(monkeypatch, answers):
    errors = {}
    for child in (False, True):
        monkeypatch.setattr(fit_child, "ENABLED", child)
        g = branches()
        names = [op.name for op in g.ops]
        with pytest.raises(PlanInfeasibleError) as info:
            plan(g, memory_budget=1000)
        assert [op.name for op in g.ops] == names
        errors[child] = (str(info.value), info.value.smallest_bytes, info.value.tried)
    assert errors[True] == errors[False]
    assert answers[-1] is not None and not answers[-1]["found"]


class _Broken:
    @staticmethod
    def dumps(*a, **k):
        raise RuntimeError("the child fails")


def test_a_failing_child_leaves_the_search_to_this_process(monkeypatch, answers):
    monkeypatch.setattr(fit_child, "ENABLED", False)
    g = branches()
    ref = facts(g, plan(g, memory_budget=plan(branches(), schedule=True).arena_bytes))
    monkeypatch.setattr(fit_child, "ENABLED", True)
    monkeypatch.setattr(fit_child, "pickle", _Broken)   # the child cannot answer
    g = branches()
    got = facts(g, plan(g, memory_budget=plan(branches(), schedule=True).arena_bytes))
    assert answers[-1] is None and got == ref


def test_an_answer_that_does_not_fit_again_is_searched_here(monkeypatch, answers):
    budget = unpatched_smallest() * 3 // 4
    monkeypatch.setattr(fit_child, "ENABLED", False)
    g = mobilenet()
    ref = facts(g, plan(g, memory_budget=budget))
    monkeypatch.setattr(fit_child, "ENABLED", True)
    replays = []
    real = fit_child.replay

    def no_fit(search, knob, choice):
        search.budget -= 1 << 30            # nothing fits while replaying
        try:
            replays.append(real(search, knob, choice))
        finally:
            search.budget += 1 << 30
        return replays[-1]
    monkeypatch.setattr(fit_child, "replay", no_fit)
    g = mobilenet()
    got = facts(g, plan(g, memory_budget=budget))
    assert replays == [None] and answers[-1]["found"]
    assert got == ref       # the search here: its own record of what it tried


def test_no_child_while_another_thread_runs(monkeypatch):
    monkeypatch.setattr(fit_child, "ENABLED", True)
    assert fit_child.enabled() == hasattr(__import__("os"), "fork")
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not fit_child.enabled()
        assert fit_child.search_in_child(lambda: 1) is None
    finally:
        stop.set()
        t.join()
    assert fit_child.search_in_child(lambda: {"x": 1}) == {"x": 1}
