"""ONNX operators at their boundaries, against onnxruntime and ONNX's own
reference implementation: older opsets (attributes that later became
inputs), ``axes`` inputs, INT64_MIN / INT64_MAX ends with negative steps,
channel counts equal to the last dimension, a roi ending at 1.0.  These are
where a plausible off-by-one slips past tests of the common case."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from helpers.onnx_util import make_model, run_both

INT64_MIN, INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _reference(tmp_path, nodes, feeds, inits, opset, outputs=("y",)):
    m = make_model(nodes, {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
                   {o: (None, np.float32) for o in outputs}, inits, opset)
    return ReferenceEvaluator(m).run(None, feeds)


def _both(tmp_path, nodes, feeds, inits=None, opset=17, outputs=("y",), **kw):
    """pyarena == onnxruntime (run_both asserts it) == the ONNX reference."""
    _, ours, _ = run_both(tmp_path, nodes, feeds, inits, outputs=outputs, opset=opset, **kw)
    ref = _reference(tmp_path, nodes, feeds, inits, opset, outputs)
    for o, r in zip(outputs, ref):
        assert ours[o].shape == r.shape, (o, ours[o].shape, r.shape)
        np.testing.assert_allclose(ours[o], r, atol=1e-5, rtol=1e-4, err_msg=o)
    return ours


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 4, 3), (2, 3, 3), (1, 4, 2, 4)])
def test_prelu_1d_slope_broadcasts_over_the_last_axis_when_channels_equal_it(tmp_path,
                                                                           shape, native):
    """ONNX broadcasting: a 1-D slope lines up with the LAST axis, also when
    the channel axis (1) has the same length."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    slope = np.array([0.1, 2.0, -3.0, 5.0][:shape[-1]], np.float32)
    _both(tmp_path, [helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, {"s": slope},
          native=native)


@pytest.mark.parametrize("roi_end", [1.0, 0.875])
def test_resize_tf_crop_and_resize_roi_to_the_edge(tmp_path, roi_end):
    """A roi ending at 1.0 samples the last row / column itself (inside:
    no extrapolation value); past it the extrapolation value."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    roi = np.array([0, 0, 0.5, 0.25, 1, 1, roi_end, 1.0], np.float32)   # exact in binary
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"],
                            mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                            extrapolation_value=-10.0)
    ours = _both(tmp_path, [node], {"x": x},
                 {"roi": roi, "sizes": np.array([1, 1, 3, 3], np.int64)}, opset=13)
    if roi_end == 1.0:
        assert not (ours["y"] == -10.0).any()
        assert ours["y"][0, 0, -1, -1] == x[0, 0, -1, -1]


@pytest.mark.parametrize("axes", [[2], [-1], [1, 3], [3, 1]])
def test_pad_with_axes_input(tmp_path, axes):
    """Opset 18: ``pads`` holds the begins of the named axes, then their ends."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    pads = np.array(list(range(1, len(axes) + 1)) + list(range(2, len(axes) + 2)), np.int64)
    node = helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"], mode="constant")
    _both(tmp_path, [node], {"x": x},
          {"pads": pads, "v": np.array(-1.5, np.float32), "axes": np.array(axes, np.int64)},
          opset=18)


@pytest.mark.parametrize("starts, ends, steps", [
    ([INT64_MAX], [INT64_MIN], [-1]),      # reverse everything
    ([-1], [INT64_MIN], [-2]),
    ([5], [-6], [-1]),                     # start past the end, clamped
    ([2], [INT64_MAX], [1]),
    ([INT64_MIN], [3], [1]),
    ([4], [-100], [-3]),
])
def test_slice_clamps_extreme_starts_and_ends(tmp_path, starts, ends, steps):
    x = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    node = helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])
    _both(tmp_path, [node], {"x": x},
          {"st": i64(starts), "en": i64(ends), "ax": i64([0]), "sp": i64(steps)})


@pytest.mark.parametrize("opset", [11, 12])
def test_split_attribute_before_opset_13(tmp_path, opset):
    """Before opset 13 the sizes are the ``split`` attribute (an input from 13)."""
    x = np.arange(4 * 2, dtype=np.float32).reshape(4, 2)
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[1, 3])
    ours = _both(tmp_path, [node], {"x": x}, opset=opset, outputs=("a", "b"))
    assert ours["a"].shape == (1, 2) and ours["b"].shape == (3, 2)


def test_split_input_from_opset_13(tmp_path):
    x = np.arange(5 * 2, dtype=np.float32).reshape(5, 2)
    node = helper.make_node("Split", ["x", "s"], ["a", "b"], axis=0)
    ours = _both(tmp_path, [node], {"x": x}, {"s": np.array([4, 1], np.int64)}, opset=13,
                 outputs=("a", "b"))
    assert ours["a"].shape == (4, 2) and ours["b"].shape == (1, 2)


# -- attributes that contradict the tensors they describe ---------------------------

def _conv_model(tmp_path, name, w_shape, **attrs):
    from helpers.onnx_util import make_model
    w = np.random.default_rng(0).standard_normal(w_shape).astype(np.float32)
    path = tmp_path / f"{name}.onnx"
    make_model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)],
               {"x": ([1, w_shape[1], 8, 8], np.float32)}, {"y": (None, np.float32)},
               {"w": w}, path=path)
    return path


@pytest.mark.parametrize("name, w_shape, attrs", [
    ("kernel-vs-weight", (4, 3, 3, 3), dict(kernel_shape=[5, 5])),
    ("kernel-one-axis", (4, 3, 3, 3), dict(kernel_shape=[3, 1])),
    ("zero-stride", (4, 3, 3, 3), dict(strides=[0, 1])),
    ("negative-dilation", (4, 3, 3, 3), dict(dilations=[1, -1])),
    ("strides-rank", (4, 3, 3, 3), dict(strides=[1, 1, 1])),
])
def test_contradicting_conv_attributes_are_refused_as_onnxruntime_refuses_them(
        tmp_path, name, w_shape, attrs):
    from helpers.model_zoo import ort_run
    from pyarena import InferenceSession
    from pyarena.errors import GraphError
    path = _conv_model(tmp_path, name, w_shape, **attrs)
    x = np.ones((1, w_shape[1], 8, 8), np.float32)
    with pytest.raises(Exception):
        ort_run(path, {"x": x})
    with pytest.raises(GraphError):
        InferenceSession(path).run(None, {"x": x})


def test_a_kernel_shape_that_agrees_is_accepted(tmp_path):
    from helpers.model_zoo import ort_run
    from pyarena import InferenceSession
    path = _conv_model(tmp_path, "ok", (4, 3, 3, 3), kernel_shape=[3, 3], strides=[2, 1])
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(InferenceSession(path).run(None, {"x": x})[0],
                               ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-5)
