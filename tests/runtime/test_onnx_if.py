"""ONNX If on a condition known only at run time: both branches imported
as bodies and planned in one region of the op's scratch; outputs of the
same shape in both branches planned, others pool tensors.  Checked against
onnxruntime on models built here and the ONNX authors' own If cases."""
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
from pyarena.errors import GraphError
from pyarena.importers import ModelImportError, UnsupportedOpError, load_model
from pyarena.planning import plan, validate
from pyarena.runtime import Executor

F32 = np.float32


def vi(name, et, shape=None):
    return h.make_tensor_value_info(name, et, shape)


def if_model(path, then_nodes, then_out, else_nodes, else_out, inputs, inits=None):
    """out = Relu(If(sum(x) > 0) then ... else ...)."""
    then = h.make_graph(then_nodes, "then", [], [vi(then_out, T.FLOAT)])
    other = h.make_graph(else_nodes, "else", [], [vi(else_out, T.FLOAT)])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other, name="iff"),
             h.make_node("Relu", ["r"], ["out"])]
    make_model(nodes, inputs, {"out": (None, F32)},
               {"zero": np.array(0, F32), **(inits or {})}, path=path)
    return str(path)


def same_shapes(path):
    """then: x * w (w a constant); else: y0 - x (y0 read by else only)."""
    return if_model(path, [h.make_node("Mul", ["x", "w"], ["t"])], "t",
                    [h.make_node("Sub", ["y0", "x"], ["e"])], "e",
                    {"x": ([2, 3], F32), "y0": ([2, 3], F32)},
                    {"w": np.arange(6, dtype=F32).reshape(2, 3)})


def other_shapes(path):
    """then: Concat(x, x) (4, 3); else: -x (2, 3)."""
    return if_model(path, [h.make_node("Concat", ["x", "x"], ["t"], axis=0)], "t",
                    [h.make_node("Neg", ["x"], ["e"])], "e", {"x": ([2, 3], F32)})


def feeds(sign, seed=0, y0=True):
    rng = np.random.default_rng(seed)
    fx = {"x": sign * np.abs(rng.standard_normal((2, 3))).astype(F32)}
    if y0:
        fx["y0"] = rng.standard_normal((2, 3)).astype(F32)
    return fx


def test_branches_of_the_same_shapes_are_planned(tmp_path):
    path = same_shapes(tmp_path / "same.onnx")
    g = load_model(path)
    op = next(o for o in g.ops if o.op_type == "If")
    assert op.inputs == ["c", "x", "y0"]          # the outer names either branch reads
    assert not any(t.dynamic for t in g.tensors.values())
    regions = [plan(op.attrs[b]).arena_bytes for b in ("then", "else")]
    assert max(regions) <= op.scratch_bytes < sum(regions) + 128     # one region, shared
    p = plan(g)
    assert validate(p, g) == []
    ex = Executor(g, p)
    for sign in (1, -1, 1, -1):
        fx = feeds(sign, seed=sign + 5)
        out = ex.run(fx)["out"]
        np.testing.assert_allclose(out, ort_run(path, fx)["out"], rtol=1e-6)
        assert out.shape == (2, 3)
    assert ex.memory_info()["pool_bytes"] == 0
    neg, pos = feeds(-1), feeds(1)
    with numpy_allocator(Pool()) as counter:
        ex.run(neg)
        ex.run(pos)
    assert counter.allocations == 0


def test_branches_of_other_shapes_make_a_pool_tensor(tmp_path):
    path = other_shapes(tmp_path / "other.onnx")
    g = load_model(path)
    assert g.tensors["r"].dynamic and g.tensors["out"].dynamic
    assert g.tensors["s"].nbytes > 0 and g.tensors["r"].nbytes == 0   # the rest planned
    ex = Executor(g, plan(g))
    for sign, rows in ((1, 4), (-1, 2), (1, 4)):
        fx = feeds(sign, y0=False)
        out = ex.run(fx)["out"]
        assert out.shape == (rows, 3)
        np.testing.assert_allclose(out, ort_run(path, fx)["out"], rtol=1e-6)
        # r and out (and the branch's region) come from the pool
        assert ex.memory_info()["pool_bytes"] >= 2 * rows * 3 * 4


def test_if_in_the_unplanned_modes_agrees_with_the_plan(tmp_path):
    path = same_shapes(tmp_path / "same.onnx")
    g = load_model(path)
    pool = Pool()
    planned = Executor(g, plan(g))
    moving = Executor(g, allocator=(pool.empty, pool.free))    # the region moves per run
    for sign in (1, -1, -1, 1):
        fx = feeds(sign, seed=3)
        np.testing.assert_array_equal(moving.run(fx)["out"], planned.run(fx)["out"])


def test_an_if_nested_in_a_loop_body(tmp_path):
    """acc' = If(i even) acc + x else acc * 0.5, M fed at run time: the
    scan output is a pool tensor, the If inside the body is planned."""
    then = h.make_graph([h.make_node("Add", ["acc", "x"], ["t"])], "then", [],
                        [vi("t", T.FLOAT)])
    other = h.make_graph([h.make_node("Mul", ["acc", "half"], ["e"])], "else", [],
                         [vi("e", T.FLOAT)])
    body = h.make_graph([h.make_node("Mod", ["i", "two"], ["m"]),
                         h.make_node("Equal", ["m", "zero"], ["ev"]),
                         h.make_node("If", ["ev"], ["acc2"], then_branch=then,
                                     else_branch=other),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("acc", T.FLOAT)],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT), vi("acc2", T.FLOAT)])
    path = str(tmp_path / "loopif.onnx")
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af", "sc"], body=body)],
               {"x": ([2, 3], F32), "a0": ([2, 3], F32), "M": ([], np.int64)},
               {"af": (None, F32), "sc": (None, F32)},
               {"two": np.array(2, np.int64), "zero": np.array(0, np.int64),
                "half": np.array(0.5, F32)}, path=path)
    g = load_model(path)
    (loop,) = g.ops
    assert "If" in {o.op_type for o in loop.attrs["body"].ops}
    ex = Executor(g, plan(g))
    rng = np.random.default_rng(1)
    for m in (5, 2):
        fx = {"x": rng.standard_normal((2, 3)).astype(F32),
              "a0": rng.standard_normal((2, 3)).astype(F32), "M": np.array(m)}
        ours, ref = ex.run(fx), ort_run(path, fx)
        assert ours["sc"].shape == (m, 2, 3)
        for k in ("af", "sc"):
            np.testing.assert_allclose(ours[k], ref[k], rtol=1e-6)


