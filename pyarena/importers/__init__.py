"""Model importers: ONNX and TFLite files -> :class:`pyarena.Graph`.

``load_model(path, inputs=None)`` picks the importer from the file
(``.onnx`` / ``.tflite`` / ``.json`` extension, else the TFLite magic
``TFL3`` at byte 4, else ONNX) and returns a validated graph whose ops carry
``scratch_bytes``.  ONNX needs the ``onnx`` extra, TFLite the ``tflite``
extra; both are imported lazily.
"""
import os

from ..graph import Graph, GraphError
from ..kernels import UnsupportedOpError

__all__ = ["load_model", "ModelImportError", "UnsupportedOpError", "sniff_format"]


class ModelImportError(GraphError):
    """A model file that cannot be imported: corrupt, truncated, of an
    unknown format, or with sizes that cannot be determined."""


def sniff_format(path):
    """'onnx', 'tflite' or 'json' from the extension or the file's magic."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext in (".onnx", ".tflite", ".json"):
        return ext[1:]
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise ModelImportError(f"{path}: {exc.strerror or exc}") from None
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "tflite"
    if head[:1] in (b"{", b"["):
        return "json"
    return "onnx"


def load_model(path, inputs=None):
    """A validated :class:`Graph` for the model at ``path``; ``inputs`` maps
    graph-input names to the dims that fix their symbolic dimensions."""
    fmt = sniff_format(path)
    if not os.path.exists(path):
        raise ModelImportError(f"{path}: no such file")
    if fmt == "onnx":
        from .onnx import load_onnx
        return load_onnx(path, inputs)
    if fmt == "tflite":
        from .tflite import load_tflite
        return load_tflite(path, inputs)
    g = Graph.load(path)
    if inputs:
        g.bind_inputs(inputs)
    return g.validate()
