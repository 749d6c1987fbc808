"""The independent plan validator catches what it should (and only that)."""
import copy
import random

import pytest

from helpers.plan_graphs import random_graph

from pyarena.graph import Graph
from pyarena.planning import Buffer, Plan, plan, plan_intervals
from pyarena.planning import PlanValidationError, validate

FAST = dict(time_limit=0.2)


def residual():
    g = Graph("res")
    s = (1, 4, 4, 4)
    g.add_tensor("x", s, role="input")
    for n in ("c", "a", "b", "r"):
        g.add_tensor(n, s)
    g.add_tensor("y", s, role="output")
    g.add_op("Conv", ["x"], ["c"], name="conv0", scratch_bytes=300)
    g.add_op("Relu", ["c"], ["a"], name="relu0")
    g.add_op("Conv", ["a"], ["b"], name="conv1")
    g.add_op("Relu", ["b"], ["r"], name="relu1")
    g.add_op("Add", ["r", "a"], ["y"], name="add")
    return g


def rebuilt(p, buffers, **kw):
    """A Plan with doctored buffers, otherwise like ``p``."""
    d = dict(arena_bytes=p.arena_bytes, lower_bound_bytes=p.lower_bound_bytes,
             naive_bytes=p.naive_bytes, alignment=p.alignment, strategy=p.strategy,
             num_ops=p.num_ops, graph=p.graph, tensor_info=p._info)
    d.update(kw)
    return Plan(buffers, **d)


def test_valid_plans_pass():
    p = plan(residual(), **FAST)
    assert validate(p) == []
    assert validate(p, raise_errors=True) == []


def test_overlapping_live_buffers_are_caught():
    p = plan(residual(), **FAST)
    bufs = copy.deepcopy(p.buffers)
    a = next(b for b in bufs if "a" in b.tensors)
    x = next(b for b in bufs if "x" in b.tensors)   # both live at op 0
    a.offset = x.offset
    problems = validate(rebuilt(p, bufs))
    assert any("overlap in bytes" in m and "'x'" in m for m in problems)
    with pytest.raises(PlanValidationError, match="overlap"):
        validate(rebuilt(p, bufs), raise_errors=True)


def test_disjoint_lifetimes_may_share_bytes():
    p = plan_intervals([("a", 64, 0, 1), ("b", 64, 2, 3)], alignment=64, **FAST)
    assert p.arena_bytes == 64 and validate(p) == []


def test_forged_illegal_in_place_is_caught():
    p = plan(residual(), **FAST)
    bufs = copy.deepcopy(p.buffers)
    # pretend conv1's relu wrote over `a` (still needed by the add)
    ab = next(b for b in bufs if "a" in b.tensors)
    rb = next(b for b in bufs if "r" in b.tensors)
    rb.tensors.remove("r")
    ab.tensors.append("r")
    ab.last = max(ab.last, 4)
    bufs = [b for b in bufs if b.tensors]
    forged = rebuilt(p, bufs)
    problems = validate(forged)
    assert any("reads later" in m or "does not read" in m for m in problems), problems


def test_in_place_over_graph_input_is_caught():
    g = Graph("in")
    g.add_tensor("x", (4,), role="input")
    g.add_tensor("y", (4,), role="output")
    g.add_op("Relu", ["x"], ["y"], name="relu")
    p = plan(g, **FAST)
    assert len(p.buffers) == 2
    merged = Buffer("x", 16, 0, 0, 0, ["x", "y"])
    problems = validate(rebuilt(p, [merged]))
    assert any("graph input" in m for m in problems)


def test_broadcast_in_place_and_concat_in_place_are_caught():
    g = Graph("bc")
    g.add_tensor("x", (1, 2, 2, 2), role="input")
    g.add_tensor("s", (1, 2, 1, 1))
    g.add_tensor("y", (1, 2, 2, 2))
    g.add_tensor("z", (1, 2, 2, 2), role="output")
    g.add_op("ReduceMean", ["x"], ["s"], name="mean")
    g.add_op("Mul", ["s", "x"], ["y"], name="mul")
    g.add_op("Concat", ["y"], ["z"], name="cat", axis=1)
    p = plan(g, **FAST)
    assert validate(p) == []
    bad = rebuilt(p, [Buffer("x", 32, 0, 1, 0, ["x"]),
                      Buffer("s", 32, 0, 2, 64, ["s", "y", "z"])],
                  arena_bytes=128, lower_bound_bytes=128)
    problems = validate(bad)
    assert any("broadcast" in m for m in problems), problems
    assert any("Concat" in m for m in problems), problems


