"""Sequence-length dynamic sessions: one plan per bucket against one per
length.

A 4-layer, hidden-256 encoder built in code (tests/helpers/encoder_models.py:
MatMul / Softmax attention with 4 heads, LayerNormalization, a ReLU
feed-forward of 1024; dynamic batch and sequence) is fed ``--calls``
inputs of batch 1 and random sequence lengths 1..``--max-len`` (seeded),
the same lengths to each of

* ``InferenceSession(path)``: a plan per length, ``max_plans`` (8) of them
  kept; and with ``max_plans=16``, as many as the bucketed session keeps
  bound;
* ``InferenceSession(path, buckets="pow2")``: a plan per power-of-two
  bucket, the last ``max_shapes`` (16) lengths kept bound;
* the same with ``buckets="pow2/4"`` (four buckets per octave);
* onnxruntime, one thread.

Printed per runtime: plans made per 1,000 calls (``memory_info()["replans"]``
scaled), the median and mean CPU time per call (new lengths included: the
point; each input is run by every runtime in turn), the activation arena
and the largest |difference| from onnxruntime; and the bucketed sessions'
outputs are checked bit for bit against the unbucketed one's.  One thread
everywhere.

    python benchmarks/bench_buckets.py [--calls 1000] [--max-len 512] [--seed 0]

``--phases``: instead, where a new length's time goes, with and without
buckets: the CPU ms per new length of retargeting the graph, building its
kernels, planning (or rebinding the bucket's plan) and making the executor,
over 120 new lengths after every bucket was planned.
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


def timed(runs, xs):
    """(outputs, seconds per call) of each of ``runs`` over the inputs
    ``xs``, taken in turn for each input (so that the machine's other load
    falls on all alike); CPU time of the process (one thread everywhere)."""
    outs = [[] for _ in runs]
    times = np.zeros((len(runs), len(xs)))
    for i, x in enumerate(xs):
        for j, run in enumerate(runs):
            t0 = time.process_time()
            outs[j].append(run(x))
            times[j, i] = time.process_time() - t0
    return outs, times


def phases(path, hidden):
    """CPU ms per new length by phase (module docstring), per session kind."""
    import collections

    import pyarena.importers.session as session
    import pyarena.importers.session_buckets as buckets
    from pyarena import InferenceSession
    spent = collections.Counter()

    def timer(module, name):
        f = getattr(module, name)

        def timed_call(*a, **kw):
            t0 = time.process_time()
            try:
                return f(*a, **kw)
            finally:
                spent[name] += time.process_time() - t0
        setattr(module, name, timed_call)
    for name in ("retarget", "build_kernels", "plan_to_run", "Executor"):
        timer(session, name)
    timer(buckets, "rebind")
    lengths = np.random.default_rng(1).permutation(np.arange(1, 513))[:120]
    print("CPU ms per new length, by phase (120 new lengths, every bucket planned before)")
    for label, kw in (("per length", {}), ("buckets=pow2", {"buckets": "pow2"})):
        s = InferenceSession(path, **kw)
        for n in (512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
            s.run(None, {"x": np.zeros((1, n, hidden), np.float32)})
        spent.clear()
        for n in lengths:
            s.run(None, {"x": np.zeros((1, int(n), hidden), np.float32)})
        print(f"  {label:<13}" + "  ".join(f"{k} {v / len(lengths) * 1e3:.2f}"
                                           for k, v in spent.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--phases", action="store_true",
                    help="only where a new length's time goes, by phase")
    args = ap.parse_args()
    import onnxruntime as ort
    from helpers.encoder_models import encoder, save
    from pyarena import InferenceSession
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    path = save(encoder(layers=args.layers, hidden=args.hidden, heads=4,
                        ffn=4 * args.hidden), os.path.join(scratch_dir(), "encoder.onnx"))
    if args.phases:
        return phases(path, args.hidden)
    rng = np.random.default_rng(args.seed)
    lengths = rng.integers(1, args.max_len + 1, args.calls)
    xs = [rng.standard_normal((1, int(n), args.hidden)).astype(np.float32) for n in lengths]
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    configs = (("per length", {}), ("per len, 16", {"max_plans": 16}),
               ("buckets=pow2", {"buckets": "pow2"}), ("pow2/4", {"buckets": "pow2/4"}))
    sessions = [InferenceSession(path, **kw) for _, kw in configs]
    runs = [lambda x, s=s: s.run(None, {"x": x})[0] for s in sessions]
    outs, times = timed(runs + [lambda x: ref.run(None, {"x": x})[0]], xs)
    want, rows, got = outs[-1], [], {}
    for (name, _), s, out, t in zip(configs, sessions, outs, times):
        got[name] = out
        info = s.memory_info()
        diff = max(float(np.abs(a - b).max()) for a, b in zip(out, want))
        rows.append((name, info["replans"] * 1000 / args.calls, t, info["arena_bytes"], diff,
                     info.get("exact_plans", "-")))
    rows.append(("onnxruntime", "-", times[-1], "-", 0.0, "-"))
    same = all(np.array_equal(a, b) for name in ("buckets=pow2", "pow2/4")
               for a, b in zip(got["per length"], got[name]))
    print(f"{args.calls} calls, batch 1, lengths 1..{args.max_len} (seed {args.seed}), "
          f"{len(set(lengths.tolist()))} distinct; encoder {args.layers} layers, hidden "
          f"{args.hidden}; one thread")
    print(f"{'runtime':<14}{'plans/1000':>11}{'median ms':>11}{'mean ms':>9}"
          f"{'arena KiB':>11}{'max|diff|':>11}{'exact':>7}")
    for name, replans, t, arena, diff, exact in rows:
        r = f"{replans:.0f}" if not isinstance(replans, str) else replans
        a = f"{arena / 1024:,.0f}" if not isinstance(arena, str) else arena
        print(f"{name:<14}{r:>11}{np.median(t) * 1e3:>11.2f}{t.mean() * 1e3:>9.2f}"
              f"{a:>11}{diff:>11.1e}{exact!s:>7}")
    print(f"bucketed outputs bit-identical to per-length: {same}")


if __name__ == "__main__":
    main()
