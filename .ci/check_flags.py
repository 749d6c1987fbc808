#!/usr/bin/env python3
"""Fail if the wheel compiles the C core differently from `make -C csrc`.

usage: .ci/check_flags.py BUILD_LOG

BUILD_LOG is the output of `pip install -v .` (or `python setup.py
build_ext`).  pyarena/_native/build.py prints every command it compiles a
core source with (the *.c of the folders csrc/flags.mk's PA_SRC_DIRS names),
prefixed "pyarena core: ".  This script asks make for its commands
(`make -n -B`, same environment) and compares them source by source (by
path relative to csrc/: `-c alloc/pool.c`), with only the output path left
out.  It also fails when a core source is compiled by anything else in the
log (e.g. as a source of the cffi extension, with Python's flags), when a
source is missing from either build, or when the wheel's core compile
printed a warning.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSRC = os.path.join(ROOT, "csrc")
PREFIX = "pyarena core: "


def normalise(cmd):
    """(source as compiled, relative to csrc/; the command without its
    output path)."""
    args = shlex.split(cmd)
    if "-o" in args:
        i = args.index("-o")
        del args[i:i + 2]
    if "-c" not in args:
        return None, args
    src = args[args.index("-c") + 1]
    return os.path.normpath(src), args


def core_sources():
    """The core's sources relative to csrc/: the *.c of the folders that
    csrc/flags.mk's PA_SRC_DIRS names (read here, not through build.py,
    whose result is what is being checked)."""
    dirs = []
    with open(os.path.join(CSRC, "flags.mk")) as f:
        for line in f:
            m = re.match(r"PA_SRC_DIRS\s*:?=\s*(.*)", line.split("#", 1)[0].strip())
            if m:
                dirs = m.group(1).split()
    if not dirs:
        sys.exit(f"{CSRC}/flags.mk: no PA_SRC_DIRS line")
    return sorted(os.path.normpath(os.path.join(d, p)) for d in dirs
                  for p in os.listdir(os.path.join(CSRC, d)) if p.endswith(".c"))


def make_commands():
    with tempfile.TemporaryDirectory() as tmp:
        build = os.path.join(tmp, "build")
        out = subprocess.run(["make", "-s", "-n", "-B", "-C", CSRC, f"BUILD={build}",
                              f"{build}/libpyarena.a"],
                             check=True, capture_output=True, text=True).stdout
    cmds = {}
    for line in out.splitlines():
        src, args = normalise(line)
        if src:
            cmds[src] = args
    return cmds


def wheel_commands(log_lines, sources):
    cmds, foreign = {}, []
    for line in log_lines:
        text = line.strip()
        if text.startswith(PREFIX):
            src, args = normalise(text[len(PREFIX):])
            if src in cmds:
                foreign.append(f"{src} compiled twice by the core build")
            cmds[src] = args
        elif " -c " in f" {text} ":
            for tok in text.split():
                if tok.endswith(".c") and any(tok == s or tok.endswith("csrc/" + s)
                                              for s in sources):
                    foreign.append(f"{tok} compiled outside the core build: {text[:200]}")
    return cmds, foreign


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], errors="replace") as f:
        lines = f.read().splitlines()
    expect = make_commands()
    sources = core_sources()
    got, problems = wheel_commands(lines, sources)
    for src in sources:
        if src not in expect:
            problems.append(f"{src}: make does not compile it")
        elif src not in got:
            problems.append(f"{src}: the wheel build did not compile it (no '{PREFIX}' line)")
        elif got[src] != expect[src]:
            problems.append(f"{src}: flags differ\n  make : {shlex.join(expect[src])}\n"
                            f"  wheel: {shlex.join(got[src])}")
    names = sorted({os.path.basename(s) for s in sources})
    warn = re.compile(r"(?:^|[\s/])(" + "|".join(map(re.escape, names))
                      + r"|[\w.]+\.h):\d+(?::\d+)?: warning:")
    problems += [f"warning in the core build: {ln.strip()}" for ln in lines if warn.search(ln)]
    if problems:
        print("C core flags: the wheel and `make -C csrc` diverge:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    flags = shlex.join(next(iter(expect.values()))[1:-2])
    print(f"C core flags: the wheel compiles all {len(sources)} sources like make ({flags})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
