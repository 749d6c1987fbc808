"""Pad's reflect and edge modes against NumPy's ``np.pad`` (the same
definitions as ONNX's) over random ranks, shapes and pads -- each border
is one strided copy, so the mirrored order and the corners are where a
slip shows -- and against onnxruntime on a few fixed cases."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from helpers.onnx_util import make_model, run_both
from pyarena import InferenceSession


@st.composite
def _cases(draw):
    nd = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 6), min_size=nd, max_size=nd))
    mode = draw(st.sampled_from(["reflect", "edge"]))
    # reflect: a pad below the axis size (ONNX / NumPy mirror without the edge)
    most = [(d - 1 if mode == "reflect" else 4) for d in shape]
    begin = [draw(st.integers(0, m)) for m in most]
    end = [draw(st.integers(0, m)) for m in most]
    return tuple(shape), mode, begin, end


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_reflect_and_edge_match_numpy(tmp_path_factory, case):
    shape, mode, begin, end = case
    path = tmp_path_factory.mktemp("pad") / "pad.onnx"
    make_model([helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
               {"x": (list(shape), np.float32)}, {"y": (None, np.float32)},
               {"pads": np.array(begin + end, np.int64)}, opset=13, path=path)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    got = InferenceSession(path).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, np.pad(x, list(zip(begin, end)), mode=mode))


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_a_silero_like_reflect_pad_matches_onnxruntime(tmp_path, mode):
    """(1, 512) audio reflected by 64 on the right (Silero VAD's STFT input),
    and a 4-D pad on both spatial axes."""
    x = np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)
    run_both(tmp_path, [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)], {"x": x},
             {"pads": np.array([0, 0, 0, 64], np.int64)}, opset=13, name="a")
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 7)).astype(np.float32)
    run_both(tmp_path, [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)], {"x": x},
             {"pads": np.array([0, 0, 2, 3, 0, 0, 4, 1], np.int64)}, opset=13, name="b")
