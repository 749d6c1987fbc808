"""Real time on the edge: pyarena vs onnxruntime / the TFLite interpreter.

Per model and thread count (1, then 2), in one process, interleaved
round by round (``pyarena.runtime.time_calls``), the median time per
inference of

* ``numpy``   -- pyarena with ``native=False``: NumPy / BLAS kernels and the
  graph as imported (what main's executor runs; the "before" column);
* ``pyarena`` -- the default: fusion rewrite + the C core's native kernels
  (``Executor(threads=N)``, BLAS on N threads);
* ``ref``     -- the reference runtime on the same file: onnxruntime
  (``intra_op_num_threads=N``, all graph optimisations) for ONNX, the TFLite
  interpreter (ai-edge-litert, default XNNPACK delegate, ``num_threads=N``)
  for TFLite;

with the ratios pyarena / ref and numpy / ref, the largest |difference| of
pyarena's outputs from the reference's (same seeded inputs), and the plan
(arena vs lower bound, checked by the validator).  Then the peak RSS of each
runtime, each in a fresh process (model loaded, 3 inferences, one thread).

Models (nothing is downloaded):

* ``mobilenet_v2`` -- the built-in MobileNetV2 at 224 (pyarena.runtime.models,
  seeded weights) written out twice: as ONNX (NCHW, BatchNormalization +
  Clip as in a PyTorch export) and as TFLite (NHWC, BN folded, RELU6 fused,
  SAME padding, as the TFLite converter writes it);
* ``face_detection`` -- tests/data/face_detection_short_range.tflite
  (MediaPipe BlazeFace, vendored);
* ``squeezenet``, ``shufflenet`` -- the onnx package's light models with
  seeded random weights (``--models`` also takes ``inception_v2``,
  ``resnet50``, ``densenet121``);
* every .onnx / .tflite file in ``--dir DIR`` (e.g. the MediaPipe modules:
  see benchmarks/bench_tflite_models.py for where to get them).

    python benchmarks/bench_edge.py [--repeat 15] [--threads 1,2] [--models a,b]
                                    [--dir DIR] [--blas-threads 1] [--no-rss]

``--cpu-time`` times each call by the calling thread's CPU time instead of
the wall clock (``time_calls(clock="cpu")``): when other jobs keep the
cores busy, a preempted call is not charged their time.  With one thread
every runtime computes on the calling thread (onnxruntime with one
intra-op thread, LiteRT / XNNPACK with one thread, pyarena and BLAS on
one), so the figures stay comparable; rows of more threads are not.

``--compare-layout`` adds pyarena with the NHWC pass off (``layout="keep"``:
an ONNX graph stays NCHW; pyarena/runtime/nhwc.py) to the same rounds,
each round starting one runtime later so that none always runs right after
the NumPy path's cache-emptying run.

``--blas-threads 1`` keeps BLAS (pyarena's 1x1 and im2col products) on one
thread whatever the row's thread count: OpenBLAS's threads wait for each
other by spinning, which on a small machine shared with other processes
can cost 10x (measured: MobileNetV2's NumPy path 54 ms on 1 BLAS thread,
394 ms on 2, 2 cores under load).

onnxruntime's worker threads are told not to spin between runs
(``session.intra_op.allow_spinning=0``): with interleaved rounds on a small
machine a spinning pool would steal the next runtime's cores.  Medians
and ratios come from the same run; on a shared machine compare ratios,
not absolute figures.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

FACE = os.path.join(ROOT, "tests", "data", "face_detection_short_range.tflite")
DEFAULT = ["mobilenet_v2", "face_detection", "squeezenet", "shufflenet"]
LIGHT = ["squeezenet", "shufflenet", "inception_v2", "resnet50", "densenet121"]


# -- the model files ------------------------------------------------------------------

def mobilenet_onnx(path):
    """The built-in MobileNetV2 (224, unfused) as an ONNX file (opset 17)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(224)
    inits = [numpy_helper.from_array(np.asarray(t.data), name)
             for name, t in g.tensors.items() if t.role == "constant"]
    nodes = []
    for op in g.ops:
        ins, attrs = list(op.inputs), dict(op.attrs)
        if op.op_type == "Clip":            # opset >= 11: the bounds are inputs
            for k in ("min", "max"):
                name = f"{op.name}.{k}"
                inits.append(numpy_helper.from_array(np.float32(attrs.pop(k)), name))
                ins.append(name)
        nodes.append(helper.make_node(op.op_type, ins, list(op.outputs), name=op.name,
                                      **attrs))
    graph = helper.make_graph(
        nodes, g.name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, g.tensors[n].shape)
         for n in g.inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in g.outputs],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def mobilenet_tflite(path):
    """The same MobileNetV2 as a converter would write it: NHWC, BN folded
    into the convolutions (pyarena's own fusion rewrite does the folding),
    RELU6 fused, SAME padding, MEAN + FULLY_CONNECTED + SOFTMAX head."""
    from helpers.tflite_util import TFLiteBuilder
    from pyarena.runtime import fuse
    from pyarena.runtime.kernels.weight_scales import fold_scales
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(224)
    fuse(g)     # (the folded batch norms' scales stay in notes.weight_scales: applied below)
    B = TFLiteBuilder()
    ids = {}

    def nhwc(shape):
        return (shape[0], *shape[2:], shape[1]) if len(shape) == 4 else tuple(shape)

    def t(name):
        if name not in ids:
            ids[name] = B.tensor(name, nhwc(g.tensors[name].shape))
        return ids[name]

    x = t(g.inputs[0])
    for op in g.ops:
        a = op.attrs
        if op.op_type == "Conv":
            w = fold_scales(np.asarray(g.tensors[op.inputs[1]].data), op.notes.weight_scales)
            b = np.asarray(g.tensors[op.inputs[2]].data)
            act = {None: 0, "CLIP": 3, "RELU": 1}[a.get("activation")]
            s = a["strides"]
            if a.get("group", 1) > 1:                         # depthwise: 1HWC
                wi = B.const(op.inputs[1], w.transpose(1, 2, 3, 0))
                B.op("DEPTHWISE_CONV_2D", [t(op.inputs[0]), wi, B.const(op.inputs[2], b)],
                     [t(op.outputs[0])], ("DepthwiseConv2DOptions", dict(
                         Padding=0, StrideW=s[1], StrideH=s[0], DepthMultiplier=1,
                         FusedActivationFunction=act, DilationWFactor=1,
                         DilationHFactor=1)))
            else:                                            # OHWI
                wi = B.const(op.inputs[1], w.transpose(0, 2, 3, 1))
                B.op("CONV_2D", [t(op.inputs[0]), wi, B.const(op.inputs[2], b)],
                     [t(op.outputs[0])], ("Conv2DOptions", dict(
                         Padding=0, StrideW=s[1], StrideH=s[0],
                         FusedActivationFunction=act, DilationWFactor=1,
                         DilationHFactor=1)))
        elif op.op_type == "Add":
            B.op("ADD", [t(n) for n in op.inputs], [t(op.outputs[0])],
                 ("AddOptions", dict(FusedActivationFunction=0)))
        elif op.op_type == "GlobalAveragePool":
            ids[op.outputs[0]] = B.tensor(op.outputs[0], (1, g.tensors[op.inputs[0]].shape[1]))
            B.op("MEAN", [t(op.inputs[0]), B.const(op.name + ".axes", np.array([1, 2]),
                                                   np.int32)],
                 [ids[op.outputs[0]]], ("ReducerOptions", dict(KeepDims=False)))
        elif op.op_type == "Flatten":
            ids[op.outputs[0]] = ids[op.inputs[0]]
        elif op.op_type == "Gemm":
            w = np.asarray(g.tensors[op.inputs[1]].data)
            b = np.asarray(g.tensors[op.inputs[2]].data)
            B.op("FULLY_CONNECTED", [t(op.inputs[0]), B.const(op.inputs[1], w),
                                     B.const(op.inputs[2], b)],
                 [t(op.outputs[0])], ("FullyConnectedOptions",
                                      dict(FusedActivationFunction=0)))
        elif op.op_type == "Softmax":
            B.op("SOFTMAX", [t(op.inputs[0])], [t(op.outputs[0])],
                 ("SoftmaxOptions", dict(Beta=1.0)))
        else:
            raise ValueError(f"mobilenet_tflite: no TFLite form for {op.op_type}")
    return B.save(path, [x], [t(g.outputs[0])])


