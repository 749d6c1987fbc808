"""pyarena's own ONNX shape inference (importers/onnx_shapes.py and its
rules) against ONNX's: the same graph -- every tensor's shape, dtype and
role, every op -- from both, on the onnx package's models, the vendored
real model and the ONNX operator test cases; random geometries against
ONNX's inference; and the errors it raises for models that do not add up."""
import pathlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyarena.importers.onnx_inference as inference
from helpers.model_zoo import randomized_light_model
from helpers.onnx_util import make_model
from pyarena.errors import GraphError, ModelImportError
from pyarena.importers import load_model
from pyarena.runtime.kernels import op_table
from pyarena.runtime.kernels.shape_rules import broadcast

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
_ONNX_INFER = inference.infer_with_contrib     # ONNX's, counted in _both


def _summary(g):
    # a pool tensor (a size only the data tells) has no shape
    return ({k: (None if t.dynamic else tuple(t.shape), str(t.dtype), t.role)
             for k, t in g.tensors.items()},
            [(o.op_type, tuple(o.inputs), tuple(o.outputs)) for o in g.ops])


def _both(monkeypatch, path, **kw):
    """(own, onnx's, whether the own pass fell back) -- each a graph
    summary or the error's class name."""
    calls = []
    monkeypatch.setattr(inference, "infer_with_contrib",
                        lambda *a: calls.append(1) or _ONNX_INFER(*a))
    out = []
    for own in (True, False):
        monkeypatch.setattr(inference, "OWN_SHAPE_INFERENCE", own)
        calls.clear()
        try:
            out.append(_summary(load_model(str(path), **kw)))
        except GraphError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
        if own:
            fell_back = bool(calls)
    return out[0], out[1], fell_back


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v2", "densenet121",
                                  "resnet50"])
def test_the_onnx_packages_models_get_the_same_graph(tmp_path, monkeypatch, name):
    path = randomized_light_model(name, str(tmp_path / f"{name}.onnx"))
    own, ref, fell_back = _both(monkeypatch, path)
    assert not fell_back
    assert own == ref


@pytest.mark.parametrize("kw", [{"inputs": {"input": (1, 576)}},
                                {"inputs": {"input": (3, 576)}}])
def test_the_vendored_real_model_gets_the_same_graph(monkeypatch, kw):
    own, ref, fell_back = _both(monkeypatch, DATA / "silero_vad_16k_sequence.onnx", **kw)
    assert not fell_back
    assert isinstance(own, tuple) and own == ref


def test_inference_never_builds_the_schema_registry(tmp_path, monkeypatch):
    """Loading covered models must not call ONNX's inference (nor the
    reference evaluator that folds odd ops): both load the schemas."""
    def refuse(*a, **k):
        raise AssertionError("ONNX's shape inference was called")
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    path = randomized_light_model("squeezenet", str(tmp_path / "s.onnx"))
    g = load_model(path)
    assert g.tensors[g.outputs[0]].shape[:2] == (1, 1000)


# -- the ONNX operator test cases ---------------------------------------------------
#: the operator test-case modules of the ops whose rules shape real models
_MODULES = ("conv convtranspose convinteger maxpool averagepool globalaveragepool "
            "globalmaxpool resize upsample slice reshape split pad gather gatherelements "
            "gathernd reducel1 reducel2 reducemax reducemean reducemin reducesum "
            "reducesumsquare reduce_log_sum reduce_log_sum_exp argmax argmin topk einsum "
            "lstm gru rnn flatten squeeze unsqueeze transpose concat expand tile rangeop "
            "onehot cast quantizelinear dequantizelinear dynamicquantizelinear depthtospace "
            "spacetodepth matmul matmulinteger gemm where layernormalization dropout shape "
            "size constantofshape cumsum trilu batch_normalization qlinearconv qlinearmatmul "
            "prelu clip softmax logsoftmax hardmax instance_normalization lrn").split()


@pytest.fixture(scope="module")
def node_cases():
    from helpers.node_cases import generated_cases
    found = generated_cases(re.compile(r"test_\w+"), _MODULES)
    return {name: c for name, c in found.items()
            if all(n.op_type in op_table("shape_rule") or n.op_type == "Constant"
                   for n in c.model.graph.node)}


