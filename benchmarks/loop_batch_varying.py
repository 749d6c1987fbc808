"""A landmark-like NumPy inference loop whose batch cycles 1..8: every
intermediate is a fresh NumPy temporary, so each batch size is its own step
signature.  Used by bench_pool_learn.py --batch-varying and traced for the
alloc-bench tables in benchmarks/results/pool.md.

    python benchmarks/loop_batch_varying.py [--iters 160] [--steps]

--steps marks each iteration's end with pyarena.trace.step().
"""
import argparse

import numpy as np

rng = np.random.default_rng(0)
W1 = rng.standard_normal((3 * 4 * 4, 32)).astype(np.float32)   # 4x4 patches -> 32
W2 = rng.standard_normal((32 * 4, 64)).astype(np.float32)      # 2x2 patches -> 64
W3 = rng.standard_normal((64 * 8 * 8, 64)).astype(np.float32)
W4 = rng.standard_normal((64, 68 * 2)).astype(np.float32)     # 68 landmarks
IMGS = rng.standard_normal((8, 3, 128, 128)).astype(np.float32)


def patches(x, k):
    """(b, c, h, w) -> (b * h/k * w/k, c * k * k): non-overlapping k x k patches."""
    b, c, h, w = x.shape
    p = x.reshape(b, c, h // k, k, w // k, k).transpose(0, 2, 4, 1, 3, 5)
    return np.ascontiguousarray(p).reshape(b * (h // k) * (w // k), c * k * k)


def landmarks(img):
    """One inference of a small landmark model on a batch (b, 3, 128, 128)."""
    b = img.shape[0]
    x = (img - 0.5) * 2.0
    h = np.maximum(patches(x, 4) @ W1, 0)                           # (b*1024, 32)
    h = h.reshape(b, 32, 32, 32).transpose(0, 3, 1, 2)
    h = np.maximum(patches(h, 2) @ W2, 0)                           # (b*256, 64)
    h = h.reshape(b, 8, 2, 8, 2, 64).mean(axis=(2, 4))              # 2x2 pool
    h = h.reshape(b, 8 * 8 * 64)
    h = np.tanh(h @ W3)
    y = h @ W4
    return (y.reshape(b, 68, 2) * 32.0 + 32.0).sum()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=160)
    ap.add_argument("--steps", action="store_true")
    args = ap.parse_args(argv)
    step = None
    if args.steps:
        import pyarena
        step = pyarena.trace.step
    total = 0.0
    for i in range(args.iters):
        total += float(landmarks(IMGS[: 1 + i % 8]))
        if step:
            step()
    print(f"{total:.3f}")


if __name__ == "__main__":
    main()
