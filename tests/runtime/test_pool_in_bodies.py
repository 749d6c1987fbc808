"""Pool tensors inside Loop, Scan and If bodies: a NonZero (or anything
whose size follows the data) in a body runs from the executor's pool, is
freed after its last reader in each iteration, and the rest of the body
and of the graph stays planned.  Checked against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import UnsupportedOpError, load_model
from pyarena.planning import plan, validate
from pyarena.runtime import Executor

F32 = np.float32


def vi(name, et, shape=None):
    return h.make_tensor_value_info(name, et, shape)


def count_positive(x, out):
    """Nodes: ``out`` = number of positive elements of ``x`` (float, a
    scalar), through NonZero (a pool tensor of shape (rank, count))."""
    return [h.make_node("Greater", [x, "zero"], [x + "_m"]),
            h.make_node("NonZero", [x + "_m"], [x + "_nz"]),
            h.make_node("Shape", [x + "_nz"], [x + "_s"], start=1),
            h.make_node("Cast", [x + "_s"], [x + "_f"], to=T.FLOAT),
            h.make_node("ReduceSum", [x + "_f"], [out], keepdims=0)]


def loop_model(path):
    """acc' = acc + count(x - i) per iteration, M iterations; scanned too."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Sub", ["x", "fi"], ["xs"])] + count_positive("xs", "n") + \
        [h.make_node("Add", ["acc", "n"], ["acc2"]),
         h.make_node("Identity", ["c"], ["c2"])]
    body = h.make_graph(nodes, "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []),
                                        vi("acc", T.FLOAT, [])],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT, []), vi("n", T.FLOAT, [])])
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af", "ns"], body=body, name="loop")],
               {"x": ([4, 5], F32), "a0": ([], F32)}, {"af": (None, F32), "ns": (None, F32)},
               {"M": np.array(3, np.int64), "zero": np.array(0, F32)}, path=path)
    return str(path)


def scan_model(path):
    """Per row of x: the count of its positive elements plus the state."""
    nodes = count_positive("xt", "n") + [h.make_node("Add", ["s", "n"], ["s2"])]
    body = h.make_graph(nodes, "body", [vi("s", T.FLOAT, []), vi("xt", T.FLOAT, [5])],
                        [vi("s2", T.FLOAT, []), vi("n", T.FLOAT, [])])
    make_model([h.make_node("Scan", ["s0", "x"], ["sf", "ns"], body=body, num_scan_inputs=1,
                            name="scan")],
               {"s0": ([], F32), "x": ([4, 5], F32)}, {"sf": (None, F32), "ns": (None, F32)},
               {"zero": np.array(0, F32)}, path=path)
    return str(path)


def if_model(path):
    """sum(x) > 0 ? count(x) : -count(-x)."""
    then = h.make_graph(count_positive("x", "t"), "then", [], [vi("t", T.FLOAT)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["nx"])] + count_positive("nx", "e0") +
                         [h.make_node("Neg", ["e0"], ["e"])], "else", [], [vi("e", T.FLOAT)])
    make_model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                h.make_node("Greater", ["s", "zero"], ["c"]),
                h.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other,
                            name="iff"),
                h.make_node("Add", ["r", "x"], ["out"])],
               {"x": ([4, 5], F32)}, {"out": (None, F32)}, {"zero": np.array(0, F32)},
               path=path)
    return str(path)


def inputs(name, rng, frac):
    x = rng.standard_normal((4, 5)).astype(F32) + 1
    x[rng.random((4, 5)) > frac] = -2
    if name == "loop":
        return {"x": x, "a0": np.array(0.5, F32)}
    if name == "scan":
        return {"x": x, "s0": np.array(1.5, F32)}
    return {"x": x}


@pytest.mark.parametrize("name,make", [("loop", loop_model), ("scan", scan_model),
                                       ("if", if_model)])
