"""TFLite builtin options -> the attributes of the kernel's (ONNX) op.

A kernel names, beside each TFLite builtin it runs (``Kernel.tflite``),
the function here that reads that builtin's options table (strides,
padding, fused activation, axes ...) into the op's attributes and, where
TFLite orders inputs differently from the kernel, rewrites the inputs.
Builtins without options (TRANSPOSE, the element-wise maths) name none.
Each function takes the importer's context ``c``
(:class:`pyarena.importers.tflite_options.OpContext`: ``c.options(name)``,
``c.activation(o)``, ``c.const(i, what)``, ``c.attrs``, ``c.ins``,
``c.shapes``, ``c.fail(why)``); a value the kernels cannot run is refused
through ``c.fail`` with the operator's name.
"""
import numpy as np

def _padding(code):
    return "SAME_UPPER" if code == 0 else "VALID"


def tflite_out_size(n, k, stride, dilation, same):
    """TFLite's output size along one spatial axis (``ComputeOutSize``):
    SAME ceil(n / stride), VALID ceil((n - (k - 1) * dilation) / stride)."""
    if same:
        return (n + stride - 1) // stride
    return (n + stride - ((k - 1) * dilation + 1)) // stride


def _check_spatial(c, kernel, strides, dilations, same, cout, x, y, transposed=False):
    """The stored output shape against what the options imply (checked
    before any kernel runs): strides, dilations and filter sizes >= 1, NHWC
    input and output, batch kept, ``cout`` channels out and, per spatial
    axis, TFLite's SAME / VALID size.  A transposed conv runs the formula
    backwards: its stored output, convolved with the same options, must
    give its input."""
    xs, ys = list(c.shapes[x]), list(c.shapes[y])
    what = (f"strides {list(strides)}, filter {list(kernel)}, dilations {list(dilations)}, "
            f"{'SAME' if same else 'VALID'} padding")
    if min(list(strides) + list(dilations) + list(kernel)) < 1:
        c.contradicts(f"{what}: every stride, dilation and filter size must be >= 1")
    if len(xs) != 4 or len(ys) != 4:
        c.contradicts(f"input {xs} and output {ys} must both be NHWC (rank 4)")
    src, dst = (ys, xs) if transposed else (xs, ys)
    want = [src[0]] + [tflite_out_size(src[1 + i], kernel[i], strides[i], dilations[i], same)
                       for i in range(2)]
    got = [dst[0], dst[1], dst[2]]
    if min(want) < 1 or want != got or ys[3] != cout:
        if transposed:
            c.contradicts(f"{what} on the output {ys} give an input of {want[1:]} "
                          f"(height, width), the input is {xs} with {cout} channels out")
        c.contradicts(f"{what} on the input {xs} give an output of "
                      f"{want + [cout]}, the file stores {ys}")


def conv_2d(c):
    o = c.options("Conv2DOptions")
    c.attrs.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                   dilations=[o.DilationHFactor(), o.DilationWFactor()],
                   auto_pad=_padding(o.Padding()), group=1)
    c.activation(o)
    w = c.shapes[c.ins[1]]
    cin = c.shapes[c.ins[0]][-1]
    if len(w) != 4:
        c.contradicts(f"filter {w} is not OHWI (rank 4)")
    _check_spatial(c, w[1:3], c.attrs["strides"], c.attrs["dilations"], o.Padding() == 0,
                   w[0], c.ins[0], c.outs[0])
    if w[-1] != cin:
        if cin % w[-1]:
            c.fail(f"filter {w} does not match {cin} input channels")
        c.attrs["group"] = cin // w[-1]


def depthwise_conv_2d(c):
    o = c.options("DepthwiseConv2DOptions")
    cin = c.shapes[c.ins[0]][-1]
    c.attrs.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                   dilations=[o.DilationHFactor(), o.DilationWFactor()],
                   auto_pad=_padding(o.Padding()), group=cin)
    c.activation(o)
    w = c.shapes[c.ins[1]]
    if len(w) != 4:
        c.contradicts(f"filter {w} is not 1HWC (rank 4)")
    _check_spatial(c, w[1:3], c.attrs["strides"], c.attrs["dilations"], o.Padding() == 0,
                   w[3], c.ins[0], c.outs[0])
    if w[-1] % max(cin, 1):
        c.fail(f"filter {w} is not a multiple of {cin} input channels")


