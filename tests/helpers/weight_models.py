"""Test helper: ONNX models whose weights are computed from constants by
ops (ConstantOfShape / Expand / Tile / Transpose / DequantizeLinear / Cast
chains, as real exports make them), each with its twin whose weights are
plain initializers of the same values -- the activations-only bound the
folded model's arena must match.  Used by the weight-folding tests and
benchmarks/bench_constant_folding.py.  Not a test module."""
import numpy as np
from onnx import TensorProto, helper

from helpers.onnx_util import make_model

#: how a conv net's weights are made
CONV_WEIGHTS = ("constant_of_shape", "expand", "tile")
#: how a classifier's weight is made
GEMM_WEIGHTS = ("transpose", "dequantize", "cast_chain", "constant_of_shape")


def _cos(out, shape_name, value):
    return helper.make_node("ConstantOfShape", [shape_name], [out],
                            value=helper.make_tensor(f"{out}_v", TensorProto.FLOAT, [1],
                                                     [value]))


def conv_weight(kind, name, shape, seed):
    """(nodes, initializers, value) of a conv weight of ``shape`` made by
    ``kind`` (one of CONV_WEIGHTS, or None: the value as an initializer)."""
    rng = np.random.default_rng(seed)
    value = float(rng.uniform(0.005, 0.02))
    o, i, kh, kw = shape
    if kind == "constant_of_shape":
        return ([_cos(name, f"{name}_s", value)], {f"{name}_s": np.array(shape, np.int64)},
                np.full(shape, value, np.float32))
    if kind == "expand":
        k = np.full((1, 1, 1, 1), value, np.float32)
        return ([helper.make_node("Expand", [f"{name}_k", f"{name}_s"], [name])],
                {f"{name}_k": k, f"{name}_s": np.array(shape, np.int64)},
                np.full(shape, value, np.float32))
    if kind == "tile":      # a (o, i, 1, 1) kernel repeated over the window
        k = (rng.standard_normal((o, i, 1, 1)) * 0.05).astype(np.float32)
        return ([helper.make_node("Tile", [f"{name}_k", f"{name}_r"], [name])],
                {f"{name}_k": k, f"{name}_r": np.array([1, 1, kh, kw], np.int64)},
                np.tile(k, (1, 1, kh, kw)))
    raise ValueError(kind)


def conv_net(path, kind, plain=False, channels=(3, 64, 64, 64), hw=32, seed=0):
    """x -> (Conv 3x3 -> Relu) per layer -> GlobalAveragePool -> y, every
    conv weight made by ``kind`` (``plain``: initializers holding the same
    values).  Returns the path; input "x" (1, channels[0], hw, hw)."""
    nodes, inits, x = [], {}, "x"
    for li, (ci, co) in enumerate(zip(channels, channels[1:])):
        w = f"w{li}"
        wn, wi, value = conv_weight(kind, w, [co, ci, 3, 3], seed + li)
        if plain:
            inits[w] = value
        else:
            nodes += wn
            inits.update(wi)
        nodes += [helper.make_node("Conv", [x, w], [f"c{li}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{li}"], [f"r{li}"])]
        x = f"r{li}"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["y"]))
    make_model(nodes, {"x": ([1, channels[0], hw, hw], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    return path


def classifier(path, kind, plain=False, k=2048, n=1024, seed=0):
    """x (1, k) -> Relu -> Gemm(W: k x n, made by ``kind``; ``plain``: an
    initializer of the same values) -> Relu -> y.  W is 8 MiB by default.
    Returns the path."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) * 0.05).astype(np.float32)
    nodes, inits = [], {}
    if kind == "transpose":
        inits["wt"] = np.ascontiguousarray(w.T)
        nodes.append(helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0]))
    elif kind == "dequantize":
        q = rng.integers(-127, 128, (k, n)).astype(np.int8)
        inits.update(q=q, scale=np.array(0.01, np.float32))
        nodes.append(helper.make_node("DequantizeLinear", ["q", "scale"], ["w"]))
        w = q.astype(np.float32) * np.float32(0.01)
    elif kind == "cast_chain":      # float16 on disk, widened twice, narrowed back
        inits["h"] = w.astype(np.float16)
        nodes += [helper.make_node("Cast", ["h"], ["h32"], to=TensorProto.FLOAT),
                  helper.make_node("Cast", ["h32"], ["h64"], to=TensorProto.DOUBLE),
                  helper.make_node("Cast", ["h64"], ["w"], to=TensorProto.FLOAT)]
        w = inits["h"].astype(np.float32)
    elif kind == "constant_of_shape":
        inits["s"] = np.array([k, n], np.int64)
        nodes.append(_cos("w", "s", 0.01))
        w = np.full((k, n), 0.01, np.float32)
    else:
        raise ValueError(kind)
    if plain:
        nodes, inits = [], {"w": w}
    nodes += [helper.make_node("Relu", ["x"], ["xr"]),
              helper.make_node("Gemm", ["xr", "w"], ["g"]),
              helper.make_node("Relu", ["g"], ["y"])]
    make_model(nodes, {"x": ([1, k], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)
    return path
