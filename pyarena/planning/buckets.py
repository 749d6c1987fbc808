"""A plan made at one set of shapes, reused at smaller ones.

A model whose dynamic dimension is a sequence length is planned once per
*bucket* (the length rounded up, :mod:`pyarena.importers.session_buckets`)
and run at the exact length: the kernels see the tensors' real shapes, only
the offsets are the bucket's.  :func:`rebind` makes that plan: the bucket
plan's buffers (offsets, lifetimes, reserved sizes and members) unchanged,
each member given the shape and bytes it has in ``graph`` (the same
model at the exact shapes).

It is sound only where the graph is the bucket's op for op (then every
lifetime is the bucket's), every planned tensor and every op's scratch is
no larger at the exact shapes than at the bucket's (an op whose output is
not monotone in the length -- a Slice whose end is computed from the
shape, a Reshape that moves the length into another axis -- breaks that),
and every buffer sharing the planner chose at the bucket's shapes is still
allowed at these (an element-wise op writes over an input of its output's
shape, a view has its source's bytes and a Transpose view still moves no
data; a Concat input written into its slice is not reused, as where the
slice starts depends on the length).  Each is checked here, in one pass
over the ops and tensors (the whole validator, :func:`~.validate.validate`,
is the tests' independent check of it); where one fails the reason is
returned and the caller plans the exact shapes instead.
"""
from .inplace import as_rule_table, candidates_of_kind, same_layout
from .result import Plan, tensor_info

__all__ = ["rebind"]


def rebind(plan, graph):
    """``(plan, None)``: ``plan`` (made for ``graph``'s model at larger
    shapes, ``plan.graph``) with ``graph``'s shapes, checked; ``(None,
    reason)`` when it does not hold for ``graph`` (module docstring)."""
    why = _same_ops(plan.graph, graph)
    if why is not None:
        return None, why
    info = tensor_info(graph)
    reserved = plan._info
    for name, (_, dtype, nbytes, _) in info.items():
        had = reserved.get(name)
        if had is None:
            return None, f"{name!r} is not in the bucket's plan"
        if nbytes > had[2]:
            return None, (f"{name!r} needs {nbytes} bytes at these shapes, more than the "
                          f"{had[2]} the bucket planned")
        if dtype != had[1]:
            return None, f"{name!r} is {dtype} here, {had[1]} in the bucket's plan"
    why = _sharing_holds(plan, graph)
    if why is not None:
        return None, why
    p = Plan(plan.buffers, arena_bytes=plan.arena_bytes,
             lower_bound_bytes=plan.lower_bound_bytes, naive_bytes=plan.naive_bytes,
             alignment=plan.alignment, strategy=plan.strategy,
             chosen_strategy=plan.chosen_strategy, optimal=plan.optimal,
             num_ops=plan.num_ops, weights_bytes=plan.weights_bytes, graph=graph,
             inplace=plan.inplace, reuses=plan.reuses, tensor_info=info, rules=plan.rules)
    p.slack = getattr(plan, "slack", None)
    return p, None


def _same_ops(base, graph):
    """None when ``graph`` has ``base``'s ops (names, types, inputs and
    outputs, in order) and graph inputs / outputs; else why not."""
    if base is None:
        return "the bucket's plan has no graph"
    if len(base.ops) != len(graph.ops):
        return f"{len(graph.ops)} ops here, {len(base.ops)} in the bucket's graph"
    for a, b in zip(base.ops, graph.ops):
        if a.name != b.name or a.op_type != b.op_type or a.inputs != b.inputs or \
                a.outputs != b.outputs:
            return f"op {b.name!r} is not the bucket's op {a.name!r}"
    if list(base.inputs) != list(graph.inputs) or list(base.outputs) != list(graph.outputs):
        return "the graph inputs or outputs differ from the bucket's"
    return None


def _sharing_holds(plan, graph):
    """None when every reuse of ``plan`` is still allowed at ``graph``'s
    shapes; else the first that is not."""
    table = as_rule_table(plan.rules)
    ops = {op.name: op for op in graph.ops}
    tensors = graph.tensors
    for op_name, src, dst, mode in plan.reuses:
        op = ops[op_name]
        if mode == "concat":
            return f"Concat {op_name!r} writes {src!r} into its slice"
        allowed = {(op.inputs[k], m) for k, m in
                   candidates_of_kind(table.kind(op.op_type), op, graph)
                   if 0 <= k < len(op.inputs)}
        if (src, mode) not in allowed:
            return f"{op_name!r} may not write {dst!r} over {src!r} ({mode}) at these shapes"
        if mode != "inplace":
            continue
        out, home = tensors[dst], plan.buffer_of[src]
        for other in op.inputs:     # another view of the bytes it overwrites
            if other and other != src and plan.buffer_of.get(other) is home and (
                    plan.offsets[other] != plan.offsets[src]
                    or not same_layout(tensors[other], out)):
                return f"{op_name!r} also reads {other!r}, in the bytes it overwrites"
    return None
