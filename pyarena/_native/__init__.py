"""The native layer: the thin 1:1 binding over the C core (``ffi``, ``lib``,
``check``) and the CPython/NumPy glue (``glue``).

Everything above this package reaches the C core only through it.
``check`` is the one place where a C status becomes a Python exception.
The cffi module ``_cffi`` is built by ``build.py`` (named in setup.py);
the glue module ``_glue`` from ``glue_*.c``: one lifetime scheme (handles
own the C arena / pool, arrays hold their handle), one shape parser, the
native ``empty`` of Arena and Pool, and NumPy's allocator (NEP 49).  It
calls the C core through the addresses bound here, so the process holds one
copy of the core.
"""
from .. import errors
from . import _glue as glue
from ._cffi import ffi, lib

__all__ = ["ffi", "lib", "check", "status_error", "status_name", "glue"]

glue.bind({name: int(ffi.cast("uintptr_t", ffi.addressof(lib, name))) for name in (
    "pa_arena_alloc", "pa_arena_destroy", "pa_pool_alloc", "pa_pool_realloc",
    "pa_pool_free", "pa_pool_free_all", "pa_pool_destroy")})
glue.configure(errors.InvalidArgumentError, errors.AlignmentError, errors.StateError)
glue.ARENA, glue.POOL = 0, 1

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
