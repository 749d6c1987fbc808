"""benchmarks/bench_runtime_values.py runs end to end: every way of feeding
a value gives onnxruntime's output (the table's own difference column),
and a value that decides shapes makes a plan per distinct value."""
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")


def test_the_table_is_complete_and_agrees_with_onnxruntime(repo_root, tmp_path):
    out = tmp_path / "table.md"
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bench_runtime_values.py"),
                        "--repeat", "5", "--markdown", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| model")]
    assert len(rows) == 12
    for model, way, ours, theirs, ratio, diff, plans in rows:
        assert float(diff) < 1e-4, (model, way, diff)
        assert float(ours) > 0 and float(theirs) > 0
        if way.strip() == "fed, a cycle of 4 values" and "Conv" not in model:
            assert int(plans) == 4, (model, plans)     # one plan per value
        if way.strip() == "as an initializer":
            assert int(plans) == 1
