"""The generated mutants' tests (tools/mutation/generate.py, run.py): the
tests named after the mutated file run first, the rest of its layer after
them and without them, so the verdict is the whole layer's."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "mutation"))

import generate  # noqa: E402
from mutants import Mutant  # noqa: E402
from run import rest_of  # noqa: E402


def _py_tests(folder, prefix):
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob(prefix + "*.py"))


def test_a_python_module_runs_the_tests_named_after_it_first():
    rel = "pyarena/memory/trace.py"
    tests = generate.tests_for(rel, str(ROOT))
    assert tests == ("tests/memory",)
    assert list(generate.mirrored_tests(rel, tests, str(ROOT))) == \
        _py_tests("tests/memory", "test_trace")


def test_a_module_without_a_namesake_falls_back_to_its_first_word_then_its_package():
    first = generate.mirrored_tests("pyarena/importers/session_keys.py",
                                    ("tests/importers",), str(ROOT))
    assert list(first) == _py_tests("tests/importers", "test_session")
    first = generate.mirrored_tests("pyarena/runtime/kernels/spatial.py", ("tests/runtime",),
                                    str(ROOT))
    assert list(first) == _py_tests("tests/runtime", "test_kernels")


def test_a_c_source_runs_every_binary_of_its_folder_and_its_namesakes_first():
    tests = generate.tests_for("csrc/kernels/qconv.c", str(ROOT))
    binaries = sorted("c:kernels/" + p.stem for p in (ROOT / "tests/c/kernels").glob("test_*.c"))
    assert [t for t in tests if t.startswith("c:")] == binaries
    first = generate.mirrored_tests("csrc/kernels/qconv.c", tests, str(ROOT))
    assert first[0] == "c:kernels/test_qconv"
    assert "c:kernels/test_kernels" not in first


def test_the_rest_of_the_layer_leaves_out_what_ran_first():
    m = Mutant("x", "pyarena/memory/trace.py", "a", "b", "why",
               tests=("c:alloc/test_pool", "c:alloc/test_slab", "tests/memory",
                      "tests/runtime/test_kernels.py"),
               first=("c:alloc/test_pool", "tests/memory/test_trace.py",
                      "tests/runtime/test_kernels.py"))
    rest, ignore = rest_of(m)
    assert rest == ["c:alloc/test_slab", "tests/memory"]
    assert ignore == ["tests/memory/test_trace.py"]


def test_a_swap_exchanges_whole_operands_and_never_makes_a_non_program():
    def swaps(line):
        return [m.group(0) for m in generate._SWAP.finditer(line)]
    assert swaps("h = ((uintptr_t)m + total - sizeof(pa_chunk_t)) & ~63;") == []
    assert swaps("x = a.b - c[i]") == []
    assert swaps("int64_t iw0 = ow * c->sw - c->pad_left;") == ["c->sw - c->pad_left"]
    assert swaps("n = self.hi - self.lo") == ["self.hi - self.lo"]
