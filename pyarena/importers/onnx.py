"""ONNX importer: an ``.onnx`` file -> a validated :class:`pyarena.Graph`.

Steps: parse (clear error for a truncated or non-ONNX file); bind the
input shapes given (:func:`pyarena.graph.bind_shapes`) on a copy of the
model; shape inference with value propagation (pyarena's own rules,
``onnx_shapes.py``; ONNX's for a model with an op they do not cover); fold every node
that computes only from constants (initializers, ``Constant``,
``ConstantOfShape``, ``Shape`` of a tensor whose shape is static, and any
chain of those) -- folded values become ``role="constant"`` tensors with
``Tensor.data``, for the weights arena, never the work arena; re-infer if
folding fixed more shapes; then emit one ``Op`` per remaining node with its
attributes (``load_model`` then fills ``scratch_bytes`` from the kernels'
rules).  A tensor whose size still cannot be known is reported by name
together with the graph inputs whose shapes would fix it
(``GraphError.unbound_inputs``).

Folding never amplifies: a node is folded when its output is known (from
shape inference, or from its inputs for ConstantOfShape) to hold at most
``FOLD_MAX_BYTES`` (shape arithmetic) or at most ``FOLD_GROWTH`` times
the constant bytes it reads (a weight transposed, cast or dequantized).
A constant-producing node that would be larger (a ConstantOfShape of
8192 x 8192 from a 16-byte shape, a Tile or Expand of a small constant)
stays a run-time op whose output is planned like any tensor, so the
import never materialises it and the memory budget sees it (a large
ConstantOfShape that a kernel can only take as a constant, a Conv weight,
becomes a broadcast constant instead: see ``weights_of_shape``).  Re-inference
gets the small folded values as initializers and every other constant as
a typed graph input: no tensor data is copied back into protobuf.
"""
import math
import os
from functools import partial

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import Graph, stable_toposort
from ..graph.binding import bind_shapes, unbound_message
from ..runtime.kernels import KERNELS, op_fact
from . import require_extra
from .onnx_contrib import infer_with_contrib, runs_in_domain
from .onnx_control import resolve_bodies, take_branch
from .onnx_data import check_initializer_data, parse_model
from .onnx_dqlstm import dequantize_lstms
from .onnx_fold import (FOLD_MAX_BYTES, MAX_TENSOR_BYTES, _attrs, _check_dims, _fold_node,
                        _plain_dims)
from .onnx_dynamic import dependent_tensors, shape_rule, value_ops
from .onnx_loop import outer_names
from .onnx_qdq import fuse_qdq
from .onnx_shapes import NotCovered, infer_shapes

__all__ = ["load_onnx", "ModelImportError"]


#: ... or this many times the bytes of the constants it reads
FOLD_GROWTH = 8
#: pyarena's own shape inference (onnx_shapes.py) first; False: always
#: ONNX's, whose operator-schema registry costs ~7 MiB resident for good
OWN_SHAPE_INFERENCE = True
#: rounds of shape inference + folding after the first (each may fix
#: shapes that let more fold)
MAX_FOLD_ROUNDS = 8


def _fold_kind(op_type):
    """How the importer folds ``op_type`` on constant inputs (its kernel's
    ``fold``; an op nothing declares: "capped")."""
    return op_fact(op_type, "fold") or "capped"


def _onnx():
    return require_extra("onnx", "onnx", ".onnx files")


def _np_dtype(onnx, elem_type, what, _known={}):
    dt = _known.get(elem_type)
    if dt is not None:
        return dt
    try:
        dt = _known[elem_type] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
        return dt
    except Exception:
        raise ModelImportError(f"{what}: unsupported ONNX element type {elem_type}") from None


