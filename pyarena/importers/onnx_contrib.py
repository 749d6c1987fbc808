"""Shapes for the ``com.microsoft`` (and ``ai.onnx.ml``) operators pyarena
runs.

ONNX shape inference skips operators outside the standard domains, so
everything downstream of onnxruntime's quantized ``QLinear*`` contrib ops
would stay unsized.  :func:`infer_with_contrib` runs the standard
inference, then derives each contrib op's output shape and type from its
inputs by the op's own rule (its kernel's ``shape_rule``:
:mod:`pyarena.runtime.kernels.shape_rules_quantized`, ``shape_rules_contrib``
for the transformer ops; every output the rule sizes), records them as
``value_info`` and infers again, until nothing new is learnt.  The same fills the standard ops ONNX
leaves unsized (GroupNormalization, a function op in opset 18: its output
has its input's shape and type).

A contrib op whose name a standard op has too (com.microsoft's Attention,
RotaryEmbedding, Gelu) is filed by its kernel as ``domain.name``
(``com.microsoft.Attention``): :func:`name_contrib_ops` gives the model's
nodes that op type before anything reads them.
"""
from ..runtime.kernels import KERNELS, OPS, op_fact
from ..runtime.kernels.shape_rules import Node

__all__ = ["CONTRIB_DOMAINS", "runs_in_domain", "rule_of", "infer_with_contrib",
           "full_shapes", "kernel_op_type", "name_contrib_ops"]

#: (ai.onnx.ml: ONNX sizes some of its ops, not a TreeEnsemble's output)
CONTRIB_DOMAINS = ("com.microsoft", "ai.pyarena", "ai.onnx.ml")
#: standard ops ONNX shape inference leaves unsized; output 0 is input 0's shape
_UNSIZED_STANDARD = ("GroupNormalization",)


def kernel_op_type(op_type, domain):
    """The op type a kernel files ``op_type`` of ``domain`` under:
    ``domain.op_type`` when one declares that (a contrib op named like a
    standard one), else ``op_type``."""
    if domain not in ("", "ai.onnx"):
        qualified = f"{domain}.{op_type}"
        if qualified in OPS:
            return qualified
    return op_type


def name_contrib_ops(onnx, graph):
    """Give each node of ``graph`` (and of its bodies) the op type its
    kernel files it under (:func:`kernel_op_type`), in place; returns the
    number renamed."""
    renamed = 0
    for n in graph.node:
        kind = kernel_op_type(n.op_type, n.domain)
        if kind != n.op_type:
            n.op_type = kind
            renamed += 1
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                renamed += name_contrib_ops(onnx, a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                renamed += sum(name_contrib_ops(onnx, g) for g in a.graphs)
    return renamed


def _declared(op_type, domain):
    """Whether ``op_type`` of ``domain`` ("" or "ai.onnx": the standard
    one) is the op type a kernel (or a fold-only record) declares."""
    cls = OPS.get(kernel_op_type(op_type, domain))
    return cls is not None and cls.onnx_domain == ("" if domain in ("", "ai.onnx") else domain)


def runs_in_domain(op_type, domain):
    """Whether a kernel runs ``op_type`` of ``domain`` (a contrib domain)."""
    return op_type in KERNELS and _declared(op_type, domain)


def rule_of(op_type, domain):
    """The shape rule ``op_type`` of ``domain`` declares, or None."""
    return op_fact(kernel_op_type(op_type, domain), "shape_rule") \
        if _declared(op_type, domain) else None


def full_shapes(get):
    """A shape lookup that answers only fully known shapes (the contrib
    rules take ints)."""
    def full(k):
        s = get(k)
        return s if s is not None and all(isinstance(d, int) for d in s) else None
    return full


def infer_with_contrib(onnx, model, infer, collect):
    """``infer(model)`` (ONNX shape inference), then the contrib ops' output
    shapes added as value_info and inferred again until a fixed point."""
    m = infer(model)
    contrib = [n for n in m.graph.node if n.domain in CONTRIB_DOMAINS or (
        n.domain in ("", "ai.onnx") and n.op_type in _UNSIZED_STANDARD)]
    for _ in range(len(contrib) + 1):
        shapes, types = collect(m)
        known = lambda n: shapes.get(n) is not None and all(  # noqa: E731
            isinstance(d, int) for d in shapes[n])
        added = False
        for n in contrib:
            outs = [o for o in n.output if o and not known(o)]
            rule = rule_of(n.op_type, n.domain)
            if not outs or rule is None:
                continue
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            got = rule(Node(n, attrs, None, lambda k: shapes.get(k) if known(k) else None,
                            types.get, lambda k: None))
            for out, (shp, et) in zip(n.output, got):
                if out in outs and shp is not None and et:
                    m.graph.value_info.append(onnx.helper.make_tensor_value_info(out, et, shp))
                    added = True
        if not added:
            return m
        m = infer(m)
    return m
