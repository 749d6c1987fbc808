"""A tiny BERT-like encoder built from standard ONNX ops, in the shapes a
PyTorch export of a BERT has (so onnxruntime's transformer optimizer
recognises and fuses it): word + segment + sliced position embeddings
and a LayerNormalization; per layer, Q / K / V projections (MatMul + Add,
Reshape, Transpose), a softmax attention scaled by a Div with the
additive mask (1 - mask) * -10000, the output projection and a residual
LayerNormalization, then an erf GELU feed-forward and another residual
LayerNormalization."""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def const(self, value, name=None):
        self.count += 1
        name = name or f"c{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape, scale=0.2):
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type, inputs, **attrs):
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{self.count}",
                                           **attrs))
        return out

    def linear(self, x, n_in, n_out):
        return self.op("Add", [self.op("MatMul", [x, self.weight(n_in, n_out)]),
                               self.weight(n_out, scale=0.1)])

    def layer_norm(self, x, hidden):
        gamma = self.const((1 + 0.1 * self.rng.standard_normal(hidden)).astype(np.float32))
        return self.op("LayerNormalization", [x, gamma, self.weight(hidden, scale=0.1)],
                       epsilon=1e-12, axis=-1)


def tiny_bert(layers=2, hidden=32, heads=4, vocab=50, ffn=64, seed=0):
    """The encoder as an ONNX ModelProto (opset 17): inputs input_ids,
    attention_mask, token_type_ids (int64, (batch, seq)), output the last
    layer's hidden states (batch, seq, hidden)."""
    b = _Builder(np.random.default_rng(seed))
    size = hidden // heads
    i64 = lambda v: b.const(np.array(v, np.int64))      # noqa: E731
    words = b.op("Gather", [b.weight(vocab, hidden, scale=0.5), "input_ids"])
    segments = b.op("Gather", [b.weight(2, hidden, scale=0.5), "token_type_ids"])
    seq = b.op("Gather", [b.op("Shape", ["input_ids"]), i64(1)])
    ends = b.op("Unsqueeze", [seq, i64([0])])
    ids = b.op("Slice", [i64(np.arange(64).reshape(1, 64)), i64([0]), ends, i64([1]),
                         i64([1])])
    positions = b.op("Gather", [b.weight(64, hidden, scale=0.5), ids])
    x = b.layer_norm(b.op("Add", [b.op("Add", [words, segments]), positions]), hidden)
    mask = b.op("Cast", [b.op("Unsqueeze", [b.op("Unsqueeze", ["attention_mask", i64([1])]),
                                            i64([2])])], to=TensorProto.FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.const(np.float32(1)), mask]),
                        b.const(np.float32(-10000))])
    split = i64([0, 0, heads, size])
    for _ in range(layers):
        q, k, v = (b.op("Reshape", [b.linear(x, hidden, hidden), split]) for _ in range(3))
        q = b.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.float32(math.sqrt(size)))])
        probs = b.op("Softmax", [b.op("Add", [scores, mask])], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, i64([0, 0, hidden])])
        x = b.layer_norm(b.op("Add", [b.linear(ctx, hidden, hidden), x]), hidden)
        h = b.linear(x, hidden, ffn)
        erf = b.op("Erf", [b.op("Div", [h, b.const(np.float32(math.sqrt(2)))])])
        gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [erf, b.const(np.float32(1))])]),
                            b.const(np.float32(0.5))])
        x = b.layer_norm(b.op("Add", [b.linear(gelu, ffn, hidden), x]), hidden)
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    dims = ["batch", "seq"]
    graph = helper.make_graph(
        b.nodes, "tiny_bert",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       dims + [hidden])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def bert_feeds(rng, batch=2, seq=7, vocab=50):
    """input_ids, attention_mask (the last tokens of all but the first
    sequence padded) and token_type_ids."""
    mask = np.ones((batch, seq), np.int64)
    for i in range(1, batch):
        mask[i, seq - i:] = 0
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
            "attention_mask": mask,
            "token_type_ids": (np.arange(seq) >= seq // 2).astype(np.int64)[None].repeat(
                batch, 0)}
