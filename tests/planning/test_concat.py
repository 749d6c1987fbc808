"""Concat in place (pyarena.planning.concat): the producers of a Concat's
inputs write into their slices of its output."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.plan_graphs import feeds_for, random_graph, run_planned, run_reference

from pyarena.errors import PlanInfeasibleError
from pyarena.graph import Graph
from pyarena.planning import Buffer, Plan, plan, tensor_lifetimes, validate
from pyarena.planning import concat as concat_mod

FAST = dict(time_limit=0.2)


def checked(p):
    problems = validate(p)
    assert problems == [], problems
    return p


def same_outputs(p):
    g = p.graph
    feeds = feeds_for(g, seed=3)
    ref = run_reference(g, feeds)
    got = run_planned(p, feeds)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6)


class G:
    """A small graph builder: 1 x C x 2 x 3 float tensors, 1x1 convs."""

    def __init__(self, name="cat"):
        self.g = Graph(name)
        self.n = 0

    def t(self, c, role="activation", name=None, shape=None):
        self.n += 1
        name = name or f"t{self.n}"
        data = None
        if role == "constant":
            data = np.full(shape or (1, c, 2, 3), 0.5 + self.n, np.float32)
        self.g.add_tensor(name, shape or (1, c, 2, 3), role=role, data=data)
        return name

    def conv(self, x, c, out=None, role="activation"):
        ci = self.g.tensors[x].shape[1]
        self.n += 1
        w = f"w{self.n}"
        rng = np.random.default_rng(self.n)
        self.g.add_tensor(w, (c, ci), role="constant",
                          data=rng.standard_normal((c, ci)).astype(np.float32))
        shape = (1, c) + tuple(self.g.tensors[x].shape[2:])
        y = out or self.t(c, role, shape=shape)
        self.g.add_op("Conv", [x, w], [y], name=f"conv_{y}")
        return y

    def op(self, op_type, xs, c, role="activation", shape=None, **attrs):
        y = self.t(c, role, shape=shape)
        self.g.add_op(op_type, list(xs), [y], name=f"{op_type.lower()}_{y}", **attrs)
        return y

    def cat(self, xs, role="activation", axis=1, **attrs):
        shapes = [self.g.tensors[x].shape for x in xs]
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        return self.op("Concat", xs, None, role=role, shape=tuple(shape), axis=axis, **attrs)

    def done(self):
        return self.g.validate()


def placed(p):
    return {(r[1], r[2]) for r in p.reuses if r[3] == "concat"}


@pytest.fixture
def forced(monkeypatch):
    """The placer takes every input the safety rules allow, whatever the
    estimate, and its plan is kept: the rules alone decide."""
    init = concat_mod.ConcatPlacer.__init__

    def everything(self, op, slices):
        own, cands = self._candidates(op, slices)
        return {k for k, _ in cands}

    def patched(self, *a, **kw):
        monkeypatch.setattr(concat_mod.ConcatPlacer, "_decide", everything)
        init(self, *a, **kw)
        self.base_peak = 1 << 62
    monkeypatch.setattr(concat_mod.ConcatPlacer, "__init__", patched)


def test_inputs_are_written_into_their_slices():
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 3)
    c = b.conv(x, 1)
    y = b.cat([a, c])
    b.op("Relu", [y], 4, "output")
    g = b.done()
    p = checked(plan(g, **FAST))
    off = plan(g, inplace_concat=False, **FAST)
    assert placed(p) == {(a, y), (c, y)}
    assert p.buffer_of[a] is p.buffer_of[y] is p.buffer_of[c]
    assert p.offsets[a] == p.offsets[y]
    assert p.offsets[c] == p.offsets[y] + g.tensors[a].nbytes
    # the inputs never exist apart from the output: its buffer is born with a
    assert p.buffer_of[y].first == 0
    assert p.lower_bound_bytes < off.lower_bound_bytes
    assert p.arena_bytes <= off.arena_bytes
    views = p.bind()
    assert np.shares_memory(views[y][:, 3:], views[c])
    same_outputs(p)
    assert "2 Concat inputs in place" in p.summary()


def test_a_capacity_only_the_concat_plan_meets():
    b = G()
    x = b.t(2, "input", "x")
    y = b.cat([b.conv(x, 4), b.conv(x, 4)])
    b.op("Relu", [y], 8, "output")
    g = b.done()
    on = checked(plan(g, alignment=1, **FAST))
    assert placed(on)
    with pytest.raises(PlanInfeasibleError):
        plan(g, alignment=1, capacity=on.arena_bytes, inplace_concat=False, **FAST)
    again = checked(plan(g, alignment=1, capacity=on.arena_bytes, **FAST))
    assert again.arena_bytes == on.arena_bytes and placed(again)


def test_strided_slices_graph_inputs_constants_and_fused_activations_are_copied(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 2)
    k = b.t(2, "constant")
    y = b.cat([a, x, k])                           # a placed; x, k copied
    a2 = b.conv(x, 2)
    z = b.cat([a2, a2], axis=2)                    # 1 x 2 before the axis: strided
    a3 = b.conv(x, 2)
    v = b.cat([a3], activation="RELU")             # the activation rewrites the slice
    b.op("Add", [b.op("Relu", [y], 6), b.op("Relu", [y], 6)], 6, "output")
    b.op("Relu", [z], None, "output", shape=(1, 2, 4, 3))
    b.op("Relu", [v], 2, "output")
    g = b.done()
    p = checked(plan(g, **FAST))
    assert placed(p) == {(a, y)}
    assert p.buffer_of[x] is not p.buffer_of[y]
    assert p.buffer_of[a2] is not p.buffer_of[z]
    assert p.buffer_of[a3] is not p.buffer_of[v]


def test_an_input_named_twice_is_placed_once(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 2)
    y = b.cat([a, a], "output")
    g = b.done()
    p = checked(plan(g, **FAST))
    assert placed(p) == {(a, y)}
    assert p.offsets[a] == p.offsets[y]
    same_outputs(p)


def test_a_graph_output_input_stays_intact_after_the_concat(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 2, role="output")
    c = b.conv(x, 2)
    y = b.cat([a, c])
    b.op("Relu", [y], 4, "output")               # may not overwrite the output a
    g = b.done()
    p = checked(plan(g, **FAST))
    assert (a, y) in placed(p)
    assert not any(r[3] == "inplace" for r in p.reuses)
    same_outputs(p)


def test_no_inplace_over_the_output_while_an_input_is_read_later(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 2)
    c = b.conv(x, 2)
    y = b.cat([a, c])
    r = b.op("Relu", [y], 4)                      # would overwrite a, read next
    s = b.op("Sigmoid", [a], 2)
    b.op("Add", [b.cat([s, s]), r], 4, "output")
    g = b.done()
    p = checked(plan(g, alignment=1, **FAST))
    assert (a, y) in placed(p)
    assert p.buffer_of[r] is not p.buffer_of[y]
    same_outputs(p)


def test_no_inplace_over_an_input_while_the_output_is_read_later(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 2)
    c = b.conv(x, 2)
    y = b.cat([a, c])
    s = b.op("Sigmoid", [a], 2)                   # would overwrite y's slice
    r = b.op("Relu", [y], 4)
    b.op("Add", [b.cat([s, s]), r], 4, "output")
    g = b.done()
    p = checked(plan(g, alignment=1, **FAST))
    assert (a, y) in placed(p)
    assert p.buffer_of[s] is not p.buffer_of[a]
    assert p.buffer_of[r] is p.buffer_of[y]       # y's last reader: in place is fine
    same_outputs(p)


def test_a_concat_of_a_concat_moves_the_inner_buffer_whole(forced):
    b = G()
    x = b.t(2, "input", "x")
    a = b.conv(x, 1)
    c = b.conv(x, 2)
    y1 = b.cat([a, c])
    d = b.conv(x, 3)
    y2 = b.cat([d, y1])
    b.op("Relu", [y2], 6, "output")
    g = b.done()
    p = checked(plan(g, **FAST))
    assert placed(p) == {(a, y1), (c, y1), (d, y2), (y1, y2)}
    nb = {t: g.tensors[t].nbytes for t in (a, d)}
    assert p.offsets[y1] == p.offsets[y2] + nb[d]
    assert p.offsets[c] == p.offsets[y1] + nb[a]
    assert len({id(p.buffer_of[t]) for t in (a, c, d, y1, y2)}) == 1
    same_outputs(p)


def test_the_option_and_inplace_false_turn_it_off():
    b = G()
    x = b.t(2, "input", "x")
    y = b.cat([b.conv(x, 2), b.conv(x, 2)], "output")
    g = b.done()
    assert placed(plan(g, **FAST))
    assert not placed(checked(plan(g, inplace_concat=False, **FAST)))
    assert not placed(checked(plan(g, inplace=False, **FAST)))
    assert not placed(checked(plan(g, rules={"Concat": "none"}, **FAST)))
    assert y in plan(g, **FAST).buffer_of


def test_json_round_trip_keeps_the_slices(forced):
    b = G()
    x = b.t(2, "input", "x")
    a, c = b.conv(x, 1), b.conv(x, 2)
    b.cat([a, c], "output")
    g = b.done()
    p = checked(plan(g, **FAST))
    d = p.to_json()
    assert any(buf.get("at") for buf in d["buffers"])
    q = Plan.from_json(d, graph=g)
    assert q.offsets == p.offsets
    assert q.buffer_of[c].at == p.buffer_of[c].at


def _merged_case():
    b = G()
    x = b.t(2, "input", "x")
    a, c = b.conv(x, 2), b.conv(x, 2)
    y = b.cat([a, c])
    r = b.op("Relu", [y], 4, "output")
    return b.done(), a, c, y, r


def _doctored(p, g, buffers):
    return Plan(buffers, arena_bytes=p.arena_bytes, lower_bound_bytes=p.lower_bound_bytes,
                naive_bytes=p.naive_bytes, alignment=p.alignment, strategy=p.strategy,
                num_ops=p.num_ops, graph=g, tensor_info=p._info)


def test_the_validator_checks_every_slice(forced):
    g, a, c, y, r = _merged_case()
    p = checked(plan(g, alignment=1, **FAST))
    buf = p.buffer_of[y]
    n = g.tensors[a].nbytes
    others = [b for b in p.buffers if b is not buf]

    def problems(at, tensors=None, size=None):
        nb = Buffer(buf.name, size or buf.size, buf.first, buf.last, buf.offset,
                    tensors or list(buf.tensors), at)
        return validate(_doctored(p, g, others + [nb]))
    assert problems(dict(buf.at)) == []
    # the inputs swapped: each sits in the other's slice
    assert any("not in that slice" in m for m in problems({a: n, c: 0}))
    # an input across two slices
    assert any("straddles" in m for m in problems({c: n // 2}))
    # an offset for a tensor the buffer does not hold
    assert any("does not hold" in m for m in problems({c: n, "zz": 4}))
    # past the end of the buffer
    assert any("needs" in m for m in problems({c: n + 4}, size=buf.size))
    # Relu written over the merged buffer while its input c is read later
    # (here: never, so legal) -- and the strided case
    g2, a2, c2, y2, r2 = _merged_case()
    next(op for op in g2.ops if op.op_type == "Concat").attrs["axis"] = 2
    g2.tensors[y2].shape = (1, 2, 4, 3)
    q = _doctored(p, g2, others + [Buffer(buf.name, buf.size, buf.first, buf.last,
                                          buf.offset, list(buf.tensors), dict(buf.at))])
    assert any("not contiguous" in m for m in validate(q))


def test_an_overwrite_of_a_placed_input_read_later_is_caught(forced):
    b = G()
    x = b.t(2, "input", "x")
    a, c = b.conv(x, 2), b.conv(x, 2)
    y = b.cat([a, c])
    s = b.op("Sigmoid", [a], 2)
    b.op("Add", [b.op("Concat", [s, s], None, shape=(1, 4, 2, 3), axis=1), y], 4, "output")
    g = b.done()
    p = checked(plan(g, alignment=1, **FAST))
    buf = p.buffer_of[y]
    assert p.buffer_of[s] is not buf          # y is read after the Sigmoid
    others = [bb for bb in p.buffers if bb is not buf and s not in bb.tensors]
    forged = Buffer(buf.name, buf.size, buf.first, max(buf.last, p.buffer_of[s].last),
                    buf.offset, list(buf.tensors) + [s], dict(buf.at))
    problems = validate(_doctored(p, g, others + [forged]))
    assert any("reads later" in m for m in problems), problems


def test_never_larger_than_without_even_when_every_input_is_forced(monkeypatch):
    """A placer that merges everything it can: the plan without Concat in
    place is kept when it is smaller."""
    b = G()
    x = b.t(8, "input", "x")
    early = b.conv(x, 8)                # placed, y would live from here...
    big = b.conv(x, 40)                 # ...through the widest step
    y = b.cat([early, b.conv(big, 8)])
    b.op("Relu", [y], 16, "output")
    g = b.done()
    base = checked(plan(g, alignment=1, inplace_concat=False, **FAST))
    natural = checked(plan(g, alignment=1, **FAST))
    assert not placed(natural)          # the estimate sees it: no step gains

    def everything(self, op, slices):
        own, cands = self._candidates(op, slices)
        return {k for k, _ in cands}
    monkeypatch.setattr(concat_mod.ConcatPlacer, "_decide", everything)
    forced = checked(plan(g, alignment=1, **FAST))
    assert forced.arena_bytes == base.arena_bytes
    assert not placed(forced)


def _connected(p):
    parent = {}

    def find(t):
        while parent.get(t, t) != t:
            t = parent[t]
        return t
    for _, src, dst, _ in p.reuses:
        parent[find(src)] = find(dst)
    return find


def _no_unrelated_overlap(p, g):
    """Tensors live at one step whose bytes overlap are the same data: linked
    by the plan's reuses (views, in-place, Concat slices)."""
    life = tensor_lifetimes(g)
    find = _connected(p)
    names = sorted(life)
    for i, s in enumerate(names):
        for t in names[i + 1:]:
            (f1, l1), (f2, l2) = life[s], life[t]
            if l1 < f2 or l2 < f1:
                continue
            o1, o2 = p.offsets[s], p.offsets[t]
            n1, n2 = g.tensors[s].nbytes, g.tensors[t].nbytes
            if n1 and n2 and o1 < o2 + n2 and o2 < o1 + n1:
                assert find(s) == find(t), (s, t)


