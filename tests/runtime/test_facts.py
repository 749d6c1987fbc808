"""The operators' facts (pyarena/runtime/kernels/facts.py): declared once on
each kernel class, checked when the class registers, and the tables every
pass reads built from them -- and each op's two ways of computing a value
(its kernel at run time, its evaluator when the importer folds or
tabulates it) agree."""
import numpy as np
import pytest

from pyarena.graph import Graph
from pyarena.planning import op_facts
from pyarena.runtime import Executor
from pyarena.runtime.kernels import (KERNELS, OPS, TFLITE_INT8, TFLITE_OPS, Kernel, facts,
                                     op_fact, op_table, ops_where, register, set_scratch)
from pyarena.runtime.kernels.shape_rules import Node


# -- the declarations ---------------------------------------------------------------
@pytest.mark.parametrize("name, value, match", [
    ("family", "elementwise", "family='elementwise'"),
    ("nhwc", "nchw", "nhwc='nchw'"),
    ("rows", "band", "rows='band'"),
    ("fold", "sometimes", "fold='sometimes'"),
    ("qdq", {"NotRunHere": "lookup"}, "names op type 'NotRunHere'"),
    ("tflite_int8", {"ADD": "no_such_wiring"}, "wiring 'no_such_wiring'"),
    ("tflite", {"MY_OP": ("FactsProbe", {}, "no_such_lowering")}, "lowering"),
])
def test_a_fact_the_passes_do_not_know_is_refused_at_registration(name, value, match):
    cls = type("Probe", (Kernel,), {"op_types": ("FactsProbe",), name: value})
    with pytest.raises(TypeError, match=match):
        register(cls)
    assert "FactsProbe" not in OPS and "FactsProbe" not in KERNELS


def test_nhwc_and_rows_follow_the_family_unless_declared():
    for op_type, cls in KERNELS.items():
        fam = facts.fact(cls, "family", op_type)
        for name in ("nhwc", "rows"):
            own = getattr(cls, name)
            own = own.get(op_type) if isinstance(own, dict) else own
            want = facts.FAMILY_DEFAULTS[name].get(fam) if own is None else \
                (None if own is False else own)
            assert op_fact(op_type, name) == want, (op_type, name)
    # every element-wise op of one tensor runs NHWC as it is and bands row for row
    unary = ops_where("family", "unary")
    assert {"Relu", "Erf", "Sqrt", "Cast"} <= unary
    assert unary - {"PRelu"} <= ops_where("nhwc", "elementwise")
    assert unary <= ops_where("rows", "local")
    assert ops_where("family", "binary") <= ops_where("rows", "broadcast")


def test_the_planner_reads_the_row_kinds_the_kernels_declared():
    for op_type, kind in op_table("rows").items():
        assert op_facts.rows_kind(op_type) == kind, op_type
    assert op_facts.ops_with_rows("pool") == {"MaxPool", "AveragePool"}
    assert op_facts.rows_kind("MatMul") is None
    size, default = op_facts.scratch_rule()
    from pyarena.runtime.kernels import SCRATCH_BUDGET, set_scratch
    assert (size, default) == (set_scratch, SCRATCH_BUDGET)


def test_the_tables_refer_to_operators_that_exist():
    for q, t in op_table("qdq_form").items():
        assert q in KERNELS and t in KERNELS, (q, t)
    for op_type in ops_where("qdq", "lookup"):
        assert op_fact(op_type, "evaluate") is not None, op_type
    for builtin, rec in TFLITE_OPS.items():
        assert rec.op_type in KERNELS[rec.op_type].op_types, builtin
        assert rec.options is None or rec.lowering is None, builtin
    for builtin, (op_type, wiring) in TFLITE_INT8.items():
        assert op_type in KERNELS and wiring in facts.TFLITE_INT8_WIRINGS, builtin
    only_fold = set(OPS) - set(KERNELS)
    assert {"Constant", "RandomNormal"} <= only_fold
    assert all(op_fact(t, "fold") in ("free", "never", "capped", "expanding")
               for t in only_fold)
    for op_type, rule in op_table("shape_rule").items():
        assert callable(rule), op_type


# -- evaluator and kernel: the same values ------------------------------------------
def _special(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30, 0.5]
    flat[:len(special)] = special[:flat.size]
    return x


