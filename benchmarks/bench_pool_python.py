"""Pool front-end speed: ``pool.empty`` and ``np.empty`` under
``numpy_allocator(pool)`` against plain ``np.empty``, side by side in one run.

Each case allocates an array and drops it at once (the steady state of an
inference loop: the block comes back from the pool's cache).  Prints the
median time per call over several repeats and the ratio to ``np.empty``
measured in the same run.

    python benchmarks/bench_pool_python.py [--repeat 7] [--number N]
"""
import argparse
import contextlib
import os
import statistics
import sys
import timeit

import numpy as np

try:
    import pyarena
except ImportError:  # run from a source checkout with an in-place build
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pyarena

CASES = [("(64,) float32", (64,), np.float32),
         ("16 MiB float32", (4 << 20,), np.float32)]


def bench_interleaved(fns, number, repeat):
    """Median seconds per call of each fn; the repeats of all fns are
    interleaved so machine noise hits them alike."""
    fns = {k: v if isinstance(v, tuple) else (v, contextlib.nullcontext())
           for k, v in fns.items()}
    for fn, ctx in fns.values():
        with ctx:
            fn()  # warm up (first chunk, caches)
    samples = {name: [] for name in fns}
    for _ in range(repeat):
        for name, (fn, ctx) in fns.items():
            with ctx:  # e.g. numpy_allocator(pool), entered outside the timing
                samples[name].append(timeit.timeit(fn, number=number) / number)
    return {name: statistics.median(v) for name, v in samples.items()}


def run(repeat, number):
    pool = pyarena.Pool()
    alloc = pyarena.numpy_allocator(pool)
    rows = []
    for label, shape, dt in CASES:
        n = number if shape[0] < 1 << 16 else max(1, number // 50)
        dt = np.dtype(dt)
        pempty, pzeros = pool.empty, pool.zeros

        def np_empty():
            return np.empty(shape, dt)

        def np_empty_routed():
            # entered once outside the timing: only the allocation is timed
            return np.empty(shape, dt)

        def pool_empty():
            return pempty(shape, dt)

        def pool_zeros():
            return pzeros(shape, dt)

        def np_zeros():
            return np.zeros(shape, dt)

        def with_each_call():
            with alloc:
                return np.empty(shape, dt)

        plain = bench_interleaved({"np.empty": np_empty, "pool.empty": pool_empty,
                                   "routed": (np_empty_routed, alloc),
                                   "np.zeros": np_zeros, "pool.zeros": pool_zeros,
                                   "with numpy_allocator(pool): np.empty (per call)":
                                   with_each_call}, n, repeat)
        with alloc:
            before = alloc.allocations
            np_empty_routed()
            assert alloc.allocations == before + 1  # really routed
        base, zbase = plain["np.empty"], plain["np.zeros"]
        order = [("np.empty", plain["np.empty"]), ("pool.empty", plain["pool.empty"]),
                 ("np.empty in numpy_allocator(pool)", plain["routed"]),
                 ("with numpy_allocator(pool): np.empty (per call)",
                  plain["with numpy_allocator(pool): np.empty (per call)"]),
                 ("np.zeros", zbase), ("pool.zeros", plain["pool.zeros"])]
        for name, t in order:
            ref = zbase if "zeros" in name else base
            rows.append((label, name, t, t / ref))
    assert pool.check() == 0
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--number", type=int, default=20000)
    args = ap.parse_args(argv)
    rows = run(args.repeat, args.number)
    w = max(len(r[1]) for r in rows)
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}; "
          f"median of {args.repeat} interleaved repeats; ratio vs np.empty "
          f"(zeros: vs np.zeros) from the same run")
    print(f"{'case':<16} {'call':<{w}} {'time/call':>12} {'ratio':>7}")
    for label, name, t, ratio in rows:
        unit = f"{t * 1e9:9.0f} ns" if t < 1e-4 else f"{t * 1e6:9.1f} us"
        print(f"{label:<16} {name:<{w}} {unit:>12} {ratio:7.2f}")


if __name__ == "__main__":
    main()