def test_onnx_operator_cases_get_the_same_graph(tmp_path, monkeypatch, node_cases):
    assert len(node_cases) > 300
    loaded = 0
    for name, case in sorted(node_cases.items()):
        path = tmp_path / f"{name}.onnx"
        m = onnx.ModelProto()
        m.CopyFrom(case.model)
        for vi in list(m.graph.output) + list(m.graph.value_info):
            vi.type.tensor_type.ClearField("shape")   # computed, not declared
        onnx.save(m, str(path))
        own, ref, fell_back = _both(monkeypatch, path)
        if isinstance(own, str) and isinstance(ref, str):
            continue        # refused both ways (an op pyarena lacks ...), by name either way
        if isinstance(ref, str) and "cannot size tensor" in ref:
            continue        # ONNX's inference cannot size it (MeanVarianceNormalization:
            #                 its cases are here when another test module recorded them)
        assert own == ref, (name, own, ref)
        # ONNX's inference for function expansions, Resize with axes or an
        # aspect-ratio policy and Einsum with an ellipsis: no rule of ours
        assert not fell_back or re.search("expanded|resize|einsum", name), name
        loaded += 1
    assert loaded > 250


# -- random geometries against ONNX's inference --------------------------------------
def _onnx_inferred(model, name):
    m = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for vi in list(m.graph.value_info) + list(m.graph.output):
        if vi.name == name:
            return [d.dim_value if d.HasField("dim_value") else None
                    for d in vi.type.tensor_type.shape.dim]
    raise AssertionError(f"ONNX inferred nothing for {name}")


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_windows_match_onnx(data):
    op = data.draw(st.sampled_from(["Conv", "MaxPool", "AveragePool"]))
    size = data.draw(st.lists(st.integers(5, 19), min_size=2, max_size=2))
    k = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=2))
    strides = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=2))
    pads = data.draw(st.lists(st.integers(0, 1), min_size=4, max_size=4))
    pads = [min(p, kk - 1) for p, kk in zip(pads, k + k)]
    attrs = dict(strides=strides, pads=pads)
    auto = data.draw(st.sampled_from(["NOTSET", "SAME_UPPER", "VALID"]))
    if auto != "NOTSET":
        attrs = dict(strides=strides, auto_pad=auto)
    inits = {}
    if op == "Conv":
        attrs["dilations"] = data.draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))
        inits["w"] = np.zeros([4, 3] + k, np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    else:
        attrs["kernel_shape"] = k
        if auto == "NOTSET":
            attrs["ceil_mode"] = data.draw(st.integers(0, 1))
        node = helper.make_node(op, ["x"], ["y"], **attrs)
    # 22 wrote down onnxruntime's ceil_mode rule (no window starts in the end
    # padding); ONNX's inference keeps the old formula below 22, onnxruntime
    # and pyarena drop that window at every opset: at 17 the reference is
    # onnxruntime's run
    opset = data.draw(st.sampled_from([17, 22]))
    m = make_model([node], {"x": ([1, 3] + size, np.float32)}, {"y": (None, np.float32)},
                   inits, opset=opset)
    from pyarena.importers.onnx import _collect
    from pyarena.importers.onnx_shapes import infer_shapes
    dil = attrs.get("dilations", [1, 1])
    lo_hi = [0] * 4 if auto == "SAME_UPPER" else attrs.get("pads", [0] * 4)
    if any(n + lo_hi[i] + lo_hi[i + 2] < (kk - 1) * dd + 1 for i, (n, kk, dd) in
           enumerate(zip(size, k, dil))) and auto != "SAME_UPPER":   # window > input
        # (ONNX's inference answers such windows with C's truncating division)
        with pytest.raises(ModelImportError, match="window is larger"):
            infer_shapes(onnx, m, opset, _collect, "m")
        return
    shapes, _ = infer_shapes(onnx, m, opset, _collect, "m")
    if opset >= 22 or not attrs.get("ceil_mode"):
        assert shapes["y"] == _onnx_inferred(m, "y")
    if op != "Conv" and auto == "NOTSET":   # (onnxruntime refuses some SAME pads)
        import onnxruntime as ort
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"x": np.zeros([1, 3] + size, np.float32)})[0]
        assert shapes["y"] == list(got.shape)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.data())
