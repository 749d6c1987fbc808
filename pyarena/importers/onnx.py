"""ONNX importer: an ``.onnx`` file -> a validated :class:`pyarena.Graph`.

Steps: parse (clear error for a truncated or non-ONNX file); bind the
input shapes given (:func:`pyarena.graph.bind_shapes`) on a copy of the
model; ONNX shape inference with data propagation; fold every node
that computes only from constants (initializers, ``Constant``,
``ConstantOfShape``, ``Shape`` of a tensor whose shape is static, and any
chain of those) -- folded values become ``role="constant"`` tensors with
``Tensor.data``, for the weights arena, never the work arena; re-infer if
folding fixed more shapes; then emit one ``Op`` per remaining node with its
attributes (``load_model`` then fills ``scratch_bytes`` from the kernels'
rules).  A tensor whose size still cannot be known is reported by name
together with the graph inputs whose shapes would fix it
(``GraphError.unbound_inputs``).
"""
import math
import os

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import MAX_TENSOR_BYTES, Graph, stable_toposort
from ..graph.binding import bind_shapes, unbound_message
from . import require_extra
from .onnx_contrib import infer_with_contrib, runs_in_domain
from .onnx_qdq import fuse_qdq

__all__ = ["load_onnx", "ModelImportError"]


_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                     "RandomUniformLike", "Multinomial", "Bernoulli"}
_CONTROL_FLOW = {"If", "Loop", "Scan"}


def _onnx():
    return require_extra("onnx", "onnx", ".onnx files")


def _np_dtype(onnx, elem_type, what):
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        raise ModelImportError(f"{what}: unsupported ONNX element type {elem_type}") from None


def _parse(path):
    onnx = _onnx()
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    if size == 0:
        raise ModelImportError(f"{path}: empty file")
    try:
        model = onnx.load(path, load_external_data=True)
    except Exception as exc:
        raise ModelImportError(f"{path}: not a readable ONNX model (truncated or not "
                               f"ONNX?): {type(exc).__name__}: {exc}") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelImportError(f"{path}: the file holds no ONNX graph (wrong format?)")
    return model


