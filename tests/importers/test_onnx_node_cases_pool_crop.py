"""The ONNX node cases of LpPool (1-D, 2-D and 3-D) and
CenterCropPad (the target shape fed at run time; its function bodies,
whose Pad and Slice take bounds computed at run time, so their outputs
are pool tensors), run through an InferenceSession with every input fed
at run time, against the reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case

MODULES = ("lppool", "center_crop_pad")
CASES = cases(r"test_(lppool\w*|center_crop_pad\w*)", MODULES)


def test_the_forms_are_covered():
    assert {"test_lppool_1d_default", "test_lppool_2d_dilations", "test_lppool_2d_pads",
            "test_lppool_2d_same_lower", "test_lppool_2d_strides", "test_center_crop_pad_pad",
            "test_center_crop_pad_crop_and_pad", "test_center_crop_pad_crop_negative_axes_hwc",
            "test_center_crop_pad_crop_axes_chw_expanded", "test_lppool_3d_default"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)
