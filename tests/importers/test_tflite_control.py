"""TFLite IF and WHILE: models with subgraphs written in the test, run by
pyarena (the branches and bodies planned inside the op's scratch) and
compared with the TFLite interpreter."""
import numpy as np
import pytest

from helpers.tflite_util import TFLiteBuilder
from pyarena.importers import UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.runtime import Executor

_ADD = ("AddOptions", dict(FusedActivationFunction=0))
_MUL = ("MulOptions", dict(FusedActivationFunction=0))


def _while_model(path, limit=5, grow=False):
    """WHILE i < limit: i += 1, x = x * 1.5 + x, k passed through."""
    cond = TFLiteBuilder()
    ci, cx, ck = cond.tensor("i", (1,), np.int32), cond.tensor("x", (2, 3)), \
        cond.tensor("k", (2, 3))
    lim = cond.const("limit", np.array([limit], np.int32), np.int32)
    c = cond.tensor("go", (1,), np.bool_)
    cond.op("LESS", [ci, lim], [c])
    body = TFLiteBuilder()
    bi, bx, bk = body.tensor("i", (1,), np.int32), body.tensor("x", (2, 3)), \
        body.tensor("k", (2, 3))
    one = body.const("one", np.array([1], np.int32), np.int32)
    half = body.const("h", np.full((2, 3), 1.5, np.float32))
    ni, t, nx = body.tensor("i2", (1,), np.int32), body.tensor("t", (2, 3)), \
        body.tensor("x2", (2, 4) if grow else (2, 3))
    body.op("ADD", [bi, one], [ni], _ADD)
    body.op("MUL", [bx, half], [t], _MUL)
    body.op("ADD", [t, bk], [nx], _ADD)
    B = TFLiteBuilder()
    i, x, k = B.tensor("i", (1,), np.int32), B.tensor("x", (2, 3)), B.tensor("k", (2, 3))
    oi, ox, ok = B.tensor("i_out", (1,), np.int32), B.tensor("x_out", (2, 3)), \
        B.tensor("k_out", (2, 3))
    ic = B.subgraph(cond, [ci, cx, ck], [c])
    ib = B.subgraph(body, [bi, bx, bk], [ni, nx, bk])
    B.op("WHILE", [i, x, k], [oi, ox, ok], ("WhileOptions", dict(
        CondSubgraphIndex=ic, BodySubgraphIndex=ib)))
    return B.save(path, [i, x, k], [oi, ox, ok])


def _if_model(path, flag=None, mismatch=False):
    """IF flag: y = x + c else y = x * c (flag an input, or a constant)."""
    branches = []
    for code, opts in (("ADD", _ADD), ("MUL", _MUL)):
        s = TFLiteBuilder()
        sx = s.tensor("x", (2, 3))
        sc = s.const("c", np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
        sy = s.tensor("y", (2, 3))
        s.op(code, [sx, sc], [sy], opts)
        outs = [sy]
        if mismatch and code == "MUL":
            s.tensor("z", (3, 2))
            outs = [s.tensor("z2", (3, 3))]
            s.op("ADD", [sx, sc], outs, _ADD)
        branches.append((s, [sx], outs))
    B = TFLiteBuilder()
    f = B.tensor("flag", (1,), np.bool_) if flag is None else \
        B.const("flag", np.array([flag]), np.bool_)
    x, y = B.tensor("x", (2, 3)), B.tensor("y", (2, 3))
    it, ie = (B.subgraph(*b) for b in branches)
    B.op("IF", [f, x], [y], ("IfOptions", dict(ThenSubgraphIndex=it, ElseSubgraphIndex=ie)))
    return B.save(path, [f, x] if flag is None else [x], [y])


def _run_both(path, feeds):
    g = load_model(path)
    out = Executor(g, plan(g)).run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    assert set(ref) == set(out)
    for k in out:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-5, err_msg=k)
    return g, out


