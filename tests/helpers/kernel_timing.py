"""Every registered kernel on a mid-sized input, timed against a vectorised
baseline in the same run (the guard against per-element cliffs:
tests/runtime/test_kernel_cliffs.py; the table: benchmarks/bench_kernel_cliffs.py).

An op's input comes from its ONNX node conformance case
(``onnx.backend.test.case.node.<module>``, importing one records its
cases), with every input after the first made a constant and the first
tiled to about :data:`TARGET` elements along the axis the op's family
allows (:data:`SCALE_AXES`): the same-shaped inputs tiled with it.  An op
with no conformance case, or whose cases take too long to generate, has a
recipe (:data:`RECIPES`).  Each kernel is built twice: with the default
scratch budget and with a 1-byte budget (the least the slack planner
gives an op).

The baseline is vectorised NumPy over the same amount of work: ``np.exp``
over the larger of the op's input and output element counts, plus a
float32 matmul of the op's multiply-adds (:func:`macs`) for the ops that
have them.  Kernel and baseline calls alternate; each side's time is its
minimum over the repeats, so a busy machine slows both alike.
"""
import importlib
import math
import re
import time
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: elements the first input is tiled to
TARGET = 1 << 15
#: the modules whose cases take seconds to generate (pool references): recipes instead
SLOW_MODULES = {"averagepool", "maxpool"}
#: the axes the first input is tiled along, by family (others: axis 0; a
#: kernel with windows over H and W -- a Spatial -- as "conv")
SCALE_AXES = {"conv": (-2, -1), "pool": (-2, -1), "resize": (-2, -1), "recurrent": (1,)}
#: the two budgets every kernel is built with: the default, and the least
BUDGETS = (None, 1)


def _module_names(op):
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()
    return [op.lower(), op.lower() + "_", snake, op.lower() + "op"]


def conformance_cases(ops):
    """{op type: [(model, [input arrays])]}: the single-node conformance
    cases of ``ops`` (those whose module is quick to import)."""
    import pkgutil

    from onnx.backend.test.case import node
    have = {m.name for m in pkgutil.iter_modules(node.__path__)} - SLOW_MODULES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            for m in _module_names(op):
                if m in have:
                    importlib.import_module(f"onnx.backend.test.case.node.{m}")
    out = {}
    for c in node._NodeTestCases:
        nodes = c.model.graph.node
        if len(nodes) != 1 or nodes[0].op_type not in ops or not c.data_sets or \
                any(v is None or isinstance(v, list) for v in c.data_sets[0][0]):
            continue        # (a sequence or an optional fed: nothing to tile)
        out.setdefault(nodes[0].op_type, []).append((c.model, list(c.data_sets[0][0])))
    return out


# -- recipes: ops without a usable conformance case --------------------------------
def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _u8(*shape, seed=0):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


def _model(op, inputs, attrs=None, domain="", n_out=1, opset=17, first=0):
    """A one-node model of ``op`` over ``inputs`` ([(name, array)], None
    for an omitted one): input ``first`` a graph input, the others
    constants."""
    n0, x0 = inputs[first]
    rest = [(n, a) for n, a in inputs[:first] + inputs[first + 1:] if a is not None]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, [n if a is not None else "" for n, a in inputs], outs,
                            domain=domain, **(attrs or {}))
    ty = helper.np_dtype_to_tensor_dtype(x0.dtype)
    g = helper.make_graph([node], op, [helper.make_tensor_value_info(n0, ty, list(x0.shape))],
                          [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                           for o in outs],
                          [numpy_helper.from_array(a, n) for n, a in rest])
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    return m, [x0], True


def _q(name, v, dt):
    return (name, np.array(v, dt))


def _qbinary(op, domain="com.microsoft"):
    return lambda: _model(op, [("a", _u8(1, 64, 32, 16)), _q("as", 0.02, np.float32),
                               _q("az", 128, np.uint8), ("b", _u8(1, 64, 32, 16, seed=1)),
                               _q("bs", 0.01, np.float32), _q("bz", 120, np.uint8),
                               _q("ys", 0.03, np.float32), _q("yz", 125, np.uint8)],
                          domain=domain)


