"""Test helper: the child process of the hostile-file fuzz tests (not a
test module).  ``python -m helpers.fuzz_worker BUDGET AS_LIMIT`` limits its
address space to AS_LIMIT bytes, loads what
the cases need and prints ``ready HWM``, then reads model paths from stdin,
one per line, and for each prints ``start N`` and then
``done N OUTCOME HWM DETAIL`` where OUTCOME is ``ok`` (imported, planned and
run), ``clean`` (a pyarena error) or ``foreign`` (any other exception:
a bug) and HWM the process's peak resident set so far (KiB, VmHWM);
BUDGET is the max_memory it passes to pyarena.  The parent watches
for signals and hangs (a ``start`` with no ``done`` in time)."""
import sys


def _selftest(path):
    """Files named *.selftest-* make the worker misbehave on purpose, so the
    harness's own detection of signals, hangs and foreign errors is tested."""
    import os
    import time
    kind = path.rsplit(".selftest-", 1)[1]
    if kind == "signal":
        os.abort()
    if kind == "hang":
        time.sleep(3600)
    if kind == "grow":      # 96 MiB touched, then the case goes on
        import numpy as np
        _selftest.held = np.ones(96 << 20, np.uint8)
        return
    raise KeyError(kind)


def _hwm_kib():
    """The process's peak resident set so far, in KiB (0 where /proc has none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _case(path, budget):
    if ".selftest-" in path:
        _selftest(path)
    import numpy as np
    import pyarena
    from pyarena.runtime import Executor, random_feeds
    if path.endswith(".pa"):    # a compiled model: its session, its stored layouts
        s = pyarena.InferenceSession(path)
        feeds = {a.name: np.ones([d if isinstance(d, int) else 1 for d in a.shape],
                                 np.float32) for a in s.get_inputs()}
        out = s.run(None, feeds)
        assert all(isinstance(v, np.ndarray) for v in out)
        return
    g = pyarena.load_model(path, max_memory=budget)
    p = pyarena.plan(g, time_limit=0.2, max_memory=budget)
    ex = Executor(g, p, max_memory=budget)
    out = ex.run(random_feeds(g))
    assert all(isinstance(v, np.ndarray) for v in out.values())


def main():
    budget, as_limit = int(sys.argv[1]), int(sys.argv[2])
    import resource
    # limits set here, not in a preexec_fn: forking a threaded test process
    # and running Python in the child before exec can deadlock
    resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))     # a crash leaves no core file
    # everything a case may load, loaded before the first case is timed
    import numpy  # noqa: F401
    import pyarena.importers  # noqa: F401
    import pyarena.runtime  # noqa: F401
    from pyarena.errors import PyArenaError
    for extra in ("onnx", "tflite", "flatbuffers"):
        try:
            __import__(extra)
        except ImportError:
            pass
    print(f"ready {_hwm_kib()}", flush=True)
    for n, line in enumerate(sys.stdin):
        path = line.strip()
        print(f"start {n}", flush=True)
        try:
            _case(path, budget)
            outcome, detail = "ok", ""
        except PyArenaError as exc:
            # "(net)": caught by load_model's last resort, not a specific check
            net = "cannot read the model (" in str(exc)
            outcome, detail = "clean", type(exc).__name__ + (" (net) " + str(exc)[-160:]
                                                              if net else "")
        except BaseException as exc:        # noqa: BLE001 -- a bug, reported
            outcome, detail = "foreign", f"{type(exc).__name__}: {exc}"[:300]
        print(f"done {n} {outcome} {_hwm_kib()} {detail}".replace("\n", " "), flush=True)


if __name__ == "__main__":
    main()
