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
    g.add_op("Concat", ["y"], ["z"], name="cat", axis=2)    # strided slices
    p = plan(g, **FAST)
    assert validate(p) == []
    bad = rebuilt(p, [Buffer("x", 32, 0, 1, 0, ["x"]),
                      Buffer("s", 32, 0, 2, 64, ["s", "y", "z"])],
                  arena_bytes=128, lower_bound_bytes=128)
    problems = validate(bad)
    assert any("broadcast" in m for m in problems), problems
    assert any("Concat" in m and "contiguous" in m for m in problems), problems


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


def _bare(buffers, arena, bound, align):
    return Plan(buffers, arena_bytes=arena, lower_bound_bytes=bound, naive_bytes=arena,
                alignment=align, strategy="first-fit")


@pytest.mark.parametrize("where", ["below", "above", "inside"])
def test_sweep_catches_a_newcomer_overlapping_either_neighbour(where):
    """A and B live over steps 0-3 at bytes [0, 64) and [128, 192); C is
    born at step 1 between them in offset order and overlaps A's end, B's
    start, or lies inside B: the sweep must look at both neighbours."""
    off = {"below": 32, "above": 100, "inside": 128}[where]
    bufs = [Buffer("A", 64, 0, 3, 0, ["A"]), Buffer("B", 64, 0, 3, 128, ["B"]),
            Buffer("C", 64, 1, 2, off, ["C"])]
    problems = validate(_bare(bufs, 256, 192, 4))
    victim = "A" if where == "below" else "B"
    assert any("overlap in bytes" in m and f"'{victim}'" in m and "'C'" in m
               for m in problems), problems
    # the same buffers one step apart are fine
    bufs[2] = Buffer("C", 64, 4, 5, off, ["C"])
    assert validate(_bare(bufs, 256, 128, 4)) == []


@pytest.mark.parametrize("offset", [8, 16, 32, 72, 96])
def test_every_misaligned_offset_is_caught(offset):
    p = _bare([Buffer("a", 64, 0, 0, offset, ["a"]), Buffer("b", 64, 0, 0, 192, ["b"])],
              256, 128, 64)
    problems = validate(p)
    assert any("'a'" in m and "not aligned to 64" in m for m in problems), problems
    assert not any("'b'" in m and "not aligned" in m for m in problems)


def test_overwrite_read_by_the_very_next_op_is_caught():
    """c = conv(x); s = sigmoid(c); y = add(s, c): a plan that puts s over c
    (sigmoid is element-wise, same shape) is illegal because the next op
    reads c."""
    g = Graph("next")
    sh = (1, 2, 2, 2)
    g.add_tensor("x", sh, role="input")
    g.add_tensor("c", sh)
    g.add_tensor("s", sh)
    g.add_tensor("y", sh, role="output")
    g.add_op("Conv", ["x"], ["c"], name="conv")
    g.add_op("Sigmoid", ["c"], ["s"], name="sig")
    g.add_op("Add", ["s", "c"], ["y"], name="add")
    p = plan(g, **FAST)
    assert validate(p) == [] and p.buffer_of["s"] is not p.buffer_of["c"]
    forged = rebuilt(p, [Buffer("x", 32, 0, 0, 0, ["x"]), Buffer("c", 32, 0, 2, 64, ["c", "s"]),
                         Buffer("y", 32, 2, 2, 0, ["y"])], arena_bytes=128,
                     lower_bound_bytes=96)
    problems = validate(forged)
    assert any("overwrites 'c'" in m and "'add' (op 2) reads later" in m
               for m in problems), problems


def test_a_transpose_that_moves_data_cannot_be_a_view():
    """Transpose with the default permutation (reversed axes) of a 2x3
    tensor moves data: a plan that makes it a view of its input is wrong."""
    g = Graph("tr")
    g.add_tensor("x", (2, 3), role="input")
    g.add_tensor("a", (2, 3))
    g.add_tensor("t", (3, 2))
    g.add_tensor("y", (3, 2), role="output")
    g.add_op("Conv", ["x"], ["a"], name="conv")
    g.add_op("Transpose", ["a"], ["t"], name="tr")
    g.add_op("Relu", ["t"], ["y"], name="relu")
    p = plan(g, **FAST)
    assert validate(p) == [] and p.buffer_of["t"] is not p.buffer_of["a"]
    forged = rebuilt(p, [Buffer("x", 24, 0, 0, 0, ["x"]), Buffer("a", 24, 0, 2, 64, ["a", "t"]),
                         Buffer("y", 24, 2, 2, 0, ["y"])], arena_bytes=128,
                     lower_bound_bytes=64)
    assert any("moves data" in m for m in validate(forged))
