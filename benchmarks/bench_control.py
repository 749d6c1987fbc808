"""Loop, Scan and pool tensors next to onnxruntime on the same files.

Three models made in code (nothing downloaded):

* ``loop``  -- a Loop of T iterations, h = tanh(h @ W + x[i]) with x and W
  read from the outer scope, every h scanned (trip count fixed at import:
  everything planned, the body inside the Loop's scratch);
* ``scan``  -- a Scan over T rows, a running sum scaled by a vector;
* ``nonzero`` -- NonZero of x > 0 on an NxN input, Transpose, GatherND,
  ReduceSum: the indices and gathered values are pool tensors.

For each: pyarena's median inference (planned Executor), onnxruntime's,
their ratio (same run, interleaved rounds), for the Loop and the Scan the
same per iteration (microseconds), the largest |difference|, the planned
arena and the pool bytes of a run.  One thread everywhere.

    python benchmarks/bench_control.py [--steps 64] [--n 256] [--repeat 15]
"""
import argparse
import os

import numpy as np

from scratch import scratch_dir


def _models(d, steps, n):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    vi = h.make_tensor_value_info
    f32 = np.float32
    rng = np.random.default_rng(0)
    out = {}

    body = h.make_graph([h.make_node("Gather", ["x", "i"], ["xi"], axis=0),
                         h.make_node("MatMul", ["hh", "W"], ["hw"]),
                         h.make_node("Add", ["hw", "xi"], ["a"]),
                         h.make_node("Tanh", ["a"], ["h2"]),
                         h.make_node("Identity", ["c"], ["c2"])], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("hh", T.FLOAT, [1, 64])],
                        [vi("c2", T.BOOL, []), vi("h2", T.FLOAT, [1, 64]),
                         vi("h2", T.FLOAT, [1, 64])])
    g = h.make_graph([h.make_node("Loop", ["M", "", "h0"], ["hf", "hs"], body=body)], "loop",
                     [vi("x", T.FLOAT, [steps, 1, 64]), vi("h0", T.FLOAT, [1, 64])],
                     [vi("hf", T.FLOAT, None), vi("hs", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(np.array(steps, np.int64), "M"),
                      onnx.numpy_helper.from_array(
                          (rng.standard_normal((64, 64)) * 0.1).astype(f32), "W")])
    out["loop"] = (g, {"x": rng.standard_normal((steps, 1, 64)).astype(f32),
                       "h0": np.zeros((1, 64), f32)})

    body = h.make_graph([h.make_node("Add", ["s", "xt"], ["s2"]),
                         h.make_node("Mul", ["s2", "w"], ["o"])], "body",
                        [vi("s", T.FLOAT, [64]), vi("xt", T.FLOAT, [64])],
                        [vi("s2", T.FLOAT, [64]), vi("o", T.FLOAT, [64])])
    g = h.make_graph([h.make_node("Scan", ["s0", "x"], ["sf", "y"], body=body,
                                  num_scan_inputs=1)], "scan",
                     [vi("s0", T.FLOAT, [64]), vi("x", T.FLOAT, [steps, 64])],
                     [vi("sf", T.FLOAT, None), vi("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(rng.standard_normal(64).astype(f32), "w")])
    out["scan"] = (g, {"s0": np.zeros(64, f32),
                       "x": rng.standard_normal((steps, 64)).astype(f32)})

    g = h.make_graph([h.make_node("Greater", ["x", "zero"], ["m"]),
                      h.make_node("NonZero", ["m"], ["nz"]),
                      h.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
                      h.make_node("GatherND", ["x", "idx"], ["v"]),
                      h.make_node("ReduceSum", ["v"], ["s"], keepdims=0)], "nonzero",
                     [vi("x", T.FLOAT, [n, n])], [vi("s", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(np.array(0, f32), "zero")])
    out["nonzero"] = (g, {"x": rng.standard_normal((n, n)).astype(f32)})
    paths = {}
    for name, (g, feeds) in out.items():
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = min(m.ir_version, 10)
        paths[name] = (os.path.join(d, f"{name}.onnx"), feeds)
        onnx.save(m, paths[name][0])
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import onnxruntime as ort
    from pyarena import load_model, plan
    from pyarena.runtime import Executor, median, set_blas_threads, time_calls
    set_blas_threads(1)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    print(f"{'model':>8}{'pyarena ms':>12}{'ort ms':>9}{'pyarena/ort':>13}"
          f"{'us/iter':>9}{'ort us/iter':>13}{'max|diff|':>11}{'arena B':>10}{'pool B':>9}")
    for name, (path, feeds) in _models(scratch_dir(), args.steps, args.n).items():
        g = load_model(path)
        ex = Executor(g, plan(g))
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ours = {k: np.array(v) for k, v in ex.run(feeds).items()}
        theirs = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
        diff = max(float(np.abs(ours[k] - theirs[k]).max()) for k in theirs)
        t = time_calls({"p": lambda: ex.run(feeds), "o": lambda: ref.run(None, feeds)},
                       repeat=args.repeat, warmup=2)
        p, o = median(t["p"]) * 1e3, median(t["o"]) * 1e3
        info = ex.memory_info()
        per = (f"{p / args.steps * 1e3:>9.1f}{o / args.steps * 1e3:>13.1f}"
               if name in ("loop", "scan") else f"{'':>22}")
        print(f"{name:>8}{p:>12.3f}{o:>9.3f}{p / o:>13.2f}{per}{diff:>11.1e}"
              f"{info['arena_bytes']:>10}{info['pool_bytes']:>9}")


if __name__ == "__main__":
    main()
