"""What a user pays in memory: pyarena's process RSS, phase by phase, next
to onnxruntime's and the TFLite interpreter's on the same model files.

Each (model, runtime) runs alone in a fresh process, one thread, and
reports its resident set (``/proc/self/status``) at each phase:

* ``base``  -- the interpreter with NumPy (and numpy.random, which makes
  the inputs) and the runtime's own modules imported (pyarena:
  ``pyarena`` and the model-format package);
* ``load``  -- the peak while the model is read (pyarena: ``load_model``;
  the reference: the session / interpreter made);
* ``ready`` -- resident after the plan is bound and the weights placed
  (pyarena: ``Executor``; the reference: ``allocate_tensors`` / session);
* ``peak``  -- VmHWM after 3 inferences (the whole process);

and for pyarena its own accounts: weights (in the weights Arena), the
planned activation arena, the caller's input arrays (``inputs``, made
after ``ready``: the caller's data, not the runtime's) and ``other`` =
peak - base - inputs - weights - arena.  The goal (issue: the global pool
as an edge runtime needs it): peak <= base + inputs + weights + arena +
max(8 MiB, 10%), load peak <= 1.1 x
ready, and peak below the reference runtime's.

    python benchmarks/bench_memory.py [--models a,b] [--dir DIR]

Models as in ``bench_edge.py`` (nothing downloaded): the built-in
MobileNetV2 as ONNX and TFLite, the vendored BlazeFace, the onnx package's
light models with seeded weights (``--models`` also takes ``resnet50``,
``inception_v2``, ``densenet121``), and every file under ``--dir``.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from scratch import scratch_dir

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

DEFAULT = ["mobilenet_v2", "face_detection", "squeezenet", "shufflenet", "resnet50"]


# the two /proc readers are the benchmark's own (pyarena.runtime.footprint
# has the same): the reference runtime's process must not load pyarena
def status(*keys):
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k = line.split(":", 1)[0]
            if k in keys:
                out[k] = int(line.split()[1]) * 1024
    return out


def reset_peak():
    """Start VmHWM again from the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def child(path, runtime, shapes):
    """One runtime alone in this process; prints one JSON line.  ``shapes``:
    input name -> dims for inputs with symbolic dimensions."""
    import bench_edge
    import numpy.random  # noqa: F401  (the random inputs: part of the base)
    rec = {}
    tfl = path.endswith(".tflite")
    if runtime == "ref":
        if tfl:
            import ai_edge_litert.interpreter  # noqa: F401
        else:
            import onnxruntime  # noqa: F401
        rec["base"] = status("VmRSS")["VmRSS"]
        reset_peak()
        specs = {}
        run, _ = bench_edge.reference_session(path, 1, specs)
        rec["load"] = status("VmHWM")["VmHWM"]
        rec["ready"] = status("VmRSS")["VmRSS"]
        rng = np.random.default_rng(0)
        feeds = {n: _draw(rng, shapes.get(n, shape), dt) for n, (shape, dt) in specs.items()}
    else:
        import pyarena  # noqa: F401
        from pyarena.importers import load_model
        from pyarena.planning import plan
        from pyarena.runtime import Executor, random_feeds, set_blas_threads
        if tfl:                 # the format package is part of the base
            import tflite  # noqa: F401
        else:
            import onnx  # noqa: F401
        set_blas_threads(1)
        rec["base"] = status("VmRSS")["VmRSS"]
        reset_peak()
        g = load_model(path, inputs=shapes or None)
        rec["load"] = status("VmHWM")["VmHWM"]
        rec["loaded"] = status("VmRSS")["VmRSS"]
        p = plan(g)
        ex = Executor(g, p, threads=1)
        rec["ready"] = status("VmRSS")["VmRSS"]
        rec["weights"] = ex.weights_bytes
        rec["arena"] = p.arena_bytes
        run = ex.run
        feeds = random_feeds(g)
    rec["inputs"] = sum(v.nbytes for v in feeds.values())
    for _ in range(3):
        run(feeds)
    st = status("VmHWM", "VmRSS", "RssAnon", "RssFile")
    rec.update(peak=st["VmHWM"], end=st["VmRSS"], anon=st["RssAnon"], file=st["RssFile"])
    print(json.dumps(rec))


