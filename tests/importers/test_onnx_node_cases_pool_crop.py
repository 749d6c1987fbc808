"""The ONNX node cases of LpPool (1-D and 2-D; 3-D refused by name) and
CenterCropPad (the target shape fed at run time; its function bodies,
whose Pad and Slice take bounds computed at run time, so their outputs
are pool tensors), run through an InferenceSession with every input fed
at run time, against the reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case, check_refused

MODULES = ("lppool", "center_crop_pad")
CASES = cases(r"test_(lppool\w*|center_crop_pad\w*)", MODULES)
REFUSED = {"test_lppool_3d_default": "3-D spatial input"}


def test_the_forms_are_covered():
    assert {"test_lppool_1d_default", "test_lppool_2d_dilations", "test_lppool_2d_pads",
            "test_lppool_2d_same_lower", "test_lppool_2d_strides", "test_center_crop_pad_pad",
            "test_center_crop_pad_crop_and_pad", "test_center_crop_pad_crop_negative_axes_hwc",
            "test_center_crop_pad_crop_axes_chw_expanded"} <= set(CASES)
    assert set(REFUSED) <= set(CASES)


@pytest.mark.parametrize("name", sorted(set(CASES) - set(REFUSED)))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_case(name, tmp_path):
    check_refused(CASES[name], tmp_path, REFUSED[name])
