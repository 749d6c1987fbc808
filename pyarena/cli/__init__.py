"""The command line: ``python -m pyarena COMMAND`` (or ``pyarena COMMAND``).

Each command lives in its own module with ``add_parser(subparsers)`` and
``run(args) -> int``: ``demo`` (MobileNetV2 three ways), ``plan`` (a
static plan for a graph, model or CSV of intervals), ``run`` (plan, bind
and execute a model), ``compile`` (a model to a file that loads by
mmap), ``trace`` (record a program's NumPy allocations)
and ``alloc-bench`` (replay traces against each allocator).  This file only wires them up and turns
pyarena errors into a one-line message and a non-zero exit; the
command-line wording (``--input``) is added here, never in the library.
"""
import argparse
import sys

from ..errors import GraphError, PyArenaError

__all__ = ["main", "build_parser"]


def build_parser():
    from . import alloc_bench, compile, demo, plan, run, trace
    parser = argparse.ArgumentParser(
        prog="pyarena", description="Tensor memory management for edge inference.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for cmd in (demo, plan, run, compile, trace, alloc_bench):
        cmd.add_parser(sub)
    return parser


def input_hint(unbound):
    """How to give the shapes of ``unbound`` inputs on the command line."""
    specs = " ".join(
        "--input " + name + "=" + (",".join(str(d) if isinstance(d, int) else
                                            f"<{d or '?'}>" for d in dims)
                                   if dims is not None else "D0,D1,...")
        for name, dims in unbound.items())
    return f"fix them with {specs} (numbers in place of <...>)"


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (PyArenaError, ValueError, TypeError, OSError, MemoryError) as exc:
        msg = " ".join(str(exc).split("\n"))      # one line, whatever a dependency said
        if isinstance(exc, GraphError) and exc.unbound_inputs:
            msg += "; " + input_hint(exc.unbound_inputs)
        print(f"pyarena {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

