"""A graph as it will run -- after import, folding, fusion and layout -- to
and from a compiled file's JSON document, without losing anything the
kernels read.

Unlike a JSON graph file (:mod:`pyarena.graph.json_io`, which keeps what
planning needs), this keeps every attribute value exactly: arrays with
their dtype and shape, bytes, tuples, sets, NumPy scalars and an op's
notes (:class:`~pyarena.graph.notes.OpNotes`, the notes a patched stage's
ops carry too) are tagged objects (``{"$a": ...}``, ``{"$t": ...}``, ...),
and the constants' bytes go to the file's blob (``{"$blob": i}``, read
back as views of the mapped file).  A graph holding what is not data --
a Loop's body graph, a shape callback of a data-dependent op, a value
held outside the arena -- cannot be compiled: :class:`CompileError` names
the op.  Reading checks every tag and refuses what does not decode
(:class:`~pyarena.errors.ModelImportError` from the caller).
"""
import base64
import math
from dataclasses import fields

import numpy as np

from ..errors import GraphError
from ..graph import Graph
from ..graph.graph import Op
from ..graph.notes import OpNotes
from ..graph.tensor import ROLES, Tensor

__all__ = ["CompileError", "encode_graph", "decode_graph", "encode_value", "decode_value",
           "ArrayViews", "placeholder", "blob_array"]

#: the notes written (every OpNotes field but ``infer``, a callable)
_NOTES = tuple(f.name for f in fields(OpNotes) if f.name != "infer")
_SCALARS = (type(None), bool, int, float, str)


class CompileError(GraphError):
    """The graph holds what a compiled file cannot keep (an op named)."""