def concat_graph(rnd):
    """A random graph rich in Concats: inputs that are graph inputs,
    outputs, constants, repeated, read again later; Concats of Concats;
    in-place ops after them; channel and (strided) spatial axes."""
    b = G(f"cats{rnd.randint(0, 10**6)}")
    avail = [b.t(rnd.choice([1, 2]), "input", "x")]
    for _ in range(rnd.randint(2, 12)):
        x = rnd.choice(avail)
        shape = b.g.tensors[x].shape
        c = shape[1]
        kind = rnd.choice(["conv", "relu", "cat", "cat", "cat", "add", "sig"])
        if kind == "conv":
            y = b.conv(x, rnd.choice([1, 2, 3]), role="output" if rnd.random() < 0.1
                       else "activation")
        elif kind in ("relu", "sig"):
            y = b.op("Relu" if kind == "relu" else "Sigmoid", [x], c, shape=shape)
        elif kind == "add":
            same = [t for t in avail if b.g.tensors[t].shape == shape]
            y = b.op("Add", [x, rnd.choice(same)], c, shape=shape)
        else:
            pool = avail + ([b.t(c, "constant", shape=shape)] if rnd.random() < 0.2 else [])
            axis = 1 if rnd.random() < 0.85 else 2
            ok = [t for t in pool if all(d == e for j, (d, e) in enumerate(
                zip(b.g.tensors[t].shape, b.g.tensors[x].shape)) if j != axis)]
            parts = [x] + [rnd.choice(ok) for _ in range(rnd.randint(0, 3))]
            y = b.cat(parts, axis=axis)
        avail.append(y)
        if rnd.random() < 0.1 and len(avail) > 2:
            avail.remove(rnd.choice(avail[:-1]))
    last = avail[-1]
    b.g.tensors[last].role = "output"
    return b.done()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([1, 8, 64]), st.booleans())
