"""ONNX Loop and Scan: bodies imported as pyarena graphs, planned inside
the operator's scratch and run by pyarena's kernels; checked against
onnxruntime on models built here and against the ONNX authors' own cases."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from helpers.model_zoo import ort_run
from helpers.node_cases import case_dir, node_case_names, read_data
from helpers.onnx_util import make_model
from pyarena import Pool, numpy_allocator
from pyarena.importers import ModelImportError, UnsupportedOpError, load_model
from pyarena.planning import plan, validate
from pyarena.runtime import Executor

F32 = np.float32


def vi(name, et, shape=None):
    return h.make_tensor_value_info(name, et, shape)


def loop_model(path, trip=5, cond_body=None, scan=True, outer="x"):
    """acc' = acc + x * i (x read from the outer scope), scanned as it goes;
    ``cond_body``: nodes making ``c2`` (default: the condition passed on)."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Mul", [outer, "fi"], ["xi"]),
             h.make_node("Add", ["acc", "xi"], ["acc2"])]
    nodes += cond_body or [h.make_node("Identity", ["c"], ["c2"])]
    outs = [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT)] + ([vi("acc2", T.FLOAT)] if scan else [])
    body = h.make_graph(nodes, "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []),
                                        vi("acc", T.FLOAT)], outs)
    loop_outs = ["af", "sc"] if scan else ["af"]
    top = [h.make_node("Loop", ["M", "", "a0"], loop_outs, body=body)]
    if scan:
        top.append(h.make_node("Relu", ["sc"], ["y"]))
    return make_model(top, {"x": ([2, 3], F32), "a0": ([2, 3], F32)},
                      {"af": (None, F32), **({"y": (None, F32)} if scan else {})},
                      {"M": np.array(trip, np.int64)}, path=path)


def feeds(seed=0, **shapes):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(F32) for k, s in shapes.items()}


def run_and_compare(path, fx, atol=1e-5, skip=()):
    g = load_model(str(path))
    p = plan(g)
    ex = Executor(g, p)
    ours = {k: np.array(v) for k, v in ex.run(fx).items()}
    ref = ort_run(path, fx)
    for k, r in ref.items():
        if k in skip:
            continue
        assert ours[k].shape == r.shape, k
        np.testing.assert_allclose(ours[k], r, atol=atol, rtol=1e-5, err_msg=k)
    return g, ex, ours


def test_loop_sums_and_scans_like_onnxruntime(tmp_path):
    path = tmp_path / "loop.onnx"
    loop_model(path, trip=5)
    g, ex, ours = run_and_compare(path, feeds(x=(2, 3), a0=(2, 3)))
    assert g.tensors["sc"].shape == (5, 2, 3)        # the trip count fixed at import
    op = next(o for o in g.ops if o.op_type == "Loop")
    assert "x" in op.inputs                           # the outer-scope name read
    body_arena = plan(op.attrs["body"]).arena_bytes
    assert op.scratch_bytes >= body_arena > 0         # the body lives in the op's scratch
    assert validate(ex.plan, g) == []


def test_loop_runs_no_numpy_allocation_after_the_first_run(tmp_path):
    path = tmp_path / "loop.onnx"
    loop_model(path, trip=7)
    g = load_model(str(path))
    ex = Executor(g, plan(g))
    fx = feeds(x=(2, 3), a0=(2, 3))
    first = {k: np.array(v) for k, v in ex.run(fx).items()}
    with numpy_allocator(Pool()) as counter:
        again = ex.run(fx)
    assert counter.allocations == 0
    for k, v in first.items():
        np.testing.assert_array_equal(again[k], v)


def test_loop_with_zero_iterations_returns_the_initial_values(tmp_path):
    path = tmp_path / "loop0.onnx"
    loop_model(path, trip=0)
    fx = feeds(x=(2, 3), a0=(2, 3))
    # onnxruntime makes the empty scan output (0,): it has no iteration to
    # take the shape from; pyarena knows it from the body
    g, _, ours = run_and_compare(path, fx, skip={"y"})
    np.testing.assert_array_equal(ours["af"], fx["a0"])
    assert ours["y"].shape == (0, 2, 3)


