"""onnxruntime's DynamicQuantizeLSTM, imported as an LSTM with its 8-bit W
and R dequantized (importers/onnx_dqlstm.py): against onnxruntime's float
LSTM with those very weights (the same computation), and against
onnxruntime's own DynamicQuantizeLSTM, which also rounds X and h to 8 bits
(close, not equal)."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.errors import UnsupportedOpError
from pyarena.importers import load_model
from pyarena.planning import plan
from pyarena.runtime import Executor

S, N, I, H = 6, 2, 5, 4


def _weights(rng, d, per_column, zero_points=False):
    """Quantized W [d, I, 4H], R [d, H, 4H] (int8) with their scales and
    zero points; and the float LSTM weights they stand for."""
    out = {}
    for name, inner in (("W", I), ("R", H)):
        q = rng.integers(-100, 100, (d, inner, 4 * H)).astype(np.int8)
        cols = 4 * H if per_column else 1
        scale = rng.uniform(0.005, 0.02, (d, cols)).astype(np.float32)
        zero = rng.integers(-3, 4, (d, cols)).astype(np.int8) if zero_points else \
            np.zeros((d, cols), np.int8)
        if not per_column:
            scale, zero = scale.reshape(d), zero.reshape(d)
        f = (q.astype(np.float32) - zero.reshape(d, 1, -1)) * scale.reshape(d, 1, -1)
        out[name] = (q, scale, zero, np.ascontiguousarray(f.transpose(0, 2, 1)))
    return out


def _models(tmp_path, direction, per_column, zero_points=False, seed=0):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    w = _weights(rng, d, per_column, zero_points)
    b = rng.uniform(-0.5, 0.5, (d, 8 * H)).astype(np.float32)
    feeds = {"x": rng.uniform(-1, 1, (S, N, I)).astype(np.float32)}
    outs = {"y": (None, np.float32), "yh": (None, np.float32), "yc": (None, np.float32)}
    q_inits = {"w": w["W"][0], "r": w["R"][0], "b": b, "ws": w["W"][1], "wz": w["W"][2],
               "rs": w["R"][1], "rz": w["R"][2]}
    qnode = helper.make_node("DynamicQuantizeLSTM",
                             ["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"],
                             ["y", "yh", "yc"], domain="com.microsoft", name="the_lstm",
                             hidden_size=H, direction=direction)
    qpath, fpath = tmp_path / "q.onnx", tmp_path / "f.onnx"
    m = make_model([qnode], {"x": ([S, N, I], np.float32)}, outs, q_inits, opset=14)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    import onnx
    onnx.save(m, str(qpath))
    fnode = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"],
                             hidden_size=H, direction=direction)
    make_model([fnode], {"x": ([S, N, I], np.float32)}, outs,
               {"w": w["W"][3], "r": w["R"][3], "b": b}, opset=14, path=fpath)
    return qpath, fpath, feeds


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_quantize_lstm_is_the_lstm_of_its_dequantized_weights(
        tmp_path, direction, per_column):
    qpath, fpath, feeds = _models(tmp_path, direction, per_column)
    g = load_model(str(qpath))
    assert [op.op_type for op in g.ops] == ["LSTM"]
    ours = Executor(g, plan(g)).run(feeds)
    same = ort_run(fpath, feeds)            # the float LSTM with those weights
    rounded = ort_run(qpath, feeds)         # onnxruntime's own, X and h in 8 bits
    for k in ("y", "yh", "yc"):
        np.testing.assert_allclose(ours[k], same[k], rtol=1e-5, atol=1e-6, err_msg=k)
        # 8-bit X and h: close on the whole, single elements further off
        # (how far depends on onnxruntime's rounding, which changed in 1.32)
        rel = np.linalg.norm(ours[k] - rounded[k]) / np.linalg.norm(rounded[k])
        assert rel < 0.15, (k, rel)   # a wrong weight layout gives ~1


@pytest.mark.parametrize("per_column", [False, True])
def test_zero_points_are_subtracted(tmp_path, per_column):
    """onnxruntime takes int8 weights with zero point 0 only; other zero
    points (a uint8-style quantization) are checked against the float LSTM."""
    qpath, fpath, feeds = _models(tmp_path, "bidirectional", per_column, zero_points=True)
    g = load_model(str(qpath))
    ours = Executor(g, plan(g)).run(feeds)
    same = ort_run(fpath, feeds)
    for k in ("y", "yh", "yc"):
        np.testing.assert_allclose(ours[k], same[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_computed_weights_are_refused_by_name(tmp_path):
    """W fed at run time: not rewritten, so the op is named as unsupported."""
    rng = np.random.default_rng(1)
    w = _weights(rng, 1, False)
    node = helper.make_node("DynamicQuantizeLSTM",
                            ["x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"],
                            ["y"], domain="com.microsoft", name="fed_lstm", hidden_size=H)
    m = make_model([node], {"x": ([S, N, I], np.float32), "w": ([1, I, 4 * H], np.int8)},
                   {"y": ([S, 1, N, H], np.float32)},
                   {"r": w["R"][0], "ws": w["W"][1], "wz": w["W"][2], "rs": w["R"][1],
                    "rz": w["R"][2]}, opset=14)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    import onnx
    path = tmp_path / "fed.onnx"
    onnx.save(m, str(path))
    with pytest.raises(UnsupportedOpError, match="fed_lstm.*DynamicQuantizeLSTM"):
        load_model(str(path))
