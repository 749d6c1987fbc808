"""The fusion rewrite (pyarena.runtime.fusion): small ONNX models whose
Conv is followed by a batch norm, an affine or an activation chain; the
fused graph has fewer ops, matches onnxruntime, and is left alone where a
fused-away tensor is read elsewhere or is a graph output."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor, fuse

R = np.random.default_rng(7)


def rnd(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _conv(out="c"):
    return node("Conv", ["x", "w", "b"], [out], pads=[1, 1, 1, 1])


INITS = {"w": rnd(8, 8, 3, 3), "b": rnd(8)}
CHAINS = {
    "relu": ([node("Relu", ["c"], ["y"])], {}),
    "clip": ([node("Clip", ["c", "lo", "hi"], ["y"])],
             {"lo": np.array(-0.25, np.float32), "hi": np.array(0.5, np.float32)}),
    "sigmoid": ([node("Sigmoid", ["c"], ["y"])], {}),
    "hardsigmoid": ([node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4)], {}),
    "hardswish": ([node("HardSwish", ["c"], ["y"])], {}),
    "silu": ([node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["y"])], {}),
    "hardswish-as-hardsigmoid": ([node("HardSigmoid", ["c"], ["s"], alpha=1 / 6, beta=0.5),
                                  node("Mul", ["s", "c"], ["y"])], {}),
    "hardswish-decomposed": ([node("Add", ["c", "three"], ["a"]),
                              node("Clip", ["a", "zero", "six"], ["k"]),
                              node("Mul", ["c", "k"], ["m"]),
                              node("Div", ["m", "six"], ["y"])],
                             {"three": np.array(3, np.float32),
                              "zero": np.array(0, np.float32),
                              "six": np.array(6, np.float32)}),
    "batchnorm-relu": ([node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"],
                             epsilon=1e-3),
                        node("Relu", ["n"], ["y"])],
                       {"g": rnd(8), "be": rnd(8), "mu": rnd(8),
                        "var": rnd(8, lo=0.5, hi=2.0)}),
    "affine-silu": ([node("Mul", ["sc", "c"], ["m"]), node("Add", ["m", "sh"], ["a"]),
                     node("Sigmoid", ["a"], ["s"]), node("Mul", ["a", "s"], ["y"])],
                    {"sc": np.array([1.7], np.float32), "sh": rnd(1, 8, 1, 1)}),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_chain_is_fused_and_matches_onnxruntime(tmp_path, chain):
    nodes, extra = CHAINS[chain]
    path = tmp_path / f"{chain}.onnx"
    make_model([_conv()] + nodes, {"x": ([1, 8, 12, 10], np.float32)},
               {"y": (None, np.float32)}, dict(INITS, **extra), path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv"]          # one op left
    assert g.ops[0].outputs == ["y"]
    assert g.ops[0].attrs.get("activation") or "affine" in chain
    kept = load_model(str(path), native=False)               # as imported
    assert len(kept.ops) == 1 + len(nodes)
    x = rnd(1, 8, 12, 10, lo=-4, hi=4)
    ref = ort_run(path, {"x": x})["y"]
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ref, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(Executor(kept).run({"x": x})["y"], ref, rtol=1e-4,
                               atol=2e-5)


def test_nothing_is_fused_when_an_inner_tensor_is_read_elsewhere(tmp_path):
    # the conv output feeds the SiLU and a second output: the Sigmoid / Mul
    # stay, and so does the Relu whose input is a graph output
    path = tmp_path / "shared.onnx"
    make_model([_conv(), node("Sigmoid", ["c"], ["s"]), node("Mul", ["c", "s"], ["y"]),
                node("Neg", ["c"], ["z"]),
                node("Conv", ["y", "w", "b"], ["c2"], pads=[1, 1, 1, 1]),
                node("Relu", ["c2"], ["r"])],
               {"x": ([1, 8, 6, 6], np.float32)},
               {"z": (None, np.float32), "c2": (None, np.float32), "r": (None, np.float32)},
               INITS, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Sigmoid", "Mul", "Neg", "Conv", "Relu"]
    assert fuse(g) == 0
    x = rnd(1, 8, 6, 6)
    out = Executor(g).run({"x": x})
    ref = ort_run(path, {"x": x})
    for k in ("z", "c2", "r"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5)


def test_only_the_first_activation_is_fused(tmp_path):
    """Conv -> Relu -> Sigmoid: the Relu goes into the conv, the Sigmoid
    stays an op of its own (a conv holds one activation)."""
    path = tmp_path / "two.onnx"
    make_model([_conv(), node("Relu", ["c"], ["r"]), node("Sigmoid", ["r"], ["y"])],
               {"x": ([1, 8, 6, 6], np.float32)}, {"y": (None, np.float32)}, INITS, path=path)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["Conv", "Sigmoid"]
    assert g.ops[0].attrs["activation"].upper() == "RELU"
    x = rnd(1, 8, 6, 6, lo=-4, hi=4)
    np.testing.assert_allclose(Executor(g).run({"x": x})["y"], ort_run(path, {"x": x})["y"],
                               rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("chain", ["sigmoid", "silu", "hardswish"])
def test_saturated_activations_stay_finite(tmp_path, chain):
    """Conv outputs in the hundreds: the native exp clamps (no overflow to
    garbage), so sigmoid is exactly 0 or 1 where onnxruntime's is."""
    nodes, extra = CHAINS[chain]
    path = tmp_path / f"big-{chain}.onnx"
    make_model([_conv()] + nodes, {"x": ([1, 8, 5, 5], np.float32)}, {"y": (None, np.float32)},
               dict(INITS, w=INITS["w"] * 400, **extra), path=path)
    g = load_model(str(path))
    x = rnd(1, 8, 5, 5, lo=-4, hi=4)
    ours = Executor(g).run({"x": x})["y"]
    assert np.isfinite(ours).all()
    np.testing.assert_allclose(ours, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-3)
