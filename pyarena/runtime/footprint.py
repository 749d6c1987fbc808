"""Where a process's resident memory goes: the model's accounts next to
what the operating system says.

:func:`resident` reads the process's resident set now and at its peak
(``/proc/self/status``; the peak from ``getrusage`` where there is no
``/proc``).  :func:`weights_info` splits an executor's constants into
the bytes in its weights arena (by dtype) and the bytes that are still
views of the model file (resident only while touched).
:class:`Footprint` takes readings at the phases of a run -- before
loading (the baseline: the interpreter, NumPy, pyarena and the model
format's package), after loading, once the executor is bound, after the
inferences -- and splits the peak into baseline + weights + activation
arena + other, with "other" broken down by the phase it appeared in:

* ``load`` -- what reading the model costs beyond its weights (the
  format package's parser and shape inference, the graph's objects, the
  heap they leave behind);
* ``bind`` -- building the kernels and binding the plan beyond the
  weights placed then (``pyarena run`` also makes its input data here);
* ``inference`` -- the inferences beyond the arena's own pages (the BLAS
  library's work buffers: about 1-2 MiB with one thread; copies of the
  outputs);
* ``transient`` -- the peak above what is resident at the end, and the
  phase it was reached in (a load that held more than it kept).
"""
import resource
from dataclasses import dataclass, field

import numpy as np

from .._format import human_bytes
from ..memory.mapped import is_mapped

__all__ = ["resident", "reset_peak", "weights_info", "file_resident", "Footprint"]


def resident():
    """(resident bytes now, peak resident bytes) of this process; now is
    None where ``/proc`` is not available."""
    now = peak = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    now = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) * 1024
    except OSError:
        pass
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return now, peak


def file_resident(path):
    """Bytes of the file ``path`` that this process's mappings of it hold
    resident (the sum of their ``Rss`` in ``/proc/self/smaps``: a compiled
    model's constants, read where they lie); None where there is no
    ``/proc``."""
    import os
    target = os.path.realpath(path)
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 5)
                if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                    inside = len(head) == 6 and head[5].strip() == target
                elif inside and line.startswith("Rss:"):
                    total += int(line.split()[1]) * 1024
    except OSError:
        return None
    return total


def reset_peak():
    """Start the peak (VmHWM) again from the current resident set
    (Linux >= 4.0: ``5`` written to ``/proc/self/clear_refs``); False
    where the system does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def weights_info(executor):
    """{"arena": bytes used in the weights arena, "by_dtype": {dtype:
    bytes of the graph's constants held there}, "mapped": bytes of
    constants that are still views of the model file}."""
    w = executor.weights
    by_dtype, mapped = {}, 0
    for t in executor.graph.tensors.values():
        if t.role != "constant" or t.data is None:
            continue
        d = np.asarray(t.data)
        if is_mapped(d):
            mapped += d.nbytes
        elif w.owns(d):
            by_dtype[d.dtype.name] = by_dtype.get(d.dtype.name, 0) + d.nbytes
    return {"arena": executor.weights_bytes, "by_dtype": by_dtype, "mapped": mapped}


@dataclass
class Footprint:
    """Readings of :func:`resident` at the phases of one run (bytes)."""
    readings: dict = field(default_factory=dict)

    placed: dict = field(default_factory=dict)

    def mark(self, phase, weights_placed=0):
        """Take the reading after ``phase`` ("base", "load", "bind", "run"),
        with the weight bytes placed in arenas by then."""
        self.readings[phase] = resident()
        self.placed[phase] = int(weights_placed)

    def split(self, weights, arena, inputs=0, mapped=0):
        """{"peak", "base", "inputs", "weights", "arena", "other", "load",
        "bind", "inference", "transient", "transient_phase"}: the peak and
        its parts.  ``inputs``: the bytes of the caller's input arrays, made
        during bind (the caller's data, not the runtime's).  ``load``,
        ``bind`` and ``inference`` are what each phase left resident beyond
        the weights, the inputs and the arena; ``transient`` is
        the peak above what stays resident at the end, reached during
        ``transient_phase``; the four add up to ``other`` (a phase that
        gave memory back counts negative).  ``mapped``: the bytes of a
        compiled model's file resident at the end (constants read where
        they lie, touched by the inferences), a part of their own."""
        r = self.readings
        base = r["base"][0] or 0
        peak = r["run"][1]
        after_load = r["load"][0] or base
        after_bind = r["bind"][0] or after_load
        after_run = r["run"][0] or after_bind
        at_load = self.placed.get("load", 0)
        load = after_load - base - at_load
        bind = after_bind - after_load - (weights - at_load) - inputs
        inference = after_run - after_bind - arena - mapped
        phase = next((p for p in ("base", "load", "bind", "run")
                      if p in r and r[p][1] >= peak), "run")
        return {"peak": peak, "base": base, "inputs": inputs, "weights": weights,
                "mapped": mapped,
                "arena": arena, "other": peak - base - inputs - weights - arena - mapped,
                "load": load, "bind": bind,
                "inference": inference, "transient": peak - after_run,
                "transient_phase": phase}

    def format(self, weights, arena, inputs=0, mapped=None):
        """The report lines for ``pyarena run``; ``mapped``: None, or
        (resident, mapped) bytes of a compiled model's file."""
        s = self.split(weights, arena, inputs, mapped[0] if mapped else 0)
        m = human_bytes
        ins = f" + inputs {m(s['inputs'])}" if inputs else ""
        mp = f" + mapped weights {m(mapped[0])} resident (of {m(mapped[1])} mapped)" \
            if mapped else ""
        return (f"memory     peak RSS {m(s['peak'])} = baseline {m(s['base'])}{ins} + weights "
                f"{m(s['weights'])}{mp} + arena {m(s['arena'])} + other {m(s['other'])}\n"
                f"           other: load {m(s['load'])} (parser, shape inference, graph), "
                f"bind {m(s['bind'])} (kernels), inference "
                f"{m(s['inference'])} (BLAS buffers, output copies), transient "
                f"{m(s['transient'])} (the peak above the end state, during "
                f"{s['transient_phase']})")
