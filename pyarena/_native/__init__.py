"""The native layer: the thin 1:1 binding over the C core (``ffi``, ``lib``,
``check``) and the CPython/NumPy glue.

Everything above this package reaches the C core only through it.
``check`` is the one place where a C status becomes a Python exception.
The cffi module ``_cffi`` is built by ``build.py`` (named in setup.py);
the glue extension modules come from the ``.c`` files beside it.
"""
from ._cffi import ffi, lib
from .. import errors

__all__ = ["ffi", "lib", "check", "status_error", "status_name"]

_STATUS_CLASS = {
    lib.PA_ERR_INVALID: errors.InvalidArgumentError,
    lib.PA_ERR_ALIGN: errors.AlignmentError,
    lib.PA_ERR_OVERFLOW: errors.InvalidArgumentError,
    lib.PA_ERR_NOMEM: MemoryError,
    lib.PA_ERR_STATE: errors.StateError,
    lib.PA_ERR_DOUBLE_FREE: errors.DoubleFreeError,
    lib.PA_ERR_FOREIGN: errors.ForeignPointerError,
    lib.PA_ERR_INFEASIBLE: errors.PlanInfeasibleError,
    lib.PA_ERR_TIMEOUT: errors.PlanInfeasibleError,
}


def status_name(status):
    """The C library's text for a status code."""
    return ffi.string(lib.pa_status_string(status)).decode()


def status_error(status, what):
    """The exception for a failed C call (not raised)."""
    cls = _STATUS_CLASS.get(status, errors.PyArenaError)
    return cls(f"{what}: {status_name(status)}")


def check(status, what):
    """Raise the matching exception unless ``status`` is PA_OK."""
    if status != lib.PA_OK:
        raise status_error(status, what)
    return status
