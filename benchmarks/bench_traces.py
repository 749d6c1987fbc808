"""Traces: the recorder's overhead, and the replayer against an independent one.

    python benchmarks/bench_traces.py [--repeat 9]

1. Recording overhead: NumPy allocation calls (``np.empty`` of a few
   sizes, a ufunc with a fresh output, ``np.concatenate``) with and without
   ``pyarena.trace.record`` around them, interleaved in one process;
   medians and the ratio (the goal: at most 2x).
2. Replay against an independent replayer: ``benchmarks/c/bench_pool``
   (written separately, for the pool benchmark) dumps its synthetic traces
   (log-uniform, MobileNetV2, ResNet-50, dynamic shapes); each is converted
   to the trace format and replayed by ``pyarena alloc-bench``'s replayer.
   Both touch every page; the table gives each one's ns per pair and
   footprint for glibc and the pool, and the peak live bytes each computes
   (which must be equal).  Needs ``make -C csrc && make -C benchmarks/c``.
3. The whole report on a 1M-event trace (500,000 allocations, log-uniform
   64 B - 1 MiB, random frees, a step mark every 1,000 events): wall time
   of ``pyarena alloc-bench`` in a subprocess, every allocator, the plan
   included (the goal: under a minute).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import timeit

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # the checkout, when run as a script

from pyarena import trace  # noqa: E402
from pyarena.memory.replay import replay  # noqa: E402


def overhead(repeat, number=20000):
    a = np.ones(64, np.float32)
    cases = {"np.empty (64,)": lambda: np.empty(64, np.float32),
             "np.empty (1,64,56,56)": lambda: np.empty((1, 64, 56, 56), np.float32),
             "a + 1.0 (fresh output)": lambda: a + 1.0,
             "np.concatenate": lambda: np.concatenate([a, a])}
    print("recording overhead (ns per call, median of interleaved repeats)")
    print(f"{'call':<26}{'plain':>10}{'recorded':>11}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in cases.items():
            plain, rec = [], []
            for r in range(repeat):
                plain.append(timeit.timeit(fn, number=number) / number * 1e9)
                with trace.record(os.path.join(tmp, f"t{r}.trace")):
                    rec.append(timeit.timeit(fn, number=number) / number * 1e9)
            p, q = statistics.median(plain), statistics.median(rec)
            print(f"{name:<26}{p:>10.0f}{q:>11.0f}{q / p:>8.2f}")


def convert(csv_path, out_path):
    """bench_pool's CSV (op,slot,size) -> the trace format."""
    with open(csv_path) as src, open(out_path, "w") as dst:
        dst.write(f"# {trace.FORMAT}\n# program: bench_pool {os.path.basename(csv_path)}\n")
        next(src)
        for line in src:
            op, slot, size = line.strip().split(",")
            dst.write(f"a {slot} {size}\n" if op == "a" else f"f {slot}\n")


def bench_pool_rows(binary, tmp):
    """{trace: {allocator: (ns/pair, footprint, peak_live)}} from bench_pool."""
    r = subprocess.run([binary, "--quick", "--touch", "pages", "--allocs",
                        "glibc,pool-hybrid", "--dump", tmp], capture_output=True, text=True,
                       check=True)
    rows, name, peak = {}, None, None
    for line in r.stdout.splitlines():
        if line.startswith("### "):
            name = line[4:].strip()
        m = re.search(r"peak live ([\d.]+) MiB", line)
        if m:
            peak = float(m.group(1))
        m = re.match(r"\| (glibc|pool-hybrid) \| ([\d.]+) \|[^|]*\|[^|]*\| ([\d.]+) \|", line)
        if m and name:
            rows.setdefault(name, {})[m.group(1)] = (float(m.group(2)), float(m.group(3)), peak)
    return rows


def independent(repeat):
    binary = os.path.join(HERE, "c", "build", "bench_pool")
    if not os.path.exists(binary):
        print("\n(benchmarks/c/build/bench_pool not built: make -C csrc && make -C "
              "benchmarks/c)")
        return
    print("\nreplayer vs bench_pool (independent), same traces, every page touched")
    print(f"{'trace':<20}{'allocator':<13}{'bench_pool ns':>14}{'ours ns':>9}{'ratio':>7}"
          f"{'bench_pool fp':>15}{'ours fp':>9}{'peak live MiB (both)':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        ref = bench_pool_rows(binary, tmp)
        for csv in sorted(f for f in os.listdir(tmp) if f.endswith(".csv")):
            name = csv[:-4]
            path = os.path.join(tmp, name + ".trace")
            convert(os.path.join(tmp, csv), path)
            t = trace.read_trace(path)
            t.to_binary(path + ".bin")
            for alloc, ours_name in (("glibc", "glibc"), ("pool-hybrid", "pool-hybrid")):
                theirs = next((v[alloc] for k, v in ref.items()
                               if k.startswith(name.split("-")[0]) and alloc in v), None)
                r = replay(path + ".bin", ours_name, t.peak_live_bytes, repeat=repeat)
                if theirs is None or "skipped" in r:
                    continue
                print(f"{name:<20}{alloc:<13}{theirs[0]:>14.1f}{r['ns_per_pair']:>9.1f}"
                      f"{r['ns_per_pair'] / theirs[0]:>7.2f}{theirs[1]:>15.3f}"
                      f"{r['footprint']:>9.3f}"
                      f"{theirs[2]:>11.1f} / {t.peak_live_bytes / 2**20:.1f}")


def big_report(events=1_000_000, repeat=3):
    rng = np.random.default_rng(7)
    sizes = np.exp(rng.uniform(np.log(64), np.log(2**20), events // 2)).astype(np.int64)
    lines, live, nxt = [], [], 0
    for i, size in enumerate(sizes):
        if live and (len(live) > 64 or rng.random() < 0.5):
            j = int(rng.integers(len(live)))
            live[j], live[-1] = live[-1], live[j]
            lines.append(f"f {live.pop()}")
        lines.append(f"a {nxt} {size}")
        live.append(nxt)
        nxt += 1
        if i % 500 == 499:
            lines.append("s")
    lines += [f"f {b}" for b in live]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.trace.gz")
        import gzip
        with gzip.open(path, "wt") as f:
            f.write("# pyarena-trace/1\n" + "\n".join(lines) + "\n")
        n = sum(1 for ln in lines if ln != "s")
        t0 = timeit.default_timer()
        subprocess.run([sys.executable, "-m", "pyarena", "alloc-bench", path,
                        "--repeat", str(repeat), "--json", os.path.join(tmp, "r.json")],
                       check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        wall = timeit.default_timer() - t0
    print(f"\nwhole report, {n:,} events (+ steps), every allocator, --repeat {repeat}: "
          f"{wall:.1f} s wall (goal: under 60 s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    overhead(args.repeat)
    independent(max(3, args.repeat // 2))
    big_report()
