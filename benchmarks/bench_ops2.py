"""Second-round kernels: time and scratch with the default SCRATCH_BUDGET
(banded / chunked) against an unbounded budget (one band, whole-tensor
temporaries), side by side in one process.

    python benchmarks/bench_ops2.py [--repeat 15]

Each row: the kernel's scratch in MiB and its median time per call for both
budgets, and the time ratio banded / whole.  BLAS is single-threaded.
"""
import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pyarena.runtime.kernels as K  # noqa: E402
from pyarena.graph import Graph  # noqa: E402

CASES = [
    ("ConvTranspose NCHW 64->32, 56->112, k4 s2 p1", "ConvTranspose", (1, 64, 56, 56),
     (64, 32, 4, 4), (1, 32, 112, 112), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("ConvTranspose NCHW 256->128, 14->28, k2 s2", "ConvTranspose", (1, 256, 14, 14),
     (256, 128, 2, 2), (1, 128, 28, 28), dict(strides=[2, 2])),
    ("ConvTranspose NHWC 16->1, 128->256, k2 s2 (selfie)", "ConvTranspose", (1, 128, 128, 16),
     (1, 2, 2, 16), (1, 256, 256, 1), dict(strides=[2, 2], layout="NHWC",
                                          auto_pad="SAME_UPPER")),
    ("Conv NHWC depth multiplier 2, 32->64, 56x56", "Conv", (1, 56, 56, 32), (1, 3, 3, 64),
     (1, 56, 56, 64), dict(layout="NHWC", group=32, weight_layout="1HWC",
                           auto_pad="SAME_UPPER")),
    ("Conv NHWC 32 groups of 2, 64->64, 28x28", "Conv", (1, 28, 28, 64), (64, 3, 3, 2),
     (1, 28, 28, 64), dict(layout="NHWC", group=32, auto_pad="SAME_UPPER")),
    ("Gelu (erf) 1x256x64x64", "Gelu", (1, 256, 64, 64), None, (1, 256, 64, 64), {}),
    ("Erf 1x256x64x64", "Erf", (1, 256, 64, 64), None, (1, 256, 64, 64), {}),
    ("Resize cubic 1x32x64x64 -> 128x128", "Resize", (1, 32, 64, 64), None,
     (1, 32, 128, 128), dict(mode="cubic")),
]


def kernel(op_type, xs, ws, ys, attrs, rng, budget):
    g = Graph("b")
    g.add_tensor("x", xs, role="input")
    ins = ["x"]
    if ws is not None:
        g.add_tensor("w", ws, role="constant",
                     data=rng.standard_normal(ws).astype(np.float32))
        ins.append("w")
    g.add_tensor("y", ys, role="output")
    op = g.add_op(op_type, ins, ["y"], **attrs)
    k = K.make_kernel(op, [g.tensors[n] for n in ins], [g.tensors["y"]], scratch_budget=budget)
    args = [rng.standard_normal(xs).astype(np.float32)] + \
        ([g.tensors["w"].data] if ws is not None else [])
    return k, args, np.empty(ys, np.float32), np.empty(k.scratch_bytes, np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    from pyarena.runtime import median, time_calls
    print("| layer | scratch MiB banded | whole | ms banded | whole | ratio |")
    print("|---|---|---|---|---|---|")
    for name, op_type, xs, ws, ys, attrs in CASES:
        built = {}
        for label, budget in (("banded", K.SCRATCH_BUDGET), ("whole", 1 << 40)):
            built[label] = kernel(op_type, xs, ws, ys, attrs, np.random.default_rng(0), budget)
        ts = time_calls({label: (lambda k=k, args=args, y=y, sc=sc: k(args, [y], sc))
                         for label, (k, args, y, sc) in built.items()}, repeat=a.repeat)
        np.testing.assert_allclose(built["banded"][2], built["whole"][2], rtol=1e-5,
                                   atol=1e-5)
        mb = {lb: built[lb][0].scratch_bytes / 2 ** 20 for lb in built}
        ms = {lb: median(ts[lb]) * 1e3 for lb in ts}
        print(f"| {name} | {mb['banded']:.2f} | {mb['whole']:.2f} | {ms['banded']:.2f} | "
              f"{ms['whole']:.2f} | {ms['banded'] / ms['whole']:.2f} |")


if __name__ == "__main__":
    main()
