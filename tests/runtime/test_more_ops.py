"""The logic, indexing and normalisation kernels added for transformer-style
models (LayerNormalization, Where, the comparisons, GatherND, TopK, ...):
every ONNX backend node case of those ops, then models built here mixing
them against onnxruntime, then the allocation check and the errors."""
import re

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from helpers.model_zoo import ort_run
from helpers.node_cases import case_dir, node_case_names, read_data
from helpers.onnx_util import make_model
from pyarena import Pool, numpy_allocator
from pyarena.errors import GraphError, UnsupportedOpError
from pyarena.importers import load_model
from pyarena.importers.onnx import load_onnx
from pyarena.planning import plan
from pyarena.runtime import Executor
from pyarena.runtime.kernels import set_scratch

# -- the ONNX backend node cases ------------------------------------------------
OPS = ("layer_normalization|group_normalization|where|equal|less|greater|not|and|or|xor"
       "|isnan|isinf|sign|round|mod|range|cumsum|top_k|argmax|argmin|gathernd"
       "|gather_elements|scatternd|scatter_elements|einsum|tril|triu|onehot|reduce_l1"
       "|reduce_l2|reduce_log_sum|reduce_sum_square|hardmax|spacetodepth|shape|size"
       "|compress|unique")
# the "_expanded" cases run the op's function body (other ops), not the op
NODE_CASE = re.compile(rf"test_({OPS})(?!\w*_expanded)\w*")
MODULES = ("layernormalization", "groupnormalization", "where", "equal", "less",
           "less_or_equal", "greater", "greater_or_equal", "not_", "and_", "or_", "xor",
           "isnan", "isinf", "sign", "round", "mod", "rangeop", "cumsum", "topk", "argmax",
           "argmin", "gathernd", "gatherelements", "scatternd", "scatterelements", "einsum",
           "trilu", "onehot", "reducel1", "reducel2", "reduce_log_sum", "reduce_log_sum_exp",
           "reducesumsquare", "hardmax", "spacetodepth", "shape", "size", "compress", "unique")
NODE_CASES = node_case_names(NODE_CASE, MODULES)

#: inputs that must be constants for pyarena (made initializers, same values)
CONSTANT = {"TopK": (1,), "OneHot": (1, 2), "CumSum": (1,), "Trilu": (1,),
            "LayerNormalization": (1, 2), "GroupNormalization": (1, 2), "ReduceL1": (1,),
            "ReduceL2": (1,), "ReduceLogSum": (1,), "ReduceLogSumExp": (1,),
            "ReduceSumSquare": (1,)}

#: cases refused, by name, with (the op named, the reason)
REFUSED = {}


def _node_model(name, tmp_path):
    """The case's model with the CONSTANT inputs made initializers and the
    output shapes left out (but Range's: its length depends on run-time
    values); its path, the op type, the feeds and the reference outputs."""
    d = case_dir(name, tmp_path, NODE_CASE, MODULES)
    model = onnx.load(str(d / "model.onnx"))
    ins, refs = read_data(d)
    (node,) = model.graph.node
    for k in CONSTANT.get(node.op_type, ()):
        if k < len(node.input) and node.input[k] in ins:
            v = ins.pop(node.input[k])
            model.graph.initializer.append(numpy_helper.from_array(v, node.input[k]))
    if node.op_type != "Range":     # the importer must find the output shapes itself
        for vi in model.graph.output:
            vi.type.tensor_type.ClearField("shape")
    path = tmp_path / f"{name}_m.onnx"
    onnx.save(model, str(path))
    return path, node.op_type, ins, refs


def _load(path, op_type):
    if op_type in ("Shape", "Size"):    # run, not folded away
        return set_scratch(load_onnx(str(path), fold=False))
    return load_model(str(path))


