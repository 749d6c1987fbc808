"""cffi build script: compiles the C core (csrc/) into ``pyarena._native``.

Named in setup.py's ``cffi_modules``.  The cdef is the region of the public
header between ``PA_CDEF_BEGIN`` and ``PA_CDEF_END``, so the header stays
the single source of truth for the C API.
"""
import glob
import os
import re

import numpy
from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(os.path.dirname(HERE), "csrc")

# Helpers compiled into the extension only (not part of the C library):
# returning an address as an integer saves a cffi pointer object and an
# int(ffi.cast(...)) round trip on the allocation hot path.
FAST_PATH = """
static intptr_t _pa_arena_alloc_addr(pa_arena_t *a, size_t size, size_t align)
{
    return (intptr_t)pa_arena_alloc(a, size, align);
}
/* defined in pyarena/_numpy_handler.c */
int _pa_glue_install(void);
size_t _pa_glue_walk(pa_pool_t *pool, pa_pool_block_t *out, size_t cap);
"""
FAST_PATH_CDEF = """
intptr_t _pa_arena_alloc_addr(pa_arena_t *a, size_t size, size_t align);
int _pa_glue_install(void);
size_t _pa_glue_walk(pa_pool_t *pool, pa_pool_block_t *out, size_t cap);
"""

# The work pool's CPython/NumPy glue (ownership capsules, the fast
# Pool.empty, the NEP 49 allocator): extension-only, so it lives next to
# this file, not in csrc/.  It uses NumPy's C API (numpy is therefore a
# build requirement) and non-limited CPython calls (hence
# py_limited_api=False below).
GLUE_SOURCE = os.path.join("pyarena", "_numpy_handler.c")


def read_cdef(header_path):
    with open(header_path) as f:
        text = f.read()
    m = re.search(r"/\* PA_CDEF_BEGIN \*/(.*)/\* PA_CDEF_END \*/", text, re.S)
    if not m:
        raise RuntimeError(f"{header_path}: no PA_CDEF_BEGIN/END region")
    return m.group(1)


def c_sources():
    return sorted(glob.glob(os.path.join(CSRC, "*.c")))


ffibuilder = FFI()
ffibuilder.cdef(read_cdef(os.path.join(CSRC, "pyarena.h")) + FAST_PATH_CDEF)
ffibuilder.set_source(
    "pyarena._native",
    '#include "pyarena.h"\n' + FAST_PATH,
    sources=[os.path.relpath(p, os.path.dirname(HERE)) for p in c_sources()]
    + [GLUE_SOURCE],
    include_dirs=[CSRC, numpy.get_include()],
    py_limited_api=False,
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    libraries=["pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
