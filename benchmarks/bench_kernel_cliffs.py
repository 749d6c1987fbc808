"""Kernels that loop in Python per element: before and after, against
onnxruntime, in one run.

    python benchmarks/bench_kernel_cliffs.py [--repeat 7] [--seqs 8,16,32,64] [--hidden 256]
        [--skip-before] [--ops]

Three tables, every figure measured in this run:

1. A torch-style transformer encoder (``encoder``: 2 layers, LayerNormalization,
   Erf-based GELU, attention as MatMul / Softmax, the reshape targets
   computed from the input's Shape as torch exports them) through
   ``pyarena.InferenceSession`` and onnxruntime (one thread,
   ``intra_op_num_threads=1``) at each sequence length: medians per
   inference and the ratio.  "before" is the same session with
   ``MIN_STEP_ELEMENTS`` (and the quantized kernels' ``STEP_ELEMENTS``) set
   to 1 while its kernels are built, which is the code before the floor (a
   kernel took as many elements per step as the scratch budget the slack
   planner left it, down to one).
2. The same for a model of two com.microsoft ``QLinearMul`` on 1x64x56x56
   uint8 tensors.
3. (``--ops``) every kernel the guard of tests/runtime/test_kernel_cliffs.py
   covers, on its mid-sized input with a one-byte scratch budget, before
   and after, and the ratio to its vectorised baseline.
"""
import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # the checkout, when run as a script
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # helpers