def _draw(rng, shape, dt):
    """As pyarena.runtime.random_feeds draws them: float32 with no float64
    temporary (which would count in the reference runtime's peak)."""
    dt = np.dtype(dt)
    if dt == np.float32:
        return rng.standard_normal(shape, dtype=np.float32)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(0, 2, size=shape).astype(dt)


def measure(path, runtime, shapes):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, runtime,
                        json.dumps(shapes)], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def parse_inputs(specs):
    """``FILE:NAME=D0,D1,...`` (repeatable) -> {file name: {input: dims}}."""
    out = {}
    for spec in specs:
        try:
            fname, rest = spec.split(":", 1)
            name, dims = rest.split("=", 1)
            out.setdefault(fname, {})[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise SystemExit(f"--input {spec!r}: expected FILE:NAME=D0,D1,...") from None
    return out


def mib(n):
    return "-" if n is None else f"{n / 2**20:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT),
                    help=f"comma-separated (default {','.join(DEFAULT)})")
    ap.add_argument("--dir", default=None, help="also every .onnx / .tflite file under DIR")
    ap.add_argument("--input", action="append", default=[], metavar="FILE:NAME=D0,D1,...",
                    help="dims of a symbolic input of model file FILE (its base name); "
                         "repeat")
    ap.add_argument("--child", nargs=3, metavar=("MODEL", "RUNTIME", "SHAPES"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], json.loads(args.child[2]))
        return
    shapes = parse_inputs(args.input)
    import bench_edge
    tmp = scratch_dir("pyarena-memory-")
    files = bench_edge.model_files([m for m in args.models.split(",") if m], args.dir, tmp)
    hdr = (f"{'model':<36}{'base':>7}{'load':>7}{'ready':>7}{'peak':>7}{'inputs':>7}"
           f"{'weights':>9}"
           f"{'arena':>7}{'other':>7}{'goal':>7}{'load/rdy':>9}{'ref base':>9}"
           f"{'ref peak':>9}{'ref':>7}{'peak/ref':>9}")
    print("MiB, one fresh process per runtime and model, one thread")
    print(hdr)
    print("-" * len(hdr), flush=True)
    for label, path in files:
        sh = shapes.get(os.path.basename(path), {})
        a = measure(path, "pyarena", sh)
        r = measure(path, "ref", sh)
        ref = "litert" if path.endswith(".tflite") else "ort"
        if "error" in a:
            print(f"{label:<36}  pyarena failed: {a['error']}")
            continue
        held = a["base"] + a["inputs"]      # the caller's input arrays are the caller's
        other = a["peak"] - held - a["weights"] - a["arena"]
        goal = held + a["weights"] + a["arena"] + max(8 << 20, 0.1 * (
            a["weights"] + a["arena"]))
        rp = r.get("peak")
        print(f"{label:<36}{mib(a['base']):>7}{mib(a['load']):>7}{mib(a['ready']):>7}"
              f"{mib(a['peak']):>7}{mib(a['inputs']):>7}{mib(a['weights']):>9}"
              f"{mib(a['arena']):>7}"
              f"{mib(other):>7}{mib(goal):>7}{a['load'] / a['ready']:>9.2f}"
              f"{mib(r.get('base')):>9}{mib(rp):>9}{ref:>7}"
              f"{(a['peak'] / rp if rp else float('nan')):>9.2f}", flush=True)
    print("\nbase: interpreter + NumPy + the runtime imported; load: peak while loading; "
          "ready: resident once bound;\npeak: VmHWM after 3 inferences; inputs: the "
          "caller's input arrays (made after ready, the same for both runtimes);\n"
          "other = peak - base - inputs - weights - arena; goal = base + inputs + weights + "
          "arena + max(8 MiB, 10%).")


if __name__ == "__main__":
    main()