def test_random_concat_graphs(rnd, align, rich):
    g = concat_graph(rnd) if rich else random_graph(rnd)
    p = checked(plan(g, alignment=align, **FAST))
    off = checked(plan(g, alignment=align, inplace_concat=False, **FAST))
    assert p.arena_bytes <= off.arena_bytes
    _no_unrelated_overlap(p, g)
    same_outputs(p)
    for _, src, dst, mode in p.reuses:
        if mode == "concat":
            assert p.buffer_of[src] is p.buffer_of[dst]
            assert p.offsets[dst] <= p.offsets[src] and \
                p.offsets[src] + g.tensors[src].nbytes <= \
                p.offsets[dst] + g.tensors[dst].nbytes


@pytest.mark.parametrize("name", ["unet", "densenet121"])
def test_builtin_models_never_grow(name):
    from pyarena.runtime.models import MODELS
    g = MODELS[name](**({"resolution": 64} if name == "densenet121" else {}))
    p = checked(plan(g, **FAST))
    off = checked(plan(g, inplace_concat=False, **FAST))
    assert placed(p)
    assert p.arena_bytes <= off.arena_bytes
    if name == "unet":   # its peak is at the last Concat: the copy was the peak
        assert p.arena_bytes < off.arena_bytes


def _sharing_facts(result):
    buffers, reuses = result
    return [(b.name, b.size, b.first, b.last, list(b.tensors), dict(b.at))
            for b in buffers], list(reuses)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([1, 8, 64]), st.booleans(),
       st.booleans())
