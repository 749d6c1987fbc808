"""The guard against cliffs: no kernel loops in Python per element or per
short row.

Every registered kernel that can be built from a generic input (its ONNX
conformance case tiled to a mid-sized tensor, or a recipe:
tests/helpers/kernel_timing.py) runs against a vectorised baseline of the
same work measured in the same run, with the default scratch budget and
with a 1-byte one (what the slack planner may leave an op); a kernel more
than :data:`LIMIT` times slower than its baseline fails.  The ops it cannot
build are declared in :data:`NOT_COVERED` with the reason, and the list
must match exactly (a new op without a case, or a declared one now covered,
fails until the list is updated).  A static check keeps the per-element
NumPy helpers out of the kernel modules.
"""
import ast
import pathlib

import pytest

from helpers import kernel_timing as kt

#: kernel time / baseline time above which a kernel is a cliff
LIMIT = 20.0

_TFLITE = ("a TFLite builtin's op type with no ONNX schema, so no one-node ONNX model "
           "(tests/runtime/test_tflite_kernels.py runs it)")
_POOL = "its output is sized by the data (a pool tensor: its kernel is built per run)"
_BODY = "runs a body graph: the body's ops are covered one by one"
_FOLDS = "folds away at import (its output follows from the shapes)"
_STRINGS = ("reads strings, held outside the arena (a pool op: its kernel is built per run); "
            "vectorised with NumPy (np.add / np.strings / np.isin / searchsorted)")
_HELD = ("reads or writes a sequence or an optional, held outside the arena (a pool op): "
         "list operations, one array copy per element, no per-element loop")
_HELD_BODY = ("runs a body as a model of its own per sequence position (SequenceMap): the "
              "body's ops are covered one by one")
_STRING_LOOP = ("reads strings, held outside the arena; HELD: a Python loop over the strings "
                "(NumPy has no vectorised split or regular expression)")

#: op type -> why the guard does not time it
NOT_COVERED = {
    "Compress": _POOL, "NonZero": _POOL, "Unique": _POOL,
    "If": _BODY, "Loop": _BODY, "Scan": _BODY, "IfElse": _BODY, "While": _BODY,
    "PatchedStage": "a stage of other ops' bands (planning/patch.py): those ops are covered",
    "Shape": _FOLDS, "Size": _FOLDS,
    "ConstantOfShape": "its input is a shape, nothing to tile: a fill of its output",
    "Range": "its inputs are scalars, nothing to tile",
    "QGemm": "com.microsoft QGemm: no recipe yet",
    **{t: _TFLITE for t in ("Concatenation", "FullyConnected", "Logistic", "Relu6", "Rsqrt",
                            "Square", "SquaredDifference", "StridedSlice")},
    "NonMaxSuppression": _POOL,
    "CastLike": "its cases cast a scalar: Cast, the same kernel, is covered",
    "MelWeightMatrix": "its inputs are scalars: nothing to tile",
    "AffineGrid": "tiling theta does not make a larger grid (the size is an input): no "
                  "recipe yet",
    "CausalConvWithState": "tiling the input breaks its agreement with the weight and the "
                           "state: no recipe yet",
    "RotaryEmbedding": "tiling the input breaks its agreement with the cos / sin caches: no "
                       "recipe yet",
    "TensorScatter": "tiling the cache breaks its agreement with the update: no recipe yet",
    "pyarena.KvCacheAppend": "made by a kv_cache session, never in a model file: one copy "
                             "of the new rows into their slice (np.copyto)",
    "DynamicQuantizeLSTM": "com.microsoft, no conformance case: a time loop whose cost is "
                           "its steps' (tests/runtime/test_recurrent_quant.py); no recipe yet",
    "pyarena.Attention": "made by the attention rewrite, never in a model file: one C call "
                         "(pa_attention) or two BLAS products and the C row softmax, "
                         "covered by tests/runtime/test_fusion_attention.py",
    "StringConcat": _STRINGS, "StringNormalizer": _STRINGS,
    "LabelEncoder": _STRINGS + "; its numeric form has no conformance case",
    "StringSplit": _STRING_LOOP, "RegexFullMatch": _STRING_LOOP,
    **{t: _HELD for t in ("SequenceEmpty", "SequenceConstruct", "SequenceInsert")},
    **{t: _HELD for t in ("SequenceErase", "SequenceAt", "SequenceLength")},
    **{t: _HELD for t in ("SplitToSequence", "ConcatFromSequence", "Optional")},
    "SequenceMap": _HELD_BODY,
    **{t: ("an onnxruntime attention: tiling the input breaks its agreement with the mask, "
           "caches and sequence lengths, no recipe yet; batched matrix products as the "
           "standard Attention (tests/importers/test_contrib_attention_ops.py runs it)")
       for t in ("com.microsoft.Attention", "MultiHeadAttention", "GroupQueryAttention")},
    "com.microsoft.RotaryEmbedding": "tiling the input breaks its agreement with the "
                                     "position_ids and caches: no recipe yet",
}

