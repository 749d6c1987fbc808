"""onnxruntime's com.microsoft transformer ops (the fused norms, the
GELUs, the embedding, the attentions, RotaryEmbedding, MatMulNBits) run
by pyarena's InferenceSession agree with onnxruntime's CPU kernels on
one-node models of random shapes and attributes: within float32
rounding (rtol 1e-5, an absolute floor of 1e-6 for values near 0)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto

import pyarena
from pyarena.errors import PyArenaError, UnsupportedOpError
from pyarena.runtime.kernels import KERNELS

from helpers.contrib_models import assert_close, both, one_node

FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _agree(op, feeds, outputs, consts=None, atol=1e-6, **attrs):
    got, ref = both(one_node(op, feeds, outputs, consts, **attrs), feeds)
    assert_close(got, ref, atol=atol)
    return got


@FEW
@given(st.integers(0, 2**31), st.sampled_from(["full", "seq", "flat"]), st.booleans(),
       st.booleans(), st.booleans(), st.sampled_from([1e-12, 1e-5]))
def test_skip_layer_norms_match_onnxruntime(seed, skip_form, simplified, bias, all_outs, eps):
    rng = np.random.default_rng(seed)
    b, s, h = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(2, 40))
    skip = {"full": (b, s, h), "seq": (1, s, h), "flat": (s, h)}[skip_form]
    feeds = {"x": _rand(rng, b, s, h), "skip": _rand(rng, *skip), "gamma": _rand(rng, h)}
    ins = ["x", "skip", "gamma"]
    if not simplified:
        feeds["beta"] = _rand(rng, h)
        ins.append("beta")
    if bias:
        feeds["bias"] = _rand(rng, h)
        ins.append("bias")
    outs = ["y", "mean", "inv_std", "sum"] if all_outs else ["y", "", "inv_std"]
    op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    # (rows of 2-3 values normalise tiny deviations: onnxruntime's one-pass
    # variance and ours differ by float32 rounding, 2e-6 on a 0.08 output
    # at seed 18847958 -- an absolute 1e-5 on outputs of order 1)
    _agree(op, feeds, outs, inputs=ins, epsilon=eps, atol=1e-5)


@FEW
@given(st.integers(0, 2**31), st.integers(-2, -1), st.booleans())
def test_simplified_layer_norm_of_the_standard_domain_matches(seed, axis, inv_out):
    rng = np.random.default_rng(seed)
    x = _rand(rng, 2, int(rng.integers(1, 6)), int(rng.integers(2, 30)))
    feeds = {"x": x, "scale": _rand(rng, *x.shape[axis:])}
    _agree("SimplifiedLayerNormalization", feeds, ["y", "inv"] if inv_out else ["y"],
           domain="", inputs=["x", "scale"], axis=axis, epsilon=1e-6)


@FEW
@given(st.integers(0, 2**31),
       st.sampled_from(["Gelu", "BiasGelu", "FastGelu", "FastGelu+bias", "QuickGelu"]))
def test_gelus_match_onnxruntime(seed, op):
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(1, 9, int(rng.integers(1, 4))))
    feeds = {"x": _rand(rng, *shape, scale=3)}
    ins = ["x"]
    attrs = {}
    if op in ("BiasGelu", "FastGelu+bias"):
        feeds["bias"] = _rand(rng, shape[-1])
        ins.append("bias")
    if op == "QuickGelu":
        attrs["alpha"] = float(rng.uniform(0.5, 2.5))
    _agree(op.split("+")[0], feeds, ["y"], inputs=ins, **attrs)


def test_gelus_run_in_chunks_within_a_small_scratch_budget(tmp_path):
    """Rows a chunk at a time (a 1-byte budget): still onnxruntime's results."""
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    rng = np.random.default_rng(1)
    feeds = {"x": _rand(rng, 64, 300), "bias": _rand(rng, 300)}
    model = one_node("BiasGelu", feeds, ["y"], inputs=["x", "bias"])
    path = tmp_path / "gelu.onnx"
    path.write_bytes(model)
    g = load_model(str(path), scratch_budget=1)
    ex = Executor(g, plan(g))
    gelu = next(k for k in ex.kernels if k.op.op_type == "BiasGelu")
    assert gelu.step < 64       # more than one chunk of rows
    np.testing.assert_allclose(ex.run(feeds)["y"], both(model, feeds)[1][0], rtol=1e-5,
                               atol=1e-6)


def test_bias_add_is_the_sum_of_its_three_inputs():
    """BiasAdd has no CPU kernel in onnxruntime: NumPy's sum is the reference."""
    rng = np.random.default_rng(2)
    feeds = {"x": _rand(rng, 2, 5, 8), "bias": _rand(rng, 8), "skip": _rand(rng, 2, 5, 8)}
    y, = pyarena.InferenceSession(one_node("BiasAdd", feeds, ["y"], inputs=["x", "bias", "skip"])
                                  ).run(None, feeds)
    np.testing.assert_array_equal(y, feeds["x"] + feeds["bias"] + feeds["skip"])


