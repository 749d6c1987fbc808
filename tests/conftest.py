"""Shared test setup.

The tests mirror the package's layers (tests/memory, tests/planning ...);
tests/helpers holds the model builders and runners they share (importable
as ``helpers.*`` because pyproject.toml puts tests/ on pytest's
``pythonpath``); tests/data holds the vendored model files; tests/c the C
tests (run by ``make -C csrc check``).  Nothing here imports from
benchmarks/.

Hangs: pytest-timeout (``timeout`` in pyproject.toml, or
``@pytest.mark.timeout(n)``) fails a test that runs too long, by a signal
handled in Python.  A test stuck in native code (a C loop that never
returns to the interpreter) cannot be interrupted that way, so
:func:`pytest_runtest_protocol` below arms a watchdog that needs no
interpreter: after twice the test's limit (and at least 30 s more)
faulthandler prints every thread's stack -- the hung test's file, function
and line on top of the main thread's -- and ends the process with status 1.

The hypothesis profile "mutation" (``--hypothesis-profile=mutation``, used
by tools/mutation/run.py) is derandomized and keeps no example database, so
a mutant is judged on the same examples every time and a failure found
under one mutant is not replayed against the next.
"""
import faulthandler
import os
import pathlib
import sys

import pytest
from hypothesis import settings

settings.register_profile("mutation", database=None, derandomize=True)

# The NHWC pass weighs its tiles against NumPy's BLAS (runtime/nhwc.py):
# where the BLAS kernel is narrower it converts more regions.  The tests
# expect the paths of one rule on every machine (subprocesses inherit it);
# test_nhwc.py sets the other one itself.
os.environ["PYARENA_NHWC_WIDE"] = "0"

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"


@pytest.fixture(scope="session")
def data_dir():
    """tests/data: the vendored model files (see its README)."""
    return DATA


@pytest.fixture
def single_steps(monkeypatch):
    """Kernels that work in pieces take pieces as small as their scratch
    budget says, one element or one row (MIN_STEP_ELEMENTS lowered to 1):
    for the tests of their piece-by-piece paths on small tensors."""
    from pyarena.runtime.kernels import registry
    monkeypatch.setattr(registry, "MIN_STEP_ELEMENTS", 1)


@pytest.fixture(scope="session")
def repo_root():
    """The checkout (for tests that build C code or run its scripts)."""
    return ROOT


_DEFAULT_TIMEOUT = 60.0
_WATCHDOG_FD = []


def _timeout_of(item):
    """The test's limit in seconds as pytest-timeout sees it: its marker,
    else --timeout, else the ini value (0: none)."""
    m = item.get_closest_marker("timeout")
    if m is not None:
        v = m.args[0] if m.args else m.kwargs.get("timeout")
        if v is not None:
            return float(v)
    try:
        v = item.config.getoption("timeout", None)
        if v is None:
            v = item.config.getini("timeout")
        return float(v or 0.0)
    except ValueError:          # pytest-timeout is not installed
        return _DEFAULT_TIMEOUT


def pytest_configure(config):
    # the real stderr (capturing is suspended while plugins configure):
    # the watchdog's traceback must not vanish into a capture file
    _WATCHDOG_FD.append(os.dup(sys.stderr.fileno()))


def pytest_unconfigure(config):
    while _WATCHDOG_FD:
        os.close(_WATCHDOG_FD.pop())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    limit = _timeout_of(item)
    if limit <= 0 or not _WATCHDOG_FD:
        return (yield)
    fd = _WATCHDOG_FD[0]
    faulthandler.dump_traceback_later(limit + max(limit, 30.0), exit=True, file=fd)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()
