"""A model given as a file name or as its bytes, as onnxruntime takes it.

The importers read model files (they map the weights of the file rather
than copying them), so model bytes are written once to a temporary file,
which lives as long as the object that asked for it (a session) and is
removed after it.
"""
import os
import tempfile
import weakref

__all__ = ["model_path"]


class _TemporaryModel:
    """The temporary file holding a model given as bytes; removed when this
    object is collected (or at exit)."""

    def __init__(self, data):
        fd, self.path = tempfile.mkstemp(prefix="pyarena-model-", suffix=_suffix(data))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BaseException:
            os.unlink(self.path)
            raise
        self._remove = weakref.finalize(self, _unlink, self.path)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _suffix(data):
    """The extension the loader knows the bytes' format by."""
    if len(data) >= 8 and data[4:8] == b"TFL3":
        return ".tflite"
    if data[:1] in (b"{", b"["):
        return ".json"
    return ".onnx"


def model_path(path_or_bytes):
    """``(path, keeper)``: the file name of a model given as a str or
    path-like (keeper None), or of a temporary file holding model bytes
    (``bytes``, ``bytearray``, ``memoryview``), removed when ``keeper`` is
    collected.  Anything else is a TypeError, as in onnxruntime."""
    if isinstance(path_or_bytes, (str, os.PathLike)):
        return os.fspath(path_or_bytes), None
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        keeper = _TemporaryModel(bytes(path_or_bytes))
        return keeper.path, keeper
    raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