def test_the_backend_node_cases_are_found():
    assert len(NODE_CASES) >= 250
    for op in ("layer_normalization", "where", "gathernd", "top_k", "einsum",
               "scatternd", "onehot", "reduce_log_sum_exp", "hardmax", "shape_"):
        assert any(n.startswith("test_" + op) for n in NODE_CASES), op
    assert set(REFUSED) <= set(NODE_CASES)


@pytest.mark.parametrize("name", NODE_CASES)
def test_onnx_backend_node_case(tmp_path, name):
    path, op_type, ins, refs = _node_model(name, tmp_path)
    if name in REFUSED:
        op, why = REFUSED[name]
        with pytest.raises(UnsupportedOpError, match=f"(?s){op}.*{why}"):
            _load(path, op_type)
        return
    g = _load(path, op_type)
    assert [op.op_type for op in g.ops] == [op_type]
    out = Executor(g, plan(g)).run(ins)
    assert {n for n, _ in refs} == set(out)
    for n, r in refs:
        assert out[n].shape == r.shape, (name, n)
        if r.dtype.kind in "biu":
            assert out[n].dtype == r.dtype, (name, n)
            np.testing.assert_array_equal(out[n], r, err_msg=f"{name}: {n}")
        else:
            np.testing.assert_allclose(out[n], r, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name}: {n}")


INDEXED = re.compile(r"test_(gathernd|gather_elements|scatternd|scatter_elements)\w*")


@pytest.mark.parametrize("name", [n for n in NODE_CASES if INDEXED.fullmatch(n)])
def test_constant_indices_give_the_same_outputs(tmp_path, name):
    """Indices as an initializer: offsets worked out once at setup, the
    same outputs, and no scratch."""
    path, op_type, ins, refs = _node_model(name, tmp_path)
    model = onnx.load(str(path))
    idx = model.graph.node[0].input[1]
    model.graph.initializer.append(numpy_helper.from_array(ins.pop(idx), idx))
    onnx.save(model, str(path))
    g = load_model(str(path))
    assert g.ops[0].scratch_bytes == 0
    out = Executor(g, plan(g)).run(ins)
    for n, r in refs:
        np.testing.assert_array_equal(out[n], r, err_msg=f"{name}: {n}")


