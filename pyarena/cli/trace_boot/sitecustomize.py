"""Started by ``pyarena trace``: records the program's NumPy data
allocations from interpreter start, then runs whatever sitecustomize the
program would have had.  Reads (and removes, so the program's own child
processes do not record into the same file) the PYARENA_TRACE_* variables.
"""
import os
import sys


def _start():
    path = os.environ.pop("PYARENA_TRACE_FILE", None)
    steps = os.environ.pop("PYARENA_TRACE_STEPS", "none")
    callsites = os.environ.pop("PYARENA_TRACE_CALLSITES", "") == "1"
    use_pool = os.environ.pop("PYARENA_TRACE_POOL", "") == "1"
    program = os.environ.pop("PYARENA_TRACE_PROGRAM", None)
    if not path:
        return
    import atexit

    from pyarena.memory import Pool, trace
    pool = Pool() if use_pool else None
    rec = trace.record(path, steps=steps, callsites=callsites, pool=pool, program=program)
    atexit.register(rec.stop)


def _chain():
    """Run the next sitecustomize on the path, if any (ours shadows it)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


try:
    _start()
except Exception as exc:   # never stop the program for the recorder's sake
    print(f"pyarena trace: not recording: {type(exc).__name__}: {exc}", file=sys.stderr)
_chain()
