"""Input shapes the command line chooses when ``--input`` leaves symbolic
dimensions unbound (``pyarena run`` / ``pyarena plan`` on a model with
``N``, ``height``, ``?`` dims).

A dimension is chosen, in this order:

1. the size the model declares for its symbol in its metadata
   (``metadata_props``: a key named as the symbol with an integer value,
   e.g. ``batch: 1``; Ultralytics' ``imgsz: [320, 320]`` for an image
   input's height and width);
2. 1 for a batch dimension: the first dimension, or a symbol naming a
   batch (``batch``, ``batch_size``);
3. any other: the smallest of :data:`LADDER` the model imports at (every
   such dimension takes the same size; a model that imports at none gives
   the error of the last, with the ``--input`` to write).

One symbol takes one size across all inputs.  The choice is printed as
one line on stderr, with the ``--input`` that gives it explicitly.
"""
import json
import sys

from ..errors import GraphError, UnsupportedOpError

__all__ = ["load_filling", "LADDER"]

#: sizes tried, smallest first, for a dimension nothing else fixes
LADDER = (1, 32, 224)


def _metadata(path):
    """An ONNX model's metadata_props as a dict ({} for other formats or
    when it cannot be read: the import says why)."""
    from ..importers import sniff_format
    try:
        if sniff_format(path) != "onnx":
            return {}
        from ..importers.onnx import _onnx, parse_model
        model, _ = parse_model(_onnx(), path)
    except Exception:
        return {}
    return {p.key: p.value for p in model.metadata_props}


def _int(text):
    try:
        v = int(str(text).strip())
    except ValueError:
        return None
    return v if v > 0 else None


def _image_sizes(meta):
    """(height, width) from Ultralytics' ``imgsz`` metadata, or None."""
    try:
        v = json.loads(meta.get("imgsz", "null"))
    except ValueError:
        return None
    if isinstance(v, int):
        v = [v, v]
    if isinstance(v, list) and len(v) == 2 and all(isinstance(d, int) and d > 0 for d in v):
        return tuple(v)
    return None


def _known(name, dims, i, meta):
    """(size, reason) for dimension ``i`` of input ``name``, or None when
    only the ladder can size it."""
    d = dims[i]
    if isinstance(d, str) and d != "?" and _int(meta.get(d)) is not None:
        return _int(meta[d]), "the model's metadata"
    hw = _image_sizes(meta)
    if hw is not None and len(dims) == 4:
        spatial = (2, 3) if isinstance(dims[1], int) and dims[1] in (1, 3, 4) else (1, 2)
        if i in spatial:
            return hw[spatial.index(i)], "the model's metadata (imgsz)"
    if i == 0 or (isinstance(d, str) and "batch" in d.lower()):
        return 1, "batch"
    return None


def _choose(unbound, meta, size):
    """({input: shape}, {label: (value, reason)}): every unbound input sized,
    ``size`` for the dimensions only the ladder sizes."""
    symbols, shapes, why = {}, {}, {}
    for name, dims in unbound.items():
        if dims is None:
            raise GraphError(f"input {name!r} has an unknown rank: give its shape")
        shape = []
        for i, d in enumerate(dims):
            if isinstance(d, int):
                shape.append(d)
                continue
            key = d if isinstance(d, str) and d != "?" else None
            if key is not None and key in symbols:
                shape.append(symbols[key])
                continue
            known = _known(name, dims, i, meta)
            value, reason = known if known is not None else (size, "ladder")
            if key is not None:
                symbols[key] = value
            why[key or f"{name}[{i}]"] = (value, reason)
            shape.append(value)
        shapes[name] = tuple(shape)
    return shapes, why


def _line(command, shapes, why):
    chosen = ", ".join(f"{label}={v}" + (f" ({reason})" if reason != "ladder" else "")
                       for label, (v, reason) in why.items())
    ladder = [label for label, (_, reason) in why.items() if reason == "ladder"]
    note = f"; {', '.join(ladder)}: the smallest of {', '.join(map(str, LADDER))} " \
           "the model imports at" if ladder else ""
    flags = " ".join(f"--input {n}={','.join(map(str, s))}" for n, s in shapes.items())
    return (f"pyarena {command}: symbolic input dims not given, chosen: {chosen}{note} "
            f"(as {flags})")


def load_filling(path, given, load, command):
    """``load(shapes)`` (a graph) with the shapes ``given`` (input name ->
    dims), and when the model still has unbound inputs, with sizes chosen
    for them as the module docstring says (one line on stderr)."""
    try:
        return load(dict(given))
    except UnsupportedOpError:
        raise
    except GraphError as exc:
        unbound = {k: v for k, v in exc.unbound_inputs.items() if k not in given}
        if not unbound:
            raise
    meta = _metadata(path)
    last = None
    for size in LADDER:
        shapes, why = _choose(unbound, meta, size)
        try:
            g = load({**given, **shapes})
        except UnsupportedOpError:
            raise
        except GraphError as exc:
            last = exc
            if not any(reason == "ladder" for _, reason in why.values()):
                break           # nothing left to try
            continue
        print(_line(command, shapes, why), file=sys.stderr)
        return g
    tried = ", ".join(map(str, LADDER)) if len(LADDER) > 1 else str(LADDER[0])
    raise type(last)(f"{last} (with the symbolic input dims chosen: sizes {tried} tried)",
                     unbound_inputs=unbound) from last
