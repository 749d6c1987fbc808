"""Each weight held once: an ONNX model's weights stay views of the file
until the executor places them; constants computed at load (fused batch
norms) live in the graph's weights arena, which the executor shares; a
kernel's copy of a weight replaces the graph's array instead of adding to
it."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyarena.graph import Graph
from pyarena.importers import load_model
from pyarena.memory import Arena
from pyarena.memory.mapped import is_mapped
from pyarena.runtime import Executor, fuse, random_feeds
from pyarena.runtime.models import resnet

BIG = 4096


def _conv_bn_model(path, c=32, blocks=3, seed=0):
    """x -> (Conv -> BatchNormalization -> Relu) x blocks, weights >= 36 KiB."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        w = rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.1
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        for k, v in (("s", 1 + 0.1 * rng.standard_normal(c)), ("b", rng.standard_normal(c)),
                     ("m", rng.standard_normal(c)), ("v", rng.uniform(0.5, 2, c))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), f"{k}{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization",
                                   [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"])]
        x = f"r{i}"
    g = helper.make_graph(nodes, "cbr", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, 12, 12])], [helper.make_tensor_value_info(
            x, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return x


def _big_constants(g):
    return [t for t in g.tensors.values()
            if t.role == "constant" and np.asarray(t.data).nbytes > BIG]


@pytest.mark.parametrize("native", [True, False])
def test_onnx_weights_are_file_views_or_in_the_graph_arena(tmp_path, native):
    path = str(tmp_path / "m.onnx")
    _conv_bn_model(path)
    g = load_model(path, native=native)
    big = _big_constants(g)
    assert big
    for t in big:
        d = np.asarray(t.data)
        if native:     # batch norms folded into the weights: computed at load
            assert g.weights is not None and g.weights.owns(d), t.name
        else:          # as stored in the file
            assert is_mapped(d), t.name
        assert not d.flags.writeable


@pytest.mark.parametrize("native", [True, False])
def test_after_the_executor_each_weight_lives_in_its_arena(tmp_path, native):
    path = str(tmp_path / "m.onnx")
    out = _conv_bn_model(path)
    g = load_model(path, native=native)
    ref = Executor(load_model(path, native=native), weights=Arena()).run(
        random_feeds(g, seed=1))[out].copy()
    ex = Executor(g)
    for t in _big_constants(g):
        assert ex.weights.owns(np.asarray(t.data)), t.name
    big = sum(np.asarray(t.data).nbytes for t in _big_constants(g))
    assert ex.weights_bytes < 1.3 * big          # not the graph's copy + the kernels'
    np.testing.assert_array_equal(ex.run(random_feeds(g, seed=1))[out], ref)


def test_built_in_model_weights_are_held_once():
    g = resnet(18, resolution=32)
    fuse(g)
    total = sum(np.asarray(t.data).nbytes for t in g.tensors.values() if t.role == "constant")
    ex = Executor(g)
    # all but the 3-channel stem's, which the few-input-channel kernel
    # packs into a layout of its own at setup (the graph keeps its array)
    kept = [t for t in _big_constants(g) if t.name != "conv_1.weight"]
    assert len(kept) == len(_big_constants(g)) - 1
    for t in kept:
        assert ex.weights.owns(np.asarray(t.data)), t.name
    assert ex.weights_bytes < 1.1 * total


def test_a_second_executor_on_the_same_graph_gives_the_same_outputs(tmp_path):
    path = str(tmp_path / "m.onnx")
    out = _conv_bn_model(path, seed=4)
    g = load_model(path)
    feeds = random_feeds(g, seed=2)
    a = Executor(g).run(feeds)[out].copy()
    b = Executor(g, weights=Arena()).run(feeds)[out].copy()
    c = Executor(g).run(feeds)[out]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_keep_constant_puts_values_once_in_the_graph_arena():
    g = Graph("g")
    assert g.weights is None
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    k = g.keep_constant(v)
    assert g.weights is not None and g.weights.owns(k) and not k.flags.writeable
    np.testing.assert_array_equal(k, v)
    used = g.weights.stats().used
    again = g.keep_constant(k)
    assert g.weights.stats().used == used and np.shares_memory(again, k)
    buf = g.constant_buffer((5,), np.int8)
    assert buf.flags.writeable and g.weights.owns(buf)
    assert g.keep_constant(np.zeros(0)).size == 0


def test_folded_batch_norm_weights_are_exact(tmp_path):
    path = str(tmp_path / "m.onnx")
    _conv_bn_model(path, c=128, blocks=1, seed=7)     # 2 blocks of output channels
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    s = init["s0"] / np.sqrt(init["v0"] + 1e-5)
    want = (init["w0"] * s[:, None, None, None]).astype(np.float32)
    g = load_model(path)
    conv = next(op for op in g.ops if op.op_type == "Conv")
    np.testing.assert_array_equal(np.asarray(g.tensors[conv.inputs[1]].data), want)
