"""Conv layers in isolation: the native kernel vs the NumPy / BLAS path vs
the reference runtime, per layer -- the measurement behind Conv's
dispatch rule (pyarena/runtime/kernels/conv.py, ``Conv._native_rule``).

Every distinct convolution of the built-in MobileNetV2 at 224 (BatchNorm
folded, ReLU6 fused, as pyarena's fusion rewrite leaves it) becomes a
one-layer model, twice:

* NCHW as ONNX (Conv + Clip), reference onnxruntime (1 thread, all
  optimisations: it fuses the Clip);
* NHWC as TFLite (CONV_2D / DEPTHWISE_CONV_2D with RELU6 fused, SAME
  padding), reference the TFLite interpreter (ai-edge-litert, XNNPACK,
  1 thread).

For each: the median time per ``run`` (Python call included, for all
three) of pyarena with the op forced to the native kernel (``_path``
"native"), forced to the NumPy / BLAS path ("numpy"), and the reference;
the ratios to the reference; which path the rule picks.  Summed per kind
(depthwise, 1x1, full) at the end, with the layer counts of the network.
One thread everywhere (BLAS too); rounds interleaved.

    python benchmarks/bench_conv_paths.py [--repeat 15] [--layout nchw,nhwc]
"""
import argparse
import collections
import os
import sys

import numpy as np

from scratch import scratch_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def layers():
    """[(key, count)]: key = (c_in, c_out, k, stride, group, h, activation)
    for each distinct Conv of the fused MobileNetV2 at 224."""
    from pyarena.runtime import fuse
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(224)
    fuse(g)
    count = collections.Counter()
    for op in g.ops:
        if op.op_type != "Conv":
            continue
        _, c_in, h, _ = g.tensors[op.inputs[0]].shape
        c_out, _, k, _ = g.tensors[op.inputs[1]].shape
        count[(c_in, c_out, k, op.attrs["strides"][0], op.attrs.get("group", 1), h,
               op.attrs.get("activation"))] += 1
    return list(count.items())


def kind(key):
    c_in, c_out, k, s, group, h, act = key
    if group > 1:
        return "depthwise"
    return "1x1" if k == 1 else "full"


