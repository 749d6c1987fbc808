"""QDQ models run on integers: ``DequantizeLinear -> op -> QuantizeLinear``
chains become integer operators before import.

A QDQ model (onnxruntime's default quantization format) stores int8
weights behind ``DequantizeLinear`` (DQ) nodes and wraps each float
operator in DQ / QuantizeLinear (Q) pairs.  Run op by op, weights would
be expanded to float32 and every activation dequantized around each op.
This rewrite, on the ONNX nodes, replaces an operator whose data inputs
come from DQ nodes (constant scales and zero points, per tensor) and whose
only reader is a Q node with the integer operator onnxruntime itself
would run:

* an op whose integer form a kernel declares (``Kernel.qdq_form``):
  ``Conv`` / ``MatMul`` with a DQ'd constant int8/uint8 weight (per tensor
  or per output channel) and, for Conv, a DQ'd int32 bias of scale
  ``x_scale * w_scale`` -> ``QLinearConv`` / ``QLinearMatMul``; an
  element-wise or pooling op (Add, Mul, Sigmoid, LeakyRelu,
  GlobalAveragePool, Softmax on the last axis, Concat) -> its
  ``com.microsoft`` QLinear op;
* an op that only moves or selects (``Kernel.qdq`` = ``"same_scale"``:
  MaxPool, Reshape, Transpose ...) whose input and output quantization
  are the same -> the op itself on the integer tensor (exact);
* an element-wise function of one 8-bit input (``Kernel.qdq`` =
  ``"lookup"``: Relu, HardSwish, Tanh ..., and the arithmetic ops with a
  constant scalar) -> ``QLinearLookup`` (domain ``ai.pyarena``): its 256
  results, worked out at import in float32 by the op's own evaluator
  (``Kernel.evaluate``) and quantized, looked up per element.

The integer forms are chosen as onnxruntime's optimiser chooses them on
x86 (its QDQ selectors, qdq_selectors.cc), since a fused group rounds
differently from its op-by-op run: an int8 activation pair Q -> DQ read
once counts as uint8 (its QDQS8ToU8Transformer), and an element-wise,
concatenation or unary group fuses only when its 8-bit types then agree.
One choice differs: a Conv / MatMul fuses whatever its activation types
(onnxruntime's x86 selectors take no int8 activations and run such a Conv
in float, with float weights; the results agree within a quantum on the
files measured, and the integer kernels keep int8's speed and memory).
Gemm becomes ``QGemm``, a MatMul of two activations ``QLinearMatMul``.
Groups onnxruntime leaves in float keep its float32 steps, in one pass
where they allow it: an Add / Mul as ``QDQAdd`` / ``QDQMul`` (ai.pyarena),
an inference BatchNormalization as a ``QLinearLookup`` with a table per
channel (where a channel's plane has 256+ values: the tables stay smaller
than the activations they map), with the element-wise ops after it (Relu,
Clip ...) in the same table when a QOperator file's float island runs on
to ops that only move values and then a Q -- those then move the 8-bit
values (``_channel_chain``); a float AveragePool / GlobalAveragePool
reading a DQ is marked ``mlas_order`` (its kernel then sums as MLAS does).

The weights stay in their file dtype and the activations between such ops
stay 8-bit.  Anything else runs op by op; a DQ still read elsewhere stays.
"""
import numpy as np

from ..runtime.kernels import OPS, op_fact, op_table
from ..runtime.kernels.quantization import dequantize
from ..runtime.kernels.shape_rules import Node
from .onnx_qdq_graph import QdqGraph as _Graph
from .onnx_qdq_weights import quantize_float_weights

__all__ = ["fuse_qdq"]

LOOKUP_DOMAIN = "ai.pyarena"


def _integer_forms():
    """float op type -> (its integer op type, that op's domain)."""
    return {t: (q, OPS[q].onnx_domain) for q, t in op_table("qdq_form").items()}


