"""Concat in place (pyarena.planning.concat) against the plan without it, on
real models, side by side in one run: the arena in the given op order and
in the memory-aware schedule, the activations-only bound of each plan,
and the inference time ratio (the median of each interleaved round's
ratio, one thread) with the Concat ops' own time; outputs compared.

    python benchmarks/bench_concat.py [--repeat 7] [--models squeezenet,...]

Models: the onnx package's ``light_*`` files (real layer graphs, seeded
random weights: tests/helpers/model_zoo.py) and the built-in U-Net and
DenseNet-121 (pyarena.runtime.models, whose DenseNet concatenates every
earlier feature map at each layer), and BlazeFace (TFLite, tests/data).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

LIGHT = ("squeezenet", "inception_v1", "inception_v2", "densenet121", "shufflenet")
BUILTIN = ("unet", "densenet121_builtin")
FILES = {"blazeface": os.path.join(ROOT, "tests", "data", "face_detection_short_range.tflite")}


def _loaders(names, tmp):
    from helpers.model_zoo import randomized_light_model
    from pyarena.importers import load_model
    from pyarena.runtime.models import MODELS
    out = []
    for name in names:
        if name in LIGHT:
            path = randomized_light_model(name, os.path.join(tmp, f"{name}.onnx"))
            out.append((name, lambda p=path: load_model(p)))
        elif name in BUILTIN:
            key = name.replace("_builtin", "")
            out.append((name + "*", lambda k=key: MODELS[k]()))
        elif name in FILES:
            out.append((name, lambda p=FILES[name]: load_model(p)))
        else:
            raise SystemExit(f"unknown model {name!r}; choose from "
                             f"{LIGHT + BUILTIN + tuple(FILES)}")
    return out


def _concat_seconds(ex, feeds, repeat):
    return sum(t for op, _, t in ex.profile(feeds, repeat=repeat)
               if op.op_type in ("Concat", "Concatenation"))


def row(name, load, repeat):
    from pyarena.planning import plan
    from pyarena.runtime import Executor, median, random_feeds, time_calls
    from pyarena.runtime.slack import activation_live
    g0, g1 = load(), load()
    p0 = plan(g0, inplace_concat=False)
    p1 = plan(g1)
    b0 = activation_live(p0, len(g0.ops))[1]
    b1 = activation_live(p1, len(g1.ops))[1]
    s0 = plan(load(), schedule=True, inplace_concat=False)
    s1 = plan(load(), schedule=True)
    cats = sum(op.op_type in ("Concat", "Concatenation") for op in g0.ops)
    placed = sum(r[3] == "concat" for r in p1.reuses)
    g2 = load()
    e0, e1, e2 = Executor(g0, p0), Executor(g1, p1), Executor(g2, plan(g2, inplace_concat=False))
    feeds = random_feeds(g0)
    a = {k: np.array(v) for k, v in e0.run(feeds).items()}
    b = e1.run(feeds)
    diff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
    ts = time_calls({"off": lambda: e0.run(feeds), "on": lambda: e1.run(feeds),
                     "ctrl": lambda: e2.run(feeds)}, repeat=repeat, warmup=1)

    def ratio(a, b):
        return median([x / y for x, y in zip(ts[a], ts[b])])
    c0, c1 = _concat_seconds(e0, feeds, repeat), _concat_seconds(e1, feeds, repeat)
    kib = 1024
    print(f"{name:<22}{cats:>5}{placed:>7}"
          f"{p0.arena_bytes / kib:>10.0f}{p1.arena_bytes / kib:>10.0f}"
          f"{p1.arena_bytes / p0.arena_bytes:>7.3f}"
          f"{s0.arena_bytes / kib:>10.0f}{s1.arena_bytes / kib:>10.0f}"
          f"{s1.arena_bytes / s0.arena_bytes:>7.3f}"
          f"{b0 / kib:>10.0f}{b1 / kib:>10.0f}{median(ts['off']) * 1e3:>8.1f}"
          f"{ratio('on', 'off'):>7.3f}{ratio('ctrl', 'off'):>7.3f}"
          f"{c0 * 1e3:>8.2f}{c1 * 1e3:>8.2f}{diff:>9.1e}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--models", default=",".join(LIGHT + BUILTIN + tuple(FILES)))
    args = ap.parse_args()
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    print(f"{'model':<22}{'cats':>5}{'placed':>7}{'off KiB':>10}{'on KiB':>10}{'ratio':>7}"
          f"{'sch off':>10}{'sch on':>10}{'ratio':>7}{'bnd off':>10}{'bnd on':>10}"
          f"{'off ms':>8}{'time':>7}{'ctrl':>7}{'cat ms':>8}{'cat ms':>8}{'max|d|':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, load in _loaders(args.models.split(","), tmp):
            row(name, load, args.repeat)
    print("\noff / on: plan(inplace_concat=False) / the default plan (Concat in place); "
          "sch: the same with schedule=True;\nbnd: activations-only bound (largest sum of "
          "planned activations live at one step) of each plan;\noff ms: median inference "
          "without; time: median over the interleaved rounds of on / off in the round, one "
          "thread;\nctrl: the same for a second executor of the off plan (the noise of the "
          "machine);\ncat ms: the Concat ops' summed median time (off, on); *: built-in graph "
          "(pyarena.runtime.models).")


if __name__ == "__main__":
    main()
