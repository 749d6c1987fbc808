"""The facts a kernel class declares about its operators, and the tables
every pass reads from them.

A kernel class is the one record of the operators it runs: besides how it
runs them (``setup`` / ``run``) it declares, as class attributes (defaults
on :class:`~pyarena.runtime.kernels.registry.Kernel`):

==================  ==========================================================
``op_types``        the ONNX op types it runs (the graph's vocabulary); a
                    contrib op named like a standard one as
                    ``domain.name`` (``com.microsoft.Attention``)
``onnx_domain``     ``""`` (ai.onnx) or the contrib domain of its op types
``family``          one of :data:`FAMILIES`
``inplace``         its in-place kind for the planner
                    (:data:`pyarena.planning.inplace.KINDS` or a callable)
``shape_rule``      ``rule(node) -> [(shape, elem_type)]`` per output (a
                    :class:`~.shape_rules.Node` view; :mod:`.shape_rules`);
                    None: ONNX's own shape inference is needed
``evaluate``        ``evaluate(node) -> [values]`` on known inputs, in
                    NumPy: constant folding, shape-value propagation and
                    QDQ lookup tables (:mod:`.evaluators`); None: the ONNX
                    reference evaluator folds it
``fold``            one of :data:`FOLD_KINDS`: whether and when the
                    importer folds it on constant inputs
``nhwc``            one of :data:`NHWC_KINDS`: its NHWC form
                    (:mod:`pyarena.runtime.nhwc`); None: stays NCHW
``rows``            its row kind for patched stages
                    (:data:`pyarena.planning.op_facts.ROW_KINDS`)
``qdq``             one of :data:`QDQ_KINDS`: what a ``DequantizeLinear ->
                    op -> QuantizeLinear`` chain of it becomes
                    (:mod:`pyarena.importers.onnx_qdq`)
``qdq_form``        (an integer kernel) the float op type whose QDQ chain
                    becomes this op
``conv_act``        the activation name a convolution absorbs this op as
                    (:mod:`pyarena.runtime.fusion`)
``data_sized``      True when its output's size depends on the input
                    values (a pool tensor, :mod:`pyarena.runtime.dynamic`)
``body``            one of :data:`BODY_KINDS`: how the ONNX importer reads
                    its subgraph attributes (:mod:`pyarena.importers.onnx_control`);
                    None: it has none
``needs_values``    False when its evaluator reads no input's value, only
                    shapes or attributes (Shape, Size, Constant): it folds
                    whatever its inputs
``tflite``          ``{BUILTIN: (op_type, fixed attributes[, options])}``:
                    the float TFLite builtins it runs; ``options(ctx)``
                    reads the builtin's options into attributes
                    (:mod:`.tflite_attrs`), or a string naming one of the
                    importer's lowerings (:data:`TFLITE_LOWERINGS`)
``tflite_int8``     ``{BUILTIN: wiring}``: the full-integer builtins it
                    runs (:data:`TFLITE_INT8_WIRINGS`,
                    :mod:`pyarena.importers.tflite_quant`)
==================  ==========================================================

A fact may be a dict ``{op_type: value}`` when a class runs several op
types that differ in it (``tflite`` and ``tflite_int8`` are keyed by
builtin instead).  ``nhwc`` and ``rows`` left None follow the family
(:data:`FAMILY_DEFAULTS`): every element-wise op of one tensor runs NHWC
as it is and bands row for row.  :func:`check` refuses an unknown value
when the class registers, so a typo fails at import, not in a pass.
"""
from ...planning.inplace import KINDS
from ...planning.op_facts import ROW_KINDS

__all__ = ["Operator", "FAMILIES", "FOLD_KINDS", "BODY_KINDS", "NHWC_KINDS", "QDQ_KINDS", "TFLITE_LOWERINGS",
           "TFLITE_INT8_WIRINGS", "FAMILY_DEFAULTS", "check", "fact", "table", "ops_where"]

