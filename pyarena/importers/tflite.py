"""TFLite importer: a ``.tflite`` flatbuffer -> a validated :class:`Graph`.

Reads subgraph 0 through the ``tflite`` package (generated flatbuffers
accessors), and the subgraphs IF / WHILE name, each as a Graph of its own
(:mod:`.tflite_control`).  Tensors backed by a non-empty buffer are constants
(``role="constant"``, ``Tensor.data``); so are the outputs of DEQUANTIZE /
DENSIFY applied to constants -- fp16 (and int8-weight) models store their
weights that way -- which are folded to float32 here, at import time.
Sparse constants (``SparsityParameters``: traversal order, block map,
DENSE / SPARSE_CSR dim metadata) are densified when read
(:mod:`pyarena.importers.tflite_sparse`).

Layout choice: TFLite is NHWC and it stays NHWC.  Operators get ONNX
canonical names -- each kernel declares the builtins it runs
(``pyarena.runtime.kernels.TFLITE_OPS``) -- with
``layout="NHWC"`` where it matters; weights keep their TFLite layouts
(conv ``OHWI``, depthwise ``1HWC``, fully connected ``(units, K)``) and the
kernels read them as they are -- nothing is transposed at import, so the
planned activation sizes are the model's own.  SAME/VALID padding becomes
``auto_pad``; a fused activation becomes the attribute ``activation``.

Full-integer operators (int8/uint8 activations with quantization
parameters) become pyarena's quantized operators (:mod:`.tflite_quant`):
weights stay int8, activations are planned at one byte.
"""
import math
import os

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import MAX_TENSOR_BYTES, Graph
from ..graph.binding import bind_shapes
from ..memory.mapped import is_mapped, map_file
from ..runtime.kernels import TFLITE_OPS
from ..runtime.kernels.quantization import dequantize
from . import require_extra
from .tflite_control import convert_control, inline_branch
from .tflite_lstm import convert_bidirectional_lstm, convert_sequence_lstm
from .tflite_options import OpContext, convert_options
from .tflite_quant import convert_quantized, is_quantized
from .tflite_rnn import convert_sequence_rnn
from .tflite_variables import RESOURCE_TYPE, Variables

__all__ = ["load_tflite"]

_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
          7: np.int16, 9: np.int8, 10: np.float64}


#: the converters of the builtins a kernel declares lowered
#: (``Kernel.tflite``: a lowering's name): sequence ops onto the recurrent
#: kernels, IF / WHILE onto the branching ones (their subgraphs imported)
_LOWERINGS = {
    "sequence_lstm": lambda tfl, t, code, op, ins, outs, name, sub:
        convert_sequence_lstm(tfl, t, op, ins, outs, name),
    "bidirectional_lstm": lambda tfl, t, code, op, ins, outs, name, sub:
        convert_bidirectional_lstm(tfl, t, op, ins, outs, name),
    "sequence_rnn": lambda tfl, t, code, op, ins, outs, name, sub:
        convert_sequence_rnn(tfl, t, op, ins, outs, name),
    "control": convert_control,
}

#: ops of a constant folded at import
_FOLDED = ("DEQUANTIZE", "DENSIFY")


def _tfl():
    return require_extra("tflite", "tflite", ".tflite files")


def load_tflite(path, inputs=None):
    """Import subgraph 0 of ``path`` (and the subgraphs its IF / WHILE
    operators name).  ``inputs`` binds input shapes
    (TFLite stores concrete shapes; a dimension of 1 -- the batch
    placeholder -- may be given another size)."""
    tflite = _tfl()
    try:        # mapped: weights are views of the file, read where used
        buf = map_file(path).buffer
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelImportError(f"{path}: not a TFLite flatbuffer (no 'TFL3' identifier "
                               f"at byte 4; {len(buf)} bytes)")
    try:
        return _import(tflite, buf, path, inputs)
    except (ModelImportError, UnsupportedOpError):
        raise
    except Exception as exc:   # flatbuffer offsets past the end, bad unions ...
        raise ModelImportError(f"{path}: corrupt or truncated TFLite file "
                               f"({type(exc).__name__}: {exc})") from None