def model_files(names, directory, tmp):
    """[(label, path)] for the requested models."""
    from helpers.model_zoo import randomized_light_model
    out = []
    for name in names:
        if name == "mobilenet_v2":
            out.append(("mobilenet_v2.onnx",
                        mobilenet_onnx(os.path.join(tmp, "mobilenet_v2.onnx"))))
            out.append(("mobilenet_v2.tflite",
                        mobilenet_tflite(os.path.join(tmp, "mobilenet_v2.tflite"))))
        elif name == "face_detection":
            out.append(("face_detection.tflite", FACE))
        elif name in LIGHT:
            out.append((f"{name}.onnx", randomized_light_model(
                name, os.path.join(tmp, f"{name}.onnx"))))
        else:
            raise SystemExit(f"unknown model {name!r}; known: {DEFAULT + LIGHT[2:]}")
    if directory:
        for root, _, files in os.walk(directory):
            for f in sorted(files):
                if f.endswith((".onnx", ".tflite")):
                    out.append((f, os.path.join(root, f)))
    return out


# -- the runtimes -----------------------------------------------------------------------

def reference_session(path, threads, specs=None):
    """(run(feeds) -> outputs by name, runtime name) for the reference
    runtime; ``specs``, a dict, gets input name -> (shape, dtype)."""
    specs = {} if specs is None else specs
    if path.endswith(".tflite"):
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_path=path, num_threads=threads)
        it.allocate_tensors()
        ins = it.get_input_details()
        outs = it.get_output_details()
        specs.update({d["name"]: (tuple(d["shape"]), d["dtype"]) for d in ins})

        def run(feeds):
            for d in ins:
                it.set_tensor(d["index"], np.asarray(feeds[d["name"]], dtype=d["dtype"]))
            it.invoke()
            return {d["name"]: it.get_tensor(d["index"]) for d in outs}
        return run, "litert"
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    inputs = [i.name for i in s.get_inputs()]
    specs.update({i.name: (tuple(i.shape), np.float32) for i in s.get_inputs()})
    return (lambda feeds: dict(zip(names, s.run(None, {n: feeds[n] for n in inputs})))), "ort"


