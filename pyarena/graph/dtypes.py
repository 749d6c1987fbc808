"""Bytes of a graph's tensors by element type: what the weights and the
activations of a quantized model cost, per dtype."""
from .._format import human_bytes

__all__ = ["bytes_by_dtype", "format_by_dtype"]


def bytes_by_dtype(graph, constants):
    """{dtype name: bytes} over the graph's constants (``constants=True``)
    or its planned tensors (inputs, activations, outputs), largest first."""
    out = {}
    for t in graph.tensors.values():
        if (t.role == "constant") != bool(constants) or t.dtype is None:
            continue
        key = str(t.dtype)
        out[key] = out.get(key, 0) + int(t.nbytes)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def format_by_dtype(sizes):
    """``"int8 2.2 KiB, float32 332 B"``."""
    return ", ".join(f"{k} {human_bytes(v)}" for k, v in sizes.items())
