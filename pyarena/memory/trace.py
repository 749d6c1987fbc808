"""Allocation traces: record NumPy's data allocations, read and write them.

A trace is the sequence of a program's data allocations and frees, in the
text format of docs/traces.md (one event per line: ``a ID SIZE``,
``f ID``, ``s`` for a step boundary; ``#`` comments; ``.gz`` compressed
transparently).  ``pyarena trace`` records one for any Python program;
``pyarena alloc-bench`` replays it against each allocator.

From Python::

    with pyarena.trace.record("loop.trace.gz", steps="none") as rec:
        for batch in batches:
            run(batch)
            pyarena.trace.step()          # one step per iteration
    print(rec.counts)                     # events, allocations, peak live ...

    t = pyarena.trace.read_trace("loop.trace.gz")
    t.peak_live_bytes, t.allocations, t.steps

The recorder is a NumPy allocator (NEP 49) that serves every request from
the allocator that was current when recording started -- NumPy's own, or
a pool's (``pool=``) -- so the program behaves as before.  NumPy keeps the
allocator per thread (a context variable): allocations made by other
threads are not recorded; frees of recorded blocks are, whichever thread
drops them.
"""
import datetime
import gzip
import os
import shutil
import sys
import zlib

import numpy as np

from .._native import glue
from ..errors import InvalidArgumentError

__all__ = ["record", "step", "Recorder", "Trace", "read_trace", "write_trace", "FORMAT",
           "STEPS"]

#: the first comment line of every trace
FORMAT = "pyarena-trace/1"
#: step modes of the recorder: only explicit step() calls, or also automatic
#: marks when the live bytes return to the level of the last step
STEPS = ("none", "auto")

ALLOC, FREE, STEP = 0, 1, 2
_BIN = np.dtype([("id", "<u4"), ("kind", "<u4"), ("size", "<u8")])

_active = []      # the recorders running, innermost last