def test_loop_stopping_on_data_carries_its_values(tmp_path):
    """cond = sum(acc) < 10: the count depends on the data; no scan output,
    so everything stays planned."""
    stop = [h.make_node("ReduceSum", ["acc2"], ["s"], keepdims=0),
            h.make_node("Constant", [], ["ten"], value=onnx.numpy_helper.from_array(
                np.array(10, F32))),
            h.make_node("Less", ["s", "ten"], ["c2"])]
    path = tmp_path / "loopc.onnx"
    loop_model(path, trip=1000, cond_body=stop, scan=False)
    fx = {"x": np.full((2, 3), 0.25, F32), "a0": np.zeros((2, 3), F32)}
    g, _, ours = run_and_compare(path, fx)
    assert g.ops[0].attrs["trip"] == -1       # not known at import
    assert 10 <= ours["af"].sum() < 20        # stopped on the data, far before 1000


def test_loop_carried_values_may_swap(tmp_path):
    """(a, b) -> (b + 1, a): outputs that alias the other input."""
    body = h.make_graph([h.make_node("Add", ["b", "one"], ["b1"]),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("a", T.FLOAT),
                         vi("b", T.FLOAT)],
                        [vi("c2", T.BOOL, []), vi("b1", T.FLOAT), vi("a", T.FLOAT)])
    path = tmp_path / "swap.onnx"
    make_model([h.make_node("Loop", ["M", "", "a0", "b0"], ["a", "b"], body=body)],
               {"a0": ([4], F32), "b0": ([4], F32)}, {"a": (None, F32), "b": (None, F32)},
               {"M": np.array(3, np.int64), "one": np.ones(4, F32)}, path=path)
    fx = feeds(a0=(4,), b0=(4,))
    _, _, ours = run_and_compare(path, fx)
    np.testing.assert_allclose(ours["a"], fx["b0"] + 2)     # b+1, a, b+1+1 ... after 3
    np.testing.assert_allclose(ours["b"], fx["a0"] + 1)


def scan_model(path, in_axis=0, in_dir=0, out_axis=0, out_dir=0):
    """Cumulative sum along the scanned axis: state s, scan output s."""
    body = h.make_graph([h.make_node("Add", ["s", "xt"], ["s2"]),
                         h.make_node("Mul", ["s2", "w"], ["o"])], "body",
                        [vi("s", T.FLOAT, [3]), vi("xt", T.FLOAT, [3])],
                        [vi("s2", T.FLOAT, [3]), vi("o", T.FLOAT, [3])])
    shape = [5, 3] if in_axis in (0, -2) else [3, 5]
    return make_model(
        [h.make_node("Scan", ["s0", "x"], ["sf", "y"], body=body, num_scan_inputs=1,
                     scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                     scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
        {"s0": ([3], F32), "x": (shape, F32), "w": ([3], F32)},
        {"sf": (None, F32), "y": (None, F32)}, path=path), shape


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir",
                         [(0, 0, 0, 0), (1, 1, 1, 0), (-1, 0, -1, 1), (0, 1, 1, 1)])
def test_scan_cumulative_sum_like_onnxruntime(tmp_path, in_axis, in_dir, out_axis, out_dir):
    path = tmp_path / "scan.onnx"
    _, shape = scan_model(path, in_axis, in_dir, out_axis, out_dir)
    fx = feeds(s0=(3,), x=tuple(shape), w=(3,))
    g, ex, ours = run_and_compare(path, fx)
    x = fx["x"] if in_axis in (0, -2) else fx["x"].T
    x = x[::-1] if in_dir else x
    run = (fx["s0"] + np.cumsum(x, axis=0)) * fx["w"]
    run = run[::-1] if out_dir else run
    np.testing.assert_allclose(ours["y"], run if out_axis == 0 else run.T, rtol=1e-5)


def test_a_loop_nested_in_a_scan_reads_the_outermost_scope(tmp_path):
    """Scan over rows of x; its body loops 3 times adding w (a name of the
    outermost graph) to the row."""
    inner = h.make_graph([h.make_node("Add", ["r", "w"], ["r2"]),
                          h.make_node("Identity", ["c"], ["c2"])], "inner",
                         [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("r", T.FLOAT, [4])],
                         [vi("c2", T.BOOL, []), vi("r2", T.FLOAT, [4])])
    body = h.make_graph([h.make_node("Loop", ["three", "", "xt"], ["o"], body=inner),
                         h.make_node("Add", ["s", "o"], ["s2"])], "body",
                        [vi("s", T.FLOAT, [4]), vi("xt", T.FLOAT, [4])],
                        [vi("s2", T.FLOAT, [4]), vi("o", T.FLOAT, [4])])
    path = tmp_path / "nested.onnx"
    make_model([h.make_node("Scan", ["s0", "x"], ["sf", "y"], body=body, num_scan_inputs=1)],
               {"s0": ([4], F32), "x": ([6, 4], F32), "w": ([4], F32)},
               {"sf": (None, F32), "y": (None, F32)}, {"three": np.array(3, np.int64)},
               path=path)
    fx = feeds(s0=(4,), x=(6, 4), w=(4,))
    g, _, ours = run_and_compare(path, fx)
    np.testing.assert_allclose(ours["y"], fx["x"] + 3 * fx["w"], rtol=1e-5)
    assert "w" in g.ops[0].inputs


def test_loop_in_the_unplanned_modes_agrees_with_the_plan(tmp_path):
    path = tmp_path / "loop.onnx"
    loop_model(path, trip=4)
    g = load_model(str(path))
    fx = feeds(x=(2, 3), a0=(2, 3))
    planned = {k: np.array(v) for k, v in Executor(g, plan(g)).run(fx).items()}
    pool = Pool()
    ex = Executor(g, allocator=(pool.empty, pool.free))
    for _ in range(2):          # the scratch moves between runs: the body is bound again
        out = ex.run(fx)
        for k, v in planned.items():
            np.testing.assert_array_equal(out[k], v)


def test_a_body_whose_shapes_change_is_refused_by_name(tmp_path):
    body = h.make_graph([h.make_node("Concat", ["acc", "acc"], ["acc2"], axis=0),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("acc", T.FLOAT)],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT)])
    path = tmp_path / "grow.onnx"
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af"], body=body)],
               {"a0": ([2], F32)}, {"af": (None, F32)}, {"M": np.array(3, np.int64)},
               path=path)
    with pytest.raises(UnsupportedOpError, match="'acc2' changes shape from"):
        load_model(str(path))


