"""Scratch sized from the slack (pyarena.runtime.slack.plan_in_slack)
against the default plan, on real models, side by side in one run: the
arena of each, the activations-only bound, and the inference time ratio
(median of interleaved rounds); outputs compared.

    python benchmarks/bench_slack.py [--repeat 9] [--dir DIR]
"""
import argparse
import os
import sys

import numpy as np

from scratch import scratch_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--dir", default=None, help="also every .onnx / .tflite file under DIR "
                                                "whose inputs are all fixed")
    args = ap.parse_args()
    from helpers.model_zoo import randomized_light_model
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor, median, random_feeds, set_blas_threads, time_calls
    from pyarena.runtime.slack import activation_live, plan_in_slack
    set_blas_threads(1)
    tmp = scratch_dir()
    models = [(n, randomized_light_model(n, os.path.join(tmp, f"{n}.onnx")))
              for n in ("squeezenet", "shufflenet", "inception_v1", "inception_v2", "resnet50",
                        "densenet121", "bvlc_alexnet", "zfnet512")]
    models.append(("face_detection", os.path.join(ROOT, "tests", "data",
                                                  "face_detection_short_range.tflite")))
    if args.dir:
        for f in sorted(os.listdir(args.dir)):
            if f.endswith((".onnx", ".tflite")):
                models.append((f, os.path.join(args.dir, f)))
    print(f"{'model':<28}{'default KiB':>12}{'bound KiB':>11}{'slack KiB':>11}"
          f"{'slack/bound':>12}{'default/bound':>14}{'narrowed':>10}{'time ratio':>11}"
          f"{'max|diff|':>11}")
    for name, path in models:
        try:
            g0 = load_model(path)
            g1 = load_model(path)
        except Exception as exc:             # symbolic inputs and the like: say so, go on
            print(f"{name:<28}  skipped: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        p0 = plan(g0)
        _, bound = activation_live(p0, len(g0.ops))
        p1 = plan_in_slack(g1)
        e0, e1 = Executor(g0, p0), Executor(g1, p1)
        feeds = random_feeds(g0)
        a = {k: np.array(v) for k, v in e0.run(feeds).items()}
        b = e1.run(feeds)
        diff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
        ts = time_calls({"default": lambda: e0.run(feeds), "slack": lambda: e1.run(feeds)},
                        repeat=args.repeat, warmup=1)
        print(f"{name:<28}{p0.arena_bytes / 1024:>12.0f}{bound / 1024:>11.0f}"
              f"{p1.arena_bytes / 1024:>11.0f}{p1.arena_bytes / bound:>12.3f}"
              f"{p0.arena_bytes / bound:>14.3f}{len(p1.slack['narrowed']):>10}"
              f"{median(ts['slack']) / median(ts['default']):>11.2f}{diff:>11.1e}", flush=True)
    print("\nbound: the activations-only bound (the largest sum of planned activations live "
          "at one step, in-place applied);\ntime ratio: slack plan / default plan, medians of "
          "the same interleaved rounds, one thread.")


if __name__ == "__main__":
    main()
