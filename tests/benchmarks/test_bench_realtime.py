"""benchmarks/bench_realtime.py's clocks: ``--clock cpu`` times the
1-thread rows by CPU time (marked "(cpu)" in the table) and keeps the wall
clock for more threads; the rows still compare pyarena's outputs with
onnxruntime's.  No timing is asserted."""
import importlib.util
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _bench(repo_root):
    spec = importlib.util.spec_from_file_location(
        "bench_realtime", repo_root / "benchmarks" / "bench_realtime.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cpu_clock_times_one_thread_rows_only(repo_root, monkeypatch):
    monkeypatch.syspath_prepend(str(repo_root / "benchmarks"))    # (its scratch module)
    b = _bench(repo_root)
    one = b.row("squeezenet", 1, 2, "cpu")
    two = b.row("squeezenet", 2, 2, "cpu")
    wall = b.row("squeezenet", 1, 2)
    assert (one["clock"], two["clock"], wall["clock"]) == ("cpu", "wall", "wall")
    for r in (one, two, wall):
        assert r["pyarena_ms"] > 0 and r["ref_ms"] > 0
        assert r["diff"] < 1e-3
    lines = b.table([one, two, wall]).splitlines()[2:]
    assert "per inference (cpu)" in lines[0]
    assert "(cpu)" not in lines[1] and "(cpu)" not in lines[2]


def test_clock_flag_rejects_other_values(repo_root):
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bench_realtime.py"),
                        "--clock", "gpu", "--models", "squeezenet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "--clock" in r.stderr
