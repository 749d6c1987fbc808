"""Canonical operator names and workspace (scratch) rules for importers.

Every importer emits ONNX operator names (the vocabulary of
``pyarena.kernels`` and of the planner's in-place rule table,
``pyarena.inplace``): TFLite's ``CONV_2D`` becomes ``Conv`` with
``layout="NHWC"``, ``LOGISTIC`` becomes ``Sigmoid``, ``RELU6`` becomes
``Clip(min=0, max=6)`` and so on (``TFLITE_TO_CANONICAL``).  A fused TFLite
activation stays on its operator as the attribute ``activation`` (the kernel
applies it in place on its own output).

Scratch sizes are not guessed here: each kernel computes the workspace it
will use (im2col matrix, padded image, blend buffers ...) from the tensor
shapes, and :func:`set_scratch` copies that into ``Op.scratch_bytes`` so
the planner reserves exactly what the executor touches.  The rules, in
elements of the op's dtype (64-byte aligned parts):

* Conv, im2col: ``C_in * kh * kw * H_out * W_out`` (all groups at once,
  one image at a time) plus the zero-padded image ``C_in * H_pad * W_pad``
  when there is padding; 1x1/stride-1/unpadded: none.
* Conv, depthwise: padded image + one output-sized product buffer.
* ConvTranspose: ``C_out * kh * kw * rows * W_in`` columns for a band of
  input rows within SCRATCH_BUDGET (taps are added into the cropped output
  directly).
* Erf/Gelu/Mish/Celu/ThresholdedRelu/Shrink: 1-3 temporaries of one flat
  chunk within SCRATCH_BUDGET.
* MaxPool/AveragePool: padded image when padded (or ceil_mode overhang).
* LeakyRelu/PRelu/HardSwish: one output-sized buffer (so the output may
  alias the input); Softmax: one value per row (LogSoftmax: + full size);
  LRN: channel-padded squares + denominator; Resize: intermediate after the
  first resized axis, + blend operands for linear.
"""
from ..kernels import KERNELS, UnsupportedOpError, scratch_bytes_for, set_scratch

__all__ = ["TFLITE_TO_CANONICAL", "set_scratch", "scratch_bytes_for", "is_supported",
           "UnsupportedOpError"]

# TFLite builtin name -> (canonical op type, fixed attributes)
TFLITE_TO_CANONICAL = {
    "CONV_2D": ("Conv", {}),
    "DEPTHWISE_CONV_2D": ("Conv", {"weight_layout": "1HWC"}),
    "TRANSPOSE_CONV": ("ConvTranspose", {}),
    # MediaPipe's transposed conv + bias (custom options: padding, strides)
    "CUSTOM:Convolution2DTransposeBias": ("ConvTranspose", {}),
    "FULLY_CONNECTED": ("FullyConnected", {}),
    "ADD": ("Add", {}), "SUB": ("Sub", {}), "MUL": ("Mul", {}), "DIV": ("Div", {}),
    "MAXIMUM": ("Max", {}), "MINIMUM": ("Min", {}),
    "RELU": ("Relu", {}),
    "RELU6": ("Clip", {"min": 0.0, "max": 6.0}),
    "RELU_N1_TO_1": ("Clip", {"min": -1.0, "max": 1.0}),
    "LOGISTIC": ("Sigmoid", {}),
    "TANH": ("Tanh", {}),
    "HARD_SWISH": ("HardSwish", {}),
    "LEAKY_RELU": ("LeakyRelu", {}),
    "PRELU": ("PRelu", {}),
    "EXP": ("Exp", {}),
    "ELU": ("Elu", {}), "GELU": ("Gelu", {}),
    "ABS": ("Abs", {}), "NEG": ("Neg", {}), "SQRT": ("Sqrt", {}), "LOG": ("Log", {}),
    "SIN": ("Sin", {}), "COS": ("Cos", {}), "FLOOR": ("Floor", {}), "CEIL": ("Ceil", {}),
    "ROUND": ("Round", {}), "RSQRT": ("Rsqrt", {}), "SQUARE": ("Square", {}),
    "SQUARED_DIFFERENCE": ("SquaredDifference", {}),
    "AVERAGE_POOL_2D": ("AveragePool", {}),
    "MAX_POOL_2D": ("MaxPool", {}),
    "MEAN": ("ReduceMean", {}),
    "SUM": ("ReduceSum", {}),
    "REDUCE_MAX": ("ReduceMax", {}),
    "SOFTMAX": ("Softmax", {}),
    "RESHAPE": ("Reshape", {}),
    "SQUEEZE": ("Squeeze", {}),
    "EXPAND_DIMS": ("Unsqueeze", {}),
    "CONCATENATION": ("Concat", {}),
    "PAD": ("Pad", {}), "PADV2": ("Pad", {}), "MIRROR_PAD": ("Pad", {}),
    "TRANSPOSE": ("Transpose", {}),
    "RESIZE_BILINEAR": ("Resize", {"mode": "linear"}),
    "RESIZE_NEAREST_NEIGHBOR": ("Resize", {"mode": "nearest"}),
    "SPLIT": ("Split", {}),
    # TFLite data movement (pyarena.kernels_tflite)
    "STRIDED_SLICE": ("StridedSlice", {}),
    "DEPTH_TO_SPACE": ("DepthToSpace", {"layout": "NHWC", "mode": "DCR"}),
}


def is_supported(op_type):
    return op_type in KERNELS
