"""Pool front-end speed: ``pool.empty`` and ``np.empty`` under
``numpy_allocator(pool)`` against plain ``np.empty``, side by side in one run.

Each case allocates an array and drops it at once (the steady state of an
inference loop: the block comes back from the pool's cache).  Prints the
median time per call over several repeats and the ratio to ``np.empty``
measured in the same run.

    python benchmarks/bench_pool_python.py [--repeat 7] [--number N]
"""
import argparse
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


def bench(fn, number, repeat):
    fn()  # warm up (first chunk, caches)
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(t / number for t in times)


def run(repeat, number):
    pool = pyarena.Pool()
    alloc = pyarena.numpy_allocator(pool)
    rows = []
    for label, shape, dt in CASES:
        n = number if shape[0] < 1 << 16 else max(1, number // 50)
        dt = np.dtype(dt)
        pempty = pool.empty

        def np_empty():
            return np.empty(shape, dt)

        def pool_empty():
            return pempty(shape, dt)

        def pool_zeros():
            return pool.zeros(shape, dt)

        def np_zeros():
            return np.zeros(shape, dt)

        def with_each_call():
            with alloc:
                return np.empty(shape, dt)

        base = bench(np_empty, n, repeat)
        res = [("np.empty", base), ("pool.empty", bench(pool_empty, n, repeat))]
        with alloc:
            res.append(("np.empty in numpy_allocator(pool)", bench(np_empty, n, repeat)))
        res.append(("with numpy_allocator(pool): np.empty (per call)",
                    bench(with_each_call, n, repeat)))
        zbase = bench(np_zeros, n, repeat)
        res.append(("np.zeros", zbase))
        res.append(("pool.zeros", bench(pool_zeros, n, repeat)))
        for name, t in res:
            ref = zbase if "zeros" in name else base
            rows.append((label, name, t, t / ref))
    assert pool.check() == 0
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=20000)
    args = ap.parse_args(argv)
    rows = run(args.repeat, args.number)
    w = max(len(r[1]) for r in rows)
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}; "
          f"median of {args.repeat} repeats; ratio vs np.empty (zeros: vs np.zeros)")
    print(f"{'case':<16} {'call':<{w}} {'time/call':>12} {'ratio':>7}")
    for label, name, t, ratio in rows:
        unit = f"{t * 1e9:9.0f} ns" if t < 1e-4 else f"{t * 1e6:9.1f} us"
        print(f"{label:<16} {name:<{w}} {unit:>12} {ratio:7.2f}")


if __name__ == "__main__":
    main()
