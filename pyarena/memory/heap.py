"""Giving the C heap's free memory back to the system.

Reading a model leaves garbage in the C library's heap: the format
package's parser and shape inference allocate and free megabytes, and
glibc's malloc keeps freed pages (they count in the process's resident
set until reused).  :func:`trim_heap` hands them back (``pa_heap_trim``:
glibc's ``malloc_trim(0)``); ``load_model`` calls it once a model is
loaded (2-6 MiB on the ONNX models measured).
"""
from .._native import lib

__all__ = ["trim_heap"]


def trim_heap():
    """Give the C heap's free pages back; True if any were given back
    (always False where the C library has no such call)."""
    return bool(lib.pa_heap_trim())