def _dims(vi):
    """Shape of a ValueInfo: ints, symbol strings, None for unknown; or None
    if the rank is unknown."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    out = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_value"):     # -1: "any size", as some exporters write
            out.append(None)
        elif d.HasField("dim_param") and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _input_dims(vi):
    """A graph input's dims, the symbol ``?`` (each one its own unknown,
    not one symbol shared) as unknown, to be bound."""
    dims = _dims(vi)
    if dims is None:
        return None
    return [None if d == "?" else d for d in dims]


def _stored_nbytes(v):
    """Bytes ``v`` really holds: a broadcast (stride 0) axis costs nothing."""
    v = np.asarray(v)
    return v.itemsize * math.prod(d for d, st in zip(v.shape, v.strides) if st)


def _toposort(nodes, produced_outside):
    """Nodes in a valid order; ModelImportError on a cycle or a missing input."""
    prod = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                prod[o] = i
    indeg = [0] * len(nodes)
    users = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for t in set(x for x in n.input if x):
            if t in prod:
                if prod[t] == i:
                    raise ModelImportError(f"node {n.name or n.op_type!r} reads its own "
                                           f"output {t!r} (cyclic graph)")
                users[prod[t]].append(i)
                indeg[i] += 1
            elif t not in produced_outside:
                raise ModelImportError(f"node {n.name or n.op_type!r} reads tensor {t!r} "
                                       f"that nothing produces")
    order, stuck = stable_toposort(users, indeg)
    if stuck:
        names = [nodes[i].name or nodes[i].op_type for i in stuck]
        raise ModelImportError(f"the graph has a cycle through node(s) {names[:5]}")
    return [nodes[i] for i in order]


def load_onnx(path, inputs=None, fold=True, values=None, cache=None):
    """Import ``path``.  ``inputs``: dict graph-input name -> dims that fix
    its symbolic dimensions; ``values``: dict graph-input name -> a value
    the input takes (it becomes a constant: conditions and shapes computed
    from it fold, an ``If`` on it takes its branch); ``cache``: an
    :class:`~.import_cache.ImportCache` shared by the imports of this file
    for other input shapes (the parse, the static folds).  Raises
    ModelImportError / UnsupportedOpError (both GraphErrors) with the
    tensor or operator at fault."""
    if cache is None:
        imp = _OnnxImport(path)
        imp.fix_values(values)
        imp.bind(inputs)
        imp.rewrite()
    else:
        if cache.parsed is None:        # the first import: parse and rewrite once
            first = _OnnxImport(path)
            first.rewrite()
            cache.parsed = (first.model, first.mapped,
                            frozenset(i.name for i in first.model.graph.initializer))
        imp = _OnnxImport(path, cache=cache)
        imp.fix_values(values)
        imp.bind(inputs)
        if cache.reduced is None:
            g = imp.run(fold)
            cache.reduce(imp.onnx, imp.model)   # the next imports skip the static nodes
            return g
    return imp.run(fold)


def _unknown_shapes(shapes, nodes):
    return any(s is None or any(not isinstance(d, int) for d in s)
               for n in nodes for s in (shapes.get(o) for o in n.output if o))


class _OnnxImport:
    """The state of one import, step by step (see the module docstring)."""

    def __init__(self, path, model=None, cache=None):
        self.onnx = _onnx()
        self.path = path
        self.cache = cache
        self.unstable = set()   # outputs of inlined If branches: never cached
        self.static = set()     # tensors whose value is the same for every shape
        if cache is not None:   # a copy of the model parsed and rewritten once
            model, self.mapped, static = cache.parsed
            self.model = self.onnx.ModelProto()
            self.model.CopyFrom(model if cache.reduced is None else cache.reduced)
            self.static = set(static) | set(self.mapped)
            self.subgraph = False
        else:   # a body subgraph (onnx_loop.py) comes as a model already built
            self.model, self.mapped = (parse_model(self.onnx, path) if model is None
                                       else (model, {}))
            self.subgraph = model is not None
        self.opset = 1
        for o in self.model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        self.init_names = {i.name for i in self.model.graph.initializer}
        self.sym_inputs = {}
        self.vals = {}
        self.changes = 0        # nodes folded or inlined so far
        self.used_onnx_inference = False
        self.bodies = {}        # Loop / Scan / If node name -> (outer inputs, attrs)
        self.forced = {}        # output shapes set from a body: kept for inference
        self.dependent = set()  # tensors computed from a data-sized one (build)

    def rewrite(self):
        """The shape-independent rewrites of the model."""
        fuse_qdq(self.onnx, self.model, self.mapped)   # QDQ chains -> integer operators
        dequantize_lstms(self.onnx, self.model, self.mapped, self.init_names)

    def run(self, fold):
        """Everything after binding: infer, fold, import the Loop / Scan
        bodies, infer and fold again while it helps, build the Graph."""
        self.check_initializers()
        self.shapes, self.types = self.infer(self.model, first=True)
        remaining = self.fold_rounds(self.fold_constants(fold), fold)
        for _ in range(MAX_FOLD_ROUNDS):
            if not resolve_bodies(self, remaining, strict=False):
                break
            remaining = self.fold_rounds(remaining, fold, force=True)
        resolve_bodies(self, remaining, strict=True)
        g = self.build(remaining)
        if self.cache is not None:      # what a retargeted graph must compute again
            self.cache.derived = frozenset(n for n, t in g.tensors.items()
                                           if t.role == "constant" and n not in self.static)
        return g

    def fold_rounds(self, remaining, fold, force=False):
        """Folding may fix shapes (a Reshape target), which lets more fold
        (a Shape of that Reshape's output ...): infer and fold again while
        it helps (``force``: infer at least once)."""
        for _ in range(MAX_FOLD_ROUNDS):
            if not force and not (fold and _unknown_shapes(self.shapes, remaining)):
                break
            force = False
            self.reinfer(remaining)
            before = self.changes
            remaining = self.fold_pass(remaining, fold)
            if self.changes == before:
                break
        return remaining

    def fix_values(self, values):
        """Graph inputs given as values become initializers."""
        if not values:
            return
        g = self.model.graph
        by_name = {vi.name: vi for vi in g.input if vi.name not in self.init_names}
        for name, value in values.items():
            vi = by_name.get(name)
            if vi is None:
                raise ModelImportError(f"values: {name!r} is not a graph input; inputs "
                                       f"are {sorted(by_name)}")
            dt = _np_dtype(self.onnx, vi.type.tensor_type.elem_type, f"input {name!r}")
            v = np.asarray(value, dtype=dt)
            dims = _dims(vi)
            if dims is not None and (len(dims) != v.ndim or any(
                    isinstance(d, int) and d != n for d, n in zip(dims, v.shape))):
                raise ModelImportError(f"values: {name!r} has shape {list(v.shape)}, the "
                                       f"input is {dims}")
            g.initializer.append(self.onnx.numpy_helper.from_array(v, name))
            self.init_names.add(name)
        keep = [vi for vi in g.input if vi.name not in values]
        del g.input[:]
        g.input.extend(keep)

    def bind(self, inputs):
        """Bind the given input shapes on a copy of the model; remember the
        inputs that keep unknown dimensions."""
        if inputs and self.cache is None:
            self.model = self.onnx.ModelProto.FromString(self.model.SerializeToString())
        g = self.model.graph
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                for d in vi.type.tensor_type.shape.dim:
                    if d.HasField("dim_value") and d.dim_value < 0:
                        d.Clear()       # -1 ("any size"): unknown, for inference to fill
        by_name = {i.name: i for i in self.model.graph.input
                   if i.name not in self.init_names}
        resolved, _ = bind_shapes({name: _input_dims(vi) for name, vi in by_name.items()},
                                  dict(inputs or {}))
        for name, dims in resolved.items():
            shp = by_name[name].type.tensor_type.shape
            for i, d in enumerate(dims):
                if i < len(shp.dim):
                    shp.dim[i].Clear()
                    shp.dim[i].dim_value = d
                else:
                    shp.dim.add().dim_value = d
        for name, vi in by_name.items():
            dims = _input_dims(vi)
            if dims is None or any(not isinstance(d, int) for d in dims):
                self.sym_inputs[name] = dims

    def check_initializers(self):
        """A quick size check on the initializers before anything is decoded."""
        for init in self.model.graph.initializer:
            dt = _np_dtype(self.onnx, init.data_type, f"initializer {init.name!r}")
            _check_dims(init.name, list(init.dims), dt.itemsize)
            check_initializer_data(self.onnx, init, dt)

    def infer(self, m, first=False):
        """(shapes, types) of ``m``'s tensors: pyarena's own rules, or ONNX's
        shape inference (with the contrib ops' rules) for a model with an
        operator they do not cover, or when ``OWN_SHAPE_INFERENCE`` is off."""
        if OWN_SHAPE_INFERENCE:
            try:
                cached = first and self.cache is not None   # no If branch inlined yet
                return infer_shapes(self.onnx, m, self.opset, _collect, self.path,
                                    self.cache.values if cached else None,
                                    partial(self.cache.attrs, self.decode) if cached else None)
            except NotCovered:
                pass
        self.used_onnx_inference = True
        try:
            return _collect(infer_with_contrib(
                self.onnx, m, lambda mm: self.onnx.shape_inference.infer_shapes(
                    mm, data_prop=True), _collect))
        except Exception as exc:
            raise ModelImportError(f"{self.path}: ONNX shape inference failed: "
                                   f"{exc}") from None

    def fold_constants(self, fold):
        """Evaluate every node computable from constants into ``vals``;
        returns the nodes left to run, in a valid order."""
        onnx, vals = self.onnx, self.vals
        cached = self.cache.values if self.cache is not None else {}
        for init in self.model.graph.initializer:
            if init.name in self.mapped:    # a view of the file: nothing read yet
                vals[init.name] = cached.get(init.name, self.mapped[init.name])
                continue
            if init.name in cached and init.name in self.static:
                vals[init.name] = cached[init.name]
                continue
            try:
                vals[init.name] = onnx.numpy_helper.to_array(init)
            except Exception as exc:
                raise ModelImportError(f"initializer {init.name!r} (dims {list(init.dims)}) "
                                       f"cannot be decoded: {exc}") from None
            if init.name in self.static:
                self.cache.values[init.name] = vals[init.name]
        if self.cache is not None and self.cache.reduced is not None:
            for name in self.cache.values.keys() - vals.keys():   # the static folds
                vals[name] = self.cache.values[name]
                self.shapes[name] = list(vals[name].shape)
                self.static.add(name)
        outside = set(vals) | {i.name for i in self.model.graph.input}
        nodes = _toposort(list(self.model.graph.node), outside)
        for i, n in enumerate(nodes):
            if not n.name:
                n.name = f"{n.op_type}_{i}"
        for n in nodes:
            if n.domain not in ("", "ai.onnx") and not runs_in_domain(n.op_type, n.domain):
                raise UnsupportedOpError(f"operator {n.name!r}: op {n.op_type!r} from "
                                         f"domain {n.domain!r} is not supported")
        return self.fold_pass(nodes, fold)

    def fold_pass(self, nodes, fold):
        """One pass of folding over ``nodes`` (in order); the nodes left.
        Counts what it folded or inlined in ``changes``."""
        onnx, vals = self.onnx, self.vals
        remaining = []
        for n in nodes:
            if n.op_type == "Constant" and n.output and n.output[0] in self.mapped:
                vals[n.output[0]] = self.mapped[n.output[0]]   # read in place
                if self.cache is not None and n.output[0] not in self.unstable:
                    vals[n.output[0]] = self.cache.values.get(n.output[0], vals[n.output[0]])
                    self.cache.store(n, [vals[n.output[0]]])    # static: skipped next time
                continue
            if fold and n.op_type == "If" and n.domain in ("", "ai.onnx") and \
                    n.input and n.input[0] in vals:     # the branch it takes, inlined
                sub, inits = take_branch(onnx, n, vals[n.input[0]])
                vals.update(inits)
                self.unstable.update(o for m in sub for o in m.output)
                self.changes += 1
                remaining.extend(self.fold_pass(sub, fold))
                continue
            kind = _fold_kind(n.op_type)
            can = fold and kind != "never"
            if can and op_fact(n.op_type, "needs_values") is False:
                ok = True
            else:
                ok = can and all((not i) or i in vals for i in n.input)
            ok = ok and self.small_enough(n)
            static = ok and self.cache is not None and \
                self.cache.static_node(n, self.static, self.unstable)
            try:
                res = self.cache.lookup(n) if static else None
                if res is None:
                    res = _fold_node(onnx, n, vals, self.shapes, self.opset) if ok else None
            except (ModelImportError, UnsupportedOpError):
                raise
            except Exception as exc:    # attributes or inputs that do not go together
                raise ModelImportError(
                    f"operator {n.name!r} ({n.op_type}): cannot be evaluated from its "
                    f"constant inputs ({type(exc).__name__}: {str(exc)[:120]})") from None
            if res is not None and kind != "free" and \
                    sum(_stored_nbytes(v) for v in res) > max(
                        FOLD_MAX_BYTES, FOLD_GROWTH * sum(_stored_nbytes(vals[i])
                                                          for i in n.input if i in vals)):
                res = None        # larger than predicted: run it instead
            if res is None:
                remaining.append(n)
                continue
            self.changes += 1
            if static:      # the same for every input shape: kept for the next
                self.cache.store(n, res)
                self.static.update(o for o in n.output if o)
            for name, v in zip(n.output, res):
                if name:
                    vals[name] = v
                    self.shapes[name] = list(v.shape)
        return remaining

    def small_enough(self, n):
        """Whether folding ``n`` amplifies nothing: every output's inferred
        size is known and within max(FOLD_MAX_BYTES, FOLD_GROWTH x the bytes
        it reads); an op whose output size is unknown is folded only if it
        cannot expand its inputs.  ConstantOfShape checks its own size."""
        kind = _fold_kind(n.op_type)
        if kind == "free":
            return True
        read = sum(_stored_nbytes(self.vals[i]) for i in n.input if i and i in self.vals)
        cap = max(FOLD_MAX_BYTES, FOLD_GROWTH * read)
        sizes = []
        for o in n.output:
            if not o:
                continue
            shp, et = self.shapes.get(o), self.types.get(o)
            if shp is None or et is None or not all(isinstance(d, int) and d >= 0
                                                    for d in shp):
                sizes = None
                break
            try:
                itemsize = np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(et)).itemsize
            except Exception:
                itemsize = 8
            sizes.append(math.prod(shp) * itemsize)
        if sizes is not None:
            return sum(sizes) <= cap
        return kind != "expanding"

    def reinfer(self, remaining):
        """Shape inference again over the remaining nodes: the folded
        (small) values they read as initializers, every other constant as a
        typed input -- no tensor data is copied into protobuf but shape
        arithmetic."""
        onnx, g = self.onnx, self.model.graph
        used = {i for n in remaining for i in n.input if i}
        for n in remaining:     # what bodies read from this graph
            if any(a.type == onnx.AttributeProto.GRAPH for a in n.attribute):
                used.update(outer_names(onnx, n))
        small, typed = [], []
        for name in sorted(used & set(self.vals)):
            v = np.asarray(self.vals[name])
            if v.dtype.hasobject:
                raise ModelImportError(f"tensor {name!r}: folded to a value that is not "
                                       f"numeric ({v.dtype}, shape {list(v.shape)})")
            if v.nbytes <= FOLD_MAX_BYTES:   # logical size: from_array copies it
                small.append(onnx.numpy_helper.from_array(v, name))
            else:
                typed.append(onnx.helper.make_tensor_value_info(
                    name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
        consts = set(self.vals)
        ins = [vi for vi in g.input if vi.name not in consts] + typed
        # Loop / Scan outputs sized from their bodies (a graph output's own
        # declaration is what inference reads for it)
        known = {k: onnx.helper.make_tensor_value_info(k, self.types[k], self.shapes[k])
                 for k in self.forced}
        outs = [known.pop(o.name, o) for o in g.output]
        g2 = onnx.helper.make_graph(list(remaining), g.name or "reinfer", ins, outs,
                                    initializer=small, value_info=list(known.values()))
        m2 = onnx.helper.make_model(g2, opset_imports=list(self.model.opset_import),
                                    ir_version=self.model.ir_version)
        s2, t2 = self.infer(m2)
        for k, v in s2.items():
            if v is not None and all(isinstance(d, int) for d in v):
                self.shapes[k] = v
        self.types.update({k: v for k, v in t2.items() if k not in self.types})

    def build(self, remaining):
        """The Graph: one Op per remaining node, constants with their data."""
        graph_outputs = [o.name for o in self.model.graph.output]
        strings = self.onnx.TensorProto.STRING
        # each node's inputs and outputs read from protobuf once
        io = [(n, list(n.input), list(n.output)) for n in remaining]
        for n, n_in, n_out in io:   # before any tensor: name the op, not a dtype
            for name in n_in + n_out:
                if name and self.types.get(name) == strings:
                    raise UnsupportedOpError(
                        f"operator {n.name!r} ({n.op_type}): tensor {name!r} holds "
                        f"strings; pyarena plans and runs numeric tensors only")
        self.g = Graph(os.path.splitext(os.path.basename(str(self.path)))[0])
        self.dependent = dependent_tensors(self, remaining, io)     # may be pool tensors
        consumers = {i for _, n_in, _ in io for i in n_in if i}
        consumers.update(i for extra, _ in self.bodies.values() for i in extra)
        for vi in self.model.graph.input:
            if vi.name in self.init_names or vi.name in self.vals:
                continue
            if vi.name in consumers or vi.name in graph_outputs:
                self.declare(vi.name, "input")
        for name in graph_outputs:
            if name in self.vals and self.subgraph:     # a body may output a constant
                self.declare(name, "constant")
            elif name in self.vals:
                raise ModelImportError(f"graph output {name!r} is a constant (the whole "
                                       f"output folds away); nothing to run")
        tensors = self.g.tensors
        for n, n_in, n_out in io:
            for i in n_in:
                if i and i not in tensors:
                    self.declare(i, "constant" if i in self.vals else "activation")
            read = [o for o in n_out if o in consumers or o in graph_outputs]
            # output 0 stays unless the kernel takes it omitted and another is read
            drop_first = bool(read) and getattr(KERNELS.get(n.op_type),
                                                "outputs_by_position", False)
            outs = []
            for o in n_out:
                if not o or (o not in read and (outs or drop_first)):
                    outs.append("")   # unused optional output (mask, indices ...)
                    continue
                self.declare(o, "output" if o in graph_outputs else "activation")
                outs.append(o)
            while outs and outs[-1] == "":
                outs.pop()
            ins, attrs = n_in, None
            if n.name in self.bodies:       # Loop / Scan / If: its bodies and outer inputs
                extra, attrs = self.bodies[n.name]
                for i in extra:
                    self.declare(i, "constant" if i in self.vals else "activation")
                ins = ins + list(extra)
                attrs = dict(attrs)
            attrs = attrs or self.attrs(n, n_out)
            op = self.g.add_op(n.op_type, ins, outs, name=n.name, **attrs)
            op.notes.opset = self.opset
            if self.dependent and any(i in self.dependent for i in ins + outs if i):
                op.notes.infer = shape_rule(self.onnx, n, self.model.opset_import,
                                            self.opset, _collect)
        self.g.validate()
        self.weights_of_shape()
        value_ops(self.g, {n.name: n for n in remaining},
                  lambda n: shape_rule(self.onnx, n, self.model.opset_import,
                                             self.opset, _collect))
        return self.g

    def weights_of_shape(self):
        """A large ConstantOfShape left as a run-time op whose consumer can
        only take a constant there (a Conv weight made by ConstantOfShape, as
        in ONNX's "light" models) becomes a constant after all: a read-only
        broadcast of its one value, which the executor copies into the
        weights arena under the memory budget.  The consumers' kernels are
        probed with the tensor still an activation, so no data is made."""
        from ..runtime.kernels import graph_kernel
        g = self.g
        for op in [o for o in g.ops if o.op_type == "ConstantOfShape"]:
            out = op.outputs[0] if op.outputs else ""
            src = op.inputs[0] if op.inputs else ""
            t = g.tensors.get(out)
            if t is None or t.role != "activation" or src not in self.vals:
                continue
            needs_const = False
            pool_ops = g.pool_ops()
            for user in g.ops:
                if out in user.inputs and user.name not in pool_ops:
                    try:
                        graph_kernel(g, user)
                    except UnsupportedOpError:
                        needs_const = True
                        break
            if not needs_const:
                continue
            val = np.asarray(op.attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
            t.role = "constant"
            t.data = np.broadcast_to(np.asarray(val[0] if val.size else 0, dtype=t.dtype),
                                     t.shape)
            g.ops.remove(op)

    def attrs(self, n, outputs=None):
        """``n``'s attributes decoded (``outputs``: ``list(n.output)``, if read already)."""
        outputs = list(n.output) if outputs is None else outputs
        if self.cache is not None and not (self.unstable and
                                           any(o in self.unstable for o in outputs)):
            attrs = self.cache.attrs(self.decode, n, outputs)
        else:
            attrs = _attrs(self.onnx, n)
        if n.op_type in ("Softmax", "LogSoftmax", "Hardmax"):
            if self.opset < 13:
                attrs.setdefault("axis", 1)
                attrs["coerce_2d"] = 1
            else:
                attrs.setdefault("axis", -1)
        return attrs

    def decode(self, n):
        return _attrs(self.onnx, n)

    def declare(self, name, role):
        g = self.g
        if name in g.tensors:
            return
        if role == "constant":     # folded values > 4 KiB go to the weights arena
            v = self.vals[name]
            if self.cache is None or not self.cache.is_kept(v):     # else shared as is
                v = g.constant_data(v)
            self.vals[name] = v
            g.add_tensor(name, v.shape, v.dtype, role="constant", data=v)
            return
        shp = self.shapes.get(name)
        et = self.types.get(name)
        if et is not None and shp is not None and _plain_dims(shp):    # the common case
            dt = _np_dtype(self.onnx, et, f"tensor {name!r}")
            if math.prod(shp) * dt.itemsize > MAX_TENSOR_BYTES:
                _check_dims(name, shp, dt.itemsize)                    # raises
            g.add_tensor(name, shp, dt, role=role)
            return
        unknown = shp is None or any(not isinstance(d, int) for d in shp)
        if unknown and et is not None and name in self.dependent:   # sized by the data
            t = g.add_tensor(name, None, _np_dtype(self.onnx, et, f"tensor {name!r}"),
                             nbytes=0, role=role)
            t.dynamic = True
            return
        if et is None or unknown:
            what = "unknown shape" if shp is None else f"shape {shp}"
            why = ("; " + unbound_message(self.sym_inputs) if self.sym_inputs else
                   "; the model does not say and shape inference could not derive it")
            raise ModelImportError(f"cannot size tensor {name!r} ({what})" + why,
                                   unbound_inputs=self.sym_inputs)
        dt = _np_dtype(self.onnx, et, f"tensor {name!r}")
        _check_dims(name, shp, dt.itemsize)
        g.add_tensor(name, shp, dt, role=role)


def _collect(model):
    shapes, types = {}, {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            if tt.elem_type:
                types[vi.name] = tt.elem_type
            d = _dims(vi)
            if d is not None or vi.name not in shapes:
                shapes[vi.name] = d
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
        types[init.name] = init.data_type
    return shapes, types
