"""cffi build script: compiles the C core (csrc/) into ``pyarena._native._cffi``.

Named in setup.py's ``cffi_modules``.  The cdef is the region of the public
header between ``PA_CDEF_BEGIN`` and ``PA_CDEF_END``, so the header stays
the single source of truth for the C API.
"""
import glob
import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CSRC = os.path.join(ROOT, "csrc")

# A helper compiled into the extension only (not part of the C library).
FAST_PATH = """
/* Copy up to `cap` blocks of the pool into `out` (pa_pool_walk with a C
 * callback, so no Python runs under the pool lock); returns how many there
 * are in all, or (size_t)-1 if the walk failed.  Used by Pool.walk(). */
typedef struct { pa_pool_block_t *out; size_t cap, n; } _pa_walk_buf_t;
static int _pa_walk_copy(const pa_pool_block_t *block, void *ctx)
{
    _pa_walk_buf_t *w = (_pa_walk_buf_t *)ctx;
    if (w->n < w->cap)
        w->out[w->n] = *block;
    w->n++;
    return 0;
}
static size_t _pa_pool_walk_copy(pa_pool_t *pool, pa_pool_block_t *out, size_t cap)
{
    _pa_walk_buf_t w = {out, cap, 0};
    if (pa_pool_walk(pool, _pa_walk_copy, &w) != PA_OK)
        return (size_t)-1;
    return w.n;
}
"""
FAST_PATH_CDEF = """
size_t _pa_pool_walk_copy(pa_pool_t *pool, pa_pool_block_t *out, size_t cap);
"""


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
    "pyarena._native._cffi",
    '#include "pyarena.h"\n' + FAST_PATH,
    sources=[os.path.relpath(p, ROOT) for p in c_sources()],
    include_dirs=[CSRC],
    # rebuild when any C source or header changes, not only the cdef
    depends=sorted(glob.glob(os.path.join(CSRC, "*.[ch]"))),
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
    libraries=["pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
