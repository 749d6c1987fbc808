"""Patch-based execution under a memory budget: how far below its
fixed-order bound a model's arena gets when its first stage runs in row
bands, and what that costs in time.

    python benchmarks/bench_patch.py [--models mobilenet_v2,...] [--repeat 5]
                                     [--model PATH ...]

Models: the built-in MobileNetV2-224 with BatchNorm and activations fused
into the convs (what ``load_model`` makes of an imported model) and
unfused, and any model file given.  For each model: the fixed-order bound of the given order (``lower_bound_bytes``
of the default plan: the most bytes live at one step, in-place applied),
the smallest arena without patching (``plan(g, memory_budget=1,
patch=False)``: order and scratch only), the smallest with patching (the
same with patching on), then the model planned for each budget in
``--fractions`` of the bound (and for the smallest patched arena): the
arena, the stage and grid chosen, the recompute in MACs (% of the
stage's), and the inference time against the unbudgeted plan -- both
executors (and a control: a second executor of the unbudgeted plan) timed
in turn in the same rounds, medians, one BLAS thread -- and whether the
outputs are equal to the unbudgeted run's (max abs difference).
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# name -> (builder, keyword arguments, fuse BatchNorm / activations into the
# convs as load_model does for an imported model)
BUILTIN = {"mobilenet_v2": ("mobilenet_v2", {"resolution": 224}, True),
           "mobilenet_v2_unfused": ("mobilenet_v2", {"resolution": 224}, False),
           "resnet18": ("resnet", {"depth": 18, "resolution": 224}, True)}


def build(name):
    from pyarena.importers import load_model
    from pyarena.runtime import models, set_scratch
    from pyarena.runtime.fusion import fuse
    if name in BUILTIN:
        fn, kw, fused = BUILTIN[name]
        g = getattr(models, fn)(**kw)
        if fused:
            fuse(g)
        return set_scratch(g)
    return load_model(name)


def smallest(name, patch):
    from pyarena import PlanInfeasibleError, plan
    try:
        plan(build(name), memory_budget=1, patch=patch)
    except PlanInfeasibleError as exc:
        return exc.smallest_bytes
    raise AssertionError("a 1-byte arena cannot fit")


def row(name, budget, p0, g0, feeds, ref, repeat):
    """One budget: the plan's figures and same-run timings."""
    from pyarena import PlanInfeasibleError, plan
    from pyarena.runtime import Executor, median, time_calls
    g = build(name)
    try:
        p = plan(g, memory_budget=budget)
    except PlanInfeasibleError as exc:
        return {"budget": budget, "fits": False, "smallest": exc.smallest_bytes}
    e0, e1, again = Executor(g0, p0), Executor(g, p), Executor(g0, p0)
    out = e1.run(feeds)
    diff = max(float(np.max(np.abs(np.asarray(out[k], np.float64) - ref[k])))
               for k in ref)
    ts = time_calls({"default": lambda: e0.run(feeds), "budget": lambda: e1.run(feeds),
                     "again": lambda: again.run(feeds)}, repeat=repeat, warmup=1)
    t0 = median(ts["default"])
    return {"budget": budget, "fits": True, "arena": p.arena_bytes,
            "patches": p.budget["patches"],
            "search_s": p.plan_seconds, "t0": t0, "ratio": median(ts["budget"]) / t0,
            "noise": median(ts["again"]) / t0, "diff": diff}


def describe(r):
    if not r["fits"]:
        return f"does not fit (smallest {r['smallest'] / 1024:,.0f} KiB)"
    what = "; ".join(
        f"{len(rec['ops'])} ops -> {rec['output'][:24]} in {rec['grid'][0]}x"
        f"{rec['grid'][1]}, " + ("reuse" if rec["reuse"] else
                                 f"+{rec['recompute_macs'] / 1e6:,.0f} MMAC "
                                 f"({100 * rec['recompute_macs'] / max(rec['macs'], 1):.0f} %)")
        for rec in r["patches"]) or "no patch"
    return (f"arena {r['arena'] / 1024:,.0f} KiB, {what}, search {r['search_s']:.1f} s, "
            f"time {r['ratio']:.2f}x of {r['t0'] * 1e3:.1f} ms (control "
            f"{r['noise']:.2f}), max |diff| {r['diff']:.1e}")


def measure(name, fractions, repeat):
    from pyarena import plan
    from pyarena.runtime import Executor, random_feeds
    g0 = build(name)
    p0 = plan(g0)
    bound = p0.lower_bound_bytes
    feeds = random_feeds(g0, seed=0)
    ref = {k: np.array(v, np.float64) for k, v in Executor(g0, p0).run(feeds).items()}
    flat, patched = smallest(name, False), smallest(name, True)
    print(f"{os.path.basename(name)}: fixed-order bound {bound / 1024:,.0f} KiB, default "
          f"arena {p0.arena_bytes / 1024:,.0f} KiB; smallest without patching "
          f"{flat / 1024:,.0f} KiB ({flat / bound:.3f}), with patching "
          f"{patched / 1024:,.0f} KiB ({patched / bound:.3f})", flush=True)
    budgets = sorted({int(bound * f) for f in fractions} | {patched}, reverse=True)
    for b in budgets:
        r = row(name, b, p0, g0, feeds, ref, repeat)
        print(f"  budget {b / 1024:>8,.0f} KiB ({b / bound:.3f} of bound): {describe(r)}",
              flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="mobilenet_v2,mobilenet_v2_unfused")
    ap.add_argument("--model", action="append", default=[], help="a model file (repeatable)")
    ap.add_argument("--fractions", default="0.5,0.25")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    names = [m for m in args.models.split(",") if m] + args.model
    for name in names:
        measure(name, [float(f) for f in args.fractions.split(",")], args.repeat)


if __name__ == "__main__":
    main()
