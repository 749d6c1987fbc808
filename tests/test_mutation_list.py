"""The mutation check's list (tools/mutation/mutants.py) matches the code:
every snippet occurs exactly once in its file, so a change that moves code
fails here, in the default run, and the list is updated with it.  The
check itself (tools/mutation/run.py) plants the mutants and runs the
tests; it takes minutes and runs on demand (see docs/mutation.md)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "mutation"))

from mutants import MUTANTS  # noqa: E402
from run import stale_mutants  # noqa: E402

# the source files with no mutant, and why: every other C source and header
# of csrc/ and every module of pyarena/ must have at least one
UNMUTATED = {
    "csrc/status.c": "a table of status strings",
    "csrc/pyarena.h": "the public header: declarations and constants",
    "csrc/checksum.h": "declarations of checksum.c's two variants, for its C test",
    "csrc/alloc/internal.h": "the page size and the OS layer's declarations",
    "csrc/alloc/page_heap.h": "declarations; its one inline function builds an iterator",
    "csrc/plan/internal.h": "declarations",
    "csrc/alloc/zone.h": "declarations",
    "csrc/kernels/isa.h": "the variants' contract: declarations and the build condition "
                          "(either way the tests compare the variants bit for bit)",
    "csrc/examples/embed_arena.c": "an example program (make check runs it)",
    "pyarena/__init__.py": "re-exports and lazy imports (tests/test_layers.py)",
    "pyarena/__main__.py": "calls pyarena.cli.main",
    "pyarena/graph/__init__.py": "re-exports",
    "pyarena/memory/__init__.py": "re-exports",
    "pyarena/planning/__init__.py": "re-exports",
    "pyarena/runtime/__init__.py": "re-exports",
    "pyarena/runtime/kernels/__init__.py": "re-exports; importing the families registers them",
    "pyarena/_native/build.py": "the build script: every build runs it and "
                                ".ci/check_flags.py compares its flags with make's",
    "pyarena/_native/glue_module.c": "the module's function table and bind(), "
                                     "which every glue test goes through",
    "pyarena/planning/plot.py": "draws a picture; the tests can only check that "
                                "a file was written",
}


def _sources():
    """The C sources and headers of csrc/ and the modules of pyarena/."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "csrc", "pyarena"],
                         capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        files = out.stdout.split()
    else:  # not a git checkout (an unpacked sdist): walk the tree
        files = [p.relative_to(ROOT).as_posix() for d in ("csrc", "pyarena")
                 for p in (ROOT / d).rglob("*") if p.is_file()]
    return sorted(f for f in files if f.endswith((".c", ".h", ".py"))
                  and not f.startswith(("pyarena/include/", "pyarena/lib/")))


def test_every_snippet_matches_exactly_once():
    assert stale_mutants(str(ROOT), MUTANTS) == []


def test_every_source_file_has_a_mutant_or_a_reason():
    mutated = {m.file for m in MUTANTS}
    sources = _sources()
    assert "csrc/alloc/arena.c" in sources and "pyarena/planning/planner.py" in sources
    missing = [f for f in sources if f not in mutated and f not in UNMUTATED]
    assert missing == [], "give each a mutant or a reason in UNMUTATED"
    assert sorted(set(UNMUTATED) - set(sources)) == [], "UNMUTATED names a file that is gone"
    assert sorted(set(UNMUTATED) & mutated) == [], "a file with mutants listed as unmutated"


def test_the_python_layers_each_have_mutants():
    mutated = {m.file for m in MUTANTS}
    for layer, least in (("pyarena/planning/", 6), ("pyarena/runtime/kernels/", 8),
                         ("pyarena/runtime/executor.py", 1), ("pyarena/importers/", 4),
                         ("pyarena/memory/", 3), ("pyarena/graph/", 2)):
        files = {f for f in mutated if f.startswith(layer)}
        assert len(files) >= least, (layer, sorted(files))


def test_mutants_are_documented():
    assert len(MUTANTS) >= 40
    for m in MUTANTS:
        assert m.why and m.tests, m.id
        assert m.original != m.replacement, m.id


def test_a_stale_or_ambiguous_snippet_is_refused(tmp_path):
    from mutants import Mutant
    (tmp_path / "tests" / "c").mkdir(parents=True)
    (tmp_path / "tests" / "c" / "test_x.c").write_text("")
    (tmp_path / "a.c").write_text("x = 1;\ny = 1;\n")
    ok = Mutant("ok", "a.c", "x = 1;", "x = 2;", "why", ("c:test_x",))
    gone = Mutant("gone", "a.c", "z = 1;", "z = 2;", "why", ("c:test_x",))
    twice = Mutant("twice", "a.c", " = 1;", " = 2;", "why", ("c:test_x",))
    assert stale_mutants(str(tmp_path), [ok]) == []
    problems = stale_mutants(str(tmp_path), [ok, gone, twice])
    assert len(problems) == 2
    assert "gone" in problems[0] and "0 times" in problems[0]
    assert "twice" in problems[1] and "2 times" in problems[1]
    assert stale_mutants(str(tmp_path), [ok, ok])[0] == "ok: the id is used twice"
