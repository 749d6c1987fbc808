"""The one input binder: concrete shapes for a graph's inputs.

Every front end that fixes input shapes -- ``Graph.bind_inputs`` for
JSON and built graphs, the ONNX importer (before shape inference), the
TFLite importer -- asks :func:`bind_shapes`, so the rules and the messages
are the same everywhere:

* a name that is not a graph input is refused, naming the inputs (the
  error's ``unknown_input`` is that name);
* the rank must match when the model states it;
* a dimension must be a non-negative integer;
* a fixed dimension cannot change; a symbolic one (a string, ``"N"``) or
  an unknown one (``None``) takes the value given, and one symbol takes
  one value across all inputs.

Errors are :class:`~pyarena.errors.GraphError` in the library's own words
(no command-line flags): a front end adds how to give a shape there.
"""
import operator

from ..errors import GraphError

__all__ = ["bind_shapes", "format_dims", "unbound_message"]


def format_dims(dims):
    """``[N, 3, ?, 8]`` for symbols, ints and unknowns (None)."""
    if dims is None:
        return "[?]"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _dim(name, i, value):
    try:
        v = operator.index(value)
    except TypeError:
        raise GraphError(f"input {name!r}: dimension {i} must be an integer, "
                         f"not {value!r}") from None
    if isinstance(value, bool):
        raise GraphError(f"input {name!r}: dimension {i} must be an integer, not {value!r}")
    if v < 0:
        raise GraphError(f"input {name!r}: negative dimension {v} (at {i})")
    return v


def bind_shapes(declared, given):
    """Check ``given`` against ``declared`` and resolve it.

    ``declared``: input name -> dims as the model states them (a list of
    ints, symbol strings and None for unknown dimensions; or None when the
    rank is unknown).  ``given``: input name -> a sequence of ints.
    Returns ``(shapes, env)``: input name -> tuple of ints for every given
    input, and symbol -> value for the symbols they bind.
    """
    shapes, env = {}, {}
    for name, dims in given.items():
        if name not in declared:
            exc = GraphError(f"unknown graph input {name!r}; the graph inputs are "
                             f"{list(declared)}")
            exc.unknown_input = name     # a front end can say which of its flags
            raise exc
        try:
            dims = tuple(_dim(name, i, d) for i, d in enumerate(dims))
        except TypeError:
            raise GraphError(f"input {name!r}: the shape must be a sequence of "
                             f"integers, not {dims!r}") from None
        old = declared[name]
        if old is not None:
            if len(old) != len(dims):
                raise GraphError(f"input {name!r}: rank {len(dims)} given, the graph "
                                 f"says {format_dims(old)}")
            for i, (o, d) in enumerate(zip(old, dims)):
                if isinstance(o, str):
                    if env.setdefault(o, d) != d:
                        raise GraphError(f"symbol {o!r} bound to both {env[o]} and {d}")
                elif o is not None and o != d:
                    raise GraphError(f"input {name!r}: dimension {i} is fixed to {o}, "
                                     f"{d} given")
        shapes[name] = dims
    return shapes, env


def unbound_message(unbound):
    """The sentence that names graph inputs still holding unknown dimensions
    (``unbound``: name -> declared dims), for errors about tensors that
    cannot be sized."""
    listed = ", ".join(f"{k} {format_dims(v)}" for k, v in unbound.items())
    return (f"graph input(s) with unknown dimensions: {listed}; give their shapes "
            f"(inputs={{name: shape}} when loading, Graph.bind_inputs for a graph)")
