"""Record the sample traces shipped with pyarena (pyarena/data/traces/),
which ``pyarena alloc-bench --sample`` replays on a fresh install.

    python benchmarks/record_sample_traces.py

* ``mobilenet_v2_96.trace.gz`` -- the built-in MobileNetV2 at 96x96 run
  by the executor with one fresh ``np.empty`` per tensor (what plain NumPy
  code does), 10 inferences, a step mark after each;
* ``numpy_loop.trace.gz`` -- a NumPy loop (normalised power iteration
  with temporaries), 50 iterations, a step mark after each.

Both are recorded with the same ``pyarena.trace.record`` users call.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the checkout, when run as a script

from pyarena import trace  # noqa: E402
from pyarena.runtime import Executor, random_feeds  # noqa: E402
from pyarena.runtime.models import mobilenet_v2  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "pyarena", "data", "traces")


def model_trace(path, steps=10):
    g = mobilenet_v2(resolution=96)
    ex = Executor(g, allocator="numpy")
    feeds = random_feeds(g)
    ex.run(feeds)                                   # warm-up, not recorded
    with trace.record(path, program="pyarena demo model: MobileNetV2 96x96, "
                      "np.empty per tensor") as rec:
        for _ in range(steps):
            ex.run(feeds)
            trace.step()
    return rec.counts


def loop_trace(path, steps=50):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    x = rng.standard_normal(256).astype(np.float32)
    with trace.record(path, program="NumPy loop: power iteration with temporaries") as rec:
        for _ in range(steps):
            y = a @ x
            y = np.tanh(y) + 0.5 * y
            x = y / np.linalg.norm(y)
            _ = np.outer(x, x).sum()
            trace.step()
    return rec.counts


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, fn in (("mobilenet_v2_96.trace.gz", model_trace),
                     ("numpy_loop.trace.gz", loop_trace)):
        path = os.path.join(OUT, name)
        counts = fn(path)
        print(f"{path}: {os.path.getsize(path):,} bytes, {counts}")