def onnx_layer(key, path, seed=0):
    from helpers.onnx_util import make_model
    from onnx import helper
    c_in, c_out, k, s, group, h, act = key
    r = np.random.default_rng(seed)
    w = (r.standard_normal((c_out, c_in // group, k, k)) * 0.2).astype(np.float32)
    b = r.standard_normal(c_out).astype(np.float32)
    p = k // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if act else "y"],
                              kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=group)]
    inits = {"w": w, "b": b}
    if act:
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
        inits.update(lo=np.float32(0), hi=np.float32(6))
    make_model(nodes, {"x": ([1, c_in, h, h], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)
    return path


def tflite_layer(key, path, seed=0):
    from helpers.tflite_util import TFLiteBuilder
    c_in, c_out, k, s, group, h, act = key
    r = np.random.default_rng(seed)
    B = TFLiteBuilder()
    ho = -(-h // s)
    x = B.tensor("x", (1, h, h, c_in))
    y = B.tensor("y", (1, ho, ho, c_out))
    b = B.const("b", r.standard_normal(c_out))
    fused = 3 if act else 0
    if group > 1:
        w = B.const("w", r.standard_normal((1, k, k, c_out)) * 0.2)
        B.op("DEPTHWISE_CONV_2D", [x, w, b], [y], ("DepthwiseConv2DOptions", dict(
            Padding=0, StrideW=s, StrideH=s, DepthMultiplier=1, FusedActivationFunction=fused,
            DilationWFactor=1, DilationHFactor=1)))
    else:
        w = B.const("w", r.standard_normal((c_out, k, k, c_in)) * 0.2)
        B.op("CONV_2D", [x, w, b], [y], ("Conv2DOptions", dict(
            Padding=0, StrideW=s, StrideH=s, FusedActivationFunction=fused,
            DilationWFactor=1, DilationHFactor=1)))
    return B.save(path, [x], [y])


def pyarena_forced(path, which):
    """(Executor, the path its Conv takes) with Conv forced to ``which``
    (None: the dispatch rule decides)."""
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    from pyarena.runtime.kernels import set_scratch
    g = load_model(path)
    for op in g.ops:
        if op.op_type == "Conv" and which:
            op.notes.kernel_path = which
    set_scratch(g)
    ex = Executor(g)
    conv = [k for op, k in zip(g.ops, ex.kernels) if op.op_type == "Conv"][0]
    return ex, conv.path


def time_layer(key, layout, path, repeat, warmup=2, clock="wall"):
    """The one-layer model of ``key`` written to ``path`` (ONNX for "nchw",
    TFLite for "nhwc") and timed with Conv forced native, forced NumPy and
    against the reference runtime, interleaved: ``({"native", "numpy",
    "ref"}: median seconds per run, the path the dispatch rule takes)``."""
    from bench_edge import reference_session
    from pyarena.runtime import median, random_feeds, time_calls
    (onnx_layer if layout == "nchw" else tflite_layer)(key, path)
    ex_n, _ = pyarena_forced(path, "native")
    ex_p, _ = pyarena_forced(path, "numpy")
    _, rule = pyarena_forced(path, None)
    ref, _ = reference_session(path, 1)
    feeds = random_feeds(ex_n.graph)
    ts = time_calls({"native": lambda: ex_n.run(feeds), "numpy": lambda: ex_p.run(feeds),
                     "ref": lambda: ref(feeds)}, repeat=repeat, warmup=warmup, clock=clock)
    return {k: median(v) for k, v in ts.items()}, rule


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--layout", default="nchw,nhwc")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    tmp = scratch_dir("pyarena-convs-")
    hdr = (f"{'layer (c_in>c_out k s, HxW)':<34}{'n':>3}{'native ms':>11}{'numpy ms':>10}"
           f"{'ref ms':>9}{'native/ref':>12}{'numpy/ref':>11}{'rule':>11}")
    for layout in args.layout.split(","):
        print(f"\n{layout.upper()} ({'onnxruntime' if layout == 'nchw' else 'TFLite interpreter'})")
        print(hdr)
        print("-" * len(hdr), flush=True)
        sums = collections.defaultdict(lambda: np.zeros(4))
        for i, (key, n) in enumerate(layers()):
            c_in, c_out, k, s, group, h, act = key
            path = os.path.join(tmp, f"l{i}.{'onnx' if layout == 'nchw' else 'tflite'}")
            m, rule = time_layer(key, layout, path, args.repeat)
            chosen = m["native"] if rule.startswith("native") else m["numpy"]
            sums[kind(key)] += n * np.array([m["native"], m["numpy"], m["ref"], chosen])
            name = f"{c_in}>{c_out} {k}x{k} s{s}{' dw' if group > 1 else ''}, {h}x{h}"
            print(f"{name:<34}{n:>3}{m['native'] * 1e3:>11.3f}{m['numpy'] * 1e3:>10.3f}"
                  f"{m['ref'] * 1e3:>9.3f}{m['native'] / m['ref']:>11.2f}x"
                  f"{m['numpy'] / m['ref']:>10.2f}x{rule:>11}", flush=True)
        print(f"{'sum over the network':<34}{'':>3}{'native ms':>11}{'numpy ms':>10}"
              f"{'ref ms':>9}{'rule ms':>9}{'rule/ref':>10}")
        for kd, (a, b, r, c) in sums.items():
            print(f"  {kd:<35}{a * 1e3:>11.2f}{b * 1e3:>10.2f}{r * 1e3:>9.2f}{c * 1e3:>9.2f}"
                  f"{c / r:>9.2f}x")
    print("\nms: median per run() of a one-layer model (Python call included for all three), "
          "1 thread;\nn: layers of MobileNetV2 with that geometry (sums weight by n); rule: the "
          "path Conv picks by default.")


if __name__ == "__main__":
    main()
