"""One-node ``com.microsoft`` models built with onnx.helper, run through
pyarena's InferenceSession and through onnxruntime (the reference) for
the contrib transformer op tests."""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

import pyarena

ort.set_default_logger_severity(3)      # (the refusals tests provoke are expected)

_TYPES = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.int32): onnx.TensorProto.INT32,
          np.dtype(np.float16): onnx.TensorProto.FLOAT16,
          np.dtype(np.int64): onnx.TensorProto.INT64, np.dtype(np.uint8): onnx.TensorProto.UINT8}


def one_node(op, feeds, outputs, consts=None, domain="com.microsoft", out_types=None,
             **attrs):
    """A model of one ``op`` node: ``feeds`` (name -> array) as graph
    inputs, ``consts`` as initializers, in the order given by ``inputs``
    (``attrs["inputs"]``, "" for an omitted one); ``outputs`` its output
    names ("" for an omitted one), typed by ``out_types`` (default float)."""
    inputs = attrs.pop("inputs")
    consts = consts or {}
    out_types = out_types or {}
    node = helper.make_node(op, inputs, outputs, domain=domain or None, **attrs)
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, out_types.get(o, onnx.TensorProto.FLOAT), None)
         for o in outputs if o],
        [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    opsets = [helper.make_opsetid("", 17)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(g, opset_imports=opsets).SerializeToString()


def both(model, feeds):
    """(pyarena's outputs, onnxruntime's outputs) of ``model`` on ``feeds``."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = pyarena.InferenceSession(model).run(None, feeds)
    return got, ref


def assert_close(got, ref, rtol=1e-5, atol=1e-6):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)
