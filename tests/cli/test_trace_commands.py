"""``pyarena trace`` (record any Python program) and ``pyarena alloc-bench``
(replay traces against each allocator)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import pyarena
from pyarena.memory.trace import read_trace

PROGRAM = textwrap.dedent("""\
    import sys
    import numpy as np
    import pyarena
    acc = np.zeros(4)
    for i in range(int(sys.argv[1])):
        a = np.full(1000 + i, 2.0)
        acc += a[:4] * 3
        del a
        pyarena.trace.step()
    print("result", acc.tolist(), sys.argv[2:])
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0)
""")


def env_here():
    return dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pyarena.__file__)))


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pyarena", *args], capture_output=True,
                          text=True, cwd=cwd, env=env_here())


@pytest.fixture
def program(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


def test_trace_runs_the_program_unchanged(tmp_path, program):
    plain = subprocess.run([sys.executable, str(program), "20", "--flag"], capture_output=True,
                           text=True, env=env_here())
    r = run_cli("trace", "-o", "t.trace.gz", "--steps", "none", "--", sys.executable,
                str(program), "20", "--flag", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert "result [120.0, 120.0, 120.0, 120.0] ['--flag']" in r.stdout
    t = read_trace(tmp_path / "t.trace.gz")
    assert t.steps == 20                        # the program's own marks only
    big = [int(s) for k, s in zip(t.kinds, t.sizes) if k == 0 and s >= 8000]
    assert big == [8 * (1000 + i) for i in range(20)]
    assert t.header["program"].endswith("prog.py 20 --flag")
    assert "20 steps" in r.stderr


def test_trace_passes_the_exit_status_on(tmp_path, program):
    r = run_cli("trace", "-o", "t.trace", "--", sys.executable, str(program), "3", "7",
                cwd=tmp_path)
    assert r.returncode == 7
    assert read_trace(tmp_path / "t.trace").steps >= 3


def test_trace_with_callsites_and_pool(tmp_path, program):
    r = run_cli("trace", "-o", "t.trace", "--callsites", "--pool", "--", sys.executable,
                str(program), "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "result [30.0, 30.0, 30.0, 30.0]" in r.stdout
    t = read_trace(tmp_path / "t.trace")
    full_line = PROGRAM.splitlines().index("    a = np.full(1000 + i, 2.0)") + 1
    assert t.callsites is not None
    sizes = [int(s) for k, s in zip(t.kinds, t.sizes) if k == 0]
    assert len(sizes) == len(t.callsites)
    # np.full is NumPy's Python code: the site is the program's line calling it
    assert [c for s, c in zip(sizes, t.callsites) if s >= 8000] == \
        [f"{program}:{full_line}"] * 5


HASH_ORDER = textwrap.dedent("""\
    import os
    import numpy as np
    names = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    for it in range(150):
        arrs = {n: np.ones(100 + 37 * i + it % 3) for i, n in enumerate(names)}
        for n in set(names):              # set order: the hash seed's
            del arrs[n]
            if n in ("beta", "eta"):
                t = np.empty(900)
                del t
    print("seed", os.environ.get("PYTHONHASHSEED"))
