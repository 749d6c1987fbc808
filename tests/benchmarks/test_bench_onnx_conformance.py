"""benchmarks/bench_onnx_conformance.py: a crash in a child is pinned to its
case (the others of its batch still run), the outcomes reach the JSON
report, and -- under ``-m slow`` -- every ONNX node case run as written
gives pyarena no wrong result, raw exception or crash."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")


def _run(repo_root, tmp_path, *args, timeout):
    out = tmp_path / "cases.json"
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" /
                                            "bench_onnx_conformance.py"),
                        "--json", str(out), *args],
                       capture_output=True, text=True, timeout=timeout)
    return r, (json.loads(out.read_text())["cases"] if out.exists() else None)


def test_a_crash_is_pinned_to_its_case(repo_root, tmp_path):
    r, cases = _run(repo_root, tmp_path, "--cases", "^test_(abs|neg|div_int32_trunc)$",
                    "--abort-on", "test_neg", timeout=120)
    assert r.returncode == 1, r.stderr[-2000:]
    assert set(cases) == {"test_abs", "test_neg", "test_div_int32_trunc"}
    assert cases["test_neg"]["pyarena"][0] == "crash"
    assert "signal" in cases["test_neg"]["pyarena"][1]
    assert cases["test_neg"]["onnxruntime"][0] == "pass"
    for name in ("test_abs", "test_div_int32_trunc"):
        assert cases[name]["pyarena"] == ["pass", ""], cases[name]
        assert cases[name]["onnxruntime"] == ["pass", ""], cases[name]
    assert "crash  test_neg [Neg]" in r.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_node_case_is_right_or_refused(repo_root, tmp_path):
    r, cases = _run(repo_root, tmp_path, "--markdown", str(tmp_path / "refused.md"),
                    timeout=1800)
    bad = {n: c["pyarena"] for n, c in cases.items()
           if c["pyarena"][0] in ("wrong", "raw", "crash")}
    assert not bad, bad
    assert r.returncode == 0, r.stdout[-3000:]
    assert any(c["pyarena"][0] == "pass" for c in cases.values())
    assert any(c["onnxruntime"][0] == "pass" for c in cases.values())
    assert "| reason | cases |" in (tmp_path / "refused.md").read_text()
