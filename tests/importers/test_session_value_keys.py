"""A fed value that decides tensor shapes -- a Resize's scales, a Reshape
target, a Tile's repeats, a ConstantOfShape's shape, a TopK's K, a Pad's
pads -- keys the session's signature: the model is imported with the
value fixed and every tensor is planned in the arena (no pool tensor),
and each call gives onnxruntime's result.  A float ``scales`` with no
declared output shape used to be refused ("cannot size tensor").  Past
``MAX_SPECIALISED`` distinct values of an input whose tensors the pool can
size, the session stops importing per value and runs the unspecialised
graph: both paths are compared on the same values."""
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from helpers.model_zoo import ort_run
from pyarena import InferenceSession
from pyarena.importers import session_keys
from pyarena.importers.onnx_dynamic import VALUE_MAX_ELEMENTS
from pyarena.importers.session_keys import MAX_SPECIALISED


def _vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def _save(path, nodes, ins, inits=()):
    """``nodes`` ending in output ``y``, whose shape is not declared."""
    g = h.make_graph(nodes, "g", ins, [_vi("y", None)], list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _relu(op, ins, **attrs):
    return [h.make_node(op, ins, ["r"], **attrs), h.make_node("Relu", ["r"], ["y"])]


RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((1, 2, 6, 8)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)

#: name -> (nodes, inputs, the deciding input, [values it is fed], other feeds)
MODELS = {
    "resize_scales": (_relu("Resize", ["x", "", "scales"], mode="linear"),
                      [_vi("x", [1, 2, 6, 8]), _vi("scales", [4])], "scales",
                      [np.array(s, np.float32) for s in
                       ([1, 1, 2, 2], [1, 1, 0.5, 0.5], [1, 1, 1.5, 0.75], [1, 1, 2, 2])],
                      {"x": X4}),
    "resize_sizes": (_relu("Resize", ["x", "", "", "sizes"], mode="nearest"),
                     [_vi("x", [1, 2, 6, 8]), _vi("sizes", [4], T.INT64)], "sizes",
                     [np.array(s, np.int64) for s in ([1, 2, 3, 4], [1, 2, 12, 5])],
                     {"x": X4}),
    "reshape": (_relu("Reshape", ["x", "shape"]),
                [_vi("x", [2, 3, 4]), _vi("shape", [3], T.INT64)], "shape",
                [np.array(s, np.int64) for s in ([4, 3, 2], [6, -1, 1], [0, 12, 1], [4, 3, 2])],
                {"x": X3}),
    "tile": (_relu("Tile", ["x", "rep"]),
             [_vi("x", [2, 3, 4]), _vi("rep", [3], T.INT64)], "rep",
             [np.array(s, np.int64) for s in ([1, 2, 3], [3, 1, 1])], {"x": X3}),
    "constant_of_shape": ([h.make_node("ConstantOfShape", ["shape"], ["r"],
                                       value=h.make_tensor("v", T.FLOAT, [1], [1.5])),
                           h.make_node("Add", ["r", "b"], ["y"])],
                          [_vi("shape", [2], T.INT64), _vi("b", [1])], "shape",
                          [np.array(s, np.int64) for s in ([3, 5], [7, 1])],
                          {"b": np.array([0.25], np.float32)}),
    "topk": ([h.make_node("TopK", ["x", "k"], ["r", "i"], axis=-1),
              h.make_node("Relu", ["r"], ["y"])],
             [_vi("x", [2, 3, 4]), _vi("k", [1], T.INT64)], "k",
             [np.array([s], np.int64) for s in (1, 3, 2)], {"x": X3}),
    "pad": (_relu("Pad", ["x", "pads"], mode="reflect"),
            [_vi("x", [2, 3, 4]), _vi("pads", [6], T.INT64)], "pads",
            [np.array(s, np.int64) for s in ([0, 1, 2, 0, 1, 1], [1, 0, 0, 1, 2, 3])],
            {"x": X3}),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("value_keys")
    return {name: _save(d / f"{name}.onnx", nodes, ins)
            for name, (nodes, ins, *_) in MODELS.items()}


def _planned(sess):
    """Whether the calling thread's last run planned every tensor."""
    g = sess._last.graph
    return not g.pool_ops() and not any(t.dynamic for t in g.tensors.values()) \
        and sess.memory_info()["pool_bytes"] == 0


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_value_is_planned_and_matches_onnxruntime(paths, name):
    _, _, deciding, values, other = MODELS[name]
    sess = InferenceSession(paths[name])
    for i, v in enumerate(values):
        feeds = dict(other, **{deciding: v})
        got = sess.run(None, feeds)[0]
        want = ort_run(paths[name], feeds)["y"]
        assert got.shape == want.shape, (name, v)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {v}")
        assert _planned(sess), (name, v)
    assert deciding in sess._keys.keyed
    distinct = len({v.tobytes() for v in values})
    assert sess.memory_info()["plans"] == distinct     # a value seen again: its plan


def test_a_shape_read_through_shape_is_not_keyed(tmp_path):
    """Reshape(x, Shape(z)): z's shape decides, not its value (z is small,
    float and fed: its value must not key the signature)."""
    path = _save(tmp_path / "m.onnx", [h.make_node("Shape", ["z"], ["s"]),
                                       h.make_node("Reshape", ["x", "s"], ["y"])],
                 [_vi("x", [2, 3, 4]), _vi("z", [4, 3, 2])])
    sess = InferenceSession(path)
    for seed in range(3):
        z = np.full((4, 3, 2), seed, np.float32)
        assert sess.run(None, {"x": X3, "z": z})[0].shape == (4, 3, 2)
    assert sess._keys.keyed == frozenset()
    assert sess.memory_info()["plans"] == 1


def test_a_value_sized_by_data_is_not_traced_through_shape(tmp_path):
    """ConstantOfShape(Shape(NonZero(z))): the shape lacked is NonZero's,
    which only the data tells; tracing stops at the Shape, so z (small,
    fed) is not keyed and the pool sizes the tensors for every z."""
    nodes = [h.make_node("NonZero", ["z"], ["nz"]), h.make_node("Shape", ["nz"], ["s"]),
             h.make_node("ConstantOfShape", ["s"], ["y"],
                         value=h.make_tensor("v", T.FLOAT, [1], [2.0]))]
    path = _save(tmp_path / "nz.onnx", nodes, [_vi("z", [2, 3])])
    sess = InferenceSession(path)
    for z in ([[1, 0, 2], [0, 0, 3]], [[1, 1, 1], [1, 0, 1]], [[0, 0, 0], [0, 0, 0]]):
        z = np.array(z, np.float32)
        got = sess.run(None, {"z": z})[0]
        np.testing.assert_array_equal(got, ort_run(path, {"z": z})["y"])
    assert sess._keys.keyed == frozenset()
    assert sess.memory_info()["plans"] == 1


def test_past_the_cap_the_pool_path_gives_the_same_results(tmp_path):
    """An input the pool can size (a Tile's repeats) keys the signature for
    MAX_SPECIALISED distinct values, then no more: later values run the
    unspecialised graph (pool tensors), and values seen before give the
    same bits on both paths."""
    path = _save(tmp_path / "tile.onnx", *MODELS["tile"][:2])
    sess = InferenceSession(path)
    reps = [np.array([1 + i % 3, 1 + i // 3, 1], np.int64) for i in range(MAX_SPECIALISED + 3)]
    first = {}
    for i, r in enumerate(reps):
        got = sess.run(None, {"x": X3, "rep": r})[0]
        np.testing.assert_array_equal(got, np.maximum(np.tile(X3, r), 0))
        if i < MAX_SPECIALISED:
            assert _planned(sess), i
            first[i] = got
    assert "rep" not in sess._keys.keyed
    assert not _planned(sess)               # the last values: sized from the pool
    for i, want in first.items():           # the same values on the pool path
        np.testing.assert_array_equal(sess.run(None, {"x": X3, "rep": reps[i]})[0], want)


def test_a_required_value_is_never_given_up(tmp_path):
    """Float scales with no declared output shape cannot be sized at run
    time: the session keys them whatever the number of values."""
    nodes, ins, *_ = MODELS["resize_scales"]
    path = _save(tmp_path / "r.onnx", nodes, ins)
    sess = InferenceSession(path)
    for i in range(MAX_SPECIALISED + 2):
        s = np.array([1, 1, 1 + (i % 5) / 4, 1 + (i // 5) / 4], np.float32)
        got = sess.run(None, {"x": X4, "scales": s})[0]
        np.testing.assert_allclose(got, ort_run(path, {"x": X4, "scales": s})["y"],
                                   rtol=1e-5, atol=1e-6)
    assert "scales" in sess._keys.keyed and "scales" in sess._keys.required


def test_giving_up_an_optional_input_keeps_the_required_one(tmp_path):
    """Resize by float scales (required) then Tile by fed repeats
    (optional): past the cap the repeats stop being keyed, the scales do
    not, and every call still gives onnxruntime's result."""
    nodes = [h.make_node("Resize", ["x", "", "scales"], ["r"], mode="nearest"),
             h.make_node("Tile", ["r", "rep"], ["y"])]
    path = _save(tmp_path / "both.onnx", nodes,
                 [_vi("x", [1, 2, 6, 8]), _vi("scales", [4]), _vi("rep", [4], T.INT64)])
    sess = InferenceSession(path)
    scales = np.array([1, 1, 0.5, 2], np.float32)
    for i in range(MAX_SPECIALISED + 3):
        feeds = {"x": X4, "scales": scales, "rep": np.array([1, 1, 1 + i % 4, 1 + i // 4])}
        np.testing.assert_array_equal(sess.run(None, feeds)[0], ort_run(path, feeds)["y"])
    assert sess._keys.keyed == {"scales"}


def test_a_keyed_input_that_is_also_an_output(tmp_path):
    """The fed Reshape target is also a graph output: fixed as a constant,
    it is returned as fed (and not fed to the executor as an input)."""
    g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["y"])], "g",
                     [_vi("x", [2, 3, 4]), _vi("s", [3], T.INT64)],
                     [_vi("y", None), _vi("s", [3], T.INT64)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "out.onnx"))
    sess = InferenceSession(str(tmp_path / "out.onnx"))
    for target in ([4, 3, 2], [2, 12, 1]):
        s = np.array(target, np.int64)
        y, s_out = sess.run(None, {"x": X3, "s": s})
        np.testing.assert_array_equal(y, X3.reshape(target))
        np.testing.assert_array_equal(s_out, s)
    assert "s" in sess._keys.keyed


def test_threads_with_different_values(paths):
    """Two threads feeding different targets to one session, at once."""
    sess = InferenceSession(paths["reshape"])
    shapes = [np.array([4, 3, 2], np.int64), np.array([6, 4, 1], np.int64)]
    errors = []

    def work(s):
        try:
            for _ in range(20):
                got = sess.run(None, {"x": X3, "shape": s})[0]
                np.testing.assert_array_equal(got, np.maximum(X3.reshape(s), 0))
        except Exception as exc:     # reported by the main thread
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(s,)) for s in shapes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_value_keys_of_small_and_large_feeds():
    key = session_keys._value_key
    small = np.arange(VALUE_MAX_ELEMENTS, dtype=np.int64)
    assert key(small) == ("<i8", small.tobytes())
    np.testing.assert_array_equal(session_keys.value_of(key(small), small.shape), small)
    assert key(np.arange(VALUE_MAX_ELEMENTS + 1)) is None     # keyed by its shape only
    assert key(np.array(16000)) == 16000
    # equal values of other dtypes are other signatures
    assert key(np.array([1, 2], np.int32)) != key(np.array([1, 2], np.int64))


def test_a_bad_value_is_a_clear_error(paths):
    """A Reshape target that does not fit the data: a pyarena error naming
    the problem, on the keyed path as on any other."""
    import pyarena
    sess = InferenceSession(paths["reshape"])
    with pytest.raises(pyarena.PyArenaError):
        sess.run(None, {"x": X3, "shape": np.array([5, 5, 5], np.int64)})
    got = sess.run(None, {"x": X3, "shape": np.array([4, 3, 2], np.int64)})[0]
    assert got.shape == (4, 3, 2)       # the session still works
