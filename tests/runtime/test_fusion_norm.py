"""A BatchNormalization no Conv absorbs (pyarena.runtime.fusion_norm): a
pre-activation block (DenseNet's Concat -> BatchNormalization -> Mul ->
Add -> Relu -> Conv) becomes one BatchNormalization with the affine in its
parameters and the activation fused, run natively in NCHW and NHWC; its
outputs match the unfused graph (NumPy paths) and onnxruntime, and nothing
is fused where a tensor inside the chain is read elsewhere or would grow."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor

R = np.random.default_rng(11)
C = 12


def rnd(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


BN = {"g": rnd(C, lo=0.5, hi=1.5), "be": rnd(C), "mu": rnd(C), "var": rnd(C, lo=0.5, hi=2.0)}


def _block(tail, extra, path, x_shape=(1, 8, 9, 7)):
    """x, z -> Concat -> BatchNormalization -> ``tail`` (ending in "a") -> Conv 1x1."""
    nodes = [node("Concat", ["x", "z"], ["cat"], axis=1),
             node("BatchNormalization", ["cat", "g", "be", "mu", "var"], ["n"], epsilon=1e-3)]
    nodes += tail + [node("Conv", ["a", "w"], ["y"])]
    inits = dict(BN, w=rnd(16, C, 1, 1), **extra)
    n, _, h, w = x_shape
    make_model(nodes, {"x": ([n, 8, h, w], np.float32), "z": ([n, C - 8, h, w], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)


TAILS = {
    "mul-add-relu": ([node("Mul", ["n", "s"], ["m"]), node("Add", ["m", "t"], ["b"]),
                      node("Relu", ["b"], ["a"])],
                     {"s": rnd(1, C, 1, 1), "t": rnd(1, C, 1, 1)}),
    "relu": ([node("Relu", ["n"], ["a"])], {}),
    "scalar-mul-clip": ([node("Mul", ["k", "n"], ["m"]), node("Clip", ["m", "lo", "hi"], ["a"])],
                        {"k": np.array(1.5, np.float32), "lo": np.array(-0.5, np.float32),
                         "hi": np.array(0.75, np.float32)}),
    "add-silu": ([node("Add", ["n", "t"], ["b"]), node("Sigmoid", ["b"], ["q"]),
                  node("Mul", ["b", "q"], ["a"])], {"t": rnd(C, 1, 1)}),
}


def _feeds(shape=(1, 8, 9, 7)):
    n, _, h, w = shape
    return {"x": rnd(n, 8, h, w, lo=-3, hi=3), "z": rnd(n, C - 8, h, w, lo=-3, hi=3)}


@pytest.mark.parametrize("layout", ["keep", "nhwc"])
@pytest.mark.parametrize("tail", list(TAILS))
def test_block_is_one_native_op_and_matches(tmp_path, tail, layout):
    nodes, extra = TAILS[tail]
    path = tmp_path / f"{tail}.onnx"
    _block(nodes, extra, path)
    g = load_model(str(path), layout=layout)
    bn = [op for op in g.ops if op.op_type == "BatchNormalization"]
    assert len(bn) == 1 and bn[0].outputs == ["a"]          # the chain's last tensor
    assert not any(op.op_type in ("Mul", "Add", "Relu", "Clip", "Sigmoid") for op in g.ops)
    assert (bn[0].attrs.get("activation") is not None) == (tail != "mul-add")
    assert bn[0].attrs.get("layout", "NCHW") == ("NHWC" if layout == "nhwc" else "NCHW")
    kept = load_model(str(path), native=False)               # as imported, NumPy paths
    assert len(kept.ops) == 3 + len(nodes)
    feeds = _feeds()
    ex = Executor(g)
    assert ex.kernels[g.ops.index(bn[0])].native is not None
    ours = ex.run(feeds)["y"]
    ref = Executor(kept).run(feeds)["y"]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours, ort_run(path, feeds)["y"], rtol=1e-4, atol=2e-5)


def test_batch_of_two_nhwc_and_nchw_agree(tmp_path):
    nodes, extra = TAILS["mul-add-relu"]
    path = tmp_path / "b2.onnx"
    _block(nodes, extra, path, x_shape=(2, 8, 5, 6))
    feeds = _feeds((2, 8, 5, 6))
    a = Executor(load_model(str(path), layout="nhwc")).run(feeds)["y"]
    b = Executor(load_model(str(path), layout="keep")).run(feeds)["y"]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a, ort_run(path, feeds)["y"], rtol=1e-4, atol=2e-5)


def test_nothing_folds_where_a_tensor_is_read_twice_or_would_grow(tmp_path):
    # the normalised tensor is also a graph output: the Mul and Relu stay;
    # a Mul by a full-size constant (not per channel) stays too
    path = tmp_path / "shared.onnx"
    make_model([node("BatchNormalization", ["x", "g", "be", "mu", "var"], ["n"]),
                node("Mul", ["n", "s"], ["m"]), node("Relu", ["m"], ["y"]),
                node("BatchNormalization", ["x", "g", "be", "mu", "var"], ["n2"]),
                node("Mul", ["n2", "big"], ["y2"])],
               {"x": ([1, C, 4, 5], np.float32)},
               {"n": (None, np.float32), "y": (None, np.float32), "y2": (None, np.float32)},
               dict(BN, s=rnd(1, C, 1, 1), big=rnd(1, C, 4, 5)), path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["BatchNormalization", "Mul", "Relu",
                                            "BatchNormalization", "Mul"]
    assert not any(op.attrs.get("activation") for op in g.ops)
    feeds = {"x": rnd(1, C, 4, 5, lo=-3, hi=3)}
    out, ref = Executor(g).run(feeds), ort_run(path, feeds)
    for k in ("n", "y", "y2"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5)


def test_training_mode_stays_nchw(tmp_path):
    """The NHWC pass converts inference normalisations only."""
    from pyarena.runtime import nhwc
    path = tmp_path / "train.onnx"
    make_model([node("Conv", ["x", "w"], ["c"]),
                node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["y"],
                     training_mode=1)],
               {"x": ([2, 3, 4, 4], np.float32)}, {"y": (None, np.float32)},
               dict(BN, w=rnd(C, 3, 1, 1)), opset=15, path=path)
    g = load_model(str(path), layout="keep")
    P = nhwc._Pass(g)
    bn = next(op for op in g.ops if op.op_type == "BatchNormalization")
    assert not nhwc.convertible(P, bn)
    bn.attrs["training_mode"] = 0
    assert nhwc.convertible(P, bn)