def test_branches_of_other_dtypes_are_refused(tmp_path):
    path = if_model(tmp_path / "dt.onnx", [h.make_node("Neg", ["x"], ["t"])], "t",
                    [h.make_node("Cast", ["x"], ["e"], to=T.INT32)], "e",
                    {"x": ([2, 3], F32)})
    with pytest.raises(ModelImportError, match="'iff'.*float32 in the then_branch, int32"):
        load_model(path)


IF_CASES = re.compile(r"test_if\w*")
#: refused, by name, with this reason
IF_REFUSED = {}
#: branches making a sequence or an optional: run as models of their own
#: (importers/onnx_held_bodies.py), both ways, against onnxruntime
IF_HELD = ("test_if_seq", "test_if_opt")


def test_onnx_node_cases_of_if(tmp_path):
    """The cases' condition is an input: both values are run against
    onnxruntime (the data set has one)."""
    names = node_case_names(IF_CASES, ["if_"])
    assert set(IF_REFUSED) < set(names)
    ran = []
    for name in names:
        d = case_dir(name, tmp_path, IF_CASES, ["if_"])
        path = str(d / "model.onnx")
        if name in IF_REFUSED:
            with pytest.raises(UnsupportedOpError, match=IF_REFUSED[name]):
                load_model(path)
            continue
        if name in IF_HELD:
            _held_if_both_ways(path)
            continue
        ins, outs = read_data(d)
        g = load_model(path)
        assert [op.op_type for op in g.ops] == ["If"]
        ex = Executor(g, plan(g))
        res = ex.run(ins)
        for (_, ref), gname in zip(outs, g.outputs):
            np.testing.assert_array_equal(res[gname], ref, err_msg=name)
        flipped = {k: np.asarray(~v if v.dtype == np.bool_ else v) for k, v in ins.items()}
        res, ref = ex.run(flipped), ort_run(path, flipped)
        for k, v in ref.items():
            np.testing.assert_array_equal(res[k], v, err_msg=name)
        ran.append(name)
    assert ran == ["test_if"]


def _held_if_both_ways(path):
    import pyarena
    from helpers.node_session import _close
    g = load_model(path)
    (op,) = g.ops
    assert op.op_type == "If" and "then_run" in op.attrs
    ex = Executor(g, plan(g))
    for c in (True, False):
        feeds = {"cond": np.array(c)}
        got, ref = ex.run(feeds), ort_run(path, feeds)
        for k, v in ref.items():
            _close(got[k], v, f"{path}: cond {c}")
        (s,) = pyarena.InferenceSession(path).run(None, feeds)
        _close(s, list(ref.values())[0], f"{path}: session, cond {c}")


def test_a_branch_that_cannot_run_with_these_shapes_fails_only_when_taken(tmp_path):
    """Silero VAD's other sample rate: the then branch reshapes x to a size
    it does not have.  The else branch runs; the then branch is an error
    naming it when the condition picks it, as onnxruntime's is."""
    path = if_model(tmp_path / "bad.onnx", [h.make_node("Reshape", ["x", "five"], ["t"])], "t",
                    [h.make_node("Neg", ["x"], ["e"])], "e", {"x": ([2, 3], F32)},
                    {"five": np.array([5], np.int64)})
    g = load_model(path)
    (op,) = [o for o in g.ops if o.op_type == "If"]
    assert op.attrs["then"] is None and "then_branch" in op.attrs["then_error"]
    assert g.tensors["r"].shape == (2, 3) and not g.tensors["r"].dynamic
    ex = Executor(g, plan(g))
    fx = feeds(-1, y0=False)
    np.testing.assert_array_equal(ex.run(fx)["out"], ort_run(path, fx)["out"])
    with pytest.raises(GraphError, match="'iff'.*picks the then_branch, which cannot run"):
        ex.run(feeds(1, y0=False))
    with pytest.raises(Exception):
        ort_run(path, feeds(1, y0=False))
    both = if_model(tmp_path / "both.onnx", [h.make_node("Reshape", ["x", "five"], ["t"])],
                    "t", [h.make_node("Reshape", ["x", "five"], ["e"])], "e",
                    {"x": ([2, 3], F32)}, {"five": np.array([5], np.int64)})
    with pytest.raises(ModelImportError, match="'iff'.*then_branch"):
        load_model(both)


def test_an_if_without_a_condition_is_refused(tmp_path):
    then = h.make_graph([h.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", T.FLOAT)])
    other = h.make_graph([h.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT)])
    path = tmp_path / "nocond.onnx"
    make_model([h.make_node("If", [], ["out"], then_branch=then, else_branch=other,
                            name="iff")], {"x": ([2], F32)}, {"out": (None, F32)}, path=path)
    with pytest.raises(ModelImportError, match="'iff' .If.: no condition input"):
        load_model(str(path))