def _conv_matmul(G, n, q):
    """QLinearConv / QLinearMatMul for a Conv / MatMul, or None."""
    dx, dw = G.dq(n.input[0], False), G.dq(n.input[1], True)
    if dw is None and n.op_type == "MatMul":      # a B computed at run time
        dw = G.dq(n.input[1], False)
        if dw is not None and not G.per_tensor(dw):
            return None
    if dx is None or dw is None or not G.per_tensor(dx):
        return None
    # (onnxruntime's x86 selectors also ask for equal activation types, not
    # int8: it runs the others in float.  pyarena's integer kernels take
    # them; on the files measured the results are as near onnxruntime's --
    # ResNet-50 QDQ 1 quantum either way -- at int8 speed and size: 0.99x
    # onnxruntime and 27.6 MiB of weights, against 2.6x and 74.7 MiB)
    if G.qtype(dw) not in (np.dtype(np.int8), np.dtype(np.uint8)):
        return None
    w_scale = G.value(dw.input[1])
    axis = G.attrs(dw).get("axis", 1)
    if w_scale.size > 1 and axis != (0 if n.op_type == "Conv" else 1):
        return None
    ins = [dx.input[0], dx.input[1], dx.input[2], dw.input[0], dw.input[1], dw.input[2],
           q.input[1], q.input[2]]
    used = [dx, dw]
    if n.op_type == "Conv" and len(n.input) > 2 and n.input[2]:
        db = G.dq(n.input[2], True)
        if db is None or G.int_dtype(db.input[0]) != np.dtype(np.int32):
            return None
        want = (G.value(dx.input[1]).reshape(-1)[0] * w_scale.reshape(-1)).astype(np.float32)
        b_scale = np.broadcast_to(G.value(db.input[1]).reshape(-1), want.shape)
        if not np.allclose(b_scale, want, rtol=1e-5) or G.value(db.input[2]).any():
            return None
        ins.append(db.input[0])
        used.append(db)
    return _integer_forms()[n.op_type][0], "", ins, G.attrs(n), used


def _gemm(G, n, q):
    """com.microsoft QGemm for a Gemm (GemmNodeGroupSelector,
    GemmReplaceWithQuant): A, B and C (int32) from DQ nodes, B constant;
    an int8 A needs an int8 B; beta 1 with C, and dropped."""
    da, db = G.dq(n.input[0], False), G.dq(n.input[1], True)
    if da is None or db is None or not G.per_tensor(da):
        return None
    ta, tb = G.qtype(da), G.qtype(db)
    if ta != G.qtype(q) or tb not in (np.dtype(np.int8), np.dtype(np.uint8)) or \
            (ta == np.dtype(np.int8) and tb != ta):
        return None
    attrs = G.attrs(n)
    trans_b = int(attrs.get("transB", 0))
    if int(attrs.get("transA", 0)) or G.value(db.input[1]).size > 1 and \
            G.attrs(db).get("axis", 1) != (0 if trans_b else 1):
        return None         # pyarena's QGemm: A as is, B's scale per output column
    ins = [da.input[0], da.input[1], da.input[2], db.input[0], db.input[1], db.input[2], ""]
    used = [da, db]
    if len(n.input) > 2 and n.input[2]:
        dc = G.dq(n.input[2], True)
        if dc is None or G.int_dtype(dc.input[0]) != np.dtype(np.int32) or \
                float(attrs.get("beta", 1.0)) != 1.0:
            return None
        ins[6] = dc.input[0]
        used.append(dc)
    attrs.pop("beta", None)
    return "QGemm", "com.microsoft", ins + [q.input[1], q.input[2]], attrs, used


