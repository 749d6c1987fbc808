"""TFLite spatial options that contradict the file's stored shapes.

The interpreter sizes a CONV_2D / DEPTHWISE_CONV_2D / pooling output from
the options (stride, filter, padding, dilation), whatever shape the file
stores; the importer plans with the stored shape.  So a file whose options
and stored shapes disagree is refused at import, naming the operator, and a
file that is accepted runs with the interpreter's shapes and values.

The edits are made in the flatbuffer's bytes (the options' fields written
in place), on the vendored face detector and on small models built here.
"""
import os
import struct

import numpy as np
import pytest

from helpers.tflite_util import TFLiteBuilder, small_cnn
from pyarena.errors import GraphError
from pyarena.importers import ModelImportError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.runtime import Executor, random_feeds

tflite = pytest.importorskip("tflite")

FACE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "face_detection_short_range.tflite")

#: builtin -> (options class, {field: (vtable index, struct format)}), TFLite's schema
FIELDS = {
    "CONV_2D": ("Conv2DOptions", {"padding": (0, "<b"), "stride_w": (1, "<i"),
                                  "stride_h": (2, "<i"), "dilation_w": (4, "<i"),
                                  "dilation_h": (5, "<i")}),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", {
        "padding": (0, "<b"), "stride_w": (1, "<i"), "stride_h": (2, "<i"),
        "dilation_w": (5, "<i"), "dilation_h": (6, "<i")}),
    "MAX_POOL_2D": ("Pool2DOptions", {"padding": (0, "<b"), "stride_w": (1, "<i"),
                                      "stride_h": (2, "<i"), "filter_w": (3, "<i"),
                                      "filter_h": (4, "<i")}),
    "TRANSPOSE_CONV": ("TransposeConvOptions", {"padding": (0, "<b"), "stride_w": (1, "<i"),
                                                "stride_h": (2, "<i")}),
}
FIELDS["AVERAGE_POOL_2D"] = FIELDS["MAX_POOL_2D"]


def spatial_fields(data):
    """(operator index, builtin, field, byte position, format, value) of every
    option field stored in the file (a field left at its default is absent
    from the table and cannot be edited in place)."""
    m = tflite.Model.GetRootAsModel(data, 0)
    codes = [tflite.BUILTIN_OPCODE2NAME.get(max(m.OperatorCodes(i).BuiltinCode(),
                                                m.OperatorCodes(i).DeprecatedBuiltinCode()))
             for i in range(m.OperatorCodesLength())]
    sg = m.Subgraphs(0)
    out = []
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        code = codes[op.OpcodeIndex()]
        if code not in FIELDS or op.BuiltinOptions() is None:
            continue
        tab = op.BuiltinOptions()
        for field, (slot, fmt) in FIELDS[code][1].items():
            off = tab.Offset(4 + 2 * slot)
            if off:
                pos = tab.Pos + off
                out.append((k, code, field, pos, fmt, struct.unpack_from(fmt, data, pos)[0]))
    return out


def edited(data, pos, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, pos, value)
    return bytes(b)


def _edits(value, field):
    if field == "padding":
        return [1 - value]
    return [0, -1, value + 1, value + 2]


def _accepted_runs_as_interpreter(path):
    """An accepted file: its outputs have the interpreter's shapes and values."""
    g = load_model(path)
    feeds = random_feeds(g, seed=1)
    out = Executor(g, plan(g)).run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    for k in ref:
        assert out[k].shape == ref[k].shape, k
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-4, err_msg=k)


def _check_every_edit(tmp_path, data, limit=None):
    """Every stored spatial option field, edited: refused naming the
    operator, or (an edit that keeps every shape) the interpreter's result."""
    fields = spatial_fields(data)
    assert fields
    refused = accepted = 0
    for n, (k, code, field, pos, fmt, value) in enumerate(fields[:limit]):
        for v in _edits(value, field):
            path = tmp_path / f"e{n}_{v}.tflite"
            path.write_bytes(edited(data, pos, fmt, v))
            try:
                load_model(str(path))
            except ModelImportError as exc:
                assert f"_{k}' ({code})" in str(exc) and "contradicts" in str(exc), exc
                refused += 1
                continue
            accepted += 1
            _accepted_runs_as_interpreter(str(path))
    return refused, accepted


def test_unedited_models_still_match_the_interpreter(tmp_path):
    _accepted_runs_as_interpreter(small_cnn(tmp_path / "m.tflite"))
    _accepted_runs_as_interpreter(FACE)


def test_small_cnn_every_option_edit_refused_or_same_as_interpreter(tmp_path):
    data = open(small_cnn(tmp_path / "m.tflite"), "rb").read()
    refused, accepted = _check_every_edit(tmp_path, data)
    assert refused >= 20


def test_face_detector_every_option_edit_refused_or_same_as_interpreter(tmp_path):
    data = open(FACE, "rb").read()
    refused, accepted = _check_every_edit(tmp_path, data)
    assert refused >= 100


