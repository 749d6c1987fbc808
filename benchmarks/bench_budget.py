"""A memory budget as the interface: how small the arena of the built-in
models gets under ``plan(g, memory_budget=B)``, and what it costs in time.

    python benchmarks/bench_budget.py [--models mobilenet_v2,resnet50,...]
                                      [--paths native,numpy] [--repeat 7]

For each model (``pyarena.runtime.models`` at a modest resolution) and
kernel path (``native``: the default fused graph with the C kernels;
``numpy``: ``native=False``, every conv through im2col), the smallest
arena the budget search reaches is found by asking for 1 byte
(``PlanInfeasibleError.smallest_bytes``), then the model is planned with
exactly that budget.  Columns: the default arena, the smallest reachable
one and their ratio; the scratch budget per op and whether the op order
changed; the median inference time of the default and the budgeted plan
and their ratio -- both executors timed in turn in the same run
(:func:`pyarena.runtime.time_calls`), so the ratio is what to quote --
and a control: a second executor of the default plan timed in the same
rounds, whose ratio to the first is the run's noise (a ratio within the
control's distance from 1.00 is no difference).  BLAS runs on one thread.
Patched stages are left out (``patch=False``): benchmarks/bench_patch.py
measures them.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# name -> (builder, keyword arguments): modest resolutions, seconds per model
MODELS = {
    "mobilenet_v2": ("mobilenet_v2", {"resolution": 160}),
    "resnet50": ("resnet", {"depth": 50, "resolution": 112}),
    "densenet121": ("densenet121", {"resolution": 112}),
    "unet": ("unet", {"resolution": 128}),
}


def build(name, native):
    from pyarena.runtime import models, set_scratch
    fn, kw = MODELS[name]
    return set_scratch(getattr(models, fn)(**kw), None, native)


def measure(name, native, repeat):
    """One row: arenas, the budget search's choice and same-run timings."""
    from pyarena import PlanInfeasibleError, plan
    from pyarena.runtime import Executor, median, random_feeds, time_calls
    g0 = build(name, native)
    p0 = plan(g0)
    try:
        plan(build(name, native), memory_budget=1, patch=False)
        raise AssertionError("a 1-byte arena cannot fit")
    except PlanInfeasibleError as exc:
        smallest = exc.smallest_bytes
    g1 = build(name, native)
    p1 = plan(g1, memory_budget=smallest, patch=False)
    feeds = random_feeds(g0, seed=0)
    e0, e1, again = Executor(g0, p0), Executor(g1, p1), Executor(g0, p0)
    ts = time_calls({"default": lambda: e0.run(feeds), "budget": lambda: e1.run(feeds),
                     "again": lambda: again.run(feeds)}, repeat=repeat, warmup=1)
    t0, t1 = median(ts["default"]), median(ts["budget"])
    return {"arena": p0.arena_bytes, "smallest": p1.arena_bytes,
            "scratch": p1.budget["scratch_budget"], "reordered": p1.budget["order_changed"],
            "tried": len(p1.budget["tried"]), "search_s": p1.plan_seconds,
            "t0": t0, "t1": t1, "noise": median(ts["again"]) / t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--paths", default="native,numpy")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads (default 1, as pyarena run)")
    args = ap.parse_args()
    from pyarena.runtime import set_blas_threads
    set_blas_threads(args.blas_threads)
    print(f"{'model':<14}{'path':<8}{'arena KiB':>11}{'smallest':>10}{'ratio':>7}"
          f"{'scratch/op':>12}{'order':>7}{'plans':>6}{'search ms':>10}"
          f"{'ms':>9}{'ms budget':>10}{'ratio':>7}{'control':>9}")
    for name in args.models.split(","):
        for path in args.paths.split(","):
            r = measure(name, path == "native", args.repeat)
            scratch = "as given" if r["scratch"] is None else f"{r['scratch']:,}"
            print(f"{name:<14}{path:<8}{r['arena'] / 1024:>11.0f}"
                  f"{r['smallest'] / 1024:>10.0f}{r['smallest'] / r['arena']:>7.3f}"
                  f"{scratch:>12}{'moved' if r['reordered'] else 'kept':>7}"
                  f"{r['tried']:>6}{r['search_s'] * 1e3:>10.0f}{r['t0'] * 1e3:>9.1f}"
                  f"{r['t1'] * 1e3:>10.1f}{r['t1'] / r['t0']:>7.2f}{r['noise']:>9.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
