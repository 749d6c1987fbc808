"""cffi build script and the C core's build: ``pyarena._native._cffi`` and
``libpyarena.{a,so}``.

Named in setup.py's ``cffi_modules``.  The cdef is the region of the public
header between ``PA_CDEF_BEGIN`` and ``PA_CDEF_END``, so the header stays
the single source of truth for the C API.

The C core (the *.c files of csrc/ and its folders alloc/, plan/, kernels/)
is compiled once, by :func:`build_core`, with exactly the command
``make -C csrc`` uses: the flags and the folders come from
``csrc/flags.mk``, which the Makefile includes (one source of truth;
``.ci/check_flags.py`` compares the two builds' compile lines).  The objects make
``libpyarena.a`` and ``libpyarena.so``; the cffi extension compiles only its
generated wrapper (with relaxed warnings: cffi's code is not ours) and links
``libpyarena.a``, which setup.py's build_ext adds to it.  Standalone:
``python pyarena/_native/build.py`` builds the core under build/ and the module.
"""
import glob
import os
import re
import shlex
import subprocess

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CSRC = os.path.join(ROOT, "csrc")
FLAGS_FILE = os.path.join(CSRC, "flags.mk")
CORE_LOG_PREFIX = "pyarena core: "  # the compile lines .ci/check_flags.py reads

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


def c_sources(flags=None):
    """The core's sources, relative to csrc/: every *.c of the folders
    csrc/flags.mk's PA_SRC_DIRS names, as csrc/Makefile finds them."""
    flags = read_flags() if flags is None else flags
    out = []
    for d in flags["PA_SRC_DIRS"]:
        found = glob.glob(os.path.join(CSRC, d, "*.c"))
        out += sorted(os.path.relpath(f, CSRC) for f in found)
    return out


def read_flags(path=FLAGS_FILE):
    """The PA_* variables of csrc/flags.mk, each as a list of arguments."""
    flags = {}
    with open(path) as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"(PA_\w+)\s*:?=\s*(.*)", line)
            if not m or "$" in line:
                raise RuntimeError(f"{path}: {line!r} is not a plain `PA_NAME = value` line")
            flags[m.group(1)] = shlex.split(m.group(2))
    return flags


def compiler():
    """$(CC) as make sees it: the environment's CC, else make's default cc."""
    return shlex.split(os.environ.get("CC") or "cc")


def opt_flags(flags):
    """$(CFLAGS) as csrc/Makefile sees it (CFLAGS ?= $(PA_CFLAGS_OPT))."""
    if "CFLAGS" in os.environ:
        return shlex.split(os.environ["CFLAGS"])
    return flags["PA_CFLAGS_OPT"]


def compile_command(src, obj, flags):
    """csrc/Makefile's `$(CC) $(CFLAGS) $(WARN) $(PIC) -c $< -o $@`."""
    return (compiler() + opt_flags(flags) + flags["PA_CFLAGS_STD"] + flags["PA_CFLAGS_WARN"]
            + flags["PA_CFLAGS_PIC"] + ["-c", src, "-o", obj])


def build_core(objdir, libdir):
    """Compile the core's sources (in csrc/, like make: `-c alloc/pool.c`)
    into `objdir` (the folders mirrored) and write libpyarena.a and
    libpyarena.so into `libdir`; returns the .a's path."""
    flags = read_flags()
    os.makedirs(objdir, exist_ok=True)
    os.makedirs(libdir, exist_ok=True)
    objects = []
    for src in c_sources(flags):
        obj = os.path.abspath(os.path.join(objdir, src[:-2] + ".o"))
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        cmd = compile_command(src, obj, flags)
        print(CORE_LOG_PREFIX + shlex.join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=CSRC)
        objects.append(obj)
    static = os.path.abspath(os.path.join(libdir, "libpyarena.a"))
    shared = os.path.abspath(os.path.join(libdir, "libpyarena.so"))
    if os.path.exists(static):
        os.remove(static)  # `ar r` would keep members of removed sources
    subprocess.run(["ar", "rcs", static] + objects, check=True)
    subprocess.run(compiler() + opt_flags(flags) + ["-shared", "-o", shared] + objects
                   + flags["PA_LDLIBS"], check=True)
    return static


def build_tool(name, static, bindir):
    """Compile and link csrc/tools/<name>.c against the core (`static`,
    libpyarena.a) with make's flags, into `bindir`; returns its path."""
    flags = read_flags()
    os.makedirs(bindir, exist_ok=True)
    out = os.path.abspath(os.path.join(bindir, name))
    cmd = (compiler() + opt_flags(flags) + flags["PA_CFLAGS_STD"] + flags["PA_CFLAGS_WARN"]
           + ["-I.", os.path.join("tools", name + ".c"), static] + flags["PA_LDLIBS"]
           + ["-ldl", "-o", out])
    print("pyarena tool: " + shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=CSRC)
    return out


def make_ffibuilder(extra_objects=()):
    """The cffi builder of pyarena._native._cffi; `extra_objects` is the core
    (libpyarena.a), which setup.py's build_ext appends when it is empty."""
    ffi = FFI()
    ffi.cdef(read_cdef(os.path.join(CSRC, "pyarena.h")) + FAST_PATH_CDEF)
    ffi.set_source(
        "pyarena._native._cffi",
        '#include "pyarena.h"\n' + FAST_PATH,
        include_dirs=[CSRC],
        extra_objects=list(extra_objects),
        depends=[os.path.join(CSRC, "pyarena.h")],
        # the generated wrapper, not the core: cffi's code has unused
        # parameters by design
        extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        libraries=["pthread", "m"],
    )
    return ffi


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    out = os.path.join(ROOT, "build", "pyarena-core")
    lib = build_core(os.path.join(out, "obj"), out)
    make_ffibuilder([lib]).compile(tmpdir=os.path.join(ROOT, "build"), verbose=True)
