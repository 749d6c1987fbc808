#!/usr/bin/env python3
"""The mutation check: plant each mutant of tools/mutation/mutants.py in a
scratch copy of the checkout, run the tests meant to kill it, report.

    python tools/mutation/run.py               # every mutant, then the score
    python tools/mutation/run.py --check       # only: does every snippet still match?
    python tools/mutation/run.py --list        # the mutants, one line each
    python tools/mutation/run.py -k arena -j 2 # ids containing "arena", 2 workers
    python tools/mutation/run.py --random 100  # 100 generated mutants (generate.py)
    python tools/mutation/run.py --random 100 --seed 7 -k gen:pyarena/x.py:12:rel
                                               # one of that sample again

A mutant is one small plausible bug: ``original`` replaced by
``replacement`` in ``file``, where ``original`` must occur exactly once
(the check refuses to run otherwise, naming the stale mutants: keep the list
current as the code moves).  Each mutant runs only its own ``tests`` (C test
binaries ``c:test_x`` and pytest paths, all part of the default run), in
that order, and is

* killed       -- a test failed (an assertion, an error, a crash);
* TIMEOUT-ONLY -- tests failed only by running past their time limit
                  (pytest-timeout, the C harness's alarm, or the native
                  watchdog of tests/conftest.py): a hang, not a verdict;
* SURVIVED     -- every test passed.

The working tree is never written: the runner copies the checkout
(``git ls-files``: tracked and untracked-but-not-ignored files) to a
temporary directory, builds it there (``make -C csrc`` for the C tests,
``setup.py build_ext --inplace`` for the Python extension, with
PYTHONPATH pointing at the copy), mutates that copy, and deletes it at the
end, Ctrl-C included.  Before any mutant it checks that the unmutated copy
passes every test it will use.  pytest runs derandomized, without an
example database (``--hypothesis-profile=mutation``), and with
bytecode caching off (a mutant and the original of the same size written
in the same second would share a stale .pyc otherwise).

Exit status: 0 when every mutant is killed (not by a timeout alone), 1 when
one survived or only timed out, 2 when the check itself could not run.
"""
import argparse
import concurrent.futures
import dataclasses
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from mutants import MUTANTS  # noqa: E402


class CheckError(Exception):
    """The check itself cannot run (stale snippet, build failure ...)."""


# -- the list ------------------------------------------------------------------
def stale_mutants(root, mutants):
    """Problems with the list against the checkout at ``root``: a snippet
    that no longer occurs exactly once, a missing file, a duplicate id, a
    mutant that changes nothing or names no test."""
    problems = []
    seen = set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: the id is used twice")
        seen.add(m.id)
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
        if not m.tests:
            problems.append(f"{m.id}: names no test that should kill it")
        for t in m.tests:
            if t.startswith("c:"):
                if not os.path.exists(os.path.join(root, "tests", "c", t[2:] + ".c")):
                    problems.append(f"{m.id}: no C test tests/c/{t[2:]}.c")
            elif not os.path.exists(os.path.join(root, t.split("::")[0])):
                problems.append(f"{m.id}: no test file {t.split('::')[0]}")
        path = os.path.join(root, m.file)
        if not os.path.exists(path):
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        with open(path, encoding="utf-8") as f:
            n = f.read().count(m.original)
        if n != 1:
            problems.append(f"{m.id}: the original snippet occurs {n} times in {m.file} "
                            f"(must be exactly once): {m.original!r}")
    return problems


def select(mutants, patterns):
    if not patterns:
        return list(mutants)
    out = [m for m in mutants if any(p in m.id or fnmatch.fnmatch(m.id, p)
                                     or p in m.file for p in patterns)]
    if not out:
        raise CheckError(f"no mutant matches {patterns}")
    return out


