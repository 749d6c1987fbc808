"""What a memory budget saves where it counts: the process's peak RSS.

    python benchmarks/bench_budget_rss.py [--models palm,pose,...] [--rounds 3]
                                          [--fraction 0.5] [--repeat 10]

For each real model (MediaPipe TFLite files under ``/work/models/mp``, the
RapidOCR ONNX files; a missing file is skipped with a message) the
fixed-order bound is read from the default plan (``lower_bound_bytes`` of
the given order with the graph's scratch) and the model is run as
``pyarena run`` runs it -- load, plan, bind, infer -- in a fresh
subprocess, without a budget and with ``memory_budget = fraction x
bound``, alternating, ``--rounds`` times each.  A run reports its peak
RSS (``VmHWM``, the whole process), its arena, its kernel state and the
planning transient (``plan.budget``; measured at bind for the default
plan), and the median of ``--repeat`` inferences.  Columns: arena default
/ budget, kernel state default / budget, peak RSS default / budget
(median of the rounds), time ratio (budget / default medians), and the
RSS drop over the arena saving (the goal: >= 0.5).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MP = "/work/models/mp/mediapipe/modules"
OCR = "/work/models/rapidocr_onnxruntime-1.4.4-py3-none-any/rapidocr_onnxruntime/models"

MODELS = {
    "palm": f"{MP}/palm_detection/palm_detection_full.tflite",
    "pose": f"{MP}/pose_landmark/pose_landmark_full.tflite",
    "hand": f"{MP}/hand_landmark/hand_landmark_full.tflite",
    "face": f"{MP}/face_detection/face_detection_short_range.tflite",
    "selfie": f"{MP}/selfie_segmentation/selfie_segmentation.tflite",
    "palm_lite": f"{MP}/palm_detection/palm_detection_lite.tflite",
    "hand_lite": f"{MP}/hand_landmark/hand_landmark_lite.tflite",
    "pose_det": f"{MP}/pose_detection/pose_detection.tflite",
    "iris": f"{MP}/iris_landmark/iris_landmark.tflite",
    "face_mesh": f"{MP}/face_landmark/face_landmark.tflite",
    "ocr_cls": f"{OCR}/ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "ocr_det": f"{OCR}/ch_PP-OCRv4_det_infer.onnx",
}
INPUTS = {      # the ONNX files' symbolic dims, as bench_compiled.py gives them
    "ocr_cls": {"x": [1, 3, 48, 192]},
    "ocr_det": {"x": [1, 3, 320, 320]},
}

CHILD = r"""
import json, sys, time
import numpy as np, numpy.random
path, budget, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
inputs = json.loads(sys.argv[4]) or None
__import__("onnx" if path.endswith(".onnx") else "tflite")
from pyarena.importers import load_model
from pyarena.planning import PlanOptions
from pyarena.runtime import Executor, median, random_feeds, time_calls
from pyarena.runtime.slack import plan_to_run
from pyarena.runtime.footprint import resident
g = load_model(path, inputs=inputs)
p = plan_to_run(g, PlanOptions(memory_budget=budget or None))
ex = Executor(g, p)
feeds = random_feeds(g, seed=0)
ex.run(feeds)
ts = time_calls({"run": lambda: ex.run(feeds)}, repeat=repeat, warmup=0)["run"]
b = p.budget or {}
print(json.dumps({"peak": resident()[1], "arena": p.arena_bytes,
                  "state": ex.kernel_state_bytes, "time": median(ts),
                  "bound": (b.get("fixed_order_bound_bytes") or p.lower_bound_bytes),
                  "total": b.get("total_bytes")}))
"""


def child(path, budget, repeat, inputs=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(budget), str(repeat),
                          json.dumps(inputs)],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bound_of(path, inputs=None):
    """The fixed-order bound: the default plan's lower bound (given order,
    the graph's scratch)."""
    from pyarena import plan
    from pyarena.importers import load_model
    return plan(load_model(path, inputs=inputs)).lower_bound_bytes


def measure(name, path, fraction, rounds, repeat):
    inputs = INPUTS.get(name)
    budget = max(1, int(bound_of(path, inputs) * fraction))
    runs = {"default": [], "budget": []}
    for _ in range(rounds):         # alternating: drift hits both alike
        runs["default"].append(child(path, 0, repeat, inputs))
        runs["budget"].append(child(path, budget, repeat, inputs))
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("peak", "arena", "state",
                                                                "time")}
           for k, v in runs.items()}
    d, b = med["default"], med["budget"]
    saving = d["arena"] - b["arena"]
    drop = d["peak"] - b["peak"]
    return {"model": name, "budget": budget, "arena_d": d["arena"], "arena_b": b["arena"],
            "state_d": d["state"], "state_b": b["state"], "peak_d": d["peak"],
            "peak_b": b["peak"], "time_ratio": b["time"] / d["time"],
            "ratio": drop / saving if saving > 0 else float("nan")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="palm,pose,hand,face,selfie")
    ap.add_argument("--fraction", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args(argv)
    kib = lambda n: f"{n / 1024:,.0f}"
    mib = lambda n: f"{n / 2**20:.2f}"
    print("| model | budget KiB | arena KiB default / budget | kernel state KiB default / "
          "budget | peak RSS MiB default / budget | time ratio | RSS drop / arena saving |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        path = MODELS.get(name, name)
        if not os.path.exists(path):
            print(f"| {name} | skipped: {path} not found | | | | | |")
            continue
        try:
            r = measure(name, path, args.fraction, args.rounds, args.repeat)
        except Exception as exc:  # a model that fails is a row, not the end of the table
            print(f"| {name} | failed: {type(exc).__name__}: {exc} | | | | | |")
            continue
        print(f"| {name} | {kib(r['budget'])} | {kib(r['arena_d'])} / {kib(r['arena_b'])} | "
              f"{kib(r['state_d'])} / {kib(r['state_b'])} | {mib(r['peak_d'])} / "
              f"{mib(r['peak_b'])} | {r['time_ratio']:.2f} | {r['ratio']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
