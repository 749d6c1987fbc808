"""A long-lived InferenceSession gives, for every call, exactly what a fresh
session gives for that call's signature (same bits), whatever signatures
came before: random sequences of batch sizes and spatial sizes over small
models built here -- a squeeze-excitation block whose bias is a constant
Add after a 1x1 conv (PP-LCNet's, as Paddle exports it), residual blocks
(one whose Add broadcasts except at 1x1 pixels), a model the NHWC pass
converts at every size and one it converts only at 1x1 pixels, and
dynamic-batch Reshape / Flatten heads.

A signature after the first is retargeted from the last imported graph
(importers/retarget.py); what the passes chose from the shapes of that
import (fusion's residuals, the NHWC pass's regions: ``graph.shape_decisions``)
must hold at the new shapes, else the signature is imported in full.
Before that rule a session that ran batch 1 and then batch 3 read rows 1..
of a constant residual of batch 1 past its end (issue 30).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from helpers.onnx_util import make_model
from pyarena import InferenceSession

R = np.random.default_rng(30)


def rnd(*shape, scale=0.5):
    return (R.standard_normal(shape) * scale).astype(np.float32)


def node(op, ins, outs, **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _head(src, channels, classes=4):
    """GlobalAveragePool -> Reshape to [N, -1] through Shape / Slice /
    Concat (a batch read from the shapes) -> MatMul -> Softmax."""
    nodes = [node("GlobalAveragePool", [src], ["gp"]), node("Shape", ["gp"], ["gs"]),
             node("Slice", ["gs", "i0", "i1"], ["gn"]),
             node("Concat", ["gn", "im1"], ["gshape"], axis=0),
             node("Reshape", ["gp", "gshape"], ["gf"]), node("MatMul", ["gf", "gw"], ["gm"]),
             node("Softmax", ["gm"], ["y"], axis=-1)]
    inits = {"i0": np.array([0], np.int64), "i1": np.array([1], np.int64),
             "im1": np.array([-1], np.int64), "gw": rnd(channels, classes)}
    return nodes, inits


def squeeze_excitation(path):
    """x[N, 3, H, W] -> Conv 3x3 -> HardSwish -> SE (GlobalAveragePool ->
    Conv 1x1 -> Add a constant (1, C, 1, 1) -> Relu -> Conv 1x1 -> Add a
    constant -> HardSigmoid -> Mul) -> the head."""
    nodes = [node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             node("HardSwish", ["c0"], ["h0"]),
             node("GlobalAveragePool", ["h0"], ["p"]), node("Conv", ["p", "w1"], ["c1"]),
             node("Add", ["c1", "s1"], ["a1"]), node("Relu", ["a1"], ["r1"]),
             node("Conv", ["r1", "w2"], ["c2"]), node("Add", ["c2", "s2"], ["a2"]),
             node("HardSigmoid", ["a2"], ["g"], alpha=1 / 6, beta=0.5),
             node("Mul", ["h0", "g"], ["se"])]
    head, inits = _head("se", 16)
    inits.update(w0=rnd(16, 3, 3, 3), w1=rnd(4, 16, 1, 1), s1=rnd(1, 4, 1, 1),
                 w2=rnd(16, 4, 1, 1), s2=rnd(1, 16, 1, 1))
    make_model(nodes + head, {"x": (["N", 3, "H", "W"], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    return path


def residual_blocks(path):
    """x[N, 8, H, W] -> Conv 1x1 -> Add(., x) -> Relu (a residual at every
    size); GlobalAveragePool(x) -> Conv 1x1 of that -> Add(., the pool): a
    residual at 1x1 pixels only, a broadcast otherwise -> Flatten(Conv 1x1)
    as the output's batch rows."""
    nodes = [node("GlobalAveragePool", ["x"], ["q"]),
             node("Conv", ["x", "w1", "b1"], ["c1"]), node("Add", ["c1", "x"], ["a1"]),
             node("Relu", ["a1"], ["r1"]), node("Conv", ["r1", "w2"], ["c2"]),
             node("Add", ["c2", "q"], ["a2"]), node("Conv", ["a2", "w3", "b3"], ["c3"]),
             node("GlobalMaxPool", ["c3"], ["m"]), node("Flatten", ["m"], ["y"], axis=1)]
    make_model(nodes, {"x": (["N", 8, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"w1": rnd(8, 8, 1, 1), "b1": rnd(8), "w2": rnd(8, 8, 1, 1),
                "w3": rnd(6, 8, 1, 1), "b3": rnd(6)}, path=path)
    return path


def nhwc_everywhere(path):
    """x[N, 3, H, W] -> Conv 3x3 (3 -> 16) -> depthwise -> 1x1 (16 -> 32)
    -> depthwise -> 1x1 -> Relu -> the head: a region whose convolutions
    write far more than its edges move -- NHWC at every size."""
    nodes = [node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]), node("Relu", ["c0"], ["r0"]),
             node("Conv", ["r0", "d1"], ["c1"], pads=[1, 1, 1, 1], group=16),
             node("Conv", ["c1", "p1", "b1"], ["c2"]), node("Clip", ["c2", "lo", "hi"], ["r2"]),
             node("Conv", ["r2", "d2"], ["c3"], pads=[1, 1, 1, 1], group=32),
             node("Conv", ["c3", "p2"], ["c4"]), node("Relu", ["c4"], ["r4"])]
    head, inits = _head("r4", 32)
    inits.update(w0=rnd(16, 3, 3, 3), d1=rnd(16, 1, 3, 3), p1=rnd(32, 16, 1, 1), b1=rnd(32),
                 d2=rnd(32, 1, 3, 3), p2=rnd(32, 32, 1, 1),
                 lo=np.array(0, np.float32), hi=np.array(6, np.float32))
    make_model(nodes + head, {"x": (["N", 3, "H", "W"], np.float32)},
               {"y": (None, np.float32)}, inits, path=path)
    return path


