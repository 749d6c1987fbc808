"""Shared benchmark plumbing: collect medians, print ratio tables.

Each benchmark records its median under (table, row, column) with
``record(benchmark, table, row, column)``; at the end of the session every
table is printed with each column as a ratio against the table's baseline
column, all measured in the same run.
"""
import collections

import pytest

_RESULTS = collections.defaultdict(dict)   # table -> {(row, col): seconds}
_BASELINE = {}                               # table -> baseline column
_SCALE = {}                                  # table -> operations per call


def record(benchmark, table, row, column, baseline, per_call=1):
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable: nothing measured
        return
    _RESULTS[table][(row, column)] = stats.stats.median / per_call
    _BASELINE[table] = baseline


def pytest_terminal_summary(terminalreporter):
    for table, res in _RESULTS.items():
        base = _BASELINE[table]
        rows = list(dict.fromkeys(r for r, _ in res))
        cols = list(dict.fromkeys(c for _, c in res))
        tr = terminalreporter
        tr.write_sep("=", f"{table}: median per operation, ratio vs {base} (same run)")
        tr.write_line(f"{'case':<22}" + "".join(f"{c:>26}" for c in cols))
        for r in rows:
            line = f"{r:<22}"
            b = res.get((r, base))
            for c in cols:
                v = res.get((r, c))
                if v is None:
                    line += f"{'-':>26}"
                else:
                    ratio = f"{v / b:.2f}x" if b else "?"
                    line += f"{v * 1e9:>14.0f} ns {ratio:>8}"
            tr.write_line(line)


@pytest.fixture
def recorder():
    return record
