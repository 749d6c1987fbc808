"""Every .tflite file under a directory: import, plan, run, compare.

For each model: operator count; activation+scratch bytes naive (one buffer
per tensor), lower bound (max over time of the live bytes), and the arena of
the first-fit, greedy-by-size and best strategies (in-place reuse on); how
far best is over the bound; the largest |difference| of the outputs from
the TFLite interpreter (ai-edge-litert, default XNNPACK) on seeded random
inputs, next to the interpreter's own disagreement between XNNPACK and its
reference kernels (BUILTIN_REF) on the same input -- the yardstick for
"numerically sensitive" models; and the median time per inference with the
static plan vs one fresh ``np.empty`` per tensor (same NumPy kernels,
interleaved in the same process; ratio = plan / np.empty).  A model the
importer or executor cannot run gets its error message instead.

Nothing is downloaded.  The MediaPipe models used in docs/models.md come
from the mediapipe 0.10.14 wheel (Apache-2.0):

    pip download --no-deps mediapipe==0.10.14 -d D
    unzip -o D/mediapipe-*.whl 'mediapipe/modules/*.tflite' -d D
    python benchmarks/bench_tflite_models.py D/mediapipe/modules [--repeat 5]

BLAS runs single-threaded (``--threads``) so timings on a shared machine
mean something.
"""
import argparse
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def mib(n):
    return f"{n / 2**20:.2f}"


def interpreter_outputs(path, feeds, resolver="AUTO"):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=path,
                     experimental_op_resolver_type=getattr(OpResolverType, resolver))
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.asarray(feeds[d["name"]], dtype=d["dtype"]))
    it.invoke()
    return {d["name"]: np.array(it.get_tensor(d["index"])) for d in it.get_output_details()}


def max_diff(a, b):
    return max((float(np.max(np.abs(a[k].astype(np.float64) - b[k]))) if a[k].size else 0.0)
               for k in a if k in b and b[k].shape == a[k].shape)


def measure(path, repeat):
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor, median, random_feeds, time_calls
    g = load_model(path)
    plans = {s: plan(g, strategy=s) for s in ("first-fit", "greedy-by-size", "best")}
    p = plans["best"]
    ex_plan = Executor(g, p)
    ex_np = Executor(g, allocator="numpy", weights=ex_plan.weights)
    feeds = random_feeds(g, seed=0)
    out = {k: v.copy() for k, v in ex_plan.run(feeds).items()}
    out_np = ex_np.run(feeds)
    assert all(np.array_equal(out[k], out_np[k]) for k in out), path
    try:
        ref = interpreter_outputs(path, feeds)
        ref_k = interpreter_outputs(path, feeds, "BUILTIN_REF")
    except RuntimeError:  # e.g. a custom op the interpreter has no kernel for
        ref = ref_k = None
    ts = time_calls({"plan": lambda: ex_plan.run(feeds), "np": lambda: ex_np.run(feeds)},
                    repeat=repeat, warmup=0)
    return dict(ops=len(g.ops), naive=p.naive_bytes, bound=p.lower_bound_bytes,
                ff=plans["first-fit"].arena_bytes, gs=plans["greedy-by-size"].arena_bytes,
                best=p.arena_bytes,
                diff=max_diff(out, ref) if ref else float("nan"),
                self_diff=max_diff(ref_k, ref) if ref else float("nan"),
                mag=max(float(np.abs(v).max()) for v in (ref or out).values() if v.size),
                tp=median(ts["plan"]), tn=median(ts["np"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory", help="searched recursively for *.tflite")
    ap.add_argument("--repeat", type=int, default=5, help="timed inferences per mode")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    args = ap.parse_args(argv)
    from pyarena import UnsupportedOpError
    from pyarena.runtime import set_blas_threads
    set_blas_threads(args.threads)
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(args.directory)
                   for f in fs if f.endswith(".tflite"))
    if not paths:
        sys.exit(f"no .tflite file under {args.directory!r}")
    hdr = (f"| {'model':<34} | {'ops':>4} | {'naive MiB':>9} | {'bound MiB':>9} | "
           f"{'first-fit':>9} | {'greedy-size':>11} | {'best':>6} | {'over':>5} | "
           f"{'max diff':>9} | {'interp self':>11} | {'max out':>8} | {'plan ms':>7} | "
           f"{'np.empty ms':>11} | {'ratio':>5} |")
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            r = measure(path, args.repeat)
        except Exception as exc:   # unsupported op, bad file: print it, go on
            msg = str(exc).replace("\n", " ")
            kinds = sorted(set(re.findall(r"\((CUSTOM:\w+|[A-Z][A-Z0-9_]+)\)", msg)))
            if isinstance(exc, UnsupportedOpError) and kinds:
                msg = "unsupported: " + ", ".join(kinds)
            print(f"| {name:<34} | {type(exc).__name__}: {msg[:300]} |", flush=True)
            continue
        over = r["best"] / r["bound"] - 1 if r["bound"] else 0.0
        print(f"| {name:<34} | {r['ops']:>4} | {mib(r['naive']):>9} | {mib(r['bound']):>9} | "
              f"{mib(r['ff']):>9} | {mib(r['gs']):>11} | {mib(r['best']):>6} | "
              f"{over:>5.1%} | {r['diff']:>9.2g} | {r['self_diff']:>11.2g} | "
              f"{r['mag']:>8.3g} | {r['tp'] * 1e3:>7.1f} | {r['tn'] * 1e3:>11.1f} | "
              f"{r['tp'] / r['tn']:>5.2f} |", flush=True)
    print("\nMiB: activation + scratch bytes (weights excluded), in-place reuse on; over: "
          "best / bound - 1;\nmax diff: ours vs the TFLite interpreter (XNNPACK; nan: the interpreter cannot run "
          "the model, e.g. a custom op); interp "
          "self: the interpreter's XNNPACK vs its reference kernels;\nmax out: largest output "
          "magnitude; ms: median per inference, same process, interleaved; ratio = plan / "
          "np.empty.")


if __name__ == "__main__":
    main()