""")


def trace_hash_order(tmp_path, env):
    r = subprocess.run([sys.executable, "-m", "pyarena", "trace", "-o", "h.trace", "--",
                        sys.executable, "prog.py"], capture_output=True, text=True,
                       cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    t = read_trace(tmp_path / "h.trace")
    return r.stdout.split()[-1], (t.steps, list(t.kinds), list(t.sizes))


def test_trace_gives_the_same_automatic_steps_every_run(tmp_path):
    """Run twice, the same program gets the same steps: a random hash seed
    per run reordered the frees of each iteration (set order) and moved
    the automatic marks (401 or 801 steps by seed on 400 iterations).  The
    command runs with seed 0 unless the user sets one, which is kept."""
    (tmp_path / "prog.py").write_text(HASH_ORDER)
    env = {k: v for k, v in env_here().items() if k != "PYTHONHASHSEED"}
    seed, first = trace_hash_order(tmp_path, env)
    assert seed == "0" and first[0] >= 150
    assert trace_hash_order(tmp_path, env) == (seed, first)
    steps = {}
    for user_seed in ("3", "6"):    # 2 and 1 marks per iteration on this program
        got, trace = trace_hash_order(tmp_path, dict(env, PYTHONHASHSEED=user_seed))
        assert got == user_seed
        steps[user_seed] = trace[0]
    assert steps["3"] != steps["6"]


def test_trace_refuses_what_is_not_a_python_program(tmp_path):
    r = run_cli("trace", "-o", "t.trace", "--", "true", cwd=tmp_path)
    assert r.returncode == 2
    assert "no trace was written" in r.stderr
    r = run_cli("trace", "-o", "t.trace", "--", "no-such-program-xyz", cwd=tmp_path)
    assert r.returncode == 2
    assert "cannot run" in r.stderr
    r = run_cli("trace", "-o", str(tmp_path / "nodir" / "t.trace"), "--", sys.executable,
                "-c", "pass", cwd=tmp_path)
    assert r.returncode == 2 and "no such directory" in r.stderr


REQUIRED = {"allocator", "ns_per_pair", "footprint", "footprint_warm", "fragmentation",
            "page_faults", "peak_live_bytes", "rss_kept_bytes", "trace"}


def test_alloc_bench_sample_json_rows(tmp_path):
    r = run_cli("alloc-bench", "--sample", "--repeat", "1", "--json", "rows.json",
                "--allocators",
                "glibc,glibc-tuned,pool-hybrid,pool-slab,pool-buddy,pool-learned,tcmalloc",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "rows.json").read_text())
    traces = sorted({row["trace"] for row in rows})
    assert len(traces) == 2
    for path in traces:
        peak = read_trace(path).peak_live_bytes
        mine = [row for row in rows if row["trace"] == path]
        assert [row["allocator"] for row in mine] == ["glibc", "glibc-tuned", "pool-hybrid",
                                                     "pool-slab", "pool-buddy", "pool-learned",
                                                     "tcmalloc"]
        for row in mine:
            if "skipped" in row:
                assert row["allocator"] == "tcmalloc"
                continue
            assert REQUIRED <= set(row), row
            assert row["peak_live_bytes"] == peak
            assert row["ns_per_pair"] > 0 and row["page_faults"] >= 0
    mobilenet = [row for row in rows if "mobilenet" in row["trace"]
                 and row["allocator"].startswith("pool")]
    assert all(row["footprint"] >= 0.9 for row in mobilenet)   # every page touched
    assert "static plan of the trace" in r.stdout
    assert "lower bound" in r.stdout


def test_alloc_bench_plot(tmp_path):
    pytest.importorskip("matplotlib")
    r = run_cli("alloc-bench", "--sample", "--repeat", "1", "--allocators", "glibc,pool-slab",
                "--no-plan", "--plot", "fp.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_alloc_bench_json_to_stdout_keeps_it_parseable(tmp_path):
    r = run_cli("alloc-bench", "--sample", "--repeat", "1", "--allocators", "glibc",
                "--no-plan", "--json", "-", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["allocator"] for row in rows] == ["glibc", "glibc"]
    assert "allocator" in r.stderr          # the table went to stderr


@pytest.mark.parametrize("args, why", [
    ((), "give trace files"),
    (("--sample", "--allocators", "hoard"), "unknown allocator"),
    (("--sample", "--repeat", "0"), "--repeat"),
    (("missing.trace",), "No such file"),
])
def test_alloc_bench_bad_arguments(tmp_path, args, why):
    r = run_cli("alloc-bench", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert why in r.stderr


def test_alloc_bench_refuses_a_trace_larger_than_the_machine(tmp_path):
    (tmp_path / "huge.trace").write_text("a 0 %d\nf 0\n" % (1 << 50))
    r = run_cli("alloc-bench", "huge.trace", cwd=tmp_path)
    assert r.returncode == 2
    assert "available" in r.stderr
