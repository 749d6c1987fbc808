"""Scratch sized from the slack at each op's step: the arena comes down to
the activations-only bound, the results stay the same, and only ops whose
workspace raised the arena are narrowed."""
import numpy as np
import pytest

from pyarena.errors import MemoryLimitError
from pyarena.planning import PlanOptions, plan, validate
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.kernels import set_scratch
from pyarena.runtime.models import mobilenet_v2, resnet
from pyarena.runtime.slack import activation_live, plan_in_slack, plan_to_run


def _resnet_im2col_stem(resolution):
    """ResNet-18 with its 7x7 stride-2 stem on im2col + BLAS: the one
    workspace of the native graph (the few-input kernel, its default path
    at 224, needs none)."""
    g = resnet(18, resolution=resolution)
    next(op for op in g.ops if op.op_type == "Conv").notes.kernel_path = "numpy"
    return g


@pytest.mark.parametrize("make, native", [(lambda: _resnet_im2col_stem(224), True),
                                          (lambda: resnet(18, resolution=64), False),
                                          (lambda: mobilenet_v2(96), False)])
def test_the_arena_comes_down_to_the_activations_and_results_stay(make, native):
    g0 = set_scratch(make(), None, native)
    p0 = plan(g0)
    live, bound = activation_live(p0, len(g0.ops))
    assert p0.arena_bytes > bound            # the workspace raised the arena
    g1 = set_scratch(make(), None, native)
    p1 = plan_in_slack(g1)
    validate(p1)
    assert bound <= p1.arena_bytes < p0.arena_bytes
    # at most the narrowest workspaces (one output row) stay above the bound
    assert p1.arena_bytes - bound < (p0.arena_bytes - bound) / 2
    if native:
        assert p1.arena_bytes == bound
    assert p1.slack["activation_bound"] == bound and p1.slack["narrowed"]
    narrowed = [op for op in g1.ops if op.notes.scratch_budget is not None]
    assert {op.name for op in narrowed} == set(p1.slack["narrowed"])
    wide = {op.name: op.scratch_bytes for op in g0.ops}
    assert all(op.scratch_bytes < wide[op.name] for op in narrowed)
    # ops away from the peak keep their wide bands
    assert any(op.scratch_bytes == wide[op.name] and op.scratch_bytes > 0
               for op in g1.ops if op.name not in p1.slack["narrowed"])
    feeds = random_feeds(g0, seed=3)
    a = Executor(g0, p0).run(feeds)
    b = Executor(g1, p1).run(feeds)
    for k in a:     # other bands, other BLAS blocking: float rounding of the scale
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6 * np.abs(a[k]).max())


def test_nothing_changes_where_the_workspace_fits():
    g = set_scratch(mobilenet_v2(64), None, True)    # native: no workspace at the peak
    p0 = plan(g)
    p1 = plan_in_slack(g)
    assert p1.arena_bytes == p0.arena_bytes and p1.slack["narrowed"] == {}
    assert not any(op.notes.scratch_budget is not None for op in g.ops)


def test_an_executor_without_a_plan_plans_in_the_slack():
    """Executor(g) with no plan: scratch narrowed to the slack by default
    (an explicit plan(g) keeps the kernels' own rules)."""
    g = set_scratch(_resnet_im2col_stem(224), None, True)
    wide = plan(g)
    _, bound = activation_live(wide, len(g.ops))
    ex = Executor(g)
    assert ex.plan.arena_bytes == bound < wide.arena_bytes
    assert ex.plan.slack["narrowed"]
    feeds = random_feeds(g, seed=1)
    out = ex.run(feeds)
    g2 = set_scratch(_resnet_im2col_stem(224), None, True)
    ref = Executor(g2, plan(g2)).run(feeds)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6 * np.abs(ref[k]).max())


def _same(p, q):
    a, b = p.to_json(), q.to_json()
    a.pop("plan_seconds"), b.pop("plan_seconds")
    return a == b and getattr(p, "slack", None) == getattr(q, "slack", None)


def test_the_slack_planner_takes_plan_options_or_keywords():
    def make():
        return set_scratch(resnet(18, resolution=64), None, False)
    opts = PlanOptions(inplace_concat=False, alignment=128)
    assert _same(plan_in_slack(make(), opts),
                 plan_in_slack(make(), inplace_concat=False, alignment=128))
    assert _same(plan_in_slack(make(), opts, alignment=256),
                 plan_in_slack(make(), inplace_concat=False, alignment=256))


def test_the_plan_to_run_is_the_slacks_unless_a_budget_or_wide_scratch():
    def make():
        return set_scratch(resnet(18, resolution=64), None, False)
    assert plan_to_run(make()).slack["narrowed"]
    wide = plan_to_run(make(), slack=False)
    assert getattr(wide, "slack", None) is None and wide.budget is None
    fit = plan_to_run(make(), PlanOptions(memory_budget=wide.arena_bytes))
    assert getattr(fit, "slack", None) is None and fit.budget is not None


def test_an_executor_takes_plan_options_as_options_or_a_dict():
    g1, g2 = mobilenet_v2(64), mobilenet_v2(64)
    a = Executor(g1, plan_options=PlanOptions(memory_budget=10**8, strategy="first-fit"))
    b = Executor(g2, plan_options={"memory_budget": 10**8, "strategy": "first-fit"})
    assert a.plan.strategy == "first-fit" and _same(a.plan, b.plan)
    # the plan keeps to the executor's max_memory unless the options name one
    need = plan_in_slack(mobilenet_v2(64))
    tight = need.weights_bytes + need.arena_bytes - 1     # over the largest tensor alone
    for opts in (PlanOptions(), {}):
        with pytest.raises(MemoryLimitError, match="arena"):
            Executor(mobilenet_v2(64), plan_options=opts, max_memory=tight)
    Executor(mobilenet_v2(64), plan_options=PlanOptions(max_memory=tight + 1), max_memory=tight)
