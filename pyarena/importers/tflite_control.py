"""TFLite ``IF`` and ``WHILE``: the subgraphs they name, imported as
pyarena graphs for the kernels of ``runtime/kernels/branching.py``.

``IF`` (``IfOptions``: then / else subgraph indices): input 0 is the
condition, the others the operands each branch takes as its inputs.  A
condition that is a constant at import picks its branch there: the
branch's ops join the graph (names prefixed with the IF's), with an
``Identity`` from each operand to the branch's input and from each branch
output to the IF's.  Otherwise both branches become the ``IfElse`` op's
bodies; their outputs must have the IF's static shapes.

``WHILE`` (``WhileOptions``: cond / body subgraph indices): the carried
values keep their shapes -- the body's outputs must have the shapes of
its inputs, the WHILE's inputs and outputs -- and cond gives one bool.

TFLite subgraphs read nothing from their caller's scope: every value
comes through their inputs.  Refused by name: shapes or types that
differ, a count of inputs or outputs that does not match; a subgraph
index out of range or recursive is a malformed model.
"""
import numpy as np

from ..errors import UnsupportedOpError
from .tflite_options import builtin_options

__all__ = ["convert_control", "inline_branch"]


def convert_control(tflite, t, code, op, ins, outs, opname, sub):
    """(op type, attrs, input indices) of an IF / WHILE; op type None for an
    IF inlined (``attrs["branch"]``: its Graph, input and output names; the
    inputs the operands).  ``sub(index, what)`` imports a subgraph."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} ({code}): {why}")

    o = builtin_options(tflite, op, "IfOptions" if code == "IF" else "WhileOptions")
    if o is None:
        fail("no options")
    if code == "WHILE":
        cond = sub(int(o.CondSubgraphIndex()), f"{opname}/cond")
        body = sub(int(o.BodySubgraphIndex()), f"{opname}/body")
        _check(t, cond, ins, None, "cond", fail)
        _check(t, body, ins, outs, "body", fail)
        g = cond[0].tensors[cond[2][0]]
        if np.dtype(g.dtype) != np.bool_ or int(np.prod(g.shape)) != 1:
            fail(f"cond's output is {g.dtype} {list(g.shape)}, not one bool")
        for i, j in zip(ins, outs):
            if list(t.shapes[i]) != list(t.shapes[j]):
                fail(f"carried value {t.names[i]!r} {t.shapes[i]} comes out as "
                     f"{t.shapes[j]}: carried shapes must stay static")
        attrs = {}
        for p, b in (("cond", cond), ("body", body)):
            attrs.update({p: b[0], f"{p}_inputs": b[1], f"{p}_outputs": b[2]})
        return "While", attrs, list(ins)
    if not ins:
        fail("no condition")
    branches = [sub(int(o.ThenSubgraphIndex()), f"{opname}/then"),
                sub(int(o.ElseSubgraphIndex()), f"{opname}/else")]
    for b, which in zip(branches, ("then", "else")):
        _check(t, b, ins[1:], outs, which, fail)
    c = t.data[ins[0]]
    if c is not None:           # the branch known at import
        if np.asarray(c).size != 1:
            fail(f"condition of {np.asarray(c).size} values")
        return None, {"branch": branches[0 if bool(np.asarray(c).reshape(-1)[0]) else 1]}, \
            list(ins[1:])
    attrs = {}
    for p, b in zip(("then", "else"), branches):
        attrs.update({p: b[0], f"{p}_inputs": b[1], f"{p}_outputs": b[2]})
    return "IfElse", attrs, list(ins)


def _check(t, sub, ins, outs, which, fail):
    """The subgraph's inputs take ``ins`` (and its outputs give ``outs``)
    with the same static shapes and types."""
    g, names_in, names_out = sub
    for kind, names, idx in (("inputs", names_in, ins), ("outputs", names_out, outs)):
        if idx is None:
            continue
        if len(names) != len(idx):
            fail(f"the {which} subgraph has {len(names)} {kind}, the op {len(idx)}")
        for name, i in zip(names, idx):
            bt = g.tensors[name]
            dt = np.float32 if t.dtypes[i] == np.float16 else t.dtypes[i]
            if list(bt.shape) != list(t.shapes[i]) or np.dtype(bt.dtype) != np.dtype(dt):
                fail(f"the {which} subgraph's {name!r} is {bt.dtype} {list(bt.shape)}, "
                     f"the op's {t.names[i]!r} {np.dtype(dt)} {list(t.shapes[i])}: "
                     f"shapes must be static and the same")


def inline_branch(g, branch, operands, results, prefix):
    """The ops of ``branch`` (Graph, input names, output names) added to
    ``g`` under ``prefix``, reading ``operands`` and writing ``results``."""
    bg, names_in, names_out = branch
    ren = {}
    for name, t in bg.tensors.items():
        ren[name] = f"{prefix}/{name}"
        if t.role == "constant":
            g.add_tensor(ren[name], t.shape, t.dtype, role="constant", data=t.data)
        else:
            g.add_tensor(ren[name], t.shape, t.dtype, role="activation")
    for k, (outer, name) in enumerate(zip(operands, names_in)):
        g.add_op("Identity", [outer], [ren[name]], name=f"{prefix}/in{k}")
    for op in bg.ops:
        g.add_op(op.op_type, [ren[n] if n else "" for n in op.inputs],
                 [ren[n] if n else "" for n in op.outputs], name=f"{prefix}/{op.name}",
                 scratch_bytes=op.scratch_bytes, **op.attrs)
    for k, (name, outer) in enumerate(zip(names_out, results)):
        g.add_op("Identity", [ren[name]], [outer], name=f"{prefix}/out{k}")
