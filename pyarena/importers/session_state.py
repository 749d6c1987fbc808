"""State a session keeps from one run to the next: a model's variables
(a TFLite model's resource variables, :mod:`.tflite_variables`: a
streaming keyword spotter's ring buffers of past frames).

The imported graph reads each variable from an input and gives what the
run assigned as an output (``Graph.variables``).  :class:`SessionVariables`
hides both from the session's callers: ``get_inputs()`` / ``get_outputs()``
do not list them, each run is fed every variable's current value, and
what it assigned becomes the next run's value -- as each invocation of
a TFLite interpreter sees the last one's.  So that every run sees the one
before it, runs of a session with variables take turns (from several
threads too).  ``reset()`` gives every variable its first value again
(the interpreter's ``reset_all_variables``).  A feed or an output named
for a variable is refused by name.
"""
import threading
from collections.abc import Mapping

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["SessionVariables"]


class SessionVariables:
    """``variables``: ``Graph.variables`` (name -> (input, output or None,
    first value)); ``outputs``: the model's outputs (NodeArgs)."""

    def __init__(self, variables, outputs):
        self.lock = self._lock = threading.Lock()
        self._first = {}        # input name -> first value
        self._assigned = []     # (output name, input name or None)
        self.hidden = set()
        for i, o, first in variables.values():
            if i is not None:
                self._first[i] = np.array(first)
                self.hidden.add(i)
            if o is not None:
                self._assigned.append((o, i))
                self.hidden.add(o)
        self.outputs = [a.name for a in outputs if a.name not in self.hidden]
        self._outs = [o for o, _ in self._assigned]
        # fixed arrays, written in place: a session step's native copies
        # point into them (:mod:`.session_step`)
        self.values = {k: v.copy() for k, v in self._first.items()}

    def reset(self):
        """Every variable back to its first value."""
        with self._lock:
            for k, v in self._first.items():
                np.copyto(self.values[k], v)

    def copy_pairs(self, arrays):
        """(destination, source) of the copies a run makes, given an
        executor's ``arrays``: each variable into its input's view (before),
        each value assigned into the variable's array (after)."""
        pre = [(arrays[i], v) for i, v in self.values.items() if arrays.get(i) is not None]
        post = [(self.values[i], arrays[o]) for o, i in self._assigned if i is not None]
        return pre, post

    def visible(self, args):
        """``args`` (NodeArgs) without the variables' inputs and outputs."""
        return [a for a in args if a.name not in self.hidden]

    def run(self, run, output_names, feeds, run_options, copy):
        """``run(output_names, feeds, run_options, copy=)`` (the session's)
        with the variables fed and what the run assigned kept."""
        names = list(output_names) if output_names else list(self.outputs)
        if not isinstance(feeds, Mapping):      # the session's own check refuses it
            return run(names, feeds, run_options, copy=copy)
        for n in [*names, *feeds]:
            if n in self.hidden:
                raise InvalidArgumentError(
                    f"{n!r} is one of the model's variables: the session keeps its value "
                    f"from run to run (reset_variables() gives it its first value again)")
        feeds = dict(feeds)
        with self._lock:
            feeds.update(self.values)
            got = run(names + self._outs, feeds, run_options, copy=False)
            for (_, i), v in zip(self._assigned, got[len(names):]):
                if i is not None:
                    np.copyto(self.values[i], v)
            # (views of this thread's block until its next run, as copy=False promises)
            return [copied(v) for v in got[:len(names)]] if copy else got[:len(names)]


def copied(v):
    """An output as the caller keeps it: arrays copied, a sequence's too
    (None, an absent optional, as it is)."""
    if v is None:
        return None
    if isinstance(v, list):
        return [np.array(a) for a in v]
    return np.array(v)
