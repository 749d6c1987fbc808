"""Which feeds an :class:`~.session.InferenceSession` keys its signatures
by value, besides their shapes.

* A 0-d integer or boolean input (a sample rate, a flag), always: the
  model is imported with it fixed, so what is computed from it folds and
  an ``If`` on it takes its branch.
* An input whose value decides tensor shapes (``Graph.deciding_inputs``:
  a fed Reshape target, Resize's scales, a TopK's K, a Pad's pads), found
  by the first import that meets it: keyed by its value, the model is
  imported with the value fixed and every tensor is planned in the arena,
  instead of sized at run time from the pool (or, for a float
  ``scales``, refused for want of a shape).  Where that first import
  worked without the value (its tensors sized at run time) and the input
  then takes more than :data:`MAX_SPECIALISED` distinct values, the
  session stops keying by it and runs the unspecialised graph for every
  value: one import per value no longer pays.

A value-keyed feed larger than :data:`~.onnx_dynamic.VALUE_MAX_ELEMENTS`
elements is keyed by its shape only (an input fed as a small vector in
one call and a large tensor in another).
"""
import numpy as np

from .onnx_dynamic import VALUE_MAX_ELEMENTS

__all__ = ["MAX_SPECIALISED", "SignatureKeys"]

#: distinct values of the inputs found to decide shapes a session imports
#: the model for, when it also runs without them fixed
MAX_SPECIALISED = 8

_FIXED_TYPES = ("tensor(int64)", "tensor(int32)", "tensor(bool)")
_FLOAT_TYPES = ("tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)")


def _value_key(v):
    """A feed's value as a signature element (None: keyed by shape only)."""
    if v.ndim == 0:
        return v.item()
    if v.size > VALUE_MAX_ELEMENTS or v.dtype.hasobject:
        return None
    return (v.dtype.str, v.tobytes())


def value_of(key, shape):
    """The array a signature's value element stands for."""
    if isinstance(key, tuple):
        dtype, data = key
        return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape).copy()
    return key


class SignatureKeys:
    """The value-keyed inputs of one session (see the module docstring).
    ``keyed`` is replaced, never changed in place, so that a run reading it
    without the session's lock sees one set or the other."""

    def __init__(self, inputs, held=frozenset()):
        self.held = frozenset(held)     # sequences / optionals: keyed by name only
        self.fixed = frozenset(a.name for a in inputs if a.shape == () and a.type in _FIXED_TYPES)
        self._floats = frozenset(a.name for a in inputs if a.type in _FLOAT_TYPES)
        self.required = frozenset()     # deciding inputs without which an import fails
        self.optional = frozenset()     # deciding inputs the pool could also size
        self.keyed = self.fixed
        self._seen = set()              # the optional inputs' distinct value tuples
        self._shapes_only = False

    def signature(self, feeds):
        """``((name, shape, value key or None), ...)`` of ``feeds`` (a
        sequence or optional: ``(name, None, None)``)."""
        keyed, held = self.keyed, self.held
        return tuple((k, None, None) if k in held else
                     (k, v.shape, _value_key(v) if k in keyed else None)
                     for k, v in feeds.items())

    def shapes_only(self):
        """Key by shapes alone from now on, but where an import cannot do
        without a value: a Loop body's session, whose iteration number would
        otherwise make every iteration a signature of its own."""
        self.fixed = frozenset()
        self._shapes_only = True
        self._rekey()

    def found(self, names, required):
        """``names`` decide shapes (``required``: the import failed without
        their values).  True when that adds a keyed input (the caller keys
        the signature again); False when they are keyed already, or were
        given up (:data:`MAX_SPECIALISED`) and need not be.  Of the inputs
        of a failed import, the float ones are the required ones where
        there are any (the pool sizes tensors by small integer values, not
        by float scales); the others stay optional."""
        names = frozenset(names)
        if required:
            floats = names & self._floats
            must = floats or names
            self.required |= must
            self.optional |= names - must
        else:
            self.optional |= names
        before = self.keyed
        self._rekey()
        return self.keyed != before

    def _rekey(self):
        given_up = self._shapes_only or len(self._seen) > MAX_SPECIALISED
        self.keyed = self.fixed | self.required | (frozenset() if given_up else self.optional)

    def seen(self, signature):
        """Count a prepared signature's values of the optional inputs; past
        :data:`MAX_SPECIALISED` distinct ones, stop keying by them."""
        opt = self.optional - self.required - self.fixed
        if not opt:
            return
        self._seen.add(tuple(v for k, _, v in signature if k in opt))
        self._rekey()