@pytest.mark.parametrize("start", [0, 3, 5, 9])
def test_while_counts_like_the_interpreter(tmp_path, start):
    r = np.random.default_rng(start)
    feeds = {"i": np.array([start], np.int32),
             "x": r.standard_normal((2, 3)).astype(np.float32),
             "k": r.standard_normal((2, 3)).astype(np.float32)}
    g, out = _run_both(_while_model(tmp_path / "w.tflite"), feeds)
    assert [op.op_type for op in g.ops] == ["While"]
    assert out["i_out"].tolist() == [max(start, 5)]
    np.testing.assert_array_equal(out["k_out"], feeds["k"])      # passed through
    if start >= 5:      # no iteration: the values come back as they went in
        np.testing.assert_array_equal(out["x_out"], feeds["x"])


def test_while_reruns_from_fresh_inputs(tmp_path):
    g = load_model(_while_model(tmp_path / "w.tflite"))
    ex = Executor(g, plan(g))
    x = np.ones((2, 3), np.float32)
    k = np.zeros((2, 3), np.float32)
    first = ex.run({"i": np.array([3], np.int32), "x": x, "k": k})["x_out"].copy()
    ex.run({"i": np.array([0], np.int32), "x": x, "k": k})
    again = ex.run({"i": np.array([3], np.int32), "x": x, "k": k})["x_out"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, np.full((2, 3), 1.5 ** 2, np.float32))


@pytest.mark.parametrize("flag", [True, False])
def test_if_on_an_input_flag(tmp_path, flag):
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    g, out = _run_both(_if_model(tmp_path / "if.tflite"),
                       {"flag": np.array([flag]), "x": x})
    assert [op.op_type for op in g.ops] == ["IfElse"]
    c = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    np.testing.assert_allclose(out["y"], x + c if flag else x * c, rtol=1e-6)


@pytest.mark.parametrize("flag", [True, False])
def test_if_on_a_constant_is_inlined(tmp_path, flag):
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    g, out = _run_both(_if_model(tmp_path / "ic.tflite", flag=flag), {"x": x})
    types = [op.op_type for op in g.ops]
    assert "IfElse" not in types and ("Add" if flag else "Mul") in types
    assert ("Mul" if flag else "Add") not in types


def test_while_with_a_growing_value_refused(tmp_path):
    with pytest.raises(UnsupportedOpError, match=r"WHILE.*shapes must be static"):
        load_model(_while_model(tmp_path / "g.tflite", grow=True))


def test_if_with_branches_of_other_shapes_refused(tmp_path):
    with pytest.raises(UnsupportedOpError, match=r"IF.*else subgraph.*shapes must be"):
        load_model(_if_model(tmp_path / "m.tflite", mismatch=True))


@pytest.mark.parametrize("index", [0, 1, 7])
def test_subgraph_index_out_of_range_or_recursive(tmp_path, index):
    """A WHILE whose body is the main graph, itself, or a missing subgraph."""
    from pyarena.importers import ModelImportError
    body = TFLiteBuilder()
    bx = body.tensor("x", (2,))
    by = body.tensor("y", (2,))
    body.op("WHILE", [bx], [by], ("WhileOptions", dict(CondSubgraphIndex=1,
                                                       BodySubgraphIndex=1)))
    B = TFLiteBuilder()
    x, y = B.tensor("x", (2,)), B.tensor("y", (2,))
    B.subgraph(body, [bx], [by])
    B.op("WHILE", [x], [y], ("WhileOptions", dict(CondSubgraphIndex=index,
                                                  BodySubgraphIndex=index)))
    path = B.save(tmp_path / "r.tflite", [x], [y])
    with pytest.raises(ModelImportError, match=f"subgraph index {index} "
                       f"is out of range or calls its own caller"):
        load_model(path)


def _nested_model(path):
    """IF flag: (the counting WHILE of _while_model) else: the values as
    they came (a branch whose outputs are its inputs)."""
    B = TFLiteBuilder()
    then = TFLiteBuilder()
    _while_spec(B, then)        # subgraphs 1, 2: the WHILE's cond and body
    other = TFLiteBuilder()
    oi, ox, ok = other.tensor("i", (1,), np.int32), other.tensor("x", (2, 3)), \
        other.tensor("k", (2, 3))
    f = B.tensor("flag", (1,), np.bool_)
    i, x, k = B.tensor("i", (1,), np.int32), B.tensor("x", (2, 3)), B.tensor("k", (2, 3))
    ri, rx, rk = B.tensor("i_out", (1,), np.int32), B.tensor("x_out", (2, 3)), \
        B.tensor("k_out", (2, 3))
    it = B.subgraph(then, then.io[0], then.io[1])
    ie = B.subgraph(other, [oi, ox, ok], [oi, ox, ok])
    B.op("IF", [f, i, x, k], [ri, rx, rk], ("IfOptions", dict(
        ThenSubgraphIndex=it, ElseSubgraphIndex=ie)))
    return B.save(path, [f, i, x, k], [ri, rx, rk])


