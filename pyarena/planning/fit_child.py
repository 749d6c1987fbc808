"""The budget search in a child process, its choice made again here.

A memory budget is set because memory is short, yet the search behind it
(:mod:`.fit`: dozens of candidate plans, patched ops sized and dropped)
leaves the process bigger than it found it: the Python objects it made
and freed leave partly used allocator arenas resident (CPython's object
allocator gives an arena back only when all of it is free): 0.4 MiB on
face detection, two thirds of the arena its budget saved.  So where
``os.fork`` exists and the process runs one thread, the search runs in a
forked child, which sends back only its *choice* -- the order, the
scratch budget, the stages patched and their bands -- and the record of
what it tried; this process then plans that one candidate as the search
planned it, and nothing else.  The child's pages are its own (what it
shares with this process is copied on write), and it is gone before the
model is bound, while this process is still far below the peak its
inference reaches.

The choice made again must fit as the child's did (the planner is
deterministic but for its time limits); when it does not, or the child
fails or cannot be forked, the search runs here as before.
``PYARENA_SEARCH_IN_CHILD=0`` keeps it here always.
"""
import os
import pickle
import threading

from .patch import Stage

__all__ = ["search_in_child", "choice_of", "replay", "enabled"]

#: whether the search may run in a forked child (the environment variable
#: ``PYARENA_SEARCH_IN_CHILD=0`` sets it off)
ENABLED = os.environ.get("PYARENA_SEARCH_IN_CHILD", "1") != "0"


def enabled():
    """The search may fork: allowed, ``os.fork`` exists, and this process
    runs no other Python thread (a fork copies the calling thread only: a
    lock another one held would stay taken in the child)."""
    return ENABLED and hasattr(os, "fork") and threading.active_count() == 1


def _stage_key(st):
    return (st.first, st.last, st.x, st.y, st.h_axis, st.hoisted, st.x_axis, st.extra)


def choice_of(search, found):
    """What this process needs to plan the candidate ``found`` (a
    ``(plan, schedule, scratch budget)`` of ``search``) again: a
    picklable dict."""
    _, sched, scratch = found
    chosen = None
    if search.patches:
        chosen = [(_stage_key(st), n, reuse) for st, n, reuse in search.chosen]
    return {"scratch": scratch, "schedule": sched, "chosen": chosen, "tried": search.tried}


def replay(search, knob, choice):
    """Plan the child's choice here: ``(plan, schedule, scratch budget)``
    as the search found it, ``search.tried`` the child's record; None
    (the graph restored) when that plan does not fit."""
    graph, saved = search.graph, search.saved
    scratch, sched = choice["scratch"], choice["schedule"]
    saved.restore()
    if choice["chosen"] is not None:
        chosen = [(Stage(graph, *key[:5], hoisted=key[5], x_axis=key[6], extra=key[7]), n, r)
                  for key, n, r in choice["chosen"]]
        p, search.patches = search.set_attempt(knob, scratch, chosen)
        search.chosen = chosen
    else:
        if scratch is not None:
            knob(graph, scratch)
        graph.ops = list(saved.ops) if sched is None else [saved.ops[i] for i in sched.order]
        p = search.attempt()
    search.tried = choice["tried"]
    if not search.fits(p):
        saved.restore()
        search.patches, search.chosen = [], []
        return None
    return p, sched, scratch


def _child(write_fd, run):
    """In the forked child: run the search, send its result, exit."""
    code = 1
    try:
        view = memoryview(pickle.dumps(run(), protocol=pickle.HIGHEST_PROTOCOL))
        while view:
            view = view[os.write(write_fd, view):]
        code = 0
    except BaseException:       # noqa: BLE001 -- any failure: the parent searches itself
        pass
    finally:
        os._exit(code)


def search_in_child(run):
    """``run()`` (returning something picklable) in a forked child: its
    result, or None when no child could run it."""
    if not enabled():
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:                 # pragma: no cover -- the child never returns
        os.close(r)
        _child(w, run)
    os.close(w)
    chunks = []
    try:
        while True:
            b = os.read(r, 1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        return None
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:           # noqa: BLE001 -- a truncated answer: search here
        return None
