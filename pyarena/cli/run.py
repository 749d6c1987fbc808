"""``pyarena run MODEL``: plan a model, bind it into one arena and run it.

MODEL is an .onnx or .tflite file, a compiled model (``pyarena compile``) or
a JSON graph.  ``--threads N`` runs
the native kernels on N threads, ``--blas-threads M`` BLAS on M (both 1 by
default); ``--profile`` prints the time per op type and kernel path and the
slowest ops.  Inputs are random
(seeded) unless given with ``--feed NAME=FILE.npy``; symbolic input
dimensions are fixed with ``--input NAME=D0,D1,...`` (without it, batch
dimensions take 1 and others the model's declared size: one line says
what was chosen, :mod:`.shapes`).  Prints the time per
inference (median of ``--repeat``), the arena size, its lower bound, the
weights size, the peak RSS and -- when a reference runtime is installed
(onnxruntime for ONNX, ai-edge-litert / tflite-runtime for TFLite) -- the
largest difference from it.  ``--save OUT.npz`` writes every graph output by
name.

Exit status: 0 ok, 2 bad input (unsupported op, bad file, bad arguments, a
model over ``--max-memory``), 3 no plan within ``--memory-budget``.
"""
import sys
import time

import numpy as np

from .._format import human_bytes
from ..errors import GraphError, InvalidArgumentError, PlanInfeasibleError
from ..planning import PlanOptions
from ..planning.result import budget_text, layout_text
from ..graph.dtypes import bytes_by_dtype, format_by_dtype
from .args import parse_bytes, parse_feeds, parse_inputs, parse_values
from .shapes import load_filling


