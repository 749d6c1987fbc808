"""Test helper: write small .tflite files with the flatbuffers builder
functions of the `tflite` package.  Not a test module."""
import numpy as np

_TYPE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2,
         np.dtype(np.uint8): 3, np.dtype(np.int64): 4, np.dtype(np.bool_): 6,
         np.dtype(np.int8): 9}


class TFLiteBuilder:
    """``t = b.tensor(name, shape, dtype, data=None, quant=None)`` (quant:
    ``(scales, zero_points[, quantized_dimension])``) ->
    index; ``b.op("CONV_2D", [ins], [outs], options=("Conv2DOptions",
    {"Padding": 0, ...}))``; ``b.save(path, inputs, outputs)``.  Custom
    operators: code ``"CUSTOM:Name"``, options ``("custom", raw_bytes)``."""

    def __init__(self):
        self.tensors = []
        self.ops = []

    def tensor(self, name, shape, dtype=np.float32, data=None, quant=None, sparsity=None,
               variable=False, external=False, resource=False):
        """``sparsity``: (traversal_order, block_map, [(format, dense_size,
        segments, indices)]) -- ``data`` then holds only the stored values.
        ``variable``: a TFLite variable tensor (an LSTM's state).
        ``external``: the data after the flatbuffer, located by the buffer's
        offset and size (the schema's large-model layout; :meth:`save`).
        ``resource``: a resource tensor (a VAR_HANDLE's output: type 13)."""
        self.tensors.append(dict(name=name, shape=list(shape), dtype=np.dtype(dtype),
                                 data=None if data is None else
                                 np.ascontiguousarray(data, dtype=dtype), quant=quant,
                                 sparsity=sparsity, variable=variable, external=external,
                                 resource=resource))
        return len(self.tensors) - 1

    def const(self, name, arr, dtype=np.float32):
        arr = np.asarray(arr, dtype=dtype)
        return self.tensor(name, arr.shape, dtype, arr)

    def op(self, code, ins, outs, options=None):
        self.ops.append((code, list(ins), list(outs), options))

    def subgraph(self, sub, inputs, outputs):
        """Add ``sub`` (another TFLiteBuilder: its tensors and ops) as the
        next subgraph; its index (the main one is 0)."""
        self.__dict__.setdefault("subs", []).append((sub, list(inputs), list(outputs)))
        return len(self.subs)

    def build(self, inputs, outputs):
        import flatbuffers
        import tflite
        b = flatbuffers.Builder(1024)
        name2code = {v: k for k, v in tflite.BUILTIN_OPCODE2NAME.items()}

        def ivec(start, vals):
            start(b, len(vals))
            for v in reversed(vals):
                b.PrependInt32(int(v))
            return b.EndVector()

        # buffers: 0 is the empty sentinel
        buf_offsets = []
        tflite.BufferStart(b)
        buf_offsets.append(tflite.BufferEnd(b))
        graphs = [(self, list(inputs), list(outputs))] + list(getattr(self, "subs", []))
        tbuf = []
        external = self.external = []
        for t in [t for gb, _, _ in graphs for t in gb.tensors]:
            if t["data"] is None:
                tbuf.append(0)
                continue
            raw = t["data"].astype(t["data"].dtype.newbyteorder("<")).tobytes()
            if t.get("external"):
                base = getattr(self, "external_base", 1)   # 1: a first pass to size
                tflite.BufferStart(b)
                tflite.BufferAddOffset(b, base + sum(len(r) for r in external))
                tflite.BufferAddSize(b, len(raw))
                external.append(raw)
                buf_offsets.append(tflite.BufferEnd(b))
                tbuf.append(len(buf_offsets) - 1)
                continue
            # one copy into the builder (CreateNumpyVector's way, with the
            # 16-byte alignment the interpreter wants for buffers); a byte
            # per Prepend call takes minutes on a MobileNet's weights
            b.StartVector(1, len(raw), 16)
            b.head = b.head - len(raw)
            b.Bytes[b.head:b.head + len(raw)] = raw
            vec = b.EndVector()
            tflite.BufferStart(b)
            tflite.BufferAddData(b, vec)
            buf_offsets.append(tflite.BufferEnd(b))
            tbuf.append(len(buf_offsets) - 1)
        sg_offsets = []
        codes = []
        for gb, _, _ in graphs:
            for code, *_ in gb.ops:
                if code not in codes:
                    codes.append(code)
        at = 0
        for gb, g_in, g_out in graphs:
            sg_offsets.append(self._subgraph(b, tflite, ivec, gb, g_in, g_out,
                                             tbuf[at:at + len(gb.tensors)], codes))
            at += len(gb.tensors)
        oc_offsets = []
        for code in codes:
            custom = code[len("CUSTOM:"):] if code.startswith("CUSTOM:") else None
            c = name2code["CUSTOM" if custom else code]
            cname = b.CreateString(custom) if custom else None
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(c, 127))
            tflite.OperatorCodeAddBuiltinCode(b, c)
            tflite.OperatorCodeAddVersion(b, 1)
            if cname is not None:
                tflite.OperatorCodeAddCustomCode(b, cname)
            oc_offsets.append(tflite.OperatorCodeEnd(b))

        def ovec(start, offs):
            start(b, len(offs))
            for o in reversed(offs):
                b.PrependUOffsetTRelative(o)
            return b.EndVector()

        sgv = ovec(tflite.ModelStartSubgraphsVector, sg_offsets)
        ocv = ovec(tflite.ModelStartOperatorCodesVector, oc_offsets)
        bv = ovec(tflite.ModelStartBuffersVector, buf_offsets)
        desc = b.CreateString("pyarena test")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, ocv)
        tflite.ModelAddSubgraphs(b, sgv)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bv)
        m = tflite.ModelEnd(b)
        b.Finish(m, file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _subgraph(b, tflite, ivec, gb, inputs, outputs, tbuf, codes):
        """One SubGraph table: ``gb``'s tensors (buffer indices ``tbuf``)
        and ops."""
        t_offsets = []
        for t, bi in zip(gb.tensors, tbuf):
            name = b.CreateString(t["name"])
            shape = ivec(tflite.TensorStartShapeVector, t["shape"])
            q = None
            if t["quant"] is not None:
                scale, zp = t["quant"][:2]
                qdim = t["quant"][2] if len(t["quant"]) > 2 else 0
                tflite.QuantizationParametersStartScaleVector(b, len(scale))
                for v in reversed(scale):
                    b.PrependFloat32(float(v))
                sv = b.EndVector()
                tflite.QuantizationParametersStartZeroPointVector(b, len(zp))
                for v in reversed(zp):
                    b.PrependInt64(int(v))
                zv = b.EndVector()
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                if qdim:
                    tflite.QuantizationParametersAddQuantizedDimension(b, qdim)
                q = tflite.QuantizationParametersEnd(b)
            sp = _sparsity(b, tflite, ivec, t.get("sparsity"))
            tflite.TensorStart(b)
            if sp is not None:
                tflite.TensorAddSparsity(b, sp)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, 13 if t.get("resource") else _TYPE[t["dtype"]])
            tflite.TensorAddBuffer(b, bi)
            if t.get("variable"):
                tflite.TensorAddIsVariable(b, True)
            tflite.TensorAddName(b, name)
            if q is not None:
                tflite.TensorAddQuantization(b, q)
            t_offsets.append(tflite.TensorEnd(b))
        # operators
        op_offsets = []
        for code, ins, outs, options in gb.ops:
            iv = ivec(tflite.OperatorStartInputsVector, ins)
            ov = ivec(tflite.OperatorStartOutputsVector, outs)
            opt = None
            copts = None
            if options is not None and options[0] == "custom":   # ("custom", raw bytes)
                raw = bytes(options[1])
                b.StartVector(1, len(raw), 1)
                for v in reversed(raw):
                    b.PrependUint8(v)
                copts = b.EndVector()
                options = None
            if options is not None:
                kind, fields = options
                vecs = {}
                for k, v in fields.items():
                    if isinstance(v, (list, tuple)):
                        vecs[k] = ivec(getattr(tflite, f"{kind}Start{k}Vector"), v)
                    elif isinstance(v, str):
                        vecs[k] = b.CreateString(v)
                getattr(tflite, f"{kind}Start")(b)
                for k, v in fields.items():
                    getattr(tflite, f"{kind}Add{k}")(b, vecs.get(k, v))
                opt = getattr(tflite, f"{kind}End")(b)
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, codes.index(code))
            tflite.OperatorAddInputs(b, iv)
            tflite.OperatorAddOutputs(b, ov)
            if opt is not None:
                tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions,
                                                                options[0]))
                tflite.OperatorAddBuiltinOptions(b, opt)
            if copts is not None:
                tflite.OperatorAddCustomOptions(b, copts)
            op_offsets.append(tflite.OperatorEnd(b))

        def ovec(start, offs):
            start(b, len(offs))
            for o in reversed(offs):
                b.PrependUOffsetTRelative(o)
            return b.EndVector()

        tv = ovec(tflite.SubGraphStartTensorsVector, t_offsets)
        inv = ivec(tflite.SubGraphStartInputsVector, inputs)
        outv = ivec(tflite.SubGraphStartOutputsVector, outputs)
        opv = ovec(tflite.SubGraphStartOperatorsVector, op_offsets)
        sname = b.CreateString("main")
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddInputs(b, inv)
        tflite.SubGraphAddOutputs(b, outv)
        tflite.SubGraphAddOperators(b, opv)
        tflite.SubGraphAddName(b, sname)
        return tflite.SubGraphEnd(b)

    def save(self, path, inputs, outputs):
        data = self.build(inputs, outputs)
        if self.external:   # the external data after the flatbuffer, 16-aligned
            self.external_base = -(-len(data) // 16) * 16
            data = self.build(inputs, outputs)
            data = data.ljust(self.external_base, b"\0") + b"".join(self.external)
        with open(path, "wb") as f:
            f.write(data)
        return str(path)



def hybrid_const(B, name, a, hybrid=None):
    """``a`` (float32) as a constant of builder ``B``: as it is (``hybrid``
    None), as int8 with one scale and zero point 0 ("int8": TFLite's hybrid
    weights), or as the float32 values those int8 stand for ("float": the
    same model without the quantization)."""
    if hybrid is None:
        return B.const(name, a)
    scale = float(np.abs(a).max()) / 127
    q = np.round(a / scale)
    if hybrid == "float":
        return B.const(name, (q * np.float32(scale)).astype(np.float32))
    return B.tensor(name, a.shape, np.int8, data=q, quant=([scale], [0]))

def _sparsity(b, tflite, ivec, spec):
    """A SparsityParameters table (Int32Vector segments / indices)."""
    if spec is None:
        return None
    order, bmap, dims = spec
    metas = []
    for fmt, size, segs, inds in dims:
        sv = iv = None
        if segs is not None:
            vals = ivec(tflite.Int32VectorStartValuesVector, segs)
            tflite.Int32VectorStart(b)
            tflite.Int32VectorAddValues(b, vals)
            sv = tflite.Int32VectorEnd(b)
            vals = ivec(tflite.Int32VectorStartValuesVector, inds)
            tflite.Int32VectorStart(b)
            tflite.Int32VectorAddValues(b, vals)
            iv = tflite.Int32VectorEnd(b)
        tflite.DimensionMetadataStart(b)
        tflite.DimensionMetadataAddFormat(b, fmt)
        tflite.DimensionMetadataAddDenseSize(b, size)
        if sv is not None:
            tflite.DimensionMetadataAddArraySegmentsType(b, tflite.SparseIndexVector.Int32Vector)
            tflite.DimensionMetadataAddArraySegments(b, sv)
            tflite.DimensionMetadataAddArrayIndicesType(b, tflite.SparseIndexVector.Int32Vector)
            tflite.DimensionMetadataAddArrayIndices(b, iv)
        metas.append(tflite.DimensionMetadataEnd(b))
    ov = ivec(tflite.SparsityParametersStartTraversalOrderVector, order)
    bv = ivec(tflite.SparsityParametersStartBlockMapVector, bmap) if bmap else None
    tflite.SparsityParametersStartDimMetadataVector(b, len(metas))
    for m in reversed(metas):
        b.PrependUOffsetTRelative(m)
    mv = b.EndVector()
    tflite.SparsityParametersStart(b)
    tflite.SparsityParametersAddTraversalOrder(b, ov)
    if bv is not None:
        tflite.SparsityParametersAddBlockMap(b, bv)
    tflite.SparsityParametersAddDimMetadata(b, mv)
    return tflite.SparsityParametersEnd(b)


def small_cnn(path, fp16=False, seed=0, extra_outputs=False):
    """A MobileNet-like NHWC block stack: conv (fp16 weights through
    DEQUANTIZE if ``fp16``) + RELU6, depthwise + RELU, 1x1 conv, residual
    ADD, avg pool, max pool, resize, pad, concat, logistic, hard swish,
    MEAN, fully connected, softmax."""
    r = np.random.default_rng(seed)
    B = TFLiteBuilder()
    f = lambda *s: (r.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    x = B.tensor("input", (1, 16, 16, 3))
    if fp16:
        w16 = B.const("conv1/w16", f(8, 3, 3, 3), np.float16)
        w1 = B.tensor("conv1/w", (8, 3, 3, 3))
        B.op("DEQUANTIZE", [w16], [w1])
    else:
        w1 = B.const("conv1/w", f(8, 3, 3, 3))
    b1 = B.const("conv1/b", f(8))
    h1 = B.tensor("h1", (1, 8, 8, 8))
    B.op("CONV_2D", [x, w1, b1], [h1], ("Conv2DOptions", dict(
        Padding=0, StrideW=2, StrideH=2, FusedActivationFunction=3,
        DilationWFactor=1, DilationHFactor=1)))
    wd = B.const("dw/w", f(1, 3, 3, 8))
    bd = B.const("dw/b", f(8))
    h2 = B.tensor("h2", (1, 8, 8, 8))
    B.op("DEPTHWISE_CONV_2D", [h1, wd, bd], [h2], ("DepthwiseConv2DOptions", dict(
        Padding=0, StrideW=1, StrideH=1, DepthMultiplier=1, FusedActivationFunction=1,
        DilationWFactor=1, DilationHFactor=1)))
    wp = B.const("pw/w", f(8, 1, 1, 8))
    bp = B.const("pw/b", f(8))
    h3 = B.tensor("h3", (1, 8, 8, 8))
    B.op("CONV_2D", [h2, wp, bp], [h3], ("Conv2DOptions", dict(
        Padding=1, StrideW=1, StrideH=1, DilationWFactor=1, DilationHFactor=1)))
    h4 = B.tensor("h4", (1, 8, 8, 8))
    B.op("ADD", [h3, h1], [h4], ("AddOptions", dict(FusedActivationFunction=0)))
    p1 = B.tensor("p1", (1, 4, 4, 8))
    B.op("AVERAGE_POOL_2D", [h4], [p1], ("Pool2DOptions", dict(
        Padding=0, StrideW=2, StrideH=2, FilterWidth=3, FilterHeight=3)))
    p2 = B.tensor("p2", (1, 4, 4, 8))
    B.op("MAX_POOL_2D", [h4], [p2], ("Pool2DOptions", dict(
        Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2)))
    sz = B.const("size", np.array([8, 8], np.int32), np.int32)
    rz = B.tensor("rz", (1, 8, 8, 8))
    B.op("RESIZE_BILINEAR", [p1, sz], [rz], ("ResizeBilinearOptions", dict(
        AlignCorners=False, HalfPixelCenters=True)))
    rn = B.tensor("rn", (1, 8, 8, 8))
    B.op("RESIZE_NEAREST_NEIGHBOR", [p2, sz], [rn], ("ResizeNearestNeighborOptions", dict(
        AlignCorners=False, HalfPixelCenters=False)))
    c = B.tensor("cat", (1, 8, 8, 16))
    B.op("CONCATENATION", [rz, rn], [c], ("ConcatenationOptions", dict(
        Axis=3, FusedActivationFunction=0)))
    pads = B.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32), np.int32)
    pd = B.tensor("pad", (1, 10, 10, 16))
    B.op("PAD", [c, pads], [pd])
    sg = B.tensor("sig", (1, 10, 10, 16))
    B.op("LOGISTIC", [pd], [sg])
    hs = B.tensor("hsw", (1, 10, 10, 16))
    B.op("HARD_SWISH", [sg], [hs])
    ax = B.const("axes", np.array([1, 2], np.int32), np.int32)
    mn = B.tensor("mean", (1, 16))
    B.op("MEAN", [hs, ax], [mn], ("ReducerOptions", dict(KeepDims=False)))
    wf = B.const("fc/w", f(10, 16))
    bf = B.const("fc/b", f(10))
    lg = B.tensor("logits", (1, 10))
    B.op("FULLY_CONNECTED", [mn, wf, bf], [lg], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    y = B.tensor("prob", (1, 10))
    B.op("SOFTMAX", [lg], [y], ("SoftmaxOptions", dict(Beta=1.0)))
    return B.save(path, [x], [y, h4, rz, rn, hs] if extra_outputs else [y])
