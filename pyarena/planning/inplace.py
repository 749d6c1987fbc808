"""The in-place rule table: which operators may write into an input.

The static planner (:mod:`pyarena.planning`) merges an operator's output into
the buffer of one of its inputs when the operator's *kind* allows it and
the reuse is safe.  This module only answers the first, structural
question ("may this op, by its nature, reuse input k?"); the safety
question ("does anybody still need the original?") is the planner's, and
the independent validator (:mod:`pyarena.planning.validate`) re-checks both.

Kinds:

``"unary"`` (single-output ops only, like ``"binary"``)
    element-wise on input 0 (Relu, Sigmoid, inference BatchNormalization,
    ...): output 0 may be written into input 0 when both have the same
    shape (or, without shapes, the same byte size) and dtype.
``"binary"``
    element-wise on several inputs (Add, Mul, ...): output 0 may reuse any
    input whose shape and dtype equal the output's -- a broadcast input is
    never reusable.
``"alias"``
    a pure view, no data moves (Reshape, Flatten, Squeeze, Unsqueeze,
    Identity): output 0 *is* input 0 under another shape.  Both names stay
    readable, so an alias is legal whoever reads the original later.
``"transpose"``
    an alias only when the permutation moves nothing but size-1 axes
    (``attrs["perm"]``, ONNX default: reversed axes); otherwise "none".
``"concat"``
    Concat: output 0 holds each input in its slice, so when the slices
    are contiguous blocks (concatenation along axis 0, or an axis after
    only size-1 dims: the channels of a batch-1 NCHW tensor) and nothing
    else forbids it, the input's producer writes straight into its slice
    and the op copies nothing (:mod:`pyarena.planning.concat`, on by
    default, ``plan(..., inplace_concat=False)`` turns it off).  Never an
    element-wise reuse.
``"none"``
    never (Conv, MatMul, and every op type not in the table).

A kind may also be a callable ``rule(op, graph) -> [(input_index, mode)]``
with mode ``"alias"`` or ``"inplace"``: full control for custom operators.

Each operator declares its kind once, on its kernel class
(``Kernel.inplace`` in :mod:`pyarena.runtime.kernels`); registering the
kernel fills :data:`DECLARED_RULES` from above, so every name in the
table has a kernel.  Users extend or override the default table with
:func:`register_rule` (e.g. for their own op types in a JSON graph), or
pass their own :class:`RuleTable` (or a ``{op_type: kind}`` mapping layered
over the defaults) as ``plan(..., rules=...)``.
"""
from collections.abc import Mapping

import numpy as np

from ..errors import InvalidArgumentError
from . import op_facts

__all__ = ["KINDS", "RuleTable", "DEFAULT_RULES", "DECLARED_RULES", "register_rule",
           "declare", "rule_for", "as_rule_table",
           "reuse_candidates", "candidates_of_kind", "transpose_is_view", "same_layout"]

KINDS = ("unary", "binary", "alias", "transpose", "concat", "none")


def _check_rule(op_type, kind):
    if not isinstance(op_type, str) or not op_type:
        raise InvalidArgumentError(f"op_type must be a non-empty string, not {op_type!r}")
    if not callable(kind) and kind not in KINDS:
        raise InvalidArgumentError(f"in-place kind for {op_type!r} must be one of {KINDS} "
                         f"or a callable, not {kind!r}")


class RuleTable:
    """A mapping op type -> kind (one of :data:`KINDS` or a callable).
    Unknown op types are ``"none"``.  A table may sit over a ``base``
    table: its own rules win, the rest is looked up in the base."""

    def __init__(self, rules=None, base=None):
        self._rules = {}
        self._base = base
        for op_type, kind in (rules or {}).items():
            self.register(op_type, kind)

    def register(self, op_type, kind):
        """Set the kind of ``op_type`` (replacing any earlier rule)."""
        _check_rule(op_type, kind)
        self._rules[op_type] = kind
        return self

    def unregister(self, op_type):
        """Forget the rule for ``op_type``: it becomes "none" (a table over
        a base records "none", so the base's kind no longer shows)."""
        self._rules.pop(op_type, None)
        if self._base is not None and op_type in self._base:
            self._rules[op_type] = "none"
        return self

    def kind(self, op_type):
        k = self._rules.get(op_type)
        if k is not None:
            return k
        return self._base.kind(op_type) if self._base is not None else "none"

    def _merged(self):
        d = dict(self._base._merged()) if self._base is not None else {}
        d.update(self._rules)
        return d

    def copy(self):
        """A flat, independent table with every rule visible here."""
        return RuleTable(self._merged())

    def items(self):
        return self._merged().items()

    def __contains__(self, op_type):
        return op_type in self._rules or (self._base is not None and op_type in self._base)

    def __len__(self):
        return len(self._merged())

    def __repr__(self):
        return f"<RuleTable {len(self)} op types>"


