"""A plain NumPy loop under a learning pool: time per iteration and memory,
side by side in one run.

The loop is an inference-like NumPy program with no graph: a small MLP
and a convolution done as im2col + matmul, every intermediate a NumPy
temporary.  Three ways, interleaved:

* ``np (default allocator)`` -- NumPy's own allocator (glibc malloc);
* ``numpy_allocator(Pool(learn=False))`` -- the temporaries from the pool's
  zones;
* ``numpy_allocator(Pool()) + pool.step()`` -- the pool told where each
  iteration ends: after warm-up every temporary comes from a learned plan.

Memory: the pools' peak reserved bytes after warm-up (``reset_peak`` after
the warm-up iterations) over the peak bytes live, which is what a static
plan of the same loop would need at best (the lower bound), and the
learned plan's hit rate.

    python benchmarks/bench_pool_learn.py [--repeat 7] [--iters 200] [--threads 1]

Latest (2-core shared VM, numpy 2.4.6, one BLAS thread): NumPy's
allocator 276.5 us/iter, the pool without learning 298.6 (1.08x, peak
reserved / peak live 5.3: the zones' slabs for a few KiB live), the
learning pool 268.8 (0.97x, 1.016x the peak live bytes, 100% of the
allocations after warm-up from the learned plan).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

try:
    import pyarena
except ImportError:  # run from a source checkout with an in-place build
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pyarena

rng = np.random.default_rng(0)
W1 = rng.standard_normal((128, 256)).astype(np.float32)
W2 = rng.standard_normal((256, 64)).astype(np.float32)
K = rng.standard_normal((16, 3 * 3 * 8)).astype(np.float32)
X = rng.standard_normal((16, 128)).astype(np.float32)
IMG = rng.standard_normal((8, 24, 24)).astype(np.float32)


def model(x, img):
    """One inference: every intermediate is a fresh NumPy temporary."""
    h = np.maximum(x @ W1, 0)
    h = h / (1.0 + np.abs(h))
    y = h @ W2
    y = np.exp(y - y.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)
    # conv 3x3 via im2col on an (8, 24, 24) image
    cols = np.lib.stride_tricks.sliding_window_view(img, (3, 3), axis=(1, 2))
    cols = np.ascontiguousarray(cols.transpose(1, 2, 0, 3, 4)).reshape(22 * 22, -1)
    fmap = np.maximum(cols @ K.T, 0)
    return float(y.sum() + fmap.mean())


def make_runner(mode):
    x, img = X, IMG
    if mode == "np":
        return None, lambda: model(x, img)
    pool = pyarena.Pool(learn=(mode == "learned"))
    alloc = pyarena.numpy_allocator(pool)

    def run():
        with alloc:
            r = model(x, img)
        pool.step()
        return r
    return pool, run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS threads (default 1: stable timings on a shared machine)")
    args = ap.parse_args(argv)
    if args.threads:
        from pyarena.runtime import set_blas_threads
        set_blas_threads(args.threads)
    modes = {"np (default allocator)": "np",
             "numpy_allocator(Pool(learn=False))": "zones",
             "numpy_allocator(Pool()) + pool.step()": "learned"}
    runners = {name: make_runner(m) for name, m in modes.items()}
    results = {}
    for name, (pool, run) in runners.items():
        for _ in range(args.warmup):
            results[name] = run()
        if pool is not None:
            pool.reset_peak()
    assert len(set(results.values())) == 1, results  # the same answers
    samples = {name: [] for name in runners}
    before = {name: pool.stats() for name, (pool, _) in runners.items() if pool}
    for _ in range(args.repeat):
        for name, (_, run) in runners.items():
            t0 = time.perf_counter()
            for _ in range(args.iters):
                run()
            samples[name].append((time.perf_counter() - t0) / args.iters)
    base = statistics.median(samples["np (default allocator)"])
    print(f"numpy {np.__version__}; {args.iters} iterations x {args.repeat} interleaved "
          f"repeats after {args.warmup} warm-up iterations; ratios vs the default "
          f"allocator from the same run")
    w = max(map(len, runners))
    print(f"{'mode':<{w}} {'us/iter':>9} {'ratio':>6} {'peak reserved / peak live':>26} "
          f"{'plan hits':>10}")
    for name, (pool, _) in runners.items():
        t = statistics.median(samples[name])
        fp = hits = "-"
        if pool is not None:
            st = pool.stats()
            if st.peak_requested:
                fp = f"{st.peak_reserved / st.peak_requested:.3f}"
            allocs = st.allocs - before[name].allocs
            if pool.policy.learn:
                hits = f"{(st.plan_hits - before[name].plan_hits) / max(1, allocs):.0%}"
            assert pool.check() == 0
        print(f"{name:<{w}} {t * 1e6:9.1f} {t / base:6.2f} {fp:>26} {hits:>10}")


if __name__ == "__main__":
    main()