# -- models built here, against onnxruntime ---------------------------------------
def _attention_block():
    """LayerNorm -> Einsum scores -> lower triangle -> a masked Where ->
    LogSumExp / ArgMax / TopK / Hardmax, an exclusive reverse CumSum."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "g", "b"], ["h"], axis=-1, epsilon=1e-5),
        n("Einsum", ["h", "h"], ["s"], equation="bid,bjd->bij"),
        n("Trilu", ["s", "k"], ["t"], upper=0),
        n("Equal", ["t", "zero"], ["masked"]),
        n("Not", ["masked"], ["keep"]),
        n("Where", ["keep", "t", "neg"], ["w"]),
        n("ReduceLogSumExp", ["w", "ax"], ["lse"], keepdims=1),
        n("Sub", ["w", "lse"], ["logp"]),
        n("ArgMax", ["w"], ["am"], axis=-1, keepdims=0, select_last_index=1),
        n("TopK", ["w", "kk"], ["tv", "ti"], axis=-1),
        n("Hardmax", ["w"], ["hm"], axis=-1),
        n("CumSum", ["h", "one"], ["cs"], exclusive=1, reverse=1),
        n("ReduceL2", ["cs", "ax"], ["l2"], keepdims=0),
        n("GreaterOrEqual", ["l2", "l2mean"], ["big"]),
    ]
    inits = {"g": rng.uniform(0.5, 1.5, 8).astype(np.float32),
             "b": rng.uniform(-0.5, 0.5, 8).astype(np.float32),
             "k": np.array(0, np.int64), "zero": np.array(0, np.float32),
             "neg": np.array(-30, np.float32), "ax": np.array([-1], np.int64),
             "kk": np.array([2], np.int64), "one": np.array(1, np.int64),
             "l2mean": np.array(2.5, np.float32)}
    feeds = {"x": rng.standard_normal((2, 5, 8)).astype(np.float32)}
    outs = {"logp": np.float32, "am": np.int64, "tv": np.float32, "ti": np.int64,
            "hm": np.float32, "big": np.bool_}
    return nodes, inits, feeds, outs


def _indexing_block():
    """GatherND / ScatterND / GatherElements / ScatterElements / OneHot /
    Mod / logic / SpaceToDepth / GroupNormalization / Range / Shape-free
    index arithmetic on run-time indices."""
    rng = np.random.default_rng(1)
    n = helper.make_node
    nodes = [
        n("GatherND", ["data", "nd"], ["gnd"]),
        n("ScatterND", ["data", "nd", "gnd"], ["snd"], reduction="add"),
        n("GatherElements", ["data", "el"], ["gel"], axis=1),
        n("ScatterElements", ["data", "el", "gel"], ["sel"], axis=1),
        n("OneHot", ["labels", "depth", "onoff"], ["oh"], axis=-1),
        n("Mod", ["labels", "three"], ["lm"]),
        n("Less", ["data", "half"], ["lo"]),
        n("IsNaN", ["data"], ["nan"]),
        n("Or", ["lo", "nan"], ["lon"]),
        n("Xor", ["lon", "lo"], ["x1"]),
        n("And", ["x1", "lo"], ["x2"]),
        n("Sign", ["data"], ["sg"]),
        n("SpaceToDepth", ["img"], ["s2d"], blocksize=2),
        n("GroupNormalization", ["s2d", "gs", "gb"], ["gn"], num_groups=4),
        n("Range", ["start", "limit", "delta"], ["r"]),
        n("ReduceSumSquare", ["gn", "axes"], ["ss"], keepdims=1),
        n("ReduceL1", ["data", "axes1"], ["l1"], keepdims=0),
    ]
    inits = {"depth": np.array(5, np.int64), "onoff": np.array([0, 3], np.float32),
             "three": np.array(3, np.int64), "half": np.array(0.5, np.float32),
             "gs": rng.uniform(0.5, 1.5, 4).astype(np.float32),
             "gb": rng.uniform(-1, 1, 4).astype(np.float32),
             "limit": np.array(40.0, np.float32), "axes": np.array([2, 3], np.int64),
             "axes1": np.array([1], np.int64)}
    feeds = {"data": rng.uniform(0, 1, (4, 6)).astype(np.float32),
             "nd": np.array([[0, 1], [3, 5], [2, -2]], np.int64),
             "el": np.array([[5, 0], [1, 1], [-1, 2], [3, 4]], np.int64),
             "labels": np.array([[0, 4, -1], [7, 2, -5]], np.int64),
             "img": rng.standard_normal((2, 2, 4, 6)).astype(np.float32),
             "start": np.array(1.5, np.float32), "delta": np.array(2.5, np.float32)}
    outs = {"snd": np.float32, "gel": np.float32, "sel": np.float32, "oh": np.float32,
            "lm": np.int64,
            "x2": np.bool_, "sg": np.float32, "ss": np.float32, "l1": np.float32}
    return nodes, inits, feeds, outs, {"r": ([16], np.float32)}


def _save(tmp_path, name, nodes, inits, feeds, outs, shaped=None, opset=18):
    outputs = {o: (None, dt) for o, dt in outs.items()}
    outputs.update(shaped or {})
    path = tmp_path / f"{name}.onnx"
    make_model(nodes, {k: (list(v.shape), v.dtype) for k, v in feeds.items()}, outputs,
               inits, opset=opset, path=path)
    return path


def _models(tmp_path):
    a = _attention_block()
    *b, shaped = _indexing_block()
    return {"attention": (_save(tmp_path, "attention", *a), a[2]),
            "indexing": (_save(tmp_path, "indexing", *b, shaped=shaped), b[2])}


@pytest.mark.parametrize("name", ["attention", "indexing"])
def test_mixed_models_match_onnxruntime(tmp_path, name):
    path, feeds = _models(tmp_path)[name]
    g = load_model(str(path))
    ours = Executor(g, plan(g)).run(feeds)
    ref = ort_run(path, feeds)
    assert set(ref) == set(ours)
    for k, r in ref.items():
        assert ours[k].shape == r.shape, k
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(ours[k], r, err_msg=k)
        else:
            np.testing.assert_allclose(ours[k], r, rtol=1e-5, atol=1e-5, err_msg=k)


def _without(nodes, outs, drop):
    """The model minus the ops in ``drop`` (and the outputs they made)."""
    gone = {o for n in nodes if n.op_type in drop for o in n.output}
    return [n for n in nodes if n.op_type not in drop], \
        {k: v for k, v in outs.items() if k not in gone}


@pytest.mark.parametrize("name", ["attention", "indexing"])
def test_no_numpy_allocation_after_first_inference(tmp_path, name):
    """Every kernel of the two models but TopK (numpy.argsort returns a new
    array) runs on planned memory and scratch only."""
    if name == "attention":
        nodes, inits, feeds, outs = _attention_block()
        nodes, outs = _without(nodes, outs, {"TopK"})
        path = _save(tmp_path, name, nodes, inits, feeds, outs)
    else:
        nodes, inits, feeds, outs, shaped = _indexing_block()
        path = _save(tmp_path, name, nodes, inits, feeds, outs, shaped=shaped)
    g = load_model(str(path))
    assert len(g.ops) >= 12
    ex = Executor(g)
    ex.run(feeds)
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
        ex.run(feeds)
    assert counter.allocations == 0


def test_the_allocation_counter_sees_topk(tmp_path):
    """The same check does catch a kernel that allocates (TopK sorts)."""
    nodes, inits, feeds, outs = _attention_block()
    g = load_model(str(_save(tmp_path, "attention", nodes, inits, feeds, outs)))
    ex = Executor(g)
    ex.run(feeds)
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
    assert counter.allocations > 0


# -- what is refused ---------------------------------------------------------------
def _one(tmp_path, op, feeds, out, inits=None, **attrs):
    node = helper.make_node(op, list(feeds) + list(inits or {}), ["y"], name=f"my_{op}",
                            **attrs)
    path = tmp_path / f"{op}.onnx"
    make_model([node], feeds, {"y": out}, inits, opset=18, path=path)
    return str(path)


def _compress_unique_model(path, sorted_):
    """Rows of x whose sum > 0 (Compress on axis 0, a pool tensor) and their
    sum (planned); the positive elements (Compress without axis); Unique of
    round(2x) without axis and of the rows of round(x / 2) along axis 0,
    all four outputs each."""
    nodes = [helper.make_node("ReduceSum", ["x", "ax1"], ["rs"], keepdims=0),
             helper.make_node("Greater", ["rs", "zero"], ["keep"]),
             helper.make_node("Compress", ["x", "keep"], ["rows"], axis=0),
             helper.make_node("ReduceSum", ["rows"], ["total"], keepdims=0),
             helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Reshape", ["pos", "flat"], ["pos1"]),
             helper.make_node("Compress", ["x", "pos1"], ["px"]),
             helper.make_node("Mul", ["x", "two"], ["x2"]),
             helper.make_node("Round", ["x2"], ["r2"]),
             helper.make_node("Unique", ["r2"], ["u", "ui", "uinv", "uc"], sorted=sorted_),
             helper.make_node("Div", ["x", "two"], ["xh"]),
             helper.make_node("Round", ["xh"], ["rh"]),
             helper.make_node("Unique", ["rh"], ["v", "vi", "vinv", "vc"], axis=0,
                              sorted=sorted_)]
    outs = ["rows", "total", "px", "u", "ui", "uinv", "uc", "v", "vi", "vinv", "vc"]
    make_model(nodes, {"x": ([6, 4], np.float32)},
               {o: (None, np.int64 if o[1:] in ("i", "inv", "c") else np.float32)
                for o in outs},
               {"ax1": np.array([1], np.int64), "zero": np.array(0, np.float32),
                "flat": np.array([-1], np.int64), "two": np.array(2, np.float32)},
               opset=13, path=path)
    return str(path)


@pytest.mark.parametrize("sorted_", [1, 0])
def test_compress_and_unique_make_pool_tensors_like_onnxruntime(tmp_path, sorted_):
    path = _compress_unique_model(tmp_path / "cu.onnx", sorted_)
    g = load_model(path)
    assert {n for n, t in g.tensors.items() if t.dynamic} >= {"rows", "px", "u", "v", "vc"}
    assert not g.tensors["total"].dynamic and not g.tensors["keep"].dynamic
    ex = Executor(g, plan(g))
    rng = np.random.default_rng(sorted_)
    for seed in range(4):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        x[seed] = x[5 - seed]          # a repeated row
        ours, ref = ex.run({"x": x}), ort_run(path, {"x": x})
        assert set(ref) <= set(ours)
        for k, r in ref.items():
            assert ours[k].shape == r.shape and ours[k].dtype == r.dtype, (seed, k)
            np.testing.assert_allclose(ours[k], r, rtol=1e-6, err_msg=f"{seed}: {k}")
        assert ex.memory_info()["pool_bytes"] >= ours["rows"].nbytes + ours["px"].nbytes


def test_compress_with_a_declared_size_checks_the_data(tmp_path):
    """Sized by the model, Compress is planned, and data of another count
    is an error naming the op; a condition longer than the axis may only
    be false beyond it (as NumPy's compress, which ONNX follows)."""
    path = _one(tmp_path, "Compress", {"x": ([4], np.float32), "c": ([5], np.bool_)},
                ([2], np.float32))
    g = load_model(path)
    assert not g.tensors["y"].dynamic
    ex = Executor(g, plan(g))
    x = np.arange(4, dtype=np.float32)
    y = ex.run({"x": x, "c": np.array([1, 0, 0, 1, 0], bool)})["y"]
    np.testing.assert_array_equal(y, [0, 3])
    with pytest.raises(GraphError, match=r"my_Compress.*shape \[3\], the model declares \[2\]"):
        ex.run({"x": x, "c": np.array([1, 1, 0, 1, 0], bool)})
    with pytest.raises(GraphError, match="my_Compress.*true beyond the 4 of axis 0"):
        ex.run({"x": x, "c": np.array([1, 0, 0, 0, 1], bool)})


def test_run_time_k_and_depth_build_the_kernel_per_value(tmp_path):
    """A K or a depth fed at run time: the kernel is built when the value
    is known (one per value), the rest of the graph stays planned."""
    from helpers.model_zoo import ort_run
    path = _one(tmp_path, "OneHot", {"i": ([3], np.int64), "d": ([], np.int64)},
                ([3, 4], np.float32), {"v": np.array([0, 1], np.float32)})
    g = load_model(path)
    assert g.ops[0].notes.reads_values
    ex = Executor(g, plan(g))
    fx = {"i": np.array([0, 3, 1], np.int64), "d": np.array(4, np.int64)}
    np.testing.assert_array_equal(ex.run(fx)["y"], ort_run(path, fx)["y"])
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="my_topk")
    path = tmp_path / "topk.onnx"
    make_model([node], {"x": ([2, 5], np.float32), "k": ([1], np.int64)},
               {"v": (None, np.float32), "i": (None, np.int64)}, path=path)
    g = load_model(str(path))
    assert g.tensors["v"].dynamic and g.tensors["i"].dynamic
    ex = Executor(g, plan(g))
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    for k in (2, 4, 2):
        fx = {"x": x, "k": np.array([k], np.int64)}
        out, ref = ex.run(fx), ort_run(path, fx)
        assert out["v"].shape == (2, k)
        np.testing.assert_array_equal(out["v"], ref["v"])
        np.testing.assert_array_equal(out["i"], ref["i"])
    assert len(ex.kernels[0].cache) == 2        # one kernel per K seen


