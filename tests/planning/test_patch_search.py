"""More than one patched stage (planning/patch_search.py): an encoder's
stem and a decoder's upsampling chain, each of whose high-resolution maps
set the peak in turn, both run in row bands under one budget; the plans
never overlap live tensors and the outputs are those of the unpatched run."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyarena import PlanInfeasibleError, plan
from pyarena.graph import GraphBuilder
from pyarena.planning import Plan, plan_intervals, validate
from pyarena.planning.patch import PATCH_OP, band_rows, patch_graph, stages
from pyarena.planning.patch_search import band_counts, peak_op
from pyarena.planning.plot import patch_marks
from pyarena.runtime import Executor, random_feeds, set_scratch


def _resize(b, x, mode):
    n, c, h, w = b.shapes[x]
    y = b.tensor((n, c, 2 * h, 2 * w))
    b.g.add_op("Resize", [x], [y], name=b._name("resize"), mode=mode,
               coordinate_transformation_mode="half_pixel")
    return y


def encoder_decoder(h=48, w=16, c=12, mode="linear", seed=4):
    """A MobileNet-like encoder at full resolution (1x1 and depthwise 3x3
    convs: no im2col scratch), two stride-2 depthwise convs down to a
    bottleneck that a classifier head reads too (its global pool ends any
    stage there), a Resize up, an Add of the encoder's half-resolution
    map, a Resize up again and 1x1 / depthwise convs at full resolution
    to one channel."""
    b = GraphBuilder("ed", seed=seed)
    x = b.input((1, 4, h, w))
    a = b.relu(b.conv(b.relu(b.conv(x, c, 1)), c, 3, group=c))
    e = b.conv(b.conv(a, c, 3, 2, group=c), 8, 1)
    d = b.conv(b.relu(b.conv(e, 8, 3, 2, group=8)), 8, 1)
    b.classifier(d, classes=3, softmax=False, output="head")
    u = _resize(b, b.add(_resize(b, d, mode), e), mode)
    u = b.relu(b.conv(b.relu(b.conv(u, c, 1)), c, 3, group=c))
    return set_scratch(b.finish([b.conv(u, 1, 1)]))


def run(g, p):
    return {k: np.array(v) for k, v in Executor(g, p).run(random_feeds(g, seed=2)).items()}


def smallest(g, **kw):
    with pytest.raises(PlanInfeasibleError) as info:
        plan(g, memory_budget=1, **kw)
    return info.value


def arena_only(g, budget):
    """The kernels' scratch rule with no kernel state counted: this tiny
    model's band kernels lay out more weights than its arena saves, so the
    search's steps are tested on the arena alone."""
    set_scratch(g, budget)
    for op in g.ops:
        op.notes.state_bytes = 0


def test_two_stages_go_below_what_one_stage_reaches(tmp_path):
    g0 = encoder_decoder()
    p0 = plan(g0)
    ref = run(g0, p0)
    exc = smallest(encoder_decoder(), rescratch=arena_only)
    one = min(t["total_bytes"] for t in exc.tried if "patch" in t and "patches" not in t)
    two = exc.smallest_bytes
    assert two < one < p0.arena_bytes
    budget = (one + two) // 2        # out of reach of any one stage
    g = encoder_decoder()
    p = plan(g, memory_budget=budget, rescratch=arena_only)
    recs = p.budget["patches"]
    assert p.arena_bytes <= budget and len(recs) >= 2 and p.budget["patch"] == recs[0]
    # above the smallest arena: some stage in fewer bands than one row each
    assert any(len(r["bands"]) < r["bands"][-1][1] for r in recs)
    assert validate(p) == [] and validate(p, g) == []
    ops = [op.name for op in g.ops if op.op_type == PATCH_OP]
    assert ops == [r["op"] for r in recs]               # in graph order
    inner = [n for r in recs for n in r["ops"]]
    assert len(inner) == len(set(inner))                # disjoint stages
    types = {op.name: op.op_type for op in g0.ops}
    assert any(types[n] == "Resize" for r in recs for n in r["ops"])   # a decoder's too
    got = run(g, p)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)
    assert sum(f"{r['grid'][0]} x 1 patches" in p.summary() for r in recs) == len(recs)
    back = Plan.from_json(p.to_json(), g)
    assert back.budget["patches"] == recs and back.arena_bytes == p.arena_bytes
    assert [g.ops[at].name for at, _ in patch_marks(p)] == ops     # each stage marked


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([24, 32, 40]), st.sampled_from([8, 12]), st.sampled_from([4, 8, 12]),
       st.sampled_from(["linear", "nearest"]), st.floats(0.15, 1.0))
