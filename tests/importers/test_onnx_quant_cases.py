"""The ONNX operator test cases for quantization (inputs and reference
outputs written by the ONNX authors, ``onnx.backend.test.case.node``):
every QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear /
QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger case either runs
to its reference output or is refused by name for a stated reason."""
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from pyarena.importers import UnsupportedOpError, load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

PATTERN = (r"test_(quantizelinear|dequantizelinear|qlinearconv|qlinearmatmul|convinteger|"
           r"matmulinteger|dynamicquantizelinear)\w*")
# the reasons pyarena refuses a case with, by the case's name
REFUSED = [(r"\w*blocked\w*", "block_size"),
           (r"\w*_(e4m3fn|e5m2|float4e2m1|u?int4|u?int2)\w*", r"of type \w+ is not supported")]


@pytest.fixture(scope="module")
def cases():
    import warnings
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = collect_testcases(None)
    return {c.name: c for c in found
            if re.fullmatch(PATTERN, c.name) and "expanded" not in c.name}


def saved(case, tmp_path):
    """The case's model with every input after the first made a constant."""
    from onnx import numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    for vi, val in list(zip(m.graph.input, case.data_sets[0][0]))[1:]:
        t = val if isinstance(val, onnx.TensorProto) else numpy_helper.from_array(
            np.asarray(val))
        t.name = vi.name
        m.graph.initializer.append(t)
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(m, str(path))
    return path


def test_quantization_cases_match_or_are_refused_by_name(tmp_path, cases):
    assert len(cases) >= 30
    ran, refused = [], []
    for name, case in sorted(cases.items()):
        reason = next((why for pat, why in REFUSED if re.fullmatch(pat, name)), None)
        try:
            path = saved(case, tmp_path)
        except Exception:            # an input type this onnx cannot write back
            assert reason is not None, name
            continue
        if reason is not None:
            with pytest.raises(UnsupportedOpError, match=reason):
                load_model(str(path))
            refused.append(name)
            continue
        g = load_model(str(path))
        ex = Executor(g)
        for ins, refs in case.data_sets:
            out = ex.run(dict(zip(g.inputs, ins[:1])))
            for o, r in zip(g.outputs, refs):
                ours, r = np.asarray(out[o]), np.asarray(r)
                assert ours.dtype == r.dtype and ours.shape == r.shape, (name, o)
                if r.dtype.kind in "iu":
                    assert np.abs(ours.astype(np.int64) - r.astype(np.int64)).max() <= 1, name
                else:
                    np.testing.assert_allclose(ours, r, rtol=1e-3, atol=1e-6, err_msg=name)
        ran.append(name)
    assert {"test_qlinearconv", "test_qlinearmatmul_2D_uint8_float32",
            "test_qlinearmatmul_2D_int8_float16", "test_convinteger_with_padding",
            "test_matmulinteger", "test_dynamicquantizelinear_min_adjusted",
            "test_quantizelinear_axis", "test_dequantizelinear_axis",
            "test_quantizelinear_int16", "test_dequantizelinear_uint16",
            "test_qlinearmatmul_3D_int8_float16"} <= set(ran)
    assert len(refused) >= 15 and len(ran) >= 19