def test_range_of_run_time_length_is_a_pool_tensor(tmp_path):
    feeds = {"s": ([], np.float32), "l": ([], np.float32), "d": ([], np.float32)}
    g = load_model(_one(tmp_path, "Range", feeds, (None, np.float32)))
    assert g.tensors["y"].dynamic
    ex = Executor(g, plan(g))
    for lim in (3.0, 7.5):
        y = ex.run({"s": np.float32(1), "l": np.float32(lim), "d": np.float32(0.5)})["y"]
        np.testing.assert_allclose(y, np.arange(1, lim, 0.5, dtype=np.float32))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_inverts_depth_to_space(tmp_path, mode):
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=2, mode=mode),
             helper.make_node("DepthToSpace", ["s"], ["y"], blocksize=2, mode=mode)]
    path = tmp_path / "s2d.onnx"
    make_model(nodes, {"x": ([2, 3, 4, 6], np.float32)}, {"y": (None, np.float32)},
               opset=13, path=path)
    g = load_model(str(path))
    np.testing.assert_array_equal(Executor(g, plan(g)).run({"x": x})["y"], x)


# -- constant folding of the same ops ---------------------------------------------
#: the reference evaluator warns on Mod by zero (the expected NaN)
QUIET_REFERENCE = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
#: the reference evaluator cannot evaluate these (a function op): never folded
NOT_FOLDED = {"GroupNormalization"}


