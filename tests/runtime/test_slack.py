"""Scratch sized from the slack at each op's step: the arena comes down to
the activations-only bound, the results stay the same, and only ops whose
workspace raised the arena are narrowed."""
import numpy as np
import pytest

from pyarena.planning import plan, validate
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.kernels import set_scratch
from pyarena.runtime.models import mobilenet_v2, resnet
from pyarena.runtime.slack import activation_live, plan_in_slack


@pytest.mark.parametrize("make, native", [(lambda: resnet(18, resolution=224), True),
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
    g = set_scratch(resnet(18, resolution=224), None, True)
    wide = plan(g)
    _, bound = activation_live(wide, len(g.ops))
    ex = Executor(g)
    assert ex.plan.arena_bytes == bound < wide.arena_bytes
    assert ex.plan.slack["narrowed"]
    feeds = random_feeds(g, seed=1)
    out = ex.run(feeds)
    g2 = set_scratch(resnet(18, resolution=224), None, True)
    ref = Executor(g2, plan(g2)).run(feeds)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6 * np.abs(ref[k]).max())
