"""JSON graph files: :meth:`Graph.to_dict` / :meth:`Graph.from_dict` and
:meth:`Graph.save` / :meth:`Graph.load` (:class:`JsonIO`, part of
:class:`~pyarena.graph.graph.Graph`); the format is in the docstring of
:mod:`pyarena.graph.graph`.  A file that is not a graph -- bad JSON, not
UTF-8, nested too deeply, unreadable, or a graph that does not hold
together -- is a GraphError naming the path.
"""
import json

import numpy as np

from ..errors import GraphError
from .notes import OpNotes
from .tensor import _int_dim

__all__ = ["JsonIO"]


class JsonIO:
    """Mixed into ``Graph``: writes its tensors, ops, ``scratch_budget`` and
    ``native``; ``from_dict`` builds a new one through ``add_tensor`` and
    ``add_op``."""

    def to_dict(self):
        tensors = []
        for t in self.tensors.values():
            d = {"name": t.name, "role": t.role}
            if t.shape is not None:
                d["shape"] = [d_ if isinstance(d_, str) else int(d_) for d_ in t.shape]
                d["dtype"] = t.dtype
            else:
                d["nbytes"] = int(t.nbytes_given)
            tensors.append(d)
        # a Loop's body graph (every Graph is a JsonIO) and a shape rule are
        # not data: left out (a JSON graph plans, it does not run control flow)
        ops = []
        for o in self.ops:
            d = {"name": o.name, "type": o.op_type, "inputs": o.inputs,
                 "outputs": o.outputs, "scratch_bytes": o.scratch_bytes,
                 "attrs": _jsonable({k: v for k, v in o.attrs.items()
                                     if not callable(v) and not isinstance(v, JsonIO)})}
            notes = o.notes.to_json()
            if notes:
                d["notes"] = notes
            ops.append(d)
        d = {"name": self.name, "tensors": tensors, "ops": ops}
        if self.scratch_budget is not None:
            d["scratch_budget"] = int(self.scratch_budget)
        if not self.native:
            d["native"] = False
        return d

    @classmethod
    def from_dict(cls, d):
        if not isinstance(d, dict) or not isinstance(d.get("tensors"), list) or \
                not isinstance(d.get("ops"), list):
            raise GraphError("a JSON graph needs 'tensors' and 'ops' lists")
        g = cls(d.get("name", "graph"))
        for i, t in enumerate(d["tensors"]):
            if not isinstance(t, dict) or "name" not in t:
                raise GraphError(f"tensors[{i}] needs a 'name'")
            g.add_tensor(t["name"], t.get("shape"), t.get("dtype", "float32"),
                         t.get("nbytes"), t.get("role", "activation"))
        for i, o in enumerate(d["ops"]):
            if not isinstance(o, dict) or "type" not in o:
                raise GraphError(f"ops[{i}] needs a 'type'")
            attrs = o.get("attrs", {})
            if not isinstance(attrs, dict):
                raise GraphError(f"ops[{i}]: 'attrs' must be an object, not {attrs!r:.60}")
            attrs, legacy = _legacy_notes(attrs)
            op = g.add_op(o["type"], o.get("inputs", []), o.get("outputs", []),
                          name=o.get("name"), scratch_bytes=o.get("scratch_bytes", 0), **attrs)
            notes = o.get("notes", {})
            if legacy and isinstance(notes, dict):
                notes = {**legacy, **notes}
            if notes or "notes" in o:
                try:
                    op.notes = OpNotes.from_json(notes)
                except (TypeError, ValueError) as exc:
                    raise GraphError(f"ops[{i}]: {exc}") from None
        budget = d.get("scratch_budget")
        if budget is not None:
            g.scratch_budget = _int_dim("graph", budget, what="scratch_budget")
        g.native = bool(d.get("native", True))
        return g

    @classmethod
    def load(cls, path):
        """Read a JSON graph file; GraphError with the path on bad JSON."""
        try:
            with open(path, encoding="utf-8") as f:
                d = json.load(f)
        except json.JSONDecodeError as exc:
            raise GraphError(f"{path}: not valid JSON ({exc})") from None
        except UnicodeDecodeError as exc:
            raise GraphError(f"{path}: not a UTF-8 text file ({exc.reason} at byte "
                             f"{exc.start})") from None
        except RecursionError:
            raise GraphError(f"{path}: JSON nested too deeply") from None
        except OSError as exc:
            raise GraphError(f"{path}: {exc.strerror or exc}") from None
        try:
            return cls.from_dict(d)
        except GraphError as exc:
            raise type(exc)(f"{path}: {exc}", exc.unbound_inputs) from None

    def save(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)


#: attributes graphs saved before ``Op.notes`` held notes in -> their notes
_LEGACY_NOTES = {"_opset": "opset", "_oihw": "weights_oihw",
                 "_scratch_budget": "scratch_budget", "_path": "kernel_path"}


def _legacy_notes(attrs):
    """(attributes, notes) of a saved op whose attributes may hold notes
    under their old names (graphs saved before ``Op.notes``)."""
    if not any(k in _LEGACY_NOTES for k in attrs):
        return attrs, {}
    return ({k: v for k, v in attrs.items() if k not in _LEGACY_NOTES},
            {_LEGACY_NOTES[k]: v for k, v in attrs.items() if k in _LEGACY_NOTES})


def _jsonable(x):
    if isinstance(x, OpNotes):      # (a patched stage's ops)
        return x.to_json()
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, bytes):
        return x.decode("latin-1")
    return x
