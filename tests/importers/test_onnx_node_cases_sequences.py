"""The ONNX node cases of sequences and optionals (SequenceInsert,
SplitToSequence, SequenceMap, Identity of a sequence or an optional, an If
whose branches make one, Optional / OptionalHasElement /
OptionalGetElement), run through an InferenceSession with every input fed
at run time (sequences as lists), against the reference outputs and
onnxruntime; and their bad inputs, refused with pyarena's errors."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case
from pyarena.errors import InvalidArgumentError, UnsupportedOpError

MODULES = ("sequenceinsert", "splittosequence", "sequence_map", "identity", "if_",
           "optionalgetelement", "optionalhaselement")
CASES = cases(r"test_(sequence_insert\w*|split_to_sequence\w*|sequence_map_\w*(?<!_expanded)"
              r"|identity_opt|identity_sequence|if_seq|if_opt|optional_\w*)", MODULES)
#: onnxruntime 1.32 has no kernel for these (compared with the reference only)
NO_ORT = {n for n in CASES if n.startswith("test_optional_")}


def test_the_forms_are_covered():
    assert {"test_sequence_insert_at_front", "test_sequence_insert_at_back",
            "test_split_to_sequence_nokeepdims", "test_split_to_sequence_2",
            "test_sequence_map_identity_2_sequences", "test_sequence_map_extract_shapes",
            "test_identity_opt", "test_identity_sequence", "test_if_seq", "test_if_opt",
            "test_optional_get_element_optional_sequence",
            "test_optional_has_element_empty_optional_input"} <= set(CASES)
    assert not any(n.endswith("_expanded") for n in CASES)
    assert len(CASES) == 26, sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path, ort=name not in NO_ORT)


def _save(tmp_path, nodes, ins, outs, opset=18):
    path = tmp_path / "m.onnx"
    g = helper.make_graph(nodes, "g", ins, outs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def _seq(name, elem=TensorProto.FLOAT):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def _insert(tmp_path):
    return pyarena.InferenceSession(_save(
        tmp_path, [helper.make_node("SequenceInsert", ["s", "t", "p"], ["o"])],
        [_seq("s"), helper.make_tensor_value_info("t", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("p", TensorProto.INT64, [])], [_seq("o")]))


def test_insert_at_every_position_negative_ones_from_the_back(tmp_path):
    sess = _insert(tmp_path)
    s = [np.full(1, 0, np.float32), np.full(2, 1, np.float32), np.full(3, 2, np.float32)]
    t = np.full(4, 9, np.float32)
    for p in range(-3, 4):
        (o,) = sess.run(None, {"s": s, "t": t, "p": np.array(p, np.int64)})
        want = list(s)
        want.insert(p + 3 if p < 0 else p, t)
        assert [a.tolist() for a in o] == [a.tolist() for a in want], p
    assert len(s) == 3      # the sequence fed is not changed


def test_out_of_range_positions_are_argument_errors(tmp_path):
    sess = _insert(tmp_path)
    s = [np.zeros(1, np.float32)]
    for p in (2, -2):
        with pytest.raises(InvalidArgumentError, match=f"position {p} is out of range"):
            sess.run(None, {"s": s, "t": np.zeros(1, np.float32), "p": np.array(p, np.int64)})


def test_a_non_list_fed_for_a_sequence_is_an_argument_error(tmp_path):
    sess = _insert(tmp_path)
    feeds = {"t": np.zeros(1, np.float32), "p": np.array(0, np.int64)}
    with pytest.raises(InvalidArgumentError, match="feed 's'.*a list of arrays is expected"):
        sess.run(None, {"s": np.zeros((2, 3), np.float32), **feeds})
    with pytest.raises(InvalidArgumentError, match="feed 's'.*element 0 is a list"):
        sess.run(None, {"s": [[np.zeros(1)]], **feeds})


def test_an_inserted_tensor_is_a_copy_not_a_view_of_the_arena(tmp_path):
    """The tensor inserted is computed (a planned view, overwritten by the
    next run): the sequence returned by a run keeps its own values."""
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["r"]),
                            helper.make_node("SequenceConstruct", ["r", "r"], ["s"]),
                            helper.make_node("SequenceInsert", ["s", "r"], ["o"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])], [_seq("o")])
    sess = pyarena.InferenceSession(path)
    (a,) = sess.run(None, {"x": np.array([1, -1, 2], np.float32)}, copy=False)
    first = [v.copy() for v in a]
    sess.run(None, {"x": np.array([5, 5, 5], np.float32)}, copy=False)
    assert [v.tolist() for v in a] == [v.tolist() for v in first] == [[1, 0, 2]] * 3


def test_split_to_sequence_and_back(tmp_path):
    path = _save(tmp_path, [helper.make_node("SplitToSequence", ["x", "k"], ["s"], axis=1),
                            helper.make_node("SequenceLength", ["s"], ["n"]),
                            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1)],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7]),
                  helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                 [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                  helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    n, y = pyarena.InferenceSession(path).run(None, {"x": x, "k": np.array(3, np.int64)})
    assert int(n) == 3 and np.array_equal(y, x)


def test_sequence_map_sequences_of_unequal_length_are_refused(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["c"])], "body",
                             [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
                              helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])
    path = _save(tmp_path, [helper.make_node("SequenceMap", ["x", "y"], ["z"], body=body)],
                 [_seq("x"), _seq("y")], [_seq("z")])
    with pytest.raises(InvalidArgumentError, match=r"lengths \[2, 1\]"):
        pyarena.InferenceSession(path).run(None, {"x": [np.zeros(1, np.float32)] * 2,
                                                  "y": [np.zeros(1, np.float32)]})


def test_sequence_map_body_reading_the_outer_graph_is_refused_by_name(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["a", "w"], ["c"])], "body",
                             [helper.make_tensor_value_info("a", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])
    path = _save(tmp_path, [helper.make_node("Relu", ["v"], ["w"]),
                            helper.make_node("SequenceMap", ["x"], ["z"], body=body)],
                 [_seq("x"), helper.make_tensor_value_info("v", TensorProto.FLOAT, [1])],
                 [_seq("z")])
    with pytest.raises(UnsupportedOpError, match=r"body reads \['w'\]"):
        pyarena.InferenceSession(path).run(None, {"x": [np.zeros(1, np.float32)],
                                                  "v": np.ones(1, np.float32)})


def test_a_loop_over_a_sequence_with_outer_values_and_an_empty_trip(tmp_path):
    """A Loop carrying a sequence whose body reads a tensor of the outer
    graph; no iteration gives the initial sequence back."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Add", ["w", "w"], ["w2"]),
         helper.make_node("SequenceInsert", ["s", "w2"], ["s2"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []), _seq("s")],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), _seq("s2")])
    path = _save(tmp_path, [helper.make_node("Relu", ["v"], ["w"]),
                            helper.make_node("SequenceEmpty", [], ["e"]),
                            helper.make_node("Loop", ["m", "", "e"], ["out"], body=body)],
                 [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2]),
                  helper.make_tensor_value_info("m", TensorProto.INT64, [])], [_seq("out")])
    sess = pyarena.InferenceSession(path)
    v = np.array([1, -1], np.float32)
    (out,) = sess.run(None, {"v": v, "m": np.array(3, np.int64)})
    assert [a.tolist() for a in out] == [[2, 0]] * 3
    (out,) = sess.run(None, {"v": v, "m": np.array(0, np.int64)})
    assert out == []


