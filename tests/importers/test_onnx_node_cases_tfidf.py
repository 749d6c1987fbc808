"""TfIdfVectorizer (kernels/tfidf.py): the ONNX node cases with the tokens
fed at run time, random pools, skips, n-gram lengths and modes against
onnxruntime, and malformed pools refused with a pyarena error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_tfidfvectorizer\w*", ("tfidfvectorizer",))


def test_the_forms_are_covered():
    assert len(CASES) == 7 and {"test_tfidfvectorizer_tf_batch_onlybigrams_skip5",
                                "test_tfidfvectorizer_tf_uniandbigrams_skip5",
                                "test_tfidfvectorizer_tf_onlybigrams_levelempty"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _model(x_shape, dt=TensorProto.INT64, **attrs):
    g = helper.make_graph(
        [helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], "t",
        [helper.make_tensor_value_info("x", dt, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])


def _random_attrs(rng, mode, lo, hi, skip, weighted):
    pool, counts, n_grams = [], [], 0
    for n in range(1, 4):
        counts.append(len(pool))
        grams = {tuple(rng.integers(0, 6, n)) for _ in range(5)}
        for gram in sorted(grams):
            pool.extend(int(t) for t in gram)
            n_grams += 1
    index = rng.permutation(n_grams + 2)[:n_grams]
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip,
                 ngram_counts=counts, ngram_indexes=index.tolist(), pool_int64s=pool)
    if weighted:
        attrs["weights"] = rng.uniform(0.5, 2, n_grams).round(3).tolist()
    return attrs


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("lo, hi, skip", [(1, 1, 0), (1, 3, 2), (2, 2, 0), (2, 3, 4), (3, 3, 1)])
@pytest.mark.parametrize("shape", [(3, 12), (17,)])
def test_random_pools_match_onnxruntime(mode, lo, hi, skip, shape, tmp_path):
    import pyarena
    rng = np.random.default_rng(lo * 10 + hi + skip)
    attrs = _random_attrs(rng, mode, lo, hi, skip, weighted=mode != "TF")
    path = tmp_path / "t.onnx"
    onnx.save(_model(shape, **attrs), str(path))
    x = rng.integers(0, 7, shape).astype(np.int64)
    got = pyarena.InferenceSession(str(path)).run(None, {"x": x})[0]
    want = list(ort_run(path, {"x": x}).values())[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_int32_tokens_and_a_row_shorter_than_the_n_grams(tmp_path):
    import pyarena
    attrs = dict(mode="TF", min_gram_length=2, max_gram_length=3, max_skip_count=3,
                 ngram_counts=[0, 2, 4], ngram_indexes=[0, 1, 2, 3],
                 pool_int64s=[1, 2, 3, 4, 1, 2, 3])
    for shape in [(2, 2), (2, 1)]:
        path = tmp_path / "t.onnx"
        onnx.save(_model(shape, TensorProto.INT32, **attrs), str(path))
        x = np.array([[1, 2], [3, 4]], np.int32)[:, :shape[1]]
        got = pyarena.InferenceSession(str(path)).run(None, {"x": x})[0]
        want = list(ort_run(path, {"x": x}).values())[0]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs, match", [
    (dict(ngram_counts=[0, 3], ngram_indexes=[0, 1, 2], pool_int64s=[1, 2, 3, 4, 5, 6]),
     "multiple of 2"),
    (dict(ngram_counts=[0, 2], ngram_indexes=[0, 1, 2, 3], pool_int64s=[1, 2, 3, 4]),
     "ngram_indexes has"),
    (dict(ngram_counts=[0, 2], ngram_indexes=[0, -1, 2], pool_int64s=[1, 2, 3, 4]),
     "reach outside"),
    (dict(ngram_counts=[2, 0], ngram_indexes=[0, 1], pool_int64s=[1, 2, 3, 4]), "ascending"),
    (dict(ngram_counts=[0, 9], ngram_indexes=[0, 1], pool_int64s=[1, 2, 3, 4]), "ascending"),
    (dict(ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[1, 2], weights=[1.0]),
     "weights"),
    (dict(ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[1, 2], mode="BM25"), "mode"),
    (dict(ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[1, 2], min_gram_length=2,
          max_gram_length=1), "min_gram_length"),
])
def test_malformed_pools_are_refused(attrs, match):
    import pyarena
    attrs = dict(dict(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0),
                 **attrs)
    m = _model((2, 4), **attrs)
    with pytest.raises(pyarena.PyArenaError, match=match):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {"x": np.zeros((2, 4), np.int64)})


def test_a_wide_token_range_and_a_large_vocabulary_match_onnxruntime(tmp_path):
    """Tokens spread over 10**12 and 300 of them in the pool: the lookups
    by ``searchsorted``, not the dense tables."""
    import pyarena
    rng = np.random.default_rng(7)
    vocab = rng.choice(10 ** 12, 300, replace=False)
    uni = vocab[:280]
    bi = rng.choice(vocab, (40, 2))
    bi = np.unique(bi, axis=0)
    pool = np.concatenate([uni, bi.reshape(-1)])
    n_grams = uni.size + bi.shape[0]
    attrs = dict(mode="TFIDF", min_gram_length=1, max_gram_length=2, max_skip_count=2,
                 ngram_counts=[0, int(uni.size)], ngram_indexes=list(range(n_grams)),
                 pool_int64s=pool.tolist(), weights=rng.uniform(0.5, 2, n_grams).tolist())
    path = tmp_path / "t.onnx"
    onnx.save(_model((4, 50), **attrs), str(path))
    x = np.where(rng.random((4, 50)) < 0.8, rng.choice(vocab, (4, 50)),
                 rng.integers(0, 10 ** 12, (4, 50))).astype(np.int64)
    x[:, 10:12] = bi[0]                     # a bigram of the pool, surely
    got = pyarena.InferenceSession(str(path)).run(None, {"x": x})[0]
    want = list(ort_run(path, {"x": x}).values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.any()
