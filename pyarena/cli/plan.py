"""``pyarena plan GRAPH``: a static memory plan for a graph or intervals.

GRAPH is a JSON graph (pyarena/graph/graph.py format), an .onnx or
.tflite model (anything :func:`pyarena.load_model` reads), or a
MiniMalloc-style CSV ``id,lower,upper,size`` (``upper``
exclusive) whose rows are the buffers.  Prints a summary; ``--json``
writes the plan (``-`` = stdout, then the summary goes to stderr).

Exit status: 0 plan made (and validated), 1 the validator found a
problem, 2 bad input (or a model over ``--max-memory``), 3 no plan within
``--capacity`` or ``--memory-budget``.
"""
import json
import os
import sys

from ..errors import InvalidArgumentError, PlanInfeasibleError
from ..importers import load_model
from ..graph.dtypes import bytes_by_dtype, format_by_dtype
from ..planning import (STRATEGIES, PlanOptions, load_intervals_csv, plan, plan_intervals,
                        validate, write_intervals_csv)
from .args import parse_bytes, parse_inputs
from .shapes import load_filling


def add_parser(sub):
    p = sub.add_parser("plan", help="plan the activation memory of a graph",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("graph", metavar="GRAPH",
                   help="JSON graph, .onnx/.tflite model, or id,lower,upper,size CSV")
    p.add_argument("--input", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="shape of a graph input (binds its symbolic dimensions); repeat")
    p.add_argument("--align", type=int, default=None, metavar="N",
                   help="offset granularity in bytes (power of two; default 64, "
                        "1 for CSV)")
    p.add_argument("--no-inplace", action="store_true",
                   help="no in-place reuse and no views: every tensor its own buffer")
    p.add_argument("--no-inplace-concat", action="store_true",
                   help="Concat copies every input (no producer writes into its slice "
                        "of the output)")
    p.add_argument("--strategy", choices=list(STRATEGIES), default=None,
                   help="offset assignment (default best; exact with --capacity)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="SECONDS",
                   help="search time for best/exact (default 10)")
    p.add_argument("--capacity", default=None, metavar="BYTES",
                   help="find a plan within this arena size (exit 3 if none)")
    p.add_argument("--schedule", action="store_true",
                   help="first reorder the ops for the least peak (graphs, not CSV)")
    p.add_argument("--memory-budget", default=None, metavar="BYTES",
                   help="the fastest plan whose arena fits BYTES (e.g. 512K): the given "
                        "order, then the scheduled one, then smaller operator scratch "
                        "(exit 3 if none)")
    p.add_argument("--max-memory", default=None, metavar="BYTES",
                   help="memory limit for weights + arena (e.g. 8G; default: the "
                        "physical memory); a larger model is refused (exit 2)")
    p.add_argument("--json", metavar="PATH|-", help="write the plan as JSON")
    p.add_argument("--plot", metavar="PATH", help="draw the plan (.png or .svg)")
    p.add_argument("--csv-out", metavar="PATH",
                   help="write id,lower,upper,size,offset CSV (upper exclusive)")
    p.set_defaults(run=run)
    return p


def plan_options(args, csv=False):
    """The :class:`PlanOptions` the arguments ask for (``csv``: for a CSV
    of intervals, whose default alignment is 1); InvalidArgumentError
    naming the flag for a bad byte count, time limit or combination."""
    capacity = parse_bytes(args.capacity, "--capacity")
    max_memory = parse_bytes(args.max_memory, "--max-memory")
    memory_budget = parse_bytes(args.memory_budget, "--memory-budget")
    if memory_budget is not None and capacity is not None:
        raise InvalidArgumentError("give --capacity or --memory-budget, not both")
    if not args.time_limit > 0:
        raise InvalidArgumentError(f"--time-limit must be > 0, not {args.time_limit}")
    if csv and args.input:
        raise InvalidArgumentError("--input does not apply to a CSV of intervals")
    for flag, given in (("--schedule", args.schedule),
                        ("--memory-budget", memory_budget is not None)):
        if csv and given:
            raise InvalidArgumentError(f"{flag} does not apply to a CSV of intervals "
                                       "(it changes a graph's ops)")
    return PlanOptions(
        strategy=args.strategy or ("exact" if capacity is not None else "best"),
        alignment=(1 if csv else 64) if args.align is None else args.align,
        inplace=not args.no_inplace, inplace_concat=not args.no_inplace_concat,
        time_limit=args.time_limit, capacity=capacity, max_memory=max_memory,
        schedule=args.schedule, memory_budget=memory_budget)


def make_plan(args):
    """The plan the arguments ask for (shared with tools wrapping the CLI)."""
    if os.path.splitext(args.graph)[1].lower() == ".csv":
        o = plan_options(args, csv=True)
        return plan_intervals(load_intervals_csv(args.graph), strategy=o.strategy,
                              alignment=o.alignment, time_limit=o.time_limit,
                              capacity=o.capacity)
    options = plan_options(args)
    g = load_filling(args.graph, parse_inputs(args.input), lambda inputs: load_model(
        args.graph, inputs or None, max_memory=options.max_memory), "plan")
    return plan(g, options)


def run(args):
    try:
        p = make_plan(args)
    except PlanInfeasibleError as exc:
        print(f"pyarena plan: infeasible: {exc}", file=sys.stderr)
        return 3
    problems = validate(p)
    to_stdout = args.json == "-"
    report = sys.stderr if to_stdout else sys.stdout
    if args.json:
        text = json.dumps(p.to_json(), indent=1)
        if to_stdout:
            sys.stdout.write(text + "\n")
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if args.csv_out:
        write_intervals_csv(p, args.csv_out)
    if args.plot:
        p.plot(args.plot)
    print(p.summary(), file=report)
    if getattr(p, "schedule", None) is not None:
        sc = p.schedule
        print(f"  schedule     fixed-order bound {sc.peak_before:,} -> {sc.peak_after:,} B "
              f"({'reordered' if sc.reordered else 'order kept'}; {sc.segments} segments, "
              f"{'exact' if sc.exact else 'heuristic'}, {sc.seconds * 1e3:.0f} ms)", file=report)
    if getattr(p, "graph", None) is not None:
        print(f"  by dtype     weights: {format_by_dtype(bytes_by_dtype(p.graph, True)) or '-'}"
              f"; tensors: {format_by_dtype(bytes_by_dtype(p.graph, False))}", file=report)
    if problems:
        for msg in problems[:20]:
            print(f"pyarena plan: validation: {msg}", file=sys.stderr)
        return 1
    return 0
