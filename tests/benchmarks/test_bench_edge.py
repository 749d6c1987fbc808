"""Smoke test of benchmarks/bench_edge.py on the vendored BlazeFace model
and the built-in MobileNetV2 written out as ONNX and TFLite: every row runs
against its reference runtime, pyarena's outputs agree with it, and the
plans (fusion rewrite on) reach the lower bound.  No timing is asserted."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("ai_edge_litert")


def _rows(text):
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(\S+\.(?:onnx|tflite))\s+(\d+)\s+(.*)$", line)
        if m:
            rows[(m.group(1), int(m.group(2)))] = m.group(3).split()
    return rows


def test_bench_edge_runs_and_agrees_with_the_references(repo_root):
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bench_edge.py"),
                        "--repeat", "1", "--threads", "1,2", "--blas-threads", "1", "--no-rss",
                        "--models", "face_detection,mobilenet_v2"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = _rows(r.stdout)
    want = {(m, t) for m in ("face_detection.tflite", "mobilenet_v2.onnx",
                             "mobilenet_v2.tflite") for t in (1, 2)}
    assert set(rows) == want, r.stdout
    for key, cols in rows.items():
        # numpy ms, pyarena ms, ref ms, ref, ratios..., max|diff|, arena/bound
        assert cols[3] == ("ort" if key[0].endswith(".onnx") else "litert"), cols
        assert float(cols[-2]) < 1e-3, (key, cols)
        assert cols[-1] == "1.000x", (key, cols)


def test_bench_edge_compares_the_layout_pass(repo_root):
    # --compare-layout: a "keep ms" column (the NHWC pass off) and its
    # ratio, in the same rounds
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bench_edge.py"),
                        "--repeat", "1", "--threads", "1", "--blas-threads", "1", "--no-rss",
                        "--models", "mobilenet_v2", "--compare-layout"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "keep ms" in r.stdout and "keep/ref" in r.stdout
    rows = _rows(r.stdout)
    assert set(rows) == {("mobilenet_v2.onnx", 1), ("mobilenet_v2.tflite", 1)}, r.stdout
    for key, cols in rows.items():
        # numpy, pyarena, keep, ref ms, ref, ratios..., max|diff|, arena/bound
        assert cols[4] == ("ort" if key[0].endswith(".onnx") else "litert"), cols
        assert cols[6].endswith("x") and float(cols[6][:-1]) > 0, cols
        assert float(cols[-2]) < 1e-3 and cols[-1] == "1.000x", (key, cols)
