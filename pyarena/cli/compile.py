"""``pyarena compile MODEL -o OUT.pa``: compile a model once, to load it
by ``mmap`` in milliseconds without the model-format packages.

The file holds the graph as it runs (after folding, fusion and layout),
its plan for each input-shape signature and the constants, aligned to be
read where they lie (:mod:`pyarena.importers.compiled`).  ``--input
NAME=D0,D1,...`` fixes an input's shape; give a name again to compile
another signature (``--input x=1,3,320,320 --input x=1,3,640,640``: two).
``pyarena run OUT.pa`` and ``pyarena.InferenceSession("OUT.pa")`` load it.
"""
import os

from .._format import human_bytes
from ..errors import InvalidArgumentError
from .args import parse_bytes, parse_inputs


def add_parser(sub):
    p = sub.add_parser("compile", help="compile a model to a file that loads by mmap",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("model", metavar="MODEL", help=".onnx or .tflite file (or JSON graph)")
    p.add_argument("-o", "--output", metavar="OUT.pa",
                   help="the compiled file (default: MODEL with the extension .pa)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="shape of a graph input; a name given again starts another "
                        "signature")
    p.add_argument("--memory-budget", default=None, metavar="BYTES",
                   help="each signature's plan fits BYTES (arena and kernel state)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of the native kernels a session of the file uses by "
                        "default")
    p.add_argument("--no-native", action="store_true",
                   help="NumPy / BLAS kernels only (no native kernels, no fusion)")
    p.add_argument("--portable", action="store_true",
                   help="keep the weights the stored packed layouts are made of, so that "
                        "another pyarena build runs the file too (it packs them again)")
    p.add_argument("--layout", choices=("auto", "nhwc", "keep"), default="auto",
                   help="ONNX: which NCHW regions run in NHWC (as pyarena run)")
    p.set_defaults(run=run)
    return p


def signatures(specs):
    """``--input`` specs -> a list of {name: shape}, one per signature: a
    name seen again starts the next."""
    groups, cur = [], []
    for spec in specs:
        name = spec.partition("=")[0]
        if any(s.partition("=")[0] == name for s in cur):
            groups.append(cur)
            cur = []
        cur.append(spec)
    groups.append(cur)
    return [parse_inputs(g) for g in groups if g] or None


def run(args):
    from ..importers.compiler import compile_model
    if args.threads is not None and args.threads < 1:
        raise InvalidArgumentError(f"--threads must be >= 1, not {args.threads}")
    out = args.output or os.path.splitext(args.model)[0] + ".pa"
    if os.path.abspath(out) == os.path.abspath(args.model):
        raise InvalidArgumentError(f"-o {out!r} would overwrite the model")
    r = compile_model(args.model, out, signatures(args.input),
                      memory_budget=parse_bytes(args.memory_budget, "--memory-budget"),
                      threads=args.threads, native=not args.no_native, layout=args.layout,
                      portable=args.portable)
    print(f"compiled   {args.model} -> {r['path']}: {human_bytes(r['file_bytes'])} "
          f"({human_bytes(r['weights_bytes'])} constants, {human_bytes(r['document_bytes'])} "
          f"graph and plans; {r['signatures']} signature(s)) in {r['seconds']:.2f} s")
    return 0
