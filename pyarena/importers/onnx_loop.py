"""ONNX ``Loop`` and ``Scan``: their body subgraphs imported as pyarena
graphs, for the kernels in ``runtime/kernels/control.py`` to plan and run.

A body is imported like a model of its own (shape inference, folding,
one ``Op`` per node): its formal inputs get the shapes one iteration
sees -- the loop-carried values the shapes of their initial values, a
Scan's slices the scanned input's shape without the scanned axis -- and
every name it reads from the enclosing graph (outer scope, also through
nested bodies) becomes an input of the body too: a constant of the outer
graph as a constant of the body, anything else as an extra input of the
``Loop`` / ``Scan`` op, so the outer plan keeps it alive while the loop
runs.  Bodies whose shapes change from one iteration to the next are
refused by name.

The op's outputs get their shapes here, before the outer graph is built:
a loop-carried value keeps its shape, a scan output stacks the body's
per-iteration value along its axis (``trip`` times for a Loop whose trip
count is fixed at import: ``M`` a constant, ``cond`` constant true or
absent, and the body's condition output its condition input or constant
true; the scanned length for a Scan).  A Loop that may stop on data and
has scan outputs has outputs whose length only a run can tell: they are
marked (``Op.attrs["dynamic"]``) and served from the run's Pool
(``runtime/dynamic.py``).  :func:`import_body` also imports the branches
of an ``If`` on a run-time condition (``onnx_control.py``).  A body may
hold tensors whose size depends on the data (served from the run's pool,
``runtime/kernels/subgraph.py``); a body *output* of such a size is
refused by name.
"""
import numpy as np

from ..errors import ModelImportError, UnsupportedOpError

__all__ = ["Unknown", "import_body", "import_loop", "import_scan", "outer_names", "set_shape",
           "shape_of", "subgraph_attr"]


def outer_names(onnx, graph):
    """Names ``graph`` (a GraphProto, or a NodeProto: its subgraphs) reads
    that it does not define, nested bodies included, in first-use order."""
    if isinstance(graph, onnx.NodeProto):
        graph = onnx.helper.make_graph([graph], "node", [], [])
        return [n for n in outer_names(onnx, graph) if n not in graph.node[0].input]
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for n in graph.node:
        defined.update(o for o in n.output if o)
    seen = []
    for n in graph.node:
        names = list(n.input)
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else \
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []
            for sub in subs:
                names.extend(outer_names(onnx, sub))
        for name in names:
            if name and name not in defined and name not in seen:
                seen.append(name)
    for o in graph.output:      # an output passed straight from outside
        if o.name not in defined and o.name not in seen:
            seen.append(o.name)
    return seen


class Unknown(ModelImportError):
    """An outer shape not known yet (maybe after the next inference)."""


def _typed(imp, name, node):
    """(elem type, static shape) of outer tensor ``name``."""
    if name in imp.vals:
        v = np.asarray(imp.vals[name])
        return imp.onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)
    shp, et = imp.shapes.get(name), imp.types.get(name)
    if et in ("sequence", "optional"):
        raise UnsupportedOpError(f"operator {node.name!r} ({node.op_type}): input {name!r} "
                                 f"is a {et}; a body reading a sequence or optional value "
                                 f"is not supported (bodies run tensors only)")
    if shp is None or et is None or not all(isinstance(d, int) for d in shp):
        what = "its shape" if et is not None else \
            "its element type (a sequence or optional value is not supported)"
        raise Unknown(f"operator {node.name!r} ({node.op_type}): {what} of input "
                       f"{name!r} is not known at import ({shp}); the body needs it")
    return et, list(shp)


def subgraph_attr(node, name):
    for a in node.attribute:
        if a.name == name:
            return a.g
    raise ModelImportError(f"operator {node.name!r} ({node.op_type}): no {name!r} attribute")