def pyarena_session(path, threads, native, layout="auto"):
    from pyarena.importers import load_model
    from pyarena.planning import plan, validate
    from pyarena.runtime import Executor
    g = load_model(path, native=native, layout=layout)
    p = plan(g)
    validate(p)
    ex = Executor(g, p, threads=threads)
    return ex, p


def max_diff(a, b):
    d = 0.0
    for k, v in a.items():
        r = b.get(k)
        if r is not None and r.shape == v.shape and v.size:
            d = max(d, float(np.max(np.abs(v.astype(np.float64) - r))))
    return d


# -- peak RSS, one runtime per fresh process --------------------------------------------

def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def child(path, runtime):
    """One runtime alone in this process (nothing of the others loaded)."""
    if runtime == "ref":
        specs = {}
        run, _ = reference_session(path, 1, specs)
        rng = np.random.default_rng(0)
        feeds = {n: rng.standard_normal(shape).astype(dt) for n, (shape, dt) in specs.items()}
    else:
        from pyarena.runtime import random_feeds, set_blas_threads
        set_blas_threads(1)
        ex, _ = pyarena_session(path, 1, native=(runtime == "pyarena"))
        run = ex.run
        feeds = random_feeds(ex.graph)
    for _ in range(3):
        run(feeds)
    peak = _status("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"peak": peak}))


def peak_rss(path, runtime):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, runtime],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["peak"]


# -- the table --------------------------------------------------------------------------

def mib(n):
    return "-" if n is None else f"{n / 2**20:.0f}"