def test_any_budget_fits_without_overlap_and_gives_the_unpatched_outputs(h, w, c, mode,
                                                                         frac):
    g0 = encoder_decoder(h, w, c, mode)
    p0 = plan(g0)
    ref = run(g0, p0)
    g = encoder_decoder(h, w, c, mode)
    budget = max(1, int(p0.lower_bound_bytes * frac))
    before = [op.name for op in g.ops]
    try:
        p = plan(g, memory_budget=budget)
    except PlanInfeasibleError as exc:
        assert exc.smallest_bytes > budget and [op.name for op in g.ops] == before
        return
    assert p.arena_bytes <= budget and validate(p) == [] and validate(p, g) == []
    inner = [n for r in p.budget["patches"] for n in r["ops"]]
    assert len(inner) == len(set(inner))
    got = run(g, p)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 9), st.integers(0, 9)),
                min_size=1, max_size=30))
def test_the_peak_op_is_the_first_with_the_most_bytes_live(rows):
    bufs = [(f"b{i}", size, min(a, z), max(a, z)) for i, (size, a, z) in enumerate(rows)]
    p = plan_intervals(bufs)
    live = [sum(s for _, s, f, la in bufs if f <= i <= la) for i in range(p.num_ops)]
    assert peak_op(p) == live.index(max(live))


@given(st.integers(1, 300))
def test_band_counts_are_every_distinct_grid_fewest_first(rows):
    """One count per band height h: ceil(rows / h) bands, fewest first."""
    counts = band_counts(rows)
    assert counts == sorted({math.ceil(rows / h) for h in range(1, rows + 1)})
    assert counts[0] == 1 and counts[-1] == rows


@given(st.integers(1, 300), st.integers(1, 400))
def test_band_rows_cut_the_rows_into_equal_bands(rows, n):
    """At most n bands, contiguous, covering every row once, all of the
    height ceil(rows / n) but a shorter last one."""
    bands = band_rows(rows, n)
    h = math.ceil(rows / min(n, rows))
    assert bands[0][0] == 0 and bands[-1][1] == rows
    assert all(a == b for (_, a), (b, _) in zip(bands, bands[1:]))
    assert all(b - a == h for a, b in bands[:-1]) and 0 < bands[-1][1] - bands[-1][0] <= h
    assert len(bands) == math.ceil(rows / h) <= n


def test_stages_around_a_peak_contain_it_and_may_start_at_a_resize():
    g = encoder_decoder()
    types = [op.op_type for op in g.ops]
    enc, dec = types.index("Conv", 1), len(types) - 3        # full-resolution depthwise convs
    found = {(s.first, s.last) for s in stages(g, around=enc)}
    assert all(a <= enc <= b for a, b in found)
    # ends at the encoder's map, as large as the stage's inner tensors
    assert (0, types.index("Conv", 4) - 1) in found
    last_resize = len(types) - 1 - types[::-1].index("Resize")
    found = {(s.first, s.last) for s in stages(g, around=dec)}
    assert all(a <= dec <= b for a, b in found)
    assert (last_resize, len(types) - 1) in found       # the decoder from its last Resize


def test_stages_with_fused_residuals_reuse_rows_and_give_the_unpatched_outputs():
    """Row reuse is tried for every stage, fused residuals too (a Conv's
    input 3, whose skip is read rows apart by the block's first conv and
    by the residual).  MobileNetV2 (fused: residual blocks): every stage
    the search considers that holds a residual, in one-row bands with row
    reuse, gives the unpatched run's outputs; and so does the smallest
    patched arena."""
    from pyarena.runtime import fuse
    from pyarena.runtime.models import mobilenet_v2

    def build():
        g = mobilenet_v2(64)
        fuse(g)
        return set_scratch(g)
    g = build()
    ref = run(g, plan(g))
    has_residual = (lambda ops: any(len(op.inputs) > 3 and op.inputs[3] for op in ops))
    spans = {(st.first, st.last) for st in stages(g) if has_residual(st.ops)}
    assert spans
    for first, last in sorted(spans):
        h = build()
        st = next(st for st in stages(h) if (st.first, st.last) == (first, last))
        patch_graph(h, st, st.rows, reuse=True)
        out = run(set_scratch(h), plan(h))
        for k in ref:
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6)
    p = plan(g, memory_budget=smallest(g).smallest_bytes)
    assert any(op.op_type == PATCH_OP for op in g.ops)
    out = run(g, p)
    for k in ref:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, atol=1e-6)