NODE_PATTERN = re.compile(r"test_(loop11|scan\w*|range\w*)")
NODE_MODULES = ["loop", "scan", "rangeop"]
# refused, by name, with this reason
NODE_REFUSED = {
}


def test_onnx_node_cases_of_loop_scan_and_range(tmp_path):
    """Scalar inputs (trip counts, Range's start / limit / delta) are given
    as values, so a Loop's trip count is fixed at import."""
    names = node_case_names(NODE_PATTERN, NODE_MODULES)
    ran = []
    for name in names:
        d = case_dir(name, tmp_path, NODE_PATTERN, NODE_MODULES)
        ins, outs = read_data(d)
        values = {k: v for k, v in ins.items() if v.ndim == 0}
        if name in NODE_REFUSED:
            with pytest.raises((ModelImportError, UnsupportedOpError),
                               match=NODE_REFUSED[name]):
                load_model(str(d / "model.onnx"), values=values)
            continue
        if not name.endswith("expanded") and name.startswith("test_range"):
            continue    # folds whole: Range's kernel is tested in test_more_ops
        g = load_model(str(d / "model.onnx"), values=values)
        res = Executor(g, plan(g)).run({k: v for k, v in ins.items() if k not in values})
        for (oname, ref), gname in zip(outs, g.outputs):
            np.testing.assert_allclose(res[gname], ref, rtol=1e-6, err_msg=name)
        ran.append(name)
    assert {"test_scan9_sum", "test_scan9_scalar", "test_scan9_multi_state", "test_scan_sum",
            "test_range_float_type_positive_delta_expanded",
            "test_range_int32_type_negative_delta_expanded"} <= set(ran)


@pytest.mark.parametrize("name", ["test_loop13_seq", "test_loop16_seq_none"])
def test_loops_over_sequences_run_their_body_as_a_model(tmp_path, name):
    """A Loop carrying a sequence (or an optional one) runs its body as a
    model of its own, once per iteration (importers/onnx_held_bodies.py)."""
    from helpers.node_cases import generated_cases
    from helpers.node_session import check_case
    case = generated_cases(re.compile(name), ["loop"])[name]
    check_case(case, tmp_path)


POOL_PATTERN = re.compile(r"test_(nonzero\w*|range\w*|cumsum\w*|top_k\w*|scan9\w*)")
POOL_MODULES = ["nonzero", "rangeop", "cumsum", "topk", "scan"]


