"""A small seeded decoder built from standard ONNX ops, exported the way
onnxruntime's decoders are: inputs ``input_ids`` and ``position_ids``
(batch, seq) and per layer ``past_key_values.N.key`` / ``.value`` (batch,
heads, past, head size); outputs ``logits`` (batch, seq, vocab) and
``present.N.key`` / ``.value`` made by Concat(past, new, axis=2).

Per layer: LayerNormalization, Q / K / V MatMuls, heads split by Reshape
+ Transpose, scores MatMul(Q, Transpose(K)) scaled by a Mul, a causal
additive mask computed in the graph from the shapes (query i of the new
tokens sees keys up to past + i), Softmax, MatMul with V, the output
projection and a residual; then a LayerNormalization + MatMul / SiLU /
MatMul feed-forward with a residual.  Token and position embeddings by
Gather; the LM head is the token embedding, transposed (tied)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def const(self, value):
        self.count += 1
        name = f"c{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape, scale=0.1):
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type, inputs, out=None, **attrs):
        self.count += 1
        out = out or f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{self.count}",
                                           **attrs))
        return out

    def layer_norm(self, x, hidden):
        return self.op("LayerNormalization",
                       [x, self.const((1 + 0.1 * self.rng.standard_normal(hidden))
                                      .astype(np.float32)),
                        self.weight(hidden, scale=0.05)], axis=-1, epsilon=1e-5)

    def causal_bias(self, q, k):
        """(seq, total) additive mask: 0 where key j <= past + i, else a
        large negative, from the shapes of Q and K (batch, heads, len, d)."""
        one = self.const(np.array([1], np.int64))
        two = self.const(np.array([2], np.int64))
        s = self.op("Slice", [self.op("Shape", [q]), two, self.const(np.array([3], np.int64))])
        t = self.op("Slice", [self.op("Shape", [k]), two, self.const(np.array([3], np.int64))])
        zero = self.const(np.array(0, np.int64))
        step = self.const(np.array(1, np.int64))
        s0 = self.op("Squeeze", [s, self.const(np.array([0], np.int64))])
        t0 = self.op("Squeeze", [t, self.const(np.array([0], np.int64))])
        rows = self.op("Add", [self.op("Unsqueeze", [self.op("Range", [zero, s0, step]), one]),
                               self.op("Sub", [t0, s0])])
        cols = self.op("Range", [zero, t0, step])
        later = self.op("Greater", [cols, rows])            # (seq, total)
        return self.op("Where", [later, self.const(np.array(-1e9, np.float32)),
                                 self.const(np.array(0, np.float32))])


def decoder_model(layers=2, hidden=32, heads=4, vocab=64, ffn=None, max_positions=256,
                  seed=0, opset=17):
    """The decoder as an onnx.ModelProto (see the module docstring)."""
    rng = np.random.default_rng(seed)
    b = _Builder(rng)
    d = hidden // heads
    ffn = ffn or 4 * hidden
    emb = b.weight(vocab, hidden, scale=0.5)
    pos = b.weight(max_positions, hidden, scale=0.1)
    x = b.op("Add", [b.op("Gather", [emb, "input_ids"]), b.op("Gather", [pos, "position_ids"])])
    split = b.const(np.array([0, 0, heads, d], np.int64))
    merge = b.const(np.array([0, 0, hidden], np.int64))
    scale = b.const(np.array(1 / np.sqrt(d), np.float32))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                            ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", vocab])]
    for i in range(layers):
        a = b.layer_norm(x, hidden)
        q, k, v = (b.op("Transpose", [b.op("Reshape", [b.op("MatMul", [a, b.weight(hidden, hidden)]),
                                                       split])], perm=[0, 2, 1, 3])
                   for _ in range(3))
        kv = {}
        for part, new in (("key", k), ("value", v)):
            past, present = f"past_key_values.{i}.{part}", f"present.{i}.{part}"
            inputs.append(helper.make_tensor_value_info(past, TensorProto.FLOAT,
                                                        ["batch", heads, "past", d]))
            outputs.append(helper.make_tensor_value_info(present, TensorProto.FLOAT,
                                                         ["batch", heads, "total", d]))
            kv[part] = b.op("Concat", [past, new], out=present, axis=2)
        scores = b.op("Mul", [b.op("MatMul", [q, b.op("Transpose", [kv["key"]],
                                                      perm=[0, 1, 3, 2])]), scale])
        scores = b.op("Add", [scores, b.causal_bias(q, kv["key"])])
        att = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), kv["value"]])
        att = b.op("Reshape", [b.op("Transpose", [att], perm=[0, 2, 1, 3]), merge])
        x = b.op("Add", [x, b.op("MatMul", [att, b.weight(hidden, hidden)])])
        a = b.layer_norm(x, hidden)
        m = b.op("MatMul", [a, b.weight(hidden, ffn)])
        m = b.op("Mul", [m, b.op("Sigmoid", [m])])
        x = b.op("Add", [x, b.op("MatMul", [m, b.weight(ffn, hidden)])])
    h = b.layer_norm(x, hidden)
    b.op("MatMul", [h, b.op("Transpose", [emb], perm=[1, 0])], out="logits")
    graph = helper.make_graph(b.nodes, "kv_decoder", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def empty_past(model, batch=1):
    """Zero-length past feeds for every past input of ``model``."""
    feeds = {}
    for vi in model.graph.input:
        if vi.name.startswith("past_key_values."):
            dims = vi.type.tensor_type.shape.dim
            feeds[vi.name] = np.zeros((batch, dims[1].dim_value, 0, dims[3].dim_value),
                                      np.float32)
    return feeds
