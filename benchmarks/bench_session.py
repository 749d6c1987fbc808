"""InferenceSession over input shapes known only at run time: a model fed
several input widths in a cycle, next to onnxruntime on the same file.

For each width (one input-shape signature): the first run's time (import,
plan, bind and run; wall clock and the process's CPU time), the
median inference (``--clock``: the calling thread's CPU time by default)
of the cached signature through the session, the median
of a fixed-shape Executor of the same graph (session/fixed: that executor
has an arena of its own, so the ratio also carries where its memory
lies), of the session's own executor called directly on the session's
arena (session/own: the lookup alone), onnxruntime's median, and the
largest |difference| from onnxruntime.  Then the lookup's own cost per
cached call in microseconds: the session run with its executor's work
left out (a stand-in returning the same outputs), over the narrowest
width's inference time.  Then the session's arena next to the largest and the
summed per-signature lower bounds, and where a new signature's time goes:
the CPU time of each phase (shape inference, folding, building the graph,
fusion, scratch sizes, planning, kernels + binding; "other": the model
copy, input binding, initializer lookup, ordering, checks), medians over
``--sessions`` fresh sessions fed the widths after the first (the first
signature also parses the file; later ones reuse it).

    python benchmarks/bench_session.py --model rec.onnx --input x --dims 1,3,48,W \\
        --widths 160,240,320,480,640 [--repeat 7]

``--against DIR`` (another checkout of pyarena, built in place: ``python
setup.py build_ext --inplace``) times only the new signatures, side by
side: ``--rounds`` pairs of processes, this checkout's and DIR's in
alternating order, each a fresh session fed ``--widths`` ``--sessions``
times (widths shifted by 8 per session, so every signature is new), the
CPU time of each new signature after the first; medians and their ratio.

``--threads N``: one session shared by N threads against one thread
(onnxruntime's too, one intra-op thread each): ``--calls`` runs of the
first width's signature, split between the threads, a new input each;
``--repeat`` rounds of one thread then N, the median wall time per run
of each, the throughput of N threads over one's, and the session's
activation blocks (one per thread).  Every result is checked against a
single-threaded run of the same input.

Without --model: a small conv + reshape model made in code with a
symbolic width (nothing downloaded).  One thread everywhere (but for
``--threads``).
"""
import argparse
import os
import sys
import time

import numpy as np

from scratch import scratch_dir

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def builtin_model(path):
    from importers.test_session import _model
    return _model(path)