@pytest.mark.parametrize("declared", [True, False])
def test_onnx_node_cases_with_run_time_sizes(tmp_path, declared):
    """Every input fed at run time (a K, an axis, Range's bounds, a Loop's
    trip count computed from them); ``declared`` False also clears the
    outputs' declared shapes, so NonZero, TopK, Range and the Loop of
    Range's expanded form make pool tensors."""
    names = node_case_names(POOL_PATTERN, POOL_MODULES)
    pooled = []
    for name in names:
        d = case_dir(name, tmp_path, POOL_PATTERN, POOL_MODULES)
        ins, outs = read_data(d)
        m = onnx.load(str(d / "model.onnx"))
        if not declared:
            for o in m.graph.output:
                o.type.tensor_type.ClearField("shape")
        path = tmp_path / f"{name}-{declared}.onnx"
        onnx.save(m, str(path))
        g = load_model(str(path))
        ex = Executor(g, plan(g))
        res = ex.run(ins)
        for (_, ref), gname in zip(outs, g.outputs):
            assert res[gname].shape == ref.shape, name
            np.testing.assert_allclose(res[gname], ref, rtol=1e-6, err_msg=name)
        if ex.memory_info()["pool_bytes"]:
            pooled.append(name)
    assert len(names) >= 28
    if declared:        # sized by the model: only the Loops' scans go to the pool
        assert all("expanded" in n for n in pooled)
    else:
        assert {"test_nonzero_example", "test_top_k", "test_range_float_type_positive_delta",
                "test_range_int32_type_negative_delta_expanded"} <= set(pooled)


def test_a_loop_graph_saves_as_json_that_plans_the_same(tmp_path):
    """The JSON form keeps the ops, sizes and scratch (for planning); the
    body graph itself is not written."""
    from pyarena.graph import Graph
    path = tmp_path / "loop.onnx"
    loop_model(path, trip=3)
    g = load_model(str(path))
    g.save(str(tmp_path / "loop.json"))
    j = Graph.load(str(tmp_path / "loop.json"))
    assert "body" not in j.ops[0].attrs
    assert plan(j).arena_bytes == plan(g).arena_bytes


def test_an_outer_value_outlives_its_last_reader_in_the_body(tmp_path):
    """x (outer scope) is copied into the body once per Loop run and read
    only by the body's first op; the body's later tensors of x's size must
    not take its bytes, or the next iteration reads them."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Mul", ["x", "fi"], ["xi"]),
             h.make_node("Add", ["acc", "xi"], ["a1"]),
             h.make_node("Sigmoid", ["a1"], ["a2"]),
             h.make_node("Mul", ["a2", "a1"], ["a3"]),
             h.make_node("Sin", ["a3"], ["a4"]),
             h.make_node("Add", ["a4", "a2"], ["acc2"]),
             h.make_node("Identity", ["c"], ["c2"])]
    body = h.make_graph(nodes, "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []),
                                        vi("acc", T.FLOAT)],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT)])
    path = tmp_path / "held.onnx"
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af"], body=body)],
               {"x": ([2, 3], F32), "a0": ([2, 3], F32)}, {"af": (None, F32)},
               {"M": np.array(4, np.int64)}, path=path)
    g = load_model(str(path))
    bg = g.ops[0].attrs["body"]
    assert bg.held_inputs == {"x"}
    bp = plan(bg)
    assert validate(bp) == []
    (xb,) = [b for b in bp.buffers if "x" in b.tensors]
    assert xb.last == len(bg.ops) - 1
    fx = feeds(x=(2, 3), a0=(2, 3))
    run_and_compare(path, fx)


# -- the iteration cap -------------------------------------------------------------
def test_an_absurd_trip_count_is_refused_before_it_runs(tmp_path, monkeypatch):
    """M = 2**62 (a 4-byte edit away from a real model) would hang the
    caller: refused at once, naming the op and Loop.max_iterations; a trip
    count at the cap still runs (onnxruntime's result)."""
    from pyarena import InferenceSession
    from pyarena.errors import InvalidArgumentError
    from pyarena.runtime.kernels.control import Loop
    path = tmp_path / "huge.onnx"
    loop_model(path, trip=2 ** 62, scan=False)
    fx = feeds(x=(2, 3), a0=(2, 3))
    with pytest.raises(InvalidArgumentError, match=r"trip count 4,611,686,018,427,387,904 "
                                                   r"is over Loop.max_iterations"):
        InferenceSession(path).run(None, fx)
    monkeypatch.setattr(Loop, "max_iterations", 7)
    ok = tmp_path / "seven.onnx"
    loop_model(ok, trip=7, scan=False)
    np.testing.assert_allclose(InferenceSession(ok).run(None, fx)[0], ort_run(ok, fx)["af"],
                               rtol=1e-5, atol=1e-5)
    over = tmp_path / "eight.onnx"
    loop_model(over, trip=8, scan=False)
    with pytest.raises(InvalidArgumentError, match="max_iterations"):
        InferenceSession(over).run(None, fx)


def test_a_condition_that_never_turns_false_stops_at_the_cap(tmp_path, monkeypatch):
    from pyarena import InferenceSession
    from pyarena.errors import InvalidArgumentError
    from pyarena.runtime.kernels.control import Loop
    body = h.make_graph([h.make_node("Identity", ["c"], ["c2"]),
                         h.make_node("Add", ["acc", "x"], ["acc2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("acc", T.FLOAT)],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT)])
    path = tmp_path / "forever.onnx"
    make_model([h.make_node("Loop", ["", "go", "a0"], ["af"], body=body)],
               {"x": ([2, 3], F32), "a0": ([2, 3], F32), "go": ([], np.bool_)},
               {"af": (None, F32)}, path=path)
    monkeypatch.setattr(Loop, "max_iterations", 50)
    fx = feeds(x=(2, 3), a0=(2, 3))
    s = InferenceSession(path)
    with pytest.raises(InvalidArgumentError, match="50 iterations run and its condition is "
                                                   "still true"):
        s.run(None, {**fx, "go": np.array(True)})
    np.testing.assert_array_equal(s.run(None, {**fx, "go": np.array(False)})[0], fx["a0"])


def _scan8(path, directions=None, seq_lens=False):
    """Opset-8 Scan, batch 3, sequence 4: a running sum (state) and its
    doubled value per step (scan output), reading an outer scale."""
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]),
                         h.make_node("Mul", ["s2", "k"], ["o"])], "body",
                        [vi("s", T.FLOAT, [2]), vi("x", T.FLOAT, [2])],
                        [vi("s2", T.FLOAT, [2]), vi("o", T.FLOAT, [2])])
    attrs = dict(num_scan_inputs=1, body=body)
    if directions is not None:
        attrs["directions"] = directions
    node = h.make_node("Scan", ["L" if seq_lens else "", "s0", "xs"], ["sf", "os"], **attrs)
    g = h.make_graph([node], "m", [vi("s0", T.FLOAT, [3, 2]), vi("xs", T.FLOAT, [3, 4, 2])]
                     + ([vi("L", T.INT32, [3])] if seq_lens else []),
                     [vi("sf", T.FLOAT, [3, 2]), vi("os", T.FLOAT, [3, 4, 2])],
                     [h.make_tensor("k", T.FLOAT, [], [2.0])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 8)], ir_version=8), str(path))


