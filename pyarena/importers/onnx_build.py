"""The ONNX import's last step: the :class:`pyarena.Graph` of the nodes left
after folding.  One ``Op`` per node with its attributes decoded (the
Softmax family's defaults of its opset), its notes (the opset; the shape
rule of an op touching a pool tensor), and its tensors declared: folded
values as ``role="constant"`` tensors whose data go to the graph's weights
arena, a tensor whose size only the data tells as a pool tensor, any
other tensor of unknown size refused by name together with the graph
inputs whose shapes would fix it (``GraphError.unbound_inputs``).  A large
``ConstantOfShape`` that a kernel can only take as a constant becomes a
broadcast constant (:func:`weights_of_shape`).
"""
import math
import os

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import Graph
from ..graph.binding import unbound_message
from ..runtime.kernels import KERNELS
from .onnx_dynamic import dependent_tensors, shape_rule, value_ops
from .onnx_fold import MAX_TENSOR_BYTES, _attrs, _check_dims, _plain_dims
from .onnx_types import _collect, _np_dtype

__all__ = ["GraphBuild", "weights_of_shape"]


class GraphBuild:
    """The Graph of one import (``imp``: its state -- shapes, types, folded
    values, the bodies of its Loops / Scans / Ifs)."""

    def __init__(self, imp):
        self.imp = imp
        self.onnx, self.cache = imp.onnx, imp.cache
        # the import's own dicts (shared, not copies): declare writes the
        # arena copy of a folded value back into vals
        self.vals, self.shapes, self.types = imp.vals, imp.shapes, imp.types
        self.g = None
        self.dependent = set()  # tensors computed from a data-sized one
        self.host = {}          # tensor name -> kind: values held outside the arena

    def build(self, remaining):
        """The Graph: one Op per remaining node, constants with their data."""
        imp = self.imp
        graph_outputs = [o.name for o in imp.model.graph.output]
        # each node's inputs and outputs read from protobuf once
        io = [(n, list(n.input), list(n.output)) for n in remaining]
        self.host = self._host_tensors(io)
        self.g = Graph(os.path.splitext(os.path.basename(str(imp.path)))[0])
        self.dependent = dependent_tensors(imp, remaining, io, self.host)  # may be pool tensors
        consumers = {i for _, n_in, _ in io for i in n_in if i}
        consumers.update(i for extra, _ in imp.bodies.values() for i in extra)
        self._declare_graph_io(consumers, graph_outputs)
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
            if n.name in imp.bodies:        # Loop / Scan / If: its bodies and outer inputs
                extra, attrs = imp.bodies[n.name]
                for i in extra:
                    self.declare(i, "constant" if i in self.vals else "activation")
                ins = ins + list(extra)
                attrs = dict(attrs)
            attrs = attrs or self.attrs(n, n_out)
            op = self.g.add_op(n.op_type, ins, outs, name=n.name, **attrs)
            op.notes.opset = imp.opset
            op.notes.over_fold_cap = imp.over_cap.get(n.name)
            if self.dependent and any(i in self.dependent for i in ins + outs if i):
                op.notes.infer = shape_rule(self.onnx, n, imp.model.opset_import,
                                            imp.opset, _collect)
        self.g.validate()
        weights_of_shape(self.g, self.vals)
        value_ops(self.g, {n.name: n for n in remaining},
                  lambda n: shape_rule(self.onnx, n, imp.model.opset_import,
                                             imp.opset, _collect))
        return self.g

    def _host_tensors(self, io):
        """The tensors of the remaining nodes that hold strings, sequences or
        optionals: they live outside the arena (``Graph.add_host_tensor``),
        and whatever a node reading them makes is sized by the run, as a
        pool tensor's."""
        kinds = {self.onnx.TensorProto.STRING: "string", "sequence": "sequence",
                 "optional": "optional"}
        types = self.types
        host = {}
        extras = [e for e, _ in self.imp.bodies.values()]     # what bodies read outside
        for n, n_in, n_out in io + [(None, list(e), []) for e in extras]:
            for name in n_in + n_out:
                kind = kinds.get(types.get(name)) if name else None
                if kind is not None:
                    if name in self.vals:
                        where = f"operator {n.name!r} ({n.op_type})" if n is not None \
                            else "a body"
                        raise UnsupportedOpError(
                            f"{where}: tensor {name!r} is a "
                            f"constant {kind}; pyarena holds {kind}s computed or fed "
                            f"at run time only")
                    host[name] = kind
        return host

    def _declare_graph_io(self, consumers, graph_outputs):
        """The graph inputs something reads or outputs; the graph outputs
        that are constants: a body's is one, a model's is copied from one
        by an Identity (a Shape or a window function folded whole: the
        run returns the value)."""
        imp = self.imp
        for vi in imp.model.graph.input:
            if vi.name in imp.init_names or vi.name in self.vals:
                continue
            if vi.name in consumers or vi.name in graph_outputs:
                self.declare(vi.name, "input")
        for name in graph_outputs:
            if name in self.vals and imp.subgraph:      # a body may output a constant
                self.declare(name, "constant")
            elif name in self.vals:
                held = f"{name}:folded"
                self.declare(held, "constant", self.vals[name])
                self.declare(name, "output", self.vals[name])
                self.g.add_op("Identity", [held], [name], name=f"{name}:copy")

    def attrs(self, n, outputs=None):
        """``n``'s attributes decoded (``outputs``: ``list(n.output)``, if read already)."""
        imp = self.imp
        outputs = list(n.output) if outputs is None else outputs
        if self.cache is not None and not (imp.unstable and
                                           any(o in imp.unstable for o in outputs)):
            attrs = self.cache.attrs(self.decode, n, outputs)
        else:
            attrs = _attrs(self.onnx, n)
        if n.op_type in ("Softmax", "LogSoftmax", "Hardmax"):
            if imp.opset < 13:
                attrs.setdefault("axis", 1)
                attrs["coerce_2d"] = 1
            else:
                attrs.setdefault("axis", -1)
        return attrs

    def decode(self, n):
        return _attrs(self.onnx, n)

    def declare(self, name, role, value=None):
        """Tensor ``name`` in the graph (``value``: a folded value of
        another name, for a constant output's copy)."""
        g = self.g
        if name in g.tensors:
            return
        if value is not None and role == "output":
            v = np.asarray(value)
            g.add_tensor(name, v.shape, v.dtype, role=role)
            return
        if role == "constant":     # folded values > 4 KiB go to the weights arena
            v = self.vals[name] if value is None else value
            if name in self.imp.weight_views or (self.cache is not None and _is_view(v)):
                # a weight folded from one value, as a read-only broadcast: a
                # kernel lays it out at setup or the executor places it in
                # its weights arena -- never a second resident copy here
                v = np.asarray(v).view()
                v.flags.writeable = False
            elif self.cache is None or not self.cache.is_kept(v):   # else shared as is
                v = g.constant_data(v)
            self.vals[name] = v
            g.add_tensor(name, v.shape, v.dtype, role="constant", data=v)
            return
        if name in self.host:
            g.add_host_tensor(name, self.host[name], role)
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
            sym_inputs = self.imp.sym_inputs
            what = "unknown shape" if shp is None else f"shape {shp}"
            why = ("; " + unbound_message(sym_inputs) if sym_inputs else
                   "; the model does not say and shape inference could not derive it")
            raise ModelImportError(f"cannot size tensor {name!r} ({what})" + why,
                                   unbound_inputs=sym_inputs)
        dt = _np_dtype(self.onnx, et, f"tensor {name!r}")
        _check_dims(name, shp, dt.itemsize)
        g.add_tensor(name, shp, dt, role=role)


def _is_view(v):
    """Whether ``v`` is a broadcast of fewer values (a weight folded from
    one value, kept by an import cache as such)."""
    v = np.asarray(v)
    return v.size > 1 and 0 in v.strides


def weights_of_shape(g, vals):
    """A large ConstantOfShape left as a run-time op whose consumer can
    only take a constant there (a Conv weight made by ConstantOfShape, as
    in ONNX's "light" models) becomes a constant after all: a read-only
    broadcast of its one value, which the executor copies into the
    weights arena under the memory budget.  The consumers' kernels are
    probed with the tensor still an activation, so no data is made.
    ``vals``: the import's folded values (the op's shape among them)."""
    from ..runtime.kernels import scratch_bytes_for
    for op in [o for o in g.ops if o.op_type == "ConstantOfShape"]:
        out = op.outputs[0] if op.outputs else ""
        src = op.inputs[0] if op.inputs else ""
        t = g.tensors.get(out)
        if t is None or t.role != "activation" or src not in vals:
            continue
        needs_const = False
        pool_ops = g.pool_ops()
        for user in g.ops:
            if out in user.inputs and user.name not in pool_ops:
                try:
                    scratch_bytes_for(g, user)      # built for its size: nothing laid out
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