def test_the_concat_pass_replays_the_first_passs_decisions(rnd, align, rich, everything):
    """The pass with Concat in place takes the in-place decisions of the
    pass without (``replay``) up to its first move, and gives what a pass
    checking every decision again gives -- also when the placer takes every
    input the rules allow (more moves, earlier)."""
    from pyarena.planning.concat import ConcatPlacer
    from pyarena.planning.inplace import as_rule_table
    from pyarena.planning.sharing import share_buffers
    g = concat_graph(rnd) if rich else random_graph(rnd)
    life = tensor_lifetimes(g)
    nbytes = {n: g.tensors[n].nbytes for n in life}
    table = as_rule_table(None)
    joins = []
    base = share_buffers(g, life, nbytes, table, record=joins)
    assert _sharing_facts(base) == _sharing_facts(share_buffers(g, life, nbytes, table))
    assert len(joins) == len(g.ops)
    assert [j for j in joins if j is not None] == base[1]
    placer = ConcatPlacer(g, table, life, base[0], align)
    if everything:
        placer.picks = {name: {k for k, _, _ in s} for name, s in placer.slices.items()}
    checked_again = share_buffers(g, life, nbytes, table, placer)
    replayed = share_buffers(g, life, nbytes, table, placer, replay=joins)
    assert _sharing_facts(replayed) == _sharing_facts(checked_again)
