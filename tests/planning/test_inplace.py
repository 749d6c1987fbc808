"""The in-place rule table: kinds, structural candidates, extension."""
import numpy as np
import pytest

from pyarena.graph import Graph
from pyarena.planning.inplace import (DEFAULT_RULES, KINDS, RuleTable, as_rule_table,
                             register_rule, reuse_candidates, rule_for,
                             transpose_is_view)


def one_op(op_type, in_shapes, out_shape, dtypes=None, **attrs):
    g = Graph("one")
    names = []
    for i, s in enumerate(in_shapes):
        dt = (dtypes or {}).get(i, "float32")
        g.add_tensor(f"i{i}", s, dt, role="input")
        names.append(f"i{i}")
    g.add_tensor("y", out_shape, (dtypes or {}).get("out", "float32"), role="output")
    op = g.add_op(op_type, names, ["y"], **attrs)
    return op, g


@pytest.mark.parametrize("op_type,kind", [
    ("Relu", "unary"), ("Clip", "unary"), ("LeakyRelu", "unary"), ("Sigmoid", "unary"),
    ("HardSigmoid", "unary"), ("HardSwish", "unary"), ("Tanh", "unary"),
    ("BatchNormalization", "unary"), ("Add", "binary"), ("Sub", "binary"),
    ("Mul", "binary"), ("Div", "binary"), ("Reshape", "alias"), ("Flatten", "alias"),
    ("Squeeze", "alias"), ("Unsqueeze", "alias"), ("Identity", "alias"),
    ("Transpose", "transpose"), ("Concat", "concat"), ("SomethingNew", "none")])
def test_default_kinds(op_type, kind):
    assert rule_for(op_type) == kind


def test_conv_writes_in_place_only_over_a_fused_residual_in_nhwc():
    """Conv's rule is a callable (runtime/kernels/conv.py): no reuse of
    its data input; its fused residual (input 3) only in NHWC."""
    rule = rule_for("Conv")
    assert callable(rule)
    op, g = one_op("Conv", [(1, 4, 4, 8), (8, 1, 1, 8), (8,)], (1, 4, 4, 8), layout="NHWC")
    assert reuse_candidates(op, g) == []
    op, g = one_op("Conv", [(1, 4, 4, 8), (8, 1, 1, 8), (8,), (1, 4, 4, 8)], (1, 4, 4, 8),
                   layout="NHWC")
    g.native = True
    assert reuse_candidates(op, g) == [(3, "inplace")]
    op.attrs["layout"] = "NCHW"
    assert reuse_candidates(op, g) == []


def test_unary_needs_same_shape_and_dtype():
    op, g = one_op("Relu", [(2, 3)], (2, 3))
    assert reuse_candidates(op, g) == [(0, "inplace")]
    op, g = one_op("Relu", [(2, 3)], (2, 3), dtypes={"out": "float16"})
    assert reuse_candidates(op, g) == []
    op, g = one_op("Clip", [(2, 3), (), ()], (2, 3))
    assert reuse_candidates(op, g) == [(0, "inplace")]    # only the data input


def test_binary_only_same_shape_inputs():
    op, g = one_op("Add", [(1, 4, 2, 2), (1, 4, 1, 1)], (1, 4, 2, 2))
    assert reuse_candidates(op, g) == [(0, "inplace")]
    op, g = one_op("Mul", [(1, 4, 1, 1), (1, 4, 2, 2)], (1, 4, 2, 2))
    assert reuse_candidates(op, g) == [(1, "inplace")]
    op, g = one_op("Add", [(3,), (3,)], (3,))
    assert reuse_candidates(op, g) == [(0, "inplace"), (1, "inplace")]
    op, g = one_op("Add", [(4, 1), (1, 4)], (4, 4))
    assert reuse_candidates(op, g) == []
    op, g = one_op("Add", [(3,), (3,)], (3,), dtypes={0: "int32", 1: "float32"})
    assert reuse_candidates(op, g) == [(1, "inplace")]


