"""The ONNX node cases of GridSample (2-D and 3-D; nearest, linear and
cubic; zeros, border and reflection padding; align_corners) and
AffineGrid (2-D and 3-D, the size fed at run time; its function bodies),
run through an InferenceSession with every input fed at run time, against
the reference outputs and onnxruntime."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

MODULES = ("gridsample", "affinegrid")
CASES = cases(r"test_(gridsample\w*|affine_grid\w*)", MODULES)


def test_the_forms_are_covered():
    assert {"test_gridsample_bicubic_align_corners_1_additional_1",
            "test_gridsample_reflection_padding", "test_gridsample_border_padding",
            "test_gridsample_volumetric_bilinear_align_corners_0",
            "test_gridsample_nearest_align_corners_0_additional_1", "test_affine_grid_3d",
            "test_affine_grid_2d_align_corners_expanded",
            "test_affine_grid_3d_align_corners_expanded"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_points_far_outside_match_onnxruntime(tmp_path, mode, padding, align):
    """Grid points up to three times beyond the input, where the padding
    modes differ most (reflected several times over).  Cubic with border
    padding: onnxruntime clamps the point, not each tap, and differs from
    ONNX's reference by up to 0.2 here; that one is checked against the
    reference evaluator."""
    rng = np.random.default_rng(len(mode) * 7 + len(padding) + align)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = rng.uniform(-3, 3, (1, 6, 7, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding,
                            align_corners=align)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                           helper.make_tensor_value_info("g", TensorProto.FLOAT, grid.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 7])])
    path = tmp_path / "gs.onnx"
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    onnx.save(model, str(path))
    got, = pyarena.InferenceSession(str(path)).run(None, {"x": x, "g": grid})
    if (mode, padding) == ("cubic", "border"):
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, {"x": x, "g": grid})[0]
    else:
        want = ort_run(path, {"x": x, "g": grid})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
