"""Lifetimes and buffer sharing: which tensors may live in one buffer.

1. Lifetimes (inclusive op indices).  An activation lives from the op that
   produces it to the last op that reads it; a graph input from op 0 (to
   the last op if it is one of ``Graph.held_inputs``); a graph output to
   the last op; a tensor nobody reads only at its
   producer.  Constants belong to the weights arena and are not planned.
   An op's scratch (``Op.scratch_bytes``) is a virtual tensor
   ``"<op>::scratch"`` living exactly during its op.
2. Sharing, op by op in execution order, using the in-place rule table
   (:mod:`pyarena.planning.inplace`): a pure view (Reshape, ...) joins its
   input's buffer; an element-wise op writes into an input's buffer only
   when no member of that buffer (the original or any view of it) is read
   by a later op, none is a graph input or output, and the op reads no
   differently shaped view of that buffer through another input.  A
   buffer lives from its first member's birth to its last member's death.
3. Concat in place (with a ``placer``, :mod:`pyarena.planning.concat`):
   at a Concat the buffer of an input the placer picks moves, whole, into
   the output's buffer at the input's slice (``Buffer.at`` records the
   byte offset of every member not at the start), so the input's
   producer writes into the output and the Concat copies nothing.  The
   merged buffer lives from its first member's birth; a later in-place
   overwrite of any member then needs the whole buffer dead, and an op
   may not overwrite one member while reading another that overlaps it.

The result is a list of :class:`~pyarena.planning.result.Buffer` (offsets
still unset) and the reuses made.  The independent validator
(:mod:`pyarena.planning.validate`) re-derives all of this on its own.
"""
from ..errors import GraphError, InvalidArgumentError
from .inplace import candidates_of_kind, same_layout
from .result import Buffer, scratch_name

__all__ = ["tensor_lifetimes", "share_buffers"]


def tensor_lifetimes(graph):
    """``{tensor: (first, last)}`` for every planned (non-constant) tensor
    of a validated graph, per the rules in the module docstring; tensors
    declared but neither produced nor read are left out."""
    n = len(graph.ops)
    end = max(n - 1, 0)
    prod = {}
    last_read = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if t:
                last_read[t] = i
        for t in op.outputs:
            if t:
                prod[t] = i
    life = {}
    held = graph.held_inputs
    for t in graph.tensors.values():
        if t.role == "constant":
            continue
        if t.role == "input":
            life[t.name] = (0, end if t.name in held else max(last_read.get(t.name, 0), 0))
        elif t.name in prod:
            p = prod[t.name]
            last = end if t.role == "output" else max(last_read.get(t.name, p), p)
            life[t.name] = (p, last)
    return life


class _Group:
    """Tensors sharing one buffer while it is being built."""

    __slots__ = ("members", "first", "last", "size", "pinned", "fed", "at")

    def __init__(self, name, first, last, size, pinned, fed=False):
        self.members = [name]
        self.first = first
        self.last = last
        self.size = size
        self.pinned = pinned      # holds a graph input or output: never overwritten
        self.fed = fed            # holds a graph input (the caller writes it)
        self.at = {}              # member -> byte offset in the buffer, when not 0

    def join(self, name, last, size, pinned, at=0):
        self.members.append(name)
        if at:
            self.at[name] = at
        self.last = max(self.last, last)
        self.size = max(self.size, at + size)
        self.pinned = self.pinned or pinned

    def absorb(self, other, base, group_of):
        """Take every member of ``other`` at ``base`` bytes + its offset
        there; ``other`` is left empty."""
        for m in other.members:
            self.members.append(m)
            at = base + other.at.get(m, 0)
            if at:
                self.at[m] = at
            group_of[m] = self
        self.first = min(self.first, other.first)
        self.last = max(self.last, other.last)
        self.size = max(self.size, base + other.size)
        self.pinned = self.pinned or other.pinned
        self.fed = self.fed or other.fed
        other.members = []