def test_variadic_op_never_overwrites_an_input_it_reads_twice():
    # Sum(a, b, a): y = a + b then y += a; with y on a the second a is y
    op, g = one_op("Sum", [(2, 3), (2, 3), (2, 3)], (2, 3))
    op.inputs[2] = op.inputs[0]
    assert reuse_candidates(op, g) == [(1, "inplace")]
    op, g = one_op("Add", [(2, 3), (2, 3)], (2, 3))
    op.inputs[1] = op.inputs[0]         # one ufunc call: a + a into a is fine
    assert reuse_candidates(op, g) == [(0, "inplace"), (1, "inplace")]


def test_multi_output_ops_never_overwrite():
    g = Graph("bn-train")
    g.add_tensor("x", (2, 3), role="input")
    g.add_tensor("y", (2, 3), role="output")
    g.add_tensor("m", (2, 3), role="output")
    op = g.add_op("BatchNormalization", ["x"], ["y", "m"])
    assert reuse_candidates(op, g) == []


def test_alias_and_transpose():
    op, g = one_op("Reshape", [(2, 6), (2,)], (3, 4))
    assert reuse_candidates(op, g) == [(0, "alias")]
    op, g = one_op("Transpose", [(1, 5, 1, 7)], (5, 1, 1, 7), perm=[1, 0, 2, 3])
    assert reuse_candidates(op, g) == [(0, "alias")]
    op, g = one_op("Transpose", [(1, 5, 1, 7)], (1, 7, 1, 5), perm=[0, 3, 2, 1])
    assert reuse_candidates(op, g) == []
    op, g = one_op("Transpose", [(2, 3)], (3, 2))          # default perm: reversed
    assert reuse_candidates(op, g) == []
    op, g = one_op("Transpose", [(1, 3)], (3, 1))
    assert reuse_candidates(op, g) == [(0, "alias")]


def test_transpose_is_view_cases():
    assert transpose_is_view((1, 4, 1, 3), [2, 1, 0, 3])
    assert not transpose_is_view((2, 4), [1, 0])
    assert transpose_is_view((2, 1, 4), [0, 2, 1])
    assert not transpose_is_view((2, 3), [0, 0])     # not a permutation
    assert not transpose_is_view(None, [0])


def test_transpose_perm_from_a_constant_input():
    g = Graph("tfl")
    g.add_tensor("x", (1, 5, 1), role="input")
    g.add_tensor("p", (3,), "int32", role="constant", data=np.array([1, 0, 2]))
    g.add_tensor("y", (5, 1, 1), role="output")
    op = g.add_op("Transpose", ["x", "p"], ["y"])    # TFLite: perm is an input
    assert reuse_candidates(op, g) == [(0, "alias")]
    g.tensors["p"].data = None                  # unknown permutation: no view
    assert reuse_candidates(op, g) == []


def test_tables_are_extensible_and_independent():
    t = RuleTable({"Foo": "unary"})
    assert t.kind("Foo") == "unary" and t.kind("Relu") == "none"
    merged = as_rule_table({"Relu": "none"})
    assert merged.kind("Relu") == "none" and DEFAULT_RULES.kind("Relu") == "unary"
    assert as_rule_table(None) is DEFAULT_RULES and as_rule_table(t) is t
    copy = DEFAULT_RULES.copy()
    register_rule("Gizmo", "binary", table=copy)
    assert copy.kind("Gizmo") == "binary" and "Gizmo" not in DEFAULT_RULES
    with pytest.raises(ValueError, match="one of"):
        t.register("Bar", "maybe")
    with pytest.raises(ValueError, match="non-empty"):
        t.register("", "unary")
    with pytest.raises(TypeError):
        as_rule_table(["Relu"])
    assert set(KINDS) >= {k for _, k in DEFAULT_RULES.items() if not callable(k)}
    assert {t for t, k in DEFAULT_RULES.items() if callable(k)} == {"Conv"}


def test_register_rule_on_the_default_table():
    assert rule_for("PlanPyTestOp") == "none"
    try:
        register_rule("PlanPyTestOp", "unary")
        op, g = one_op("PlanPyTestOp", [(4,)], (4,))
        assert reuse_candidates(op, g) == [(0, "inplace")]
    finally:
        DEFAULT_RULES.unregister("PlanPyTestOp")
    assert rule_for("PlanPyTestOp") == "none"
