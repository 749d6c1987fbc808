"""The few-channel NCHW <-> NHWC Transpose in C (``pa_transpose_planes``,
kernels/planes_native.py): NumPy's bits for odd sizes, 1 to 16 channels,
both directions, the AVX-512 shuffles and the portable copy, at one and
three threads; a model's input Transpose is a record of the executor's
batch and the model gives the bits of the NumPy Transpose and matches
onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from pyarena._native import ffi, lib
from pyarena.runtime.batch import Batch
from pyarena.runtime.kernels import movement
from pyarena.runtime.kernels.planes_native import RUN_MIN_VALUES, planes_record, run_planes

SHAPES = [(1, 1, 7, 5), (1, 3, 17, 19), (2, 3, 16, 16), (1, 4, 33, 3), (3, 2, 5, 41),
          (1, 16, 9, 13), (1, 5, 40, 40), (1, 3, 208, 208)]


def _bits(shape, seed):
    """Random float32 words, NaNs of odd payloads and infinities among them."""
    r = np.random.default_rng(seed)
    return r.integers(0, 2 ** 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)


def _planes(x, y, n, c, hw, to_nhwc, workers=ffi.NULL):
    xp, yp = (ffi.cast("void *", a.__array_interface__["data"][0]) for a in (x, y))
    return lib.pa_transpose_planes(xp, yp, n, c, hw, to_nhwc, workers)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 3])
def test_both_directions_give_numpys_bits(shape, threads):
    """The C kernel for any channel count (vector shuffles or value by
    value), and ``run_planes`` where it takes the arrays."""
    from pyarena._native.kernels import Workers
    n, c, h, w = shape
    x = _bits(shape, sum(shape))
    want = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    pool = Workers(threads)
    try:
        y = np.full(want.shape, 7, np.float32)
        assert _planes(x, y, n, c, h * w, 1, pool.handle) == lib.PA_OK
        assert y.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
        back = np.full(shape, 7, np.float32)
        assert _planes(want, back, n, c, h * w, 0, pool.handle) == lib.PA_OK
        assert back.view(np.uint32).tobytes() == x.view(np.uint32).tobytes()
        takes = bool(lib.pa_transpose_planes_vectorised(c)) and x.size >= RUN_MIN_VALUES
        y[...] = 7
        assert run_planes(x, y, n, c, True, pool.handle) == takes
        if takes:
            assert y.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    finally:
        pool.close()


def test_int32_and_the_record_and_what_it_does_not_take():
    x = np.arange(2 * 3 * 50 * 70, dtype=np.int32).reshape(2, 3, 50, 70)
    y = np.empty((2, 50, 70, 3), np.int32)
    if not lib.pa_transpose_planes_vectorised(3):
        # no AVX-512: value by value in C is no faster, the NumPy copies stay
        assert run_planes(x, y, 2, 3, True, ffi.NULL) is False
        assert planes_record(x, y, 2, 3, True) is None
        return
    assert run_planes(x, y, 2, 3, True, ffi.NULL)
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
    rec = planes_record(x, y, 2, 3, True)
    assert rec[0][0] == "transpose_planes" and rec[0][6] == (2, 3, 3500, 1)
    assert planes_record(y, x, 2, 3, False)[0][6] == (2, 3, 3500, 0)
    assert run_planes(x[:, :, :2], y[:, :2], 2, 3, True, ffi.NULL) is False     # small
    assert planes_record(x.reshape(2, 6, 25, 70), y, 2, 6, True) is None        # 6 channels
    # strided, other itemsize, overlapping, empty: left to NumPy
    xs = np.zeros((1, 3, 60, 80), np.float32)[..., ::2]
    assert planes_record(xs, np.empty((1, 60, 40, 3), np.float32), 1, 3, True) is None
    assert planes_record(x.astype(np.float64), y.astype(np.float64), 2, 3, True) is None
    assert planes_record(x, x.reshape(2, 50, 70, 3), 2, 3, True) is None
    assert planes_record(x[:0], y[:0], 0, 3, True) is None


def test_bad_arguments_are_refused():
    x = np.zeros(12, np.float32)
    y = np.zeros(12, np.float32)
    assert _planes(x, y, 1, 3, 4, 1) == lib.PA_OK
    assert _planes(x, y, -1, 3, 4, 1) == lib.PA_ERR_INVALID
    assert _planes(x, y, 1, 3, -4, 0) == lib.PA_ERR_INVALID
    assert _planes(x, x, 1, 3, 4, 1) == lib.PA_ERR_INVALID          # overlapping
    assert _planes(x, y, 1 << 40, 1 << 20, 1 << 10, 1) == lib.PA_ERR_INVALID
    assert lib.pa_transpose_planes(ffi.NULL, ffi.NULL, 1, 3, 4, 1, ffi.NULL) == \
        lib.PA_ERR_INVALID
    assert lib.pa_transpose_planes(ffi.NULL, ffi.NULL, 0, 3, 4, 1, ffi.NULL) == lib.PA_OK


def test_a_strided_input_takes_numpys_plane_copies():
    """A Transpose whose input view is not contiguous is not the C kernel's:
    ``run`` falls back to NumPy (the same values)."""
    x = _bits((1, 3, 90, 220), 1)[..., ::2]
    y = np.empty((1, 90, 110, 3), np.float32)
    assert not run_planes(x, y, 1, 3, True, ffi.NULL)


def _model(path, c):
    from helpers.onnx_util import make_model
    r = np.random.default_rng(5)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["d0"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["d0", "w2", "b2"], ["y"])]
    inits = {"w0": r.uniform(-1, 1, (8, c, 3, 3)).astype(np.float32),
             "b0": r.uniform(-1, 1, 8).astype(np.float32),
             "w1": r.uniform(-1, 1, (8, 1, 3, 3)).astype(np.float32),
             "b1": r.uniform(-1, 1, 8).astype(np.float32),
             "w2": r.uniform(-1, 1, (c, 8, 1, 1)).astype(np.float32),
             "b2": r.uniform(-1, 1, c).astype(np.float32)}
    make_model(nodes, {"x": ([1, c, 37, 29], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)


@pytest.mark.parametrize("c", [3, 4])
def test_a_models_input_transpose_is_a_batched_record_with_numpys_bits(tmp_path, c,
                                                                       monkeypatch):
    from helpers.model_zoo import ort_run
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    path = tmp_path / "m.onnx"
    _model(path, c)
    x = np.random.default_rng(c).uniform(-2, 2, (1, c, 37, 29)).astype(np.float32)

    def run(threads):
        g = load_model(str(path), layout="nhwc")
        ex = Executor(g, plan(g), threads=threads)
        return ex, np.array(ex.run({"x": x})["y"])

    ex, got = run(1)
    kinds = [k for s in ex._runner.busy if isinstance(s[0], Batch) for k in s[0].calls.kinds]
    if lib.pa_transpose_planes_vectorised(c):      # the image in, c channels back out
        assert kinds.count("transpose_planes") == 2
    np.testing.assert_array_equal(run(3)[1], got)
    np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-4)
    # NumPy's plane copies instead: the same bits
    monkeypatch.setattr(movement.Transpose, "native_calls", lambda self, xs, ys: None)
    monkeypatch.setattr(movement, "run_planes", lambda *a: False)
    np.testing.assert_array_equal(run(1)[1], got)
