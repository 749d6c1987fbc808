"""``pyarena run MODEL``: plan a model, bind it into one arena and run it.

MODEL is an .onnx or .tflite file (or a JSON graph).  Inputs are random
(seeded) unless given with ``--feed NAME=FILE.npy``; symbolic input
dimensions are fixed with ``--input NAME=D0,D1,...``.  Prints the time per
inference (median of ``--repeat``), the arena size, its lower bound, the
weights size, the peak RSS and -- when a reference runtime is installed
(onnxruntime for ONNX, ai-edge-litert / tflite-runtime for TFLite) -- the
largest difference from it.  ``--save OUT.npz`` writes every graph output by
name.

Exit status: 0 ok, 2 bad input (unsupported op, bad file, bad arguments).
"""
import os
import resource
import time

import numpy as np

from .errors import InvalidArgumentError
from ._format import human_bytes


def add_parser(sub):
    p = sub.add_parser("run", help="plan, bind and execute a model (.onnx / .tflite)",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("model", metavar="MODEL", help=".onnx or .tflite file (or JSON graph)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="shape of a graph input (binds its symbolic dimensions); repeat")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy",
                   help="input data from a .npy file; repeat (others: seeded random)")
    p.add_argument("--save", metavar="OUT.npz", help="write the outputs by name")
    p.add_argument("--repeat", type=int, default=5, help="timed inferences (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--no-inplace", action="store_true", help="plan without in-place reuse")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the comparison with a reference runtime")
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS threads (default: the BLAS library's own choice)")
    p.set_defaults(run=run)
    return p




def parse_feeds(specs):
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise InvalidArgumentError(f"--feed {spec!r}: expected NAME=FILE.npy")
        if name in feeds:
            raise InvalidArgumentError(f"--feed {name!r} given twice")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"--feed {name}: cannot read {path!r}: {exc}") from None
    return feeds


def reference_outputs(path, feeds):
    """Outputs of a reference runtime for ``path`` (dict), or (None, why)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".onnx":
        try:
            import onnxruntime as ort
        except ImportError:
            return None, "onnxruntime not installed"
        so = ort.SessionOptions()
        so.log_severity_level = 3
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in s.get_outputs()]
        return dict(zip(names, s.run(None, feeds))), "onnxruntime"
    if ext == ".tflite":
        from .importers.tflite import reference_tflite
        return reference_tflite(path, feeds)
    return None, "no reference runtime for this format"


def run(args):
    from ._blas import set_blas_threads
    from .cmd_plan import parse_inputs
    from .executor import Executor, random_feeds
    from .importers import load_model
    from .plan import plan
    if args.repeat < 1:
        raise InvalidArgumentError(f"--repeat must be >= 1, not {args.repeat}")
    if args.threads:
        set_blas_threads(args.threads)
    shapes = parse_inputs(args.input)
    given = parse_feeds(args.feed)
    for name, arr in given.items():
        shapes.setdefault(name, tuple(arr.shape))
    t0 = time.perf_counter()
    g = load_model(args.model, inputs=shapes or None)
    t_load = time.perf_counter() - t0
    for name, arr in given.items():
        if name not in g.inputs:
            raise InvalidArgumentError(f"--feed {name!r}: not a graph input; inputs are "
                                       f"{g.inputs}")
        if tuple(arr.shape) != tuple(g.tensors[name].shape):
            raise InvalidArgumentError(f"--feed {name}: shape {list(arr.shape)} but the "
                                       f"input is {list(g.tensors[name].shape)}")
    p = plan(g, inplace=not args.no_inplace)
    ex = Executor(g, p)
    feeds = random_feeds(g, seed=args.seed)
    feeds.update({k: np.asarray(v, dtype=g.tensors[k].dtype) for k, v in given.items()})
    t0 = time.perf_counter()
    out = ex.run(feeds)
    t_first = time.perf_counter() - t0
    ts = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out = ex.run(feeds)
        ts.append(time.perf_counter() - t0)
    out = {k: np.array(v) for k, v in out.items()}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"model      {args.model}: {len(g.ops)} ops, {len(g.tensors)} tensors "
          f"(loaded in {t_load:.2f} s)")
    for name in g.inputs:
        t = g.tensors[name]
        src = "feed" if name in given else f"random (seed {args.seed})"
        print(f"input      {name} {list(t.shape)} {t.dtype}: {src}")
    print(f"inference  {np.median(ts) * 1e3:.2f} ms median of {args.repeat} "
          f"(first {t_first * 1e3:.1f} ms)")
    print(f"arena      {human_bytes(p.arena_bytes)}  (lower bound {human_bytes(p.lower_bound_bytes)}, "
          f"naive {human_bytes(p.naive_bytes)}, {'optimal' if p.optimal else 'not proven optimal'})")
    print(f"weights    {human_bytes(ex.weights_bytes)} in an Arena")
    print(f"peak RSS   {human_bytes(rss)}")
    for name, v in out.items():
        print(f"output     {name} {list(v.shape)} {v.dtype}  "
              f"[min {v.min() if v.size else 0:.4g}, max {v.max() if v.size else 0:.4g}]")
    if not args.no_reference:
        ref, why = reference_outputs(args.model, feeds)
        if ref is None:
            print(f"reference  none ({why})")
        else:
            diffs = []
            for name, v in out.items():
                r = ref.get(name)
                if r is not None and r.shape == v.shape:
                    diffs.append(float(np.max(np.abs(v.astype(np.float64) - r)))
                                 if v.size else 0.0)
            if diffs:
                print(f"reference  {why}: max |difference| {max(diffs):.3g}")
            else:
                print(f"reference  {why}: outputs not comparable by name")
    if args.save:
        np.savez(args.save, **out)
        print(f"saved      {', '.join(out)} -> {args.save}")
    return 0