@QUIET_REFERENCE
@pytest.mark.parametrize("name", [n for n in NODE_CASES if n not in REFUSED])
def test_folding_at_import_gives_the_reference_outputs(tmp_path, name):
    """With every input known, the importer evaluates the node itself (its
    NumPy folds, else the ONNX reference evaluator): the same outputs."""
    from pyarena.importers.onnx_fold import _fold_node
    d = case_dir(name, tmp_path, NODE_CASE, MODULES)
    model = onnx.load(str(d / "model.onnx"))
    ins, refs = read_data(d)
    (node,) = model.graph.node
    shapes = {k: list(v.shape) for k, v in ins.items()}
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    res = _fold_node(onnx, node, ins, shapes, opset)
    if node.op_type in NOT_FOLDED:
        assert res is None      # left to the kernel
        return
    for (n, r), v in zip(refs, res):
        v = np.asarray(v)
        assert v.shape == r.shape, (name, n)
        if r.dtype.kind in "biu":
            np.testing.assert_array_equal(v, r, err_msg=f"{name}: {n}")
        else:
            np.testing.assert_allclose(v.astype(np.float64), r.astype(np.float64),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{name}: {n}")


def test_in_place_kinds_are_used_and_stay_correct(tmp_path):
    """Trilu and Mod write into their input's buffer, Not / Xor into a bool
    one; the results still match onnxruntime."""
    rng = np.random.default_rng(5)
    n = helper.make_node
    nodes = [n("Relu", ["x"], ["a"]),
             n("Trilu", ["a", "k"], ["t"], upper=1),
             n("Mul", ["t", "t"], ["y"]),
             n("Add", ["i", "one"], ["j"]),
             n("Mod", ["j", "three"], ["m"], fmod=0),
             n("Less", ["x", "zero"], ["neg"]),
             n("Not", ["neg"], ["pos"]),
             n("Xor", ["pos", "big"], ["z"])]
    inits = {"k": np.array(1, np.int64), "one": np.ones((3, 4), np.int64),
             "three": np.array(3, np.int64), "zero": np.array(0, np.float32),
             "big": rng.uniform(size=(3, 4)) > 0.5}
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32),
             "i": rng.integers(-9, 9, (3, 4))}
    path = _save(tmp_path, "inplace", nodes, inits, feeds,
                 {"y": np.float32, "m": np.int64, "z": np.bool_})
    g = load_model(str(path))
    p = plan(g)
    for a, b in (("a", "t"), ("j", "m"), ("neg", "pos")):
        assert p.buffer_of[a] is p.buffer_of[b], (a, b)
    ours = Executor(g, p).run(feeds)
    ref = ort_run(path, feeds)
    np.testing.assert_allclose(ours["y"], ref["y"], rtol=1e-6)
    np.testing.assert_array_equal(ours["m"], ref["m"])
    np.testing.assert_array_equal(ours["z"], ref["z"])


