"""Small ONNX models with symbolic batch and spatial sizes (N, H, W) for
InferenceSession tests: the shape-dependent choices of fusion and the NHWC
pass (tests/importers/test_session_signatures.py) and sessions shared by
threads (tests/importers/test_session_threads.py).  Each builder writes
``path`` and returns it; the input is ``x``, the output ``y``."""
import numpy as np
from onnx import helper

from helpers.onnx_util import make_model

R = np.random.default_rng(30)


def rnd(*shape, scale=0.5):
    return (R.standard_normal(shape) * scale).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _head(src, channels, classes=4):
    """GlobalAveragePool -> Reshape to [N, -1] through Shape / Slice /
    Concat (a batch read from the shapes) -> MatMul -> Softmax."""
    nodes = [node("GlobalAveragePool", [src], ["gp"]), node("Shape", ["gp"], ["gs"]),
             node("Slice", ["gs", "i0", "i1"], ["gn"]),
             node("Concat", ["gn", "im1"], ["gshape"], axis=0),
             node("Reshape", ["gp", "gshape"], ["gf"]), node("MatMul", ["gf", "gw"], ["gm"]),
             node("Softmax", ["gm"], ["y"], axis=-1)]
    inits = {"i0": np.array([0], np.int64), "i1": np.array([1], np.int64),
             "im1": np.array([-1], np.int64), "gw": rnd(channels, classes)}
    return nodes, inits


def squeeze_excitation(path):
    """x[N, 3, H, W] -> Conv 3x3 -> HardSwish -> SE (GlobalAveragePool ->
    Conv 1x1 -> Add a constant (1, C, 1, 1) -> Relu -> Conv 1x1 -> Add a
    constant -> HardSigmoid -> Mul) -> the head."""
    nodes = [node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             node("HardSwish", ["c0"], ["h0"]),
             node("GlobalAveragePool", ["h0"], ["p"]), node("Conv", ["p", "w1"], ["c1"]),
             node("Add", ["c1", "s1"], ["a1"]), node("Relu", ["a1"], ["r1"]),
             node("Conv", ["r1", "w2"], ["c2"]), node("Add", ["c2", "s2"], ["a2"]),
             node("HardSigmoid", ["a2"], ["g"], alpha=1 / 6, beta=0.5),
             node("Mul", ["h0", "g"], ["se"])]
    head, inits = _head("se", 16)
    inits.update(w0=rnd(16, 3, 3, 3), w1=rnd(4, 16, 1, 1), s1=rnd(1, 4, 1, 1),
                 w2=rnd(16, 4, 1, 1), s2=rnd(1, 16, 1, 1))
    make_model(nodes + head, {"x": (["N", 3, "H", "W"], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    return path


def residual_blocks(path):
    """x[N, 8, H, W] -> Conv 1x1 -> Add(., x) -> Relu (a residual at every
    size); GlobalAveragePool(x) -> Conv 1x1 of that -> Add(., the pool): a
    residual at 1x1 pixels only, a broadcast otherwise -> Flatten(Conv 1x1)
    as the output's batch rows."""
    nodes = [node("GlobalAveragePool", ["x"], ["q"]),
             node("Conv", ["x", "w1", "b1"], ["c1"]), node("Add", ["c1", "x"], ["a1"]),
             node("Relu", ["a1"], ["r1"]), node("Conv", ["r1", "w2"], ["c2"]),
             node("Add", ["c2", "q"], ["a2"]), node("Conv", ["a2", "w3", "b3"], ["c3"]),
             node("GlobalMaxPool", ["c3"], ["m"]), node("Flatten", ["m"], ["y"], axis=1)]
    make_model(nodes, {"x": (["N", 8, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"w1": rnd(8, 8, 1, 1), "b1": rnd(8), "w2": rnd(8, 8, 1, 1),
                "w3": rnd(6, 8, 1, 1), "b3": rnd(6)}, path=path)
    return path


def nhwc_everywhere(path):
    """x[N, 3, H, W] -> Conv 3x3 (3 -> 16) -> depthwise -> 1x1 (16 -> 32)
    -> depthwise -> 1x1 -> Relu -> the head: a region whose convolutions
    write far more than its edges move -- NHWC at every size."""
    nodes = [node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], ["r0"]),
             node("Conv", ["r0", "d1"], ["c1"], pads=[1, 1, 1, 1], group=16),
             node("Conv", ["c1", "p1", "b1"], ["c2"]), node("Clip", ["c2", "lo", "hi"], ["r2"]),
             node("Conv", ["r2", "d2"], ["c3"], pads=[1, 1, 1, 1], group=32),
             node("Conv", ["c3", "p2"], ["c4"]), node("Relu", ["c4"], ["r4"])]
    head, inits = _head("r4", 32)
    inits.update(w0=rnd(16, 3, 3, 3), d1=rnd(16, 1, 3, 3), p1=rnd(32, 16, 1, 1), b1=rnd(32),
                 d2=rnd(32, 1, 3, 3), p2=rnd(32, 32, 1, 1),
                 lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    make_model(nodes + head, {"x": (["N", 3, "H", "W"], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    return path


def nhwc_at_one_pixel(path):
    """x[N, 8, H, W] -> depthwise 3x3 -> 1x1: its edges (x and y) move as
    many bytes as its convolutions write, except at 1x1 pixels, where a
    transpose is a view -- NHWC there only."""
    nodes = [node("Conv", ["x", "d"], ["c"], pads=[1, 1, 1, 1], group=8),
             node("Conv", ["c", "p", "b"], ["y"])]
    make_model(nodes, {"x": (["N", 8, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"d": rnd(8, 1, 3, 3), "p": rnd(8, 8, 1, 1), "b": rnd(8)}, path=path)
    return path


#: name -> builder
MODELS = {"se": squeeze_excitation, "residual": residual_blocks,
          "nhwc": nhwc_everywhere, "nhwc-1px": nhwc_at_one_pixel}
#: name -> the input's channels
CHANNELS = {"se": 3, "residual": 8, "nhwc": 3, "nhwc-1px": 8}