def encode_value(v, blob, where):
    """``v`` as JSON-able data (tags for what JSON has no type for)."""
    if isinstance(v, np.generic):   # first: a NumPy float64 is also a float
        return {"$g": [v.dtype.str, base64.b64encode(v.tobytes()).decode()]}
    if isinstance(v, _SCALARS):
        return v
    if isinstance(v, list):
        return [encode_value(x, blob, where) for x in v]
    if isinstance(v, tuple):
        return {"$t": [encode_value(x, blob, where) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {"$s": sorted((encode_value(x, blob, where) for x in v), key=repr)}
    if isinstance(v, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in v):
            return {k: encode_value(x, blob, where) for k, x in v.items()}
        return {"$kv": [[encode_value(k, blob, where), encode_value(x, blob, where)]
                        for k, x in v.items()]}
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            raise CompileError(f"{where}: an array of Python objects is not data a "
                               f"compiled file keeps")
        return {"$a": [v.dtype.str, list(v.shape), blob.add(v)]}
    if isinstance(v, OpNotes):
        if v.infer is not None:
            raise CompileError(f"{where}: a data-dependent op (its output shapes are "
                               f"computed at run time) cannot be compiled yet")
        return {"$n": {k: encode_value(getattr(v, k), blob, where) for k in _NOTES
                       if getattr(v, k) != OpNotes.__dataclass_fields__[k].default}}
    raise CompileError(f"{where}: holds a {type(v).__name__}, which a compiled file "
                       f"cannot keep (control flow and held values are not compiled yet)")


def decode_value(v, arrays):
    """The value :func:`encode_value` wrote (``arrays``: the blob's views)."""
    if isinstance(v, _SCALARS):
        return v
    if isinstance(v, list):
        return [decode_value(x, arrays) for x in v]
    if not isinstance(v, dict):
        raise ValueError(f"not an encoded value: {v!r:.60}")
    if len(v) == 1:
        (tag, body), = v.items()
        if tag == "$t":
            return tuple(decode_value(x, arrays) for x in _list(body))
        if tag == "$s":
            return frozenset(decode_value(x, arrays) for x in _list(body))
        if tag == "$kv":
            return {decode_value(k, arrays): decode_value(x, arrays)
                    for k, x in (_pair(p) for p in _list(body))}
        if tag == "$b":
            return base64.b64decode(_str(body), validate=True)
        if tag == "$a":
            dt, shape, ref = _list(body, 3)
            return blob_array(arrays, ref, dt, shape)
        if tag == "$g":
            dt, raw = _list(body, 2)
            return np.frombuffer(base64.b64decode(_str(raw), validate=True),
                                 dtype=_dtype(dt), count=1)[0]
        if tag == "$n":
            if not isinstance(body, dict) or any(k not in _NOTES for k in body):
                raise ValueError(f"bad op notes {body!r:.60}")
            return OpNotes(**{k: decode_value(x, arrays) for k, x in body.items()})
        if tag.startswith("$"):
            raise ValueError(f"unknown tag {tag!r}")
    return {k: decode_value(x, arrays) for k, x in v.items()}


def _list(v, n=None):
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise ValueError(f"expected a list{'' if n is None else f' of {n}'}, not {v!r:.60}")
    return v


def _pair(v):
    return _list(v, 2)


def _str(v):
    if not isinstance(v, str):
        raise ValueError(f"expected a string, not {v!r:.60}")
    return v


def _dtype(s):
    dt = np.dtype(_str(s))
    if dt.hasobject:
        raise ValueError("an object dtype")
    return dt


def blob_array(arrays, ref, dtype, shape):
    """A read-only view of the blob array ``ref`` (``{"$blob": i}``) as
    ``shape`` of ``dtype``; ValueError when it does not hold exactly that."""
    if not isinstance(ref, dict) or set(ref) != {"$blob"} or type(ref["$blob"]) is not int \
            or not 0 <= ref["$blob"] < len(arrays):
        raise ValueError(f"bad array reference {ref!r:.60}")
    dt = _dtype(dtype)
    shape = tuple(_list(shape))
    if not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"bad shape {shape!r:.60}")
    cache = getattr(arrays, "cache", None)
    key = (ref["$blob"], dt.str, shape)
    if cache is not None and key in cache:     # one view object per array: sessions
        return cache[key]                      # share a constant by identity
    raw = arrays[ref["$blob"]]
    n = math.prod(shape) * dt.itemsize
    if n != raw.size:
        raise ValueError(f"{raw.size} bytes hold no {dt} array of shape {shape}")
    v = raw.view(dt).reshape(shape)
    if cache is not None:
        cache[key] = v
    return v


class ArrayViews(list):
    """A compiled file's arrays (uint8 views), with the typed views made
    of them so far (``cache``): each constant decoded once."""

    def __init__(self, views):
        super().__init__(views)
        self.cache = {}


# -- graphs ---------------------------------------------------------------------
def placeholder(shape, dtype):
    """What stands for a constant a compiled file leaves out (read only to
    lay out what the file stores instead): a read-only array of the
    constant's shape and dtype, one poison value broadcast (NaN, or the
    integer maximum) -- no memory, and a value no result could come from
    unnoticed (the compiler checks that none does, ``compiler.py``)."""
    dt = np.dtype(dtype)
    v = np.array(np.nan if dt.kind in "fc" else True if dt.kind == "b" else
                 np.iinfo(dt).max, dtype=dt)
    return np.broadcast_to(v, tuple(shape))


def encode_graph(g, blob, left_out=()):
    """``g`` as a JSON-able dict; its constants' bytes added to ``blob``,
    but for those named in ``left_out`` (their shape and dtype only: a
    :func:`placeholder` when read back)."""
    tensors = []
    views = _permuted_views(g)
    for t in g.tensors.values():
        if t.host is not None:
            raise CompileError(f"tensor {t.name!r} holds a {t.host}: values held outside "
                               f"the arena are not compiled yet")
        d = {"name": t.name, "role": t.role, "dtype": t.dtype}
        if t.shape is not None:
            d["shape"] = encode_value(tuple(t.shape), blob, t.name)
        if t.nbytes_given is not None:
            d["nbytes"] = int(t.nbytes_given)
        if t.dynamic:
            d["dynamic"] = True
        if t.name in left_out:
            d["placeholder"] = True
        elif t.name in views:       # another constant's bytes, permuted: not twice
            d["view_of"] = list(views[t.name])
        elif t.data is not None:
            data = np.asarray(t.data)
            if data.dtype.hasobject:
                raise CompileError(f"constant {t.name!r} holds Python objects")
            d["data"] = [data.dtype.str, list(data.shape), blob.add(data)]
        tensors.append(d)
    ops = []
    for op in g.ops:
        where = f"op {op.name!r} ({op.op_type})"
        ops.append({"name": op.name, "type": op.op_type, "inputs": list(op.inputs),
                    "outputs": list(op.outputs), "scratch_bytes": int(op.scratch_bytes),
                    "attrs": encode_value(dict(op.attrs), blob, where),
                    "notes": encode_value(op.notes, blob, where)})
    return {"name": g.name, "tensors": tensors, "ops": ops,
            "scratch_budget": g.scratch_budget, "native": bool(g.native),
            "held_inputs": sorted(g.held_inputs),
            "deciding_inputs": sorted(g.deciding_inputs),
            "relaid": encode_value(g.relaid, blob, "the layout record")}


def decode_graph(d, arrays):
    """The graph :func:`encode_graph` wrote, validated (its constants
    read-only views of ``arrays``).  ValueError / GraphError when the
    document does not hold one."""
    if not isinstance(d, dict) or not isinstance(d.get("tensors"), list) or \
            not isinstance(d.get("ops"), list):
        raise ValueError("a graph needs 'tensors' and 'ops' lists")
    g = Graph(_str(d.get("name", "graph")))
    for td in d["tensors"]:
        if not isinstance(td, dict):
            raise ValueError(f"bad tensor {td!r:.60}")
        name, role = _str(td.get("name")), td.get("role")
        if role not in ROLES or name in g.tensors:
            raise ValueError(f"tensor {name!r}: bad role {role!r} or declared twice")
        shape = decode_value(td["shape"], arrays) if "shape" in td else None
        data = None
        if "data" in td:
            dt, shp, ref = _list(td["data"], 3)
            data = blob_array(arrays, ref, dt, shp)
        # checked as any graph's tensor is (sizes, dtype), then given its data
        t = g.add_tensor(name, shape, _str(td.get("dtype", "float32")), td.get("nbytes"), role)
        if td.get("placeholder") is True:
            if role != "constant" or t.is_symbolic or t.shape is None:
                raise ValueError(f"tensor {name!r}: only a sized constant is left out")
            data = placeholder(t.shape, t.dtype)
        t.data, t.dynamic = data, bool(td.get("dynamic", False))
    _read_views(g, d["tensors"])
    for od in d["ops"]:
        if not isinstance(od, dict):
            raise ValueError(f"bad op {od!r:.60}")
        attrs = decode_value(od.get("attrs", {}), arrays)
        notes = decode_value(od.get("notes", {"$n": {}}), arrays)
        if not isinstance(attrs, dict) or not isinstance(notes, OpNotes):
            raise ValueError(f"op {od.get('name')!r}: bad attrs or notes")
        op = g.add_op(_str(od.get("type")), _list(od.get("inputs")), _list(od.get("outputs")),
                      name=_str(od.get("name")), scratch_bytes=od.get("scratch_bytes", 0))
        op.attrs, op.notes = attrs, notes
    sb = d.get("scratch_budget")
    if sb is not None and (type(sb) is not int or sb < 0):
        raise ValueError(f"bad scratch_budget {sb!r}")
    g.scratch_budget, g.native = sb, bool(d.get("native", True))
    g.held_inputs = frozenset(_str(n) for n in _list(d.get("held_inputs", [])))
    g.deciding_inputs = frozenset(_str(n) for n in _list(d.get("deciding_inputs", [])))
    g.relaid = decode_value(d.get("relaid"), arrays)
    return g.validate()


def _permuted_views(g):
    """{name: (other constant, perm)} for each constant whose data is
    another C-contiguous constant's memory with its axes permuted (a tied
    weight, runtime/tied.py): stored as that reference, not as bytes."""
    owners = {}
    for t in g.tensors.values():
        d = t.data
        if t.role == "constant" and isinstance(d, np.ndarray) and d.size > 1 and \
                d.flags.c_contiguous:
            owners.setdefault((d.__array_interface__["data"][0], d.nbytes), t)
    out = {}
    for t in g.tensors.values():
        d = t.data
        if t.role != "constant" or not isinstance(d, np.ndarray) or d.flags.c_contiguous:
            continue
        o = owners.get((d.__array_interface__["data"][0], d.nbytes))
        if o is None or o.data.dtype != d.dtype or o.data.ndim != d.ndim:
            continue
        perm = [list(o.data.strides).index(s) for s in d.strides]
        if sorted(perm) == list(range(d.ndim)) and \
                o.data.transpose(perm).shape == d.shape and \
                o.data.transpose(perm).strides == d.strides:
            out[t.name] = (o.name, perm)
    return out


def _read_views(g, tensors):
    """The constants :func:`_permuted_views` stored as references, made
    views of their owners (ValueError for a reference that does not fit)."""
    refs = {_str(td.get("name")): td["view_of"] for td in tensors if "view_of" in td}
    for name, ref in refs.items():
        owner, perm = _list(ref, 2)
        owner, perm = _str(owner), _list(perm)
        t, o = g.tensors[name], g.tensors.get(owner)
        if o is None or o.role != "constant" or o.data is None or owner in refs or \
                t.role != "constant" or not all(type(p) is int for p in perm) or \
                sorted(perm) != list(range(np.ndim(o.data))):
            raise ValueError(f"tensor {name!r}: bad view of {owner!r}")
        view = np.asarray(o.data).transpose(perm)
        if view.shape != tuple(t.shape) or view.dtype != np.dtype(t.dtype):
            raise ValueError(f"tensor {name!r}: {list(t.shape)} {t.dtype} is not a view "
                             f"of {owner!r} {list(view.shape)} {view.dtype}")
        t.data = view
