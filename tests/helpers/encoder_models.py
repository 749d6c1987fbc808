"""Small transformer encoders built in code, with a dynamic batch and
sequence: float input ``x`` (batch, seq, hidden), output ``y`` of the
same shape.  Each layer: Q / K / V projections (MatMul + Add), heads split
by a Reshape whose target is computed from the input's Shape (so it is
shape arithmetic a session folds per length), a MatMul / Softmax
attention with a scale, the output projection, a residual
LayerNormalization, a two-layer ReLU feed-forward and another residual
LayerNormalization."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def encoder(layers=2, hidden=32, heads=4, ffn=None, seed=0, extra=None):
    """The encoder as an ONNX ModelProto (opset 17).  ``extra``: a
    callable ``(add_node, const, x) -> y`` inserted after the last layer
    (a test's own tail)."""
    rng = np.random.default_rng(seed)
    ffn = ffn or 2 * hidden
    nodes, inits, count = [], [], [0]

    def const(value):
        count[0] += 1
        name = f"c{count[0]}"
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(op_type, inputs, **attrs):
        count[0] += 1
        out = f"t{count[0]}"
        nodes.append(helper.make_node(op_type, inputs, [out], name=f"n{count[0]}", **attrs))
        return out

    def weight(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return const((rng.standard_normal(shape) * scale).astype(np.float32))

    def linear(x, n_in, n_out):
        return op("Add", [op("MatMul", [x, weight(n_in, n_out)]), weight(n_out, scale=0.1)])

    def norm(x):
        gamma = const((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32))
        return op("LayerNormalization", [x, gamma, weight(hidden, scale=0.1)],
                  epsilon=1e-5, axis=-1)

    size = hidden // heads
    i64 = lambda v: const(np.array(v, np.int64))        # noqa: E731
    lead = op("Slice", [op("Shape", ["x"]), i64([0]), i64([2]), i64([0])])   # (batch, seq)
    split = op("Concat", [lead, i64([heads, size])], axis=0)
    x = "x"
    for _ in range(layers):
        q, k, v = (op("Reshape", [linear(x, hidden, hidden), split]) for _ in range(3))
        q = op("Transpose", [q], perm=[0, 2, 1, 3])
        k = op("Transpose", [k], perm=[0, 2, 3, 1])
        v = op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = op("Mul", [op("MatMul", [q, k]), const(np.float32(1 / np.sqrt(size)))])
        probs = op("Softmax", [scores], axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, i64([0, 0, hidden])])
        x = norm(op("Add", [linear(ctx, hidden, hidden), x]))
        h = op("Relu", [linear(x, hidden, ffn)])
        x = norm(op("Add", [linear(h, ffn, hidden), x]))
    if extra is not None:
        x = extra(op, const, x)
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes, "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", None])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def save(model, path):
    onnx.save(model, str(path))
    return str(path)