def add_parser(sub):
    p = sub.add_parser("run", help="plan, bind and execute a model (.onnx / .tflite)",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("model", metavar="MODEL", help=".onnx or .tflite file (or JSON graph)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="shape of a graph input (binds its symbolic dimensions); repeat")
    p.add_argument("--value", action="append", default=[], metavar="NAME=NUMBER",
                   help="an input fixed to a value (ONNX): the model is specialised on it, "
                        "an If on it takes its branch (e.g. --value sr=16000); repeat")
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy",
                   help="input data from a .npy file; repeat (others: seeded random)")
    p.add_argument("--save", metavar="OUT.npz", help="write the outputs by name")
    p.add_argument("--repeat", type=int, default=5, help="timed inferences (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--no-inplace", action="store_true", help="plan without in-place reuse")
    p.add_argument("--no-inplace-concat", action="store_true",
                   help="Concat copies every input (no producer writes into its slice)")
    p.add_argument("--wide-scratch", action="store_true",
                   help="keep every op's default workspace even where it raises the arena "
                        "(by default an op at the peak gets narrower bands that fit the "
                        "slack at its step)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the comparison with a reference runtime")
    p.add_argument("--threads", type=int, default=1,
                   help="threads of the native kernels (default 1)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="BLAS threads (default 1; 0: the BLAS library's own choice). "
                        "OpenBLAS's threads wait by spinning: on a small shared machine "
                        "2 threads measured 7-100x slower than 1")
    p.add_argument("--profile", action="store_true",
                   help="print where the time goes: per op type and the slowest ops")
    p.add_argument("--no-native", action="store_true",
                   help="NumPy / BLAS kernels only (no native kernels, no fusion)")
    p.add_argument("--layout", choices=("auto", "nhwc", "keep"), default="auto",
                   help="ONNX: run NCHW regions in NHWC where measured faster (auto, the "
                        "default), in every region with a convolution (nhwc), or never "
                        "(keep)")
    p.add_argument("--max-memory", default=None, metavar="BYTES",
                   help="memory limit for weights + arena (e.g. 8G; default: the "
                        "physical memory); a larger model is refused before allocating")
    p.add_argument("--memory-budget", default=None, metavar="BYTES",
                   help="run the fastest plan whose arena and kernel state together fit "
                        "BYTES (e.g. 512K): the given op order, then the scheduled one, "
                        "then smaller operator scratch, then stages in row bands (exit 3 "
                        "if none)")
    p.set_defaults(run=run)
    return p


def run(args):
    from ..importers import load_model
    from ..importers.reference import reference_outputs
    from ..runtime import Executor, median, random_feeds, set_blas_threads, time_calls
    from ..runtime.footprint import Footprint, weights_info
    from ..runtime.slack import plan_to_run
    _check_counts(args)
    if args.blas_threads:
        set_blas_threads(args.blas_threads)
    options = plan_options(args)
    max_memory = options.max_memory
    shapes = parse_inputs(args.input)
    values = parse_values(args.value)
    given = parse_feeds(args.feed)
    from_feeds = {name for name in given if name not in shapes}
    for name, arr in given.items():
        shapes.setdefault(name, tuple(arr.shape))
    fp = Footprint()
    _import_format(args.model)
    fp.mark("base")
    t0 = time.perf_counter()
    try:
        g = load_filling(args.model, shapes, lambda inputs: load_model(
            args.model, inputs=inputs or None, max_memory=max_memory,
            native=not args.no_native, values=values or None, layout=args.layout), "run")
    except GraphError as exc:
        name = getattr(exc, "unknown_input", None)
        if name in from_feeds:      # the shape came from --feed, not --input
            raise InvalidArgumentError(f"--feed {name!r}: not a graph input; "
                                       f"{str(exc).split('; ', 1)[1]}") from None
        raise
    t_load = time.perf_counter() - t0
    fp.mark("load", g.weights.stats().used if g.weights is not None else 0)
    _check_feeds(g, given)
    try:    # scratch within the slack unless --wide-scratch (a budget sizes its own)
        p = g.stored_plan if g.stored_plan is not None else \
            plan_to_run(g, options, slack=not args.wide_scratch)
    except PlanInfeasibleError as exc:
        print(f"pyarena run: infeasible: {exc}", file=sys.stderr)
        return 3
    ex = Executor(g, p, max_memory=max_memory, threads=args.threads)
    feeds = random_feeds(g, seed=args.seed)
    feeds.update({k: np.asarray(v, dtype=g.tensors[k].dtype) for k, v in given.items()})
    fp.mark("bind", ex.weights_bytes)
    first = time_calls({"first": lambda: ex.run(feeds)}, repeat=1, warmup=0)["first"][0]
    ts = time_calls({"run": lambda: ex.run(feeds)}, repeat=args.repeat, warmup=0)["run"]
    out = {k: np.array(v) for k, v in ex.run(feeds).items()}
    fp.mark("run", ex.weights_bytes)
    wi = weights_info(ex)
    print(f"model      {args.model}: {len(g.ops)} ops, {len(g.tensors)} tensors "
          f"(loaded in {t_load:.2f} s)")
    for name in g.inputs:
        t = g.tensors[name]
        src = "feed" if name in given else f"random (seed {args.seed})"
        print(f"input      {name} {list(t.shape)} {t.dtype}: {src}")
    print(f"inference  {median(ts) * 1e3:.2f} ms median of {args.repeat} "
          f"(first {first * 1e3:.1f} ms)")
    print(f"arena      {human_bytes(p.arena_bytes)}  (lower bound "
          f"{human_bytes(p.lower_bound_bytes)}, naive {human_bytes(p.naive_bytes)}, "
          f"{'optimal' if p.optimal else 'not proven optimal'})")
    _notes(p, g, ex)
    print(f"weights    {human_bytes(ex.weights_bytes)} in the weights arena "
          f"({format_by_dtype(wi['by_dtype']) or 'none'} of them the graph's constants; "
          f"{human_bytes(wi['mapped'])} more read from the file at setup only); "
          f"file constants: {format_by_dtype(bytes_by_dtype(g, True)) or 'none'}")
    print(f"tensors    {format_by_dtype(bytes_by_dtype(g, False))} (planned, before reuse)")
    print(_memory(fp, args.model, g, ex, p, feeds, wi))
    for name, v in out.items():
        print(f"output     {name} {list(v.shape)} {v.dtype}  "
              f"[min {v.min() if v.size else 0:.4g}, max {v.max() if v.size else 0:.4g}]")
    if args.profile:
        print(format_profile(ex.profile(feeds, repeat=args.repeat)))
    if not args.no_reference:
        fixed = {k: np.asarray(v, np.int64 if isinstance(v, int) else np.float32)
                 for k, v in values.items()}
        print(_compare(out, *reference_outputs(args.model, {**feeds, **fixed})))
    if args.save:
        np.savez(args.save, **out)
        print(f"saved      {', '.join(out)} -> {args.save}")
    return 0


def _memory(fp, path, g, ex, p, feeds, wi):
    """The memory report: the peak split into its parts; a compiled model's
    constants and layouts, read where they lie in its file, as mapped
    weights (resident, of the file's size)."""
    mapped = None
    if g.stored_plan is not None:
        import os
        from ..runtime.footprint import file_resident
        mapped = (file_resident(path) or 0, os.path.getsize(path))
    return fp.format(ex.weights_bytes, p.arena_bytes, sum(v.nbytes for v in feeds.values()),
                     mapped)


def _notes(p, g, ex):
    """The budget the plan met (arena + kernel state), the state the bound
    kernels hold, and what the NHWC pass converted, if any."""
    if p.budget is not None:
        print(f"budget     {budget_text(p.budget)}")
    print(f"kernels    state {ex.kernel_state_bytes:,} B (what the kernels lay out beyond the "
          f"weights: packed weights of each band geometry, tables)")
    if g.relaid:
        print(f"layout     {layout_text(g.relaid)}")


def _check_counts(args):
    if args.repeat < 1:
        raise InvalidArgumentError(f"--repeat must be >= 1, not {args.repeat}")
    if args.threads < 1:
        raise InvalidArgumentError(f"--threads must be >= 1, not {args.threads}")
    if args.blas_threads < 0:
        raise InvalidArgumentError(f"--blas-threads must be >= 0, not {args.blas_threads}")
    _check_compiled(args)


def _check_compiled(args):
    """A compiled model runs its own plans: the flags that would plan it
    otherwise are refused (compile it again with them)."""
    from ..importers import sniff_format
    try:
        if sniff_format(args.model) != "compiled":
            return
    except GraphError:      # (a missing file: load_model says so)
        return
    given = [flag for flag, on in (("--memory-budget", args.memory_budget is not None),
                                   ("--no-inplace", args.no_inplace),
                                   ("--no-inplace-concat", args.no_inplace_concat),
                                   ("--wide-scratch", args.wide_scratch),
                                   ("--no-native", args.no_native),
                                   ("--value", bool(args.value)),
                                   ("--layout", args.layout != "auto")) if on]
    if given:
        raise InvalidArgumentError(f"{args.model} is compiled: its plans and layout are made; "
                                   f"{', '.join(given)} would change them (give them to "
                                   f"pyarena compile)")


def plan_options(args):
    """The :class:`PlanOptions` of ``run``'s flags (--no-inplace,
    --no-inplace-concat, --max-memory, --memory-budget)."""
    return PlanOptions(inplace=not args.no_inplace, inplace_concat=not args.no_inplace_concat,
                       max_memory=parse_bytes(args.max_memory, "--max-memory"),
                       memory_budget=parse_bytes(args.memory_budget, "--memory-budget"))


def _import_format(path):
    """Import the model format's package (and numpy.random, which makes
    the random inputs: 5 MiB of code) before the baseline reading, so that
    the baseline holds the libraries and the phases only the model."""
    import numpy.random  # noqa: F401
    from ..importers import sniff_format
    try:
        fmt = sniff_format(path)
        if fmt in ("onnx", "tflite"):
            __import__(fmt)
    except Exception:       # missing file or package: load_model says so
        pass


def format_profile(rows, top=10):
    """The ``--profile`` report from Executor.profile(): time per op type
    and kernel path (share, op count), then the slowest ops with their
    path and fused activation."""
    total = sum(t for _, _, t in rows) or 1e-12
    by_type = {}
    for op, path, t in rows:
        key = f"{op.op_type} [{path}]"
        tt, n = by_type.get(key, (0.0, 0))
        by_type[key] = (tt + t, n + 1)
    lines = [f"profile    {total * 1e3:.2f} ms in ops (median per op); per op type [path]:"]
    for name, (t, n) in sorted(by_type.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"  {name:<30}{t * 1e3:9.3f} ms {t / total:6.1%}  {n:4d} op(s)")
    lines.append(f"  slowest {min(top, len(rows))} ops:")
    for op, path, t in sorted(rows, key=lambda r: -r[2])[:top]:
        act = op.attrs.get("activation")
        lines.append(f"  {t * 1e3:9.3f} ms  {op.op_type:<14}{path:<10}{op.name}"
                     + (f" (+{act})" if act else ""))
    return "\n".join(lines)


def _check_feeds(g, given):
    for name, arr in given.items():
        if name not in g.inputs:
            raise InvalidArgumentError(f"--feed {name!r}: not a graph input; inputs are "
                                       f"{g.inputs}")
        if tuple(arr.shape) != tuple(g.tensors[name].shape):
            raise InvalidArgumentError(f"--feed {name}: shape {list(arr.shape)} but the "
                                       f"input is {list(g.tensors[name].shape)}")
        want = np.dtype(g.tensors[name].dtype)
        if arr.dtype.kind == "c" and want.kind != "c":
            raise InvalidArgumentError(f"--feed {name}: complex values ({arr.dtype}) for a "
                                       f"{want} input would lose their imaginary part")
        if arr.dtype.kind not in "biufc":
            raise InvalidArgumentError(f"--feed {name}: {arr.dtype} data for a {want} input")


def _compare(out, ref, why):
    """The report line comparing ``out`` with a reference runtime's outputs."""
    if ref is None:
        return f"reference  none ({why})"
    diffs = []
    for name, v in out.items():
        r = ref.get(name)
        if r is not None and r.shape == v.shape:
            diffs.append(float(np.max(np.abs(v.astype(np.float64) - r))) if v.size else 0.0)
    if not diffs:
        return f"reference  {why}: outputs not comparable by name"
    return f"reference  {why}: max |difference| {max(diffs):.3g}"
