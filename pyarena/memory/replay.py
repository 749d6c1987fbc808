"""Replaying a trace against allocators, each in a fresh process.

The timed loop runs in C (``pa_replay``, built with the C core: see
csrc/tools/pa_replay.c), one process per allocator so no heap state --
another allocator's, or Python's -- leaks into the figures.  Every page of
every block is touched.  Allocators:

* ``glibc`` -- the C library's malloc with its defaults;
* ``glibc-tuned`` -- the same with trimming off and mmap only above 32 MiB
  (``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_``): what a
  long-running inference server usually sets;
* ``jemalloc``, ``mimalloc``, ``tcmalloc`` -- the system's libraries,
  loaded at run time (dlopen); a missing one is reported as skipped with
  the Debian package that provides it;
* ``pool-hybrid``, ``pool-slab``, ``pool-buddy`` -- pyarena's work pool in
  each mode, with the library defaults;
* ``pool-learned`` -- the hybrid pool told each step's end
  (``pa_pool_step`` at the trace's ``s`` marks, or its automatic
  boundaries for a trace without any): repeated steps are served from
  learned plans.

:func:`replay` returns one dict per allocator with the raw figures and the
derived ones: ``ns_per_pair`` (median thread CPU time per alloc/free pair),
``footprint`` (peak growth of the anonymous resident set / peak live
bytes, first replay on a fresh heap), ``footprint_warm`` (the same during
the second replay: what a loop pays once warmed up), ``fragmentation``
(1 - peak live / peak growth), ``page_faults``, ``rss_kept_bytes``
(anonymous growth left after the last free), ``footprint_rss`` (the
whole VmRSS high-water mark's growth / peak live, which also counts the
file pages of the allocator's code: they move it by 64 KiB quanta from
run to run) and ``samples`` (event index, VmRSS growth in bytes) along
the replay.  The anonymous peak is sampled after each allocation (every
k-th one beyond two million).
"""
import ctypes.util
import json
import os
import subprocess

from .._native.paths import get_tool
from ..errors import InvalidArgumentError

__all__ = ["ALLOCATORS", "replay", "library_for"]

ALLOCATORS = ("glibc", "glibc-tuned", "jemalloc", "mimalloc", "tcmalloc", "pool-hybrid",
              "pool-slab", "pool-buddy", "pool-learned")

# allocator -> (library name for find_library, malloc symbol, free symbol, package)
_DLOPEN = {
    "jemalloc": ("jemalloc", "malloc", "free", "libjemalloc2"),
    "mimalloc": ("mimalloc", "mi_malloc", "mi_free", "libmimalloc2.0"),
    "tcmalloc": ("tcmalloc_minimal", "tc_malloc", "tc_free", "libtcmalloc-minimal4"),
}
_TUNED = {"MALLOC_TRIM_THRESHOLD_": str(1 << 62), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}
# jemalloc uses initial-exec TLS: dlopen() needs static TLS room kept free
_JEMALLOC_ENV = {"GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=16384"}


def library_for(name):
    """(path or soname, malloc symbol, free symbol) of a dlopen'ed malloc,
    or (None, why) when the library is not installed."""
    lib, m, f, package = _DLOPEN[name]
    found = ctypes.util.find_library(lib)
    if found is None:
        return None, f"not installed (Debian package {package})"
    return (found, m, f), None


def _command(binary, allocator, repeat, samples, touch):
    """(argv, environment) of the pa_replay run for ``allocator``, or
    (None, why it is skipped)."""
    tool = get_tool("pa_replay")
    env = dict(os.environ)
    args = [tool, binary]
    if allocator in ("glibc", "glibc-tuned"):
        args.append("malloc")
        if allocator == "glibc-tuned":
            env.update(_TUNED)
    elif allocator in _DLOPEN:
        spec, why = library_for(allocator)
        if spec is None:
            return None, why
        args += ["dlopen", "--lib", spec[0], "--malloc", spec[1], "--free", spec[2]]
        if allocator == "jemalloc":
            env.update(_JEMALLOC_ENV)
    elif allocator.startswith("pool-") and allocator in ALLOCATORS:
        args.append(allocator)
    else:
        raise InvalidArgumentError(f"unknown allocator {allocator!r}; choose from "
                                   f"{', '.join(ALLOCATORS)}")
    args += ["--repeat", str(int(repeat)), "--samples", str(int(samples))]
    if not touch:
        args.append("--no-touch")
    return (args, env), None


def replay(binary, allocator, peak_live, repeat=5, samples=200, touch=True, timeout=600):
    """Replay the binary trace ``binary`` (:meth:`Trace.to_binary`) against
    ``allocator`` in a fresh process; ``peak_live`` (bytes) scales the
    footprint.  Returns a dict; ``{"allocator": ..., "skipped": why}`` when
    the allocator is not available or its replay failed."""
    cmd, why = _command(binary, allocator, repeat, samples, touch)
    if cmd is None:
        return {"allocator": allocator, "skipped": why}
    args, env = cmd
    try:
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"allocator": allocator, "skipped": f"replay took over {timeout} s"}
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return {"allocator": allocator, "skipped": f"replay failed: {err}"}
    out = json.loads(r.stdout)
    out["allocator"] = allocator
    base = out["anon0_kb"]
    grow = max(0, out["anon_peak_kb"] - base) * 1024
    out["peak_rss_growth_bytes"] = grow
    out["footprint"] = grow / peak_live if peak_live else None
    warm = max(0, out["anon_warm_kb"] - base) * 1024
    out["footprint_warm"] = warm / peak_live if peak_live else None
    rss = max(0, out["hwm_kb"] - out["rss0_kb"]) * 1024
    out["footprint_rss"] = rss / peak_live if peak_live else None
    out["fragmentation"] = 1.0 - peak_live / grow if grow else None
    out["page_faults"] = out.pop("minor_faults") + out.pop("major_faults")
    out["rss_kept_bytes"] = max(0, out["anon_end_kb"] - base) * 1024
    out["samples"] = [(int(i), max(0, kb - out["rss0_kb"]) * 1024) for i, kb in out["samples"]]
    return out
