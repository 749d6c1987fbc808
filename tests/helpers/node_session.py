"""ONNX node conformance cases run through ``pyarena.InferenceSession`` as
a user would: every input of the case fed at run time (none turned into a
constant), the outputs compared with the case's reference outputs and with
onnxruntime's."""
import re

import numpy as np
import onnx
import pytest

from helpers.model_zoo import ort_run
from helpers.node_cases import generated_cases

#: the tolerance every case is held to (float32 reference outputs)
RTOL, ATOL = 1e-3, 1e-7


def cases(pattern, modules):
    """{name: case} of the node cases fully matching ``pattern`` among those
    of the case scripts ``modules`` (``onnx.backend.test.case.node.<m>``)."""
    return dict(sorted(generated_cases(re.compile(pattern), modules).items()))


def _feed(v):
    """A case's input as fed: a sequence as a list of arrays, an array."""
    return [np.asarray(a) for a in v] if isinstance(v, list) else np.asarray(v)


def _close(got, want, what):
    """``got`` equals ``want``: arrays (floats within RTOL / ATOL, strings
    exactly), sequences (lists) element by element, an empty optional (None)."""
    if want is None or got is None:
        assert got is None and want is None, f"{what}: {got!r} != {want!r}"
        return
    if isinstance(want, list):
        assert isinstance(got, list), f"{what}: a sequence expected, got {type(got).__name__}"
        assert len(got) == len(want), f"{what}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{what}[{i}]")
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True,
                                   err_msg=what)
    else:
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_array_equal(got, want, err_msg=what)


def check_case(case, tmp_path, ort=True):
    """Run ``case`` (every data set) through an InferenceSession and assert
    its outputs match the reference outputs and, with ``ort``,
    onnxruntime's on the same feeds."""
    import pyarena
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(case.model, str(path))
    sess = pyarena.InferenceSession(str(path))
    names = [vi.name for vi in case.model.graph.input]
    for ins, refs in case.data_sets:
        feeds = {n: _feed(v) for n, v in zip(names, ins) if v is not None}
        got = sess.run(None, feeds)
        assert len(got) == len(refs), case.name
        for i, (g, r) in enumerate(zip(got, refs)):
            _close(g, r, f"{case.name}: output {i} against the reference")
        if ort:
            theirs = list(ort_run(path, feeds).values())
            for i, (g, r) in enumerate(zip(got, theirs)):
                _close(g, r, f"{case.name}: output {i} against onnxruntime")


def check_refused(case, tmp_path, match):
    """The case is refused with a pyarena error whose message matches
    ``match`` (never a raw exception)."""
    import pyarena
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(case.model, str(path))
    names = [vi.name for vi in case.model.graph.input]
    feeds = {n: _feed(v) for n, v in zip(names, case.data_sets[0][0]) if v is not None}
    with pytest.raises(pyarena.PyArenaError, match=match):
        pyarena.InferenceSession(str(path)).run(None, feeds)
