"""``pyarena run`` / ``pyarena plan`` without ``--input`` on models with
symbolic dimensions: batch dimensions take 1, a size the model's
metadata declares is taken, other dimensions the smallest size of the
ladder the model imports at; one line on stderr says what was chosen
(pyarena/cli/shapes.py)."""
import pathlib

import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena.cli import main
from pyarena.cli.shapes import LADDER

VAD = pathlib.Path(__file__).resolve().parent.parent / "data" / "silero_vad_16k_sequence.onnx"


def _pooled(tmp_path, dims, metadata=None, name="m", pool=True):
    """x[dims] -> MaxPool 8x8 (no padding: H and W must be >= 8) -> Relu -> y
    (without ``pool``: x -> Relu -> y)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[8, 8]),
             helper.make_node("Relu", ["p"], ["y"])] if pool else \
        [helper.make_node("Relu", ["x"], ["y"])]
    m = make_model(nodes, {"x": (dims, np.float32)}, {"y": (None, np.float32)})
    for k, v in (metadata or {}).items():
        m.metadata_props.add(key=k, value=v)
    path = tmp_path / f"{name}.onnx"
    import onnx
    onnx.save(m, str(path))
    return str(path)


def _chosen(capsys):
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if "chosen" in line]
    assert len(lines) == 1, err
    return lines[0], out


def test_run_a_sequence_model_without_input(capsys):
    assert main(["run", str(VAD), "--repeat", "1", "--no-reference"]) == 0
    line, out = _chosen(capsys)
    assert line == ("pyarena run: symbolic input dims not given, chosen: "
                    "sequence_length=1 (batch) (as --input input=1,576)")
    assert "input      input [1, 576] float32" in out


def test_dims_nothing_declares_take_the_smallest_size_that_imports(tmp_path, capsys):
    path = _pooled(tmp_path, ["N", 3, "H", "W"])
    assert main(["plan", path, "--time-limit", "0.5"]) == 0
    line, _ = _chosen(capsys)
    size = min(s for s in LADDER if s >= 8)
    assert f"N=1 (batch), H={size}, W={size}" in line
    assert f"H, W: the smallest of {', '.join(map(str, LADDER))}" in line
    assert line.endswith(f"(as --input x=1,3,{size},{size})")


def test_sizes_the_metadata_declares(tmp_path, capsys):
    path = _pooled(tmp_path, ["batch", 3, "height", "width"],
                   {"batch": "2", "imgsz": "[40, 24]"})
    assert main(["run", path, "--repeat", "1"]) == 0
    line, out = _chosen(capsys)
    assert "batch=2 (the model's metadata), height=40 (the model's metadata (imgsz)), " \
           "width=24 (the model's metadata (imgsz))" in line
    assert "x [2, 3, 40, 24] float32" in out
    path = _pooled(tmp_path, [1, "S", "S", 3], {"S": "16"}, name="nhwc", pool=False)
    assert main(["plan", path, "--time-limit", "0.5"]) == 0
    line, _ = _chosen(capsys)
    assert "S=16 (the model's metadata)" in line and "x=1,16,16,3" in line


def test_an_unknown_dim_is_its_own_and_a_symbol_takes_one_size(tmp_path, capsys):
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    path = tmp_path / "two.onnx"
    make_model(nodes, {"a": ([None, "T"], np.float32), "b": ([None, "T"], np.float32)},
               {"y": (None, np.float32)}, path=path)
    assert main(["plan", str(path), "--time-limit", "0.5"]) == 0
    line, _ = _chosen(capsys)
    assert "a[0]=1 (batch), T=1, b[0]=1 (batch)" in line
    assert "--input a=1,1 --input b=1,1" in line


def test_a_given_input_keeps_its_shape(tmp_path, capsys):
    path = _pooled(tmp_path, ["N", 3, "H", "W"])
    assert main(["plan", path, "--input", "x=2,3,9,9", "--time-limit", "0.5"]) == 0
    out, err = capsys.readouterr()
    assert "chosen" not in err


def test_a_model_no_size_fits_names_what_to_give(tmp_path, capsys):
    # a Reshape to 48 values: only H = 8 imports, which the ladder does not hold
    path = tmp_path / "r.onnx"
    make_model([helper.make_node("Reshape", ["x", "s"], ["y"])],
               {"x": (["N", 3, "H", 2], np.float32)}, {"y": (None, np.float32)},
               {"s": np.array([1, 48], np.int64)}, path=path)
    assert 8 not in LADDER
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"sizes {', '.join(map(str, LADDER))} tried" in err
    assert "--input x=<N>,3,<H>,2" in err