#: operator families (what the passes may ask of a family)
FAMILIES = (
    "unary",        # element-wise on one tensor (other inputs: constants)
    "binary",       # element-wise over broadcast operands
    "logic",        # comparisons, boolean ops, Where, Mod
    "reduce",       # reductions, softmax, normalization over axes
    "conv",         # convolutions
    "pool",         # pooling windows and global pools
    "linalg",       # matrix products, Einsum
    "movement",     # views, copies and rearrangements of data
    "indexing",     # gathers, scatters, data-sized outputs, shapes
    "resize",       # Resize / Upsample, DepthToSpace ...
    "quantized",    # 8-bit and quantize / dequantize operators
    "recurrent",    # LSTM, GRU, RNN
    "control",      # Loop, Scan, If and TFLite IF / WHILE
    "other",
)
#: ``"free"``: always folded (its result is never larger than needed:
#: Constant, Shape, Size, Identity, ConstantOfShape checks its own size);
#: ``"capped"``: folded while its result is small (the default);
#: ``"expanding"``: its output can be far larger than its inputs -- folded
#: only when the output's size is known beforehand;
#: ``"never"``: not deterministic, a body graph, or state the reference
#: evaluator does not model.
FOLD_KINDS = ("free", "capped", "expanding", "never")
#: ``"elementwise"``: runs on any layout as it is; ``"broadcast"``: its
#: constant operands are re-laid out; ``"attr"``: an NHWC kernel picked by
#: ``layout="NHWC"``; ``"prelu"``: that, with its slope re-laid out;
#: ``"conv"``, ``"concat"``, ``"split"``, ``"pad"``, ``"slice"``, ``"resize"``:
#: axes, pads, scales or weights remapped (runtime/nhwc.py).
NHWC_KINDS = ("elementwise", "broadcast", "attr", "prelu", "conv", "concat", "split", "pad",
              "slice", "resize")
#: ``"same_scale"``: the op itself on the integer tensor when input and
#: output quantization agree (it only moves or selects); ``"lookup"``: a
#: 256-entry table of its float function (:attr:`evaluate`).
QDQ_KINDS = ("same_scale", "lookup")
#: how the ONNX importer reads an operator's body (subgraph attributes):
#: ``"loop"``, ``"scan"``, ``"if"`` (a body planned with the outer graph,
#: importers/onnx_loop.py, onnx_control.py) or ``"sequence_map"`` (a model of
#: its own, planned per shape signature: importers/onnx_seqmap.py)
BODY_KINDS = ("loop", "scan", "if", "sequence_map")
#: TFLite builtins the importer lowers with a converter of its own
TFLITE_LOWERINGS = ("sequence_lstm", "bidirectional_lstm", "sequence_rnn", "control")
#: how the importer wires a full-integer builtin's scales and zero points
TFLITE_INT8_WIRINGS = ("conv", "fully_connected", "add_mul", "activation", "average_pool",
                       "mean", "softmax", "concat", "clamp", "quantize", "dequantize", "same",
                       "select")


class Operator:
    """The record of one or more operators: their facts, as class
    attributes (the table in the module docstring).  A kernel class
    (:class:`~.registry.Kernel`) is one; an operator no kernel runs but the
    importer knows is declared with ``@fold_only`` on a bare subclass."""

    #: ONNX op types this class runs
    op_types = ()
    #: the ONNX domain of its op types ("" : ai.onnx)
    onnx_domain = ""
    #: its family (FAMILIES)
    family = "other"
    #: in-place kind (see pyarena.planning.inplace.KINDS)
    inplace = "none"
    #: output shapes and types from a Node view (.shape_rules); None: not covered
    shape_rule = None
    #: NumPy evaluation on known inputs (.evaluators); None: the ONNX reference
    evaluate = None
    #: when the importer folds it on constant inputs (FOLD_KINDS)
    fold = "capped"
    #: its NHWC form (NHWC_KINDS); None: the family's
    nhwc = None
    #: how a patched stage bands it (planning.op_facts.ROW_KINDS); None: the family's
    rows = None
    #: what a QDQ chain of it becomes (QDQ_KINDS)
    qdq = None
    #: (an integer kernel) the float op type whose QDQ chain it replaces
    qdq_form = None
    #: the activation a convolution absorbs it as (runtime/fusion.py)
    conv_act = None
    #: True: its output's size depends on the input values (a pool tensor)
    data_sized = False
    #: how the ONNX importer reads its subgraph attributes (BODY_KINDS); None: none
    body = None
    #: False: its evaluator reads no input's value (only shapes, attributes)
    needs_values = True
    #: TFLite builtin -> (op type, fixed attributes[, options reader or lowering])
    tflite = {}
    #: full-integer TFLite builtin -> wiring (TFLITE_INT8_WIRINGS)
    tflite_int8 = {}


