"""A MatMul by constant weights on one row -- a decode step's linear
layer -- runs the NHWC SGEMM's one-pixel walk (csrc/kernels/gemm_nhwc.c):
against onnxruntime and NumPy for output widths around its groups of four
16-channel blocks (a short last group, a last block of 1-15 channels),
with the bias and the GELU or SiLU the linear-layer rewrite fuses."""
import math

import numpy as np
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor


def _model(path, n_in, n_out, bias, act):
    rng = np.random.default_rng(n_in * 100 + n_out)
    inits = {"w": (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(np.float32),
             "b": rng.standard_normal(n_out).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h0" if bias or act else "y"])]
    last = "h0"
    if bias:
        nodes.append(helper.make_node("Add", ["h0", "b"], ["h1" if act else "y"]))
        last = "h1"
    if act == "gelu":
        nodes.append(helper.make_node("Gelu", [last], ["y"]))
    elif act == "silu":
        nodes += [helper.make_node("Sigmoid", [last], ["s"]),
                  helper.make_node("Mul", [last, "s"], ["y"])]
    make_model(nodes, {"x": ([1, 1, n_in], np.float32)}, {"y": (None, np.float32)}, inits,
               opset=20, path=path)
    return inits


@settings(max_examples=30, deadline=None)
@given(n_in=st.integers(1, 70), n_out=st.sampled_from([1, 7, 16, 17, 40, 64, 65, 100, 129]),
       bias=st.booleans(), act=st.sampled_from([None, "gelu", "silu"]),
       seed=st.integers(0, 99))
def test_one_row_matches_onnxruntime(tmp_path_factory, n_in, n_out, bias, act, seed):
    path = tmp_path_factory.mktemp("row") / "m.onnx"
    inits = _model(path, n_in, n_out, bias, act)
    x = np.random.default_rng(seed).standard_normal((1, 1, n_in)).astype(np.float32)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == ["MatMul"]
    ex = Executor(g)
    assert ex.kernels[0].packed is not None         # the packed SGEMM's path
    got = ex.run({"x": x})["y"]
    np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-5, atol=2e-5)
    want = x.astype(np.float64) @ inits["w"] + (inits["b"] if bias else 0)
    if act == "gelu":
        want = 0.5 * want * (1 + np.vectorize(math.erf)(want / math.sqrt(2)))
    elif act == "silu":
        want = want / (1 + np.exp(-want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
