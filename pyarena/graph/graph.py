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
import functools
import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from ..memory import Arena
from ..memory.mapped import is_mapped
from .binding import bind_shapes, unbound_message
from .notes import OpNotes

__all__ = ["Graph", "Tensor", "Op", "GraphError", "ROLES", "MAX_TENSOR_BYTES",
           "stable_toposort", "conv_weight_shape"]

ROLES = ("input", "output", "constant", "activation")
# Beyond this a tensor cannot be real on any edge device: refuse it before
# anything is allocated (a petabyte-sized dimension in a malformed file).
MAX_TENSOR_BYTES = 1 << 48
#: constants made at load up to this size stay plain NumPy arrays
#: (:meth:`Graph.constant_data`); larger ones go to the weights arena
SMALL_CONSTANT_BYTES = 4096


@dataclass
class Tensor:
    """A tensor: a shape and dtype, or just a byte size, and its role."""

    name: str
    shape: tuple = None           # ints, or str symbols until bound
    dtype: str = "float32"
    nbytes_given: int = None      # for tensors known only by size
    role: str = "activation"
    data: object = None           # constant value (numpy array) if known
    #: a pool tensor: its shape depends on data, so it is not planned (0
    #: bytes in the plan); the executor takes it from its Pool when it is
    #: produced and frees it after its last reader
    dynamic: bool = False
    #: (shape, dtype, bytes) of the last ``nbytes`` of a tuple shape: the
    #: planner asks thousands of times; a new shape or dtype object recomputes
    _nb: tuple = field(default=None, repr=False, compare=False)

    @property
    def is_symbolic(self):
        shape = self.shape
        if shape is None:
            return False
        for d in shape:       # plain ints first: the planner asks this often
            if type(d) is not int and not isinstance(d, (int, np.integer)):
                return True
        return False

    @property
    def nbytes(self):
        """Size in bytes; GraphError if still symbolic or invalid."""
        shape = self.shape
        c = self._nb
        if c is not None and c[0] is shape and c[1] is self.dtype:
            return c[2]
        if shape is None:
            if self.nbytes_given is None:
                raise GraphError(f"tensor {self.name!r} has neither a shape nor a size")
            return self.nbytes_given
        if all(type(d) is int for d in shape):      # the common case, without NumPy
            n = math.prod(shape) * _itemsize(self.dtype)
            if type(shape) is tuple:
                self._nb = (shape, self.dtype, n)
            return n
        if self.is_symbolic:
            syms = [d for d in self.shape if not isinstance(d, (int, np.integer))]
            raise GraphError(
                f"tensor {self.name!r} has unknown dimension(s) {syms} in shape "
                f"{list(self.shape)}; bind the graph input that carries them")
        n = math.prod(int(d) for d in self.shape) * np.dtype(self.dtype).itemsize
        return n


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