def import_body(imp, node, body, formal, what="body"):
    """The body (``what``: "body", or which branch of an If) as a pyarena
    Graph plus its input / output names (formal first, then the outer-scope
    names it reads), and the sub-import."""
    onnx, helper = imp.onnx, imp.onnx.helper
    if len(body.input) != len(formal):
        raise ModelImportError(f"operator {node.name!r} ({node.op_type}): the body has "
                               f"{len(body.input)} inputs, {len(formal)} expected")
    ins = [helper.make_tensor_value_info(vi.name, et, shp)
           for vi, (et, shp) in zip(body.input, formal)]
    inits, preset, outer = list(body.initializer), {}, []
    for name in outer_names(onnx, body):
        if name in imp.vals:
            v = np.asarray(imp.vals[name])
            if v.nbytes <= 64 << 10:
                inits.append(onnx.numpy_helper.from_array(v, name))
            else:       # a weight: typed for inference, its value given directly
                ins.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
                preset[name] = v
        else:
            et, shp = _typed(imp, name, node)
            ins.append(helper.make_tensor_value_info(name, et, shp))
            outer.append(name)
    for o in body.output:
        kind = o.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise UnsupportedOpError(f"operator {node.name!r} ({node.op_type}): output "
                                     f"{o.name!r} of the {what} is not a tensor "
                                     f"({kind.replace('_type', '')}); pyarena runs tensors "
                                     f"only (a sequence or optional value is not supported)")
    # an output that is an input (a value passed through) gets an Identity:
    # the plan keeps an output alive to the end of the body, an input only
    # to its last reader
    passed = {vi.name for vi in ins}
    nodes, out_names = list(body.node), []
    for o in body.output:
        name = o.name
        if name in passed:
            name = f"{o.name}::out"
            if name not in out_names:
                nodes.append(helper.make_node("Identity", [o.name], [name], name=name))
        out_names.append(name)
    # a body output keeps the shape the body declares when every dimension
    # is a number: one computed from the iteration number (a Slice at i) is
    # then planned at that shape (and checked when made), not refused as
    # sized by the data
    outs = [helper.make_tensor_value_info(n, o.type.tensor_type.elem_type,
                                          _static_dims(o))
            for n, o in zip(out_names, body.output)]
    outs = list({o.name: o for o in outs}.values())
    g = helper.make_graph(nodes, f"{node.name}.{what}", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=list(imp.model.opset_import),
                          ir_version=imp.model.ir_version)
    sub = type(imp)(f"{imp.path}: {node.op_type} {node.name!r} {what}", model=m)
    sub.vals.update(preset)
    sub.max_memory = imp.max_memory     # weights folded in the body stay within it too
    sub.init_names = {t.name for t in inits}
    try:
        graph = sub.run(True)
    except (ModelImportError, UnsupportedOpError) as exc:
        raise type(exc)(f"in the {what} of {node.op_type} {node.name!r}: {exc}",
                        exc.unbound_inputs) from None
    if what == "body":      # copied in once, read by every iteration
        graph.held_inputs = frozenset(n for n in outer if n in graph.tensors)
    pooled = [n for n in dict.fromkeys(out_names) if graph.tensors[n].dynamic]
    if pooled:
        raise UnsupportedOpError(f"operator {node.name!r} ({node.op_type}): output(s) "
                                 f"{pooled[:4]} of the {what} have sizes that depend on the "
                                 f"data; a body's outputs must have sizes known before it "
                                 f"runs (pool tensors inside it are served from the pool)")
    names = [vi.name for vi in body.input] + outer
    return graph, names, out_names, outer, sub


def _static_dims(vi):
    """A ValueInfo's dims when all are numbers, else None."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    return dims if all(d is not None and d >= 0 for d in dims) else None


def shape_of(graph, name):
    return tuple(int(d) for d in graph.tensors[name].shape)


def _static_trip(imp, node, graph, body, sub):
    """The Loop's trip count when it is fixed at import, else None."""
    m = node.input[0] if node.input else ""
    c = node.input[1] if len(node.input) > 1 else ""
    if not m or m not in imp.vals:
        return None
    if c and (c not in imp.vals or not bool(np.asarray(imp.vals[c]).reshape(-1)[0])):
        return None
    cin, cout = body.input[1].name, body.output[0].name
    if cout == cin:
        return max(int(np.asarray(imp.vals[m]).reshape(-1)[0]), 0)
    if cout in sub.vals:
        ok = bool(np.asarray(sub.vals[cout]).reshape(-1)[0])
    else:
        ok = cout == cin or any(op.op_type == "Identity" and op.outputs == [cout] and
                                op.inputs == [cin] for op in graph.ops)
    return max(int(np.asarray(imp.vals[m]).reshape(-1)[0]), 0) if ok else None


def set_shape(imp, name, shape, dtype):
    if name:
        imp.shapes[name] = list(shape)
        imp.types[name] = imp.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        imp.forced[name] = True


def import_loop(imp, node):
    body = subgraph_attr(node, "body")
    n_carried = len(node.input) - 2
    if n_carried < 0 or len(body.input) != n_carried + 2:
        raise ModelImportError(f"operator {node.name!r} (Loop): {len(node.input)} inputs and "
                               f"a body of {len(body.input)}: they do not match")
    T = imp.onnx.TensorProto
    formal = [(T.INT64, []), (T.BOOL, [])] + [_typed(imp, x, node) for x in node.input[2:]]
    graph, bin_, bout, outer, sub = import_body(imp, node, body, formal)
    trip = _static_trip(imp, node, graph, body, sub)
    dynamic = []
    for j, name in enumerate(node.output):
        src = bout[1 + j]
        shp, dt = shape_of(graph, src), graph.tensors[src].dtype
        if j < n_carried:
            want = tuple(formal[2 + j][1])
            if shp != want:
                raise UnsupportedOpError(f"operator {node.name!r} (Loop): loop-carried "
                                         f"value {src!r} changes shape from {list(want)} "
                                         f"to {list(shp)}; bodies must keep their shapes")
            set_shape(imp, name, shp, dt)
        elif trip is not None:
            set_shape(imp, name, (trip,) + shp, dt)
        elif name:
            dynamic.append(name)
            imp.types[name] = imp.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    attrs = {"body": graph, "body_inputs": bin_, "body_outputs": bout,
             "n_carried": n_carried, "trip": -1 if trip is None else trip}
    if dynamic:
        attrs["dynamic"] = dynamic
    return outer, attrs