#: facts that follow the family when a class leaves them None
FAMILY_DEFAULTS = {
    "nhwc": {"unary": "elementwise", "binary": "broadcast"},
    "rows": {"unary": "local", "binary": "broadcast"},
}

_CHOICES = {"family": FAMILIES, "fold": FOLD_KINDS, "nhwc": NHWC_KINDS, "qdq": QDQ_KINDS,
            "body": BODY_KINDS}


def fact(cls, name, op_type):
    """The value of fact ``name`` for ``op_type`` run by ``cls``."""
    v = getattr(cls, name, None)
    if isinstance(v, dict):
        v = v.get(op_type)
    if name in FAMILY_DEFAULTS:
        if v is None:
            v = FAMILY_DEFAULTS[name].get(fact(cls, "family", op_type))
        elif v is False:        # declared: none, whatever the family
            v = None
    return v


def check(cls):
    """TypeError naming the class and the fact when a declared value is not
    one the passes know, or a per-op dict names an op type the class does
    not run."""
    choices = dict(_CHOICES, rows=ROW_KINDS)
    for name in ("family", "fold", "nhwc", "qdq", "body", "rows", "inplace", "shape_rule", "evaluate",
                 "qdq_form", "conv_act"):
        v = getattr(cls, name, None)
        per_op = v if isinstance(v, dict) else {t: v for t in cls.op_types}
        for t, val in per_op.items():
            if t not in cls.op_types:
                raise TypeError(f"kernel {cls.__name__}: {name} names op type {t!r}, "
                                f"which it does not run")
            ok = choices.get(name)
            if name == "inplace":
                ok = None if callable(val) else KINDS
            if ok is not None and val not in (None, False) and val not in ok:
                raise TypeError(f"kernel {cls.__name__}: {name}={val!r} for {t!r} is not "
                                f"one of {ok}")
    for builtin, rec in cls.tflite.items():
        low = rec[2] if len(rec) > 2 else None
        if isinstance(low, str) and low not in TFLITE_LOWERINGS:
            raise TypeError(f"kernel {cls.__name__}: TFLite {builtin} lowering {low!r} is not "
                            f"one of {TFLITE_LOWERINGS}")
    for builtin, wiring in cls.tflite_int8.items():
        if wiring not in TFLITE_INT8_WIRINGS:
            raise TypeError(f"kernel {cls.__name__}: int8 TFLite {builtin} wiring {wiring!r} "
                            f"is not one of {TFLITE_INT8_WIRINGS}")


_tables = {}


def table(name, kernels):
    """``{op_type: value}`` of fact ``name`` over ``kernels`` (op type ->
    class), op types whose value is None left out; cached until the next
    registration (which clears the cache)."""
    got = _tables.get(name)
    if got is None:
        got = {}
        for t, cls in kernels.items():
            v = fact(cls, name, t)
            if v is not None:
                got[t] = v
        _tables[name] = got
    return got


def ops_where(name, value, kernels):
    """The op types whose fact ``name`` is ``value`` (or one of ``value``
    when a tuple), as a frozenset."""
    values = value if isinstance(value, tuple) else (value,)
    return frozenset(t for t, v in table(name, kernels).items() if v in values)


def clear():
    _tables.clear()
