"""Command line: ``python -m pyarena COMMAND``.

Each command lives in its own module with ``add_parser(subparsers)`` and
``run(args) -> int``; this file only wires them up and turns pyarena errors
into a one-line message and a non-zero exit.
"""
import argparse
import sys

from .errors import PyArenaError

COMMANDS = ["demo", "plan", "run"]


def _load(name):
    import importlib
    return importlib.import_module(f"pyarena.cmd_{name}")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="pyarena", description="Tensor memory management for edge inference.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        _load(name).add_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (PyArenaError, ValueError, TypeError, OSError, MemoryError) as exc:
        print(f"pyarena {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
