"""The reference runtimes, run on the same model file: onnxruntime for
ONNX, the TFLite interpreter (ai-edge-litert, tflite-runtime or
TensorFlow) for TFLite.  ``pyarena run`` and the tests compare pyarena's
outputs with theirs.  Each returns ``(outputs by name, which runtime)``,
or ``(None, why)`` when no runtime is installed -- never an ImportError.
"""
import os

import numpy as np

from . import sniff_format

__all__ = ["reference_outputs", "reference_onnx", "reference_tflite"]


def reference_outputs(path, feeds):
    """The reference runtime's outputs for ``feeds`` (dict name -> array)."""
    fmt = sniff_format(path)
    if fmt == "onnx":
        return reference_onnx(path, feeds)
    if fmt == "tflite":
        return reference_tflite(path, feeds)
    return None, "no reference runtime for this format"


def reference_onnx(path, feeds):
    """Outputs of onnxruntime (CPU) for ``feeds``."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime not installed"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(os.fspath(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds))), "onnxruntime"


def reference_tflite(path, feeds, reference_kernels=False):
    """Outputs of the TFLite interpreter (ai-edge-litert or tflite-runtime)
    for ``feeds``, keyed by tensor name; (None, why) if none is installed.
    ``reference_kernels``: TFLite's reference kernels (no XNNPACK
    delegate, no optimized kernels)."""
    Interpreter = m = None
    for mod in ("ai_edge_litert.interpreter", "tflite_runtime.interpreter",
                "tensorflow.lite"):
        try:
            m = __import__(mod, fromlist=["Interpreter"])
            Interpreter = m.Interpreter
            break
        except Exception:
            continue
    if Interpreter is None:
        return None, "no TFLite interpreter installed (ai-edge-litert)"
    kw = {}
    if reference_kernels and hasattr(m, "OpResolverType"):
        kw["experimental_op_resolver_type"] = m.OpResolverType.BUILTIN_REF
    it = Interpreter(model_path=str(path), **kw)
    it.allocate_tensors()
    for d in it.get_input_details():
        if d["name"] in feeds:
            it.set_tensor(d["index"], np.asarray(feeds[d["name"]], dtype=d["dtype"]))
    it.invoke()
    return {d["name"]: np.array(it.get_tensor(d["index"])) for d in it.get_output_details()}, \
        "TFLite interpreter"
