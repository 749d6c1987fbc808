"""Smoke test of benchmarks/bench_memory.py on the vendored BlazeFace model
and the onnx package's SqueezeNet: each row has both runtimes, the phases
are ordered as they must be, and pyarena's accounts are its own plan's.
No memory goal is asserted (that is the benchmark's job)."""
import re
import subprocess
import sys


def test_bench_memory_reports_every_phase(repo_root):
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bench_memory.py"),
                        "--models", "face_detection,squeezenet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\S+\.(?:onnx|tflite))\s+(.*)$", line)
        if m:
            rows[m.group(1)] = m.group(2).split()
    assert set(rows) == {"face_detection.tflite", "squeezenet.onnx"}, r.stdout
    for name, c in rows.items():
        base, load, ready, peak, inputs, weights, arena, other, goal = map(float, c[:9])
        ref_base, ref_peak, ref = float(c[10]), float(c[11]), c[12]
        assert ref == ("litert" if name.endswith(".tflite") else "ort")
        # (ready may sit a little under base: the heap trimmed after loading
        # can give back more than a small model adds)
        assert 10 < base < peak and base - 2 < ready <= peak and load <= peak
        assert ref_base < ref_peak
        assert weights > 0.1 and arena > 0.5
        assert 0 < inputs < 1     # a 1x3x128x128 or 1x3x224x224 float32 input
        assert abs(base + inputs + weights + arena + other - peak) < 0.3   # 6 figures rounded
        assert goal > base + inputs + weights + arena