def test_float16_layer_norm_keeps_float32_statistics(tmp_path):
    """stash_type 1 (the default): mean and variance of a float16 input in
    float32, as onnxruntime does -- the float16 sum of 64 values near 2000
    would overflow (65504)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 64)) * 4 + 2000).astype(np.float16)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"])]
    inits = {"g": rng.uniform(0.5, 1.5, 64).astype(np.float16),
             "b": rng.uniform(-1, 1, 64).astype(np.float16)}
    path = _save(tmp_path, "ln16", nodes, inits, {"x": x}, {"y": np.float16})
    g = load_model(str(path))
    ours = Executor(g, plan(g)).run({"x": x})["y"].astype(np.float32)
    x32 = x.astype(np.float32)
    m = x32.mean(-1, keepdims=True)
    want = (x32 - m) / np.sqrt(((x32 - m) ** 2).mean(-1, keepdims=True) + 1e-5)
    want = want * inits["g"].astype(np.float32) + inits["b"].astype(np.float32)
    np.testing.assert_allclose(ours, want, atol=1e-2)
    ref = ort_run(path, {"x": x})["y"].astype(np.float32)
    np.testing.assert_allclose(ours, ref, atol=1e-2)


# -- the TFLite builtins mapped onto them -------------------------------------------
def test_tflite_logic_gather_nd_arg_max_cumsum_match_the_interpreter(tmp_path):
    from helpers.tflite_util import TFLiteBuilder
    from pyarena.importers.reference import reference_tflite
    B = TFLiteBuilder()
    x, y = B.tensor("x", (3, 4)), B.tensor("y", (3, 4))
    t = {k: B.tensor(k, (3, 4), np.bool_) for k in
         ("lt", "le", "gt", "ge", "eq", "and", "or", "not")}
    for code, name in (("LESS", "lt"), ("LESS_EQUAL", "le"), ("GREATER", "gt"),
                       ("GREATER_EQUAL", "ge"), ("EQUAL", "eq")):
        B.op(code, [x, y], [t[name]])
    B.op("LOGICAL_AND", [t["lt"], t["ge"]], [t["and"]])
    B.op("LOGICAL_OR", [t["and"], t["eq"]], [t["or"]])
    B.op("LOGICAL_NOT", [t["or"]], [t["not"]])
    sel, mod = B.tensor("sel", (3, 4)), B.tensor("mod", (3, 4))
    B.op("SELECT_V2", [t["not"], x, y], [sel])
    B.op("FLOOR_MOD", [x, y], [mod])
    idx = B.const("idx", np.array([[2, 1], [0, 3], [1, 0]], np.int32), np.int32)
    gnd = B.tensor("gnd", (3,))
    B.op("GATHER_ND", [sel, idx], [gnd])
    cs, cr = B.tensor("cs", (3, 4)), B.tensor("cr", (3, 4))
    B.op("CUMSUM", [x, B.const("cax", np.array(1, np.int32), np.int32)], [cs],
         ("CumsumOptions", {"Exclusive": True, "Reverse": False}))
    B.op("CUMSUM", [y, B.const("cax0", np.array(0, np.int32), np.int32)], [cr],
         ("CumsumOptions", {"Exclusive": False, "Reverse": True}))
    am, an = B.tensor("am", (4,), np.int32), B.tensor("an", (3,), np.int64)
    B.op("ARG_MAX", [sel, B.const("ax0", np.array([0], np.int32), np.int32)], [am],
         ("ArgMaxOptions", {"OutputType": 2}))
    B.op("ARG_MIN", [mod, B.const("ax1", np.array([-1], np.int32), np.int32)], [an],
         ("ArgMinOptions", {"OutputType": 4}))
    path = B.save(tmp_path / "logic.tflite", [x, y], [t["le"], t["gt"], t["not"], sel,
                                                     mod, gnd, am, an, cs, cr])
    g = load_model(path)
    assert {"Less", "GreaterOrEqual", "And", "Not", "Where", "Mod", "GatherND"} <= \
        {op.op_type for op in g.ops}
    rng = np.random.default_rng(2)
    feeds = {"x": rng.integers(-4, 5, (3, 4)).astype(np.float32),
             "y": rng.choice([-3.0, -2.0, 2.0, 3.0], (3, 4)).astype(np.float32)}
    feeds["y"][0, :2] = feeds["x"][0, :2]          # some equal pairs
    out = Executor(g, plan(g)).run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    assert out["am"].dtype == np.int32
    assert (out["cs"][:, 0] == 0).all()                         # exclusive
    np.testing.assert_array_equal(out["cr"][-1], feeds["y"][-1])  # reverse
    for k in ("le", "gt", "not", "sel", "mod", "gnd", "am", "an", "cs", "cr"):
        np.testing.assert_array_equal(out[k], ref[k], err_msg=k)


_UNIQUE_EX = {}


def _unique_executor(tmp_path_factory):
    """One model (x (4, 3) -> Unique along axis 0, Unique of the flattened
    x, Compress of x's rows by a condition), imported once."""
    if not _UNIQUE_EX:
        path = tmp_path_factory.mktemp("uq") / "uq.onnx"
        nodes = [helper.make_node("Unique", ["x"], ["v", "vi", "vinv", "vc"], axis=0),
                 helper.make_node("Unique", ["x"], ["u", "ui", "uinv", "uc"], sorted=0),
                 helper.make_node("Compress", ["x", "c"], ["rows"], axis=0)]
        outs = {o: (None, np.float32 if o in ("v", "u", "rows") else np.int64)
                for o in ("v", "vi", "vinv", "vc", "u", "ui", "uinv", "uc", "rows")}
        make_model(nodes, {"x": ([4, 3], np.float32), "c": ([4], np.bool_)}, outs,
                   opset=13, path=path)
        g = load_model(str(path))
        _UNIQUE_EX["ex"] = Executor(g, plan(g))
    return _UNIQUE_EX["ex"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-2, 2), min_size=12, max_size=12),
       st.lists(st.booleans(), min_size=4, max_size=4))