# -- the scratch copy --------------------------------------------------------------
def checkout_files(root):
    """Relative paths of the files to copy: git's view when ``root`` is a
    checkout (tracked + untracked, not ignored), else a walk without build
    products."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True)
        files = [f for f in out.stdout.decode().split("\0") if f]
        # never a virtual environment that happens to sit in the checkout
        venvs = {f.split("/")[0] for f in files if f.endswith("pyvenv.cfg")}
        return [f for f in files if os.path.isfile(os.path.join(root, f))
                and f.split("/")[0] not in venvs]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "build", "__pycache__", ".hypothesis", ".pytest_cache"}
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in skip and not x.startswith(".ci-venv")
                       and not x.startswith("build-")]
            for n in names:
                if not n.endswith((".so", ".o", ".a", ".pyc")):
                    files.append(os.path.relpath(os.path.join(d, n), root))
        return files


class Worker:
    """One scratch copy of the checkout, built, with a mutant at a time."""

    def __init__(self, root, base, name, timeout, log):
        self.dir = os.path.join(base, name)
        self.timeout = timeout
        self.log = log
        for rel in checkout_files(root):
            dst = os.path.join(self.dir, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(root, rel), dst)
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = self.dir + (os.pathsep + self.env["PYTHONPATH"]
                                             if self.env.get("PYTHONPATH") else "")
        self.env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env["COLUMNS"] = "400"          # untruncated short summaries
        self.env["PA_TEST_TIMEOUT"] = str(int(timeout))
        self.env.pop("PYTEST_ADDOPTS", None)
        self.c_built = False                 # C tests built from the current sources
        self.py_built = False                # extension built from the current sources

    # building ---------------------------------------------------------------
    def _build(self, cmd, what):
        p = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True, text=True)
        if p.returncode:
            raise BuildError(f"{what} failed:\n{(p.stdout + p.stderr)[-3000:]}")

    def build(self, c, py):
        if c and not self.c_built:
            self._build(["make", "-C", "csrc", "-j2", "all"], "make -C csrc all")
            self.c_built = True
        if py and not self.py_built:
            self._build([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                        "setup.py build_ext --inplace")
            self.py_built = True

    # the extension built from the unmutated sources, put back after a C
    # mutant instead of rebuilding it (build_ext compiles the whole core)
    _PRODUCTS = ("pyarena/lib", "pyarena/include", "pyarena/_native")

    def _products(self, top):
        for rel in self._PRODUCTS:
            for d, _, names in os.walk(os.path.join(top, rel)):
                for n in names:
                    if rel != "pyarena/_native" or n.endswith(".so"):
                        yield os.path.relpath(os.path.join(d, n), top)

    def keep_pristine(self):
        """Save the built extension and core of the unmutated sources."""
        self.pristine = self.dir + ".pristine"
        for rel in self._products(self.dir):
            dst = os.path.join(self.pristine, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.join(self.dir, rel), dst)

    def restore_pristine(self):
        """Put the saved build back: True when there was one."""
        if not getattr(self, "pristine", None):
            return False
        for rel in self._products(self.pristine):
            shutil.copy2(os.path.join(self.pristine, rel), os.path.join(self.dir, rel))
        return True

    def check_import(self):
        code = "import pyarena, sys; sys.stdout.write(pyarena.__file__)"
        p = subprocess.run([sys.executable, "-c", code], cwd=self.dir, env=self.env,
                           capture_output=True, text=True)
        where = os.path.realpath(p.stdout.strip()) if p.returncode == 0 else ""
        if not where.startswith(os.path.realpath(self.dir) + os.sep):
            raise CheckError(f"the scratch copy imports pyarena from {where or '?'} "
                             f"(expected {self.dir}): {p.stderr[-1000:]}")

    # running ------------------------------------------------------------------
    def run_c(self, binary):
        """("pass" | "killed" | "timeout", detail)."""
        path = os.path.join(self.dir, "csrc", "build", binary)
        try:
            p = subprocess.run([path], cwd=os.path.join(self.dir, "csrc"), env=self.env,
                               capture_output=True, text=True, timeout=10 * self.timeout)
        except subprocess.TimeoutExpired:
            return "timeout", f"c:{binary} ran past {10 * self.timeout:.0f} s"
        out = p.stdout + p.stderr
        if p.returncode == 0:
            return "pass", ""
        fail = re.search(r"^FAIL (\S+)", out, re.M)
        if (p.returncode == 142 or "\nTIMEOUT " in out) and not fail:
            m = re.search(r"TIMEOUT \S+: (\S+)", out)
            return "timeout", f"c:{binary}:{m.group(1) if m else '?'}"
        check = re.search(r"^\S+:(\d+): CHECK failed: (.*)$", out, re.M)
        what = fail.group(1) if fail else (f"status {p.returncode}" if p.returncode > 0
                                           else f"signal {-p.returncode}")
        line = f" (line {check.group(1)}: {check.group(2)[:60]})" if check else ""
        return "killed", f"c:{binary}:{what}{line}"

    def run_pytest(self, targets, retries=3, ignore=()):
        """Run the targets with -x; a timeout is set aside (deselected) and
        the rest run again, up to ``retries`` times: a mutant is "killed"
        only by a failure that is not a timeout."""
        deselect, timeouts = [], []
        for _ in range(retries + 1):
            verdict, detail, nodeid = self._pytest_once(targets, deselect, ignore)
            if verdict != "timeout":
                if verdict == "pass" and timeouts:
                    return "timeout", "; ".join(timeouts)
                return verdict, detail
            timeouts.append(detail)
            if not nodeid:
                break
            deselect.append(nodeid)
        return "timeout", "; ".join(timeouts)

    def _pytest_once(self, targets, deselect, ignore=()):
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
               "--hypothesis-profile=mutation", f"--timeout={self.timeout:g}", *targets]
        cmd += [f"--ignore={f}" for f in ignore]
        for d in deselect:
            cmd += ["--deselect", d] if "::" in d else ["-k", f"not {d}"]
        limit = 60 * self.timeout + 600
        try:
            p = subprocess.run(cmd, cwd=self.dir, env=self.env, capture_output=True,
                               text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            return "timeout", f"pytest {' '.join(targets)} ran past {limit:.0f} s", None
        out = p.stdout + p.stderr
        if p.returncode == 0:
            return "pass", "", None
        if p.returncode == 5:
            raise CheckError(f"pytest collected no test from {targets}")
        # "FAILED nodeid - message" (a parametrized nodeid may hold spaces)
        failed = re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - (.*))?$", p.stdout, re.M)
        for nodeid, msg in failed:
            if not (msg or "").startswith("Failed: Timeout"):
                return "killed", f"{nodeid} ({(msg or '').strip()[:70]})", None
        if failed:
            return "timeout", failed[0][0], failed[0][0]
        if "Timeout (" in out and "most recent call first" in out:
            # the native watchdog: the hung test is the innermost test_ frame
            frames = re.findall(r'File "[^"]*tests/[^"]*", line \d+ in (test\w*)', out)
            name = frames[0] if frames else None
            return "timeout", f"native hang in {name or '?'}", name
        if p.returncode < 0 or p.returncode > 5:
            return "killed", f"pytest process ended with status {p.returncode}", None
        tail = " | ".join(out.strip().splitlines()[-3:])[:120]
        return "killed", f"pytest status {p.returncode}: {tail}", None

    def run_tests(self, tests, ignore=()):
        """Run the tests in order and stop at the first kill: (verdict, detail).
        ``ignore``: test files pytest leaves out of the folders it is given."""
        timeouts = []
        c_tests = [t[2:] for t in tests if t.startswith("c:")]
        py_tests = [t for t in tests if not t.startswith("c:")]
        if c_tests:
            self.build(c=True, py=False)
        for b in c_tests:
            verdict, detail = self.run_c(b)
            if verdict == "killed":
                return verdict, detail
            if verdict == "timeout":
                timeouts.append(detail)
        if py_tests:
            self.build(c=False, py=True)     # only once the C tests passed
            verdict, detail = self.run_pytest(py_tests, ignore=ignore)
            if verdict == "killed":
                return verdict, detail
            if verdict == "timeout":
                timeouts.append(detail)
        if timeouts:
            return "timeout", "; ".join(timeouts)
        return "pass", ""

    def run_staged(self, m):
        """``m.first`` (the tests named after the mutated file), then the
        rest of ``m.tests`` without them: the same verdict as running all
        of them, sooner when a mirrored test kills."""
        if not m.first:
            return self.run_tests(m.tests)
        verdict, detail = self.run_tests(m.first)
        if verdict == "killed":
            return verdict, detail
        rest, ignore = rest_of(m)
        if rest:
            v2, d2 = self.run_tests(rest, ignore)
            if v2 == "killed":
                return v2, d2
            if v2 == "timeout":
                return "timeout", "; ".join(x for x in (detail, d2) if x)
        return verdict, detail

    # a mutant -------------------------------------------------------------------
    def run_mutant(self, m):
        path = os.path.join(self.dir, m.file)
        with open(path, encoding="utf-8") as f:
            original = f.read()
        # C: the core (make, and build_ext links it) or the glue (build_ext),
        # rebuilt when a test needs it (run_tests): the C tests first, so a
        # mutant they kill never waits for the extension
        is_c = m.file.endswith((".c", ".h"))
        t0 = time.monotonic()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(m.original, m.replacement, 1))
            if is_c:
                self.c_built = self.py_built = False
            try:
                verdict, detail = self.run_staged(m)
            except BuildError as exc:
                return Result(m, "error", f"the mutant does not build: {exc}"[:300],
                              time.monotonic() - t0)
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original)
            if is_c:
                self.c_built = False                    # make rebuilds one file
                self.py_built = self.restore_pristine()
        verdict = {"pass": "SURVIVED", "timeout": "TIMEOUT-ONLY"}.get(verdict, verdict)
        return Result(m, verdict, detail, time.monotonic() - t0)


class BuildError(Exception):
    pass


def rest_of(m):
    """(tests, ignore): ``m.tests`` without ``m.first`` -- a listed file
    dropped, a mirrored file inside a listed folder ignored there."""
    rest = [t for t in m.tests if t not in m.first]
    ignore = [f for f in m.first if not f.startswith("c:") and
              any(f.startswith(t.rstrip("/") + "/") for t in rest)]
    return rest, ignore


@dataclasses.dataclass
class Result:
    mutant: object
    verdict: str
    detail: str
    seconds: float


# -- the report -----------------------------------------------------------------------
def report(results, wall, out=sys.stdout):
    w = max([len(r.mutant.id) for r in results] + [6])
    out.write(f"\n{'mutant':<{w}}  {'verdict':<12} {'secs':>5}  killed by / detail\n")
    for r in results:
        out.write(f"{r.mutant.id:<{w}}  {r.verdict:<12} {r.seconds:5.1f}  {r.detail}\n")
    killed = sum(r.verdict == "killed" for r in results)
    by_file = {}
    for r in results:
        k = by_file.setdefault(r.mutant.file, [0, 0])
        k[0] += r.verdict == "killed"
        k[1] += 1
    out.write("\nper file: " + ", ".join(f"{f} {k}/{n}" for f, (k, n) in
                                         sorted(by_file.items())) + "\n")
    bad = [r for r in results if r.verdict != "killed"]
    out.write(f"\nmutation score: {killed}/{len(results)} killed"
              f" ({100.0 * killed / max(len(results), 1):.1f} %), "
              f"{sum(r.verdict == 'SURVIVED' for r in results)} survived, "
              f"{sum(r.verdict == 'TIMEOUT-ONLY' for r in results)} killed only by a timeout, "
              f"{sum(r.verdict == 'error' for r in results)} errors; "
              f"wall time {wall:.0f} s\n")
    for r in bad:
        out.write(f"  {r.verdict}: {r.mutant.id} ({r.mutant.file}): {r.mutant.why}\n")
    return not bad


def list_mutants(mutants, out=sys.stdout):
    w = max(len(m.id) for m in mutants)
    for m in mutants:
        out.write(f"{m.id:<{w}}  {m.file:<42} {' '.join(m.tests)}\n")
    counts = {}
    for m in mutants:
        counts[m.file] = counts.get(m.file, 0) + 1
    out.write(f"\n{len(mutants)} mutants in {len(counts)} files\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-k", "--select", action="append", default=[],
                    help="run only mutants whose id or file contains this (or matches "
                         "this glob); repeatable")
    ap.add_argument("-j", "--jobs", type=int, default=1,
                    help="scratch copies working in parallel (default 1)")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds per test before it counts as hung (default 30)")
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutant's snippet matches exactly once")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--random", type=int, metavar="N",
                    help="instead of the list: N mutants generated by operator class over "
                         "a random sample of csrc/ and pyarena/ lines (generate.py)")
    ap.add_argument("--seed", type=int, help="the sample's seed (--random; default: new)")
    args = ap.parse_args(argv)
    if args.random is not None:
        return run_random(args)

    problems = stale_mutants(ROOT, MUTANTS)
    if problems:
        sys.stderr.write("mutation check: the mutant list is out of date with the code "
                         "(update tools/mutation/mutants.py):\n  " +
                         "\n  ".join(problems) + "\n")
        return 2
    if args.check:
        print(f"mutation check: all {len(MUTANTS)} mutants match the code exactly once")
        return 0
    try:
        mutants = select(MUTANTS, args.select)
    except CheckError as exc:
        sys.stderr.write(f"mutation check: {exc}\n")
        return 2
    if args.list:
        list_mutants(mutants)
        return 0
    return run(mutants, args)


def run_random(args):
    """``--random N``: generated mutants, scored per layer, survivors
    triaged against triage.py."""
    import random as _random

    import generate
    from triage import EQUIVALENT
    if args.random < 1:
        sys.stderr.write("mutation check: --random needs N >= 1\n")
        return 2
    seed = args.seed if args.seed is not None else _random.SystemRandom().randrange(1 << 30)
    mutants, pool = generate.sample(ROOT, args.random, seed)
    if args.select:     # one mutant of a sample again: --random N --seed S -k ID
        try:
            mutants = select(mutants, args.select)
        except CheckError as exc:
            sys.stderr.write(f"mutation check: {exc}\n")
            return 2
    print(f"generated mutants: {len(mutants)} of {pool} candidates, seed {seed} "
          f"(--seed {seed} draws them again)", flush=True)
    args.json = args.json or None
    results = []
    code = run(mutants, args, results)
    if code == 2:
        return 2
    layers = {}
    survivors = []
    for r in results:
        k = layers.setdefault(generate.layer_of(r.mutant.file), [0, 0, 0])
        if r.verdict == "SURVIVED" and r.mutant.id in EQUIVALENT:
            k[2] += 1
            continue
        k[0] += r.verdict in ("killed", "TIMEOUT-ONLY")
        k[1] += 1
        if r.verdict == "SURVIVED":
            survivors.append(r.mutant)
    print("\nscore per layer (equivalent mutants left out):")
    for name, (k, n, eq) in sorted(layers.items()):
        print(f"  {name:<22} {k}/{n} killed" + (f", {eq} equivalent" if eq else ""))
    killed = sum(k for k, _, _ in layers.values())
    total = sum(n for _, n, _ in layers.values())
    print(f"generated-mutant score: {killed}/{total} ({100.0 * killed / max(total, 1):.1f} %), "
          f"seed {seed}")
    for m in survivors:
        print(f"  untriaged survivor: {m.id}: {m.original.strip()!r} -> "
              f"{m.replacement.strip()!r}")
    return 0 if not survivors else 1


def run(mutants, args, results_out=None):
    t0 = time.monotonic()
    base = tempfile.mkdtemp(prefix="pyarena-mutation-")
    lock = threading.Lock()

    def log(msg):
        with lock:
            print(msg, flush=True)

    try:
        jobs = max(1, min(args.jobs, len(mutants)))
        log(f"mutation check: {len(mutants)} mutants, {jobs} worker(s), scratch {base}")
        workers = [Worker(ROOT, base, f"w{i}", args.timeout, log) for i in range(jobs)]
        # baseline: the unmutated copy passes everything the mutants use
        used = {t for m in mutants for t in m.tests + m.first}
        need_c = any(t.startswith("c:") for t in used)
        c_tests = sorted(t for t in used if t.startswith("c:"))
        py_tests = sorted(t for t in used if not t.startswith("c:"))
        for w in workers:
            w.build(c=need_c, py=True)
            w.check_import()
            w.keep_pristine()
        tb = time.monotonic()
        verdict, detail = workers[0].run_tests(c_tests + py_tests)
        if verdict != "pass":
            raise CheckError(f"the unmutated checkout fails its own tests ({verdict}: "
                             f"{detail}); fix that first")
        log(f"baseline: the unmutated copy passes {len(c_tests)} C test binaries and "
            f"{len(py_tests)} pytest targets ({time.monotonic() - tb:.0f} s)")
        pending = list(enumerate(mutants))
        results = [None] * len(mutants)

        def work(w):
            while True:
                with lock:
                    if not pending:
                        return
                    i, m = pending.pop(0)
                r = w.run_mutant(m)
                results[i] = r
                log(f"[{sum(x is not None for x in results):>3}/{len(mutants)}] "
                    f"{r.verdict:<12} {m.id} ({r.seconds:.1f} s) {r.detail}")

        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            for f in [ex.submit(work, w) for w in workers]:
                f.result()
        wall = time.monotonic() - t0
        ok = report(results, wall)
        if results_out is not None:
            results_out.extend(results)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"wall_seconds": wall, "results": [
                    {"id": r.mutant.id, "file": r.mutant.file, "verdict": r.verdict,
                     "detail": r.detail, "seconds": round(r.seconds, 2)}
                    for r in results]}, f, indent=1)
        return 0 if ok else 1
    except (CheckError, BuildError) as exc:
        sys.stderr.write(f"mutation check: {exc}\n")
        return 2
    finally:
        if args.keep:
            print(f"(scratch kept: {base})")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