def _import(tflite, buf, path, inputs):
    model = tflite.Model.GetRootAsModel(buf, 0)
    if model.SubgraphsLength() < 1:
        raise ModelImportError(f"{path}: the model has no subgraph")
    name = os.path.splitext(os.path.basename(str(path)))[0]
    return _subgraph(tflite, model, buf, 0, name, inputs, ())[0]


def _subgraph(tflite, model, buf, index, name, inputs, stack):
    """Subgraph ``index`` as a validated Graph, with the names of its
    inputs and outputs (those of an IF's branch or a WHILE's cond / body
    may be inputs or constants)."""
    t = _Tensors(tflite, model, model.Subgraphs(index), buf)
    sg = t.sg
    sg_inputs = [int(i) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []
    sg_outputs = [int(i) for i in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    inputs, later = _split_inputs(inputs, {t.names[i] for i in sg_inputs})
    if inputs:
        # a dimension stored as 1 is a placeholder (batch): any size binds it
        by_name = {t.names[i]: i for i in sg_inputs}
        declared = {nm: [None if d == 1 else d for d in t.shapes[i]]
                    for nm, i in by_name.items()}
        resolved, _ = bind_shapes(declared, inputs)
        for nm, dims in resolved.items():
            t.shapes[by_name[nm]] = list(dims)
    g = t.g = Graph(name)
    ops = _read_ops(tflite, model, sg, len(t.names))
    # resource variables (state kept across invocations): inputs and outputs
    var = Variables(tflite, model, t, lambda k: _subgraph_ops(tflite, model, buf, k))
    ops = var.rewrite(ops)
    var.check_shapes(later)
    t.plan_folds(ops, sg_outputs)
    remaining = [o for o in ops if not t.fold_constant_op(*o)]
    for i in sg_inputs + var.inputs:
        if t.data[i] is None:
            t.declare(g, i, "input")
    for i in sg_outputs:
        if t.data[i] is None:
            continue
        if not stack:
            raise ModelImportError(f"graph output {t.names[i]!r} is a constant; "
                                   f"nothing to run")
        t.declare(g, i, "constant")

    def sub(k, what):           # a subgraph an IF / WHILE names
        if not 0 < k < model.SubgraphsLength() or k in stack or k == index:
            raise ModelImportError(f"{what}: subgraph index {k} is out of range or "
                                   f"calls its own caller")
        return _subgraph(tflite, model, buf, k, f"{what}/subgraph{k}", None,
                         stack + (index,))
    _add_ops(tflite, t, g, remaining, set(sg_outputs), sub)
    var.finish(g, lambda i, role: t.declare(g, i, role))
    return g.validate(), [t.names[i] for i in sg_inputs], [t.names[i] for i in sg_outputs]


def _split_inputs(inputs, names):
    """(the shapes given for the subgraph's inputs, the others: a variable's
    input, checked once the variables are read)."""
    if not inputs:
        return inputs, {}
    return ({k: v for k, v in inputs.items() if k in names},
            {k: v for k, v in inputs.items() if k not in names})


def _subgraph_ops(tflite, model, buf, k):
    """The tensors and operators of subgraph ``k``, read (not converted)."""
    t = _Tensors(tflite, model, model.Subgraphs(k), buf)
    return t, _read_ops(tflite, model, t.sg, len(t.names))


def _add_ops(tflite, t, g, remaining, outset, sub):
    """One graph op per TFLite operator (an IF on a constant condition:
    its branch's ops); UnsupportedOpError naming every one refused."""
    bad = []
    for k, code, op, ins, outs in remaining:
        opname = f"{code.lower()}_{k}"
        lowering = getattr(TFLITE_OPS.get(code), "lowering", None)
        try:
            if code == "READ_VARIABLE":         # the variable's value (tflite_variables.py)
                op_type, attrs = "Identity", {}
            elif is_quantized(t, ins, outs):      # full-integer: the quantized kernels
                op_type, attrs, ins = convert_quantized(tflite, t, code, op, ins, outs, opname)
            elif lowering is not None:
                op_type, attrs, ins = _LOWERINGS[lowering](tflite, t, code, op, ins, outs,
                                                           opname, sub)
            else:
                op_type, attrs, ins = _convert(tflite, code, op, ins, outs, t.shapes, t.data,
                                               t.quant, t.dtypes, opname)
        except UnsupportedOpError as exc:
            bad.append(str(exc))
            continue
        in_names = [t.declare(g, i, "activation") if i >= 0 else "" for i in ins]
        out_names = [t.declare(g, i, "output" if i in outset else "activation")
                     for i in outs]
        if op_type is None:     # IF on a constant condition: the branch inlined
            inline_branch(g, attrs["branch"], in_names, out_names, opname)
            continue
        g.add_op(op_type, in_names, out_names, name=opname, **attrs)
    if bad:
        raise UnsupportedOpError("unsupported operator(s): " + "; ".join(bad[:10]) +
                                 (f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""))


def _read_ops(tflite, model, sg, nt):
    """(index, builtin name, operator, input indices, output indices) per op."""
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        name = tflite.BUILTIN_OPCODE2NAME.get(code, f"builtin_{code}")
        if name == "CUSTOM":
            cc = oc.CustomCode()
            name = f"CUSTOM:{cc.decode() if cc else '?'}"
        codes.append(name)
    ops = []
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        oi = int(op.OpcodeIndex())
        if oi >= len(codes):
            raise ModelImportError(f"operator {k}: opcode index {oi} out of range")
        ins = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
        for i in ins + outs:
            if i >= nt:
                raise ModelImportError(f"operator {k} ({codes[oi]}) references tensor {i}, "
                                       f"the subgraph has {nt}")
        ops.append((k, codes[oi], op, ins, outs))
    return ops


class _Tensors:
    """The tensors of subgraph 0: names (made unique), shapes, dtypes,
    quantisation and constant values, read and checked up front."""

    def __init__(self, tflite, model, sg, buf):
        self.tflite, self.model, self.sg, self.buf = tflite, model, sg, buf
        self.names, self.shapes, self.dtypes, self.quant = [], [], [], []
        self.variables = []     # TFLite variable tensors (state kept across invocations)
        self.resources = set()  # resource tensors (VAR_HANDLE's outputs)
        self.data = _Values()
        self._const_index = {}
        self.uses = {}      # plan_folds: readers left of values only folds read
        self.g = None       # the Graph being built: folded constants go to its arena
        seen = set()
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            nm = (t.Name() or b"").decode("utf-8", "replace") or f"tensor_{i}"
            if nm in seen:
                nm = f"{nm}#{i}"
            seen.add(nm)
            self.names.append(nm)
            self._read(t, nm)

    def _read(self, t, nm):
        shp = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        for d in shp:
            if d < 0:
                raise ModelImportError(f"tensor {nm!r} has negative dimension {d} in shape "
                                       f"{shp}")
        ty = int(t.Type())
        if ty not in _TYPES and ty != RESOURCE_TYPE:
            raise ModelImportError(f"tensor {nm!r}: unsupported TFLite type {ty}")
        dt = np.dtype(_TYPES.get(ty, np.int32))
        if ty == RESOURCE_TYPE:     # a variable's handle: no values (tflite_variables.py)
            self.resources.add(len(self.names) - 1)
        n = math.prod(shp) * dt.itemsize
        if n > MAX_TENSOR_BYTES:
            raise ModelImportError(f"tensor {nm!r} would need {n:,} bytes (shape {shp}): "
                                   f"refusing an absurd size")
        self.shapes.append(shp)
        self.dtypes.append(dt)
        self.variables.append(bool(t.IsVariable()))
        q = t.Quantization()
        qp = None
        if q is not None and q.ScaleLength():
            qp = (q.ScaleAsNumpy().astype(np.float32),
                  q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else
                  np.zeros(1, np.int64), int(q.QuantizedDimension()))
        self.quant.append(qp)
        self.data.append(self._value(t, nm, shp, dt, n))

    def _value(self, t, nm, shp, dt, n):
        """The constant value of a tensor backed by a non-empty buffer (in the
        flatbuffer or at an offset in the file), densified if sparse."""
        model, buf = self.model, self.buf
        b = t.Buffer()
        if not 0 < b < model.BuffersLength():
            return None
        bb = model.Buffers(b)
        sp = t.Sparsity()
        if bb.DataLength():
            raw = bb.DataAsNumpy()
            if sp is not None:
                return _Sparse(self.tflite, sp, raw, shp, dt, nm)
            if raw.size != n:
                raise ModelImportError(f"tensor {nm!r}: buffer holds {raw.size} bytes, "
                                       f"shape {shp} {dt} needs {n}")
            return raw.view(dt).reshape(shp)       # a view of the mapped file
        if not (bb.Size() and bb.Offset()):
            return None
        off, size = int(bb.Offset()), int(bb.Size())
        if off + size > len(buf) or (size != n and sp is None):
            raise ModelImportError(f"tensor {nm!r}: external buffer [{off}, {off + size}) "
                                   f"is outside the file or the wrong size")
        if sp is not None:
            raw = np.frombuffer(buf, dtype=np.uint8, count=size, offset=off)
            return _Sparse(self.tflite, sp, raw, shp, dt, nm)
        return np.frombuffer(buf, dtype=dt, count=math.prod(shp), offset=off).reshape(shp)

    def plan_folds(self, ops, outputs):
        """Which tensors only DEQUANTIZE / DENSIFY read (a sparse weight
        and its densified form, on the way to float32): their folded values
        stay temporary and go once their last reader is folded, so only the
        values the graph keeps are written to the weights arena."""
        readers = {}
        for _, code, _, ins, _ in ops:
            for i in ins:
                readers.setdefault(i, []).append(code)
        self.uses = {i: len(c) for i, c in readers.items()
                     if i not in outputs and all(x in _FOLDED for x in c)}

    def fold_constant_op(self, k, code, op, ins, outs):
        """DEQUANTIZE / DENSIFY of a constant (fp16 / int8 weights) becomes a
        float32 constant at import; True if the op was folded."""
        if code not in _FOLDED or not ins or self.data[ins[0]] is None:
            return False
        src = ins[0]
        v = self.data[src]
        if code == "DENSIFY" and list(v.shape) != list(self.shapes[outs[0]]):
            raise ModelImportError(f"operator {k} (DENSIFY): {self.names[src]!r} has shape "
                                   f"{list(v.shape)}, the output {self.shapes[outs[0]]}")
        if v.dtype == np.float16 and is_mapped(v) and self.dtypes[outs[0]] == np.float32 \
                and outs[0] not in self.uses:
            self.data[outs[0]] = v      # float32 to the graph, float16 in the file:
            return True                 # converted where a kernel reads it (declare)
        if v.dtype == np.float16:
            v = v.astype(np.float32)
        elif self.quant[src] is not None:
            scale, zp, axis = self.quant[src]
            v = dequantize(v, scale, zp, axis)
        else:
            v = v.astype(np.float32)
        v = np.asarray(v).astype(self.dtypes[outs[0]], copy=False)
        uses = self.uses
        self.data[outs[0]] = (self.g.constant_data(v) if self.g is not None and
                              outs[0] not in uses else np.ascontiguousarray(v))
        if src in uses:             # its last folded reader: the value goes
            uses[src] -= 1
            if uses[src] == 0:
                self.data[src] = None
        return True

    def add_const(self, name, value):
        """Index of a constant tensor ``name`` (added once): the scales and
        zero points the quantized operators take as inputs."""
        if name in self._const_index:
            return self._const_index[name]
        value = np.asarray(value)
        self.names.append(name)
        self.shapes.append(list(value.shape))
        self.dtypes.append(value.dtype)
        self.data.append(value)
        self.quant.append(None)
        self.variables.append(False)
        self._const_index[name] = len(self.names) - 1
        return self._const_index[name]

    def add_tensor(self, name, shape, dtype, quant):
        """Index of a new tensor with no value (a variable's input or output)."""
        self.names.append(name)
        self.shapes.append(list(shape))
        self.dtypes.append(np.dtype(dtype))
        self.data.append(None)
        self.quant.append(quant)
        self.variables.append(False)
        return len(self.names) - 1

    def declare(self, g, i, role):
        """Tensor i in ``g`` (float16 as float32); its name."""
        nm = self.names[i]
        if nm in g.tensors:
            return nm
        if i in self.resources:
            raise UnsupportedOpError(f"tensor {nm!r} is a variable's handle: only "
                                     f"READ_VARIABLE / ASSIGN_VARIABLE take one")
        if self.data[i] is not None and _half_view(self.data[i]):
            # float16 in the file, float32 to the graph: the view stays (read
            # at setup only where a kernel lays it out, Kernel.const converts;
            # the executor places a float32 copy of one read at run time)
            v = self.data[i]
            g.add_tensor(nm, v.shape, np.float32, role="constant", data=v)
        elif self.data[i] is not None:     # float16 as float32, in the weights arena
            v = self.data[i]
            v = g.constant_data(v, np.float32 if v.dtype == np.float16 else None)
            self.data[i] = v
            g.add_tensor(nm, v.shape, v.dtype, role="constant", data=v)
        else:
            dt = np.float32 if self.dtypes[i] == np.float16 else self.dtypes[i]
            g.add_tensor(nm, self.shapes[i], dt, role=role)
        return nm


def _half_view(v):
    """A float16 constant still a view of the model file."""
    return isinstance(v, np.ndarray) and v.dtype == np.float16 and is_mapped(v)


class _Sparse:
    """A sparse constant, densified when first read (one at a time, as the
    DENSIFY ops that read them are folded, not all at once)."""
    __slots__ = ("args",)

    def __init__(self, *args):
        self.args = args


class _Values(list):
    """Constant values by tensor index (None: not a constant)."""

    def __getitem__(self, i):
        v = list.__getitem__(self, i)
        if isinstance(v, _Sparse):
            v = _densify(*v.args)
            list.__setitem__(self, i, v)
        return v


def _densify(tflite, sp, raw, shp, dt, nm):
    """The dense value of a sparse constant (SparsityParameters): see
    :mod:`pyarena.importers.tflite_sparse`."""
    from .tflite_sparse import densify, read_sparsity
    if raw.size % dt.itemsize:
        raise ModelImportError(f"sparse tensor {nm!r}: buffer of {raw.size} bytes is not a "
                               f"whole number of {dt} values")
    try:
        order, bmap, dims = read_sparsity(tflite, sp)
        return densify(np.frombuffer(raw.tobytes(), dtype=dt), shp, order, bmap, dims)
    except ValueError as exc:
        raise ModelImportError(f"sparse tensor {nm!r} (shape {shp}): bad sparsity "
                               f"parameters: {exc}") from None


def _convert(tflite, code, op, ins, outs, shapes, data, quant, dtypes, opname):
    """(canonical op type, attrs, input indices) for one TFLite operator:
    the op type and fixed attributes its kernel declares
    (``TFLITE_OPS``), then the builtin's options (:mod:`.tflite_options`)."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} ({code}): {why}")

    for i in ins + outs:
        if i >= 0 and data[i] is None and dtypes[i] in (np.int8, np.uint8, np.int16) \
                and quant[i] is not None:
            fail("quantized (int8/uint8) activations are not supported")
    if code not in TFLITE_OPS:
        fail("not supported by the executor")
    op_type, fixed = TFLITE_OPS[code]
    c = OpContext(tflite, code, op, ins, outs, shapes, data, dict(fixed), fail, name=opname)
    convert_options(c)
    return op_type, c.attrs, c.ins
