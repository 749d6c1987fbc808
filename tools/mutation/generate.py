"""Mutants nobody listed: small bugs made by operator class over a random
sample of the lines of ``csrc/`` and ``pyarena/`` (``run.py --random N``).

The listed mutants (mutants.py) are the bugs the team thought of; these
are the ones it did not.  Each rule changes one operator on one line:

* ``rel``  -- a relational operator flipped at its boundary (``<`` / ``<=``,
  ``>`` / ``>=``) or negated (``==`` / ``!=``);
* ``off``  -- an off-by-one: ``+ 1`` / ``- 1`` dropped;
* ``bool`` -- ``and`` / ``or`` (``&&`` / ``||``) swapped;
* ``drop`` -- the condition of an ``if`` whose body raises or returns an
  error made false (a dropped check);
* ``swap`` -- the operands of a subtraction swapped.

A line qualifies when it is code (not a comment, a docstring, a
preprocessor line, an assertion or a message string) and occurs exactly
once in its file, so the mutant is an ordinary ``Mutant`` whose
``original`` is the whole line.  The tests each one answers to are those of
its layer (:func:`tests_for`).  Survivors are triaged in ``triage.py``
(equivalent mutants, with the reason); a score counts the others.
"""
import os
import random
import re

from mutants import Mutant

# (rule, regex, replacement): the regex's group 1 is the operator replaced
_PY_RULES = [
    ("rel", re.compile(r"(?<=[\w\)\] ])(<=)(?=[ \w\(\-])"), "<"),
    ("rel", re.compile(r"(?<=[\w\)\] ])(<)(?=[ \w\(\-])"), "<="),
    ("rel", re.compile(r"(?<=[\w\)\] ])(>=)(?=[ \w\(\-])"), ">"),
    ("rel", re.compile(r"(?<=[\w\)\] ])(>)(?=[ \w\(\-])"), ">="),
    ("rel", re.compile(r"(?<= )(==)(?= )"), "!="),
    ("rel", re.compile(r"(?<= )(!=)(?= )"), "=="),
    ("off", re.compile(r"( \+ 1)(?![\d.\w])"), ""),
    ("off", re.compile(r"( - 1)(?![\d.\w])"), ""),
    ("bool", re.compile(r"(?<= )(and)(?= )"), "or"),
    ("bool", re.compile(r"(?<= )(or)(?= )"), "and"),
]
_C_RULES = [r for r in _PY_RULES if r[0] in ("rel", "off")] + [
    ("bool", re.compile(r"(?<= )(&&)(?= )"), "||"),
    ("bool", re.compile(r"(?<= )(\|\|)(?= )"), "&&"),
]
# whole operands: a name, a field (a.b, a->b); never a call or an index
# (``total - sizeof(x)`` swapped is not code, ``a - b[i]`` is not a swap)
_OPERAND = r"[A-Za-z_]\w*(?:(?:\.|->)[A-Za-z_]\w*)*"
_SWAP = re.compile(rf"(?<![\w.>])({_OPERAND}) - ({_OPERAND})(?![\w(\[]|\s*[(\[])")
_PY_IF = re.compile(r"^(\s*)(el)?if (.+):\s*$")
_C_IF = re.compile(r"^(\s*)if \((.+)\)\s*$")
_ERROR_BODY = re.compile(r"^\s*(raise |return PA_ERR|return -1;|return NULL;|"
                         r"self\.(fail|malformed)\(|return st;|goto fail)")


def _skippable(line, c):
    s = line.strip()
    if not s:
        return True
    if c:
        return s.startswith(("//", "/*", "*", "#", "_Static_assert")) or "printf" in s or \
            s.startswith(("assert", "CHECK"))
    return s.startswith(("#", "assert ", "print(", "import ", "from ", "@")) or \
        s.startswith(('"', "'", 'f"', "f'")) or "__all__" in s


def _code_lines(path, c):
    """(number, line) of the lines that are code (Python: outside
    triple-quoted strings)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, in_doc = [], False
    for i, line in enumerate(lines):
        if not c:
            n = line.count('"""') + line.count("'''")
            if in_doc or n:
                if n % 2:
                    in_doc = not in_doc
                continue
        if not _skippable(line, c):
            out.append((i, line))
    return lines, out


def _code_only(line, c):
    """The line with its string literals and its comment blanked (an
    operator inside a message or a comment is not code)."""
    bare = re.sub(r"(['\"])(?:\\.|(?!\1).)*\1", lambda m: "_" * len(m.group(0)), line)
    if c:
        bare = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), bare)
        cut = bare.find("//")
    else:
        cut = bare.find("#")
    return bare if cut < 0 else bare[:cut] + " " * (len(bare) - cut)


