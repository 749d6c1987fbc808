"""A long-lived InferenceSession gives, for every call, exactly what a fresh
session gives for that call's signature (same bits), whatever signatures
came before: random sequences of batch sizes and spatial sizes over small
models built in code (helpers/session_models.py) -- a squeeze-excitation block whose bias is a constant
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

from helpers.session_models import CHANNELS, MODELS
from pyarena import InferenceSession

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
    g = s._plans[next(reversed(s._plans))].graph
    return [(op.op_type, op.inputs, op.outputs, sorted((k, repr(v)) for k, v in op.attrs.items()))
            for op in g.ops]


def _check_sequence(models, fresh, name, options, signatures, seed):
    path = models[name]
    layout, native = options
    s = InferenceSession(path, layout=layout, native=native)
    rng = np.random.default_rng(seed)
    for n, h, w in signatures:
        x = rng.standard_normal((n, CHANNELS[name], h, w)).astype(np.float32)
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
