"""Hypothesis-generated malformed JSON graphs and MiniMalloc CSVs through
the API and the CLI (issue 9, item 5): the API raises a pyarena error or
succeeds; the CLI exits 0-3 and, on exit 2, prints exactly one line.
``pytest -m slow`` tries many more examples."""
import contextlib
import io
import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyarena.cli import main
from pyarena.errors import PyArenaError
from pyarena.importers import load_model
from pyarena.planning import load_intervals_csv, plan, plan_intervals

FAST, SLOW = 60, 1500

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))
_json = st.recursive(_scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                                   st.dictionaries(st.text(max_size=6), c,
                                                                   max_size=4)),
                     max_leaves=12)
_dims = st.lists(st.one_of(st.integers(-3, 1 << 40), st.sampled_from(["N", "", "x"]),
                           _scalars), max_size=5)


@st.composite
def _graph_doc(draw):
    """Mostly well-formed graphs with a few fields made hostile."""
    n = draw(st.integers(1, 4))
    names = [f"t{i}" for i in range(n + 1)]
    tensors = [{"name": nm, "shape": [2, 3], "dtype": "float32",
                "role": "input" if i == 0 else "output" if i == n else "activation"}
               for i, nm in enumerate(names)]
    ops = [{"name": f"op{i}", "type": draw(st.sampled_from(["Relu", "Add", "Conv", "X"])),
            "inputs": [names[i]], "outputs": [names[i + 1]], "scratch_bytes": 0}
           for i in range(n)]
    doc = {"name": "g", "tensors": tensors, "ops": ops}
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["tensor", "op", "top"]))
        if where == "top":
            key = draw(st.sampled_from(["tensors", "ops", "scratch_budget", "name"]))
            doc[key] = draw(_json)
            continue
        items = tensors if where == "tensor" else ops
        item = items[draw(st.integers(0, len(items) - 1))]
        keys = (["name", "shape", "dtype", "role", "nbytes"] if where == "tensor" else
                ["name", "type", "inputs", "outputs", "scratch_bytes", "attrs"])
        key = draw(st.sampled_from(keys))
        if draw(st.booleans()):
            item.pop(key, None)
        elif key == "shape":
            item[key] = draw(_dims)
        elif key == "dtype":
            item[key] = draw(st.sampled_from(["object", "U", "S3", "V8", "complex64", "bool",
                                              "float33", "int8", 5]))
        else:
            item[key] = draw(_json)
    return doc


_cell = st.one_of(st.integers(-5, 2 ** 66).map(str), st.text(max_size=5),
                  st.sampled_from(["", " ", "1e3", "0x10", "\u00e9", '"', "\x00"]))


@st.composite
def _csv_text(draw):
    header = draw(st.one_of(st.just("id,lower,upper,size"),
                            st.just("id,lower,upper,size,offset"),
                            st.lists(_cell, max_size=5).map(",".join)))
    rows = draw(st.lists(st.lists(_cell, min_size=0, max_size=6), max_size=6))
    good = [f"b{i},{i},{i + 2},{64 * (i + 1)}" for i in range(draw(st.integers(0, 3)))]
    return "\n".join([header] + good + [",".join(r) for r in rows]) + "\n"


def _cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    assert rc in (0, 1, 2, 3), (rc, err.getvalue())
    if rc == 2:
        assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    return rc


def _check_graph(doc):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
    try:
        try:
            plan(load_model(f.name), time_limit=0.1)
        except PyArenaError:
            pass
        _cli(["plan", f.name, "--time-limit", "0.1"])
    finally:
        os.unlink(f.name)


def _check_csv(text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False,
                                     encoding="utf-8") as f:
        f.write(text)
    try:
        try:
            plan_intervals(load_intervals_csv(f.name), time_limit=0.1)
        except PyArenaError:
            pass
        _cli(["plan", f.name, "--time-limit", "0.1"])
    finally:
        os.unlink(f.name)


_opts = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(max_examples=FAST, **_opts)
@given(_graph_doc())
def test_malformed_json_graphs(doc):
    _check_graph(doc)


@settings(max_examples=FAST, **_opts)
@given(_csv_text())
def test_malformed_csvs(text):
    _check_csv(text)


@pytest.mark.slow
@settings(max_examples=SLOW, **_opts)
@given(_graph_doc())
def test_many_malformed_json_graphs(doc):
    _check_graph(doc)


@pytest.mark.slow
@settings(max_examples=SLOW, **_opts)
@given(_csv_text())
def test_many_malformed_csvs(text):
    _check_csv(text)
