"""Bad JSON graphs and MiniMalloc CSVs: one clear pyarena error naming
the file and the field, never a builtin exception from inside (issue 9,
items 5-7)."""
import json

import pytest

from pyarena.errors import GraphError, InvalidArgumentError, PyArenaError
from pyarena.graph import MAX_TENSOR_BYTES, Graph
from pyarena.importers import load_model
from pyarena.planning import load_intervals_csv


def _doc(tensors=None, ops=None, **extra):
    d = {"name": "g",
         "tensors": tensors if tensors is not None else [
             {"name": "x", "shape": [4], "role": "input"},
             {"name": "y", "shape": [4], "role": "output"}],
         "ops": ops if ops is not None else [
             {"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}]}
    d.update(extra)
    return d


def _write(tmp_path, d, name="g.json"):
    p = tmp_path / name
    p.write_text(json.dumps(d) if not isinstance(d, str) else d)
    return p


@pytest.mark.parametrize("doc, match", [
    (_doc(ops=[{"type": "Relu", "inputs": ["x"], "outputs": ["y"],
                "scratch_bytes": 2 ** 64}]), "scratch"),
    (_doc(ops=[{"type": "Relu", "inputs": ["x"], "outputs": ["y"],
                "scratch_bytes": MAX_TENSOR_BYTES + 1}]), "absurd"),
    (_doc(tensors=[{"name": "x", "shape": 5, "role": "input"}]), "shape must be a list"),
    (_doc(tensors=[{"name": "x", "shape": "45", "role": "input"}]), "shape must be a list"),
    (_doc(ops=[{"type": "Relu", "inputs": "xy", "outputs": ["y"]}]),
     "inputs must be a list of tensor names"),
    (_doc(ops=[{"type": "Relu", "inputs": ["x"], "outputs": [7]}]),
     "outputs must be a list of tensor names"),
    (_doc(ops=[{"type": 3, "inputs": ["x"], "outputs": ["y"]}]), "must be strings"),
    (_doc(ops=[{"type": "Relu", "inputs": ["x"], "outputs": ["y"], "attrs": [1]}]),
     "'attrs' must be an object"),
    (_doc(tensors=[{"name": "x", "shape": [4], "dtype": "object", "role": "input"}]),
     "Python objects"),
    (_doc(tensors=[{"name": "x", "shape": [4], "dtype": "U", "role": "input"}]), "no size"),
    (_doc(tensors="x"), "'tensors' and 'ops' lists"),
    (_doc(scratch_budget=-1), "scratch_budget"),
])
def test_bad_fields_are_graph_errors_naming_the_file(tmp_path, doc, match):
    p = _write(tmp_path, doc)
    for load in (Graph.load, load_model):
        with pytest.raises(GraphError, match=match) as e:
            load(str(p))
        assert str(p) in str(e.value)


def test_deeply_nested_json_is_a_graph_error(tmp_path):
    p = _write(tmp_path, "[" * 100000 + "]" * 100000)
    with pytest.raises(GraphError, match="nested too deeply"):
        Graph.load(p)
    with pytest.raises(GraphError, match="nested too deeply"):
        load_model(str(p))


def test_non_utf8_json_names_the_file(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(b'{"name": "caf\xe9", "tensors": [], "ops": []}')
    with pytest.raises(GraphError, match="latin.json: not a UTF-8 text file"):
        Graph.load(p)


def test_inputs_string_is_not_read_as_two_tensors():
    g = Graph()
    g.add_tensor("x", [1])
    g.add_tensor("y", [1])
    with pytest.raises(GraphError, match="inputs must be a list"):
        g.add_op("Add", "xy", ["y"])


def test_csv_not_utf8_names_the_file(tmp_path):
    p = tmp_path / "inst.csv"
    p.write_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,4\n")
    with pytest.raises(InvalidArgumentError, match="inst.csv: not a UTF-8 text file"):
        load_intervals_csv(p)


@pytest.mark.parametrize("body, match", [
    ("", "empty CSV"),
    ("id,lower,upper,size\n1,0,2," + str(2 ** 64) + "\n", "inst.csv"),
    ("id,lower,upper,size\n1,0,2\n", "inst.csv"),
    ('id,lower,upper,size\n"1,0,2,4\n', "inst.csv"),
    ("a,b\n1,2\n", "inst.csv"),
])
def test_bad_csv_is_an_argument_error(tmp_path, body, match):
    p = tmp_path / "inst.csv"
    p.write_text(body)
    with pytest.raises(PyArenaError, match=match):
        load_intervals_csv(p)