def transpose_conv(c):
    o = c.options("TransposeConvOptions")
    c.attrs.update(layout="NHWC", strides=[o.StrideH(), o.StrideW()],
                   auto_pad=_padding(o.Padding()))
    c.activation(o)
    ins = c.ins
    shape = list(np.asarray(c.const(ins[0], "the output shape")).reshape(-1))
    if shape != list(c.shapes[c.outs[0]]):
        c.fail(f"output_shape {shape} differs from the output tensor's shape "
               f"{c.shapes[c.outs[0]]}")
    # (output_shape, weights OHWI, input[, bias]) -> (input, weights[, bias])
    c.ins = [ins[2], ins[1]] + ([ins[3]] if len(ins) > 3 and ins[3] >= 0 else [])
    _check_transposed(c, o.Padding() == 0)


def _check_transposed(c, same):
    w = c.shapes[c.ins[1]]
    if len(w) != 4:
        c.contradicts(f"filter {w} is not OHWI (rank 4)")
    _check_spatial(c, w[1:3], c.attrs["strides"], (1, 1), same, w[0], c.ins[0], c.outs[0],
                   transposed=True)


def transpose_conv_bias(c):
    """MediaPipe's Convolution2DTransposeBias: (input, weights OHWI, bias);
    its custom options are a raw TfLiteTransposeConvParams {int32 padding
    (1 SAME, 2 VALID), stride_width, stride_height}."""
    op = c.op
    raw = op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""
    if len(raw) < 12 or len(c.ins) != 3:
        c.fail(f"expected 3 inputs and 12 bytes of options, got {len(c.ins)} inputs and "
               f"{len(raw)} bytes")
    pad, sw, sh = (int(v) for v in np.frombuffer(raw[:12], "<i4"))
    if pad not in (1, 2) or sw < 1 or sh < 1:
        c.fail(f"bad options padding={pad} strides=({sh}, {sw})")
    c.attrs.update(layout="NHWC", strides=[sh, sw],
                   auto_pad="SAME_UPPER" if pad == 1 else "VALID")
    _check_transposed(c, pad == 1)


def fully_connected(c):
    o = c.options("FullyConnectedOptions")
    if o is not None:
        c.activation(o)
        if int(o.WeightsFormat()) != 0:
            c.fail("shuffled weights format is not supported")


def arithmetic(c):
    o = c.options(c.code.capitalize() + "Options")    # AddOptions, SubOptions ...
    if o is not None:
        c.activation(o)


def pool_2d(c):
    o = c.options("Pool2DOptions")
    c.attrs.update(layout="NHWC", kernel_shape=[o.FilterHeight(), o.FilterWidth()],
                   strides=[o.StrideH(), o.StrideW()], auto_pad=_padding(o.Padding()),
                   count_include_pad=0)
    c.activation(o)
    x = c.ins[0]
    _check_spatial(c, c.attrs["kernel_shape"], c.attrs["strides"], (1, 1), o.Padding() == 0,
                   c.shapes[x][-1] if c.shapes[x] else -1, x, c.outs[0])


def concatenation(c):
    o = c.options("ConcatenationOptions")
    c.attrs["axis"] = int(o.Axis())
    c.activation(o)


def softmax(c):
    o = c.options("SoftmaxOptions")
    c.attrs.update(axis=-1, beta=float(o.Beta()) if o is not None else 1.0)


def gelu(c):
    o = c.options("GeluOptions")
    c.attrs["approximate"] = "tanh" if o is not None and o.Approximate() else "none"


def leaky_relu(c):
    c.attrs["alpha"] = float(c.options("LeakyReluOptions").Alpha())


def prelu(c):
    c.attrs["layout"] = "NHWC"


def reducer(c):
    o = c.options("ReducerOptions")
    c.attrs["keepdims"] = int(bool(o.KeepDims())) if o is not None else 0
    c.const(c.ins[1], "the reduction axes")


