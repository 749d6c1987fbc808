"""Bytes of a graph's tensors by element type: what the weights and the
activations of a quantized model cost, per dtype; and the kinds of value
that live outside the arena (:data:`HOST_KINDS`)."""
from .._format import human_bytes

__all__ = ["bytes_by_dtype", "format_by_dtype", "HOST_KINDS", "HOST_DTYPE"]

#: values a graph may hold outside its arena (``Tensor.host``): strings (a
#: NumPy object array of Python str, as onnxruntime returns them), sequences
#: (a list of arrays) and optionals (None or a value).  The plan gives them
#: no bytes; the executor keeps them aside (runtime/dynamic.py)
HOST_KINDS = ("string", "sequence", "optional")
#: the dtype such a tensor is declared with
HOST_DTYPE = "object"


def bytes_by_dtype(graph, constants):
    """{dtype name: bytes} over the graph's constants (``constants=True``)
    or its planned tensors (inputs, activations, outputs), largest first."""
    out = {}
    for t in graph.tensors.values():
        if (t.role == "constant") != bool(constants) or t.dtype is None or t.host:
            continue
        key = str(t.dtype)
        out[key] = out.get(key, 0) + int(t.nbytes)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def format_by_dtype(sizes):
    """``"int8 2.2 KiB, float32 332 B"``."""
    return ", ".join(f"{k} {human_bytes(v)}" for k, v in sizes.items())
