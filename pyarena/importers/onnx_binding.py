"""The ONNX import's first step after the parse: what the caller fixes of
the graph inputs.  ``fix_values`` turns inputs given as values (a sample
rate) into initializers, so what is computed from them folds;
``bind_inputs`` writes the given input shapes into the model (through the
one binder, :func:`pyarena.graph.bind_shapes`) and remembers the inputs
that keep unknown dimensions, which an error about a tensor that cannot
be sized names.
"""
import numpy as np

from ..errors import ModelImportError
from ..graph.binding import bind_shapes
from .onnx_types import _dims, _input_dims, _np_dtype

__all__ = ["bind_inputs", "fix_values"]


def fix_values(imp, values):
    """Graph inputs of import ``imp`` given as values become initializers."""
    if not values:
        return
    g = imp.model.graph
    by_name = {vi.name: vi for vi in g.input if vi.name not in imp.init_names}
    for name, value in values.items():
        vi = by_name.get(name)
        if vi is None:
            raise ModelImportError(f"values: {name!r} is not a graph input; inputs "
                                   f"are {sorted(by_name)}")
        dt = _np_dtype(imp.onnx, vi.type.tensor_type.elem_type, f"input {name!r}")
        v = np.asarray(value, dtype=dt)
        dims = _dims(vi)
        if dims is not None and (len(dims) != v.ndim or any(
                isinstance(d, int) and d != n for d, n in zip(dims, v.shape))):
            raise ModelImportError(f"values: {name!r} has shape {list(v.shape)}, the "
                                   f"input is {dims}")
        g.initializer.append(imp.onnx.numpy_helper.from_array(v, name))
        imp.init_names.add(name)
    keep = [vi for vi in g.input if vi.name not in values]
    del g.input[:]
    g.input.extend(keep)


def bind_inputs(imp, inputs):
    """Bind the given input shapes on a copy of the model of import
    ``imp``; remember the inputs that keep unknown dimensions
    (``imp.sym_inputs``)."""
    if inputs and imp.cache is None:
        imp.model = imp.onnx.ModelProto.FromString(imp.model.SerializeToString())
    g = imp.model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_value") and d.dim_value < 0:
                    d.Clear()       # -1 ("any size"): unknown, for inference to fill
    by_name = {i.name: i for i in imp.model.graph.input
               if i.name not in imp.init_names}
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
            imp.sym_inputs[name] = dims