@FEW
@given(st.integers(0, 2**31), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_embed_layer_norm_matches_onnxruntime(seed, segment, mask, position_ids, emb_sum):
    rng = np.random.default_rng(seed)
    b, s, h, vocab = int(rng.integers(1, 4)), int(rng.integers(1, 8)), \
        int(rng.integers(2, 24)), int(rng.integers(2, 30))
    feeds = {"ids": rng.integers(0, vocab, (b, s)).astype(np.int32)}
    consts = {"word": _rand(rng, vocab, h), "pos": _rand(rng, s + 3, h),
              "gamma": _rand(rng, h), "beta": _rand(rng, h)}
    ins = ["ids", "", "word", "pos", "", "gamma", "beta", "", ""]
    if segment:
        feeds["seg"] = rng.integers(0, 3, (b, s)).astype(np.int32)
        consts["segemb"] = _rand(rng, 3, h)
        ins[1], ins[4] = "seg", "segemb"
    if mask:
        feeds["mask"] = rng.integers(0, 2, (b, s)).astype(np.int32)
        ins[7] = "mask"
    if position_ids:
        feeds["posids"] = rng.integers(0, s + 3, (b, s)).astype(np.int32)
        ins[8] = "posids"
    while ins[-1] == "":
        ins.pop()
    outs = ["y", "mask_index"] + (["sum"] if emb_sum else [])
    _agree("EmbedLayerNormalization", feeds, outs, consts, inputs=ins,
           out_types={"mask_index": TensorProto.INT32}, epsilon=1e-12)


def test_embed_layer_norm_refuses_an_id_outside_the_table_as_onnxruntime_does():
    rng = np.random.default_rng(3)
    feeds = {"ids": np.array([[1, 9]], np.int32)}
    consts = {"word": _rand(rng, 9, 4), "pos": _rand(rng, 4, 4), "g": _rand(rng, 4),
              "b": _rand(rng, 4)}
    model = one_node("EmbedLayerNormalization", feeds, ["y"], consts,
                     inputs=["ids", "", "word", "pos", "", "g", "b"])
    with pytest.raises(Exception, match="out of range"):
        both(model, feeds)
    with pytest.raises(PyArenaError, match="out of range"):
        pyarena.InferenceSession(model).run(None, feeds)


@FEW
@given(st.integers(0, 2**31), st.sampled_from([2, 4, 8]), st.sampled_from([16, 32, 64]),
       st.sampled_from([None, "packed", "float"]), st.booleans(), st.booleans())
def test_matmul_nbits_matches_onnxruntime(seed, bits, block, zeros, bias, constant):
    """Blockwise 2/4/8-bit weights, K not always a multiple of the block,
    zero points packed, float or absent, the weights constant or fed."""
    rng = np.random.default_rng(seed)
    if bits == 8 and zeros == "float":      # (onnxruntime's CPU kernel refuses the pair)
        zeros = "packed"
    k, n = int(rng.integers(1, 130)), int(rng.integers(1, 20))
    blocks = -(-k // block)
    weights = {"B": rng.integers(0, 256, (n, blocks, block * bits // 8)).astype(np.uint8),
               "scales": (np.abs(_rand(rng, n * blocks)) * 0.1).astype(np.float32)}
    ins = ["a", "B", "scales", "", "", ""]
    if zeros == "packed":
        weights["zp"] = rng.integers(0, 256, (n, -(-blocks * bits // 8))).astype(np.uint8)
    elif zeros == "float":
        weights["zp"] = _rand(rng, n * blocks)
    if zeros:
        ins[3] = "zp"
    if bias:
        weights["bias"] = _rand(rng, n)
        ins[5] = "bias"
    while ins[-1] == "":
        ins.pop()
    feeds = {"a": _rand(rng, *[int(d) for d in rng.integers(1, 4, int(rng.integers(1, 3)))], k)}
    consts = weights if constant else {}
    if not constant:
        feeds.update(weights)
    got, ref = both(one_node("MatMulNBits", feeds, ["y"], consts, inputs=ins, K=k, N=n,
                             bits=bits, block_size=block), feeds)
    # float32 sums of k products in another order: k unit roundoffs of the
    # largest output (the bound of a recursive sum), not of each output (one
    # near 0.9 among outputs of 250 was 2e-5 off with k = 118, seed 462)
    assert_close(got, ref, atol=max(1e-5, k * 6e-8 * float(np.abs(ref[0]).max())))


def test_matmul_nbits_dequantizes_constant_weights_once():
    """Constant B, scales and zero points are laid out as float weights at
    build (the product then reads A alone at run time)."""
    rng = np.random.default_rng(4)
    consts = {"B": rng.integers(0, 256, (3, 1, 8)).astype(np.uint8),
              "scales": np.full(3, 0.5, np.float32)}
    feeds = {"a": np.eye(16, dtype=np.float32)}
    y, = pyarena.InferenceSession(one_node("MatMulNBits", feeds, ["y"], consts,
                                           inputs=["a", "B", "scales"], K=16, N=3, bits=4,
                                           block_size=16)).run(None, feeds)
    low, high = consts["B"][:, 0] & 15, consts["B"][:, 0] >> 4
    q = np.stack([low, high], axis=-1).reshape(3, 16).astype(np.float32)
    np.testing.assert_array_equal(y, ((q - 8) * 0.5).T)     # identity A: W^T itself
    k = KERNELS["MatMulNBits"]
    assert k.onnx_domain == "com.microsoft"


def test_matmul_nbits_refuses_g_idx():
    rng = np.random.default_rng(5)
    consts = {"B": rng.integers(0, 256, (2, 1, 8)).astype(np.uint8),
              "scales": np.ones(2, np.float32), "g": np.zeros(16, np.int32)}
    feeds = {"a": _rand(rng, 1, 16)}
    model = one_node("MatMulNBits", feeds, ["y"], consts, inputs=["a", "B", "scales", "", "g"],
                     K=16, N=2, bits=4, block_size=16)
    with pytest.raises(UnsupportedOpError, match="g_idx"):
        pyarena.InferenceSession(model).run(None, feeds)


@pytest.mark.parametrize("rows", [0, 1, 5, 8, 9, 40])
@pytest.mark.parametrize("bits,zeros", [(4, None), (4, "packed"), (4, "float"), (2, "packed"),
                                        (8, None)])
def test_matmul_nbits_from_the_packed_blocks(tmp_path, rows, bits, zeros):
    """Constant weights stay packed (no float W kept): a few rows straight
    from the blocks, more rows panel by panel (a small scratch budget makes
    several panels and a narrower last one) -- the same as the dequantized
    path (native=False) and onnxruntime."""
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    rng = np.random.default_rng(rows * 10 + bits)
    k, n, block = 200, 70, 32
    blocks = -(-k // block)
    consts = {"B": rng.integers(0, 256, (n, blocks, block * bits // 8)).astype(np.uint8),
              "scales": (np.abs(_rand(rng, n * blocks)) * 0.1).astype(np.float32),
              "bias": _rand(rng, n)}
    ins = ["a", "B", "scales", "", "", "bias"]
    if zeros == "packed":
        consts["zp"] = rng.integers(0, 256, (n, -(-blocks * bits // 8))).astype(np.uint8)
    elif zeros == "float":
        consts["zp"] = _rand(rng, n * blocks)
    if zeros:
        ins[3] = "zp"
    feeds = {"a": _rand(rng, rows, k)}
    if rows >= 2:       # a NaN and an infinity reach their rows in both paths alike
        feeds["a"][0, 7], feeds["a"][1, 100] = np.nan, np.inf
    model = one_node("MatMulNBits", feeds, ["y"], consts, inputs=ins, K=k, N=n, bits=bits,
                     block_size=block)
    path = tmp_path / "m.onnx"
    path.write_bytes(model)
    packed = Executor(load_model(str(path), scratch_budget=200 * 4 * 24))     # ~24 columns
    plain = Executor(load_model(str(path), native=False))
    k0 = packed.kernels[0]
    if rows:        # (no row: nothing to compute, no kernel set up)
        assert k0.packed and k0.w is None
        assert not plain.kernels[0].packed and plain.kernels[0].w is not None
    else:
        assert type(k0).__name__ == type(plain.kernels[0]).__name__ == "NothingToWrite"
    if rows > 8:        # several panels, the last one narrower
        assert 16 <= k0.panel < n and n % k0.panel
    ours, theirs = packed.run(feeds)["y"], plain.run(feeds)["y"]
    assert ours.shape == theirs.shape == (rows, n)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(np.isinf(ours), np.isinf(theirs))
    if rows >= 2:
        assert np.isnan(ours[0]).all() and not np.isfinite(ours[1]).any()
    finite = theirs[np.isfinite(theirs)]
    atol = 4e-7 * float(np.abs(finite).max(initial=1.0)) * np.sqrt(k)   # float32 sums of k products
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=atol)
    _agree("MatMulNBits", feeds, ["y"], consts, atol=atol, inputs=ins, K=k, N=n, bits=bits,
           block_size=block)


@pytest.mark.parametrize("what", ["packed zero points", "float zero points", "bias"])
def test_matmul_nbits_refuses_operands_of_the_wrong_size(what):
    """Zero points or a bias too short for N (the C core reads N x blocks of
    them straight from the file): refused at build, nothing read past them."""
    rng = np.random.default_rng(6)
    consts = {"B": rng.integers(0, 256, (8, 2, 16)).astype(np.uint8),
              "scales": np.full(16, 0.1, np.float32)}
    ins = ["a", "B", "scales"]
    if what == "bias":
        consts["bias"] = np.zeros(7, np.float32)
        ins += ["", "", "bias"]
    else:
        consts["zp"] = np.zeros(3, np.uint8) if what.startswith("packed") else \
            np.zeros(15, np.float32)
        ins.append("zp")
    feeds = {"a": _rand(rng, 1, 64)}
    model = one_node("MatMulNBits", feeds, ["y"], consts, inputs=ins, K=64, N=8, bits=4,
                     block_size=32)
    with pytest.raises(PyArenaError, match="zero points|bias"):
        pyarena.InferenceSession(model).run(None, feeds)
