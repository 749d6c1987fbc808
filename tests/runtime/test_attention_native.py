"""The native path of com.microsoft Attention (kernels/attention_native.py):
on random shapes and the BERT mask forms (none, right-padding ends, a 0/1
key mask, a batch row with every key masked) it is taken, and agrees with
the NumPy path (native=False) and with onnxruntime; with a past cache or
unidirectional it is not taken."""
import numpy as np
import onnx
from hypothesis import given, settings, strategies as st

from helpers.contrib_models import one_node
from helpers.model_zoo import ort_run
from pyarena._native import lib
from pyarena.importers import load_model
from pyarena.runtime import Executor


def _model(path, rng, b, s, d_in, heads, size, mask, **attrs):
    hid = heads * size
    feeds = {"x": (rng.standard_normal((b, s, d_in))).astype(np.float32)}
    consts = {"w": (rng.standard_normal((d_in, 3 * hid)) * 0.4).astype(np.float32),
              "bias": rng.standard_normal(3 * hid).astype(np.float32)}
    ins = ["x", "w", "bias"]
    if mask == "ends":
        feeds["mask"] = rng.integers(0, s + 1, b).astype(np.int32)
        feeds["mask"][0] = 0            # every key of the first sequence masked
    elif mask == "keys":
        feeds["mask"] = rng.integers(0, 2, (b, s)).astype(np.int32)
    if mask:
        ins.append("mask")
    with open(path, "wb") as f:
        f.write(one_node("Attention", feeds, ["y"], consts, inputs=ins, num_heads=heads,
                         **attrs))
    return feeds


@settings(max_examples=25, deadline=None)
@given(b=st.integers(1, 3), s=st.integers(1, 40), d_in=st.integers(1, 24),
       heads=st.sampled_from([1, 2, 4]), size=st.sampled_from([1, 4, 8, 16]),
       mask=st.sampled_from([None, "ends", "keys"]), seed=st.integers(0, 1000))
def test_native_attention_matches_numpy_and_onnxruntime(tmp_path_factory, b, s, d_in, heads,
                                                        size, mask, seed):
    path = tmp_path_factory.mktemp("att") / "m.onnx"
    feeds = _model(path, np.random.default_rng(seed), b, s, d_in, heads, size, mask)
    ex = Executor(load_model(str(path)))
    assert ex.kernels[0].fast
    got = ex.run(feeds)["y"]
    plain = Executor(load_model(str(path), native=False))
    assert not plain.kernels[0].fast
    ref = ort_run(path, feeds)["y"]
    # a sequence with every key masked: each score is s + mask_filter_value
    # (-10000), whose float32 spacing (1e-3) is far above the scores' own
    # rounding, so a last-bit difference in Q K^T moves its softmax by 1e-3
    # (onnxruntime's GEMM adds the mask in another order): that sequence is
    # compared within 1e-2, the others within float rounding
    m = feeds.get("mask")
    empty = np.zeros(b, bool) if m is None else (m == 0 if m.ndim == 1 else m.sum(1) == 0)
    for out in (got, plain.run(feeds)["y"]):
        np.testing.assert_allclose(out[~empty], ref[~empty], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out[empty], ref[empty], rtol=1e-2, atol=1e-2)


def test_unidirectional_attention_takes_the_numpy_path(tmp_path):
    path = tmp_path / "m.onnx"
    feeds = _model(path, np.random.default_rng(0), 2, 5, 6, 2, 4, "keys", unidirectional=1)
    ex = Executor(load_model(str(path)))
    assert not ex.kernels[0].fast
    np.testing.assert_allclose(ex.run(feeds)["y"], ort_run(path, feeds)["y"], rtol=1e-4,
                               atol=1e-5)


def test_the_native_path_plans_its_temporaries(tmp_path):
    """QKV, pa_attention's work and the mask are scratch the planner
    places (no (batch, heads, seq, seq) scores, no context copy)."""
    path = tmp_path / "m.onnx"
    _model(path, np.random.default_rng(0), 2, 7, 6, 2, 4, "ends")
    k = Executor(load_model(str(path))).kernels[0]
    work = lib.pa_attention_scratch_floats(k.att)
    assert work > 0
    assert [tuple(sh) for sh, _ in k.scratch] == [(14, 24), (work,), (2, 1, 1, 7)]
    assert onnx.load(str(path)).graph.node[0].op_type == "Attention"