def _while_spec(B, then):
    """The counting WHILE (limit 4) as ``then``'s op; its cond and body added
    to ``B`` as subgraphs."""
    cond = TFLiteBuilder()
    ci, cx, ck = cond.tensor("i", (1,), np.int32), cond.tensor("x", (2, 3)), \
        cond.tensor("k", (2, 3))
    lim = cond.const("limit", np.array([4], np.int32), np.int32)
    c = cond.tensor("go", (1,), np.bool_)
    cond.op("LESS", [ci, lim], [c])
    body = TFLiteBuilder()
    bi, bx, bk = body.tensor("i", (1,), np.int32), body.tensor("x", (2, 3)), \
        body.tensor("k", (2, 3))
    one = body.const("one", np.array([1], np.int32), np.int32)
    ni, nx = body.tensor("i2", (1,), np.int32), body.tensor("x2", (2, 3))
    body.op("ADD", [bi, one], [ni], _ADD)
    body.op("ADD", [bx, bk], [nx], _ADD)
    ic = B.subgraph(cond, [ci, cx, ck], [c])
    ib = B.subgraph(body, [bi, bx, bk], [ni, nx, bk])
    ti, tx, tk = then.tensor("i", (1,), np.int32), then.tensor("x", (2, 3)), \
        then.tensor("k", (2, 3))
    ui, ux, uk = then.tensor("i_out", (1,), np.int32), then.tensor("x_out", (2, 3)), \
        then.tensor("k_out", (2, 3))
    then.op("WHILE", [ti, tx, tk], [ui, ux, uk], ("WhileOptions", dict(
        CondSubgraphIndex=ic, BodySubgraphIndex=ib)))
    then.io = ([ti, tx, tk], [ui, ux, uk])


@pytest.mark.parametrize("flag", [True, False])
def test_while_inside_an_if_branch(tmp_path, flag):
    r = np.random.default_rng(5)
    feeds = {"flag": np.array([flag]), "i": np.array([1], np.int32),
             "x": r.standard_normal((2, 3)).astype(np.float32),
             "k": r.standard_normal((2, 3)).astype(np.float32)}
    g, out = _run_both(_nested_model(tmp_path / "n.tflite"), feeds)
    assert [op.op_type for op in g.ops] == ["IfElse"]
    want = feeds["x"] + 3 * feeds["k"] if flag else feeds["x"]
    np.testing.assert_allclose(out["x_out"], want, rtol=1e-5)
    assert out["i_out"].tolist() == [4 if flag else 1]


def test_if_and_while_without_a_plan_and_without_allocating(tmp_path):
    """Scratch allocated per run (numpy allocator) gives the planned run's
    results; the planned run allocates nothing (bodies bound once)."""
    from pyarena import Pool, numpy_allocator
    r = np.random.default_rng(7)
    feeds = {"flag": np.array([True]), "i": np.array([0], np.int32),
             "x": r.standard_normal((2, 3)).astype(np.float32),
             "k": r.standard_normal((2, 3)).astype(np.float32)}
    g = load_model(_nested_model(tmp_path / "n.tflite"))
    ex = Executor(g, plan(g))
    planned = {k: v.copy() for k, v in ex.run(feeds).items()}
    for flag in (False, True):
        fresh = Executor(g, allocator="numpy").run(dict(feeds, flag=np.array([flag])))
        if flag:
            for k in planned:
                np.testing.assert_array_equal(fresh[k], planned[k], err_msg=k)
        else:
            np.testing.assert_array_equal(fresh["x_out"], feeds["x"])
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
    assert counter.allocations == 0