class _DeclaredRules(RuleTable):
    """The kinds operators declare on their kernels.  The runtime's kernel
    registry fills it (:func:`declare`) -- this layer never imports the
    runtime: the registry loads on first use through the loader the
    package root names (:func:`.op_facts.add_source`)."""

    def kind(self, op_type):
        op_facts.load()
        return super().kind(op_type)

    def _merged(self):
        op_facts.load()
        return super()._merged()

    def __contains__(self, op_type):
        op_facts.load()
        return super().__contains__(op_type)


#: The kinds declared by the kernels (``Kernel.inplace``), filled by the
#: kernel registry when it loads.  Read-only for users: override a kind in
#: :data:`DEFAULT_RULES` with :func:`register_rule`.
DECLARED_RULES = _DeclaredRules()

#: The table every plan uses unless given other rules: the declared kinds
#: under the rules users registered.
DEFAULT_RULES = RuleTable(base=DECLARED_RULES)


def declare(op_type, kind):
    """Record the in-place kind an operator's kernel declares (called by
    the kernel registry; users call :func:`register_rule`)."""
    _check_rule(op_type, kind)
    DECLARED_RULES._rules[op_type] = kind


def register_rule(op_type, kind, table=None):
    """Register ``kind`` for ``op_type`` in ``table`` (default: the global
    :data:`DEFAULT_RULES` every plan uses unless given other rules)."""
    return (DEFAULT_RULES if table is None else table).register(op_type, kind)


def as_rule_table(rules):
    """``None`` -> the defaults; a RuleTable as is; a mapping -> the
    defaults overridden by the mapping."""
    if rules is None:
        return DEFAULT_RULES
    if isinstance(rules, RuleTable):
        return rules
    if isinstance(rules, Mapping):
        t = DEFAULT_RULES.copy()
        for k, v in rules.items():
            t.register(k, v)
        return t
    raise TypeError(f"rules must be a RuleTable or a mapping op_type -> kind, "
                    f"not {type(rules).__name__}")


def rule_for(op_type, rules=None):
    """The kind of ``op_type`` under ``rules`` (default table if None)."""
    return as_rule_table(rules).kind(op_type)


def same_layout(a, b):
    """True when tensors a and b may share bytes element by element: equal
    dtype, and equal shapes (or equal byte sizes when a shape is unknown)."""
    if a.dtype != b.dtype:
        return False
    if a.shape is not None and b.shape is not None:
        return tuple(a.shape) == tuple(b.shape)
    return a.nbytes == b.nbytes


def transpose_is_view(shape, perm):
    """True if transposing ``shape`` by ``perm`` moves no data: the axes
    longer than 1 keep their relative order."""
    if shape is None:
        return False
    shape = tuple(shape)
    if perm is None:
        perm = tuple(reversed(range(len(shape))))
    try:
        perm = [int(p) for p in perm]
    except (TypeError, ValueError):
        return False
    if sorted(perm) != list(range(len(shape))):
        return False
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _perm_of(op, graph):
    perm = op.attrs.get("perm")
    if perm is None and len(op.inputs) > 1 and op.inputs[1]:
        t = graph.tensors.get(op.inputs[1])
        if t is not None and t.data is not None:
            perm = np.asarray(t.data).ravel().tolist()
        elif t is not None:
            return "unknown"
    return perm


def reuse_candidates(op, graph, rules=None):
    """The structurally possible reuses of ``op``: a list of
    ``(input_index, mode)`` with mode "alias" or "inplace", best first.
    Liveness and roles are not checked here (the planner does that)."""
    return candidates_of_kind(as_rule_table(rules).kind(op.op_type), op, graph)


def candidates_of_kind(kind, op, graph):
    """:func:`reuse_candidates` of ``op`` whose kind (``table.kind(op.op_type)``)
    the caller has looked up already (the planner, once per op type)."""
    if callable(kind):
        return [(int(k), m) for k, m in kind(op, graph)]
    if kind == "none" or not op.outputs or not op.outputs[0] or not op.inputs or \
            not op.inputs[0]:
        return []
    out = graph.tensors[op.outputs[0]]
    if kind in ("alias", "transpose"):
        src = graph.tensors[op.inputs[0]]
        if src.nbytes != out.nbytes:
            return []
        if kind == "transpose":
            perm = _perm_of(op, graph)
            if isinstance(perm, str) or not transpose_is_view(src.shape, perm):
                return []
        return [(0, "alias")]
    if len(op.outputs) != 1:
        return []   # a second output may still need the input being overwritten
    if kind == "unary":
        src = graph.tensors[op.inputs[0]]
        return [(0, "inplace")] if same_layout(src, out) else []
    if kind == "binary":
        # an input read twice by a variadic op (Sum(a, b, a)) is not
        # overwritten: the kernel reads it again after its first step
        return [(k, "inplace") for k, name in enumerate(op.inputs)
                if name and same_layout(graph.tensors[name], out)
                and (len(op.inputs) <= 2 or op.inputs.count(name) == 1)]
    return []