def _contrib(G, n, q):
    """The com.microsoft QLinear op for an element-wise / pooling op."""
    op = _integer_forms()[n.op_type][0]
    attrs = G.attrs(n)
    data = [i for i in n.input if i]
    dqs = [G.dq(i, False) or G.dq(i, True) for i in data]
    if any(d is None or not G.per_tensor(d) for d in dqs):
        return None
    if op in ("QLinearAdd", "QLinearMul", "QLinearConcat"):
        types = {G.qtype(d) for d in dqs} | {G.qtype(q)}      # Binary / Variadic selectors
    else:
        types = {G.qtype(dqs[0]), G.qtype(q)}                 # UnaryNodeGroupSelector
    if len(types) != 1:
        return None
    triples = [[d.input[0], d.input[1], d.input[2]] for d in dqs]
    out_q = [q.input[1], q.input[2]]
    if op in ("QLinearAdd", "QLinearMul"):
        if len(triples) != 2:
            return None
        ins = triples[0] + triples[1] + out_q
    elif op == "QLinearConcat":
        ins = out_q + [x for t in triples for x in t]
    else:
        if len(triples) != 1:
            return None
        ins = triples[0] + out_q
    if op == "QLinearSoftmax":
        attrs = {"axis": int(attrs.get("axis", -1)), "opset": 13}
    if op == "QLinearGlobalAveragePool":
        attrs = {"channels_last": 0}
    return op, "com.microsoft", ins, attrs, dqs


def _unfused_binary(G, n, q):
    """ai.pyarena QDQAdd / QDQMul for an Add / Mul onnxruntime's selectors
    refuse (operand types differ after its uint8 pairs): the same float32
    steps as its op-by-op run, in one pass over the 8-bit operands."""
    if n.op_type not in ("Add", "Mul") or len(n.input) != 2:
        return None
    dqs = [G.dq(i, False) or G.dq(i, True) for i in n.input]
    if any(d is None or not G.per_tensor(d) for d in dqs):
        return None
    types = {G.int_dtype(d.input[2]) for d in dqs} | {G.int_dtype(q.input[2])}
    if len(types) != 1 or types.pop() not in (np.dtype(np.int8), np.dtype(np.uint8)):
        return None
    ins = [x for d in dqs for x in d.input[:3]] + [q.input[1], q.input[2]]
    return "QDQ" + n.op_type, LOOKUP_DOMAIN, ins, {}, dqs


def _same_scale(G, n, q):
    """The op itself on the integer tensor when DQ and Q agree."""
    dx = G.dq(n.input[0], False)
    if dx is None or not G.per_tensor(dx) or not G.same_quant(dx, q):
        return None
    if any(i and i not in G.inits for i in n.input[1:]):
        return None          # e.g. a Reshape target computed at run time
    return n.op_type, "", [dx.input[0]] + list(n.input[1:]), G.attrs(n), [dx]


def _float_function(op, attrs, x, c, c_first):
    """``op`` on the float32 array ``x`` by its own evaluator (``c``: the
    constant operand of a binary op, first if ``c_first``; Clip's (lo, hi)),
    or None if it has none or needs an operand it was not given."""
    evaluate = op_fact(op, "evaluate")
    if evaluate is None:
        return None
    if op_fact(op, "family") == "binary":
        if c is None:
            return None
        c = np.float32(c)
        values = [c, x] if c_first else [x, c]
    elif op == "Clip":
        lo, hi = c if c is not None else (attrs.get("min", -np.inf), attrs.get("max", np.inf))
        values, attrs = [x], {"min": lo, "max": hi}
    else:
        values = [x]
    return evaluate(Node.on_values(op, attrs, values))[0]


def _constant_operand(G, n, k):
    """(True, c) for an element-wise op whose runtime input is input ``k``
    and whose other operand, if any, is a constant scalar (Clip: its
    (lo, hi)); (False, None) otherwise."""
    if any(name and i != k and name not in G.inits for i, name in enumerate(n.input)):
        return False, None
    consts = [G.value(name).astype(np.float32) for i, name in enumerate(n.input)
              if name and i != k]
    if n.op_type == "Clip":
        if k != 0:
            return False, None
        lo = G.value(n.input[1]).reshape(-1)[0] if len(n.input) > 1 and n.input[1] else -np.inf
        hi = G.value(n.input[2]).reshape(-1)[0] if len(n.input) > 2 and n.input[2] else np.inf
        return True, (lo, hi)
    if consts:
        if len(consts) != 1 or consts[0].size != 1:
            return False, None
        return True, consts[0].reshape(())
    return True, None


