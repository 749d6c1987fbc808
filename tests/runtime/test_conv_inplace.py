"""A convolution's fused residual planned in place (kernels/conv.py:
residual_in_place): where the NHWC packed SGEMM runs the op, its output
takes the residual's memory; the results are those of the plan without
in-place reuse, bit for bit, and onnxruntime's; NCHW and the NumPy paths
keep their own buffer (and the NumPy path copes with one planned in place
by a custom rule)."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.planning import PlanOptions, validate
from pyarena.runtime import Executor
from pyarena.runtime.kernels.conv import residual_in_place

R = np.random.default_rng(11)


def rnd(*shape):
    return R.uniform(-1, 1, shape).astype(np.float32)


def _model(path, cin=12, cout=40, hw=7, pad=0):
    """x -> Conv 1x1 -> Neg -> r; x -> Conv 1x1 (+ r, zero-padded by pad
    channels) -> Relu -> y: the second Conv's residual is r."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["q"]), n("Neg", ["q"], ["r1"]),
             n("Conv", ["x", "w", "b"], ["c"])]
    inits = {"w1": rnd(cout - pad, cin, 1, 1), "w": rnd(cout, cin, 1, 1), "b": rnd(cout)}
    r = "r1"
    if pad:
        nodes.append(n("Pad", ["r1", "pads"], ["rp"]))
        inits["pads"] = np.array([0, 0, 0, 0, 0, pad, 0, 0], np.int64)
        r = "rp"
    nodes += [n("Add", [r, "c"], ["a"]), n("Relu", ["a"], ["y"])]
    make_model(nodes, {"x": ([2, cin, hw, hw], np.float32)}, {"y": (None, np.float32)},
               inits, path=str(path))
    return str(path)


def _residual_conv(g):
    return next(op for op in g.ops if op.op_type == "Conv" and len(op.inputs) > 3)


def _shares(ex, op):
    """True when op's output lies where its residual does in the plan."""
    offs = ex.plan.offsets
    return offs[op.outputs[0]] == offs[op.inputs[3]]


@pytest.mark.parametrize("hw", [7, 13, 14], ids=str)
def test_nhwc_residual_is_overwritten_in_place_with_the_same_bits(tmp_path, hw):
    path = _model(tmp_path / "m.onnx", hw=hw)
    g = load_model(path, layout="nhwc")
    op = _residual_conv(g)
    assert op.attrs["layout"] == "NHWC" and residual_in_place(op, g) == [(3, "inplace")]
    ex = Executor(g)
    assert ex.kernels[g.ops.index(op)].path == "native-gemm" and _shares(ex, op)
    assert validate(ex.plan, g) == []       # the checker takes the rule's input 3
    kept = Executor(load_model(path, layout="nhwc"),
                    plan_options=PlanOptions(inplace=False))
    assert not _shares(kept, _residual_conv(kept.graph))
    x = rnd(2, 12, hw, hw)
    ours = ex.run({"x": x})["y"]
    np.testing.assert_array_equal(ours, kept.run({"x": x})["y"])
    np.testing.assert_allclose(ours, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=2e-5)


def test_nchw_a_numpy_path_and_a_padded_residual_keep_their_own_buffer(tmp_path):
    path = _model(tmp_path / "m.onnx")
    g = load_model(path, layout="keep")
    op = _residual_conv(g)
    assert residual_in_place(op, g) == [] and not _shares(Executor(g), op)
    g = load_model(path, layout="nhwc")
    op = _residual_conv(g)
    op.notes.kernel_path = "numpy"
    assert residual_in_place(op, g) == [] and not _shares(Executor(g), op)
    g = load_model(_model(tmp_path / "p.onnx", pad=8), layout="nhwc")
    op = _residual_conv(g)
    assert op.attrs["residual_channels"] == 32 and residual_in_place(op, g) == []
    g = load_model(path, layout="nhwc", native=False)
    assert all(residual_in_place(o, g) == [] for o in g.ops if o.op_type == "Conv")


def test_the_numpy_path_planned_in_place_by_a_custom_rule_reads_the_residual_first(tmp_path):
    """A user's rule may put the output on the residual where BLAS runs
    the product: the path copies the residual before writing the output."""
    path = _model(tmp_path / "m.onnx")
    x = rnd(2, 12, 7, 7)
    want = ort_run(path, {"x": x})["y"]
    for layout in ("nhwc", "keep"):
        g = load_model(path, layout=layout)
        op = _residual_conv(g)
        op.notes.kernel_path = "numpy"
        ex = Executor(g, plan_options=PlanOptions(rules={
            "Conv": lambda o, gr: [(3, "inplace")] if len(o.inputs) > 3 else []}))
        assert ex.kernels[g.ops.index(op)].path == "1x1" and _shares(ex, op)
        np.testing.assert_allclose(ex.run({"x": x})["y"], want, rtol=1e-4, atol=2e-5)
