"""Shared test setup.

The tests mirror the package's layers (tests/memory, tests/planning ...);
tests/helpers holds the model builders and runners they share (importable
as ``helpers.*`` because pyproject.toml puts tests/ on pytest's
``pythonpath``); tests/data holds the vendored model files; tests/c the C
tests (run by ``make -C csrc check``).  Nothing here imports from
benchmarks/.
"""
import pathlib

import pytest

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"


@pytest.fixture(scope="session")
def data_dir():
    """tests/data: the vendored model files (see its README)."""
    return DATA


@pytest.fixture(scope="session")
def repo_root():
    """The checkout (for tests that build C code or run its scripts)."""
    return ROOT