def _lookup(G, n, q):
    """QLinearLookup for an element-wise function of one 8-bit input."""
    runtime = [i for i, name in enumerate(n.input) if name and name not in G.inits]
    if len(runtime) != 1:
        return None
    k = runtime[0]
    dx = G.dq(n.input[k], False)
    if dx is None or not G.per_tensor(dx):
        return None
    in_dt = G.int_dtype(dx.input[2])
    out_dt = G.int_dtype(q.input[2])
    if in_dt not in (np.dtype(np.int8), np.dtype(np.uint8)) or \
            out_dt not in (np.dtype(np.int8), np.dtype(np.uint8)):
        return None
    ok, c = _constant_operand(G, n, k)
    if not ok:
        return None
    u = np.arange(256, dtype=np.uint8)            # the input's bytes, in index order
    # float32 like onnxruntime's; (q - zp) * s is exact in float64, then rounded once
    x = dequantize(u.view(in_dt), G.value(dx.input[1]), G.value(dx.input[2])).astype(np.float32)
    with np.errstate(all="ignore"):
        y = _float_function(n.op_type, G.attrs(n), x, c, k == 1)
    if y is None or not np.isfinite(y).all():
        return None
    lo, hi = (-128, 127) if out_dt == np.int8 else (0, 255)
    yq = np.clip(np.rint(y.astype(np.float32) / np.float32(G.value(q.input[1])))
                 + float(G.value(q.input[2])), lo, hi).astype(out_dt)
    name = f"{q.output[0]}/lookup"
    G.add_constant(yq, name)
    return "QLinearLookup", LOOKUP_DOMAIN, [dx.input[0], name], {}, [dx]


def _const_float(G, name):
    """A float32 constant: an initializer or the DQ of one, or None."""
    if name in G.inits:
        return np.asarray(G.value(name), np.float32)
    d = G.dq(name, True)
    if d is None:
        return None
    return dequantize(G.value(d.input[0]), G.value(d.input[1]), G.value(d.input[2]),
                      G.attrs(d).get("axis", 1)).astype(np.float32)


def _channel_lookup(G, n, q, funcs=()):
    """QLinearLookup with a table per channel for an inference
    BatchNormalization between a DQ and a Q, which onnxruntime runs in
    float32 op by op: the same steps (the fold of runtime/kernels/
    batch_norm.py, x * scale + shift, then the element-wise ``funcs``
    (Relu, Clip ...) by their own evaluators, QuantizeLinear) on each byte
    of each channel, worked out at import."""
    attrs = G.attrs(n)
    dx = G.dq(n.input[0], False)
    if int(attrs.get("training_mode", 0)) or len(n.input) != 5 or dx is None or \
            not G.per_tensor(dx):
        return None
    in_dt, out_dt = G.int_dtype(dx.input[2]), G.int_dtype(q.input[2])
    if in_dt not in (np.dtype(np.int8), np.dtype(np.uint8)) or \
            out_dt not in (np.dtype(np.int8), np.dtype(np.uint8)):
        return None
    params = [_const_float(G, name) for name in n.input[1:5]]
    if any(p is None for p in params) or len({p.size for p in params}) != 1:
        return None
    # a table per channel only where it is no larger than the bytes it maps
    # (a plane of 256+ values, the shape known from the file's value_info)
    shape = G.shapes.get(n.input[0]) or G.shapes.get(n.output[0]) or []
    if len(shape) < 3 or min(shape) < 1 or int(np.prod(shape[2:])) < 256:
        return None
    g, b, m, v = (p.reshape(-1, 1) for p in params)
    eps = np.float32(attrs.get("epsilon", 1e-5))
    scale = (np.float32(1) / np.sqrt(v + eps)) * g      # onnxruntime's order
    shift = b - m * scale
    u = np.arange(256, dtype=np.uint8).view(in_dt)
    x = dequantize(u, G.value(dx.input[1]), G.value(dx.input[2])).astype(np.float32)
    y = x[None, :] * scale + shift                      # (C, 256), two roundings
    for f in funcs:
        _, c = _constant_operand(G, f, 0)
        with np.errstate(all="ignore"):
            y = _float_function(f.op_type, G.attrs(f), y.astype(np.float32), c, False)
        if y is None or not np.isfinite(y).all():
            return None
    lo, hi = (-128, 127) if out_dt == np.int8 else (0, 255)
    yq = np.clip(np.rint(y / np.float32(G.value(q.input[1]))) + float(G.value(q.input[2])),
                 lo, hi).astype(out_dt)
    name = f"{q.output[0]}/lookup"
    G.add_constant(yq, name)
    used = [dx] + [G.producer[i] for i in n.input[1:5] if i not in G.inits]
    return "QLinearLookup", LOOKUP_DOMAIN, [dx.input[0], name], {}, used


