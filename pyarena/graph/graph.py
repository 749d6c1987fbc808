"""The model graph that the planner, the importers and the executor share.

A :class:`Graph` is a list of operators in execution order plus the tensors
they read and write.  It is built in code, loaded from a JSON graph file or
produced by an importer (ONNX, TFLite).  :meth:`Graph.validate` turns every
structural mistake into a :class:`GraphError` naming the culprit.

JSON graph format (``Graph.to_dict`` / ``Graph.from_dict``)::

    {"name": "tiny",
     "tensors": [
        {"name": "x", "shape": ["N", 3, 8, 8], "dtype": "float32", "role": "input"},
        {"name": "w", "shape": [4, 3, 3, 3], "dtype": "float32", "role": "constant"},
        {"name": "y", "nbytes": 1024, "role": "output"}],
     "ops": [
        {"name": "conv", "type": "Conv", "inputs": ["x", "w"], "outputs": ["y"],
         "scratch_bytes": 4096, "attrs": {"pads": [1, 1, 1, 1]}}]}

A dimension may be a symbol (a string such as ``"N"``); symbols are bound by
the shapes given for graph inputs (``Graph.bind_inputs``, ``inputs=`` of
``load_model``) and substituted everywhere.
"""
import math
from dataclasses import dataclass, field

from ..errors import GraphError
from .binding import bind_shapes
from .dtypes import HOST_DTYPE, HOST_KINDS
from .json_io import JsonIO
from .tensor import (MAX_TENSOR_BYTES, ROLES, Tensor, _check_size, _dtype, _int_dim,
                     retargeted_tensors)
from .notes import OpNotes
from .validation import Validation, stable_toposort
from .weights import SMALL_CONSTANT_BYTES, WeightsArena  # noqa: F401 (re-exported)

__all__ = ["Graph", "Tensor", "Op", "GraphError", "ROLES", "MAX_TENSOR_BYTES",
           "stable_toposort", "conv_weight_shape"]


@dataclass
class Op:
    """An operator: reads ``inputs``, writes ``outputs`` (tensor names; an
    empty string stands for an omitted optional input or output), and needs
    ``scratch_bytes`` of workspace only while it runs."""

    name: str
    op_type: str
    inputs: list
    outputs: list
    scratch_bytes: int = 0
    #: the operator's own attributes, as the model states them
    attrs: dict = field(default_factory=dict)
    #: what the passes recorded about it for later ones (:mod:`.notes`)
    notes: OpNotes = field(default_factory=OpNotes)


def conv_weight_shape(op, shape):
    """The shape of Conv ``op``'s weights as its layout reads them, from
    the constant's ``shape``: OHWI (or 1HWC, ``weight_layout``) for an NHWC
    Conv whose constant is still OIHW (``op.notes.weights_oihw``), else
    ``shape``."""
    if shape is None or len(shape) != 4 or not op.notes.weights_oihw or \
            op.attrs.get("layout") != "NHWC":
        return shape
    o, i, kh, kw = shape
    if op.attrs.get("weight_layout") == "1HWC":
        return (i, kh, kw, o)
    return (o, kh, kw, i)


