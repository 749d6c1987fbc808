"""The float32 LSTM's native time loop against its NumPy cell and
onnxruntime, side by side in one process.

    python benchmarks/bench_lstm.py [--repeat 21]

One LSTM node built in code (seeded weights and bias as initializers,
batch 1, layout 0) per row: a bidirectional 64-step layer of 128 units, one
step of 128 (a streaming model's call) and a 200-step layer of 64.  Each
is run by pyarena (the C loop, ``pa_lstm_run``), by pyarena with the loop
switched off (the NumPy cell; the session made while
``recurrent.native_loop_ok`` answers False) and by onnxruntime (one
thread), interleaved; medians in microseconds, the ratios to onnxruntime
and the largest differences.
"""
import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = [(64, 64, 128, "bidirectional"), (1, 64, 128, "forward"), (200, 32, 64, "forward")]


def _model(path, S, I, H, direction):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nd = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
             for n, s in (("W", (nd, 4 * H, I)), ("R", (nd, 4 * H, H)), ("B", (nd, 8 * H)))]
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Yh", "Yc"], hidden_size=H,
                            direction=direction)
    g = helper.make_graph([node], "lstm",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [S, 1, I])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in ("Y", "Yh", "Yc")], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    import onnxruntime as ort

    import pyarena
    from pyarena.runtime.kernels import recurrent
    print("| steps x units | direction | native us | NumPy cell us | onnxruntime us | "
          "native / ort | cell / ort | cell / native | max diff native-ort |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for S, I, H, direction in CASES:
            path = os.path.join(d, f"lstm_{S}_{H}.onnx")
            _model(path, S, I, H, direction)
            x = {"X": np.random.default_rng(1).standard_normal((S, 1, I)).astype(np.float32)}
            native = pyarena.InferenceSession(path)
            native.run(None, x)
            keep = recurrent.native_loop_ok
            recurrent.native_loop_ok = lambda k: False
            try:                # kernels are made at the first run
                cell = pyarena.InferenceSession(path)
                cell.run(None, x)
            finally:
                recurrent.native_loop_ok = keep
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.log_severity_level = 1, 3
            ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            runs = {"native": native, "cell": cell, "ort": ref}
            ts = {k: [] for k in runs}
            for _ in range(args.repeat):
                for k, s in runs.items():
                    t = time.perf_counter()
                    s.run(None, x)
                    ts[k].append(time.perf_counter() - t)
            m = {k: float(np.median(v)) * 1e6 for k, v in ts.items()}
            diff = max(float(np.abs(a - b).max())
                       for a, b in zip(native.run(None, x), ref.run(None, x)))
            print(f"| {S} x {H} | {direction} | {m['native']:.0f} | {m['cell']:.0f} | "
                  f"{m['ort']:.0f} | {m['native'] / m['ort']:.2f} | {m['cell'] / m['ort']:.2f} | "
                  f"{m['cell'] / m['native']:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
