"""The learning pool on a loop whose batch varies (1..8, cycling): footprint
after warm-up and time per iteration, plain pool vs learning pool, from
one run.  The loop is benchmarks/loop_batch_varying.py's landmark model
(every intermediate a NumPy temporary), served by
``numpy_allocator(pool)``; the weights live outside the pool.

    python benchmarks/bench_pool_batch.py [--warmup 48] [--iters 160] [--repeat 5]

Memory: the pool's peak reserved bytes over its peak live (requested)
bytes, both since ``reset_peak()`` after the warm-up.  For glibc and the
other mallocs (RSS), trace the same loop and replay it:

    python -m pyarena trace --steps none -o bv.trace.gz -- \\
        python benchmarks/loop_batch_varying.py --iters 160 --steps
    python -m pyarena alloc-bench bv.trace.gz --allocators glibc,glibc-tuned,pool-hybrid,pool-learned
"""
import argparse
import os
import statistics
import sys
import time

try:
    import pyarena
except ImportError:  # run from a source checkout with an in-place build
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pyarena

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loop_batch_varying import IMGS, landmarks  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warmup", type=int, default=48)
    ap.add_argument("--iters", type=int, default=160)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    modes = {"Pool(learn=False)": False, "Pool() + pool.step()": True}
    pools = {name: pyarena.Pool(learn=learn) for name, learn in modes.items()}
    allocs = {name: pyarena.numpy_allocator(p) for name, p in pools.items()}
    k = {name: 0 for name in modes}

    def run(name, n):
        pool, alloc = pools[name], allocs[name]
        for _ in range(n):
            with alloc:
                landmarks(IMGS[: 1 + k[name] % 8])
            pool.step()
            k[name] += 1

    for name in modes:
        run(name, args.warmup)
        pools[name].reset_peak()
    before = {name: p.stats() for name, p in pools.items()}
    samples = {name: [] for name in modes}
    for _ in range(args.repeat):
        for name in modes:
            t0 = time.perf_counter()
            run(name, args.iters)
            samples[name].append((time.perf_counter() - t0) / args.iters)
    base = statistics.median(samples["Pool(learn=False)"])
    print(f"batch 1..8 cycling; {args.iters} iterations x {args.repeat} interleaved repeats "
          f"after {args.warmup} warm-up iterations; one run")
    print(f"{'mode':<22} {'us/iter':>9} {'ratio':>6} {'peak reserved / peak live':>26} "
          f"{'served steps':>13} {'fallbacks':>9}")
    for name, pool in pools.items():
        st = pool.stats()
        t = statistics.median(samples[name])
        fp = st.peak_reserved / max(1, st.peak_requested)
        served = st.plan_steps - before[name].plan_steps
        steps = st.steps - before[name].steps
        assert pool.check() == 0
        print(f"{name:<22} {t * 1e6:9.1f} {t / base:6.2f} {fp:26.3f} "
              f"{served:>6}/{steps:<6} {st.learn_fallbacks:>9}")


if __name__ == "__main__":
    main()