def test_a_body_with_a_pool_tensor_runs_like_onnxruntime(tmp_path, name, make):
    path = make(tmp_path / f"{name}.onnx")
    g = load_model(path)
    (op,) = [o for o in g.ops if o.op_type in ("Loop", "Scan", "If")]
    assert op.name in g.pool_ops()       # run with the executor's pool
    assert not any(t.dynamic for t in g.tensors.values())   # the outer graph is planned
    p = plan(g)
    assert validate(p) == []
    ex = Executor(g, p)
    rng = np.random.default_rng(3)
    for frac in (0.1, 0.9, 0.0, 1.0, 0.5, 0.1):
        fx = inputs(name, rng, frac)
        if name == "if" and frac == 0.0:
            fx["x"] = -np.abs(fx["x"])          # the else branch
        ours, ref = ex.run(fx), ort_run(path, fx)
        for k, r in ref.items():
            assert ours[k].shape == r.shape, k
            np.testing.assert_allclose(ours[k], r, rtol=1e-6, err_msg=f"{k} at {frac}")
        info = ex.memory_info()
        assert info["arena_bytes"] == p.arena_bytes
        # a NonZero per body run (3 iterations, 4 rows, 1 branch) and the
        # outer op's scratch came from the pool ...
        assert info["pool_allocations"] >= {"loop": 3, "scan": 4, "if": 1}[name] + 1
        # ... and every one of them went back to it
        assert ex.pool_stats.bytes == 0


def test_a_body_output_whose_size_follows_the_data_is_refused_by_name(tmp_path):
    then = h.make_graph([h.make_node("Greater", ["x", "zero"], ["m"]),
                         h.make_node("NonZero", ["m"], ["nz"]),
                         h.make_node("Cast", ["nz"], ["t"], to=T.FLOAT)], "then", [],
                        [vi("t", T.FLOAT)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", T.FLOAT)])
    path = tmp_path / "out.onnx"
    make_model([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                h.make_node("Greater", ["s", "zero"], ["c"]),
                h.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other,
                            name="iff")],
               {"x": ([4, 5], F32)}, {"r": (None, F32)}, {"zero": np.array(0, F32)},
               path=path)
    with pytest.raises(UnsupportedOpError, match=r"'iff'.*\['t'\].*then_branch.*depend on "
                                                 r"the data"):
        load_model(str(path))


def test_a_unique_in_a_loop_body_gives_its_values_back_every_iteration(tmp_path):
    """Unique in a Loop body, only the count of its values read (its
    other outputs are dropped at import): the values, a pool tensor of
    another size each iteration, are freed after their last reader."""
    nodes = [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
             h.make_node("Mul", ["x", "fi"], ["xs"]),
             h.make_node("Floor", ["xs"], ["xf"]),
             h.make_node("Unique", ["xf"], ["u", "ui", "", "uc"]),
             h.make_node("Shape", ["u"], ["us"]),
             h.make_node("Cast", ["us"], ["uf"], to=T.FLOAT),
             h.make_node("ReduceSum", ["uf"], ["n"], keepdims=0),
             h.make_node("Add", ["acc", "n"], ["acc2"]),
             h.make_node("Identity", ["c"], ["c2"])]
    body = h.make_graph(nodes, "body", [vi("i", T.INT64, []), vi("c", T.BOOL, []),
                                        vi("acc", T.FLOAT, [])],
                        [vi("c2", T.BOOL, []), vi("acc2", T.FLOAT, []), vi("n", T.FLOAT, [])])
    path = str(tmp_path / "unique.onnx")
    make_model([h.make_node("Loop", ["M", "", "a0"], ["af", "ns"], body=body, name="loop")],
               {"x": ([4, 5], F32), "a0": ([], F32)}, {"af": (None, F32), "ns": (None, F32)},
               {"M": np.array(4, np.int64)}, path=path)
    g = load_model(path)
    ex = Executor(g, plan(g))
    rng = np.random.default_rng(5)
    for scale in (1.0, 3.0, 0.5):
        fx = {"x": (scale * rng.standard_normal((4, 5))).astype(F32),
              "a0": np.array(0.0, F32)}
        ours, ref = ex.run(fx), ort_run(path, fx)
        for k, r in ref.items():
            np.testing.assert_allclose(ours[k], r, rtol=1e-6, err_msg=k)
        assert ex.pool_stats.bytes == 0
