"""Real models, planned vs unplanned: a table.

For each model: the planned arena vs the naive sum (one buffer per tensor)
vs the lower bound (max over time of the live bytes); the time per
inference with the static plan vs with one fresh ``np.empty`` per tensor
(the same NumPy kernels, interleaved in the same process, median, ratio);
and the peak RSS of each mode, each in its own process (total, and the
growth over the RSS after the model and its weights were loaded).

Models: MobileNetV2 at 224 built in code (pyarena.runtime.models), and the real
architectures the ``onnx`` package ships as "light" models (SqueezeNet,
ShuffleNet, Inception v2, ResNet-50, DenseNet-121; ``--heavy`` adds
Inception v1, AlexNet, ZFNet-512, VGG-19) with their ConstantOfShape
weights replaced by seeded random ones.

    python benchmarks/bench_models.py [--repeat 5] [--heavy] [--models a,b]

BLAS runs single-threaded (``--threads``) so that timings on a shared
machine mean something.
"""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

from scratch import scratch_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

LIGHT = ["squeezenet", "shufflenet", "inception_v2", "resnet50", "densenet121"]
HEAVY = ["inception_v1", "bvlc_alexnet", "zfnet512", "vgg19"]


def model_path(name, tmp):
    if name == "mobilenet_v2":
        return name
    from helpers.model_zoo import randomized_light_model
    p = os.path.join(tmp, f"{name}.onnx")
    if not os.path.exists(p):
        randomized_light_model(name, p)
    return p


def load(path):
    if path == "mobilenet_v2":
        from pyarena.runtime.models import mobilenet_v2
        return mobilenet_v2(224)
    from pyarena.importers import load_model
    return load_model(path)


def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def child(path, mode, threads):
    """One mode in a fresh process: RSS after loading, peak RSS after runs."""
    from pyarena.memory.heap import trim_heap
    from pyarena.runtime import Executor, random_feeds, set_blas_threads
    from pyarena.runtime.footprint import reset_peak
    set_blas_threads(threads)
    g = load(path)
    feeds = random_feeds(g)
    if mode == "plan":
        ex = Executor(g)
    else:
        ex = Executor(g, allocator="numpy")
    import gc
    gc.collect()
    trim_heap()                # give the import's garbage back
    # the import's own peak (protobuf copies, shape inference) is not the
    # inference's: restart the high-water mark once everything is loaded
    reset_peak()
    base = _status("VmRSS")
    for _ in range(3):
        ex.run(feeds)
    peak = _status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"base": base, "peak": peak}))


def rss_of(path, mode, threads):
    # a fixed mmap threshold: big blocks are mapped and unmapped, so RSS
    # follows what is live instead of glibc's recycled heap
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, mode,
                        "--threads", str(threads)], capture_output=True, text=True,
                       timeout=900, env=env)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def mib(n):
    return f"{n / (1 << 20):.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--heavy", action="store_true")
    ap.add_argument("--models", default=None, help="comma-separated subset")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-rss", action="store_true", help="skip the per-process RSS runs")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.threads)
        return
    from pyarena.planning import plan
    from pyarena.runtime import Executor, median, random_feeds, set_blas_threads, time_calls
    set_blas_threads(args.threads)
    names = ["mobilenet_v2"] + LIGHT + (HEAVY if args.heavy else [])
    if args.models:
        names = args.models.split(",")
    tmp = scratch_dir("pyarena-bench-")
    hdr = (f"{'model':<14}{'ops':>5}{'arena MiB':>11}{'bound MiB':>11}{'naive MiB':>11}"
           f"{'saved':>7}{'plan ms':>9}{'t plan ms':>11}{'t np.empty':>12}{'ratio':>7}"
           f"{'RSS plan':>10}{'RSS np':>9}{'dRSS plan':>11}{'dRSS np':>9}")
    print(hdr)
    print("-" * len(hdr))
    for name in names:
        path = model_path(name, tmp)
        g = load(path)
        p = plan(g)
        ex_plan = Executor(g, p)
        ex_np = Executor(g, allocator="numpy", weights=ex_plan.weights)
        feeds = random_feeds(g)
        a = ex_plan.run(feeds)
        a = {k: v.copy() for k, v in a.items()}
        b = ex_np.run(feeds)
        assert all(np.array_equal(a[k], b[k]) for k in a), name
        ts = time_calls({"plan": lambda ex=ex_plan: ex.run(feeds),
                         "np": lambda ex=ex_np: ex.run(feeds)}, repeat=args.repeat, warmup=0)
        mp, mn = median(ts["plan"]), median(ts["np"])
        del ex_plan, ex_np, a, b
        if args.no_rss:
            rp = rn = {"base": 0, "peak": 0}
        else:
            rp = rss_of(path, "plan", args.threads)
            rn = rss_of(path, "numpy", args.threads)
        print(f"{name:<14}{len(g.ops):>5}{mib(p.arena_bytes):>11}{mib(p.lower_bound_bytes):>11}"
              f"{mib(p.naive_bytes):>11}{1 - p.arena_bytes / p.naive_bytes:>7.0%}"
              f"{p.plan_seconds * 1e3:>9.1f}{mp * 1e3:>11.1f}{mn * 1e3:>12.1f}{mp / mn:>7.2f}"
              f"{mib(rp['peak']):>10}{mib(rn['peak']):>9}"
              f"{mib(rp['peak'] - rp['base']):>11}{mib(rn['peak'] - rn['base']):>9}",
              flush=True)
    print("\narena/bound/naive: activation + scratch bytes; t: median ms per inference, "
          "same process, interleaved;\nratio = plan / np.empty; RSS: peak MiB of a fresh "
          "process per mode, high-water mark reset once model and weights were loaded\n"
          "(dRSS: growth of the peak over the RSS at that point, i.e. what inference adds).")


if __name__ == "__main__":
    main()
