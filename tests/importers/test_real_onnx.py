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
