"""DeformConv (kernels/deform_conv.py): the ONNX node cases with every
input fed at run time, random offsets (samples outside the image
included), masks, groups, offset groups, strides, dilations and pads
against onnxruntime, and offsets, masks or weights of the wrong shape
refused with a pyarena error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_(basic_)?deform_conv\w*", ("deformconv",))


def test_the_forms_are_covered():
    assert {"test_basic_deform_conv_with_padding", "test_basic_deform_conv_without_padding",
            "test_deform_conv_with_mask_bias", "test_deform_conv_with_multiple_offset_groups"} \
        <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _model(shapes, **attrs):
    names = [n for n in ("x", "w", "offset", "b", "mask") if n in shapes]
    ins = [n if n in shapes else "" for n in ("x", "w", "offset", "b", "mask")]
    while not ins[-1]:
        ins.pop()
    g = helper.make_graph(
        [helper.make_node("DeformConv", ins, ["y"], **attrs)], "d",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shapes[n])) for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])


@pytest.mark.parametrize("c, oc, k, g, og, attrs, masked", [
    (2, 4, (3, 3), 1, 1, dict(pads=[1, 1, 1, 1]), False),
    (4, 6, (2, 3), 2, 2, dict(strides=[2, 1], dilations=[1, 2], pads=[0, 1, 1, 0]), True),
    (6, 3, (3, 2), 1, 3, dict(strides=[1, 2]), True),
    (4, 4, (1, 1), 4, 1, {}, False),
])
def test_random_offsets_match_onnxruntime(c, oc, k, g, og, attrs, masked, tmp_path):
    import pyarena
    rng = np.random.default_rng(c + oc)
    n, h, w = 2, 7, 6
    st, dl = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    oh = (h + p[0] + p[2] - ((k[0] - 1) * dl[0] + 1)) // st[0] + 1
    ow = (w + p[1] + p[3] - ((k[1] - 1) * dl[1] + 1)) // st[1] + 1
    taps = k[0] * k[1]
    feeds = {"x": rng.standard_normal((n, c, h, w)),
             "w": rng.standard_normal((oc, c // g) + k),
             "offset": rng.uniform(-3, 3, (n, og * 2 * taps, oh, ow)),
             "b": rng.standard_normal(oc)}
    if masked:
        feeds["mask"] = rng.uniform(0, 1, (n, og * taps, oh, ow))
    feeds = {key: v.astype(np.float32) for key, v in feeds.items()}
    path = tmp_path / "d.onnx"
    onnx.save(_model({key: v.shape for key, v in feeds.items()}, group=g, offset_group=og,
                     kernel_shape=list(k), **attrs), str(path))
    got = pyarena.InferenceSession(str(path)).run(None, feeds)[0]
    want = list(ort_run(path, feeds).values())[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shapes, match", [
    (dict(x=(1, 2, 5, 5), w=(3, 2, 3, 3), offset=(1, 16, 3, 3)), "offset"),
    (dict(x=(1, 2, 5, 5), w=(3, 2, 3, 3), offset=(1, 18, 4, 3)), "offset"),
    (dict(x=(1, 2, 5, 5), w=(3, 2, 3, 3), offset=(1, 18, 3, 3), mask=(1, 8, 3, 3)), "mask"),
    (dict(x=(1, 2, 5, 5), w=(3, 3, 3, 3), offset=(1, 18, 3, 3)), "weight"),
])
def test_mismatched_shapes_are_refused(shapes, match):
    import pyarena
    m = _model(shapes)
    with pytest.raises(pyarena.PyArenaError, match=match):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {k: np.zeros(v, np.float32) for k, v in shapes.items()})
