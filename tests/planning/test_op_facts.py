"""pyarena/planning/op_facts.py: the operator facts the planner reads,
pushed down by the kernels when they register (planning never imports the
runtime) and loaded on first use."""
import subprocess
import sys

import pytest

from pyarena.errors import InvalidArgumentError
from pyarena.planning import op_facts


def test_row_kinds_come_from_the_kernels():
    assert op_facts.rows_kind("Conv") == "conv"
    assert op_facts.rows_kind("Relu") == "local"
    assert op_facts.rows_kind("Add") == "broadcast"
    assert op_facts.rows_kind("MatMul") is None
    assert {"Resize", "Upsample"} == op_facts.ops_with_rows("resize")


def test_a_new_declaration_shows_in_the_next_query():
    before = op_facts.ops_with_rows("local")
    assert "RowProbe" not in before
    try:
        op_facts.declare_rows("RowProbe", "local")
        assert "RowProbe" in op_facts.ops_with_rows("local")
        assert op_facts.rows_kind("RowProbe") == "local"
    finally:
        op_facts._rows.pop("RowProbe", None)
        op_facts._by_kinds.clear()
    assert op_facts.ops_with_rows("local") == before


def test_an_unknown_row_kind_is_refused():
    with pytest.raises(InvalidArgumentError, match="row kind"):
        op_facts.declare_rows("RowProbe", "rows")
    assert op_facts.rows_kind("RowProbe") is None


def test_the_facts_load_the_kernels_only_when_read():
    probe = ("import sys\nfrom pyarena.planning import op_facts\n"
             "print('pyarena.runtime.kernels' in sys.modules)\n"
             "print(op_facts.rows_kind('Relu'))\n"
             "print('pyarena.runtime.kernels' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "local", "True"]
