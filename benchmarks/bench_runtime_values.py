"""Values fed at run time where a model usually holds a constant, in one
run against onnxruntime (one thread, the same feeds).

    python benchmarks/bench_runtime_values.py [--repeat 21] [--markdown FILE]

Two paths of ``pyarena.InferenceSession`` are measured:

* **run-time parameters** -- a Conv's weight fed as an input: the kernel is
  built (its weights laid out) per value, the last 16 kept;
* **values that decide shapes** -- a Resize's ``scales`` or a Reshape's
  target fed as an input: the session keys its signature by the value and
  imports the model with it fixed (``importers/session_keys.py``), so
  every tensor is planned; a new value costs an import.

Each model (built here, seeded) runs in four ways: the value as an
initializer (the baseline a fed value is compared with), the same value
fed every call, a cycle of 4 values, and a new value every call.  The
table gives the median time per call over ``--repeat`` calls after one
warm-up pass, and pyarena / onnxruntime from the same run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # the checkout, when run as a script


def _models(d):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    rng = np.random.default_rng(0)

    def save(name, nodes, ins, inits=()):
        g = h.make_graph(nodes, name, ins, [h.make_tensor_value_info("y", T.FLOAT, None)],
                         list(inits))
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
        m.ir_version = 8
        path = os.path.join(d, f"{name}.onnx")
        onnx.save(m, path)
        return path

    def vi(name, shape, t=T.FLOAT):
        return h.make_tensor_value_info(name, t, shape)

    x = rng.standard_normal((1, 16, 56, 56)).astype(np.float32)
    w = [rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1 for _ in range(4)]
    conv = [h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            h.make_node("Relu", ["c"], ["y"])]
    xr = rng.standard_normal((1, 16, 64, 64)).astype(np.float32)
    scales = [np.array([1, 1, s, s], np.float32) for s in (2.0, 0.5, 1.5, 0.75)]
    resize = [h.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
              h.make_node("Relu", ["r"], ["y"])]
    xs = rng.standard_normal((64, 64, 16)).astype(np.float32)
    shapes = [np.array(s, np.int64) for s in ([4096, 16], [64, 1024], [256, 256], [16, 4096])]
    reshape = [h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Relu", ["r"], ["y"])]
    n = onnx.numpy_helper.from_array
    return [
        ("Conv weight (32x16x3x3) fed", "w", {"x": x}, w,
         save("conv_fed", conv, [vi("x", x.shape), vi("w", w[0].shape)]),
         save("conv_const", conv, [vi("x", x.shape)], [n(w[0], "w")]),
         lambda i: (rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1)),
        ("Resize scales fed (1x16x64x64)", "scales", {"x": xr}, scales,
         save("resize_fed", resize, [vi("x", xr.shape), vi("scales", [4])]),
         save("resize_const", resize, [vi("x", xr.shape)], [n(scales[0], "scales")]),
         lambda i: np.array([1, 1, 1 + (i % 40) / 40, 1 + (i // 40) / 40], np.float32)),
        ("Reshape target fed (64x64x16)", "s", {"x": xs}, shapes,
         save("reshape_fed", reshape, [vi("x", xs.shape), vi("s", [2], T.INT64)]),
         save("reshape_const", reshape, [vi("x", xs.shape)], [n(shapes[0], "s")]),
         lambda i: np.array([2 ** (i % 13), -1], np.int64)),
    ]


def _median_call(run, feeds_of, repeat):
    for i in range(min(repeat, 4)):     # warm-up: what a cycle of 4 prepares
        run(feeds_of(i))
    times = []
    for i in range(repeat):
        f = feeds_of(i)
        t0 = time.perf_counter()
        run(f)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--markdown", help="write the table here too")
    args = ap.parse_args(argv)
    import onnxruntime as ort
    import pyarena
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for title, name, other, values, fed, const, fresh in _models(d):
            ref = ort.InferenceSession(fed, so, providers=["CPUExecutionProvider"])
            ref_c = ort.InferenceSession(const, so, providers=["CPUExecutionProvider"])
            new_values = [fresh(1000 + i) for i in range(args.repeat + 4)]
            ways = [("as an initializer", const, lambda i: dict(other), ref_c),
                    ("fed, the same value", fed, lambda i: dict(other, **{name: values[0]}), ref),
                    ("fed, a cycle of 4 values", fed,
                     lambda i: dict(other, **{name: values[i % 4]}), ref),
                    ("fed, a new value each call", fed,
                     lambda i: dict(other, **{name: new_values[i]}), ref)]
            for way, path, feeds_of, theirs in ways:
                sess = pyarena.InferenceSession(path, max_plans=8)
                ours = _median_call(lambda f: sess.run(None, f), feeds_of, args.repeat)
                ort_t = _median_call(lambda f: theirs.run(None, f), feeds_of, args.repeat)
                a, b = sess.run(None, feeds_of(0))[0], theirs.run(None, feeds_of(0))[0]
                diff = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("inf")
                rows.append((title, way, ours * 1e3, ort_t * 1e3, ours / ort_t, diff,
                             sess.memory_info()["plans"]))
    head = ("| model | value | pyarena ms | onnxruntime ms | ratio | max abs diff | plans |\n"
            "|---|---|---|---|---|---|---|")
    lines = [head] + [f"| {t} | {w} | {a:.3f} | {b:.3f} | {r:.2f} | {dd:.1e} | {p} |"
                      for t, w, a, b, r, dd, p in rows]
    text = (f"Median of {args.repeat} calls each, one thread, pyarena "
            f"{pyarena.__version__}, onnxruntime {ort.__version__}\n\n" + "\n".join(lines))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
