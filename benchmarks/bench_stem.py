"""First convolutions over RGB (3 input channels, 3x3, stride 2, pad 1,
ReLU6) as one-layer models, side by side in one run: the few-input-channel
native kernel vs im2col + BLAS (``_path`` forced) vs the reference runtime
(onnxruntime for NCHW, the TFLite interpreter for NHWC).  CPU time of the
calling thread, medians of interleaved rounds, one thread.

    python benchmarks/bench_stem.py [--repeat 101]
"""
import argparse
import os
import sys

from scratch import scratch_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

#: (c_in, c_out, k, s, group, h, act), layout
STEMS = [((3, 32, 3, 2, 1, 224, True), "nchw"), ((3, 32, 3, 2, 1, 224, True), "nhwc"),
         ((3, 32, 3, 2, 1, 192, True), "nhwc"), ((3, 16, 3, 2, 1, 128, True), "nhwc"),
         ((3, 24, 5, 2, 1, 128, True), "nhwc")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=101)
    args = ap.parse_args()
    from bench_conv_paths import time_layer
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    tmp = scratch_dir("pyarena-stems-")
    print(f"{'layer':<32}{'native us':>10}{'im2col us':>10}{'ref us':>9}"
          f"{'native/im2col':>15}{'native/ref':>12}{'im2col/ref':>12}{'rule':>9}")
    for i, (key, layout) in enumerate(STEMS):
        path = os.path.join(tmp, f"s{i}.{'onnx' if layout == 'nchw' else 'tflite'}")
        t, rule = time_layer(key, layout, path, args.repeat, warmup=3, clock="cpu")
        m = {"native": t["native"] * 1e6, "im2col": t["numpy"] * 1e6, "ref": t["ref"] * 1e6}
        c_in, c_out, k, s, _, h, _ = key
        name = f"{layout.upper()} {c_in}>{c_out} {k}x{k} s{s}, {h}x{h}"
        print(f"{name:<32}{m['native']:>10.0f}{m['im2col']:>10.0f}{m['ref']:>9.0f}"
              f"{m['native'] / m['im2col']:>14.2f}x{m['native'] / m['ref']:>11.2f}x"
              f"{m['im2col'] / m['ref']:>11.2f}x{rule:>9}", flush=True)


if __name__ == "__main__":
    main()
