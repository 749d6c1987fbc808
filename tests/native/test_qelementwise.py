"""The 8-bit quantized kernels called through their binding
(pyarena._native.qelementwise): bad input becomes InvalidArgumentError by
way of PA_ERR_INVALID, and each call does what its one line says."""
import numpy as np
import pytest

from pyarena._native import ffi
from pyarena._native import qelementwise as qn
from pyarena._native.kernels import fptr
from pyarena.errors import InvalidArgumentError


def desc(**kw):
    args = dict(op=qn.ADD, dtype=np.uint8, scales=(1, 1, 1), zero_points=(0, 0, 0),
                clamp=(0, 255), loops=(1, 1, 4), a_strides=(0, 0, 1), b_strides=(0, 0, 1))
    args.update(kw)
    return qn.qbinary(**args)


def test_qbinary_adds_and_saturates():
    a = np.array([100, 200, 3, 0], np.uint8)
    y = np.empty_like(a)
    qn.run_qbinary(desc(), qn.bptr(a), qn.bptr(a), qn.bptr(y))
    assert y.tolist() == [200, 255, 6, 0]


@pytest.mark.parametrize("bad", [dict(loops=(1, 1, -1)), dict(a_strides=(0, 0, 2)),
                                 dict(scales=(1, 0, 1)), dict(scales=(np.nan, 1, 1)),
                                 dict(zero_points=(0, 0, 300)), dict(clamp=(5, 4)),
                                 dict(dtype=np.int8, clamp=(0, 255)),
                                 dict(b_strides=(-1, 0, 1))])
def test_qbinary_refuses_bad_descriptors(bad):
    a = np.zeros(4, np.uint8)
    with pytest.raises(InvalidArgumentError, match="pa_qbinary"):
        qn.run_qbinary(desc(**bad), qn.bptr(a), qn.bptr(a), qn.bptr(a))


def test_null_pointers_are_refused():
    a = np.zeros(4, np.uint8)
    with pytest.raises(InvalidArgumentError):
        qn.run_qbinary(desc(), ffi.NULL, qn.bptr(a), qn.bptr(a))
    with pytest.raises(InvalidArgumentError):
        qn.lookup(ffi.NULL, qn.bptr(a), qn.bptr(a), 1, 4, 0, 0)
    with pytest.raises(InvalidArgumentError):
        qn.quantize_linear(np.uint8, ffi.NULL, qn.bptr(a), 4, 1.0, 0, 0, 255)
    with pytest.raises(InvalidArgumentError):
        qn.dequantize_linear(np.uint8, qn.bptr(a), ffi.NULL, 4, 1.0, 0)
    with pytest.raises(InvalidArgumentError):
        qn.global_avgpool(np.uint8, False, 1, 1, 4, ffi.NULL, qn.bptr(a), 0, 1, 0, 0, 255)


def test_negative_sizes_are_refused():
    a = np.zeros(4, np.uint8)
    f = np.zeros(4, np.float32)
    t = np.arange(256, dtype=np.uint8)
    with pytest.raises(InvalidArgumentError):
        qn.lookup(qn.bptr(t), qn.bptr(a), qn.bptr(a), -1, 4, 0, 0)
    with pytest.raises(InvalidArgumentError):
        qn.quantize_linear(np.uint8, fptr(f), qn.bptr(a), -4, 1.0, 0, 0, 255)
    with pytest.raises(InvalidArgumentError):
        qn.dequantize_linear(np.int8, qn.bptr(a), fptr(f), -1, 1.0, 0)
    with pytest.raises(InvalidArgumentError):
        qn.global_avgpool(np.uint8, True, 1, -1, 4, qn.bptr(a), qn.bptr(a), 0, 1, 0, 0, 255)


def test_lookup_quantize_dequantize_pool():
    t = (255 - np.arange(256)).astype(np.uint8)
    x = np.array([0, 1, 254, 255], np.uint8)
    y = np.empty_like(x)
    qn.lookup(qn.bptr(t), qn.bptr(x), qn.bptr(y), 1, 4, 0, 0)
    assert y.tolist() == [255, 254, 1, 0]
    f = np.array([2.5, 3.5, -2.5, 1e9], np.float32)
    q = np.empty(4, np.int8)
    qn.quantize_linear(np.int8, fptr(f), qn.bptr(q), 4, 1.0, 1, -128, 127)
    assert q.tolist() == [3, 5, -1, 127]
    qn.dequantize_linear(np.int8, qn.bptr(q), fptr(f), 4, 0.5, 1)
    assert f.tolist() == [1.0, 2.0, -1.0, 63.0]
    p = np.empty(1, np.uint8)
    qn.global_avgpool(np.uint8, False, 1, 1, 4, qn.bptr(x), qn.bptr(p), 0.0, 1.0, 0.0, 0, 255)
    assert p.tolist() == [128]      # (0 + 1 + 254 + 255) / 4 = 127.5 -> 128 (even)