def lookup_cost(s, feeds, calls=20000):
    """Seconds per cached ``s.run`` with the executor's work left out: the
    session's entry for these feeds is given a stand-in that returns the
    outputs of one real run, then put back."""
    ctx = s._context()
    signature = next(reversed(s._plans))
    bound = ctx.executors[signature]
    real, last = bound[1], ctx.last
    out = real.run(feeds)

    class StandIn:
        def run(self, _feeds):
            return out
    ctx.executors[signature] = (bound[0], StandIn())
    try:
        s.run(None, feeds, copy=False)
        t0 = time.process_time()
        for _ in range(calls):
            s.run(None, feeds, copy=False)
        return (time.process_time() - t0) / calls
    finally:
        ctx.executors[signature], ctx.last = bound, last


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--input", default="x")
    ap.add_argument("--dims", default="1,8,24,W", help="input dims, W = the width")
    ap.add_argument("--widths", default="16,24,32,48,64")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sessions", type=int, default=3,
                    help="fresh sessions timed phase by phase")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="inference medians in the calling thread's CPU time (default: "
                         "steady on a shared machine; every runtime runs one thread) "
                         "or wall clock")
    ap.add_argument("--layout", default="auto", choices=("auto", "nhwc", "keep"),
                    help="the sessions' NHWC pass (InferenceSession(layout=))")
    ap.add_argument("--phases-only", action="store_true",
                    help="only the time of a new signature, phase by phase")
    ap.add_argument("--against", default=None, metavar="DIR",
                    help="another pyarena checkout: new signatures' CPU ms side by side")
    ap.add_argument("--rounds", type=int, default=5, help="process pairs for --against")
    ap.add_argument("--threads", type=int, default=None, metavar="N",
                    help="only runs of one signature from N threads sharing a session "
                         "against one thread")
    ap.add_argument("--calls", type=int, default=400, help="runs for --threads")
    ap.add_argument("--child-signatures", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_signatures:
        return child_signatures(args)
    if args.threads:
        return shared_by_threads(args)
    if args.against:
        return side_by_side(args)
    import onnxruntime as ort
    from pyarena import InferenceSession
    from pyarena.runtime import Executor, median, set_blas_threads, time_calls
    set_blas_threads(1)
    path = args.model or builtin_model(os.path.join(scratch_dir(), "dyn.onnx"))
    widths = [int(w) for w in args.widths.split(",")]
    if args.phases_only:
        return phases(path, args, widths)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s = InferenceSession(path, layout=args.layout)
    print(f"{'width':>6}{'first run ms':>14}{'cpu ms':>8}{'session ms':>12}"
          f"{'fixed ms':>10}"
          f"{'ort ms':>9}{'session/fixed':>15}{'session/own':>13}{'session/ort':>13}"
          f"{'max|diff|':>11}{'arena KiB':>11}{'bound KiB':>11}")
    bounds = []
    for w in widths:
        dims = [w if d == "W" else int(d) for d in args.dims.split(",")]
        x = np.random.default_rng(w).standard_normal(dims).astype(np.float32)
        feeds = {args.input: x}
        t0, c0 = time.perf_counter(), time.process_time()
        s.run(None, feeds, copy=False)
        first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
        entry = s._plans[next(reversed(s._plans))]
        g, p = entry.graph, entry.plan
        fixed = Executor(g, p)
        bounds.append(p.lower_bound_bytes)
        own = s._last
        ts = time_calls({"session": lambda: s.run(None, feeds, copy=False),
                         "fixed": lambda: fixed.run(feeds),
                         "own": lambda: own.run(feeds),
                         "ort": lambda: ref.run(None, feeds)}, repeat=args.repeat, warmup=1,
                        clock=args.clock)
        m = {k: median(v) for k, v in ts.items()}
        ours = s.run(None, feeds)
        theirs = ref.run(None, feeds)
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
        print(f"{w:>6}{first * 1e3:>14.1f}{first_cpu * 1e3:>8.1f}{m['session'] * 1e3:>12.2f}"
              f"{m['fixed'] * 1e3:>10.2f}"
              f"{m['ort'] * 1e3:>9.2f}{m['session'] / m['fixed']:>15.3f}"
              f"{m['session'] / m['own']:>13.3f}"
              f"{m['session'] / m['ort']:>13.2f}{diff:>11.1e}{p.arena_bytes / 1024:>11.1f}"
              f"{p.lower_bound_bytes / 1024:>11.1f}", flush=True)
        if w == widths[0]:
            lookup = lookup_cost(s, feeds)
            narrowest = m["session"]
        del fixed
    print(f"\nthe lookup of a cached signature: {lookup * 1e6:.1f} us per run = "
          f"{lookup / narrowest * 100:.3f} % of the narrowest width's inference")
    s = InferenceSession(path, layout=args.layout)  # a session alone (no comparison executors)
    for w in widths + widths:            # the cycle twice: new, then cached signatures
        dims = [w if d == "W" else int(d) for d in args.dims.split(",")]
        s.run(None, {args.input: np.zeros(dims, np.float32)})
    info = s.memory_info()
    print(f"\nafter the cycle: {info['plans']} plans, session arena "
          f"{info['arena_bytes'] / 1024:.1f} KiB = {info['arena_bytes'] / max(bounds):.3f} x "
          f"the largest lower bound ({max(bounds) / 1024:.1f} KiB; their sum "
          f"{sum(bounds) / 1024:.1f} KiB); weights {info['weights_bytes'] / 1024:.1f} KiB")
    phases(path, args, widths)


def shared_by_threads(args):
    """``--threads N`` (module docstring): wall ms per run and throughput,
    one thread against N sharing one session, pyarena and onnxruntime;
    ``--repeat`` rounds, one thread and N threads in turn in each, medians."""
    import threading

    import onnxruntime as ort
    from pyarena import InferenceSession
    from pyarena.runtime import median, set_blas_threads
    set_blas_threads(1)
    path = args.model or builtin_model(os.path.join(scratch_dir(), "dyn.onnx"))
    dims = _dims(args, int(args.widths.split(",")[0]))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(dims).astype(np.float32) for _ in range(args.calls)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    s = InferenceSession(path, layout=args.layout)
    want = [s.run(None, {args.input: x})[0] for x in xs]      # one thread: the reference
    runs = {"pyarena": lambda x: s.run(None, {args.input: x})[0],
            "onnxruntime": lambda x: ref.run(None, {args.input: x})[0]}
    blocks, wrong = {}, [0]

    def timed(name, n):
        run = runs[name]
        done = threading.Barrier(n + 1)     # the workers wait there, alive

        def work(t):
            for i in range(t, len(xs), n):
                y = run(xs[i])
                if name == "pyarena" and not np.array_equal(y, want[i]):
                    wrong[0] += 1
            done.wait()
        threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        while done.n_waiting < n:
            time.sleep(1e-4)
        spent = time.perf_counter() - t0
        if name == "pyarena":
            blocks[n] = s.memory_info()
        done.wait()
        for t in threads:
            t.join()
        return spent / len(xs)
    counts = (1, args.threads)
    ms = {(name, n): [] for name in runs for n in counts}
    for name in runs:
        timed(name, 1)                      # warm-up: every thread's first run
        timed(name, args.threads)
    for _ in range(args.repeat):
        for name in runs:
            for n in counts:
                ms[name, n].append(timed(name, n) * 1e3)
    print(f"{args.calls} runs of {dims}, {args.repeat} rounds (medians), every pyarena "
          f"result checked: {wrong[0]} wrong")
    print(f"{'runtime':<12}{'threads':>8}{'ms per run':>12}{'throughput':>12}")
    for name in runs:
        one = median(ms[name, 1])
        for n in counts:
            m = median(ms[name, n])
            print(f"{name:<12}{n:>8}{m:>12.3f}{one / m:>11.2f}x")
    for n, info in blocks.items():
        print(f"session, {n} worker thread(s) alive: {info['threads']} activation blocks "
              f"(the main thread's too), {info['arena_bytes'] / 1024:.1f} KiB in all")


def _dims(args, w):
    return [w if d == "W" else int(d) for d in args.dims.split(",")]


def child_signatures(args):
    """(In a child process) a JSON list: the CPU ms of each new signature
    (``InferenceSession._executor``: import or retarget, kernels, plan,
    binding; not the inference) after each session's first."""
    import gc
    import json
    from pyarena import InferenceSession
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    path = args.model or builtin_model(os.path.join(scratch_dir(), "dyn.onnx"))
    widths = [int(w) for w in args.widths.split(",")]
    out = []
    for k in range(args.sessions):
        s = InferenceSession(path, max_plans=len(widths), layout=args.layout)
        # (a checkout before per-thread contexts: _executor(signature))
        at = (s._context(),) if hasattr(s, "_context") else ()
        for i, w in enumerate(widths):
            sig = ((args.input, tuple(_dims(args, w + 8 * k)), None),)
            gc.collect()
            gc.disable()        # as InferenceSession.run does around it
            c0 = time.process_time()
            s._executor(*at, sig)
            spent = time.process_time() - c0
            gc.enable()
            if i:
                out.append(spent * 1e3)
    print(json.dumps(out))


def side_by_side(args):
    """New signatures' CPU ms, this checkout against ``--against``: process
    pairs in alternating order, medians and their ratio."""
    import json
    import subprocess
    here = os.path.dirname(HERE)
    trees = {"this": here, "against": os.path.abspath(args.against)}
    cmd = [sys.executable, os.path.abspath(__file__), "--child-signatures",
           "--input", args.input, "--dims", args.dims, "--widths", args.widths,
           "--sessions", str(args.sessions)] + (["--model", args.model] if args.model else [])
    import statistics
    got = {k: [] for k in trees}
    pairs = []
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        pair = {}
        for name in (("this", "against") if r % 2 else ("against", "this")):
            env = dict(os.environ, PYTHONPATH=trees[name])
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            pair[name] = json.loads(res.stdout.strip().splitlines()[-1])
            got[name] += pair[name]
        pairs.append(statistics.median(pair["this"]) / statistics.median(pair["against"]))
    m = {k: statistics.median(v) for k, v in got.items()}
    print(f"new signatures, CPU ms per signature (medians of {len(got['this'])} each; "
          f"{args.rounds} process pairs in alternating order; load average "
          f"{load0:.1f} -> {os.getloadavg()[0]:.1f}):")
    for k in trees:
        print(f"  {k:<8} {m[k]:8.2f}   ({trees[k]})")
    print(f"  this / against: {m['this'] / m['against']:.3f}  (the pairs' ratios: "
          f"{', '.join(f'{x:.2f}' for x in pairs)})")


#: (module, object, attribute, phase): what a new signature runs, timed
#: by wrapping (a module or attribute missing in this version is skipped;
#: a signature retargeted from the last graph (importers/retarget.py) runs the
#: prepared shape rules, Graph.retargeted and build_kernels instead of the
#: import's inference, folding, building, fusion and scratch sizing)
PHASES = [("pyarena.importers.onnx_inference", "ShapeInference", "infer", "shape inference"),
          ("pyarena.importers.onnx_constants", "ConstantFolding", "fold_pass", "folding"),
          ("pyarena.importers.onnx_build", "GraphBuild", "build", "graph"),
          # the same steps before they had modules of their own
          ("pyarena.importers.onnx", "_OnnxImport", "infer", "shape inference"),
          ("pyarena.importers.onnx", "_OnnxImport", "fold_pass", "folding"),
          ("pyarena.importers.onnx", "_OnnxImport", "build", "graph"),
          ("pyarena.importers", None, "fuse", "fusion"),
          ("pyarena.importers", None, "set_scratch", "scratch sizes"),
          ("pyarena.importers.retarget", "ShapeProgram", "run", "shape inference"),
          ("pyarena.graph.graph", "Graph", "resized", "graph"),
          ("pyarena.importers.session", None, "build_kernels", "scratch sizes"),
          ("pyarena.importers.session", None, "plan_in_slack", "plan"),
          ("pyarena.importers.session", None, "Executor", "kernels + binding"),
          ("pyarena.importers.session", "InferenceSession", "_executor", "total")]


def phases(path, args, widths):
    """Median CPU ms of each phase of a new signature (see PHASES)."""
    import collections
    import importlib
    from pyarena import InferenceSession
    from pyarena.runtime import median
    spent = collections.defaultdict(float)

    active = set()

    def timed(fn, phase):
        def wrapper(*a, **k):
            if phase in active:         # a nested call (an If branch): counted once
                return fn(*a, **k)
            active.add(phase)
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[phase] += time.process_time() - c0
                active.discard(phase)
        return wrapper
    for mod, obj, attr, phase in PHASES:
        try:
            owner = importlib.import_module(mod)
        except ImportError:             # a module this version does not have
            continue
        owner = getattr(owner, obj, None) if obj else owner
        if hasattr(owner, attr):
            setattr(owner, attr, timed(getattr(owner, attr), phase))
    rounds = collections.defaultdict(list)
    for _ in range(args.sessions):
        s = InferenceSession(path, layout=args.layout)
        for k, w in enumerate(widths):
            dims = [w if d == "W" else int(d) for d in args.dims.split(",")]
            spent.clear()
            s.run(None, {args.input: np.zeros(dims, np.float32)})
            if k:                       # the first signature also parses the file
                for phase, sec in spent.items():
                    rounds[phase].append(sec)
    ops = len(s._plans[next(reversed(s._plans))].graph.ops)
    total = median(rounds.pop("total"))
    print(f"\na new signature, CPU ms (medians of {len(widths) - 1} widths x "
          f"{args.sessions} sessions; {ops} ops after fusion):")
    for phase, secs in rounds.items():
        print(f"  {phase:<18}{median(secs) * 1e3:>8.2f}")
    rest = total - sum(median(v) for v in rounds.values())
    print(f"  {'other':<18}{rest * 1e3:>8.2f}\n  {'total':<18}{total * 1e3:>8.2f}")


if __name__ == "__main__":
    main()
