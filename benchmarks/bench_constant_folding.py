"""Weights made by ops on constants: folded once at load, or computed at
every run in the work arena.

Builds models whose weights are made from constants (nothing downloaded):
a ZFNet-like net (five convolutions and three fully-connected layers,
about 300 MiB of weights, every one a ConstantOfShape, as the ONNX
"light" zoo models make them), the tests' conv net at 112 x 112 with
Tile-made weights, and a ResNet-50-sized classifier (2048 -> 1000, 7.8
MiB) whose weight is a ConstantOfShape, a DequantizeLinear of int8 or a
float16 Cast chain.  For each, in a fresh process per configuration:

* ``before`` -- weight folding off (its cap at shape arithmetic's,
  ``FOLD_MAX_BYTES``: what main did before it);
* ``after``  -- the default (``WEIGHT_FOLD_MAX_BYTES``);

it reports the planned work arena, the weights, the load time, the
process peak (VmHWM after one inference) and the outputs' largest
difference from the ``after`` run; ``bound`` is the arena of the same
model with its weights as plain initializers (the activations-only
bound), and ``peak plain`` that model's process peak.

    python benchmarks/bench_constant_folding.py [--models a,b] [--small]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))     # helpers

from scratch import scratch_dir  # noqa: E402

MODELS = ["zfnet_cos", "convnet_tile", "classifier_cos", "classifier_dq", "classifier_cast"]


def zfnet_like(path, plain=False, small=False):
    """ZFNet-512's layers (224 x 224 input), every weight a ConstantOfShape
    (``plain``: initializers of the same values).  ``small``: a quarter of
    the channels and units."""
    from onnx import TensorProto, helper
    from helpers.onnx_util import make_model
    d = 4 if small else 1
    convs = [(96 // d, 3, 7, 2, 1), (256 // d, 96 // d, 5, 2, 0), (384 // d, 256 // d, 3, 1, 1),
             (1024 // d, 384 // d, 3, 1, 1), (512 // d, 1024 // d, 3, 1, 1)]
    fcs = [(4096 // d, 512 // d * 25), (4096 // d, 4096 // d), (1000, 4096 // d)]
    nodes, inits, x = [], {}, "x"

    def weight(name, shape, value):
        if plain:
            inits[name] = np.full(shape, value, np.float32)
            return
        inits[f"{name}_s"] = np.array(shape, np.int64)
        nodes.append(helper.make_node("ConstantOfShape", [f"{name}_s"], [name],
                                      value=helper.make_tensor(f"{name}_v", TensorProto.FLOAT,
                                                               [1], [value])))
    for i, (co, ci, k, s, p) in enumerate(convs):
        weight(f"conv{i}.w", [co, ci, k, k], 1.0 / (ci * k * k))
        nodes += [helper.make_node("Conv", [x, f"conv{i}.w"], [f"c{i}"], strides=[s, s],
                                   pads=[p] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
        if i in (0, 1, 4):
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], kernel_shape=[3, 3],
                                          strides=[2, 2]))
            x = f"p{i}"
    nodes.append(helper.make_node("Flatten", [x], ["flat"]))
    x = "flat"
    for i, (n, k) in enumerate(fcs):
        weight(f"fc{i}.w", [n, k], 1.0 / k)
        nodes.append(helper.make_node("Gemm", [x, f"fc{i}.w"], [f"g{i}"], transB=1))
        x = f"g{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"fr{i}"]))
            x = f"fr{i}"
    nodes.append(helper.make_node("Softmax", [x], ["y"], axis=1))
    make_model(nodes, {"x": ([1, 3, 224, 224], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    return path


def build(name, path, plain, small):
    from helpers.weight_models import classifier, conv_net
    if name == "zfnet_cos":
        return zfnet_like(path, plain, small)
    if name == "convnet_tile":
        chans = (3, 32, 64, 64) if small else (3, 64, 128, 256, 256)
        return conv_net(path, "tile", plain, channels=chans, hw=56 if small else 112)
    kind = {"classifier_cos": "constant_of_shape", "classifier_dq": "dequantize",
            "classifier_cast": "cast_chain"}[name]
    return classifier(path, kind, plain, k=2048, n=1000)


def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def child(path, config, out):
    """One configuration alone in this process: prints one JSON line."""
    import warnings
    from pyarena.errors import UnsupportedOpError
    from pyarena.importers import load_model, onnx_constants
    from pyarena.importers.onnx_fold import FOLD_MAX_BYTES
    from pyarena.planning import plan
    from pyarena.runtime import Executor, random_feeds
    if config == "before":
        onnx_constants.WEIGHT_FOLD_MAX_BYTES = FOLD_MAX_BYTES
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    try:
        g = load_model(path)
    except UnsupportedOpError as exc:   # before: a Conv weight left as an op
        print(json.dumps({"refused": str(exc)[-120:]}))
        return
    load_s = time.perf_counter() - t0
    p = plan(g)
    feeds = random_feeds(g, seed=0)
    y = Executor(g, p).run(feeds)
    if out:
        np.save(out, np.asarray(next(iter(y.values()))))
    print(json.dumps({"arena": int(p.arena_bytes),
                      "weights": int(sum(t.nbytes for t in g.by_role("constant"))),
                      "ops": len(g.ops), "load_s": load_s, "peak": status("VmHWM")}))


def run_child(path, config, out=""):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, __file__, "--child", path, config, out],
                       capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode:
        raise SystemExit(f"{path} {config}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def bound(path):
    from pyarena.importers import load_model
    from pyarena.planning import plan
    return int(plan(load_model(path)).arena_bytes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--small", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    mib = 1 << 20
    d = scratch_dir()
    print(f"{'model':16} {'bound MiB':>10} {'arena before':>13} {'arena after':>12} "
          f"{'after/bound':>11} {'weights b->a':>15} {'load s b->a':>13} "
          f"{'peak MiB b->a':>15} {'peak plain':>11} {'max|diff|':>9}")
    for name in a.models.split(","):
        path = build(name, os.path.join(d, f"{name}.onnx"), False, a.small)
        twin = build(name, os.path.join(d, f"{name}.plain.onnx"), True, a.small)
        lo = bound(twin)
        plain = run_child(twin, "after")
        os.remove(twin)
        out_b, out_a = os.path.join(d, f"{name}.b.npy"), os.path.join(d, f"{name}.a.npy")
        b = run_child(path, "before", out_b)
        af = run_child(path, "after", out_a)
        if "refused" in b:      # (main refused the model: nothing to compare)
            diff, arena_b, weights_b, load_b, peak_b = "-", "refused", "-", "-", "-"
        else:
            diff = f"{float(np.max(np.abs(np.load(out_b) - np.load(out_a)))):.2g}"
            arena_b, weights_b = f"{b['arena'] / mib:.2f}", f"{b['weights'] / mib:.1f}"
            load_b, peak_b = f"{b['load_s']:.2f}", f"{b['peak'] / mib:.1f}"
        print(f"{name:16} {lo / mib:10.2f} {arena_b:>13} {af['arena'] / mib:12.2f} "
              f"{af['arena'] / max(lo, 1):10.3f}x "
              f"{weights_b:>6}->{af['weights'] / mib:6.1f} "
              f"{load_b:>5}->{af['load_s']:5.2f} "
              f"{peak_b:>6}->{af['peak'] / mib:6.1f} {plain['peak'] / mib:11.1f} "
              f"{diff:>9}", flush=True)

if __name__ == "__main__":
    main()