def test_unique_and_compress_keep_their_invariants(tmp_path_factory, values, cond):
    """Whatever the data: the unique values taken at their first indices
    and spread by the inverse indices give x back, the counts add up to
    the slices, the first indices are first occurrences (increasing when
    not sorted); Compress keeps exactly the rows whose condition is true."""
    x = np.array(values, np.float32).reshape(4, 3)
    c = np.array(cond)
    out = _unique_executor(tmp_path_factory).run({"x": x, "c": c})
    flat = x.reshape(-1)
    v, vi, vinv, vc = (out[k] for k in ("v", "vi", "vinv", "vc"))
    np.testing.assert_array_equal(x[vi], v)
    np.testing.assert_array_equal(v[vinv], x)
    assert vc.sum() == 4 and len({tuple(r) for r in x}) == len(v)
    assert all(not (x[:i] == x[i]).all(axis=1).any() for i in vi)    # first occurrences
    assert [tuple(r) for r in v] == sorted(tuple(r) for r in v)
    u, ui, uinv, uc = (out[k] for k in ("u", "ui", "uinv", "uc"))
    np.testing.assert_array_equal(flat[ui], u)
    np.testing.assert_array_equal(u[uinv], flat)
    assert uc.sum() == 12 and len(set(values)) == len(u) and list(ui) == sorted(ui)
    assert all(values.index(int(a)) == i for a, i in zip(u, ui))
    np.testing.assert_array_equal(out["rows"], x[c])