def candidates(root, rel):
    """Every (rule, line number, original line, mutated line) of file
    ``rel`` whose original line occurs exactly once in the file."""
    c = rel.endswith((".c", ".h"))
    lines, code = _code_lines(os.path.join(root, rel), c)
    text = "\n".join(lines)
    out = []
    for i, line in code:
        if text.count(line) != 1:       # the runner replaces the one occurrence
            continue
        bare = _code_only(line, c)
        for rule, rx, rep in (_C_RULES if c else _PY_RULES):
            for m in rx.finditer(bare):
                a, b = m.span(1)
                out.append((rule, i, line, line[:a] + rep + line[b:]))
        for m in _SWAP.finditer(bare):
            x, y = m.group(1), m.group(2)
            if x != y and not x[0].isdigit():
                a, b = m.span()
                out.append(("swap", i, line, line[:a] + f"{y} - {x}" + line[b:]))
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        mif = (_C_IF if c else _PY_IF).match(line)
        if mif and _ERROR_BODY.match(nxt):
            false = "if (0)" if c else ("elif False:" if mif.group(2) else "if False:")
            out.append(("drop", i, line, mif.group(1) + false))
    return out


def source_files(root):
    files = []
    for top, exts in (("csrc", (".c", ".h")), ("pyarena", (".py",))):
        for d, _, names in os.walk(os.path.join(root, top)):
            if os.sep + "build" in d or "__pycache__" in d or \
                    d.endswith((os.sep + "tools", os.sep + "examples")):
                continue
            for n in sorted(names):
                if n.endswith(exts) and not n.startswith("_cffi"):
                    files.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(files)


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def c_tests(root, folder):
    """Every C test binary of ``tests/c/<folder>`` (all part of ``make check``)."""
    d = os.path.join(root, "tests", "c", folder)
    names = sorted(os.listdir(d)) if os.path.isdir(d) else []
    return tuple(f"c:{folder}/{n[:-2]}" for n in names
                 if n.startswith("test_") and n.endswith(".c"))


def tests_for(rel, root=_ROOT):
    """The tests a mutant of ``rel`` answers to: its layer's (for C, every
    test binary of its folder)."""
    parts = rel.split("/")
    if parts[0] == "csrc":
        layer = parts[1] if len(parts) > 2 else "alloc"
        if layer == "alloc":
            return c_tests(root, "alloc") + ("tests/memory",)
        if layer == "plan":
            return c_tests(root, "plan") + ("tests/planning",)
        if layer == "kernels":
            return c_tests(root, "kernels") + ("tests/runtime/test_kernels.py",
                                               "tests/runtime/test_fusion.py",
                                               "tests/runtime/test_nhwc.py")
        return ("tests/memory", "tests/runtime/test_kernels.py")
    layer = parts[1] if len(parts) > 2 else None
    mirror = {"memory": "tests/memory", "graph": "tests/graph", "planning": "tests/planning",
              "runtime": "tests/runtime", "importers": "tests/importers", "cli": "tests/cli",
              "_native": "tests/memory"}
    return (mirror.get(layer, "tests"),)


def mirrored_tests(rel, tests, root=_ROOT):
    """The tests named after ``rel``, run first: the tests mirror the
    package (pyarena/runtime/kernels/resize.py -> tests/runtime/**/
    test_resize*.py; csrc/kernels/qconv.c -> c:kernels/test_qconv*, and
    test_qconv*.py beside the layer's Python tests).  Found by name among
    ``tests`` (the layer's) and in the folders of its Python tests: the
    mirrored tests are the likeliest to kill, so they run first and the
    rest of the layer only when they all pass."""
    stem = os.path.splitext(os.path.basename(rel))[0].strip("_")
    if not stem or stem == "init":
        return ()
    # the file's name, else its first word (onnx_constants -> test_onnx*),
    # else its package's (pyarena/runtime/kernels/spatial.py -> test_kernels*)
    names = [stem]
    if "_" in stem:
        names.append(stem.split("_")[0])
    parts = rel.split("/")
    if len(parts) > 3:
        names.append(parts[-2].strip("_"))
    for name in names:
        out = _named(root, "test_" + name, tests)
        if out:
            return out
    return ()


def _named(root, prefix, tests):
    out = [t for t in tests if t.startswith("c:") and
           os.path.basename(t[2:]).startswith(prefix)]
    dirs = []
    for t in tests:
        if not t.startswith("c:"):
            d = t if os.path.isdir(os.path.join(root, t)) else os.path.dirname(t)
            if d not in dirs:
                dirs.append(d)
    for d in dirs:
        for top, subs, names in os.walk(os.path.join(root, d)):
            subs[:] = sorted(x for x in subs if x not in ("__pycache__", "data"))
            for n in sorted(names):
                if n.startswith(prefix) and n.endswith(".py"):
                    f = os.path.relpath(os.path.join(top, n), root).replace(os.sep, "/")
                    if f not in out:
                        out.append(f)
    return tuple(out)


def layer_of(rel):
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def sample(root, n, seed):
    """``n`` generated mutants, drawn with ``seed``: files weighted by their
    candidate count, so every line of code is about as likely."""
    pool = []
    for rel in source_files(root):
        for rule, i, line, new in candidates(root, rel):
            pool.append((rel, rule, i, line, new))
    rng = random.Random(seed)
    picked = rng.sample(pool, min(n, len(pool)))
    out = []
    for rel, rule, i, line, new in sorted(picked):
        tests = tests_for(rel, root)
        out.append(Mutant(id=f"gen:{rel}:{i + 1}:{rule}", file=rel, original=line,
                          replacement=new, why=f"generated ({rule}) at line {i + 1}",
                          tests=tests, first=mirrored_tests(rel, tests, root)))
    return out, len(pool)