def _qunary(op, attrs=None):
    return lambda: _model(op, [("x", _u8(1, 64, 32, 16)), _q("xs", 0.02, np.float32),
                               _q("xz", 128, np.uint8), _q("ys", 0.03, np.float32),
                               _q("yz", 125, np.uint8)], attrs, domain="com.microsoft")


def _pool(op, **attrs):
    return lambda: _model(op, [("x", _f32(1, 16, 48, 48))], dict(kernel_shape=[3, 3], **attrs))


def _unary(op, opset=17):
    return lambda: _model(op, [("x", _f32(64, 512))], opset=opset)


def _tree_ensemble(trees=8, depth=4, features=16):
    """A TreeEnsemble (ai.onnx.ml opset 5) of full trees of ``depth``
    LEQ / GT / MEMBER splits over a (1024, features) input."""
    rng = np.random.default_rng(5)
    feat, modes, splits, tn, fn, tl, fl, members, roots = [], [], [], [], [], [], [], [], []
    leaves = 0
    for _ in range(trees):
        roots.append(len(feat))
        first = len(feat)
        inner = 2 ** depth - 1
        for i in range(inner):          # node i's children: 2i+1, 2i+2 (leaves below)
            feat.append(int(rng.integers(0, features)))
            mode = (0, 3, 6)[i % 3]
            modes.append(mode)
            splits.append(float(rng.standard_normal()))
            if mode == 6:
                members.extend([-1.0, 0.0, 1.0, np.nan])
            for c, ids, leaf in ((2 * i + 1, tn, tl), (2 * i + 2, fn, fl)):
                if c < inner:
                    ids.append(first + c)
                    leaf.append(0)
                else:
                    ids.append(leaves)
                    leaf.append(1)
                    leaves += 1
    m, ins, _ = _model("TreeEnsemble", [("x", np.round(_f32(1024, features)))], dict(
        nodes_featureids=feat, nodes_modes=numpy_helper.from_array(np.array(modes, np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array(splits, np.float32)),
        nodes_truenodeids=tn, nodes_falsenodeids=fn, nodes_trueleafs=tl, nodes_falseleafs=fl,
        leaf_targetids=[int(v) for v in rng.integers(0, 2, leaves)],
        leaf_weights=numpy_helper.from_array(_f32(leaves, seed=6)), tree_roots=roots,
        n_targets=2, membership_values=numpy_helper.from_array(np.array(members, np.float32))),
        domain="ai.onnx.ml")
    m.opset_import[1].version = 5
    return m, ins, True


#: op type -> () -> (model, inputs, scaled): a mid-sized input built by hand
RECIPES = {
    "Binarizer": lambda: _model("Binarizer", [("x", _f32(64, 512))], {"threshold": 0.1},
                                domain="ai.onnx.ml"),
    "ArrayFeatureExtractor": lambda: _model(
        "ArrayFeatureExtractor", [("x", _f32(64, 512)),
                                  ("i", np.arange(0, 512, 2, dtype=np.int64))],
        domain="ai.onnx.ml"),
    "TreeEnsemble": _tree_ensemble,
    # a conformance case's offsets agree with its input's size: not tiled
    "DeformConv": lambda: _model(
        "DeformConv", [("x", _f32(1, 16, 24, 24)), ("w", _f32(16, 16, 3, 3, seed=1)),
                       ("o", 2 * _f32(1, 18, 24, 24, seed=2)), ("b", _f32(16, seed=3))],
        {"pads": [1, 1, 1, 1]}, opset=22),
    "AveragePool": _pool("AveragePool", pads=[1, 1, 1, 1]),
    "MaxPool": _pool("MaxPool", strides=[2, 2]),
    "GlobalLpPool": lambda: _model("GlobalLpPool", [("x", _f32(1, 64, 48, 48))], {"p": 3}),
    "QLinearAdd": _qbinary("QLinearAdd"),
    "QLinearMul": _qbinary("QLinearMul"),
    "QDQAdd": _qbinary("QDQAdd", "ai.pyarena"),
    "QDQMul": _qbinary("QDQMul", "ai.pyarena"),
    "QLinearSigmoid": _qunary("QLinearSigmoid"),
    "QLinearLeakyRelu": _qunary("QLinearLeakyRelu", {"alpha": 0.1}),
    "QLinearGlobalAveragePool": lambda: _model(
        "QLinearGlobalAveragePool", [("x", _u8(1, 64, 32, 16)), _q("xs", 0.02, np.float32),
                                     _q("xz", 128, np.uint8), _q("ys", 0.03, np.float32),
                                     _q("yz", 125, np.uint8)], domain="com.microsoft"),
    "QLinearSoftmax": lambda: _model(
        "QLinearSoftmax", [("x", _u8(256, 128)), _q("xs", 0.02, np.float32),
                           _q("xz", 128, np.uint8), _q("ys", 1 / 256, np.float32),
                           _q("yz", 0, np.uint8)], {"opset": 13}, domain="com.microsoft"),
    "QLinearConcat": lambda: _model(
        "QLinearConcat", [_q("ys", 0.03, np.float32), _q("yz", 125, np.uint8),
                          ("a", _u8(1, 32, 32, 32)), _q("as", 0.02, np.float32),
                          _q("az", 128, np.uint8), ("b", _u8(1, 16, 32, 32, seed=1)),
                          _q("bs", 0.01, np.float32), _q("bz", 120, np.uint8)],
        {"axis": 1}, domain="com.microsoft", first=2),
    # a window over few channels of a narrow image makes a band of one row
    # short: real int8 models have 16+ channels
    "QLinearConv": lambda: _model(
        "QLinearConv", [("x", _u8(1, 16, 48, 48)), _q("xs", 0.02, np.float32),
                        _q("xz", 128, np.uint8), ("w", _u8(16, 16, 3, 3, seed=1)),
                        _q("ws", 0.01, np.float32), _q("wz", 120, np.uint8),
                        _q("ys", 0.5, np.float32), _q("yz", 125, np.uint8)],
        {"pads": [1, 1, 1, 1]}),
    "ConvInteger": lambda: _model(
        "ConvInteger", [("x", _u8(1, 16, 48, 48)), ("w", _u8(16, 16, 3, 3, seed=1))],
        {"pads": [1, 1, 1, 1]}),
    "LRN": lambda: _model("LRN", [("x", _f32(1, 32, 32, 32))], {"size": 5}),
    "Cast": lambda: _model("Cast", [("x", _f32(64, 512))], {"to": onnx.TensorProto.FLOAT16}),
    "Tile": lambda: _model("Tile", [("x", _f32(32, 256)), ("r", np.array([2, 2], np.int64))]),
    "QLinearAveragePool": lambda: _model(
        "QLinearAveragePool", [("x", _u8(1, 16, 48, 48)), _q("xs", 0.02, np.float32),
                               _q("xz", 128, np.uint8), _q("ys", 0.03, np.float32),
                               _q("yz", 125, np.uint8)], {"kernel_shape": [3, 3]},
        domain="com.microsoft"),
    "QLinearLookup": lambda: _model(
        "QLinearLookup", [("x", _u8(1, 64, 32, 16)), ("t", _u8(256, seed=3))],
        domain="ai.pyarena"),
    "BatchNormalization": lambda: _model(
        "BatchNormalization", [("x", _f32(1, 32, 32, 32)), ("s", _f32(32, seed=1)),
                               ("b", _f32(32, seed=2)), ("m", _f32(32, seed=3)),
                               ("v", np.abs(_f32(32, seed=4)) + 0.5)]),
    "InstanceNormalization": lambda: _model(
        "InstanceNormalization", [("x", _f32(1, 32, 32, 32)), ("s", _f32(32, seed=1)),
                                  ("b", _f32(32, seed=2))]),
    "Relu6": _unary("Relu6"),
    "Rsqrt": lambda: _model("Rsqrt", [("x", np.abs(_f32(64, 512)) + 0.1)]),
    "Square": _unary("Square"),
    "Logistic": _unary("Logistic"),
    "SquaredDifference": lambda: _model("SquaredDifference", [("a", _f32(64, 512)),
                                                              ("b", _f32(512, seed=1))]),
    # onnxruntime's transformer ops: (batch, seq, hidden) activations
    "SkipLayerNormalization": lambda: _model(
        "SkipLayerNormalization", [("x", _f32(8, 64, 256)), ("s", _f32(8, 64, 256, seed=1)),
                                   ("g", _f32(256, seed=2)), ("b", _f32(256, seed=3))],
        domain="com.microsoft"),
    "SkipSimplifiedLayerNormalization": lambda: _model(
        "SkipSimplifiedLayerNormalization", [("x", _f32(8, 64, 256)),
                                             ("s", _f32(8, 64, 256, seed=1)),
                                             ("g", _f32(256, seed=2))], domain="com.microsoft"),
    "SimplifiedLayerNormalization": lambda: _model(
        "SimplifiedLayerNormalization", [("x", _f32(8, 64, 256)), ("g", _f32(256, seed=2))]),
    "EmbedLayerNormalization": lambda: _model(
        "EmbedLayerNormalization", [("ids", _u8(8, 64).astype(np.int32)), ("seg", None),
                                    ("w", _f32(256, 256, seed=1)), ("p", _f32(64, 256, seed=2)),
                                    ("se", None), ("g", _f32(256, seed=3)),
                                    ("b", _f32(256, seed=4))], domain="com.microsoft"),
    "com.microsoft.Gelu": lambda: _model("Gelu", [("x", _f32(64, 512))], domain="com.microsoft"),
    "QuickGelu": lambda: _model("QuickGelu", [("x", _f32(64, 512))], domain="com.microsoft"),
    "BiasGelu": lambda: _model("BiasGelu", [("x", _f32(64, 512)), ("b", _f32(512, seed=1))],
                               domain="com.microsoft"),
    "FastGelu": lambda: _model("FastGelu", [("x", _f32(64, 512)), ("b", _f32(512, seed=1))],
                               domain="com.microsoft"),
    "BiasAdd": lambda: _model("BiasAdd", [("x", _f32(8, 64, 256)), ("b", _f32(256, seed=1)),
                                          ("s", _f32(8, 64, 256, seed=2))],
                              domain="com.microsoft"),
    "MatMulNBits": lambda: _model(
        "MatMulNBits", [("a", _f32(64, 256)), ("w", _u8(256, 8, 16, seed=1)),
                        ("s", np.abs(_f32(256 * 8, seed=2)))],
        {"K": 256, "N": 256, "bits": 4, "block_size": 32}, domain="com.microsoft"),
}


def macs(op_type, ins, outs, attrs):
    """Multiply-adds of the op (0 for ops without a product): ``ins`` /
    ``outs`` the shapes, ``attrs`` the op's attributes."""
    if op_type in ("MatMul", "MatMulInteger", "QLinearMatMul", "Gemm", "FullyConnected",
                   "MatMulNBits"):
        a = ins[0]
        k = a[0] if op_type == "Gemm" and attrs.get("transA", 0) else a[-1]
        return math.prod(outs[0]) * k
    if op_type in ("Conv", "ConvInteger", "QLinearConv", "DeformConv"):
        w = ins[3] if op_type == "QLinearConv" else ins[1]
        return math.prod(outs[0]) * math.prod(w[1:])
    if op_type == "ConvTranspose":
        return math.prod(ins[0]) * math.prod(ins[1][1:])
    if op_type in ("LSTM", "GRU", "RNN"):
        s, n = ins[0][0], ins[0][1]
        return s * n * (math.prod(ins[1]) + math.prod(ins[2]))
    if op_type == "Einsum":
        eq = attrs["equation"].replace(" ", "").split("->")[0].split(",")
        size = {}
        for term, shape in zip(eq, ins):
            for ch, d in zip(term.replace("...", ""), shape[-len(term.replace("...", "")):]):
                size[ch] = d
        return math.prod(size.values())
    return 0


def scaled(model, inputs, family):
    """(model, inputs) with the first input tiled to about TARGET elements
    along the family's axes (the inputs of its shape with it), the other
    inputs constants; None when the first input is not a float / integer
    tensor of at least one dimension."""
    x0 = np.asarray(inputs[0])
    if x0.ndim == 0 or x0.size == 0 or x0.dtype.kind not in "fiub":
        return None
    axes = [a % x0.ndim for a in SCALE_AXES.get(family, (0,))]
    if len(set(axes)) != len(axes):
        axes = [axes[-1]]
    k = max(1, TARGET // x0.size)
    per = max(1, round(k ** (1 / len(axes))))
    reps = [1] * x0.ndim
    for a in axes:
        reps[a] = per
    new = [np.tile(x, reps) if np.asarray(x).shape == x0.shape else np.asarray(x)
           for x in inputs]
    g = model.graph
    node = g.node[0]
    names = [n for n in node.input]
    feeds = {vi.name: v for vi, v in zip(g.input, new)}
    first = names[0]
    if first not in feeds:
        return None
    consts = [numpy_helper.from_array(np.asarray(feeds[n]), n) for n in names[1:]
              if n and n in feeds and n != first]
    ty = helper.np_dtype_to_tensor_dtype(feeds[first].dtype)
    outs = [helper.make_tensor_value_info(o.name, onnx.TensorProto.UNDEFINED, None)
            for o in g.output]
    g2 = helper.make_graph([node], g.name, [helper.make_tensor_value_info(
        first, ty, list(feeds[first].shape))], outs, consts)
    m = helper.make_model(g2, opset_imports=model.opset_import)
    m.ir_version = min(model.ir_version, 10)
    return m, [feeds[first]]


def built(model, x0, budget, path):
    """[(kernel, xs, ys, scratch)] of the model's ops imported by pyarena
    with ``budget``, the graph input fed ``x0``; raises what the import
    raises."""
    from pyarena.importers import load_model
    from pyarena.runtime.kernels import make_kernel
    onnx.save(model, path)
    g = load_model(path, layout="keep")
    if g.pool_ops():
        raise LookupError("an output sized by the data (a pool tensor)")
    vals = {g.inputs[0]: np.ascontiguousarray(x0.astype(g.tensors[g.inputs[0]].dtype))}
    for t in g.tensors.values():
        if t.data is not None:
            vals[t.name] = np.asarray(t.data)
    steps = []
    for op in g.ops:
        ins = [g.tensors[t] if t else None for t in op.inputs]
        outs = [g.tensors[t] for t in op.outputs if t]
        k = make_kernel(op, ins, outs, None, budget, True)
        xs = [vals.get(t) if t else None for t in op.inputs]
        ys = [np.empty(tuple(int(d) for d in t.shape), t.dtype) for t in outs]
        for t, y in zip(outs, ys):
            vals[t.name] = y
        sc = np.empty(k.scratch_bytes, np.uint8) if k.scratch_bytes else None
        k(xs, ys, sc)
        steps.append((k, xs, ys, sc))
    return steps


def reduced_axes(k, x):
    """The axes a reduce-family op reduces ``x`` over: its ``axes`` (an
    attribute or a constant input) or ``axis`` (then to the end for the
    opset < 13 softmaxes, else that axis), else all (Reduce*) or the last."""
    a = k.attrs.get("axes")
    if a is None and len(k.ins) > 1 and k.ins[1] is not None and k.ins[1].data is not None \
            and np.asarray(k.ins[1].data).dtype.kind == "i" and k.op.op_type.startswith("Reduce"):
        a = np.asarray(k.ins[1].data).reshape(-1).tolist()
    if a is not None:
        return tuple(int(i) % max(x.ndim, 1) for i in a) or tuple(range(x.ndim))
    if "axis" in k.attrs:
        return (int(k.attrs["axis"]) % max(x.ndim, 1),)
    return tuple(range(x.ndim)) if k.op.op_type.startswith("Reduce") else (x.ndim - 1,)


def work(steps):
    """(elements, multiply-adds, [(array, axes)] reductions) the baseline
    does for these steps: exps over the larger of the inputs' and outputs'
    elements (a recurrent op: and 3 over its gates per time step; a
    ConvTranspose: and one per multiply-add, its col2im adds), the op's
    multiply-adds, and a sum over the axes a reduce-family op (or a
    quantized softmax) reduces."""
    from pyarena.runtime.kernels import op_fact
    elems = mac = 0
    reductions = []
    for k, xs, ys, _ in steps:
        t = k.op.op_type
        n_in = sum(x.size for x in xs if x is not None)
        elems += max(n_in, sum(y.size for y in ys))
        shapes = [x.shape if x is not None else () for x in xs]
        mac += macs(t, shapes, [y.shape for y in ys], k.attrs)
        if t == "ConvTranspose":    # its col2im: one add per multiply-add
            elems += macs(t, shapes, [y.shape for y in ys], k.attrs)
        if t in ("LSTM", "GRU", "RNN"):
            elems += 3 * shapes[0][0] * shapes[0][1] * shapes[1][0] * shapes[1][1]
        if (op_fact(t, "family") == "reduce" or t.endswith("Softmax")) and \
                xs[0] is not None and xs[0].ndim:
            reductions.append((np.ascontiguousarray(xs[0], np.float32),
                               reduced_axes(k, xs[0])))
    return elems, mac, reductions


def baseline(elems, mac, reductions=()):
    """A vectorised call doing ``elems`` exps, ``mac`` multiply-adds and
    the sums of ``reductions``."""
    a = np.random.default_rng(0).standard_normal(max(elems, 1)).astype(np.float32)
    out = np.empty_like(a)
    if reductions:
        def with_sums():
            np.exp(a, out=out)
            for x, axes in reductions:
                np.add.reduce(x, axis=axes, keepdims=True)
        if not mac:
            return with_sums
    if not mac:
        return lambda: np.exp(a, out=out)
    m = 64
    kk = max(1, int(math.sqrt(mac / m)))
    n = max(1, mac // (m * kk))
    p = np.ones((m, kk), np.float32)
    q = np.ones((kk, n), np.float32)
    r = np.empty((m, n), np.float32)

    def both():
        np.exp(a, out=out)
        np.matmul(p, q, out=r)
        for x, axes in reductions:
            np.add.reduce(x, axis=axes, keepdims=True)
    return both


#: a kernel this many times slower than its baseline after one call is not timed again
HOPELESS = 200
#: ... and at least this long (s): a single slow call of a fast kernel is a
#: busy machine, not a cliff, so it is timed again
HOPELESS_SECONDS = 0.05


def ratio(steps, repeat=5):
    """(kernel seconds, baseline seconds): minima over ``repeat``
    alternating calls (one, when the first is :data:`HOPELESS` times the
    baseline's and over :data:`HOPELESS_SECONDS`)."""
    base = baseline(*work(steps))
    base()
    for k, xs, ys, sc in steps:         # warm: first touches and lazy set-up untimed
        k(xs, ys, sc)
    tk, tb = [], []
    for i in range(repeat):
        if i == 1 and tk[0] > HOPELESS * tb[0] and tk[0] > HOPELESS_SECONDS:
            break
        t0 = time.perf_counter()
        for k, xs, ys, sc in steps:
            k(xs, ys, sc)
        t1 = time.perf_counter()
        base()
        t2 = time.perf_counter()
        tk.append(t1 - t0)
        tb.append(t2 - t1)
    return min(tk), min(tb)


def survey(tmpdir, ops=None, repeat=5):
    """{op type: {budget: (kernel s, baseline s)}} for every kernel
    (``ops``: those only) that could be built from a scaled conformance
    case or a recipe, and {op type: why not} for the others."""
    import os

    from pyarena.runtime.kernels import KERNELS, op_fact
    from pyarena.runtime.kernels.spatial import Spatial
    ops = sorted(t for t, c in KERNELS.items() if c.__module__.startswith("pyarena.")) \
        if ops is None else sorted(ops)
    cases = conformance_cases(set(ops) - set(RECIPES))
    timed, missed = {}, {}
    for op in ops:
        family = op_fact(op, "family")
        if issubclass(KERNELS[op], Spatial):       # a window over H, W: tiled there
            family = "conv"
        tries = [RECIPES[op]()] if op in RECIPES else \
            [(m, ins, False) for m, ins in cases.get(op, ())]
        if not tries:
            missed[op] = "no conformance case and no recipe"
            continue
        why = None
        for model, ins, ready in tries:
            got = (model, ins) if ready else scaled(model, ins, family)
            if got is None:
                why = why or "the first input is not a tensor that can be tiled"
                continue
            path = os.path.join(str(tmpdir), f"{op}.onnx")
            try:
                res = {}
                for b in BUDGETS:
                    res[b] = ratio(built(got[0], got[1][0], b, path), repeat)
            except Exception as exc:        # this case does not scale: the next one
                why = f"{type(exc).__name__}: {str(exc)[:90]}"
                continue
            timed[op] = res
            break
        else:
            missed[op] = why
    return timed, missed