def nhwc_at_one_pixel(path):
    """x[N, 8, H, W] -> depthwise 3x3 -> 1x1: its edges (x and y) move as
    many bytes as its convolutions write, except at 1x1 pixels, where a
    transpose is a view -- NHWC there only."""
    nodes = [node("Conv", ["x", "d"], ["c"], pads=[1, 1, 1, 1], group=8),
             node("Conv", ["c", "p", "b"], ["y"])]
    make_model(nodes, {"x": (["N", 8, "H", "W"], np.float32)}, {"y": (None, np.float32)},
               {"d": rnd(8, 1, 3, 3), "p": rnd(8, 8, 1, 1), "b": rnd(8)}, path=path)
    return path


MODELS = {"se": squeeze_excitation, "residual": residual_blocks,
          "nhwc": nhwc_everywhere, "nhwc-1px": nhwc_at_one_pixel}
#: (layout, native) of the sessions compared
OPTIONS = [("auto", True), ("nhwc", True), ("keep", True), ("auto", False)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("signatures")
    return {name: str(make(d / f"{name}.onnx")) for name, make in MODELS.items()}


class Fresh:
    """One fresh session per (model, options, signature), kept across
    examples: what each call of a long-lived session is compared with."""

    def __init__(self):
        self.sessions = {}

    def run(self, path, options, x):
        key = (path, options, x.shape)
        s = self.sessions.get(key)
        if s is None:
            layout, native = options
            s = self.sessions[key] = InferenceSession(path, layout=layout, native=native)
        return s.run(None, {"x": x})


@pytest.fixture(scope="module")
def fresh():
    return Fresh()


def _graph(s):
    """The ops of the session's last graph, as the kernels see them."""
    g = s._plans[next(reversed(s._plans))][0]
    return [(op.op_type, op.inputs, op.outputs, sorted((k, repr(v)) for k, v in op.attrs.items()))
            for op in g.ops]


def _check_sequence(models, fresh, name, options, signatures, seed):
    path = models[name]
    layout, native = options
    s = InferenceSession(path, layout=layout, native=native)
    rng = np.random.default_rng(seed)
    for n, h, w in signatures:
        c = 3 if name in ("se", "nhwc") else 8
        x = rng.standard_normal((n, c, h, w)).astype(np.float32)
        got = s.run(None, {"x": x})
        want = fresh.run(path, options, x)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a, b), (f"{name} {options} after {signatures}: "
                                          f"{x.shape} differs by {np.abs(a - b).max()}")
        fs = fresh.sessions[(path, options, x.shape)]
        assert _graph(s) == _graph(fs)


SIZES = st.tuples(st.sampled_from([1, 2, 3, 5]), st.sampled_from([1, 2, 5]),
                  st.sampled_from([1, 3, 6]))


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(MODELS)), options=st.sampled_from(OPTIONS),
       signatures=st.lists(SIZES, min_size=2, max_size=5), seed=st.integers(0, 2 ** 16))
def test_a_long_lived_session_gives_what_a_fresh_one_gives(models, fresh, name, options,
                                                           signatures, seed):
    """Every call of one session equals, bit for bit, a fresh session's
    output for that signature, and runs the same graph."""
    _check_sequence(models, fresh, name, options, signatures, seed)


@pytest.mark.parametrize("name,signatures", [
    ("se", [(1, 5, 6), (3, 5, 6), (5, 5, 6), (1, 5, 6), (2, 5, 6)]),     # issue 30's order
    ("residual", [(2, 1, 1), (2, 5, 3), (1, 1, 1), (3, 2, 6)]),        # a residual, then not
    ("residual", [(2, 5, 3), (2, 1, 1)]),                               # not, then a residual
    ("nhwc-1px", [(1, 1, 1), (1, 5, 6), (3, 1, 1), (2, 2, 3)]),         # NHWC, then not
    ("nhwc-1px", [(2, 2, 3), (1, 1, 1)])])                              # not, then NHWC
def test_the_choices_that_change_with_the_shapes_are_made_again(models, fresh, name,
                                                                  signatures):
    """The sequences where a choice made from one signature's shapes is
    wrong for the next: the retarget declines there, each call still
    equals a fresh session's."""
    _check_sequence(models, fresh, name, ("auto", True), signatures, 0)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from(sorted(MODELS)), options=st.sampled_from(OPTIONS),
       signatures=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(1, 9)),
                           min_size=2, max_size=8),
       seed=st.integers(0, 2 ** 16))
def test_a_long_lived_session_gives_what_a_fresh_one_gives_slow(models, fresh, name, options,
                                                                signatures, seed):
    _check_sequence(models, fresh, name, options, signatures, seed)
