"""MatMulNBits (onnxruntime's blockwise 4-bit weights) in pyarena and in
onnxruntime, side by side in one process.

    python benchmarks/bench_matmul_nbits.py [--k 2048] [--n 2048] [--block 32]
                                            [--rows 1,4,32,128] [--repeat 15]

One MatMulNBits node (4 bits, no zero points, a decoder-sized K x N) built
in code with seeded weights; for each number of rows of A (1: a decode
step; more: a prompt) the median time per call of pyarena's session
(packed: the weights stay in their 4 bits) and of pyarena with
``native=False`` (the weights dequantized once to float32 at load) and of
onnxruntime (one thread), the ratios, the largest difference from
onnxruntime, and the bytes each pyarena form keeps for the weights.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--rows", default="1,4,32,128")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import onnxruntime as ort

    import pyarena
    from helpers.contrib_models import one_node
    from pyarena.importers import load_model
    from pyarena.runtime import Executor

    k, n, block = args.k, args.n, args.block
    rng = np.random.default_rng(0)
    consts = {"B": rng.integers(0, 256, (n, -(-k // block), block // 2)).astype(np.uint8),
              "scales": (rng.random(n * -(-k // block)) * 0.02).astype(np.float32)}
    print(f"MatMulNBits 4-bit, K={k}, N={n}, block {block}; one thread; medians of "
          f"{args.repeat}, interleaved\n")
    print("| rows | pyarena ms | float-weights ms | onnxruntime ms | pyarena / ort | "
          "float / ort | max diff | weights kept: packed / float |")
    print("|---|---|---|---|---|---|---|---|")
    for m in [int(r) for r in args.rows.split(",")]:
        feeds = {"a": rng.standard_normal((m, k)).astype(np.float32)}
        model = one_node("MatMulNBits", feeds, ["y"], consts, inputs=["a", "B", "scales"],
                         K=k, N=n, bits=4, block_size=block)
        path = f"/tmp/_nbits_{os.getpid()}.onnx"
        with open(path, "wb") as f:
            f.write(model)
        packed = Executor(load_model(path))
        plain = Executor(load_model(path, native=False))
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.log_severity_level = 1, 3
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        os.unlink(path)
        runs = {"packed": lambda: packed.run(feeds), "float": lambda: plain.run(feeds),
                "ort": lambda: ref.run(None, feeds)}
        for f in runs.values():
            f()
        ts = {name: [] for name in runs}
        for _ in range(args.repeat):
            for name, f in runs.items():
                t = time.perf_counter()
                f()
                ts[name].append(time.perf_counter() - t)
        med = {name: float(np.median(v)) * 1e3 for name, v in ts.items()}
        diff = float(np.abs(packed.run(feeds)["y"] - ref.run(None, feeds)[0]).max())
        kp = sum(consts[c].nbytes for c in consts) / 2**20
        kf = plain.kernels[0].w.nbytes / 2**20
        print(f"| {m} | {med['packed']:.3f} | {med['float']:.3f} | {med['ort']:.3f} | "
              f"{med['packed'] / med['ort']:.2f} | {med['float'] / med['ort']:.2f} | "
              f"{diff:.1e} | {kp:.1f} / {kf:.1f} MiB |")


if __name__ == "__main__":
    main()
