"""InferenceSession over input shapes known only at run time: a model fed
several input widths in a cycle, next to onnxruntime on the same file.

For each width (one input-shape signature): the time to import + plan it
the first time it is seen, the median inference of the cached signature
through the session, the median of a fixed-shape Executor of the same
graph (the overhead of the session's lookup), onnxruntime's median, and
the largest |difference| from onnxruntime.  Then the session's arena next
to the largest and the summed per-signature lower bounds.

    python benchmarks/bench_session.py --model rec.onnx --input x --dims 1,3,48,W \\
        --widths 160,240,320,480,640 [--repeat 7]

Without --model: a small conv + reshape model made in code with a
symbolic width (nothing downloaded).  One thread everywhere.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def builtin_model(path):
    from importers.test_session import _model
    return _model(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--input", default="x")
    ap.add_argument("--dims", default="1,8,24,W", help="input dims, W = the width")
    ap.add_argument("--widths", default="16,24,32,48,64")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    import onnxruntime as ort
    from pyarena import InferenceSession
    from pyarena.runtime import Executor, median, set_blas_threads, time_calls
    set_blas_threads(1)
    path = args.model or builtin_model(os.path.join(tempfile.mkdtemp(), "dyn.onnx"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s = InferenceSession(path)
    widths = [int(w) for w in args.widths.split(",")]
    print(f"{'width':>6}{'first (import+plan) ms':>24}{'session ms':>12}{'fixed ms':>10}"
          f"{'ort ms':>9}{'session/fixed':>15}{'session/ort':>13}{'max|diff|':>11}"
          f"{'arena KiB':>11}{'bound KiB':>11}")
    bounds = []
    for w in widths:
        dims = [w if d == "W" else int(d) for d in args.dims.split(",")]
        x = np.random.default_rng(w).standard_normal(dims).astype(np.float32)
        feeds = {args.input: x}
        t0 = time.perf_counter()
        s.run(None, feeds, copy=False)
        first = time.perf_counter() - t0
        g, p = s._plans[next(reversed(s._plans))][:2]
        fixed = Executor(g, p)
        bounds.append(p.lower_bound_bytes)
        ts = time_calls({"session": lambda: s.run(None, feeds, copy=False),
                         "fixed": lambda: fixed.run(feeds),
                         "ort": lambda: ref.run(None, feeds)}, repeat=args.repeat, warmup=1)
        m = {k: median(v) for k, v in ts.items()}
        ours = s.run(None, feeds)
        theirs = ref.run(None, feeds)
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
        print(f"{w:>6}{first * 1e3:>24.1f}{m['session'] * 1e3:>12.2f}{m['fixed'] * 1e3:>10.2f}"
              f"{m['ort'] * 1e3:>9.2f}{m['session'] / m['fixed']:>15.3f}"
              f"{m['session'] / m['ort']:>13.2f}{diff:>11.1e}{p.arena_bytes / 1024:>11.1f}"
              f"{p.lower_bound_bytes / 1024:>11.1f}", flush=True)
        del fixed
    s = InferenceSession(path)           # a session alone (no comparison executors)
    for w in widths + widths:            # the cycle twice: new, then cached signatures
        dims = [w if d == "W" else int(d) for d in args.dims.split(",")]
        s.run(None, {args.input: np.zeros(dims, np.float32)})
    info = s.memory_info()
    print(f"\nafter the cycle: {info['plans']} plans, session arena "
          f"{info['arena_bytes'] / 1024:.1f} KiB = {info['arena_bytes'] / max(bounds):.3f} x "
          f"the largest lower bound ({max(bounds) / 1024:.1f} KiB; their sum "
          f"{sum(bounds) / 1024:.1f} KiB); weights {info['weights_bytes'] / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