@pytest.mark.parametrize("directions", [None, [1]])
def test_opset8_scan_runs_each_batch_entry_like_onnxruntime(tmp_path, directions):
    import pyarena
    path = tmp_path / "scan8.onnx"
    _scan8(path, directions)
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((3, 2)).astype(F32),
             "xs": rng.standard_normal((3, 4, 2)).astype(F32)}
    got = pyarena.InferenceSession(str(path)).run(None, feeds)
    want = list(ort_run(path, feeds).values())
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-6)


def test_opset8_scan_with_sequence_lens_is_refused(tmp_path):
    path = tmp_path / "scan8.onnx"
    _scan8(path, seq_lens=True)
    with pytest.raises(UnsupportedOpError, match="sequence_lens"):
        load_model(str(path))


@pytest.mark.parametrize("xs_shape", [[3], []])
def test_opset8_scan_input_without_a_sequence_axis_is_a_model_error(tmp_path, xs_shape):
    # the opset-8 Scan's scan inputs are [batch, sequence, ...] (ONNX spec):
    # one of rank 1 or 0 has no sequence axis
    path = tmp_path / "scan8.onnx"
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s2"]),
                         h.make_node("Identity", ["s2"], ["o"])], "body",
                        [vi("s", T.FLOAT, []), vi("x", T.FLOAT, [])],
                        [vi("s2", T.FLOAT, []), vi("o", T.FLOAT, [])])
    node = h.make_node("Scan", ["", "s0", "xs"], ["sf", "os"], num_scan_inputs=1, body=body)
    g = h.make_graph([node], "m", [vi("s0", T.FLOAT, [3]), vi("xs", T.FLOAT, xs_shape)],
                     [vi("sf", T.FLOAT, [3]), vi("os", T.FLOAT, None)])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 8)], ir_version=8), str(path))
    with pytest.raises(ModelImportError, match="do not share a batch axis"):
        load_model(str(path))
