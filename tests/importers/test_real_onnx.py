"""A real ONNX model with a symbolic input and an LSTM: Silero VAD
(tests/data, MIT), run through InferenceSession at several sequence
lengths and checked against onnxruntime on the same file."""
import os

import numpy as np

from helpers.model_zoo import ort_run
from pyarena import InferenceSession
from pyarena.importers import load_model

VAD = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                   "silero_vad_16k_sequence.onnx")


def _feeds(n, seed):
    r = np.random.default_rng(seed)
    return {"input": (r.standard_normal((n, 576)) * 0.1).astype(np.float32),
            "h": (r.standard_normal((1, 1, 128)) * 0.1).astype(np.float32),
            "c": (r.standard_normal((1, 1, 128)) * 0.1).astype(np.float32)}


def test_silero_vad_runs_its_lstm_at_every_sequence_length():
    g = load_model(VAD, inputs={"input": (2, 576)})
    assert "LSTM" in {op.op_type for op in g.ops}
    s = InferenceSession(VAD)
    assert s.get_inputs()[0].shape == ("sequence_length", 576)
    bounds = []
    for n in (1, 4, 10, 4, 1):
        feeds = _feeds(n, n)
        ours = s.run(None, feeds)
        ref = ort_run(VAD, feeds)
        for a, o in zip(ours, s.get_outputs()):
            np.testing.assert_allclose(a, ref[o.name], rtol=1e-4, atol=1e-5)
        bounds.append(s.memory_info()["max_lower_bound_bytes"])
    info = s.memory_info()
    assert info["plans"] == 3 and info["arena_bytes"] == bounds[-1] == max(bounds)


CLS = os.path.join(os.path.dirname(VAD), "ch_ppocr_mobile_v2.0_cls_infer.onnx")


def test_paddleocr_classifier_matches_onnxruntime_at_two_batches():
    """PaddleOCR's direction classifier (tests/data, Apache 2.0): symbolic
    batch and width, squeeze-excitation blocks; the scores of a session
    against onnxruntime's on the same file, and batch 3's rows against
    three batch-1 runs of the same session (a signature per batch)."""
    s = InferenceSession(CLS)
    r = np.random.default_rng(3)
    x = r.uniform(-1, 1, (3, 3, 48, 192)).astype(np.float32)
    name = s.get_outputs()[0].name
    ours = s.run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, ort_run(CLS, {"x": x})[name], rtol=1e-4, atol=1e-5)
    rows = np.concatenate([s.run(None, {"x": x[i:i + 1]})[0] for i in range(3)])
    np.testing.assert_allclose(rows, ours, rtol=1e-5, atol=1e-6)
    assert ours.shape == (3, 2) and np.allclose(ours.sum(1), 1, atol=1e-5)
