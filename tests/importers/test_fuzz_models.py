"""Hostile model files (issue 9, item 5): bit-flipped, overwritten and
truncated copies of the vendored TFLite model and of small ONNX models made
here are imported, planned and run in worker processes under a 4 GiB
address-space limit and a per-case time limit.  Every case must end in
success or a pyarena error: no signal, no hang, no other exception, and no
peak resident set above the memory limit given to pyarena + 64 MiB.

The default run tries a few dozen files per format; ``pytest -m slow``
tries 1,000 per format under a 256 MiB limit."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.fuzz import BUDGET, mutations, reseal, run_cases
from helpers.onnx_util import make_model

FAST, SLOW = 24, 1000
#: the memory limit of the slow runs: every case's peak resident set must
#: stay within it + RSS_SLACK above the worker's start-up
SLOW_BUDGET = 256 << 20


def _onnx_models(tmp_path):
    r = np.random.default_rng(0)
    cnn = tmp_path / "cnn.onnx"
    make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c"], ["r"]),
                helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("Flatten", ["p"], ["f"]),
                helper.make_node("Gemm", ["f", "fw"], ["y"], transB=1)],
               {"x": ([1, 3, 8, 8], np.float32)}, {"y": (None, np.float32)},
               {"w": r.standard_normal((4, 3, 3, 3)).astype(np.float32),
                "b": r.standard_normal(4).astype(np.float32),
                "fw": r.standard_normal((5, 64)).astype(np.float32)}, path=cnn)
    shapes = tmp_path / "shapes.onnx"      # shape arithmetic that folding evaluates
    make_model([helper.make_node("Shape", ["x"], ["s"]),
                helper.make_node("ConstantOfShape", ["s"], ["k"],
                                 value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
                helper.make_node("Mul", ["x", "k"], ["m"]),
                helper.make_node("Concat", ["s", "two"], ["s2"], axis=0),
                helper.make_node("Slice", ["s2", "zero", "two"], ["hw"]),
                helper.make_node("Reshape", ["m", "hw"], ["y"])],
               {"x": ([4, 6], np.float32)}, {"y": (None, np.float32)},
               {"two": np.array([2], np.int64), "zero": np.array([0], np.int64)}, path=shapes)
    consts = tmp_path / "consts.onnx"      # int64 shapes stored in the file: a flip in
    make_model([helper.make_node("ConstantOfShape", ["s"], ["k"],   # one makes a huge tensor
                                 value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
                helper.make_node("Add", ["k", "x"], ["a"]),
                helper.make_node("Tile", ["a", "reps"], ["t"]),
                helper.make_node("Reshape", ["t", "target"], ["y"])],
               {"x": ([1], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([16, 32], np.int64), "reps": np.array([2, 1], np.int64),
                "target": np.array([-1, 64], np.int64)}, path=consts)
    return [cnn, shapes, consts]


def _files(tmp_path, sources, n, seed):
    paths = []
    for j, src in enumerate(sources):
        blob = src.read_bytes()
        k = n // len(sources) + (j < n % len(sources))
        for i, (kind, b) in enumerate(mutations(blob, k, seed + j)):
            p = tmp_path / f"{src.stem}-{i:04d}-{kind}{src.suffix}"
            p.write_bytes(b)
            paths.append(str(p))
    return paths


def _check(report, n):
    assert len(report.outcomes) == n
    assert not report.bad(), f"{report.summary()}: {list(report.bad().items())[:5]}"
    assert report.count("clean") > 0          # the mutations do break files


def _onnx(tmp_path, n, seed, budget=BUDGET):
    paths = _files(tmp_path, _onnx_models(tmp_path), n, seed)
    report = run_cases(paths, budget=budget)
    _check(report, n)
    return report


def _tflite(tmp_path, data_dir, n, seed, budget=BUDGET):
    paths = _files(tmp_path, [data_dir / "face_detection_short_range.tflite"], n, seed)
    report = run_cases(paths, budget=budget)
    _check(report, n)
    return report


def _compiled(tmp_path, data_dir, n, seed, budget=BUDGET):
    """Compiled models (the small ONNX models and the vendored TFLite one),
    mutated; every other file resealed (its checksums made right again, so
    the damage reaches the decoder and the validators)."""
    from pyarena.importers.compiler import compile_model
    sources = []
    for src in _onnx_models(tmp_path) + [data_dir / "face_detection_short_range.tflite"]:
        out = tmp_path / f"{src.stem}-c.pa"
        compile_model(str(src), str(out))
        sources.append(out)
    paths = _files(tmp_path, sources, n, seed)
    for i, p in enumerate(paths):
        if i % 2:
            with open(p, "r+b") as f:
                data = reseal(f.read())
                f.seek(0)
                f.truncate()
                f.write(data)
    report = run_cases(paths, budget=budget)
    _check(report, n)
    return report


def _selftest(tmp_path, names, case_seconds, **kw):
    paths = [str(tmp_path / n) for n in names]
    for p in paths:
        open(p, "wb").close()
    report = run_cases(paths, case_seconds=case_seconds, **kw)
    return [report.outcomes[p][0] for p in paths], report


def test_the_harness_reports_signals_and_foreign_errors(tmp_path):
    got, report = _selftest(tmp_path, ["a.onnx", "b.selftest-signal", "c.selftest-foreign",
                                       "d.onnx"], case_seconds=60.0)
    assert got == ["clean", "signal", "foreign", "clean"]
    assert len(report.bad()) == 2


def test_the_harness_reports_a_case_over_the_memory_limit(tmp_path):
    """A case whose resident set rises past the limit + RSS_SLACK is
    reported, once, whatever its own outcome (here a clean error)."""
    got, report = _selftest(tmp_path, ["a.onnx", "b.selftest-grow", "c.onnx"],
                            case_seconds=60.0, budget=8 << 20)
    assert got == ["clean", "over", "clean"]
    assert report.peak_rss >= 96 << 20
    assert "peak RSS" in report.outcomes[str(tmp_path / "b.selftest-grow")][1]


@pytest.mark.slow
def test_the_harness_reports_hangs(tmp_path):
    got, report = _selftest(tmp_path, ["a.onnx", "b.selftest-hang", "c.onnx"],
                            case_seconds=10.0)
    assert got == ["clean", "hang", "clean"]


def test_mutated_onnx_files_fail_cleanly(tmp_path):
    _onnx(tmp_path, FAST, seed=1)


def test_mutated_tflite_files_fail_cleanly(tmp_path, data_dir):
    pytest.importorskip("tflite")
    _tflite(tmp_path, data_dir, FAST, seed=1)


def test_mutated_compiled_files_fail_cleanly(tmp_path, data_dir):
    _compiled(tmp_path, data_dir, FAST, seed=1)


@pytest.mark.slow
def test_many_mutated_compiled_files_fail_cleanly(tmp_path, data_dir):
    print(_compiled(tmp_path, data_dir, SLOW, seed=1000, budget=SLOW_BUDGET).summary())


@pytest.mark.slow
def test_many_mutated_onnx_files_fail_cleanly(tmp_path):
    print(_onnx(tmp_path, SLOW, seed=1000, budget=SLOW_BUDGET).summary())


@pytest.mark.slow
def test_many_mutated_tflite_files_fail_cleanly(tmp_path, data_dir):
    pytest.importorskip("tflite")
    print(_tflite(tmp_path, data_dir, SLOW, seed=1000, budget=SLOW_BUDGET).summary())