def time_row(label, path, T, args):
    """One row of the table (False: the model cannot run here)."""
    from pyarena.runtime import median, random_feeds, time_calls
    try:
        ex, p = pyarena_session(path, T, native=True)
        ex_np, _ = pyarena_session(path, T, native=False)
        ex_keep = pyarena_session(path, T, True, "keep")[0] if args.compare_layout else None
        ref, ref_name = reference_session(path, T)
    except Exception as exc:            # report and go on with the others
        print(f"{label:<26}{T:>4}  cannot run: {type(exc).__name__}: {exc}"[:200])
        return False
    feeds = random_feeds(ex_np.graph)
    out = {k: np.array(v) for k, v in ex.run(feeds).items()}
    diff = max_diff(out, {k: np.asarray(v) for k, v in ref(feeds).items()})
    calls = {"numpy": lambda e=ex_np: e.run(feeds), "pyarena": lambda e=ex: e.run(feeds),
             "ref": lambda r=ref: r(feeds)}
    if ex_keep is not None:
        calls["keep"] = lambda e=ex_keep: e.run(feeds)
    ts = time_calls(calls, repeat=args.repeat, warmup=2,
                    clock="cpu" if args.cpu_time else "wall", rotate=args.compare_layout)
    m = {k: median(v) for k, v in ts.items()}
    kms = f"{m['keep'] * 1e3:>9.2f}" if ex_keep is not None else ""
    kr = f"{m['keep'] / m['ref']:>9.2f}x" if ex_keep is not None else ""
    print(f"{label:<26}{T:>4}{m['numpy'] * 1e3:>10.2f}{m['pyarena'] * 1e3:>12.2f}{kms}"
          f"{m['ref'] * 1e3:>9.2f}{ref_name:>7}{m['pyarena'] / m['ref']:>12.2f}x{kr}"
          f"{m['numpy'] / m['ref']:>10.2f}x{m['numpy'] / m['pyarena']:>9.2f}x"
          f"{diff:>11.1e}{p.arena_bytes / max(p.lower_bound_bytes, 1):>12.3f}x", flush=True)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15, help="timed rounds (default 15)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--models", default=",".join(DEFAULT),
                    help=f"comma-separated (default {','.join(DEFAULT)})")
    ap.add_argument("--dir", default=None, help="also every .onnx / .tflite file under DIR")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS threads for pyarena (default: the row's thread count)")
    ap.add_argument("--no-rss", action="store_true", help="skip the per-process peak RSS")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time each call by the calling thread's CPU time, not the wall clock "
                         "(a machine shared with other jobs; 1-thread rows only)")
    ap.add_argument("--compare-layout", action="store_true",
                    help="also time pyarena with the NHWC pass off (layout=\"keep\": ONNX "
                         "stays NCHW) in the same rounds, each round starting one runtime "
                         "later (time_calls(rotate=True)): the 'keep ms' column and keep/ref")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "RUNTIME"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from pyarena.runtime import set_blas_threads
    threads = [int(v) for v in args.threads.split(",")]
    # the models written here go when the run ends
    with tempfile.TemporaryDirectory(prefix="pyarena-edge-") as tmp:
        files = model_files([m for m in args.models.split(",") if m], args.dir, tmp)
        keep = args.compare_layout
        hdr = (f"{'model':<26}{'thr':>4}{'numpy ms':>10}{'pyarena ms':>12}"
               + (f"{'keep ms':>9}" if keep else "") + f"{'ref ms':>9}"
               f"{'ref':>7}{'pyarena/ref':>13}" + (f"{'keep/ref':>10}" if keep else "")
               + f"{'numpy/ref':>11}{'speed-up':>10}{'max|diff|':>11}{'arena/bound':>13}")
        print(hdr)
        print("-" * len(hdr), flush=True)
        rss_rows = []
        for label, path in files:
            for T in threads:
                set_blas_threads(T if args.blas_threads is None else args.blas_threads)
                if not time_row(label, path, T, args):
                    break
            if not args.no_rss:
                rss_rows.append((label, peak_rss(path, "numpy"), peak_rss(path, "pyarena"),
                                 peak_rss(path, "ref")))
    print("\nnumpy: pyarena's NumPy/BLAS kernels, no fusion (main's executor); pyarena: "
          "fusion + native kernels;\nref: onnxruntime (ort) or the TFLite interpreter "
          "(litert); median ms per inference of the same rounds;\nspeed-up = numpy / "
          "pyarena; arena/bound: the plan's arena over the lower bound (1.000x: optimal)."
          + ("\nkeep: pyarena with the NHWC pass off (ONNX stays NCHW)." if keep else ""))
    if rss_rows:
        print(f"\n{'peak RSS, MiB (1 thread)':<26}{'numpy':>8}{'pyarena':>9}{'ref':>8}")
        for label, a, b, c in rss_rows:
            print(f"{label:<26}{mib(a):>8}{mib(b):>9}{mib(c):>8}")
        print("each in a fresh process: model loaded, 3 inferences; VmHWM (whole process, "
              "Python and the runtime's own libraries included)")


if __name__ == "__main__":
    main()