def test_slices_match_numpy(dims, data):
    starts, ends, steps = [], [], []
    for d in dims:
        starts.append(data.draw(st.integers(-d - 2, d + 2)))
        ends.append(data.draw(st.integers(-d - 2, d + 2)))
        steps.append(data.draw(st.sampled_from([1, 2, -1, -2])))
    node = helper.make_node("Slice", ["x", "s", "e", "a", "p"], ["y"])
    inits = {"s": np.array(starts), "e": np.array(ends), "a": np.arange(len(dims)),
             "p": np.array(steps)}
    m = make_model([node], {"x": (dims, np.float32)}, {"y": (None, np.float32)}, inits)
    from pyarena.importers.onnx import _collect
    from pyarena.importers.onnx_shapes import infer_shapes
    shapes, _ = infer_shapes(onnx, m, 17, _collect, "m")
    want = np.zeros(dims)[tuple(slice(s, e, p) for s, e, p in zip(starts, ends, steps))]
    assert shapes["y"] == list(want.shape)


@given(st.lists(st.lists(st.sampled_from([1, 2, 3, None, "n"]), max_size=4),
                min_size=1, max_size=3))
def test_broadcast_of_known_dims_is_numpys(shapes):
    try:
        out = broadcast(*shapes)
    except ValueError:
        ints = [[d if isinstance(d, int) else 1 for d in s] for s in shapes]
        with pytest.raises(ValueError):
            np.broadcast_shapes(*[tuple(s) for s in ints])
        return
    known = [s for s in shapes if all(isinstance(d, int) for d in s)]
    if len(known) == len(shapes):
        assert out == list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    assert len(out) == max(len(s) for s in shapes)


# -- models that do not add up ------------------------------------------------------
def test_a_reshape_that_cannot_be_is_named(tmp_path):
    path = tmp_path / "r.onnx"
    make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="bad_reshape")],
               {"x": ([2, 3], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([4, 2], np.int64)}, path=path)
    with pytest.raises(ModelImportError, match=r"'bad_reshape' \(Reshape\).*\[2, 3\]"):
        load_model(str(path))


def test_a_declared_shape_that_contradicts_the_op_stays(tmp_path, monkeypatch):
    """As in ONNX's inference: the model's word over the rule's (an exporter
    that knows better, e.g. a pooling whose last window would start in the
    padding); the kernel then checks what it is given."""
    path = tmp_path / "d.onnx"
    make_model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[2, 2],
                                 ceil_mode=1)],
               {"x": ([1, 1, 2, 2], np.float32)}, {"y": ([1, 1, 1, 1], np.float32)},
               path=path)
    from pyarena.importers.onnx import _collect
    from pyarena.importers.onnx_shapes import infer_shapes
    shapes, _ = infer_shapes(onnx, onnx.load(str(path)), 17, _collect, "d")
    assert shapes["y"] == [1, 1, 1, 1]
    own, ref, _ = _both(monkeypatch, path)
    assert own == ref