#: op type -> (its own limit, why its work is not the baseline's): ops whose
#: cost per element is inherently higher than an element-wise baseline's,
#: with no per-element Python loop (checked by reading them)
ALLOWED = {
    "MeanVarianceNormalization": (40.0, "nine vectorised passes, two of them reductions over "
                                        "the strided axes 0, 2, 3, where the baseline makes "
                                        "one pass; measured 19-20x on a quiet machine"),
    "Attention": (50.0, "a softmax attention: the bias, two matrix products, exp and a "
                        "normalisation over the scores -- ten NumPy passes where the "
                        "baseline makes three"),
    "Det": (100.0, "an LU factorisation per matrix (LAPACK): n**3 work per n**2 elements"),
    "LinearAttention": (150.0, "a recurrence over time steps: one small matrix product "
                               "per step, as LSTM / GRU"),
    "DeformConv": (50.0, "bilinear sampling before the product: four corner gathers, weights "
                         "and sums per kernel tap, channel and output position, work the "
                         "baseline (the product and one pass) does not count"),
    "TreeEnsemble": (200.0, "every (sample, tree) pair walked down its tree, one level per "
                            "step: a dozen gathers, comparisons and selects per node visited, "
                            "trees x depth visits per sample where the baseline makes one "
                            "pass over the input"),
    **{t: (40.0, "the erf GELU: the Erf kernel's rational approximation (a dozen passes, "
                 "15x the baseline on its own) plus the bias and four more passes")
       for t in ("com.microsoft.Gelu", "BiasGelu")},
    "ReverseSequence": (50.0, "a gather along time (take_along_axis) with its index "
                              "worked out per run"),
}


@pytest.fixture(scope="module")
def survey(tmp_path_factory):
    return kt.survey(tmp_path_factory.mktemp("cliffs"))


def _worst(res):
    return max(t / max(b, 1e-9) for t, b in res.values())


def _limit(op):
    return ALLOWED[op][0] if op in ALLOWED else LIMIT


def test_no_kernel_is_more_than_20x_its_vectorised_baseline(survey, tmp_path):
    timed, _ = survey
    assert len(timed) >= 100, sorted(timed)
    slow = {op: res for op, res in timed.items() if _worst(res) > _limit(op)}
    close = list(slow)
    if close:       # once more, longer, before calling it a cliff (a busy moment)
        again, _ = kt.survey(tmp_path, ops=close, repeat=15)
        slow.update(again)
        slow = {op: res for op, res in slow.items() if _worst(res) > _limit(op)}
    assert not slow, {op: {b: f"{t * 1e3:.3f} ms, {t / base:.0f}x" for b, (t, base) in r.items()}
                      for op, r in slow.items()}


def test_the_ops_not_covered_are_the_declared_ones(survey):
    _, missed = survey
    assert set(missed) == set(NOT_COVERED), (
        {op: why for op, why in missed.items() if op not in NOT_COVERED},
        sorted(set(NOT_COVERED) - set(missed)))


def test_the_guard_catches_a_per_element_loop(tmp_path, monkeypatch):
    """A kernel made to work one element per step (the floor taken away,
    a 1-byte budget) is reported; with the floor it is not."""
    from pyarena.runtime.kernels import registry
    model, ins, _ = kt._model("Erf", [("x", kt._f32(16, 512))])
    steps = kt.built(model, ins[0], 1, str(tmp_path / "erf.onnx"))
    t, b = kt.ratio(steps)
    assert t / b < LIMIT
    monkeypatch.setattr(registry, "MIN_STEP_ELEMENTS", 1)
    steps = kt.built(model, ins[0], 1, str(tmp_path / "erf.onnx"))
    t, b = kt.ratio(steps, repeat=2)
    assert t / b > LIMIT


#: NumPy / math helpers that call Python once per element
_PER_ELEMENT = {("np", "vectorize"), ("np", "frompyfunc"), ("np", "apply_along_axis"),
                ("np", "ndindex"), ("np", "nditer"), ("math", "erf"), ("math", "erfc"),
                ("math", "gamma"), ("math", "lgamma")}


def test_no_kernel_module_uses_a_per_element_helper():
    root = pathlib.Path(__file__).resolve().parents[2] / "pyarena"
    files = sorted((root / "runtime" / "kernels").glob("*.py")) + \
        sorted((root / "importers").glob("onnx*.py"))
    assert len(files) > 30
    found = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    (node.value.id.replace("numpy", "np"), node.attr) in _PER_ELEMENT:
                found.append(f"{f.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, found
