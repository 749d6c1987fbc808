"""An ONNX ``Loop`` that carries a sequence or an optional (or whose body
makes one), and an ``If`` on a run-time condition whose branches make or
read one: their bodies models of their own, as a SequenceMap's
(``onnx_seqmap.py``).

Such a body's values have no size the outer plan could hold (a sequence
grows every iteration), so it is not planned in the op's scratch as a
tensor Loop's body is (``onnx_loop.py``): it becomes a model of its own,
run once per iteration by an InferenceSession (planned per shape
signature), whose inputs are the body's (iteration number, condition,
carried values) and then the names the body reads from the enclosing
graph (outer scope), which become the op's last inputs, as a tensor
Loop's do.  An If's branches are models whose inputs are the outer names
each reads.  The kernels are in ``runtime/kernels/held_loop.py``.
"""
from ..errors import UnsupportedOpError
from .onnx_loop import outer_names, subgraph_attr
from .onnx_seqmap import BodyRunner

__all__ = ["carries_held", "import_held_loop", "branches_held", "import_held_if"]

_HELD = ("sequence_type", "optional_type")


def carries_held(imp, node):
    """Whether Loop ``node`` carries a sequence or an optional, or its body
    has one among its inputs or outputs."""
    body = subgraph_attr(node, "body")
    if any(imp.types.get(x) in ("sequence", "optional") for x in node.input[2:] if x):
        return True
    return any(vi.type.WhichOneof("value") in _HELD
               for vi in list(body.input) + list(body.output))


def _type_of(imp, name, node):
    """The ValueInfo of outer name ``name`` for the body model."""
    helper = imp.onnx.helper
    g = imp.model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name == name and vi.type.WhichOneof("value") is not None:
            return vi
    et = imp.types.get(name)
    if isinstance(et, int) and et:
        return helper.make_tensor_value_info(name, et, None)
    raise UnsupportedOpError(f"operator {node.name!r} (Loop): the type of {name!r}, which "
                             f"its body reads, is not known at import")


def _model(imp, node, body, formal, what):
    """(the body as a model's bytes, its input names, the outer names it
    reads that the op gets as inputs): ``formal`` its own inputs first."""
    onnx, helper = imp.onnx, imp.onnx.helper
    ins, inits, outer = list(formal), list(body.initializer), []
    for name in outer_names(onnx, body):
        if name in imp.vals:
            inits.append(onnx.numpy_helper.from_array(imp.vals[name], name))
        else:
            ins.append(_type_of(imp, name, node))
            outer.append(name)
    passed = {vi.name for vi in ins}
    nodes, outs = list(body.node), []
    for o in body.output:       # an output that is an input: through an Identity
        if o.name in passed:
            nodes.append(helper.make_node("Identity", [o.name], [o.name + "::out"]))
            o2 = onnx.ValueInfoProto()
            o2.CopyFrom(o)
            o2.name = o.name + "::out"
            o = o2
        outs.append(o)
    g = helper.make_graph(nodes, f"{node.name}.{what}", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=list(imp.model.opset_import),
                          ir_version=imp.model.ir_version)
    return m.SerializeToString(), [vi.name for vi in ins], outer


def import_held_loop(imp, node):
    """(outer inputs, attrs) of a Loop over sequences or optionals:
    ``run_body`` (a :class:`~.onnx_seqmap.BodyRunner`), ``body_inputs``,
    ``n_carried``."""
    body = subgraph_attr(node, "body")
    n_carried = len(node.input) - 2
    if n_carried < 0 or len(body.input) != n_carried + 2:
        raise UnsupportedOpError(f"operator {node.name!r} (Loop): {len(node.input)} inputs "
                                 f"and a body of {len(body.input)}: they do not match")
    model, names, outer = _model(imp, node, body, body.input, "body")
    runner = BodyRunner(model, node.name, by_value=False)
    return outer, {"run_body": runner, "body_inputs": names, "n_carried": n_carried}


def branches_held(imp, node):
    """Whether If ``node``'s branches make a sequence or an optional, or
    read one of the enclosing graph."""
    onnx = imp.onnx
    for which in ("then_branch", "else_branch"):
        g = subgraph_attr(node, which)
        if any(vi.type.WhichOneof("value") in _HELD for vi in g.output) or \
                any(imp.types.get(n) in ("sequence", "optional")
                    for n in outer_names(onnx, g)):
            return True
    return False


def import_held_if(imp, node):
    """(outer inputs, attrs) of an If on a run-time condition whose
    branches make or read sequences or optionals: ``then_run`` /
    ``else_run`` (BodyRunners), ``then_inputs`` / ``else_inputs`` (the
    outer names each reads), ``outer`` (the op's inputs after the
    condition)."""
    attrs, extra = {}, []
    for which in ("then", "else"):
        g = subgraph_attr(node, f"{which}_branch")
        if len(g.output) != len(node.output):
            raise UnsupportedOpError(f"operator {node.name!r} (If): the {which}_branch has "
                                     f"{len(g.output)} outputs, the op {len(node.output)}")
        model, names, outer = _model(imp, node, g, [], which)
        attrs[f"{which}_run"] = BodyRunner(model, f"{node.name}.{which}", by_value=False)
        attrs[f"{which}_inputs"] = names
        extra += [n for n in outer if n not in extra]
    attrs["outer"] = list(extra)
    return extra, attrs
