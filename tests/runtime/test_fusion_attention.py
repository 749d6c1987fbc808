"""The attention rewrite (pyarena.runtime.fusion_attention) and its C
kernel (pyarena.Attention, csrc/kernels/attention.c): the forms a torch
export writes -- keys transposed by a Transpose or already, Q / V / the
output through Transposes or not, the scale as a Mul (either side) or a
Div, with and without a mask of several broadcast shapes -- become one
op, and the fused graph, the unfused NumPy path (native=False), a NumPy
formula and onnxruntime agree on random shapes; the encoder and decoder
models of tests/helpers fuse every layer; forms that differ (Softmax over
another axis, a scale per head, a Softmax read twice) stay as imported."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.encoder_models import encoder
from helpers.kv_decoder import decoder_model
from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor

ATT = "pyarena.Attention"


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _model(path, b, h, m, t, d, *, kform, qform, outform, scale, mask, axis=-1):
    """One attention; returns (feeds, ops expected to fuse)."""
    rng = np.random.default_rng(b * 1000 + h * 100 + m * 10 + t + d)
    feeds, nodes, inits = {}, [], {}
    if qform == "heads-last":       # Q as (b, m, h, d), moved by a Transpose
        feeds["q"] = rng.standard_normal((b, m, h, d)).astype(np.float32)
        nodes.append(node("Transpose", ["q"], ["qh"], perm=[0, 2, 1, 3]))
        q = "qh"
    else:
        feeds["q"] = rng.standard_normal((b, h, m, d)).astype(np.float32)
        q = "q"
    if kform == "transpose":        # K (b, h, t, d), Transpose(0, 1, 3, 2)
        feeds["k"] = rng.standard_normal((b, h, t, d)).astype(np.float32)
        nodes.append(node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
    elif kform == "encoder":        # K (b, t, h, d), Transpose(0, 2, 3, 1)
        feeds["k"] = rng.standard_normal((b, t, h, d)).astype(np.float32)
        nodes.append(node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]))
    else:                           # given already transposed (b, h, d, t)
        feeds["kt"] = rng.standard_normal((b, h, d, t)).astype(np.float32)
    feeds["v"] = rng.standard_normal((b, h, t, d)).astype(np.float32)
    nodes.append(node("MatMul", [q, "kt"], ["s"]))
    x = "s"
    if scale == "mul-right":
        inits["c"] = np.float32(0.3)
        nodes.append(node("Mul", ["s", "c"], ["ss"]))
        x = "ss"
    elif scale == "mul-left":
        inits["c"] = np.float32(0.3)
        nodes.append(node("Mul", ["c", "s"], ["ss"]))
        x = "ss"
    elif scale == "div":
        inits["c"] = np.float32(np.sqrt(d))
        nodes.append(node("Div", ["s", "c"], ["ss"]))
        x = "ss"
    elif scale == "per-head":       # not a scalar: not fused
        inits["c"] = rng.uniform(0.1, 1, (1, h, 1, 1)).astype(np.float32)
        nodes.append(node("Mul", ["s", "c"], ["ss"]))
        x = "ss"
    if mask is not None:
        shape = {"rows-keys": (m, t), "keys": (b, 1, 1, t), "full": (b, h, m, t)}[mask]
        feeds["mask"] = np.where(rng.random(shape) < 0.2, -1e4, rng.standard_normal(shape)) \
            .astype(np.float32)
        nodes.append(node("Add", ["mask", x] if mask == "keys" else [x, "mask"], ["sm"]))
        x = "sm"
    nodes.append(node("Softmax", [x], ["p"], axis=axis))
    nodes.append(node("MatMul", ["p", "v"], ["ctx" if outform == "transpose" else "y"]))
    if outform == "transpose":
        nodes.append(node("Transpose", ["ctx"], ["y"], perm=[0, 2, 1, 3]))
    make_model(nodes, {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
               {"y": (None, np.float32)}, inits, opset=17, path=path)
    return feeds, len(nodes)


def _reference(feeds, kform, qform, outform, scale, d, axis=-1):
    """The attention by the NumPy formula, in float64."""
    q = feeds["q"].astype(np.float64)
    if qform == "heads-last":
        q = q.transpose(0, 2, 1, 3)
    kt = {"transpose": lambda: feeds["k"].transpose(0, 1, 3, 2),
          "encoder": lambda: feeds["k"].transpose(0, 2, 3, 1),
          "given": lambda: feeds["kt"]}[kform]().astype(np.float64)
    s = q @ kt * {"mul-right": 0.3, "mul-left": 0.3, "div": 1 / np.float32(np.sqrt(d)),
                  "none": 1.0}[scale]
    if "mask" in feeds:     # (added in float32, as every float32 path does: a
        # score beside a -1e4 mask keeps only float32's 1e-3 of it)
        s = (s.astype(np.float32) + feeds["mask"]).astype(np.float64)
    e = np.exp(s - s.max(axis, keepdims=True))
    y = e / e.sum(axis, keepdims=True) @ feeds["v"]
    return y.transpose(0, 2, 1, 3) if outform == "transpose" else y


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 4), m=st.integers(1, 9), t=st.integers(1, 12),
       d=st.integers(1, 20), kform=st.sampled_from(["transpose", "encoder", "given"]),
       qform=st.sampled_from(["heads-last", "plain"]),
       outform=st.sampled_from(["transpose", "plain"]),
       scale=st.sampled_from(["mul-right", "mul-left", "div", "none"]),
       mask=st.sampled_from([None, "rows-keys", "keys", "full"]))
def test_attention_fuses_and_matches_onnxruntime(tmp_path_factory, b, h, m, t, d, kform,
                                                 qform, outform, scale, mask):
    path = tmp_path_factory.mktemp("att") / "m.onnx"
    feeds, _ = _model(path, b, h, m, t, d, kform=kform, qform=qform, outform=outform,
                      scale=scale, mask=mask)
    g = load_model(str(path))
    assert [op.op_type for op in g.ops] == [ATT]        # every Transpose absorbed too
    fused = Executor(g).run(feeds)["y"]
    plain = Executor(load_model(str(path), native=False)).run(feeds)["y"]
    ref = ort_run(path, feeds)["y"]
    want = _reference(feeds, kform, qform, outform, scale, d)
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(fused, want, rtol=1e-4, atol=1e-4)     # (float64)


def _types(path):
    return [op.op_type for op in load_model(str(path)).ops]


def test_softmax_over_another_axis_is_left_alone(tmp_path):
    path = tmp_path / "m.onnx"
    feeds, n = _model(path, 2, 2, 3, 5, 4, kform="transpose", qform="plain", outform="plain",
                      scale="mul-right", mask=None, axis=2)
    assert ATT not in _types(path) and "Softmax" in _types(path)
    got = Executor(load_model(str(path))).run(feeds)["y"]
    np.testing.assert_allclose(got, ort_run(path, feeds)["y"], rtol=1e-5, atol=2e-5)


def test_a_scale_per_head_is_left_alone(tmp_path):
    path = tmp_path / "m.onnx"
    feeds, _ = _model(path, 1, 3, 2, 4, 4, kform="transpose", qform="plain", outform="plain",
                      scale="per-head", mask="keys")
    types = _types(path)
    assert ATT not in types and types.count("Softmax") == 1 and "Mul" in types


def test_a_softmax_read_twice_is_left_alone(tmp_path):
    path = tmp_path / "m.onnx"
    feeds, _ = _model(path, 1, 2, 3, 4, 4, kform="transpose", qform="plain", outform="plain",
                      scale="div", mask=None)
    import onnx
    m = onnx.load(str(path))
    m.graph.output.append(helper.make_tensor_value_info("p", onnx.TensorProto.FLOAT, None))
    onnx.save(m, str(path))
    types = _types(path)
    assert ATT not in types and "Softmax" in types


def test_keys_read_elsewhere_keep_their_transpose(tmp_path):
    """The keys' Transpose has a second reader: the fused op reads the
    transposed keys as they are, the Transpose stays for the other."""
    path = tmp_path / "m.onnx"
    feeds, _ = _model(path, 1, 2, 3, 4, 4, kform="transpose", qform="plain", outform="plain",
                      scale="div", mask=None)
    import onnx
    m = onnx.load(str(path))
    m.graph.node.append(node("Neg", ["kt"], ["z"]))
    m.graph.output.append(helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None))
    onnx.save(m, str(path))
    g = load_model(str(path))
    att = next(op for op in g.ops if op.op_type == ATT)
    assert att.inputs[1] == "kt" and att.attrs["k_axes"] == [0, 1, 3, 2]
    got = Executor(g).run(feeds)
    ref = ort_run(path, feeds)
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=2e-5)


def test_the_encoder_and_the_decoder_fuse_every_layer(tmp_path):
    import onnx
    enc = tmp_path / "enc.onnx"
    onnx.save(encoder(layers=3, hidden=32, heads=4), str(enc))
    types = [op.op_type for op in load_model(str(enc), inputs={"x": (2, 7, 32)}).ops]
    assert types.count(ATT) == 3 and "Softmax" not in types and "Transpose" not in types
    dec = tmp_path / "dec.onnx"
    onnx.save(decoder_model(layers=2, hidden=32, heads=4, vocab=64), str(dec))
    shapes = {"input_ids": (1, 3), "position_ids": (1, 3)}
    shapes.update({f"past_key_values.{i}.{p}": (1, 4, 5, 8) for i in range(2)
                   for p in ("key", "value")})
    types = [op.op_type for op in load_model(str(dec), inputs=shapes).ops]
    assert types.count(ATT) == 2 and "Softmax" not in types


def test_native_false_keeps_the_ops(tmp_path):
    path = tmp_path / "m.onnx"
    _model(path, 1, 2, 3, 4, 4, kform="transpose", qform="plain", outform="plain",
           scale="div", mask="full")
    types = [op.op_type for op in load_model(str(path), native=False).ops]
    assert ATT not in types and "Softmax" in types


@pytest.mark.parametrize("bad", ["q", "scale"])
def test_malformed_fused_op_is_refused(tmp_path, bad):
    """A fused op whose operands do not fit one attention: GraphError at
    setup, naming the op."""
    from pyarena.errors import GraphError
    path = tmp_path / "m.onnx"
    feeds, _ = _model(path, 1, 2, 3, 4, 4, kform="transpose", qform="plain", outform="plain",
                      scale="div", mask=None)
    g = load_model(str(path))
    att = g.ops[0]
    if bad == "q":
        att.attrs["q_axes"] = [0, 1, 3, 2]      # rows and size swapped: 4 != 3
        with pytest.raises(GraphError, match="do not fit"):
            Executor(g)
    else:
        assert att.attrs["scale"] == pytest.approx(0.5)     # 1 / sqrt(4)
