"""Planner speed: 1,000 and 100,000 random buffers, time per strategy.

Lifetimes look like a model's (a start step, a mostly short life, 2% of
the buffers living up to a tenth of the run), sizes log-uniform from 64 B to 1 MiB.  For each
strategy: median wall time of ``plan_intervals`` (Python front end + C
core), the part spent in ``pa_plan_assign``, arena over the lower bound,
and the independent validator's time on the same plan.

    python benchmarks/bench_plan_speed.py [--repeat R] [--time-limit S]
    python -m pytest benchmarks/bench_plan_speed.py    # pytest-benchmark
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.dirname(HERE))  # the checkout, when run as a script

from pyarena.planning import plan_intervals, validate  # noqa: E402

STRATEGIES = ["first-fit", "greedy-by-size", "greedy-by-breadth", "best"]


def random_buffers(n, seed=0, long_frac=0.02, long_span=0.1):
    """``n`` intervals over ``n // 2`` steps: most live a few steps
    (geometric), ``long_frac`` of them up to ``long_span`` of the whole run
    (skip connections)."""
    rng = np.random.default_rng(seed)
    steps = max(n // 2, 1)
    first = rng.integers(0, steps, n)
    long_max = max(int(steps * long_span), 1)
    life = np.where(rng.random(n) < long_frac, rng.integers(0, long_max, n),
                    rng.geometric(0.3, n))
    last = np.minimum(first + life, steps)
    size = np.exp(rng.uniform(np.log(64), np.log(1 << 20), n)).astype(np.int64)
    return [(f"b{i}", int(s), int(f), int(l))
            for i, (s, f, l) in enumerate(zip(size, first, last))]


def measure(bufs, strategy, repeat, time_limit):
    walls, cs = [], []
    p = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = plan_intervals(bufs, strategy=strategy, alignment=64, time_limit=time_limit)
        walls.append(time.perf_counter() - t0)
        cs.append(p.c_seconds)
    t0 = time.perf_counter()
    problems = validate(p)
    vt = time.perf_counter() - t0
    assert problems == [], problems[:3]
    return statistics.median(walls), statistics.median(cs), p, vt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=5.0,
                    help="search budget of 'best' (default 5 s)")
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--long-frac", type=float, default=0.02,
                    help="fraction of long-lived buffers (default 0.02)")
    ap.add_argument("--long-span", type=float, default=0.1,
                    help="their longest life as a fraction of the run (default 0.1)")
    args = ap.parse_args(argv)
    print(f"{'buffers':>8} {'strategy':<18}{'wall ms':>10}{'C ms':>10}{'python ms':>10}"
          f"{'arena/lb':>10}{'validate ms':>12}")
    for n in (int(x) for x in args.sizes.split(",")):
        bufs = random_buffers(n, long_frac=args.long_frac, long_span=args.long_span)
        for s in STRATEGIES:
            rep = 1 if (s == "best" and n > 10000) else args.repeat
            wall, c, p, vt = measure(bufs, s, rep, args.time_limit)
            print(f"{n:>8} {s:<18}{wall * 1e3:>10.1f}{c * 1e3:>10.1f}"
                  f"{(wall - c) * 1e3:>10.1f}{p.arena_bytes / p.lower_bound_bytes:>10.3f}"
                  f"{vt * 1e3:>12.1f}")


try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    @pytest.mark.parametrize("n", [1000, 100000])
    @pytest.mark.parametrize("strategy", ["first-fit", "greedy-by-size",
                                          "greedy-by-breadth"])
    def test_plan_speed(benchmark, n, strategy):
        bufs = random_buffers(n)
        p = benchmark.pedantic(plan_intervals, args=(bufs,),
                               kwargs=dict(strategy=strategy, alignment=64),
                               rounds=3 if n <= 1000 else 1, iterations=1)
        assert p.arena_bytes >= p.lower_bound_bytes

    def test_validate_speed(benchmark):
        p = plan_intervals(random_buffers(100000), strategy="greedy-by-size")
        assert benchmark.pedantic(validate, args=(p,), rounds=1, iterations=1) == []


if __name__ == "__main__":
    main()