def encoder(hidden=256, heads=4, layers=2, ffn=4, seed=0, opset=17):
    """A torch-exported-style encoder as an ONNX model (input "x": batch,
    seq, hidden)."""
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, v, dt=np.float32):
        inits.append(nh.from_array(np.asarray(v, dt), name))
        return name

    def weight(name, *shape):
        w = rng.standard_normal(shape) / np.sqrt(shape[0])
        return const(name, w)

    def node(op, ins, out, **kw):
        nodes.append(h.make_node(op, ins, [out], **kw))
        return out
    dh = hidden // heads
    const("sqrt2", np.sqrt(2))
    const("one", 1.0)
    const("half", 0.5)
    const("scale", np.sqrt(dh))
    x = "x"
    shp = node("Shape", [x], "shp")             # torch: sizes read from the input
    bs = node("Slice", [shp, const("s0", [0], np.int64), const("s2", [2], np.int64)], "bs")
    qshape = node("Concat", [bs, const("hd", [heads, dh], np.int64)], "qshape", axis=0)
    oshape = node("Concat", [bs, const("mh", [hidden], np.int64)], "oshape", axis=0)
    for layer in range(layers):
        p = f"l{layer}_"

        def proj(inp, name, n_in, n_out):
            m = node("MatMul", [inp, weight(p + name + "_w", n_in, n_out)], p + name + "_mm")
            return node("Add", [m, const(p + name + "_b", np.zeros(n_out))], p + name)

        def heads_of(t):
            r = node("Reshape", [t, qshape], t + "_r")
            return node("Transpose", [r], t + "_t", perm=[0, 2, 1, 3])
        q, k, v = (heads_of(proj(x, n, hidden, hidden)) for n in "qkv")
        kt = node("Transpose", [k], k + "T", perm=[0, 1, 3, 2])
        s = node("Div", [node("MatMul", [q, kt], p + "scores"), "scale"], p + "scaled")
        a = node("Softmax", [s], p + "attn", axis=-1)
        o = node("Transpose", [node("MatMul", [a, v], p + "ctx")], p + "ctx_t",
                 perm=[0, 2, 1, 3])
        o = proj(node("Reshape", [o, oshape], p + "ctx_r"), "o", hidden, hidden)
        ln = node("LayerNormalization", [node("Add", [x, o], p + "res1"),
                                         const(p + "g1", np.ones(hidden)),
                                         const(p + "b1", np.zeros(hidden))],
                  p + "ln1", axis=-1, epsilon=1e-5)
        f = proj(ln, "f1", hidden, hidden * ffn)
        g = node("Erf", [node("Div", [f, "sqrt2"], p + "g_div")], p + "g_erf")
        g = node("Mul", [node("Mul", [f, node("Add", [g, "one"], p + "g_add")], p + "g_mul"),
                         "half"], p + "gelu")
        f = proj(g, "f2", hidden * ffn, hidden)
        x = node("LayerNormalization", [node("Add", [ln, f], p + "res2"),
                                        const(p + "g2", np.ones(hidden)),
                                        const(p + "b2", np.zeros(hidden))],
                 p + "ln2", axis=-1, epsilon=1e-5)
    io = [h.make_tensor_value_info(n, TP.FLOAT, ["batch", "seq", hidden]) for n in ("x", x)]
    m = h.make_model(h.make_graph(nodes, "encoder", io[:1], io[1:], inits),
                     opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def qlinear_mul(shape=(1, 64, 56, 56)):
    """Two com.microsoft QLinearMul of uint8 tensors (inputs "a", "b")."""
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh
    inits = [nh.from_array(np.array(v, dt), n) for n, v, dt in
             (("sa", 0.02, np.float32), ("za", 128, np.uint8), ("sb", 0.01, np.float32),
              ("zb", 120, np.uint8), ("sy", 0.03, np.float32), ("zy", 125, np.uint8))]
    nodes = [h.make_node("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"],
                         domain="com.microsoft"),
             h.make_node("QLinearMul", ["y", "sy", "zy", "a", "sa", "za", "sy", "zy"], ["y2"],
                         domain="com.microsoft")]
    ins = [h.make_tensor_value_info(n, TP.UINT8, list(shape)) for n in ("a", "b")]
    g = h.make_graph(nodes, "qmul", ins, [h.make_tensor_value_info("y2", TP.UINT8, list(shape))],
                     inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


@contextlib.contextmanager
def one_step_per_budget():
    """A context in which kernels are built as before the floor (the
    quantized kernels' floor too)."""
    from unittest import mock

    from pyarena.runtime.kernels import quantization, registry
    with mock.patch.object(registry, "MIN_STEP_ELEMENTS", 1), \
            mock.patch.object(quantization, "STEP_ELEMENTS", 1):
        yield


def medians(runs, repeat):
    """{name: median seconds} of the callables in ``runs``, called in turn."""
    times = {k: [] for k in runs}
    for _ in range(repeat):
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def compare(path, feeds_list, labels, repeat, before):
    import onnxruntime as ort

    import pyarena
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    after = pyarena.InferenceSession(path)
    # "before": a second session whose kernels are built (at its first run
    # of a signature, and again whenever it switches signatures) without the
    # floor: every call of it runs under the patch, every other call not
    old = pyarena.InferenceSession(path) if before else None

    def run_old(feeds):
        with one_step_per_budget():
            return old.run(None, feeds)
    rows = []
    for label, feeds in zip(labels, feeds_list):
        want = ref.run(None, feeds)[0]
        got = after.run(None, feeds)[0]
        diff = float(np.abs(got.astype(np.float64) - want).max())
        runs = {"ort": lambda f=feeds: ref.run(None, f),
                "after": lambda f=feeds: after.run(None, f)}
        if old is not None:
            run_old(feeds)
            runs["before"] = lambda f=feeds: run_old(f)
        m = medians(runs, repeat if old is None else max(3, repeat // 2))
        rows.append((label, m, diff))
    return rows


def print_rows(title, rows):
    print(f"\n{title}")
    print("| input | onnxruntime ms | pyarena before ms | before / ort | pyarena ms | "
          "pyarena / ort | max abs diff |")
    print("|---|---|---|---|---|---|---|")
    for label, m, diff in rows:
        b = m.get("before")
        bs = (f"{b * 1e3:.2f} | {b / m['ort']:.0f}x" if b is not None else "- | -")
        print(f"| {label} | {m['ort'] * 1e3:.3f} | {bs} | {m['after'] * 1e3:.3f} | "
              f"{m['after'] / m['ort']:.1f}x | {diff:.2g} |")


def ops_table(repeat):
    from unittest import mock

    from helpers import kernel_timing as kt
    with tempfile.TemporaryDirectory() as d:
        with mock.patch.object(kt, "BUDGETS", (1,)):
            after, _ = kt.survey(d, repeat=repeat)
            with one_step_per_budget():
                before, _ = kt.survey(d, ops=after, repeat=max(2, repeat // 2))
    print("\nkernels on their mid-sized input, one-byte scratch budget")
    print("| op | before ms | before / baseline | after ms | after / baseline |")
    print("|---|---|---|---|---|")
    order = sorted(after, key=lambda op: -before[op][1][0] / max(before[op][1][1], 1e-9))
    for op in order:
        (tb, bb), (ta, ba) = before[op][1], after[op][1]
        print(f"| {op} | {tb * 1e3:.3f} | {tb / bb:.1f}x | {ta * 1e3:.3f} | {ta / ba:.1f}x |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--seqs", default="8,16,32,64")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--skip-before", action="store_true")
    ap.add_argument("--ops", action="store_true", help="also the per-kernel table")
    a = ap.parse_args()
    import onnx
    import onnxruntime

    import pyarena
    print(f"pyarena {pyarena.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"numpy {np.__version__}")
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "encoder.onnx")
        onnx.save(encoder(hidden=a.hidden), path)
        seqs = [int(s) for s in a.seqs.split(",")]
        feeds = [{"x": rng.standard_normal((1, s, a.hidden)).astype(np.float32)} for s in seqs]
        rows = compare(path, feeds, [f"seq {s}" for s in seqs], a.repeat, not a.skip_before)
        print_rows(f"transformer encoder, 2 layers, hidden {a.hidden}, 4 heads, FFN x4", rows)
        path = os.path.join(d, "qmul.onnx")
        onnx.save(qlinear_mul(), path)
        feeds = [{k: rng.integers(0, 256, (1, 64, 56, 56)).astype(np.uint8) for k in "ab"}]
        rows = compare(path, feeds, ["1x64x56x56 uint8"], a.repeat, not a.skip_before)
        print_rows("two com.microsoft QLinearMul", rows)
    if a.ops:
        ops_table(a.repeat)


if __name__ == "__main__":
    main()