def test_refusal_message_names_the_op_and_the_shapes(tmp_path):
    data = open(small_cnn(tmp_path / "m.tflite"), "rb").read()
    k, code, field, pos, fmt, v = next(f for f in spatial_fields(data)
                                       if f[1] == "CONV_2D" and f[2] == "stride_h")
    path = tmp_path / "s3.tflite"
    path.write_bytes(edited(data, pos, fmt, 3))
    with pytest.raises(GraphError) as e:
        load_model(str(path))
    msg = str(e.value)
    assert "'conv_2d_0' (CONV_2D)" in msg and "strides [3, 2]" in msg
    assert "[1, 6, 8, 8]" in msg and "[1, 8, 8, 8]" in msg, msg


def _one_op(tmp_path, code, opts, x_shape, y_shape, w=None, extra=()):
    B = TFLiteBuilder()
    x = B.tensor("x", x_shape)
    ins = [x]
    if w is not None:
        ins.append(B.const("w", np.zeros(w, np.float32)))
    y = B.tensor("y", y_shape)
    B.op(code, ins + list(extra), [y], opts)
    return B.save(tmp_path / f"{code}.tflite", [x], [y])


@pytest.mark.parametrize("code,opts,x,y,w", [
    # VALID 3x3 dilation 2 on 9x9: 5x5, the file says 7x7
    ("CONV_2D", ("Conv2DOptions", dict(Padding=1, StrideW=1, StrideH=1, DilationWFactor=2,
                                       DilationHFactor=2)), (1, 9, 9, 2), (1, 7, 7, 4),
     (4, 3, 3, 2)),
    # output channels from the filter: 4, the file says 5
    ("CONV_2D", ("Conv2DOptions", dict(Padding=0, StrideW=1, StrideH=1)), (1, 5, 5, 2),
     (1, 5, 5, 5), (4, 3, 3, 2)),
    ("DEPTHWISE_CONV_2D", ("DepthwiseConv2DOptions", dict(
        Padding=1, StrideW=2, StrideH=2, DepthMultiplier=1)), (1, 9, 9, 3), (1, 3, 4, 3),
     (1, 3, 3, 3)),
    ("AVERAGE_POOL_2D", ("Pool2DOptions", dict(Padding=1, StrideW=1, StrideH=1,
                                               FilterWidth=4, FilterHeight=2)),
     (1, 6, 6, 3), (1, 5, 5, 3), None),
    # a filter larger than a VALID input: nothing to compute
    ("MAX_POOL_2D", ("Pool2DOptions", dict(Padding=1, StrideW=1, StrideH=1,
                                           FilterWidth=8, FilterHeight=8)),
     (1, 6, 6, 3), (1, 1, 1, 3), None),
    # a stride of zero
    ("MAX_POOL_2D", ("Pool2DOptions", dict(Padding=0, StrideW=0, StrideH=1,
                                           FilterWidth=2, FilterHeight=2)),
     (1, 6, 6, 3), (1, 6, 6, 3), None),
])
def test_built_contradictions_are_refused(tmp_path, code, opts, x, y, w):
    with pytest.raises(ModelImportError, match=f"'{code.lower()}_0' \\({code}\\).*contradicts"):
        load_model(_one_op(tmp_path, code, opts, x, y, w))


def test_transpose_conv_input_must_follow_from_its_output(tmp_path):
    """TRANSPOSE_CONV: the stored output, convolved with the same options,
    gives the input; a stride edited to 3 does not (10 -> 4, the input is 5)."""
    def model(stride):
        B = TFLiteBuilder()
        x = B.tensor("x", (1, 5, 4, 2))
        shape = B.const("oshape", np.array((1, 10, 8, 3), np.int32), np.int32)
        w = B.const("w", np.ones((3, 3, 3, 2), np.float32))
        y = B.tensor("y", (1, 10, 8, 3))
        B.op("TRANSPOSE_CONV", [shape, w, x], [y], ("TransposeConvOptions", dict(
            Padding=0, StrideW=2, StrideH=stride)))
        return B.save(tmp_path / f"tc{stride}.tflite", [x], [y])
    _accepted_runs_as_interpreter(model(2))
    with pytest.raises(ModelImportError, match="'transpose_conv_0' .*contradicts"):
        load_model(model(3))


def test_mediapipe_transpose_bias_stride_contradiction(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 5, 4, 4))
    w, b = B.const("w", np.zeros((3, 3, 3, 4))), B.const("b", np.zeros(3))
    y = B.tensor("y", (1, 10, 8, 3))
    B.op("CUSTOM:Convolution2DTransposeBias", [x, w, b], [y],
         ("custom", struct.pack("<3i", 1, 2, 4)))       # SAME, stride_w 2, stride_h 4
    with pytest.raises(ModelImportError, match="Convolution2DTransposeBias.*contradicts"):
        load_model(B.save(tmp_path / "bad.tflite", [x], [y]))
