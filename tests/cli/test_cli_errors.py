"""The CLI's error contract (issue 9, items 5-6): a bad argument or file
is one line on stderr and exit code 2, blaming the flag that was used."""
import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena.cli import main


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ([2, 3], np.float32)},
               {"y": (None, np.float32)}, path=path)
    return str(path)


def _one_line(capsys):
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("value, match", [
    (str(2 ** 64), "--capacity"), ("-1", "--capacity"), ("big", "--capacity"),
])
def test_capacity_out_of_range_is_one_line(tmp_path, capsys, value, match):
    csv = tmp_path / "i.csv"
    csv.write_text("id,lower,upper,size\na,0,2,64\nb,1,3,64\n")
    assert main(["plan", str(csv), "--capacity", value]) == 2
    assert match in _one_line(capsys)


def test_capacity_accepts_units(tmp_path, capsys):
    csv = tmp_path / "i.csv"
    csv.write_text("id,lower,upper,size\na,0,2,64\nb,1,3,64\n")
    assert main(["plan", str(csv), "--capacity", "1K"]) == 0
    assert main(["plan", str(csv), "--capacity", "100"]) == 3     # 128 bytes needed


def test_unknown_feed_name_blames_feed_not_input(model, tmp_path, capsys):
    np.save(tmp_path / "q.npy", np.zeros((2, 3), np.float32))
    assert main(["run", model, "--feed", f"q={tmp_path / 'q.npy'}"]) == 2
    err = _one_line(capsys)
    assert "--feed 'q'" in err and "--input" not in err


def test_complex_feed_is_refused(model, tmp_path, capsys):
    np.save(tmp_path / "c.npy", np.full((2, 3), 1 + 2j, np.complex64))
    assert main(["run", model, "--feed", f"x={tmp_path / 'c.npy'}"]) == 2
    assert "imaginary" in _one_line(capsys)


def test_non_numeric_feed_is_refused(model, tmp_path, capsys):
    np.save(tmp_path / "s.npy", np.array([["a", "b", "c"], ["d", "e", "f"]]))
    assert main(["run", model, "--feed", f"x={tmp_path / 's.npy'}"]) == 2
    assert "--feed x" in _one_line(capsys)


def test_npz_or_truncated_feed_is_refused(model, tmp_path, capsys):
    np.savez(tmp_path / "a.npz", x=np.zeros((2, 3), np.float32))
    assert main(["run", model, "--feed", f"x={tmp_path / 'a.npz'}"]) == 2
    assert "not a .npy array" in _one_line(capsys)
    np.save(tmp_path / "t.npy", np.zeros((2, 3), np.float32))
    (tmp_path / "t.npy").write_bytes((tmp_path / "t.npy").read_bytes()[:20])
    assert main(["run", model, "--feed", f"x={tmp_path / 't.npy'}"]) == 2
    assert "t.npy" in _one_line(capsys)


@pytest.mark.parametrize("body", ["[" * 100000, '{"tensors": [], "ops": [], "x": ' +
                                  "[" * 50000 + "]" * 50000 + "}"])
def test_deep_json_is_one_line(tmp_path, capsys, body):
    p = tmp_path / "deep.json"
    p.write_text(body)
    assert main(["plan", str(p)]) == 2
    assert "deep.json" in _one_line(capsys)


def test_scratch_bytes_2_64_is_one_line(tmp_path, capsys):
    p = tmp_path / "s.json"
    p.write_text('{"tensors": [{"name": "x", "shape": [4], "role": "input"}, '
                 '{"name": "y", "shape": [4], "role": "output"}], "ops": [{"type": "Relu", '
                 '"inputs": ["x"], "outputs": ["y"], "scratch_bytes": ' + str(2 ** 64) + "}]}")
    assert main(["plan", str(p)]) == 2
    assert "scratch" in _one_line(capsys)


def test_a_multi_line_message_is_printed_on_one_line(model, capsys, monkeypatch):
    from pyarena.cli import plan as plan_cmd
    from pyarena.errors import ModelImportError

    def fail(*args, **kwargs):
        raise ModelImportError("m.onnx: ONNX shape inference failed: [ShapeInferenceError]\n"
                               "(op_type:Add): incompatible dimensions\n")
    monkeypatch.setattr(plan_cmd, "load_model", fail)
    assert main(["plan", model]) == 2
    err = _one_line(capsys)
    assert "[ShapeInferenceError] (op_type:Add): incompatible dimensions" in err


def test_a_conv_whose_weight_does_not_fit_its_input_names_the_operator(tmp_path, capsys):
    path = tmp_path / "conv.onnx"
    make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="the_conv")],
               {"x": ([1, 2, 4, 4], np.float32)}, {"y": (None, np.float32)},
               {"w": np.ones((1, 3, 3, 3), np.float32)}, path=path)
    assert main(["plan", str(path)]) == 2
    assert "'the_conv' (Conv)" in _one_line(capsys)