class Graph(WeightsArena, Validation, JsonIO):
    """Operators in execution order and the tensors they use.  Its other
    jobs are parts of their own: the weights arena and the constants made at
    load (:mod:`.weights`), validation and ordering (:mod:`.validation`),
    JSON files (:mod:`.json_io`); its tensors live in :mod:`.tensor`."""

    def __init__(self, name="graph"):
        self.name = name
        self.tensors = {}
        self.ops = []
        #: the workspace budget per op the ``scratch_bytes`` were computed
        #: with (None: the kernels' default); the executor builds its
        #: kernels with the same budget
        self.scratch_budget = None
        #: whether float32 ops may run the C core's native kernels (False:
        #: the NumPy / BLAS paths everywhere, with their scratch); recorded
        #: like the budget, since the scratch sizes depend on it
        self.native = True
        #: inputs whose bytes must outlive their last reader, to the last
        #: op: a Loop or Scan body's values from the enclosing graph, copied
        #: in once per run of the op and read again by every iteration
        self.held_inputs = frozenset()
        #: the weights arena (:class:`pyarena.Arena`) that holds the
        #: constants computed at load -- folded, dequantized, fused biases -- made
        #: on first use by :meth:`keep_constant`; an Executor places its
        #: weights in the same arena, so each is held once
        self.weights = None
        #: what :func:`pyarena.runtime.to_nhwc` converted to NHWC (None:
        #: nothing; see pyarena/runtime/nhwc.py)
        self.relaid = None
        #: the choices the passes made from these shapes, which a retarget
        #: to other shapes must find made again (:mod:`.decisions`)
        self.shape_decisions = []
        #: graph inputs whose values decide tensor shapes (a fed Reshape
        #: target, Resize's scales: small inputs a shape rule asked the value
        #: of): a session keys its signatures by their values and imports
        #: the model with them fixed (set by the ONNX importer)
        self.deciding_inputs = frozenset()
        #: what a compiled model stores with the graph (importers/compiled.py):
        #: its plan (else None: a plan is made for it), and the arrays its
        #: kernels lay out, in the order they keep them (handed out again by
        #: runtime/keeper.py; None: laid out at load).  ``layouts_required``:
        #: the constants read only to lay those out are not stored
        #: (placeholders), so the kernels must take every stored layout
        self.stored_plan = None
        self.stored_layouts = None
        self.layouts_required = False
        #: state kept from one run to the next (a TFLite model's resource
        #: variables, importers/tflite_variables.py): variable name ->
        #: (input, output or None, first value); a session feeds the inputs
        #: and keeps the outputs (importers/session_state.py)
        self.variables = {}

    # -- building ----------------------------------------------------------
    def add_tensor(self, name, shape=None, dtype="float32", nbytes=None,
                   role="activation", data=None):
        """Declare a tensor; returns it.  Give ``shape`` (+ ``dtype``) or
        ``nbytes``.  GraphError for a duplicate name, bad role or size."""
        if not isinstance(name, str) or not name:
            raise GraphError(f"tensor name must be a non-empty string, not {name!r}")
        if name in self.tensors:
            raise GraphError(f"tensor {name!r} is declared twice")
        if role not in ROLES:
            raise GraphError(f"tensor {name!r}: role must be one of {ROLES}, not {role!r}")
        if shape is None and nbytes is None:
            raise GraphError(f"tensor {name!r} needs a shape or nbytes")
        dt, dt_name = _dtype(name, dtype)
        if dt.hasobject or (dt.itemsize == 0 and nbytes is None):
            raise GraphError(f"tensor {name!r}: dtype {dt} cannot live in arena memory "
                             f"({'it holds Python objects' if dt.hasobject else 'it has no size'})")
        if shape is not None:
            if isinstance(shape, (str, bytes, dict)) or not hasattr(shape, "__iter__"):
                raise GraphError(f"tensor {name!r}: shape must be a list of dimensions, "
                                 f"not {shape!r}")
            shape = tuple(shape)
            plain = True                # every dimension a plain int >= 0
            for d in shape:
                if type(d) is not int or d < 0:
                    plain = False
                    break
            if not plain:
                shape = tuple(d if isinstance(d, str) else _int_dim(name, d) for d in shape)
        else:
            plain = False
        if nbytes is not None:
            nbytes = _int_dim(name, nbytes, what="nbytes")
        t = Tensor(name, shape, dt_name, nbytes, role, data)
        if plain:                       # the common case: sized once, remembered
            n = math.prod(shape) * dt.itemsize
            t._nb = (shape, dt_name, n)
            _check_size(t, n)
        elif not t.is_symbolic:
            _check_size(t)
        self.tensors[name] = t
        return t

    def add_op(self, op_type, inputs, outputs, name=None, scratch_bytes=0, **attrs):
        """Append an operator (execution order is the order of calls);
        ``attrs`` are its own attributes -- what a pass records about it
        goes in ``op.notes`` (:class:`OpNotes`), so a name starting with
        ``_`` is refused."""
        name = name or f"{op_type}_{len(self.ops)}"
        if not isinstance(name, str) or not isinstance(op_type, str):
            raise GraphError(f"operator {name!r}: name and type must be strings, "
                             f"not {name!r} / {op_type!r}")
        private = sorted(k for k in attrs if k.startswith("_"))
        if private:
            raise GraphError(f"operator {name!r}: attribute(s) {private} start with '_': "
                             f"what a pass records about an op goes in op.notes")
        for what, names in (("inputs", inputs), ("outputs", outputs)):
            if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)) or \
                    not all(isinstance(x, str) for x in names):
                raise GraphError(f"operator {name!r}: {what} must be a list of tensor "
                                 f"names, not {names!r}")
        scratch = _int_dim(name, scratch_bytes, what="scratch_bytes")
        if scratch > MAX_TENSOR_BYTES:
            raise GraphError(f"operator {name!r} asks for {scratch:,} scratch bytes: "
                             f"refusing an absurd size (at most {MAX_TENSOR_BYTES:,})")
        op = Op(name, op_type, list(inputs), list(outputs), scratch, dict(attrs))
        self.ops.append(op)
        return op

    def retargeted(self, shapes, data=None):
        """A copy of this graph for other input shapes: the same ops (their
        attributes copied, ``scratch_bytes`` 0 until sized again), every
        non-constant tensor with its shape from ``shapes`` (name -> dims, all
        plain ints >= 0), the constants named in ``data`` new tensors with
        that value (of their old shape and dtype), the other constants the
        same Tensor objects (a value of the model: what changes a constant's
        data -- an executor moving it to the weights arena -- keeps its value).
        GraphError for a shape missing, not concrete or of another rank.
        The copy is ordered and valid as this graph was, and keeps the
        passes' ``shape_decisions`` (the caller checks they hold at the new
        shapes: importers/retarget.py)."""
        g = Graph(self.name)
        g.scratch_budget, g.native, g.weights = self.scratch_budget, self.native, self.weights
        g.held_inputs, g.relaid = self.held_inputs, self.relaid
        g.shape_decisions = list(self.shape_decisions)   # (what made this graph)
        g.tensors = retargeted_tensors(self.tensors, shapes, data or {})
        g.ops = [Op(op.name, op.op_type, list(op.inputs), list(op.outputs), 0, dict(op.attrs),
                    op.notes.copy()) for op in self.ops]
        return g

    def add_host_tensor(self, name, kind, role="activation"):
        """Declare a tensor whose value lives outside the arena (``kind``
        one of :data:`~.dtypes.HOST_KINDS`: strings, a sequence, an
        optional); returns it.  It has no shape and 0 bytes in the plan
        and is a pool tensor (``dynamic``): the executor holds it aside."""
        if kind not in HOST_KINDS:
            raise GraphError(f"tensor {name!r}: held value kind must be one of "
                             f"{HOST_KINDS}, not {kind!r}")
        if role == "constant":
            raise GraphError(f"tensor {name!r}: a {kind} cannot be a constant of the "
                             f"weights arena")
        t = self.add_tensor(name, None, "uint8", nbytes=0, role=role)
        t.dtype, t.host, t.dynamic = HOST_DTYPE, kind, True
        return t

    # -- queries -------------------------------------------------------------
    def by_role(self, role):
        return [t for t in self.tensors.values() if t.role == role]

    @property
    def inputs(self):
        return [t.name for t in self.by_role("input")]

    @property
    def outputs(self):
        return [t.name for t in self.by_role("output")]

    @property
    def constants(self):
        return [t.name for t in self.by_role("constant")]

    def pool_ops(self):
        """Names of the ops that read or write a pool tensor
        (``Tensor.dynamic``), or need the value of an input computed at run
        time (``notes.reads_values``), or hold a body graph (Loop, Scan, If)
        with such ops: their kernels are built when the shapes and values
        are known, at run time, and run with the executor's pool."""
        dynamic = {n for n, t in self.tensors.items() if t.dynamic}
        return {op.name for op in self.ops if op.notes.reads_values or
                (dynamic and (not dynamic.isdisjoint(op.inputs) or
                              not dynamic.isdisjoint(op.outputs))) or
                any(isinstance(v, Graph) and v.pool_ops() for v in op.attrs.values())}

    def producers(self):
        """tensor name -> index of the op that writes it."""
        prod = {}
        for i, op in enumerate(self.ops):
            for t in op.outputs:
                if t:
                    prod[t] = i
        return prod

    # -- symbols ----------------------------------------------------------------
    def bind_inputs(self, shapes):
        """Fix graph-input shapes (``{"x": (1, 3, 224, 224)}``) and substitute
        the symbols they bind in every tensor; returns ``{symbol: value}``.
        GraphError for an unknown input, a rank mismatch, a fixed dimension
        changed or a conflicting binding (:func:`pyarena.graph.binding.bind_shapes`)."""
        declared = {t.name: list(t.shape) if t.shape is not None else None
                    for t in self.by_role("input")}
        resolved, env = bind_shapes(declared, shapes)
        for name, dims in resolved.items():
            t = self.tensors[name]
            t.shape = dims
            t.nbytes_given = None
        for t in self.tensors.values():
            if t.is_symbolic:
                t.shape = tuple(env.get(d, d) if isinstance(d, str) else d
                                for d in t.shape)
            if not t.is_symbolic:
                _check_size(t)
        return env

    def unbound_inputs(self):
        """Graph inputs whose shapes still hold symbols: name -> dims."""
        return {t.name: list(t.shape) for t in self.by_role("input") if t.is_symbolic}

    def __repr__(self):
        return (f"<Graph {self.name!r}: {len(self.ops)} ops, {len(self.tensors)} tensors>")