def _channel_chain(G, n):
    """A QOperator file's float island after a QLinearConv: DQ ->
    BatchNormalization -> element-wise ops (Relu, Clip ...) -> ops that only
    move values (Reshape, Transpose, MaxPool ...) -> Q, each result read
    only by the next.  onnxruntime runs it in float32 op by op.  Returns
    (the lookup rule's result, the Q, the element-wise nodes folded into
    the table, the moving nodes, which then run on the 8-bit lookup's
    output), or None."""
    funcs, moves, cur = [], [], n
    while True:
        rs = G.readers.get(cur.output[0], [])
        if cur.output[0] in G.outputs or len(rs) != 1 or len(cur.output) != 1:
            return None
        nxt = rs[0]
        if nxt.domain not in ("", "ai.onnx") or not nxt.input or nxt.input[0] != cur.output[0]:
            return None
        if nxt.op_type == "QuantizeLinear":
            break
        # an op that only moves or selects values (Reshape, Transpose,
        # MaxPool ...): Q(move(y)) == move(Q(y)) for the monotonic Q
        if op_fact(nxt.op_type, "qdq") == "same_scale" and len(nxt.output) == 1 and \
                all(i in G.inits for i in nxt.input[1:] if i):
            moves.append(nxt)
        elif not moves and op_fact(nxt.op_type, "qdq") == "lookup" and \
                _constant_operand(G, nxt, 0)[0]:
            funcs.append(nxt)
        else:
            return None
        cur = nxt
    q = G.only_q(cur.output[0])
    if q is None or not funcs and not moves or float(G.value(q.input[1]).reshape(-1)[0]) <= 0:
        return None
    found = _channel_lookup(G, n, q, funcs)
    return None if found is None else (found, q, funcs, moves)


def _moves_on_integers(onnx, G, q, moves, new_nodes):
    """The moving nodes of a float island, on the 8-bit values instead,
    the last one writing the Q's output; returns the name their first one
    reads (the lookup's output), or None without any."""
    if not moves:
        return None
    first = prev = f"{q.output[0]}/lookup_out"
    for i, m in enumerate(moves):
        o = q.output[0] if i == len(moves) - 1 else f"{m.output[0]}/int"
        new_nodes[id(m)] = onnx.helper.make_node(m.op_type, [prev] + list(m.input[1:]), [o],
                                                 name=m.name or f"{m.op_type}_{o}",
                                                 **G.attrs(m))
        prev = o
    return first


