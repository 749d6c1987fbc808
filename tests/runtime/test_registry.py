"""The kernel registry: each operator declared once, on its kernel, and the
planner's in-place table filled from it."""
import subprocess
import sys

import numpy as np
import pytest

from pyarena.graph import Graph
from pyarena.planning import inplace
from pyarena.runtime import kernels
from pyarena.runtime.kernels import KERNELS, TFLITE_OPS, Kernel, register


def test_every_declared_kind_has_a_kernel_and_matches_it():
    declared = dict(inplace.DECLARED_RULES.items())
    assert set(declared) == set(KERNELS)
    for op_type, cls in KERNELS.items():
        assert declared[op_type] == cls.inplace, op_type
        assert op_type in cls.op_types


def test_every_tflite_builtin_maps_to_an_op_its_kernel_runs():
    assert TFLITE_OPS, "no TFLite builtin declared"
    for builtin, (op_type, attrs) in TFLITE_OPS.items():
        assert builtin.isupper() or builtin.startswith("CUSTOM:"), builtin
        assert op_type in KERNELS, builtin
        assert isinstance(attrs, dict)
    # the upper-case TFLite names are not op types: importers canonicalise them
    assert not set(TFLITE_OPS) & set(KERNELS)
    assert TFLITE_OPS["RELU6"] == ("Clip", {"min": 0.0, "max": 6.0})
    assert TFLITE_OPS["DEPTHWISE_CONV_2D"] == ("Conv", {"weight_layout": "1HWC"})


def test_register_refuses_a_second_declaration_and_foreign_tflite_names():
    class Twice(Kernel):
        op_types = ("Relu",)
    with pytest.raises(TypeError, match="declared by both"):
        register(Twice)

    class Wrong(Kernel):
        op_types = ("MyOpForTheTest",)
        tflite = {"MY_OP": ("Relu", {})}
    with pytest.raises(TypeError, match="does not run"):
        register(Wrong)

    class Nothing(Kernel):
        pass
    with pytest.raises(TypeError, match="no op_types"):
        register(Nothing)


def test_user_rules_override_declared_kinds_and_come_back():
    table = inplace.DEFAULT_RULES
    assert table.kind("Relu") == "unary"
    try:
        inplace.register_rule("Relu", "none")
        assert table.kind("Relu") == "none"
        assert inplace.DECLARED_RULES.kind("Relu") == "unary"   # the kernel's fact stays
    finally:
        table._rules.pop("Relu", None)
    assert table.kind("Relu") == "unary"
    t = table.copy()
    t.unregister("Add")
    assert t.kind("Add") == "none" and table.kind("Add") == "binary"
    layered = inplace.RuleTable(base=table)
    layered.unregister("Add")
    assert layered.kind("Add") == "none" and "Add" in layered


def test_planning_alone_sees_the_declared_kinds():
    """A program that only imports the planning layer still plans in place:
    the package root loads the kernel registry on first use of the table."""
    code = ("from pyarena.planning.inplace import rule_for\n"
            "import sys\n"
            "assert 'pyarena.runtime.kernels' not in sys.modules\n"
            "print(rule_for('Relu'), rule_for('Reshape'), rule_for('Conv').__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["unary", "alias", "residual_in_place"]


def test_scratch_budget_is_a_parameter_recorded_on_the_graph():
    g = Graph("c")
    g.add_tensor("x", (1, 8, 9, 9), role="input")
    g.add_tensor("w", (8, 1, 3, 3), role="constant",
                 data=np.ones((8, 1, 3, 3), np.float32))
    g.add_tensor("y", (1, 8, 9, 9), role="output")
    g.add_op("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=8)   # depthwise
    whole = kernels.set_scratch(g, native=False).ops[0].scratch_bytes   # tap loop
    assert g.scratch_budget is None and not g.native
    banded = kernels.set_scratch(g, scratch_budget=1).ops[0].scratch_bytes
    assert g.scratch_budget == 1 and banded < whole
    assert Graph.from_dict(g.to_dict()).native is False
    assert kernels.set_scratch(g, native=True).ops[0].scratch_bytes == 0   # native
    assert Graph.from_dict(g.to_dict()).native is True
    kernels.set_scratch(g, scratch_budget=1)
    # the graph's JSON keeps the budget, so an executor builds the same kernels
    assert Graph.from_dict(g.to_dict()).scratch_budget == 1
    with pytest.raises(ValueError, match="scratch_budget"):
        kernels.set_scratch(g, scratch_budget=0)


def _depthwise_graph():
    g = Graph("dw")
    g.add_tensor("x", (1, 8, 10, 10), role="input")
    g.add_tensor("w", (8, 1, 3, 3), role="constant",
                 data=np.random.default_rng(0).standard_normal((8, 1, 3, 3)).astype(np.float32))
    g.add_tensor("y", (1, 8, 10, 10), role="output")
    g.add_op("Conv", ["x", "w"], ["y"], name="dw", group=8, pads=[1, 1, 1, 1])
    return g


def test_a_kernel_built_for_its_scratch_size_packs_no_weights():
    from pyarena.runtime.kernels.registry import graph_kernel, scratch_bytes_for, sizing_only
    g = _depthwise_graph()
    op = g.ops[0]
    full = graph_kernel(g, op)
    sized = graph_kernel(g, op, keep=sizing_only)
    assert full.mode == sized.mode == "native-dw"      # the native path, packed weights
    assert not full.sizing and sized.sizing
    assert full.packed is not None and full.packed.size > 0
    assert sized.packed is None
    assert sized.scratch_bytes == full.scratch_bytes == scratch_bytes_for(g, op)
    # the kernel that runs is still the packed one
    x = np.random.default_rng(1).standard_normal((1, 8, 10, 10)).astype(np.float32)
    y = np.empty((1, 8, 10, 10), np.float32)
    full.run([x, g.tensors["w"].data], [y], [])
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    w = g.tensors["w"].data[:, 0]
    ref = sum(xp[:, :, i:i + 10, j:j + 10] * w[None, :, i, j, None, None]
              for i in range(3) for j in range(3))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_a_bound_kernel_carves_a_new_scratch_array_again():
    """The carved scratch parts are kept between runs only while the
    scratch is the same array: a kernel handed another one works in that
    one (and bind() starts over)."""
    from pyarena.runtime.kernels.registry import graph_kernel
    g = _depthwise_graph()
    k = graph_kernel(kernels.set_scratch(g, native=False, scratch_budget=1), g.ops[0])
    assert k.scratch and k.scratch_bytes > 0
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = g.tensors["w"].data
    want, got = np.empty_like(x), np.empty_like(x)
    k([x, w], [want], np.zeros(k.scratch_bytes, np.uint8))    # unbound: carved per call
    k.bind([x, w], [got])
    for _ in range(2):
        for fill in (0, 255):
            sc = np.full(k.scratch_bytes, fill, np.uint8)
            k([x, w], [got], sc)
            assert np.array_equal(got, want)
            assert (sc != fill).any()       # this run's scratch is the one written
    assert k._carved is not None
    k.bind([x, w], [got])
    assert k._carved is None
