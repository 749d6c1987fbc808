"""An irregular NumPy program (no step marks of its own): a k-means fit
whose clusters change size every iteration, a spectrogram of a signal cut
into frames of varying count, and a sort/unique pass -- the kind of
scikit-learn / scipy traffic on which a learning pool has little to learn.
Used for the "never worse than the plain pool" table in
benchmarks/results/pool.md.

    python benchmarks/loop_irregular.py [--rounds 12]
"""
import argparse

import numpy as np


def kmeans(x, k, iters, rng):
    c = x[rng.choice(len(x), k, replace=False)]
    for _ in range(iters):
        d = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)
        lab = d.argmin(1)
        c = np.stack([x[lab == j].mean(0) if (lab == j).any() else c[j] for j in range(k)])
    return c


def spectrogram(sig, frame):
    n = (len(sig) - frame) // (frame // 2) + 1
    idx = np.arange(frame)[None, :] + (frame // 2) * np.arange(n)[:, None]
    fr = sig[idx] * np.hanning(frame)
    return np.log1p(np.abs(np.fft.rfft(fr, axis=1)) ** 2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    acc = 0.0
    for r in range(args.rounds):
        x = rng.standard_normal((500 + 37 * r, 8))
        acc += float(kmeans(x, 5 + r % 4, 6, rng).sum())
        sig = rng.standard_normal(16000 + 811 * r)
        acc += float(spectrogram(sig, 256 << (r % 3)).mean())
        v = rng.integers(0, 1000 + r, 20000)
        acc += float(np.unique(np.sort(v)).size)
    print(f"{acc:.6f}")


if __name__ == "__main__":
    main()
