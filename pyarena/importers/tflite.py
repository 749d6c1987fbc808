"""TFLite importer: a ``.tflite`` flatbuffer -> a validated :class:`Graph`.

Reads subgraph 0 through the ``tflite`` package (generated flatbuffers
accessors).  Tensors backed by a non-empty buffer are constants
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

Quantized activations (int8/uint8 arithmetic) are not supported: they are
reported by operator name.
"""
import math
import os

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import MAX_TENSOR_BYTES, Graph
from ..graph.binding import bind_shapes
from ..runtime.kernels import TFLITE_OPS

__all__ = ["load_tflite"]

_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
          7: np.int16, 9: np.int8, 10: np.float64}
_ACT = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def _tfl():
    try:
        import tflite
    except ImportError:  # pragma: no cover - extra not installed
        raise ModelImportError("reading .tflite files needs the 'tflite' package: "
                               "pip install pyarena[tflite]") from None
    return tflite


def _options(tflite, op, cls_name):
    cls = getattr(tflite, cls_name)
    tab = op.BuiltinOptions()
    o = cls()
    if tab is None:
        return None
    o.Init(tab.Bytes, tab.Pos)
    return o


def _padding(code):
    return "SAME_UPPER" if code == 0 else "VALID"


def load_tflite(path, inputs=None):
    """Import subgraph 0 of ``path``.  ``inputs`` binds input shapes
    (TFLite stores concrete shapes; a dimension of 1 -- the batch
    placeholder -- may be given another size)."""
    tflite = _tfl()
    try:
        with open(path, "rb") as f:
            buf = f.read()
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
    sg = model.Subgraphs(0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        name = tflite.BUILTIN_OPCODE2NAME.get(code, f"builtin_{code}")
        if name == "CUSTOM":
            cc = oc.CustomCode()
            name = f"CUSTOM:{cc.decode() if cc else '?'}"
        codes.append(name)
    # -- tensors ------------------------------------------------------------------
    nt = sg.TensorsLength()
    names, shapes, dtypes, data, quant = [], [], [], [], []
    seen = set()
    for i in range(nt):
        t = sg.Tensors(i)
        nm = (t.Name() or b"").decode("utf-8", "replace") or f"tensor_{i}"
        if nm in seen:
            nm = f"{nm}#{i}"
        seen.add(nm)
        names.append(nm)
        shp = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
        for d in shp:
            if d < 0:
                raise ModelImportError(f"tensor {nm!r} has negative dimension {d} in shape "
                                       f"{shp}")
        ty = int(t.Type())
        if ty not in _TYPES:
            raise ModelImportError(f"tensor {nm!r}: unsupported TFLite type {ty}")
        dt = np.dtype(_TYPES[ty])
        n = math.prod(shp) * dt.itemsize
        if n > MAX_TENSOR_BYTES:
            raise ModelImportError(f"tensor {nm!r} would need {n:,} bytes (shape {shp}): "
                                   f"refusing an absurd size")
        shapes.append(shp)
        dtypes.append(dt)
        q = t.Quantization()
        qp = None
        if q is not None and q.ScaleLength():
            qp = (q.ScaleAsNumpy().astype(np.float32),
                  q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else
                  np.zeros(1, np.int64), int(q.QuantizedDimension()))
        quant.append(qp)
        val = None
        b = t.Buffer()
        if 0 < b < model.BuffersLength():
            bb = model.Buffers(b)
            if bb.DataLength():
                raw = bb.DataAsNumpy()
                sp = t.Sparsity()
                if sp is not None:
                    val = _densify(tflite, sp, raw, shp, dt, nm)
                elif raw.size != n:
                    raise ModelImportError(f"tensor {nm!r}: buffer holds {raw.size} bytes, "
                                           f"shape {shp} {dt} needs {n}")
                else:
                    val = np.frombuffer(raw.tobytes(), dtype=dt).reshape(shp)
            elif bb.Size() and bb.Offset():
                off, size = int(bb.Offset()), int(bb.Size())
                sp = t.Sparsity()
                if off + size > len(buf) or (size != n and sp is None):
                    raise ModelImportError(f"tensor {nm!r}: external buffer [{off}, "
                                           f"{off + size}) is outside the file or the "
                                           f"wrong size")
                if sp is not None:
                    raw = np.frombuffer(buf, dtype=np.uint8, count=size, offset=off)
                    val = _densify(tflite, sp, raw, shp, dt, nm)
                else:
                    val = np.frombuffer(buf, dtype=dt, count=math.prod(shp),
                                        offset=off).reshape(shp)
        data.append(val)
    sg_inputs = [int(i) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []
    sg_outputs = [int(i) for i in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    if inputs:
        # a dimension stored as 1 is a placeholder (batch): any size binds it
        by_name = {names[i]: i for i in sg_inputs}
        declared = {nm: [None if d == 1 else d for d in shapes[i]]
                    for nm, i in by_name.items()}
        resolved, _ = bind_shapes(declared, inputs)
        for nm, dims in resolved.items():
            shapes[by_name[nm]] = list(dims)
    # -- operators -------------------------------------------------------------------
    g = Graph(os.path.splitext(os.path.basename(str(path)))[0])
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
    # fold DEQUANTIZE / DENSIFY of constants (fp16 / int8 weights)
    remaining = []
    for k, code, op, ins, outs in ops:
        if code in ("DEQUANTIZE", "DENSIFY") and ins and data[ins[0]] is not None:
            src = ins[0]
            v = data[src]
            if code == "DENSIFY" and list(v.shape) != list(shapes[outs[0]]):
                raise ModelImportError(f"operator {k} (DENSIFY): {names[src]!r} has shape "
                                       f"{list(v.shape)}, the output {shapes[outs[0]]}")
            if v.dtype == np.float16:
                v = v.astype(np.float32)
            elif quant[src] is not None:
                scale, zp, axis = quant[src]
                bshape = [1] * v.ndim
                if scale.size > 1:
                    bshape[axis] = -1
                v = (v.astype(np.float32) - zp.reshape(bshape if zp.size > 1 else [1] * v.ndim)
                     ) * scale.reshape(bshape)
            else:
                v = v.astype(np.float32)
            data[outs[0]] = np.ascontiguousarray(v.astype(dtypes[outs[0]]))
            continue
        remaining.append((k, code, op, ins, outs))
    used = set()
    for k, code, op, ins, outs in remaining:
        used.update(i for i in ins if i >= 0)
    used.update(sg_outputs)

    def declare(i, role):
        nm = names[i]
        if nm in g.tensors:
            return nm
        if data[i] is not None:
            v = data[i]
            if v.dtype == np.float16:
                v = v.astype(np.float32)
            g.add_tensor(nm, v.shape, v.dtype, role="constant", data=v)
        else:
            if dtypes[i] == np.float16:
                dt = np.float32
            else:
                dt = dtypes[i]
            g.add_tensor(nm, shapes[i], dt, role=role)
        return nm

    for i in sg_inputs:
        if data[i] is None:
            declare(i, "input")
    for i in sg_outputs:
        if data[i] is not None:
            raise ModelImportError(f"graph output {names[i]!r} is a constant; nothing to run")
    outset = set(sg_outputs)
    bad = []
    for k, code, op, ins, outs in remaining:
        opname = f"{code.lower()}_{k}"
        try:
            op_type, attrs, ins = _convert(tflite, code, op, ins, outs, shapes, data, quant,
                                           dtypes, opname)
        except UnsupportedOpError as exc:
            bad.append(str(exc))
            continue
        in_names = [declare(i, "activation") if i >= 0 else "" for i in ins]
        out_names = [declare(i, "output" if i in outset else "activation") for i in outs]
        g.add_op(op_type, in_names, out_names, name=opname, **attrs)
    if bad:
        raise UnsupportedOpError("unsupported operator(s): " + "; ".join(bad[:10]) +
                                 (f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""))
    return g.validate()


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
    """(canonical op type, attrs, input indices) for one TFLite operator."""
    def fail(why):
        raise UnsupportedOpError(f"operator {opname!r} ({code}): {why}")

    for i in ins + outs:
        if i >= 0 and data[i] is None and dtypes[i] in (np.int8, np.uint8, np.int16) \
                and quant[i] is not None:
            fail("quantized (int8/uint8) activations are not supported")
    if code not in TFLITE_OPS:
        fail("not supported by the executor")
    op_type, fixed = TFLITE_OPS[code]
    attrs = dict(fixed)
    a = attrs

    def act(o):
        f = _ACT.get(int(o.FusedActivationFunction()), "?")
        if f == "SIGN_BIT" or f == "?":
            fail(f"fused activation {f} is not supported")
        if f:
            a["activation"] = f

    if code == "CONV_2D":
        o = _options(tflite, op, "Conv2DOptions")
        a.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                 dilations=[o.DilationHFactor(), o.DilationWFactor()],
                 auto_pad=_padding(o.Padding()), group=1)
        act(o)
        w = shapes[ins[1]]
        cin = shapes[ins[0]][-1]
        if w[-1] != cin:
            if cin % w[-1]:
                fail(f"filter {w} does not match {cin} input channels")
            a["group"] = cin // w[-1]
    elif code == "DEPTHWISE_CONV_2D":
        o = _options(tflite, op, "DepthwiseConv2DOptions")
        cin = shapes[ins[0]][-1]
        a.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                 dilations=[o.DilationHFactor(), o.DilationWFactor()],
                 auto_pad=_padding(o.Padding()), group=cin)
        act(o)
        if shapes[ins[1]][-1] % max(cin, 1):
            fail(f"filter {shapes[ins[1]]} is not a multiple of {cin} input channels")
    elif code == "TRANSPOSE_CONV":
        o = _options(tflite, op, "TransposeConvOptions")
        a.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                 auto_pad=_padding(o.Padding()))
        act(o)
        if data[ins[0]] is None:
            fail("the output shape must be constant")
        if list(np.asarray(data[ins[0]]).reshape(-1)) != list(shapes[outs[0]]):
            fail(f"output_shape {list(np.asarray(data[ins[0]]).reshape(-1))} differs from "
                 f"the output tensor's shape {shapes[outs[0]]}")
        # (output_shape, weights OHWI, input[, bias]) -> (input, weights[, bias])
        ins = [ins[2], ins[1]] + ([ins[3]] if len(ins) > 3 and ins[3] >= 0 else [])
    elif code == "FULLY_CONNECTED":
        o = _options(tflite, op, "FullyConnectedOptions")
        if o is not None:
            act(o)
            if int(o.WeightsFormat()) != 0:
                fail("shuffled weights format is not supported")
    elif code in ("ADD", "SUB", "MUL", "DIV"):
        o = _options(tflite, op, {"ADD": "AddOptions", "SUB": "SubOptions",
                                  "MUL": "MulOptions", "DIV": "DivOptions"}[code])
        if o is not None:
            act(o)
    elif code in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        o = _options(tflite, op, "Pool2DOptions")
        a.update(layout="NHWC", kernel_shape=[o.FilterHeight(), o.FilterWidth()],
                 strides=[o.StrideH(), o.StrideW()], auto_pad=_padding(o.Padding()),
                 count_include_pad=0)
        act(o)
    elif code == "CONCATENATION":
        o = _options(tflite, op, "ConcatenationOptions")
        a["axis"] = int(o.Axis())
        act(o)
    elif code == "SOFTMAX":
        o = _options(tflite, op, "SoftmaxOptions")
        a.update(axis=-1, beta=float(o.Beta()) if o is not None else 1.0)
    elif code == "CUSTOM:Convolution2DTransposeBias":
        # MediaPipe: (input, weights OHWI, bias); custom options are a raw
        # TfLiteTransposeConvParams {int32 padding (1 SAME, 2 VALID),
        # stride_width, stride_height}
        raw = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
        if len(raw) < 12 or len(ins) != 3:
            fail(f"expected 3 inputs and 12 bytes of options, got {len(ins)} inputs and "
                 f"{len(raw)} bytes")
        pad, sw, sh = (int(v) for v in np.frombuffer(raw[:12], "<i4"))
        if pad not in (1, 2) or sw < 1 or sh < 1:
            fail(f"bad options padding={pad} strides=({sh}, {sw})")
        a.update(layout="NHWC", strides=[sh, sw], auto_pad="SAME_UPPER" if pad == 1 else "VALID")
    elif code == "GELU":
        o = _options(tflite, op, "GeluOptions")
        a["approximate"] = "tanh" if o is not None and o.Approximate() else "none"
    elif code == "LEAKY_RELU":
        o = _options(tflite, op, "LeakyReluOptions")
        a["alpha"] = float(o.Alpha())
    elif code == "PRELU":
        a["layout"] = "NHWC"
    elif code in ("MEAN", "SUM", "REDUCE_MAX"):
        o = _options(tflite, op, "ReducerOptions")
        a["keepdims"] = int(bool(o.KeepDims())) if o is not None else 0
        if data[ins[1]] is None:
            fail("the reduction axes must be constant")
    elif code in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        ins = ins[:1]
    elif code in ("PAD", "PADV2", "MIRROR_PAD"):
        a["layout_pairs"] = 1
        if code == "MIRROR_PAD":
            o = _options(tflite, op, "MirrorPadOptions")
            mode = int(o.Mode()) if o is not None else 0
            if mode != 0:
                fail("SYMMETRIC mirror padding is not supported")
            a["mode"] = "reflect"
        ins = [ins[0], ins[1]] + ([ins[2]] if code == "PADV2" and len(ins) > 2 else [])
    elif code == "TRANSPOSE":
        pass
    elif code in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        o = _options(tflite, op, "ResizeBilinearOptions" if code == "RESIZE_BILINEAR"
                     else "ResizeNearestNeighborOptions")
        ac = bool(o.AlignCorners()) if o is not None else False
        hp = bool(o.HalfPixelCenters()) if o is not None else False
        if code == "RESIZE_BILINEAR":
            a["coordinate_transformation_mode"] = ("align_corners" if ac else
                                                   "half_pixel" if hp else "asymmetric")
        else:
            if ac:
                a.update(coordinate_transformation_mode="align_corners",
                         nearest_mode="round_prefer_ceil")
            elif hp:
                a.update(coordinate_transformation_mode="tf_half_pixel_for_nn",
                         nearest_mode="floor")
            else:
                a.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        a["_opset"] = 13
        ins = ins[:1]      # output size comes from the output tensor's shape
    elif code == "SPLIT":
        axis = data[ins[0]]
        if axis is None:
            fail("the split axis must be constant")
        a["axis"] = int(np.asarray(axis).reshape(-1)[0])
        ins = [ins[1]]
    elif code in ("STRIDED_SLICE", "DEPTH_TO_SPACE"):
        _convert_movement(tflite, code, op, ins, data, a, fail)
    return op_type, attrs, ins


def _convert_movement(tflite, code, op, ins, data, a, fail):
    """Attributes of STRIDED_SLICE / DEPTH_TO_SPACE (runtime/kernels/tflite.py)."""
    if code == "DEPTH_TO_SPACE":
        o = _options(tflite, op, "DepthToSpaceOptions")
        a["blocksize"] = int(o.BlockSize()) if o is not None else 0
        return
    for i, what in zip(ins[1:], ("begin", "end", "strides")):
        if data[i] is None:
            fail(f"{what} must be constant")
    o = _options(tflite, op, "StridedSliceOptions")
    if o is not None:
        a.update(begin_mask=int(o.BeginMask()), end_mask=int(o.EndMask()),
                 ellipsis_mask=int(o.EllipsisMask()), new_axis_mask=int(o.NewAxisMask()),
                 shrink_axis_mask=int(o.ShrinkAxisMask()))
        if hasattr(o, "Offset") and bool(o.Offset()):
            a["offset"] = 1