def _case(op_type, rng):
    """(inputs, attrs) of one op of ``op_type`` for the comparison, or None."""
    fam = op_fact(op_type, "family")
    shape = (2, 3, 4)
    if op_type.startswith("Bitwise"):
        ints = [rng.integers(-2**31, 2**31, shape).astype(np.int32),
                rng.integers(-2**31, 2**31, (3, 4)).astype(np.int32)]
        return ints[:1 if op_type == "BitwiseNot" else 2], {}
    if op_type == "BitShift":      # amounts in range, out of it and negative
        return [rng.integers(-128, 128, shape).astype(np.int8),
                rng.integers(-20, 20, (3, 4)).astype(np.int8)], {"direction": "RIGHT"}
    if op_type == "BitCast":
        return [_special(shape, rng)], {"to": 6}            # float32 bits as int32
    if fam == "logic":
        if op_type in ("And", "Or", "Xor"):
            return [rng.integers(0, 2, shape).astype(bool),
                    rng.integers(0, 2, (3, 4)).astype(bool)], {}
        if op_type == "Not":
            return [rng.integers(0, 2, shape).astype(bool)], {}
        if op_type == "Where":
            return [rng.integers(0, 2, shape).astype(bool), _special(shape, rng),
                    _special((4,), rng)], {}
        return [_special(shape, rng), _special((3, 4), rng)], {}
    if fam == "binary":
        if op_type == "Pow":
            return [np.abs(_special(shape, rng)), np.float32(rng.standard_normal((4,)))], {}
        return [_special(shape, rng), _special((3, 4), rng)], {}
    if op_type == "Clip":
        return [_special(shape, rng), np.float32(-1.5), np.float32(2.0)], {}
    if op_type == "Cast":
        return [_special(shape, rng)], {"to": 6}            # float32 -> int32
    if op_type == "CastLike":
        return [_special(shape, rng), np.zeros(2, np.int32)], {}    # float32 -> int32
    if op_type == "HardSigmoid":
        return [_special(shape, rng)], {"alpha": 0.3, "beta": 0.4}
    if fam == "unary":
        return [_special(shape, rng)], {}
    return None


def _run_kernel(op_type, inputs, attrs, native):
    g = Graph("one")
    names = []
    for i, v in enumerate(inputs):
        v = np.asarray(v)
        name = f"x{i}"
        if i == 0:
            g.add_tensor(name, v.shape, v.dtype.name, role="input")
        else:
            g.add_tensor(name, v.shape, v.dtype.name, role="constant", data=v)
        names.append(name)
    ref = np.asarray(op_fact(op_type, "evaluate")(Node.on_values(op_type, attrs, inputs,
                                                                 opset=18))[0])
    g.add_tensor("y", ref.shape, ref.dtype.name, role="output")
    g.add_op(op_type, names, ["y"], **attrs)
    set_scratch(g, native=native)
    with np.errstate(all="ignore"):
        out = np.array(Executor(g).run({"x0": inputs[0]})["y"])
    return out, ref


EVALUATED = sorted(t for t in op_table("evaluate") if t in KERNELS and
                   op_fact(t, "family") in ("unary", "binary", "logic"))


@pytest.mark.parametrize("op_type", EVALUATED)
def test_an_evaluator_computes_what_its_kernel_computes(op_type):
    """The importer folds an op with its evaluator and the QDQ rewrite
    tabulates 8-bit ops with it: it must give the kernel's values -- bit for
    bit on the NumPy path, within a few float32 ulps on the native one (FMA) --
    NaN, infinities and signed zeros included."""
    rng = np.random.default_rng(sum(map(ord, op_type)))
    case = _case(op_type, rng)
    assert case is not None, op_type
    inputs, attrs = case
    with np.errstate(all="ignore"):
        got, want = _run_kernel(op_type, inputs, attrs, native=False)
    assert got.dtype == want.dtype and got.shape == want.shape
    if op_type in ("Cast", "CastLike", "BitCast"):      # the type it was asked for
        assert want.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    with np.errstate(all="ignore"):
        got, want = _run_kernel(op_type, inputs, attrs, native=True)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6,
                               atol=0, equal_nan=True)
