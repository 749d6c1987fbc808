"""``pyarena demo``: weights and activations from an arena, then its stats."""
import time

import numpy as np

from .arena import Arena


def add_parser(sub):
    p = sub.add_parser("demo", help="a short demo on a built-in network")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=run)
    return p


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,} B"
        n /= 1024


def run(args):
    rng = np.random.default_rng(args.seed)
    # A small conv net's weights: loaded once into a fixed-capacity arena.
    layers = [(3, 16), (16, 32), (32, 64), (64, 128)]
    weights = Arena(4 << 20, growth="none")
    ws = [weights.asarray(rng.standard_normal((co, ci, 3, 3), dtype=np.float32) * 0.1)
          for ci, co in layers]
    head = weights.asarray(rng.standard_normal((10, 128), dtype=np.float32) * 0.1)
    work = Arena(alignment=64)
    x = work.asarray(rng.standard_normal((1, 3, 32, 32), dtype=np.float32))
    logits = work.empty((1, 10), np.float32)  # the output outlives each inference
    t0 = time.perf_counter()
    for _ in range(3):
        with work.mark():
            h = x
            for w in ws:
                # 1x1 "conv" (channel mixing) + ReLU + 2x2 average pooling,
                # every result written into arena memory
                co = w.shape[0]
                n, c, hh, ww = h.shape
                y = work.empty((n, co, hh, ww), np.float32)
                np.einsum("oc,nchw->nohw", w[:, :, 1, 1], h, out=y)
                np.maximum(y, 0, out=y)
                p = work.empty((n, co, hh // 2, ww // 2), np.float32)
                np.add(y[:, :, 0::2, 0::2], y[:, :, 1::2, 1::2], out=p)
                p *= 0.5
                h = p
            np.matmul(h.mean(axis=(2, 3)), head.T, out=logits)
            inner = work.stats()
            del h, y, p
    dt = (time.perf_counter() - t0) / 3
    ws_stats = weights.stats()
    print("pyarena demo: a 4-layer net, weights in a fixed arena, "
          "activations in a growing arena rewound after each inference\n")
    print(f"{'arena':<12}{'blocks':>8}{'used':>14}{'padding':>12}{'reserved':>14}{'peak':>14}")
    for name, st in (("weights", ws_stats), ("activations", inner)):
        print(f"{name:<12}{st.count:>8}{_fmt(st.used):>14}{_fmt(st.padding):>12}"
              f"{_fmt(st.reserved):>14}{_fmt(st.peak):>14}")
    print(f"\nlogits: {np.array2string(logits[0, :4], precision=3)} ...")
    print(f"time per inference: {dt * 1e3:.2f} ms; every array aligned to 64 bytes: "
          f"{all(a.ctypes.data % 64 == 0 for a in ws)}")
    return 0