class Recorder:
    """One recording (see :func:`record`); ``counts`` once it has stopped."""

    def __init__(self, path, steps="none", callsites=False, pool=None, program=None):
        if steps not in STEPS:
            raise InvalidArgumentError(f"steps must be one of {STEPS}, not {steps!r}")
        self.path = os.fspath(path)
        self.steps = steps
        self.counts = None
        self._gz = self.path.endswith(".gz")
        self._raw = self.path[:-3] + ".part" if self._gz else self.path
        with open(self._raw, "w") as f:
            f.write(_header(program, steps, callsites))
        if pool is not None:
            base = glue.handler_new(pool._hcap)
        else:
            base = glue.get_handler()
        # a call site is the program's line, not NumPy's own Python code
        self._cap = glue.trace_open(self._raw, base, steps == "auto", bool(callsites),
                                    os.path.dirname(np.__file__) + os.sep)
        self._saved = None

    def start(self):
        self._saved = glue.set_handler(self._cap)
        _active.append(self)
        return self

    def step(self):
        """Mark a step boundary (the end of one iteration)."""
        if self.counts is None:
            glue.trace_step(self._cap)

    def stop(self):
        """Stop recording (arrays made meanwhile keep working), close the
        file and compress it if the name ends in ``.gz``.  Returns the
        counts: events, allocations, frees, steps, peak_live_bytes, ..."""
        if self.counts is not None:
            return self.counts
        if self._saved is not None:
            glue.set_handler(self._saved)
            self._saved = None
        if self in _active:
            _active.remove(self)
        self.counts = glue.trace_close(self._cap)
        if self._gz:
            with open(self._raw, "rb") as src, gzip.open(self.path, "wb", 6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.remove(self._raw)
        return self.counts

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def _header(program, steps, callsites):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    prog = program if program is not None else " ".join(sys.argv) or "python"
    lines = [FORMAT, f"program: {prog}", f"date: {now}", f"numpy: {np.__version__}",
             f"steps: {steps}"]
    if callsites:
        lines.append("callsites: yes")
    return "".join(f"# {line}\n" for line in lines)


def record(path, *, steps="none", callsites=False, pool=None, program=None):
    """Record NumPy's data allocations of this thread into ``path`` while
    the ``with`` block runs.  ``steps="auto"`` also marks a step whenever
    the live bytes return to the level of the last step; ``callsites``
    adds the allocating Python line to each allocation (the innermost
    frame outside NumPy's own package; slower);
    ``pool`` serves the allocations from a :class:`~pyarena.Pool` instead
    of NumPy's allocator.  Returns the :class:`Recorder`."""
    return Recorder(path, steps, callsites, pool, program).start()


def step():
    """Mark a step boundary in every running recording (a no-op when none
    runs, so programs may call it unconditionally)."""
    for rec in list(_active):
        rec.step()


# -- reading and writing ------------------------------------------------------
class Trace:
    """A trace in memory: parallel arrays ``kinds`` (0 alloc, 1 free,
    2 step), ``ids`` and ``sizes`` (bytes of an allocation, 0 otherwise),
    the ``header`` comments as a dict, and ``callsites`` (a list, one
    entry per allocation, or None)."""

    def __init__(self, kinds, ids, sizes, header=None, callsites=None):
        self.kinds = np.asarray(kinds, dtype=np.uint8)
        self.ids = np.asarray(ids, dtype=np.uint32)
        self.sizes = np.asarray(sizes, dtype=np.uint64)
        self.header = dict(header or {})
        self.callsites = callsites

    def __len__(self):
        return int(self.kinds.size)

    @property
    def allocations(self):
        return int(np.count_nonzero(self.kinds == ALLOC))

    @property
    def steps(self):
        return int(np.count_nonzero(self.kinds == STEP))

    def live_bytes(self):
        """Live bytes after each event (an int64 array)."""
        sizes = self.sizes.astype(np.int64)
        live = np.zeros(len(self), np.int64)
        alloc = self.kinds == ALLOC
        live[alloc] = sizes[alloc]
        free = np.flatnonzero(self.kinds == FREE)
        live[free] = -self._freed_sizes(free)
        return np.cumsum(live)

    def _freed_sizes(self, free):
        """The size of the block each free event releases."""
        size_of = {}
        out = np.zeros(free.size, np.int64)
        j = 0
        kinds, ids, sizes = self.kinds.tolist(), self.ids.tolist(), self.sizes.tolist()
        for i in range(len(kinds)):
            if kinds[i] == ALLOC:
                size_of[ids[i]] = sizes[i]
            elif kinds[i] == FREE:
                out[j] = size_of.pop(ids[i], 0)
                j += 1
        return out

    @property
    def peak_live_bytes(self):
        live = self.live_bytes()
        return int(live.max()) if live.size else 0

    def intervals(self):
        """Every block as ``(name, size, first, last)`` with inclusive event
        indices (a block never freed lives to the last event): the input of
        :func:`pyarena.plan_intervals`."""
        kinds, ids, sizes = self.kinds.tolist(), self.ids.tolist(), self.sizes.tolist()
        open_, out = {}, []
        for i, (k, b) in enumerate(zip(kinds, ids)):
            if k == ALLOC:
                open_[b] = (len(out), i)
                out.append([f"b{len(out)}", sizes[i], i, len(kinds) - 1])
            elif k == FREE and b in open_:
                n, _ = open_.pop(b)
                out[n][3] = max(i - 1, out[n][2])
        return [tuple(r) for r in out]

    def slots(self):
        """Dense replay slots: for each event the index of its block among
        the blocks live at that moment (a freed block's slot is reused, last
        freed first), so a replayer needs only as many slots as the peak
        block count whatever the IDs.  InvalidArgumentError if an ``a``
        names a block that is live or an ``f`` one that is not."""
        kinds, ids = self.kinds.tolist(), self.ids.tolist()
        out = [0] * len(kinds)
        slot_of, spare, top = {}, [], 0
        for i, (k, b) in enumerate(zip(kinds, ids)):
            if k == ALLOC:
                if b in slot_of:
                    raise _BadEvent(i, f"block {b} is allocated again while live")
                if spare:
                    slot = spare.pop()
                else:
                    slot, top = top, top + 1
                slot_of[b] = out[i] = slot
            elif k == FREE:
                slot = slot_of.pop(b, None)
                if slot is None:
                    raise _BadEvent(i, f"block {b} is freed but not live")
                out[i] = slot
                spare.append(slot)
        return np.asarray(out, np.uint32)

    def to_binary(self, path):
        """Write the replayer's input: {uint32 slot, uint32 kind, uint64 size}
        records (see :meth:`slots`)."""
        arr = np.empty(len(self), _BIN)
        try:
            arr["id"] = self.slots()
        except _BadEvent as exc:
            raise InvalidArgumentError(f"event {exc.index + 1}: {exc.why}") from None
        arr["kind"], arr["size"] = self.kinds, self.sizes
        arr.tofile(path)


class _BadEvent(ValueError):
    def __init__(self, index, why):
        super().__init__(why)
        self.index, self.why = index, why


def _open(path, mode):
    path = os.fspath(path)
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8", errors="replace")
    return open(path, mode, encoding="utf-8", errors="replace")


#: events read_trace reads at most by default (each costs ~100 bytes while read)
MAX_EVENTS = 10_000_000


def read_trace(path, max_events=MAX_EVENTS):
    """A :class:`Trace` from a trace file (``.gz`` read transparently);
    InvalidArgumentError naming the file and line for a malformed event,
    or for more than ``max_events`` events (a small ``.gz`` may unpack to
    hundreds of millions: raise it for a trace that long)."""
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise InvalidArgumentError(f"max_events must be a positive integer, not "
                                   f"{max_events!r}")
    kinds, ids, sizes, header, sites, lines = [], [], [], {}, [], []
    any_site = False
    try:
        f = _open(path, "r")
    except OSError as exc:
        raise InvalidArgumentError(f"{path}: {exc.strerror or exc}") from None
    try:
        with f:
            for lineno, line in enumerate(f, 1):
                if line.startswith("#"):
                    key, sep, value = line[1:].strip().partition(":")
                    if sep:
                        header[key.strip()] = value.strip()
                    elif key.strip():
                        header.setdefault("format", key.strip())
                    continue
                parts = line.split(None, 3)
                if not parts:
                    continue
                try:
                    kind, site = _event(parts)
                except (ValueError, IndexError):
                    raise InvalidArgumentError(
                        f"{path}:{lineno}: bad event {line.strip()!r} (expected 'a ID SIZE', "
                        f"'f ID' or 's')") from None
                if len(kinds) == max_events:
                    raise InvalidArgumentError(
                        f"{path}:{lineno}: more than {max_events:,} events (read_trace's "
                        f"max_events)")
                kinds.append(kind[0])
                lines.append(lineno)
                ids.append(kind[1])
                sizes.append(kind[2])
                if kind[0] == ALLOC:
                    sites.append(site)
                    any_site = any_site or site is not None
    except (OSError, EOFError, zlib.error) as exc:   # a damaged .gz
        raise InvalidArgumentError(f"{path}: not a readable trace ({exc})") from None
    trace = Trace(kinds, ids, sizes, header, sites if any_site else None)
    try:
        trace.slots()
    except _BadEvent as exc:
        raise InvalidArgumentError(f"{path}:{lines[exc.index]}: {exc.why} (IDs name the "
                                   f"blocks live at that moment)") from None
    return trace


def _event(parts):
    """((kind, id, size), callsite or None) of one split event line."""
    tag = parts[0]
    if tag == "a":
        ident, size = int(parts[1]), int(parts[2])
        if not 0 <= ident < 2**32 or not 0 <= size < 2**63:
            raise ValueError
        # the rest of the line is the call site (a file name may hold spaces)
        return (ALLOC, ident, size), (parts[3].strip() if len(parts) > 3 else None)
    if tag == "f" and len(parts) == 2:
        ident = int(parts[1])
        if not 0 <= ident < 2**32:
            raise ValueError
        return (FREE, ident, 0), None
    if tag == "s" and len(parts) == 1:
        return (STEP, 0, 0), None
    raise ValueError


def write_trace(path, trace, program=None):
    """Write ``trace`` in the text format (``.gz`` compressed)."""
    sites = iter(trace.callsites or ())
    with _open(path, "w") as f:
        f.write(_header(program or trace.header.get("program"), trace.header.get(
            "steps", "none"), trace.callsites is not None))
        for k, i, s in zip(trace.kinds.tolist(), trace.ids.tolist(), trace.sizes.tolist()):
            if k == ALLOC:
                site = next(sites, None)
                f.write(f"a {i} {s} {site}\n" if site else f"a {i} {s}\n")
            elif k == FREE:
                f.write(f"f {i}\n")
            else:
                f.write("s\n")

