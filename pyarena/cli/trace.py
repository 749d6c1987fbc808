"""``pyarena trace -o FILE -- COMMAND ...``: record a program's NumPy data
allocations.

COMMAND runs unmodified (e.g. ``python prog.py ARGS``) with a recording
NumPy allocator installed when its interpreter starts; its data
allocations are still served by NumPy's allocator (or, with ``--pool``,
by a pyarena Pool).  The trace goes to FILE in the text format of
docs/traces.md (``.gz`` compresses it).  Steps: ``--steps none`` keeps only
the program's own ``pyarena.trace.step()`` marks; ``--steps auto`` also
marks a step whenever the live bytes return to the level of the last step.

The same program gives the same trace, steps included: COMMAND runs with
``PYTHONHASHSEED=0`` unless the environment sets a seed (a random seed per
run changes the order of set and dict-of-str iteration, hence the order of
frees within a loop iteration and where the live bytes touch their floor:
401 or 801 automatic steps on one program, by seed).

Exit status: the program's own; 2 for bad arguments or when no trace was
written (the command did not run a Python interpreter with NumPy).
"""
import os
import subprocess
import sys

from .._format import human_bytes
from ..errors import InvalidArgumentError


def add_parser(sub):
    p = sub.add_parser("trace", help="record a program's NumPy allocations",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the trace to write (.gz: compressed)")
    p.add_argument("--steps", choices=["none", "auto"], default="auto",
                   help="step marks: the program's own only, or also automatic (default)")
    p.add_argument("--pool", action="store_true",
                   help="serve the program's NumPy data from a pyarena Pool")
    p.add_argument("--callsites", action="store_true",
                   help="record the allocating Python line of each allocation (slower)")
    p.add_argument("command", nargs="+", metavar="-- COMMAND",
                   help="the program to run, e.g. python prog.py ARGS")
    p.set_defaults(run=run)
    return p


def run(args):
    from ..memory.trace import read_trace
    out = os.path.abspath(args.output)
    if not os.path.isdir(os.path.dirname(out)):
        raise InvalidArgumentError(f"-o {args.output}: no such directory")
    for f in (out, out[:-3] + ".part" if out.endswith(".gz") else None):
        if f and os.path.exists(f):
            os.remove(f)
    here = os.path.dirname(os.path.abspath(__file__))
    package_parent = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(here, "trace_boot"), package_parent] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(PYARENA_TRACE_FILE=out, PYARENA_TRACE_STEPS=args.steps,
               PYARENA_TRACE_CALLSITES="1" if args.callsites else "",
               PYARENA_TRACE_POOL="1" if args.pool else "",
               PYARENA_TRACE_PROGRAM=" ".join(args.command))
    env.setdefault("PYTHONHASHSEED", "0")   # the same steps every run (see the top)
    try:
        rc = subprocess.call(args.command, env=env)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot run {args.command[0]!r}: "
                                   f"{exc.strerror or exc}") from None
    if not os.path.exists(out):
        raise InvalidArgumentError(
            f"no trace was written: {args.command[0]!r} did not start a Python "
            f"interpreter that could import pyarena and NumPy")
    t = read_trace(out)
    print(f"pyarena trace: {len(t):,} events, {t.allocations:,} allocations, "
          f"{t.steps:,} steps, peak live {human_bytes(t.peak_live_bytes)} -> {args.output}",
          file=sys.stderr)
    return rc
