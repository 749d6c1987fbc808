"""The numeric ai.onnx.ml operators (kernels/ml.py): Binarizer,
ArrayFeatureExtractor and TreeEnsemble -- the ONNX node cases with every
input fed at run time, random forests (every node mode, set membership,
missing values, the four aggregations) against onnxruntime, and bad
indices or trees refused with a pyarena error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_ai_onnx_ml_(binarizer|array_feature_extractor|tree_ensemble\w*)",
              ("ai_onnx_ml.binarizer", "ai_onnx_ml.array_feature_extractor",
               "ai_onnx_ml.tree_ensemble"))


def test_the_forms_are_covered():
    assert {"test_ai_onnx_ml_binarizer", "test_ai_onnx_ml_array_feature_extractor",
            "test_ai_onnx_ml_tree_ensemble_set_membership",
            "test_ai_onnx_ml_tree_ensemble_single_tree"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _model(node, inputs, opset=5, out=TensorProto.FLOAT):
    g = helper.make_graph([node], "ml", inputs,
                          [helper.make_tensor_value_info("y", out, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                               helper.make_opsetid("ai.onnx.ml", opset)])


def _run_both(model, feeds, tmp_path):
    import pyarena
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    got = pyarena.InferenceSession(str(path)).run(None, feeds)[0]
    want = list(ort_run(path, feeds).values())[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    return got, want


def _forest(rng, n_features, n_trees, n_targets, depth=3):
    nodes = {k: [] for k in ("feat", "mode", "split", "tn", "fn", "tl", "fl", "miss")}
    leaves, members, roots = {"t": [], "w": []}, [], []

    def leaf():
        leaves["t"].append(int(rng.integers(0, n_targets)))
        leaves["w"].append(float(np.round(rng.uniform(-2, 2), 3)))
        return len(leaves["t"]) - 1, 1

    def node(d):
        if d == depth or (d > 0 and rng.random() < 0.25):
            return leaf()
        i = len(nodes["feat"])
        for k in nodes:
            nodes[k].append(0)
        mode = int(rng.integers(0, 7))
        nodes["feat"][i] = int(rng.integers(0, n_features))
        nodes["mode"][i] = mode
        nodes["split"][i] = float(rng.integers(-2, 3))
        nodes["miss"][i] = int(rng.integers(0, 2))
        if mode == 6:
            members.extend(sorted({float(v) for v in rng.integers(-3, 4, 3)}) + [np.nan])
        nodes["tn"][i], nodes["tl"][i] = node(d + 1)
        nodes["fn"][i], nodes["fl"][i] = node(d + 1)
        return i, 0

    for _ in range(n_trees):
        roots.append(node(0)[0])
    return dict(
        nodes_featureids=nodes["feat"],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(nodes["mode"])],
                                       nodes["mode"]),
        nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [len(nodes["split"])],
                                        nodes["split"]),
        nodes_truenodeids=nodes["tn"], nodes_falsenodeids=nodes["fn"],
        nodes_trueleafs=nodes["tl"], nodes_falseleafs=nodes["fl"],
        nodes_missing_value_tracks_true=nodes["miss"],
        leaf_targetids=leaves["t"],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [len(leaves["w"])],
                                        leaves["w"]),
        tree_roots=roots, n_targets=n_targets,
        **({"membership_values": helper.make_tensor("mv", TensorProto.FLOAT, [len(members)],
                                                    members)} if members else {}))


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_forests_match_onnxruntime(agg, seed, tmp_path):
    rng = np.random.default_rng(seed)
    attrs = _forest(rng, 4, 5, 3)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml",
                            aggregate_function=agg, **attrs)
    x = rng.integers(-3, 4, (40, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    got, want = _run_both(_model(node, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [40, 4])]), {"x": x}, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dt", [np.float32])
def test_binarizer_matches_onnxruntime(dt, tmp_path):
    x = (np.arange(-6, 6).reshape(3, 4) * 0.7).astype(dt)
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.5)
    got, want = _run_both(_model(node, [helper.make_tensor_value_info(
        "x", helper.np_dtype_to_tensor_dtype(np.dtype(dt)), [3, 4])], 1,
        helper.np_dtype_to_tensor_dtype(np.dtype(dt))), {"x": x}, tmp_path)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape, idx", [((3, 4, 5), [4, 0, 0]), ((5,), [1, 3]),
                                        ((2, 6), [[5, 1]])])
def test_array_feature_extractor_matches_onnxruntime(shape, idx, tmp_path):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    i = np.array(idx, np.int64)
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    got, want = _run_both(_model(node, [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
        helper.make_tensor_value_info("i", TensorProto.INT64, list(i.shape))], 1),
        {"x": x, "i": i}, tmp_path)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("bad", [5, -1])
def test_array_feature_extractor_refuses_an_index_outside_the_features(bad):
    import pyarena
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    m = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5]),
                      helper.make_tensor_value_info("i", TensorProto.INT64, [2])], 1)
    with pytest.raises(pyarena.PyArenaError, match="outside"):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {"x": np.zeros((2, 5), np.float32), "i": np.array([0, bad], np.int64)})


@pytest.mark.parametrize("change, match", [
    (dict(nodes_truenodeids=[7]), "outside"),
    (dict(nodes_featureids=[9]), "feature"),
    (dict(tree_roots=[3]), "tree_roots"),
    (dict(nodes_falseleafs=[1, 0]), "length"),
])
def test_malformed_trees_are_refused(change, match):
    import pyarena
    attrs = dict(nodes_featureids=[0], nodes_modes=helper.make_tensor(
        "m", TensorProto.UINT8, [1], [0]), nodes_splits=helper.make_tensor(
        "s", TensorProto.FLOAT, [1], [0.5]), nodes_truenodeids=[0], nodes_falsenodeids=[1],
        nodes_trueleafs=[1], nodes_falseleafs=[1], leaf_targetids=[0, 0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0]),
        tree_roots=[0], n_targets=1)
    attrs.update(change)
    node = helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    m = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    with pytest.raises(pyarena.PyArenaError, match=match):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {"x": np.zeros((2, 3), np.float32)})