def share_buffers(graph, life, nbytes, table, placer=None, record=None, replay=None):
    """The buffers of ``graph`` (a validated graph; ``life`` from
    :func:`tensor_lifetimes`, ``nbytes`` the byte size of each of those
    tensors) and the reuses ``(op, from_tensor, to_tensor, mode)``.  With
    ``table`` None every tensor gets its own buffer; ``placer`` (a
    :class:`~pyarena.planning.concat.ConcatPlacer`, or None) picks the
    Concat inputs that move into their output's buffer.

    ``record``: a list given gets each op's in-place decision (its reuse
    or None).  ``replay``: such a record of a pass over the same graph,
    ``life``, ``nbytes`` and ``table`` without a placer; its decisions are
    taken as they are, without checking them again, up to the first op
    whose Concat inputs the placer moves: until then both passes hold
    the same buffers, so they decide the same (the plan with Concat in
    place costs one sharing pass from that op on, not a whole one)."""
    tensors = graph.tensors
    group_of = {}
    groups = []

    def new_group(name, first, last, size, pinned, fed=False):
        g = _Group(name, first, last, size, pinned, fed)
        group_of[name] = g
        groups.append(g)

    if replay is None:      # (a replayed pass runs after a pass that checked this)
        for op in graph.ops:
            if op.scratch_bytes and scratch_name(op.name) in tensors:
                raise GraphError(f"tensor {scratch_name(op.name)!r} clashes with the "
                                 f"scratch buffer name of operator {op.name!r}")
    for t in graph.inputs:
        first, last = life[t]
        new_group(t, first, last, nbytes[t], True, True)
    reuses = []
    kinds = {}              # op type -> the table's kind, asked once per pass
    for i, op in enumerate(graph.ops):
        if replay is not None:
            joined = replay[i]
            if joined is not None:
                _join(op, joined[1], group_of[joined[1]], graph, life, nbytes, group_of)
        elif table is not None and op.outputs and op.outputs[0]:
            kind = kinds.get(op.op_type)
            if kind is None:
                kind = kinds[op.op_type] = table.kind(op.op_type)
            joined = None if kind in ("none", "concat") else \
                _join_input(op, i, graph, group_of, life, nbytes, kind)
        else:
            joined = None
        if record is not None:
            record.append(joined)
        if joined is not None:
            reuses.append(joined)
        picks = placer.choose(op, group_of) if placer is not None else ()
        if picks:           # the buffers differ from the replayed pass's from here on
            replay = None
        for t in op.outputs:
            if (joined is None or t != joined[2]) and t in life:
                first, last = life[t]
                new_group(t, first, last, nbytes[t], tensors[t].role == "output")
        for k, g, base in picks:
            group_of[op.outputs[0]].absorb(g, base, group_of)
            reuses.append((op.name, op.inputs[k], op.outputs[0], "concat"))
        if op.scratch_bytes:
            new_group(scratch_name(op.name), i, i, op.scratch_bytes, False)
    buffers = [Buffer(g.members[0], g.size, g.first, g.last, None, list(g.members),
                      dict(g.at)) for g in groups if g.members]
    return buffers, reuses


def _join(op, src, g, graph, life, nbytes, group_of):
    """Output 0 of ``op`` joins ``g``, the buffer of its input ``src``,
    at ``src``'s offset there."""
    out = op.outputs[0]
    g.join(out, life[out][1], nbytes[out], graph.tensors[out].role == "output",
           g.at.get(src, 0))
    group_of[out] = g


def _join_input(op, i, graph, group_of, life, nbytes, kind):
    """Put output 0 of op ``i`` into the buffer of the first input its
    in-place ``kind`` allows and liveness permits; returns the reuse or None."""
    out = op.outputs[0]
    for k, mode in candidates_of_kind(kind, op, graph):
        src = op.inputs[k] if 0 <= k < len(op.inputs) else ""
        g = group_of.get(src)
        if g is None:       # constant or omitted input
            continue
        if mode == "inplace":
            if g.pinned or g.last > i:
                continue    # pinned, or the original is read later
            if _other_views_conflict(op, k, g, graph, group_of):
                continue
        elif mode != "alias":
            raise InvalidArgumentError(
                f"in-place rule for {op.op_type!r} returned mode {mode!r}")
        _join(op, src, g, graph, life, nbytes, group_of)
        return (op.name, src, out, mode)
    return None


def _other_views_conflict(op, k, g, graph, group_of):
    """True if ``op`` also reads the group through another input that
    overlaps the bytes it would write (input k's) under another layout or
    at another offset: writing the output over input k would then
    clobber elements it has yet to read."""
    out = graph.tensors[op.outputs[0]]
    at = g.at.get(op.inputs[k], 0)
    end = at + out.nbytes
    for j, name in enumerate(op.inputs):
        if j == k or group_of.get(name) is not g:
            continue
        o = g.at.get(name, 0)
        if o == at and same_layout(graph.tensors[name], out):
            continue
        if o < end and at < o + graph.tensors[name].nbytes:
            return True
    return False