@pytest.mark.parametrize("declared", [[1, "seqlen"], ["T", 1, 7], [1, 1, "n"]])
def test_a_symbolic_declared_shape_gives_way_to_a_computed_one(tmp_path, declared):
    """A graph output declared with a symbolic dim that contradicts the op's
    concrete result (ddddocr's CRNN declares its (T, 1, classes) logits as
    [1, 'seqlen']): the computed shape is taken -- the declaration could
    not size the tensor anyway -- and the model runs as onnxruntime runs it
    (which warns and returns the computed shape).  A computed Reshape
    target from Shape -> Gather -> Concat, with a -1, as there."""
    from helpers.model_zoo import ort_run
    from pyarena import InferenceSession
    from pyarena.runtime import Executor
    path = tmp_path / "crnn_tail.onnx"
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
             helper.make_node("Gather", ["s", "i1"], ["d1"], axis=0),
             helper.make_node("Concat", ["d0", "d1", "m1"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    make_model(nodes, {"x": (["W", 1, 7], np.float32)}, {"y": (declared, np.float32)},
               {"i0": np.array([0], np.int64), "i1": np.array([1], np.int64),
                "m1": np.array([-1], np.int64)}, path=path)
    x = np.random.default_rng(0).standard_normal((5, 1, 7)).astype(np.float32)
    g = load_model(str(path), inputs={"x": [5, 1, 7]})
    assert list(g.tensors["y"].shape) == [5, 1, 7]
    ref = ort_run(path, {"x": x})["y"]
    np.testing.assert_array_equal(Executor(g).run({"x": x})["y"], ref)
    s = InferenceSession(str(path))
    for w in (3, 9):
        xw = np.random.default_rng(w).standard_normal((w, 1, 7)).astype(np.float32)
        (y,) = s.run(None, {"x": xw})
        np.testing.assert_array_equal(y, xw)


def test_shapes_that_do_not_broadcast_are_named(tmp_path):
    path = tmp_path / "b.onnx"
    make_model([helper.make_node("Add", ["x", "z"], ["y"], name="the_add")],
               {"x": ([2, 3], np.float32), "z": ([4], np.float32)},
               {"y": (None, np.float32)}, path=path)
    with pytest.raises(ModelImportError, match=r"'the_add' \(Add\).*do not broadcast"):
        load_model(str(path))


def test_a_declared_dim_fills_what_the_rules_leave_unknown(tmp_path):
    """TopK with k from an input: the rule cannot tell k, the model can."""
    path = tmp_path / "k.onnx"
    make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"])],
               {"x": ([2, 9], np.float32), "k": ([1], np.int64)},
               {"v": ([2, 3], np.float32), "i": ([2, 3], np.int64)}, path=path)
    from pyarena.importers.onnx import _collect
    from pyarena.importers.onnx_shapes import infer_shapes
    shapes, types = infer_shapes(onnx, onnx.load(str(path)), 17, _collect, "k")
    assert shapes["v"] == [2, 3] and shapes["i"] == [2, 3]
    assert types["i"] == onnx.TensorProto.INT64


@pytest.mark.parametrize("allowzero", [0, 1])
def test_a_computed_reshape_target_is_followed_in_one_pass(allowzero):
    """Shape -> Gather -> Concat makes the target, [2, 0, -1] by value (0:
    the input's dim, or a real 0 with allowzero); the pass carries the
    values along, as ONNX's data propagation does, without folding rounds."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["g"], axis=0),
             helper.make_node("Concat", ["g", "rest"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"], allowzero=allowzero)]
    rest = np.array([0, -1] if not allowzero else [0, 7], np.int64)
    m = make_model(nodes, {"x": ([2, 3, 4], np.float32)}, {"y": (None, np.float32)},
                   {"i": np.array([0], np.int64), "rest": rest}, opset=17)
    from pyarena.importers.onnx import _collect
    from pyarena.importers.onnx_shapes import infer_shapes
    if allowzero:       # 2 * 0 * 7 values from 24: refused by name
        with pytest.raises(ModelImportError, match="cannot reshape"):
            infer_shapes(onnx, m, 17, _collect, "m")
        return
    shapes, _ = infer_shapes(onnx, m, 17, _collect, "m")
    assert shapes["t"] == [3] and shapes["y"] == [2, 3, 4]


@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
def test_quantized_models_get_the_same_graph_from_onnxs_inference(tmp_path, monkeypatch, fmt):
    """onnxruntime's quantized model (its com.microsoft QLinear ops; QDQ
    chains fused into them): ONNX's inference leaves contrib ops unsized,
    the contrib ops' own shape rules size them -- the same graph as
    pyarena's own inference."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    from importers.test_quantized_models import Calibration, float_cnn
    f, q = tmp_path / "float.onnx", tmp_path / f"{fmt}.onnx"
    float_cnn(f)
    quantization.quantize_static(str(f), str(q), Calibration(),
                                 quant_format=getattr(quantization.QuantFormat, fmt))
    own, ref, fell_back = _both(monkeypatch, q)
    assert not fell_back
    assert isinstance(own, tuple) and own == ref
    assert any(t.startswith("QLinear") for t, _, _ in own[1])


def test_a_constant_cast_to_bfloat16_folds_as_onnxruntime_computes(tmp_path):
    """Folding a Cast takes the target dtype from onnx (bfloat16 too, which
    NumPy does not know): the constant rounds through bfloat16 as it does
    in onnxruntime."""
    pytest.importorskip("onnxruntime")
    from helpers.model_zoo import ort_run
    c = np.array([1.0, 1.00390625, 3.14159, -2.71828], np.float32)
    nodes = [helper.make_node("Cast", ["c"], ["b"], to=onnx.TensorProto.BFLOAT16),
             helper.make_node("Cast", ["b"], ["f"], to=onnx.TensorProto.FLOAT),
             helper.make_node("Add", ["f", "x"], ["y"])]
    path = str(tmp_path / "bf16.onnx")
    make_model(nodes, {"x": ([4], np.float32)}, {"y": ([4], np.float32)}, {"c": c},
               opset=17, path=path)
    g = load_model(path)
    assert [op.op_type for op in g.ops] == ["Add"]          # the casts folded
    from pyarena.runtime import Executor
    x = np.zeros(4, np.float32)
    got = np.array(Executor(g).run({"x": x})["y"])
    np.testing.assert_array_equal(got, ort_run(path, {"x": x})["y"])
    assert not np.array_equal(got, c)                       # it did round