def test_an_optional_input_may_be_left_unfed(tmp_path):
    opt = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    path = _save(tmp_path, [helper.make_node("OptionalHasElement", ["o"], ["h"])],
                 [helper.make_value_info("o", helper.make_optional_type_proto(opt))],
                 [helper.make_tensor_value_info("h", TensorProto.BOOL, [])])
    sess = pyarena.InferenceSession(path)
    assert not sess.run(None, {})[0]
    assert sess.run(None, {"o": np.zeros(2, np.float32)})[0]
    assert not sess.run(None, {"o": None})[0]


def test_numeric_graphs_hold_nothing_aside(tmp_path):
    path = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    sess = pyarena.InferenceSession(path)
    sess.run(None, {"x": np.ones(4, np.float32)})
    ex = sess._last
    assert ex.host_inputs == {} and not ex.graph.pool_ops()
    assert not any(t.host for t in ex.graph.tensors.values())


def test_erase_and_at_count_negative_positions_from_the_back(tmp_path):
    path = _save(tmp_path, [helper.make_node("SequenceErase", ["s", "p"], ["o"]),
                            helper.make_node("SequenceAt", ["s", "p"], ["a"])],
                 [_seq("s"), helper.make_tensor_value_info("p", TensorProto.INT64, [])],
                 [_seq("o"), helper.make_tensor_value_info("a", TensorProto.FLOAT, None)])
    sess = pyarena.InferenceSession(path)
    s = [np.full(k + 1, k, np.float32) for k in range(4)]
    for p in range(-4, 4):
        o, a = sess.run(None, {"s": s, "p": np.array(p, np.int64)})
        want = list(s)
        del want[p]
        assert [v.tolist() for v in o] == [v.tolist() for v in want], p
        assert a.tolist() == s[p].tolist(), p
    with pytest.raises(InvalidArgumentError, match="position 4 is out of range"):
        sess.run(None, {"s": s, "p": np.array(4, np.int64)})


def test_the_onnxruntime_facade_takes_and_returns_sequences_as_onnxruntime(tmp_path):
    import onnxruntime as ort

    import pyarena.onnxruntime as pa
    path = _save(tmp_path, [helper.make_node("SequenceInsert", ["s", "t"], ["o"])],
                 [_seq("s"), helper.make_tensor_value_info("t", TensorProto.FLOAT, [None])],
                 [_seq("o")])
    ours = pa.InferenceSession(path, providers=["CPUExecutionProvider"])
    theirs = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert [a.type for a in ours.get_inputs()] == [a.type for a in theirs.get_inputs()]
    assert [a.type for a in ours.get_outputs()] == [a.type for a in theirs.get_outputs()]
    feeds = {"s": [np.ones(2, np.float32), np.zeros(3, np.float32)],
             "t": np.full(1, 7, np.float32)}
    (got,), (want,) = ours.run(None, feeds), theirs.run(None, feeds)
    assert isinstance(got, list) and [a.tolist() for a in got] == [a.tolist() for a in want]