def _dims(vi):
    """Shape of a ValueInfo: ints, symbol strings, None for unknown; or None
    if the rank is unknown."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    out = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _check_dims(name, dims, itemsize=4):
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise ModelImportError(f"tensor {name!r} has negative dimension {d} in shape "
                                   f"{list(dims)}")
    if all(isinstance(d, int) for d in dims):
        n = math.prod(dims) * itemsize
        if n > MAX_TENSOR_BYTES:
            raise ModelImportError(f"tensor {name!r} would need {n:,} bytes (shape "
                                   f"{list(dims)}): refusing an absurd size")


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


def _attrs(onnx, node):
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise UnsupportedOpError(f"operator {node.name!r} ({node.op_type}): subgraph "
                                     f"attributes are not supported")
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


# -- constant folding ---------------------------------------------------------
def _fold_node(onnx, node, vals, shapes, opset):
    """Value(s) of a node whose inputs are all known; None if it cannot be
    folded (not deterministic, or not evaluable)."""
    t = node.op_type
    a = _attrs(onnx, node)
    x = [vals.get(i) if i else None for i in node.input]
    if t == "Constant":
        if "value" in a:
            return [np.asarray(a["value"])]
        for k, dt in (("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
            if k in a:
                return [np.asarray(a[k], dtype=dt)]
        return None
    if t == "Shape":
        shp = shapes.get(node.input[0])
        if shp is None or not all(isinstance(d, int) for d in shp):
            return None
        s = np.asarray(shp, dtype=np.int64)
        start, end = a.get("start", 0), a.get("end", None)
        return [s[start:end]]
    if t == "Size":
        shp = shapes.get(node.input[0])
        if shp is None or not all(isinstance(d, int) for d in shp):
            return None
        return [np.asarray(math.prod(shp), dtype=np.int64)]
    if t == "ConstantOfShape":
        shp = [int(d) for d in x[0].reshape(-1)]
        val = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)
        _check_dims(node.output[0], shp, val.dtype.itemsize)
        return [np.full(shp, val[0], dtype=val.dtype)]
    if t == "DequantizeLinear" and not a.get("block_size"):
        return [_dequantize(x[0], x[1], x[2] if len(x) > 2 else None, a.get("axis", 1))]
    if t in ("Identity", "Dropout"):
        return [x[0]]
    if t == "Cast":
        return [x[0].astype(onnx.helper.tensor_dtype_to_np_dtype(a["to"]))]
    if t == "Unsqueeze":
        axes = a.get("axes") if opset < 13 else x[1]
        r = x[0]
        nd = r.ndim + len(axes)
        for ax in sorted(int(v) + nd if int(v) < 0 else int(v) for v in axes):
            r = np.expand_dims(r, ax)
        return [r]
    if t == "Squeeze":
        axes = a.get("axes") if opset < 13 else (x[1] if len(x) > 1 else None)
        if axes is None:
            return [np.squeeze(x[0])]
        return [np.squeeze(x[0], axis=tuple(int(v) for v in axes))]
    if t == "Concat":
        return [np.concatenate([v for v in x if v is not None], axis=a["axis"])]
    if t == "Gather":
        return [np.take(x[0], x[1].astype(np.int64), axis=a.get("axis", 0))]
    if t == "Reshape" and opset >= 5:
        shp = [int(d) for d in x[1]]
        if not a.get("allowzero", 0):
            shp = [x[0].shape[i] if d == 0 else d for i, d in enumerate(shp)]
        return [x[0].reshape(shp)]
    if t in ("Add", "Sub", "Mul", "Div") and all(v is not None for v in x):
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[t]
        r = f(x[0], x[1])
        if t == "Div" and x[0].dtype.kind in "iu":
            r = np.trunc(r)
        return [np.asarray(r).astype(np.result_type(x[0], x[1]))]
    # anything else: the ONNX reference implementation, one node
    try:
        from onnx.reference import ReferenceEvaluator
        ins = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
               for n in node.input if n]
        outs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                for n in node.output if n]
        g = onnx.helper.make_graph([node], "fold", ins, outs)
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", opset)])
        ref = ReferenceEvaluator(m)
        res = ref.run(None, {n: vals[n] for n in node.input if n})
        return [np.asarray(r) for r in res]
    except Exception:
        return None


def _dequantize(q, scale, zero_point, axis):
    """``(q - zero_point) * scale`` in the scale's type, per tensor or per
    ``axis`` (a constant DequantizeLinear folded at import)."""
    scale = np.asarray(scale)
    zp = np.zeros((), np.float64) if zero_point is None else np.asarray(zero_point)
    if scale.size > 1:
        axis = axis + q.ndim if axis < 0 else axis
        shape = [1] * q.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), (zp.reshape(shape) if zp.size > 1 else zp)
    out = (q.astype(np.float64) - zp.astype(np.float64)) * scale.astype(np.float64)
    return out.astype(scale.dtype)


def load_onnx(path, inputs=None, fold=True):
    """Import ``path``.  ``inputs``: dict graph-input name -> dims that fix
    its symbolic dimensions.  Raises ModelImportError / UnsupportedOpError
    (both GraphErrors) with the tensor or operator at fault."""
    imp = _OnnxImport(path)
    imp.bind(inputs)
    fuse_qdq(imp.onnx, imp.model)   # QDQ chains -> integer operators
    imp.check_initializers()
    imp.shapes, imp.types = _collect(imp.infer(imp.model))
    remaining = imp.fold_constants(fold)
    if fold and any(s is None or any(not isinstance(d, int) for d in s)
                    for n in remaining for s in (imp.shapes.get(o) for o in n.output if o)):
        imp.reinfer(remaining)     # folding may have fixed shapes (a Reshape target)
    return imp.build(remaining)


class _OnnxImport:
    """The state of one import, step by step (see the module docstring)."""

    def __init__(self, path):
        self.onnx = _onnx()
        self.path = path
        self.model = _parse(path)
        self.opset = 1
        for o in self.model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        self.init_names = {i.name for i in self.model.graph.initializer}
        self.sym_inputs = {}
        self.vals = {}

    def bind(self, inputs):
        """Bind the given input shapes on a copy of the model; remember the
        inputs that keep unknown dimensions."""
        if inputs:
            self.model = self.onnx.ModelProto.FromString(self.model.SerializeToString())
        by_name = {i.name: i for i in self.model.graph.input
                   if i.name not in self.init_names}
        resolved, _ = bind_shapes({name: _dims(vi) for name, vi in by_name.items()},
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
            dims = _dims(vi)
            if dims is None or any(not isinstance(d, int) for d in dims):
                self.sym_inputs[name] = dims

    def check_initializers(self):
        """A quick size check on the initializers before anything is decoded."""
        for init in self.model.graph.initializer:
            dt = _np_dtype(self.onnx, init.data_type, f"initializer {init.name!r}")
            _check_dims(init.name, list(init.dims), dt.itemsize)

    def infer(self, m):
        try:
            return infer_with_contrib(
                self.onnx, m, lambda mm: self.onnx.shape_inference.infer_shapes(
                    mm, data_prop=True), _collect)
        except Exception as exc:
            raise ModelImportError(f"{self.path}: ONNX shape inference failed: "
                                   f"{exc}") from None

    def fold_constants(self, fold):
        """Evaluate every node computable from constants into ``vals``;
        returns the nodes left to run, in a valid order."""
        onnx, vals = self.onnx, self.vals
        for init in self.model.graph.initializer:
            vals[init.name] = onnx.numpy_helper.to_array(init)
        outside = set(vals) | {i.name for i in self.model.graph.input}
        nodes = _toposort(list(self.model.graph.node), outside)
        for i, n in enumerate(nodes):
            if not n.name:
                n.name = f"{n.op_type}_{i}"
        for n in nodes:
            if n.domain not in ("", "ai.onnx") and not runs_in_domain(n.op_type, n.domain):
                raise UnsupportedOpError(f"operator {n.name!r}: op {n.op_type!r} from "
                                         f"domain {n.domain!r} is not supported")
        remaining = []
        for n in nodes:
            can = fold and n.op_type not in _NONDETERMINISTIC and \
                n.op_type not in _CONTROL_FLOW
            if can and n.op_type in ("Shape", "Size"):
                ok = True
            else:
                ok = can and all((not i) or i in vals for i in n.input)
            res = _fold_node(onnx, n, vals, self.shapes, self.opset) if ok else None
            if res is None:
                remaining.append(n)
                continue
            for name, v in zip(n.output, res):
                if name:
                    vals[name] = v
                    self.shapes[name] = list(v.shape)
        return remaining

    def reinfer(self, remaining):
        """Shape inference again over the remaining nodes with the folded
        values as initializers."""
        onnx = self.onnx
        m2 = onnx.ModelProto()
        m2.CopyFrom(self.model)
        del m2.graph.node[:]
        m2.graph.node.extend(remaining)
        used = {i for n in remaining for i in n.input}
        keep = [onnx.numpy_helper.from_array(np.asarray(v), name)
                for name, v in self.vals.items() if name in used]
        del m2.graph.initializer[:]
        m2.graph.initializer.extend(keep)
        del m2.graph.value_info[:]
        names = {k.name for k in keep}
        ins = [vi for vi in m2.graph.input if vi.name not in names]
        del m2.graph.input[:]
        m2.graph.input.extend(ins)
        s2, t2 = _collect(self.infer(m2))
        for k, v in s2.items():
            if v is not None and all(isinstance(d, int) for d in v):
                self.shapes[k] = v
        self.types.update({k: v for k, v in t2.items() if k not in self.types})

    def build(self, remaining):
        """The Graph: one Op per remaining node, constants with their data."""
        graph_outputs = [o.name for o in self.model.graph.output]
        self.g = Graph(os.path.splitext(os.path.basename(str(self.path)))[0])
        consumers = {i for n in remaining for i in n.input if i}
        for vi in self.model.graph.input:
            if vi.name in self.init_names or vi.name in self.vals:
                continue
            if vi.name in consumers or vi.name in graph_outputs:
                self.declare(vi.name, "input")
        for name in graph_outputs:
            if name in self.vals:
                raise ModelImportError(f"graph output {name!r} is a constant (the whole "
                                       f"output folds away); nothing to run")
        for n in remaining:
            for i in n.input:
                if i and i not in self.g.tensors:
                    self.declare(i, "constant" if i in self.vals else "activation")
            outs = []
            for o in n.output:
                if not o or (o not in consumers and o not in graph_outputs and outs):
                    outs.append("")   # unused optional output (mask, indices ...)
                    continue
                self.declare(o, "output" if o in graph_outputs else "activation")
                outs.append(o)
            while outs and outs[-1] == "":
                outs.pop()
            self.g.add_op(n.op_type, list(n.input), outs, name=n.name, **self.attrs(n))
        return self.g.validate()

    def attrs(self, n):
        attrs = _attrs(self.onnx, n)
        attrs["_opset"] = self.opset
        if n.op_type in ("Softmax", "LogSoftmax", "Hardmax"):
            if self.opset < 13:
                attrs.setdefault("axis", 1)
                attrs["coerce_2d"] = 1
            else:
                attrs.setdefault("axis", -1)
        return attrs

    def declare(self, name, role):
        g = self.g
        if name in g.tensors:
            return
        if role == "constant":
            v = np.asarray(self.vals[name])
            g.add_tensor(name, v.shape, v.dtype, role="constant", data=v)
            return
        shp = self.shapes.get(name)
        et = self.types.get(name)
        if et is None or shp is None or any(not isinstance(d, int) for d in shp):
            what = "unknown shape" if shp is None else f"shape {shp}"
            why = ("; " + unbound_message(self.sym_inputs) if self.sym_inputs else
                   "; the model does not say and ONNX shape inference could not derive it")
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
