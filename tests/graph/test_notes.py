"""Op.notes: what the passes record about an operator, apart from its own
attributes -- typed, copied with the op, kept by a JSON graph where it is
data, and never smuggled in through ``attrs``."""
import json

import pytest

from pyarena.errors import GraphError
from pyarena.graph import Graph, OpNotes


def _graph():
    g = Graph("n")
    g.add_tensor("x", (1, 4, 8, 8), role="input")
    g.add_tensor("y", (1, 4, 8, 8), role="output")
    op = g.add_op("Relu", ["x"], ["y"], name="r")
    return g, op


def test_notes_start_empty_and_are_typed_fields():
    _, op = _graph()
    assert op.notes == OpNotes() and op.attrs == {}
    op.notes.scratch_budget = 4096
    op.notes.kernel_path = "numpy"
    assert op.notes.to_json() == {"scratch_budget": 4096, "kernel_path": "numpy"}


def test_a_private_attribute_is_refused_with_the_way_to_say_it():
    g, _ = _graph()
    with pytest.raises(GraphError, match=r"'_hidden'.*op\.notes"):
        g.add_op("Relu", ["y"], ["z"], name="bad", _hidden=1)


def test_a_json_graph_keeps_the_notes_that_are_data():
    g, op = _graph()
    op.notes.opset = 11
    op.notes.weights_oihw = True
    op.notes.weight_scales = (b"\x00" * 8,)        # bytes of the model: not kept
    op.notes.infer = lambda arrays, values: []     # code: not kept
    d = json.loads(json.dumps(g.to_dict()))
    assert d["ops"][0]["notes"] == {"opset": 11, "weights_oihw": True}
    assert "_opset" not in d["ops"][0]["attrs"]
    back = Graph.from_dict(d).ops[0].notes
    assert (back.opset, back.weights_oihw, back.weight_scales, back.infer) == \
        (11, True, (), None)


def test_a_graph_saved_with_notes_in_its_attributes_still_loads():
    """Graphs saved before notes existed kept them as ``_`` attributes."""
    g, _ = _graph()
    d = g.to_dict()
    d["ops"][0]["attrs"] = {"_opset": 9, "_scratch_budget": 512, "alpha": 1.0}
    op = Graph.from_dict(d).ops[0]
    assert op.attrs == {"alpha": 1.0}
    assert (op.notes.opset, op.notes.scratch_budget) == (9, 512)


@pytest.mark.parametrize("notes", [{"band": [1, [0.5]]}, {"no_such": 1}, [1, 2]])
def test_notes_that_are_not_data_are_refused_in_a_json_graph(notes):
    g, _ = _graph()
    d = g.to_dict()
    d["ops"][0]["notes"] = notes
    with pytest.raises(GraphError, match=r"ops\[0\]: notes"):
        Graph.from_dict(d)


def test_a_resized_copy_has_notes_of_its_own():
    """The slack planner narrows one signature's scratch: the graph it was
    retargeted from keeps its own."""
    g, op = _graph()
    op.notes.scratch_budget = 1000
    op.notes.opset = 13
    g2 = g.retargeted({"x": (2, 4, 8, 8), "y": (2, 4, 8, 8)})
    assert g2.ops[0].notes == op.notes and g2.ops[0].notes is not op.notes
    g2.ops[0].notes.scratch_budget = 10
    assert op.notes.scratch_budget == 1000
