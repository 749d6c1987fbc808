"""A graph's tensors: :class:`Tensor` (a shape and dtype, or just a byte
size, and a role), the roles, the size no tensor may pass, and a graph's
tensors retargeted to other input shapes (:func:`retargeted_tensors`, for
:meth:`Graph.retargeted`).

The underscored helpers are the checks of dimensions, sizes and dtypes
that building, validating, retargeting and reading a graph share (a
GraphError naming the tensor or op); only the graph package uses them.
"""
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError

__all__ = ["Tensor", "ROLES", "MAX_TENSOR_BYTES", "retargeted_tensors"]

ROLES = ("input", "output", "constant", "activation")
# Beyond this a tensor cannot be real on any edge device: refuse it before
# anything is allocated (a petabyte-sized dimension in a malformed file).
MAX_TENSOR_BYTES = 1 << 48


@dataclass
class Tensor:
    """A tensor: a shape and dtype, or just a byte size, and its role."""

    name: str
    shape: tuple = None           # ints, or str symbols until bound
    dtype: str = "float32"
    nbytes_given: int = None      # for tensors known only by size
    role: str = "activation"
    data: object = None           # constant value (numpy array) if known
    #: a pool tensor: its shape depends on data, so it is not planned (0
    #: bytes in the plan); the executor takes it from its Pool when it is
    #: produced and frees it after its last reader
    dynamic: bool = False
    #: a value that lives outside the arena (:data:`~.dtypes.HOST_KINDS`):
    #: ``"string"`` (a NumPy object array of str), ``"sequence"`` (a list of
    #: arrays), ``"optional"`` (None or a value); None for an arena tensor.
    #: Such a tensor is also ``dynamic`` (0 bytes in the plan): the
    #: executor holds it aside with the pool tensors
    host: str = None
    #: (shape, dtype, bytes) of the last ``nbytes`` of a tuple shape: the
    #: planner asks thousands of times; a new shape or dtype object recomputes
    _nb: tuple = field(default=None, repr=False, compare=False)

    @property
    def is_symbolic(self):
        shape = self.shape
        if shape is None:
            return False
        for d in shape:       # plain ints first: the planner asks this often
            if type(d) is not int and not isinstance(d, (int, np.integer)):
                return True
        return False

    @property
    def nbytes(self):
        """Size in bytes; GraphError if still symbolic or invalid."""
        shape = self.shape
        c = self._nb
        if c is not None and c[0] is shape and c[1] is self.dtype:
            return c[2]
        if shape is None:
            if self.nbytes_given is None:
                raise GraphError(f"tensor {self.name!r} has neither a shape nor a size")
            return self.nbytes_given
        if all(type(d) is int for d in shape):      # the common case, without NumPy
            n = math.prod(shape) * _itemsize(self.dtype)
            if type(shape) is tuple:
                self._nb = (shape, self.dtype, n)
            return n
        if self.is_symbolic:
            syms = [d for d in self.shape if not isinstance(d, (int, np.integer))]
            raise GraphError(
                f"tensor {self.name!r} has unknown dimension(s) {syms} in shape "
                f"{list(self.shape)}; bind the graph input that carries them")
        n = math.prod(int(d) for d in self.shape) * np.dtype(self.dtype).itemsize
        return n


# -- the checks the graph's modules share ---------------------------------------
@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    return np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=256)
def _known_dtype(dtype):
    dt = np.dtype(dtype)
    return dt, dt.name          # dtype.name costs more than the lookup


def _dtype(name, dtype):
    """(np.dtype, its name) of a tensor's dtype; GraphError if unknown."""
    try:
        return _known_dtype(dtype)
    except TypeError:           # unhashable: a spec NumPy may still read
        pass
    except Exception:
        raise GraphError(f"tensor {name!r}: unknown dtype {dtype!r}") from None
    try:
        dt = np.dtype(dtype)
    except Exception:
        raise GraphError(f"tensor {name!r}: unknown dtype {dtype!r}") from None
    return dt, dt.name


def _int_dim(owner, value, what="dimension"):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GraphError(f"tensor/op {owner!r}: {what} must be an integer, not {value!r}")
    if value < 0:
        raise GraphError(f"tensor/op {owner!r}: negative {what} {value}")
    return int(value)


def _check_size(t, n=None):
    n = t.nbytes if n is None else n
    if n > MAX_TENSOR_BYTES:
        raise GraphError(f"tensor {t.name!r} would need {n:,} bytes (shape "
                         f"{list(t.shape) if t.shape else '?'}): refusing an absurd size")


def retargeted_tensors(tensors, shapes, data):
    """``tensors`` (name -> Tensor) for other input shapes, as
    :meth:`Graph.retargeted` gives them to its copy: every non-constant tensor
    new, with its shape from ``shapes``; the constants named in ``data`` new
    with that value; the other constants the same objects.  GraphError for a
    shape missing, not concrete or of another rank."""
    out = {}
    for name, t in tensors.items():
        if t.role == "constant":
            if name in data:
                nt = Tensor(name, t.shape, t.dtype, t.nbytes_given, "constant", data[name])
                nt._nb = t._nb
                t = nt
            out[name] = t
            continue
        shape = shapes.get(name)
        if shape is None or t.shape is None or len(shape) != len(t.shape) or \
                any(type(d) is not int or d < 0 for d in shape):
            raise GraphError(f"tensor {name!r}: no concrete shape of rank "
                             f"{len(t.shape or ())} to resize it to (got {shape!r})")
        shape = tuple(shape)
        nt = Tensor(name, shape, t.dtype, None, t.role)
        n = math.prod(shape) * _itemsize(t.dtype)
        nt._nb = (shape, t.dtype, n)
        _check_size(nt, n)
        out[name] = nt
    return out
