"""The mutation check's list (tools/mutation/mutants.py) matches the code:
every snippet occurs exactly once in its file, so a change that moves code
fails here, in the default run, and the list is updated with it.  The
check itself (tools/mutation/run.py) plants the mutants and runs the
tests; it is a CI step of its own (see docs/mutation.md)."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "mutation"))

from mutants import MUTANTS  # noqa: E402
from run import stale_mutants  # noqa: E402

# files that hold logic but no mutant, and why
UNMUTATED = {
    "csrc/status.c": "a table of status strings",
}


def test_every_snippet_matches_exactly_once():
    assert stale_mutants(str(ROOT), MUTANTS) == []


def test_every_c_source_with_logic_has_a_mutant():
    mutated = {m.file for m in MUTANTS}
    for path in sorted((ROOT / "csrc").glob("*.c")):
        rel = path.relative_to(ROOT).as_posix()
        assert rel in mutated or rel in UNMUTATED, f"{rel} has no mutant"


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