def fuse_qdq(onnx, model, views=None):
    """Rewrite ``model.graph`` in place; returns the number of fused ops.
    ``views``: initializer name -> data read in place (not in the protobuf)."""
    g = model.graph
    quantize_float_weights(onnx, g, views)      # as onnxruntime's optimiser, first
    G = _Graph(onnx, g, views)
    forms = _integer_forms()
    new_nodes, replaced, dqs = {}, set(), {}
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or not n.output or not n.output[0]:
            continue
        rules = _rules(n.op_type, forms)
        if not rules or n.op_type == "Softmax" and _opset(model) < 13:
            continue
        q = G.only_q(n.output[0])
        found, out = None, None
        if q is not None and len(n.output) == 1:
            for rule in rules:
                found = rule(G, n, q)
                if found is not None:
                    break
        elif n.op_type == "BatchNormalization" and len(n.output) == 1:
            chain = _channel_chain(G, n)
            if chain is not None:
                found, q, funcs, moves = chain
                out = _moves_on_integers(onnx, G, q, moves, new_nodes)
                replaced.update(id(f) for f in funcs)
        if found is None:
            continue
        op, domain, ins, attrs, used = found
        out = out or q.output[0]
        new_nodes[id(n)] = onnx.helper.make_node(op, ins, [out], domain=domain or None,
                                                 name=n.name or f"{op}_{q.output[0]}", **attrs)
        replaced.add(id(q))
        for d in used:
            dqs[id(d)] = d
    _mark_float_pools(onnx, G, g)
    if not new_nodes:
        return 0
    # a DQ goes when no remaining node (or graph output) reads it any more
    read = set(G.outputs)
    for n in g.node:
        if id(n) in replaced:
            continue
        node = new_nodes.get(id(n), n)
        if id(n) in dqs:
            continue
        read.update(i for i in node.input if i)
    kept = []
    for n in g.node:
        if id(n) in replaced:
            continue
        if id(n) in dqs and n.output[0] not in read:
            continue
        kept.append(new_nodes.get(id(n), n))
    del g.node[:]
    g.node.extend(kept)
    g.initializer.extend(G.new_inits)
    for domain in ("com.microsoft", LOOKUP_DOMAIN):
        if any(n.domain == domain for n in new_nodes.values()) and not any(
                o.domain == domain for o in model.opset_import):
            model.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    return len(new_nodes)


#: float pools onnxruntime runs on a DequantizeLinear's output (a float
#: island of a QDQ file) with MLAS's own summation order, which the kernels
#: follow when the node says ``mlas_order`` (runtime/kernels/pooling.py)
_MLAS_POOLS = ("AveragePool", "GlobalAveragePool")


def _mark_float_pools(onnx, G, g):
    """``mlas_order=1`` on each float AveragePool / GlobalAveragePool that
    reads a DequantizeLinear: its sums are then rounded as onnxruntime's
    (a quantum apart otherwise after the next QuantizeLinear)."""
    for n in g.node:
        if n.op_type in _MLAS_POOLS and n.domain in ("", "ai.onnx") and n.input and \
                G.producer.get(n.input[0]) is not None and \
                G.producer[n.input[0]].op_type == "DequantizeLinear":
            n.attribute.append(onnx.helper.make_attribute("mlas_order", 1))


def _rules(op_type, forms):
    """The rewrites tried for a QDQ chain around ``op_type``, in order."""
    if op_type == "Gemm":
        return [_gemm]
    if op_type == "BatchNormalization":
        return [_channel_lookup]
    rules = []
    form = forms.get(op_type)
    if form is not None:        # the integer op: a standard one takes a weight
        rules.append(_contrib if form[1] else _conv_matmul)
    if op_type in ("Add", "Mul"):
        rules.append(_unfused_binary)
    kind = op_fact(op_type, "qdq")
    if kind == "same_scale":
        rules.append(_same_scale)
    elif kind == "lookup":
        rules.append(_lookup)
    return rules


def _opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1