def test_lifetime_coverage_scratch_and_alignment_checks():
    p = plan(residual(), alignment=64, **FAST)
    bufs = copy.deepcopy(p.buffers)
    sc = next(b for b in bufs if b.name == "conv0::scratch")
    sc.last = 1
    a = next(b for b in bufs if "a" in b.tensors)
    a.last = 3                       # the add (op 4) still reads a
    x = next(b for b in bufs if "x" in b.tensors)
    x.offset += 8
    problems = validate(rebuilt(p, bufs))
    assert any("not exactly its op" in m for m in problems)
    assert any("member 'a' lives" in m for m in problems)
    assert any("not aligned" in m for m in problems)


def test_missing_tensor_wrong_offsets_and_bound():
    p = plan(residual(), **FAST)
    bufs = [copy.deepcopy(b) for b in p.buffers if "y" not in b.tensors]
    problems = validate(rebuilt(p, bufs, lower_bound_bytes=p.lower_bound_bytes + 1))
    assert any("'y'" in m and "no buffer" in m for m in problems)
    assert any("lower bound" in m for m in problems)
    q = plan(residual(), **FAST)
    q.offsets["x"] = 12345
    assert any("offsets['x']" in m for m in validate(q))
    r = plan(residual(), **FAST)
    r.arena_bytes = r.lower_bound_bytes - 64
    assert any("beyond the arena" in m for m in validate(r))


def test_sweep_finds_a_single_collision_among_many():
    rng = random.Random(7)
    bufs = [(f"b{i}", rng.randint(1, 4096), s, s + rng.randint(0, 50))
            for i, s in enumerate(rng.randint(0, 20000) for _ in range(20000))]
    p = plan_intervals(bufs, strategy="greedy-by-size", alignment=64, **FAST)
    assert validate(p) == []
    # move one buffer onto a live neighbour
    bufs2 = copy.deepcopy(p.buffers)
    victim = bufs2[100]
    other = next(b for b in bufs2 if b is not victim and b.first <= victim.last
                 and victim.first <= b.last and b.size > 0)
    victim.offset = other.offset
    problems = validate(rebuilt(p, bufs2, graph=None))
    assert any("overlap in bytes" in m for m in problems)


@pytest.mark.parametrize("seed", range(30))
def test_random_plans_validate_and_corruptions_are_caught(seed):
    g = random_graph(random.Random(seed))
    p = plan(g, **FAST)
    assert validate(p) == []
    live_pairs = [(a, b) for a in p.buffers for b in p.buffers
                  if a is not b and a.first <= b.last and b.first <= a.last
                  and a.size and b.size]
    if live_pairs:
        a, b = live_pairs[0]
        bufs = copy.deepcopy(p.buffers)
        idx_a, idx_b = p.buffers.index(a), p.buffers.index(b)
        bufs[idx_a].offset = bufs[idx_b].offset
        assert any("overlap" in m for m in validate(rebuilt(p, bufs)))


def test_multi_output_overwrite_and_unrelated_sharing_are_caught():
    g = Graph("mo")
    g.add_tensor("x", (4,), role="input")
    g.add_tensor("a", (4,))
    g.add_tensor("y", (4,))
    g.add_tensor("m", (4,), role="output")
    g.add_tensor("z", (4,), role="output")
    g.add_op("Conv", ["x"], ["a"], name="conv")
    g.add_op("BatchNormalization", ["a"], ["y", "m"], name="bn")
    g.add_op("Sigmoid", ["y"], ["z"], name="sig")
    p = plan(g, **FAST)
    assert validate(p) == [] and p.buffer_of["y"] is not p.buffer_of["a"]
    bufs = [Buffer("x", 16, 0, 0, 0, ["x"]), Buffer("a", 16, 0, 1, 64, ["a", "y"]),
            Buffer("m", 16, 1, 2, 128, ["m"]), Buffer("z", 16, 2, 2, 0, ["z"])]
    problems = validate(rebuilt(p, bufs, arena_bytes=192, lower_bound_bytes=192))
    assert any("2 outputs" in m for m in problems), problems
    # z placed in x's buffer: sig does not read x
    bufs = [Buffer("x", 16, 0, 2, 0, ["x", "z"]), Buffer("a", 16, 0, 1, 64, ["a"]),
            Buffer("y", 16, 1, 2, 128, ["y"]), Buffer("m", 16, 1, 2, 192, ["m"])]
    problems = validate(rebuilt(p, bufs, arena_bytes=256, lower_bound_bytes=256))
    assert any("does not read" in m for m in problems), problems
