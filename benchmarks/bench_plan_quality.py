"""Plan quality: arena size per strategy against the naive sum and the
lower bound, on real CNN topologies (built in code with real shapes and
the kernels' own scratch rules, ``pyarena.runtime.models``), any
ONNX/TFLite models given on the command line, the real architectures the
``onnx`` package ships (when the onnx extra is installed), and the
MiniMalloc "challenging" interval sets when present ($BENCH_DIR, default
../shared/bench/minimalloc-challenging next to the checkout, as for
``make -C csrc bench-plan``).

    python benchmarks/bench_plan_quality.py [--time-limit S] [MODEL.onnx ...]
    python -m pytest benchmarks/bench_plan_quality.py     # pytest-benchmark

Every plan is checked by the independent validator before it is counted.
"""
import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout, when run as a script

from pyarena import load_model  # noqa: E402
from pyarena.planning import load_intervals_csv, plan, plan_intervals, validate  # noqa: E402
from pyarena.runtime.models import MODELS as ALL  # noqa: E402

STRATEGIES = ["first-fit", "greedy-by-size", "greedy-by-breadth", "best"]
MINIMALLOC = os.environ.get("BENCH_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(HERE)), "shared", "bench", "minimalloc-challenging")


def _mib(n):
    return f"{n / 2**20:.2f}"


def row_for_graph(name, graph, time_limit):
    res = {}
    for s in STRATEGIES:
        p = plan(graph, strategy=s, time_limit=time_limit)
        problems = validate(p)
        if problems:
            raise AssertionError(f"{name}/{s}: {problems[:3]}")
        res[s] = p
    off = plan(graph, strategy="best", inplace=False, time_limit=time_limit)
    assert validate(off) == []
    best = res["best"]
    return {"model": name, "ops": best.num_ops, "bufs": len(best.buffers),
            "naive": best.naive_bytes, "lb": best.lower_bound_bytes,
            **{s: res[s].arena_bytes for s in STRATEGIES},
            "no_inplace": off.arena_bytes, "secs": best.plan_seconds,
            "optimal": best.optimal, "unit": "MiB"}


def row_for_csv(path, time_limit):
    bufs = load_intervals_csv(path)
    res = {}
    for s in STRATEGIES:
        p = plan_intervals(bufs, strategy=s, alignment=1, time_limit=time_limit)
        assert validate(p) == []
        res[s] = p
    best = res["best"]
    return {"model": "mm:" + os.path.basename(path).split(".")[0], "ops": best.num_ops,
            "bufs": len(bufs), "naive": best.naive_bytes, "lb": best.lower_bound_bytes,
            **{s: res[s].arena_bytes for s in STRATEGIES}, "no_inplace": None,
            "secs": best.plan_seconds, "optimal": best.optimal, "unit": "MiB"}


def print_table(rows, out=sys.stdout):
    hdr = (f"{'model':<16}{'ops':>6}{'bufs':>6}{'naive':>9}{'lower':>9}{'ff':>9}"
           f"{'gbs':>9}{'gbb':>9}{'best':>9}{'no-inpl':>9}  {'ff/lb':>7}{'gbs/lb':>7}"
           f"{'best/lb':>8}{'secs':>7}")
    print("arena sizes in MiB; x/lb = arena over the lower bound in percent", file=out)
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in rows:
        lb = r["lb"] or 1
        pct = lambda v: f"{(v / lb - 1) * 100:+.1f}%"  # noqa: E731
        print(f"{r['model']:<16}{r['ops']:>6}{r['bufs']:>6}{_mib(r['naive']):>9}"
              f"{_mib(r['lb']):>9}{_mib(r['first-fit']):>9}{_mib(r['greedy-by-size']):>9}"
              f"{_mib(r['greedy-by-breadth']):>9}{_mib(r['best']):>9}"
              f"{_mib(r['no_inplace']) if r['no_inplace'] is not None else '-':>9}  "
              f"{pct(r['first-fit']):>7}{pct(r['greedy-by-size']):>7}{pct(r['best']):>8}"
              f"{r['secs']:>7.2f}", file=out)


def shipped_onnx_models():
    """The real model architectures the ``onnx`` package ships as test data
    (``backend/test/data/light/light_*.onnx``), when onnx is installed."""
    try:
        import onnx
    except ImportError:
        return []
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(d, "light_*.onnx")))


def collect(time_limit=5.0, models=()):
    rows = [row_for_graph(name, build(), time_limit) for name, build in ALL.items()]
    for path in list(models) + shipped_onnx_models():
        name = os.path.basename(path).replace("light_", "onnx:").replace(".onnx", "")
        rows.append(row_for_graph(name, load_model(path), time_limit))
    for path in sorted(glob.glob(os.path.join(MINIMALLOC, "*.csv"))):
        rows.append(row_for_csv(path, time_limit))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", help="extra .json/.onnx/.tflite graphs")
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args(argv)
    print_table(collect(args.time_limit, args.models))


# -- pytest-benchmark ---------------------------------------------------------
try:
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

if pytest is not None:
    @pytest.mark.parametrize("model", sorted(ALL))
    @pytest.mark.parametrize("strategy", STRATEGIES)
    def test_plan_quality(benchmark, model, strategy):
        g = ALL[model]()
        p = benchmark(plan, g, strategy=strategy, time_limit=2.0)
        assert validate(p) == []
        benchmark.extra_info.update(arena=p.arena_bytes, lower_bound=p.lower_bound_bytes,
                                    naive=p.naive_bytes,
                                    over_bound=p.arena_bytes / p.lower_bound_bytes - 1)


if __name__ == "__main__":
    main()
