"""``pyarena run`` end to end on ONNX and TFLite files."""
import re

import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from helpers.tflite_util import small_cnn
from pyarena.cli import main


def _model(tmp_path, cin=3):
    """A small CNN over ``cin`` input channels (3: the first convolution
    runs the native few-input-channel kernel; 5: im2col + BLAS)."""
    r = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw"], ["y"], transB=1)]
    path = tmp_path / "small.onnx"
    make_model(nodes, {"x": (["N", cin, 8, 8], np.float32)}, {"y": (None, np.float32)},
               {"w": r.standard_normal((4, cin, 3, 3)).astype(np.float32),
                "b": r.standard_normal(4).astype(np.float32),
                "fw": r.standard_normal((5, 64)).astype(np.float32)}, path=path)
    return str(path)


def test_run_onnx_with_feed_and_save(tmp_path, capsys):
    path = _model(tmp_path)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    rc = main(["run", path, "--feed", f"x={tmp_path / 'x.npy'}", "--save", str(out),
               "--repeat", "2"])
    text = capsys.readouterr().out
    assert rc == 0, text
    for key in ("inference", "arena", "lower bound", "weights", "peak RSS"):
        assert key in text
    assert "x [2, 3, 8, 8] float32: feed" in text
    diff = float(re.search(r"onnxruntime: max \|difference\| (\S+)", text).group(1))
    assert diff < 1e-4
    saved = np.load(out)
    assert list(saved) == ["y"]
    np.testing.assert_allclose(saved["y"], ort_run(path, {"x": x})["y"], rtol=1e-5,
                               atol=1e-5)


def test_run_binds_symbols_with_input(tmp_path, capsys):
    path = _model(tmp_path)
    assert main(["run", path, "--repeat", "1"]) == 0       # N: a batch of 1, said so
    out, err = capsys.readouterr()
    assert "chosen: N=1 (batch) (as --input x=1,3,8,8)" in err
    assert "y [1, 5] float32" in out
    assert main(["run", path, "--input", "x=3,3,8,8", "--repeat", "1"]) == 0
    out, err = capsys.readouterr()
    assert "y [3, 5] float32" in out and "chosen" not in err


def test_run_tflite_against_interpreter(tmp_path, capsys):
    path = small_cnn(tmp_path / "m.tflite")
    assert main(["run", path, "--repeat", "1", "--save", str(tmp_path / "o.npz")]) == 0
    text = capsys.readouterr().out
    diff = float(re.search(r"TFLite interpreter: max \|difference\| (\S+)", text).group(1))
    assert diff < 1e-4
    assert np.load(tmp_path / "o.npz")["prob"].shape == (1, 10)


def test_run_bad_arguments(tmp_path, capsys):
    path = _model(tmp_path)
    np.save(tmp_path / "bad.npy", np.zeros((2, 3, 8, 8), np.float32))
    assert main(["run", path, "--input", "x=2,3,8,8",
                 "--feed", f"nope={tmp_path / 'bad.npy'}"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["run", path, "--feed", f"x={tmp_path / 'missing.npy'}"]) == 2
    assert "missing.npy" in capsys.readouterr().err
    erf = tmp_path / "erf.onnx"
    make_model([helper.make_node("Bernoulli", ["x"], ["y"], name="the_bernoulli")],
               {"x": ([2], np.float32)}, {"y": (None, np.float32)}, path=erf)
    assert main(["run", str(erf)]) == 2
    assert "the_bernoulli" in capsys.readouterr().err


def test_run_profile_threads_and_no_native(tmp_path, capsys):
    path = _model(tmp_path)
    args = ["run", path, "--input", "x=1,3,8,8", "--repeat", "2", "--profile"]
    assert main(args + ["--threads", "2"]) == 0
    text = capsys.readouterr().out
    assert "per op type [path]" in text
    # the 3-channel conv runs the few-input-channel kernel, pooling is native
    assert re.search(r"Conv \[native\]\s+\S+ ms", text)
    assert re.search(r"MaxPool \[native\]", text)
    diff = float(re.search(r"onnxruntime: max \|difference\| (\S+)", text).group(1))
    assert diff < 1e-4
    assert main(args + ["--no-native"]) == 0
    text = capsys.readouterr().out
    assert "MaxPool [numpy]" in text and "[native" not in text
    assert main(args + ["--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err
    assert main(args + ["--blas-threads", "-1"]) == 2
    assert "--blas-threads" in capsys.readouterr().err


def test_run_layout_option(tmp_path, capsys):
    # a 3x3 conv + pool: "auto" keeps NCHW (no depthwise / 1x1 conv),
    # "nhwc" converts the region, both agree with onnxruntime
    path = _model(tmp_path)
    args = ["run", path, "--input", "x=2,3,8,8", "--repeat", "1"]
    for rule, line in (("auto", None), ("keep", None),
                       ("nhwc", r"^layout\s+NHWC: 2 ops in 1 region\(s\) converted from NCHW, "
                                r"2 Transposes")):
        assert main(args + ["--layout", rule]) == 0
        text = capsys.readouterr().out
        found = re.search(line or r"^layout\s", text, re.M)
        assert bool(found) == (line is not None), text
        diff = float(re.search(r"onnxruntime: max \|difference\| (\S+)", text).group(1))
        assert diff < 1e-4
    with pytest.raises(SystemExit) as exc:      # argparse: not one of the choices
        main(args + ["--layout", "NHWC"])
    assert exc.value.code == 2 and "--layout" in capsys.readouterr().err


def test_run_value_specialises_an_if_model(tmp_path, capsys):
    from importers.test_onnx_control import _model as if_model
    path = if_model(str(tmp_path / "if.onnx"))
    for sr in ("16000", "8000"):
        rc = main(["run", path, "--input", "x=3,4", "--value", f"sr={sr}", "--repeat", "1"])
        text = capsys.readouterr().out
        assert rc == 0, text
        diff = float(re.search(r"onnxruntime: max \|difference\| (\S+)", text).group(1))
        assert diff < 1e-5
    assert main(["run", path, "--input", "x=3,4", "--value", "sr=fast"]) == 2
    assert "'fast' is not a number" in capsys.readouterr().err
    assert main(["run", path, "--input", "x=3,4", "--value", "rate=1"]) == 2
    assert "'rate' is not a graph input" in capsys.readouterr().err


def test_run_plans_scratch_within_the_slack_unless_told_otherwise(tmp_path, capsys):
    path = _model(tmp_path, cin=5)      # im2col + BLAS: a workspace to plan

    def arena(*extra):
        assert main(["run", path, "--input", "x=1,5,8,8", "--repeat", "1",
                     "--no-reference", *extra]) == 0
        text = capsys.readouterr().out
        m = re.search(r"arena\s+([\d.,]+) (B|KiB)\s+\(lower bound", text)
        return float(m.group(1).replace(",", "")) * (1024 if m.group(2) == "KiB" else 1)
    slack, wide = arena(), arena("--wide-scratch")
    assert slack < wide
