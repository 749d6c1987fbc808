"""Smoke test of benchmarks/bench_constant_folding.py at small sizes: the
folded arena is the activations-only bound, the run before folding planned
the weight in its arena, and both give the same outputs.  No timing is
asserted."""
import subprocess
import sys


def test_bench_constant_folding_reaches_the_bound(repo_root):
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" /
                                            "bench_constant_folding.py"),
                        "--small", "--models", "classifier_cos,convnet_tile"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[1:]}
    assert set(rows) == {"classifier_cos", "convnet_tile"}, r.stdout
    cos = rows["classifier_cos"]
    assert cos[4] == "1.000x" and float(cos[2]) > 7 * float(cos[1]), cos
    assert float(cos[-1]) < 1e-4, cos
    assert rows["convnet_tile"][2] == "refused" and rows["convnet_tile"][4] == "1.000x"