def arg_max(c):
    """ARG_MAX / ARG_MIN: the axis is a constant input; the axis is dropped."""
    axis = c.const(c.ins[1], "the axis")
    c.attrs["axis"] = int(axis.reshape(-1)[0])
    c.attrs["keepdims"] = 0
    c.ins = c.ins[:1]


def cumsum(c):
    o = c.options("CumsumOptions")
    c.attrs["exclusive"] = int(bool(o.Exclusive())) if o is not None else 0
    c.attrs["reverse"] = int(bool(o.Reverse())) if o is not None else 0


def shape_only(c):
    """RESHAPE / SQUEEZE / EXPAND_DIMS: the output tensor says the shape."""
    c.ins = c.ins[:1]


def pad(c):
    c.attrs["layout_pairs"] = 1                      # TFLite: [[begin, end], ...]
    if c.code == "MIRROR_PAD":
        o = c.options("MirrorPadOptions")
        if (int(o.Mode()) if o is not None else 0) != 0:
            c.fail("SYMMETRIC mirror padding is not supported")
        c.attrs["mode"] = "reflect"
    ins = c.ins
    c.ins = [ins[0], ins[1]] + ([ins[2]] if c.code == "PADV2" and len(ins) > 2 else [])


def resize(c):
    bilinear = c.code == "RESIZE_BILINEAR"
    o = c.options("ResizeBilinearOptions" if bilinear else "ResizeNearestNeighborOptions")
    ac = bool(o.AlignCorners()) if o is not None else False
    hp = bool(o.HalfPixelCenters()) if o is not None else False
    a = c.attrs
    if bilinear:
        a["coordinate_transformation_mode"] = ("align_corners" if ac else
                                               "half_pixel" if hp else "asymmetric")
    elif ac:
        a.update(coordinate_transformation_mode="align_corners",
                 nearest_mode="round_prefer_ceil")
    elif hp:
        a.update(coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode="floor")
    else:
        a.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    c.ins = c.ins[:1]      # output size comes from the output tensor's shape


def split(c):
    axis = c.const(c.ins[0], "the split axis")
    c.attrs["axis"] = int(np.asarray(axis).reshape(-1)[0])
    c.ins = [c.ins[1]]


def split_v(c):
    """SPLIT_V (input, size_splits, axis): Split along the axis, each
    output as long as its size (one size -1: the rest); sizes that are
    not the outputs' own are a contradiction."""
    if len(c.ins) != 3:
        c.fail(f"{len(c.ins)} inputs, not 3")
    axis = int(np.asarray(c.const(c.ins[2], "the split axis")).reshape(-1)[0])
    sizes = [int(v) for v in np.asarray(c.const(c.ins[1], "size_splits")).reshape(-1)]
    shp = c.shapes[c.ins[0]]
    if not -len(shp) <= axis < len(shp):
        c.contradicts(f"split axis {axis} of a {len(shp)}-D input")
    n = shp[axis]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = n - sum(v for v in sizes if v != -1)
    got = [c.shapes[o][axis] if len(c.shapes[o]) == len(shp) else None for o in c.outs]
    if len(sizes) != len(c.outs) or sizes != got or sum(sizes) != n:
        c.contradicts(f"size_splits {sizes} of {n} along axis {axis}: the outputs are "
                      f"{got}")
    c.attrs["axis"] = axis
    c.ins = [c.ins[0]]


def depth_to_space(c):
    o = c.options("DepthToSpaceOptions")
    c.attrs["blocksize"] = int(o.BlockSize()) if o is not None else 0


def strided_slice(c):
    for i, what in zip(c.ins[1:], ("begin", "end", "strides")):
        c.const(i, what)
    o = c.options("StridedSliceOptions")
    if o is not None:
        c.attrs.update(begin_mask=int(o.BeginMask()), end_mask=int(o.EndMask()),
                       ellipsis_mask=int(o.EllipsisMask()),
                       new_axis_mask=int(o.NewAxisMask()),
                       shrink_axis_mask=int(o.ShrinkAxisMask()))
        if hasattr(o, "Offset") and bool(o.Offset()):
            c.attrs["offset"] = 1