def import_scan(imp, node):
    a = {x.name: imp.onnx.helper.get_attribute_value(x) for x in node.attribute
         if x.name != "body"}
    if imp.opset < 9:
        return _import_scan8(imp, node, a)
    body = subgraph_attr(node, "body")
    n_scan = int(a["num_scan_inputs"])
    n_state = len(node.input) - n_scan
    n_out = len(body.output) - n_state
    in_axes = list(a.get("scan_input_axes", [0] * n_scan))
    out_axes = list(a.get("scan_output_axes", [0] * n_out))
    formal = [_typed(imp, x, node) for x in node.input[:n_state]]
    length = None
    for x, ax in zip(node.input[n_state:], in_axes):
        et, shp = _typed(imp, x, node)
        ax = ax + len(shp) if ax < 0 else ax
        if not 0 <= ax < len(shp) or (length is not None and shp[ax] != length):
            raise ModelImportError(f"operator {node.name!r} (Scan): scan input {x!r} "
                                   f"{shp} does not have the scanned axis {ax} of length "
                                   f"{length}")
        length = shp[ax]
        formal.append((et, shp[:ax] + shp[ax + 1:]))
    graph, bin_, bout, outer, sub = import_body(imp, node, body, formal)
    for j, name in enumerate(node.output):
        src = bout[j]
        shp, dt = list(shape_of(graph, src)), graph.tensors[src].dtype
        if j < n_state:
            if tuple(shp) != tuple(formal[j][1]):
                raise UnsupportedOpError(f"operator {node.name!r} (Scan): state {src!r} "
                                         f"changes shape from {formal[j][1]} to {shp}")
        else:
            ax = out_axes[j - n_state]
            ax = ax + len(shp) + 1 if ax < 0 else ax
            shp = shp[:ax] + [length] + shp[ax:]
        set_shape(imp, name, shp, dt)
    attrs = {"body": graph, "body_inputs": bin_, "body_outputs": bout, "n_state": n_state,
             "scan_input_axes": in_axes, "scan_output_axes": out_axes,
             "scan_input_directions": list(a.get("scan_input_directions", [0] * n_scan)),
             "scan_output_directions": list(a.get("scan_output_directions", [0] * n_out))}
    return outer, attrs


def _import_scan8(imp, node, a):
    """The opset-8 Scan: input 0 is sequence_lens (only omitted is run:
    every sequence full length), then the states and the scan inputs, each
    with a leading batch axis; the body sees one batch entry, its scan
    inputs sliced along axis 1 (the sequence).  Run as the opset-9 Scan once
    per batch entry (``batch`` attribute: the kernel's loop over entries)."""
    if node.input and node.input[0]:
        raise UnsupportedOpError(f"operator {node.name!r} (Scan): the opset-8 Scan's "
                                 f"sequence_lens is not supported (omit it: every sequence "
                                 f"full length)")
    body = subgraph_attr(node, "body")
    n_scan = int(a["num_scan_inputs"])
    n_state = len(node.input) - 1 - n_scan
    n_out = len(body.output) - n_state
    if n_state < 0 or n_out < 0:
        raise ModelImportError(f"operator {node.name!r} (Scan): {len(node.input)} inputs "
                               f"and {n_scan} scan inputs do not match its body")
    typed = [_typed(imp, x, node) for x in node.input[1:]]
    batch = {shp[0] for _, shp in typed if shp}
    lengths = {shp[1] for _, shp in typed[n_state:] if len(shp) > 1}
    if len(batch) != 1 or len(lengths) != 1 or any(
            len(shp) < 2 for _, shp in typed[n_state:]):
        raise ModelImportError(f"operator {node.name!r} (Scan): the states and scan inputs "
                               f"{[shp for _, shp in typed]} do not share a batch axis "
                               f"(and a sequence length)")
    (b,), (length,) = batch, lengths
    formal = [(et, shp[1:]) for et, shp in typed[:n_state]] + \
        [(et, shp[2:]) for et, shp in typed[n_state:]]
    graph, bin_, bout, outer, sub = import_body(imp, node, body, formal)
    for j, name in enumerate(node.output):
        src = bout[j]
        shp, dt = list(shape_of(graph, src)), graph.tensors[src].dtype
        if j < n_state and tuple(shp) != tuple(formal[j][1]):
            raise UnsupportedOpError(f"operator {node.name!r} (Scan): state {src!r} "
                                     f"changes shape from {formal[j][1]} to {shp}")
        set_shape(imp, name, [b] + ([] if j < n_state else [length]) + shp, dt)
    attrs = {"body": graph, "body_inputs": bin_, "body_outputs": bout, "n_state": n_state,
             "batch": b, "scan_input_axes": [0] * n_scan, "scan_output_axes": [0] * n_out,
             "scan_input_directions": list(a.get("directions", [0] * n_scan)),
             "scan_output_directions": [0] * n_out}
    return outer, attrs