class Graph:
    """Operators in execution order and the tensors they use."""

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
        #: nothing; see pyarena/runtime/layout.py)
        self.relaid = None

    def keep_constant(self, value, dtype=None):
        """``value`` (converted to ``dtype`` if given) copied into the
        graph's weights arena, as a read-only array: constants made at load
        live in the global pool, not in malloc'd memory that a freed copy
        would leave fragmented.  An array already in that arena is kept as
        it is."""
        v = np.asarray(value)
        dt = v.dtype if dtype is None else np.dtype(dtype)
        if dt.hasobject or v.size == 0:
            return v.astype(dt, copy=False)
        if self.weights is not None and self.weights.owns(v) and v.flags.c_contiguous \
                and v.dtype == dt:
            kept = v.view()
        else:
            kept = self.constant_buffer(v.shape, dt)
            np.copyto(kept, v, casting="unsafe")
        kept.flags.writeable = False
        return kept

    def constant_data(self, value, dtype=None):
        """The data to give a constant tensor made at load: a view of the
        model file or a small value as it is, anything larger in the
        weights arena (:meth:`keep_constant`)."""
        v = np.asarray(value)
        if is_mapped(v) and (dtype is None or v.dtype == np.dtype(dtype)):
            return v
        if v.nbytes <= SMALL_CONSTANT_BYTES or v.dtype.hasobject:
            return v if dtype is None else v.astype(dtype)
        return self.keep_constant(v, dtype)

    def constant_buffer(self, shape, dtype):
        """A writable array in the graph's weights arena, to compute a
        constant straight into (then :meth:`keep_constant` it)."""
        if self.weights is None:
            self.weights = Arena(alignment=64)
        return self.weights.empty(shape, dtype)

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

    def resized(self, shapes, data=None):
        """A copy of this graph for other input shapes: the same ops (their
        attributes copied, ``scratch_bytes`` 0 until sized again), every
        non-constant tensor with its shape from ``shapes`` (name -> dims, all
        plain ints >= 0), the constants named in ``data`` new tensors with
        that value (of their old shape and dtype), the other constants the
        same Tensor objects (a value of the model: what changes a constant's
        data -- an executor moving it to the weights arena -- keeps its value).
        GraphError for a shape missing, not concrete or of another rank.
        The copy is ordered and valid as this graph was."""
        g = Graph(self.name)
        g.scratch_budget, g.native, g.weights = self.scratch_budget, self.native, self.weights
        g.held_inputs, g.relaid = self.held_inputs, self.relaid
        data = data or {}
        tensors = g.tensors
        for name, t in self.tensors.items():
            if t.role == "constant":
                if name in data:
                    nt = Tensor(name, t.shape, t.dtype, t.nbytes_given, "constant", data[name])
                    nt._nb = t._nb
                    t = nt
                tensors[name] = t
                continue
            shape = shapes.get(name)
            if shape is None or t.shape is None or len(shape) != len(t.shape) or \
                    any(type(d) is not int or d < 0 for d in shape):
                raise GraphError(f"tensor {name!r}: no concrete shape of rank "
                                 f"{len(t.shape or ())} to resize it to (got {shape!r})")
            shape = tuple(shape)
            nt = Tensor(name, shape, t.dtype, None, t.role)
            n = math.prod(shape) * _itemsize(t.dtype)
            nt._nb = (shape, t.dtype, n)
            _check_size(nt, n)
            tensors[name] = nt
        g.ops = [Op(op.name, op.op_type, list(op.inputs), list(op.outputs), 0, dict(op.attrs),
                    op.notes.copy()) for op in self.ops]
        return g

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

    # -- validation -----------------------------------------------------------
    def validate(self):
        """Check the graph and put the ops in a valid execution order.

        Raises GraphError for: an op reading or writing an undeclared
        tensor, a tensor produced twice, a graph input or constant written by
        an op, an activation or output that no op produces, a cycle, and a
        tensor whose size is unknown or absurd.  If the ops are acyclic but
        out of order they are reordered (stable topological sort).
        Returns self.
        """
        tensors = self.tensors
        names, prod, twice = set(), {}, None
        for op in self.ops:
            if op.name in names:
                raise GraphError(f"operator name {op.name!r} is used twice")
            names.add(op.name)
            for t in op.inputs:
                if t and t not in tensors:
                    raise GraphError(f"operator {op.name!r} reads unknown tensor {t!r}")
            if not any(op.outputs):
                raise GraphError(f"operator {op.name!r} has no outputs")
            for t in op.outputs:
                if not t:                               # an omitted optional output
                    continue
                tt = tensors.get(t)
                if tt is None:
                    raise GraphError(f"operator {op.name!r} writes unknown tensor {t!r}")
                if tt.role in ("input", "constant"):
                    raise GraphError(f"operator {op.name!r} writes {tt.role} tensor {t!r}")
                if t in prod:           # reported after every op's own checks
                    twice = twice or (t, prod[t], op.name)
                else:
                    prod[t] = op.name
            if op.scratch_bytes < 0:
                raise GraphError(f"operator {op.name!r}: negative scratch_bytes")
        if twice:
            raise GraphError(f"tensor {twice[0]!r} is produced twice: by {twice[1]!r} "
                             f"and {twice[2]!r}")
        for t in self.tensors.values():
            if t.role in ("activation", "output") and t.name not in prod:
                used = any(t.name in op.inputs for op in self.ops)
                if used or t.role == "output":
                    raise GraphError(f"tensor {t.name!r} ({t.role}) is read but no "
                                     f"operator produces it")
            shape = t.shape
            c = t._nb
            if c is not None and c[0] is shape and c[1] is t.dtype:
                n = c[2]                                        # sized already
            elif shape is not None and all(type(d) is int for d in shape):
                n = math.prod(shape) * _itemsize(t.dtype)      # the common case
            elif t.is_symbolic:
                unbound = self.unbound_inputs()
                syms = [d for d in t.shape if isinstance(d, str)]
                raise GraphError(f"tensor {t.name!r} has unknown dimension(s) {syms} in "
                                 f"shape {list(t.shape)}; " + unbound_message(unbound),
                                 unbound_inputs=unbound)
            else:
                n = t.nbytes  # raises for missing sizes
            _check_size(t, n)
        self.ops = self._toposort(prod)
        return self

    def _toposort(self, prod):
        done = set()
        for op in self.ops:     # already in order (the common case): nothing to do
            for t in op.inputs:
                if t and t in prod and t not in done:
                    break
            else:
                done.update(op.outputs)
                continue
            break
        else:
            return self.ops
        index = {op.name: i for i, op in enumerate(self.ops)}
        deps = []
        for op in self.ops:
            d = {index[prod[t]] for t in op.inputs if t and t in prod}
            deps.append(d)
        if all(max(d, default=-1) < i for i, d in enumerate(deps)):
            return self.ops  # already in order: the common case
        users = [[] for _ in self.ops]
        indeg = [0] * len(self.ops)
        for i, d in enumerate(deps):
            for j in d:
                if j == i:
                    raise GraphError(f"operator {self.ops[i].name!r} reads its own output")
                users[j].append(i)
                indeg[i] += 1
        order, stuck = stable_toposort(users, indeg)
        if stuck:
            names = [self.ops[i].name for i in stuck]
            raise GraphError(f"the graph has a cycle through operator(s) {names[:5]}")
        return [self.ops[i] for i in order]

    # -- JSON -------------------------------------------------------------------
    def to_dict(self):
        tensors = []
        for t in self.tensors.values():
            d = {"name": t.name, "role": t.role}
            if t.shape is not None:
                d["shape"] = [d_ if isinstance(d_, str) else int(d_) for d_ in t.shape]
                d["dtype"] = t.dtype
            else:
                d["nbytes"] = int(t.nbytes_given)
            tensors.append(d)
        # a Loop's body graph and a shape rule are not data: left out (a
        # JSON graph plans, it does not run control flow)
        ops = []
        for o in self.ops:
            d = {"name": o.name, "type": o.op_type, "inputs": o.inputs,
                 "outputs": o.outputs, "scratch_bytes": o.scratch_bytes,
                 "attrs": _jsonable({k: v for k, v in o.attrs.items()
                                     if not callable(v) and not isinstance(v, Graph)})}
            notes = o.notes.to_json()
            if notes:
                d["notes"] = notes
            ops.append(d)
        d = {"name": self.name, "tensors": tensors, "ops": ops}
        if self.scratch_budget is not None:
            d["scratch_budget"] = int(self.scratch_budget)
        if not self.native:
            d["native"] = False
        return d

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict) or not isinstance(d.get("tensors"), list) or \
                not isinstance(d.get("ops"), list):
            raise GraphError("a JSON graph needs 'tensors' and 'ops' lists")
        g = cls(d.get("name", "graph"))
        for i, t in enumerate(d["tensors"]):
            if not isinstance(t, dict) or "name" not in t:
                raise GraphError(f"tensors[{i}] needs a 'name'")
            g.add_tensor(t["name"], t.get("shape"), t.get("dtype", "float32"),
                         t.get("nbytes"), t.get("role", "activation"))
        for i, o in enumerate(d["ops"]):
            if not isinstance(o, dict) or "type" not in o:
                raise GraphError(f"ops[{i}] needs a 'type'")
            attrs = o.get("attrs", {})
            if not isinstance(attrs, dict):
                raise GraphError(f"ops[{i}]: 'attrs' must be an object, not {attrs!r:.60}")
            attrs, legacy = _legacy_notes(attrs)
            op = g.add_op(o["type"], o.get("inputs", []), o.get("outputs", []),
                          name=o.get("name"), scratch_bytes=o.get("scratch_bytes", 0), **attrs)
            notes = o.get("notes", {})
            if legacy and isinstance(notes, dict):
                notes = {**legacy, **notes}
            if notes or "notes" in o:
                try:
                    op.notes = OpNotes.from_json(notes)
                except (TypeError, ValueError) as exc:
                    raise GraphError(f"ops[{i}]: {exc}") from None
        budget = d.get("scratch_budget")
        if budget is not None:
            g.scratch_budget = _int_dim("graph", budget, what="scratch_budget")
        g.native = bool(d.get("native", True))
        return g

    @classmethod
    def load(cls, path):
        """Read a JSON graph file; GraphError with the path on bad JSON."""
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except json.JSONDecodeError as exc:
            raise GraphError(f"{path}: not valid JSON ({exc})") from None
        except UnicodeDecodeError as exc:
            raise GraphError(f"{path}: not a UTF-8 text file ({exc.reason} at byte "
                             f"{exc.start})") from None
        except RecursionError:
            raise GraphError(f"{path}: JSON nested too deeply") from None
        except OSError as exc:
            raise GraphError(f"{path}: {exc.strerror or exc}") from None
        try:
            return cls.from_dict(d)
        except GraphError as exc:
            raise type(exc)(f"{path}: {exc}", exc.unbound_inputs) from None

    def save(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    def __repr__(self):
        return (f"<Graph {self.name!r}: {len(self.ops)} ops, {len(self.tensors)} tensors>")


def stable_toposort(users, indeg):
    """Kahn's algorithm, always taking the lowest index that is ready, so an
    order that is already valid is kept.  ``users[i]``: the nodes that read
    node i; ``indeg[i]``: how many nodes node i reads (consumed).  Returns
    ``(order, stuck)``: ``stuck`` lists the nodes on or behind a cycle."""
    import heapq
    ready = [i for i, n in enumerate(indeg) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    stuck = [i for i, n in enumerate(indeg) if n > 0] if len(order) != len(indeg) else []
    return order, stuck


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    return np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=256)
def _known_dtype(dtype):
    dt = np.dtype(dtype)
    return dt, dt.name          # dtype.name costs more than the lookup


def _dtype(name, dtype):
    """(np.dtype, its name) of a tensor's dtype; GraphError if unknown."""
    try:
        return _known_dtype(dtype)
    except TypeError:           # unhashable: a spec NumPy may still read
        pass
    except Exception:
        raise GraphError(f"tensor {name!r}: unknown dtype {dtype!r}") from None
    try:
        dt = np.dtype(dtype)
    except Exception:
        raise GraphError(f"tensor {name!r}: unknown dtype {dtype!r}") from None
    return dt, dt.name


def _int_dim(owner, value, what="dimension"):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GraphError(f"tensor/op {owner!r}: {what} must be an integer, not {value!r}")
    if value < 0:
        raise GraphError(f"tensor/op {owner!r}: negative {what} {value}")
    return int(value)


def _check_size(t, n=None):
    n = t.nbytes if n is None else n
    if n > MAX_TENSOR_BYTES:
        raise GraphError(f"tensor {t.name!r} would need {n:,} bytes (shape "
                         f"{list(t.shape) if t.shape else '?'}): refusing an absurd size")


#: attributes graphs saved before ``Op.notes`` held notes in -> their notes
_LEGACY_NOTES = {"_opset": "opset", "_oihw": "weights_oihw",
                 "_scratch_budget": "scratch_budget", "_path": "kernel_path"}


def _legacy_notes(attrs):
    """(attributes, notes) of a saved op whose attributes may hold notes
    under their old names (graphs saved before ``Op.notes``)."""
    if not any(k in _LEGACY_NOTES for k in attrs):
        return attrs, {}
    return ({k: v for k, v in attrs.items() if k not in _LEGACY_NOTES},
            {_LEGACY_NOTES[k]: v for k, v in attrs.items() if k in _LEGACY_NOTES})


def _jsonable(x):
    if isinstance(x, OpNotes):      # (a patched stage's ops)
        return x.to_json()
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, bytes):
        return x.decode("latin-1")
    return x
