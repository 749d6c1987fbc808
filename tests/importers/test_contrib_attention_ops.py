"""onnxruntime's com.microsoft attention ops (Attention, MultiHeadAttention,
GroupQueryAttention, RotaryEmbedding) run by pyarena's InferenceSession
agree with onnxruntime's CPU kernels on one-node models of random shapes,
masks, caches and attributes, within float32 rounding."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarena
from pyarena.errors import UnsupportedOpError
from pyarena.runtime.kernels import KERNELS

from helpers.contrib_models import assert_close, both, one_node

FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _mask(rng, form, b, s, total):
    """A mask_index of ``form``: right-padding ends, ends and starts, a 0/1
    key mask or a 0/1 (query, key) mask (int32)."""
    if form == "ends":
        return rng.integers(0, total + 1, b).astype(np.int32)
    if form == "ends_starts":
        return np.concatenate([rng.integers(1, total + 1, b),
                               rng.integers(0, total, b)]).astype(np.int32)
    if form == "keys":
        return rng.integers(0, 2, (b, total)).astype(np.int32)
    return rng.integers(0, 2, (b, s, total)).astype(np.int32)


MASKS = st.sampled_from([None, "ends", "ends_starts", "keys", "query_keys"])


@FEW
@given(st.integers(0, 2**31), MASKS, st.booleans(), st.integers(0, 3), st.booleans(),
       st.booleans())
def test_ms_attention_matches_onnxruntime(seed, mask, causal, past, attn_bias, v_wider):
    rng = np.random.default_rng(seed)
    b, s, heads = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.choice([1, 2, 4]))
    size = int(rng.choice([2, 4, 8]))
    d_in, hid = int(rng.integers(4, 20)), heads * size
    sizes = [hid, hid, 2 * hid if v_wider and not past else hid]
    feeds = {"x": _rand(rng, b, s, d_in)}
    consts = {"w": _rand(rng, d_in, sum(sizes), scale=0.4), "bias": _rand(rng, sum(sizes))}
    ins = ["x", "w", "bias", "", "", ""]
    total = s + past
    if mask:
        feeds["mask"] = _mask(rng, mask, b, s, total)
        ins[3] = "mask"
    if past:
        feeds["past"] = _rand(rng, 2, b, heads, past, size)
        ins[4] = "past"
    if attn_bias and not past:       # (onnxruntime refuses the two together)
        feeds["ab"] = _rand(rng, int(rng.choice([1, b])), heads, s, total)
        ins[5] = "ab"
    while ins[-1] == "":
        ins.pop()
    outs = ["y", "present"] if past else ["y"]
    got, ref = both(one_node("Attention", feeds, outs, consts, inputs=ins, num_heads=heads,
                             unidirectional=int(causal), qkv_hidden_sizes=sizes), feeds)
    # (float32 sums: an output of 0.02 among outputs of 1-2.6 was 1.3e-6 off, seed 105)
    assert_close(got, ref, atol=1e-5)


@FEW
@given(st.integers(0, 2**31), st.sampled_from([None, "ends", "keys"]), st.booleans(),
       st.integers(0, 3), st.booleans(), st.booleans(), st.sampled_from(["bsd", "bnsh"]))
def test_multi_head_attention_matches_onnxruntime(seed, mask, causal, past, attn_bias, bias,
                                                  form):
    rng = np.random.default_rng(seed)
    b, s, heads, size = int(rng.integers(1, 4)), int(rng.integers(1, 6)), \
        int(rng.choice([1, 2, 4])), int(rng.choice([2, 4, 8]))
    kl = s if causal or past else int(rng.integers(1, 7))
    d = heads * size
    feeds = {"q": _rand(rng, b, s, d)}
    if form == "bsd":
        feeds.update(k=_rand(rng, b, kl, d), v=_rand(rng, b, kl, d))
    else:
        past = 0
        feeds.update(k=_rand(rng, b, heads, kl, size), v=_rand(rng, b, heads, kl, size))
    ins = ["q", "k", "v", "", "", "", "", ""]
    if bias:
        feeds["bias"] = _rand(rng, 3 * d)
        ins[3] = "bias"
    total = kl + past
    if mask:
        feeds["mask"] = _mask(rng, mask, b, s, total)
        ins[4] = "mask"
    if attn_bias:
        feeds["ab"] = _rand(rng, 1, int(rng.choice([1, heads])), s, total)
        ins[5] = "ab"
    outs = ["y"]
    if past:
        feeds.update(pk=_rand(rng, b, heads, past, size), pv=_rand(rng, b, heads, past, size))
        ins[6:8] = ["pk", "pv"]
        outs += ["present_k", "present_v"]
    while ins[-1] == "":
        ins.pop()
    scale = float(rng.uniform(0.1, 1.0)) if seed % 3 == 0 else 0.0
    got, ref = both(one_node("MultiHeadAttention", feeds, outs, inputs=ins, num_heads=heads,
                             unidirectional=int(causal), scale=scale), feeds)
    assert_close(got, ref, atol=1e-5)


def _gqa_model(rng, b, s, past, heads, kv, size, packed=False, rotary=False, seqlens=None,
               **attrs):
    total = past + s
    feeds = {}
    if packed:
        feeds["q"] = _rand(rng, b, s, (heads + 2 * kv) * size)
        ins = ["q", "", ""]
    else:
        feeds.update(q=_rand(rng, b, s, heads * size), k=_rand(rng, b, s, kv * size),
                     v=_rand(rng, b, s, kv * size))
        ins = ["q", "k", "v"]
    if past:
        feeds.update(pk=_rand(rng, b, kv, past, size), pv=_rand(rng, b, kv, past, size))
        ins += ["pk", "pv"]
    else:
        ins += ["", ""]
    feeds["seqlens"] = np.array(seqlens if seqlens is not None else [total - 1] * b, np.int32)
    feeds["total"] = np.array(total, np.int32)
    ins += ["seqlens", "total"]
    if rotary:
        feeds.update(cos=_rand(rng, total + 2, size // 2), sin=_rand(rng, total + 2, size // 2))
        ins += ["cos", "sin"]
        attrs["do_rotary"] = 1
    model = one_node("GroupQueryAttention", feeds, ["y", "present_k", "present_v"], inputs=ins,
                     num_heads=heads, kv_num_heads=kv, **attrs)
    return model, feeds


@FEW
@given(st.integers(0, 2**31), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([-1, 1, 3]), st.sampled_from([0.0, 2.0]), st.booleans())
def test_group_query_attention_matches_onnxruntime(seed, decode, packed, rotary, window,
                                                   softcap, smooth):
    """The first prompt (no past), and decoding over a past cache: one token
    per sequence, or several for one sequence (onnxruntime's limit)."""
    rng = np.random.default_rng(seed)
    kv = int(rng.choice([1, 2]))
    heads, size = kv * int(rng.choice([1, 2, 3])), 16 if rotary else int(rng.choice([8, 16]))
    if decode:
        past = int(rng.integers(1, 6))
        s = int(rng.integers(1, 4))
        b = 1 if s > 1 else int(rng.integers(1, 4))
    else:
        past, s, b = 0, int(rng.integers(1, 7)), int(rng.integers(1, 4))
    model, feeds = _gqa_model(rng, b, s, past, heads, kv, size, packed, rotary,
                              local_window_size=window, softcap=softcap,
                              smooth_softmax=int(smooth), rotary_interleaved=seed % 2)
    got, ref = both(model, feeds)
    assert_close(got, ref)


def test_group_query_attention_decodes_sequences_of_different_lengths():
    """seqlens_k: each sequence's new token goes after its own past (the
    cache's tail unused); the attention output is onnxruntime's."""
    rng = np.random.default_rng(5)
    model, feeds = _gqa_model(rng, 3, 1, 6, 4, 2, 8, seqlens=[6, 2, 4])
    got, ref = both(model, feeds)
    assert_close(got[:1], ref[:1])
    assert np.array_equal(got[1][1, :, 2], feeds["k"][1].reshape(2, 8))   # after 2 past


@FEW
@given(st.integers(0, 2**31), st.sampled_from(["3d", "4d"]), st.booleans(), st.booleans(),
       st.booleans())
def test_ms_rotary_embedding_matches_onnxruntime(seed, layout, offset, interleaved, partial):
    rng = np.random.default_rng(seed)
    b, s, heads, size = int(rng.integers(1, 4)), int(rng.integers(1, 6)), \
        int(rng.integers(1, 4)), int(rng.choice([4, 8, 16]))
    rot = size // 2 if partial else size
    x = _rand(rng, b, s, heads * size) if layout == "3d" else _rand(rng, b, heads, s, size)
    pos = np.array([rng.integers(0, 8)], np.int64) if offset else \
        rng.integers(0, 8 + s, (b, s)).astype(np.int64)
    feeds = {"x": x, "pos": pos, "cos": _rand(rng, 8 + s, rot // 2),
             "sin": _rand(rng, 8 + s, rot // 2)}
    attrs = {"interleaved": int(interleaved)}
    if partial:
        attrs["rotary_embedding_dim"] = rot
    if layout == "3d" or partial:
        attrs["num_heads"] = heads
    got, ref = both(one_node("RotaryEmbedding", feeds, ["y"], inputs=["x", "pos", "cos", "sin"],
                             **attrs), feeds)
    assert_close(got, ref)


def test_contrib_ops_named_like_standard_ones_run_their_own_kernels():
    """com.microsoft Attention / RotaryEmbedding / Gelu are filed under
    domain.name; the standard ops keep their names and kernels."""
    for name in ("Attention", "RotaryEmbedding", "Gelu"):
        assert KERNELS[name].onnx_domain == ""
        assert KERNELS[f"com.microsoft.{name}"].onnx_domain == "com.microsoft"
        assert KERNELS[name] is not KERNELS[f"com.microsoft.{name}"]
    rng = np.random.default_rng(6)
    x = _rand(rng, 2, 5)
    std = pyarena.InferenceSession(one_node("Gelu", {"x": x}, ["y"], domain="", inputs=["x"],
                                            approximate="tanh")).run(None, {"x": x})[0]
    ms = pyarena.InferenceSession(one_node("Gelu", {"x": x}, ["y"], inputs=["x"])
                                  ).run(None, {"x": x})[0]
    assert not np.allclose(std, ms, rtol=0, atol=1e-7)      # tanh form vs erf form


def test_packed_multi_head_attention_is_refused_as_onnxruntime_cpu_refuses_it():
    rng = np.random.default_rng(7)
    feeds = {"qkv": _rand(rng, 1, 3, 2, 3, 4)}
    model = one_node("MultiHeadAttention", feeds, ["y"], inputs=["qkv"], num_heads=2)
    with pytest.raises(Exception, match="not implemented"):
        both(model, feeds)
    with pytest.raises(UnsupportedOpError, match="packed"):
        pyarena.InferenceSession(model).run(None, feeds)


def test_a_contrib_op_in_an_if_branch_runs_its_own_kernel():
    """The renaming reaches the bodies: com.microsoft RotaryEmbedding in a
    branch taken at run time is not run as the standard op."""
    import onnx
    from onnx import TensorProto, helper
    rng = np.random.default_rng(8)
    shape = [1, 3, 8]
    branch = helper.make_graph(
        [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["yt"],
                          domain="com.microsoft", num_heads=2)], "then", [],
        [helper.make_tensor_value_info("yt", TensorProto.FLOAT, shape)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ye"])], "else", [],
                              [helper.make_tensor_value_info("ye", TensorProto.FLOAT, shape)])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [onnx.numpy_helper.from_array(_rand(rng, 8, 2), "cos"),
         onnx.numpy_helper.from_array(_rand(rng, 8, 2), "sin")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    x = _rand(rng, *shape)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": x, "pos": np.array([2], np.int64)}
        got, ref = both(model.SerializeToString(), feeds)
        assert_close(got, ref)
        assert np.array_equal(got[0], x) != cond


@pytest.mark.parametrize("op", ["SkipLayerNormalization", "BiasGelu", "FastGelu",
                                "MultiHeadAttention", "GroupQueryAttention"])
def test_float16_models_match_onnxruntime_within_float16_rounding(op):
    """The kernels run float16 too (onnxruntime's CPU kernels have float16
    forms): within a few float16 ulps of its results."""
    from onnx import TensorProto
    rng = np.random.default_rng(9)
    h = lambda *s: rng.standard_normal(s).astype(np.float16)      # noqa: E731
    feeds, ins, attrs = {
        "SkipLayerNormalization": (dict(x=h(2, 3, 16), s=h(2, 3, 16), g=h(16), b=h(16)),
                                   ["x", "s", "g", "b"], {}),
        "BiasGelu": (dict(x=h(2, 3, 16), b=h(16)), ["x", "b"], {}),
        "FastGelu": (dict(x=h(2, 3, 16), b=h(16)), ["x", "b"], {}),
        "MultiHeadAttention": (dict(q=h(2, 4, 32), k=h(2, 5, 32), v=h(2, 5, 32)),
                               ["q", "k", "v"], {"num_heads": 4}),
        "GroupQueryAttention": (dict(q=h(1, 4, 32), k=h(1, 4, 16), v=h(1, 4, 16),
                                     sl=np.array([3], np.int32), t=np.array(4, np.int32)),
                                ["q", "k", "v", "", "", "sl", "t"],
                                {"num_heads": 4, "kv_num_heads": 2}),
    }[op]
    got, ref = both(one_node(op, feeds, ["y"], inputs=ins,
                             out_types={"y": TensorProto.FLOAT16}, **attrs), feeds)
    assert got[0].dtype == ref[0].dtype == np.float16
    np.testing.assert_allclose(got[0].astype(np.float32), ref[0].astype(np.float32),
                               rtol=4e-3, atol=4e-3)
