"""TFLite's fixed-point requantization: the multipliers derived from the
scales, the NumPy form against the C core's ``pa_qrequant`` (the two paths
of a TFLite convolution), and the case from a real model where it differs
from onnxruntime's single float32 rounding."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyarena._native import qconv as nq
from pyarena.runtime.kernels.requant_fixed import requant_fixed, tflite_multipliers


def test_the_multiplier_is_the_scale_in_q31():
    scales = np.array([0.0046542417, 1e-9, 0.5, 0.99999997, 3.0], np.float32)
    m, s = tflite_multipliers(0.07660123, scales, 0.032039396)
    assert m.dtype == np.int32 and s.dtype == np.int32
    real = float(np.float32(0.07660123)) * scales.astype(np.float64) / \
        float(np.float32(0.032039396))
    assert np.all((m >= 2**30) & (m < 2**31))
    np.testing.assert_allclose(m * 2.0 ** (s.astype(np.float64) - 31), real, rtol=2**-30)
    tiny_m, tiny_s = tflite_multipliers(1.0, [1e-12], 1.0)     # below 2^-32: 0, as TFLite
    assert (int(tiny_m[0]), int(tiny_s[0])) == (0, 0)
    y = np.empty(3, np.int8)
    requant_fixed(np.array([1e6, -1e6, 7.0]), tiny_m, tiny_s, 5, -128, 127, y)
    assert list(y) == [5, 5, 5]


def test_the_multiplier_rounds_half_away_to_q31():
    """Each multiplier is the scale's significand rounded to 31 bits, half
    away from zero, worked out here in exact fractions (TFLite's
    QuantizeMultiplier): a truncated one is a unit of 2^-31 low about half
    the time."""
    from fractions import Fraction
    rng = np.random.default_rng(11)
    ws = rng.uniform(1e-4, 0.05, 40).astype(np.float32)
    m, s = tflite_multipliers(0.0421, ws, 0.0173)
    for w, mi, si in zip(ws, m, s):
        real = Fraction(float(np.float32(0.0421)) * float(w) / float(np.float32(0.0173)))
        sig = real / Fraction(2) ** int(si)              # in [1/2, 1)
        assert Fraction(1, 2) <= sig < 1
        want = int(sig * 2**31 + Fraction(1, 2))         # (sig > 0: half away = half up)
        assert int(mi) == want


def test_a_real_accumulator_rounds_twice():
    """acc 9750 x 0.0111281 = 108.494: TFLite's interpreter writes 109 (half
    up to Q31 gives 6944 / 64 = 108.5, then half away from zero); one
    float32 rounding gives 108."""
    m, s = tflite_multipliers(0.07660123, [0.0046542417], 0.032039396)
    y = np.empty(1, np.int8)
    requant_fixed(np.array([9750.0]), m, s, -128, -128, 127, y)
    assert int(y[0]) == -19
    p = nq.qrequant(np.int8, 1, -128, -128, 127)
    yc = np.empty(1, np.int8)
    nq.requant(p, np.concatenate([m, s]), np.array([9750], np.int32), yc, 1)
    assert int(yc[0]) == -19
    assert int(np.rint(np.float32(9750) * np.float32(0.07660123 * 0.0046542417 / 0.032039396))
               ) - 128 == -20


def test_fully_connected_rounds_once():
    """The same 9750 x 0.0111281 = 108.494 with one rounding (ruy's, TFLite's
    FULLY_CONNECTED): 108, as exact arithmetic says; -108.494: -108; a
    tie, 3 x 0.5, rounds half away from zero (2, and -3 x 0.5: -2), NumPy
    and C alike."""
    m, s = tflite_multipliers(0.07660123, [0.0046542417], 0.032039396)
    half_m, half_s = np.array([1 << 30], np.int32), np.array([0], np.int32)
    for mult, shift, acc, want in ((m, s, [9750, -9750], [108, -108]),
                                   (half_m, half_s, [3, -3], [2, -2])):
        y = np.empty(2, np.int8)
        requant_fixed(np.array(acc, np.float64), mult, shift, 0, -128, 127, y,
                      single_rounding=True)
        assert y.tolist() == want
        yc = np.empty(2, np.int8)
        nq.requant(nq.qrequant(np.int8, 1, 0, -128, 127, True), np.concatenate([mult, shift]),
                   np.array(acc, np.int32), yc, 2)
        assert yc.tolist() == want


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 2**31 - 1), st.booleans(), st.integers(-20, 20),
       st.integers(0, 1), st.booleans())
def test_numpy_and_c_give_the_same_bytes(channels, seed, signed, zp, big, single):
    rng = np.random.default_rng(seed)
    n = channels * 64
    acc = rng.integers(-(1 << (30 if big else 16)), 1 << (30 if big else 16), n).astype(np.int32)
    acc[:2] = [2**31 - 1, -2**31]
    m = rng.integers(2**30, 2**31, channels).astype(np.int32)
    s = rng.integers(-31, 3, channels).astype(np.int32)
    dt = np.int8 if signed else np.uint8
    lo, hi = (-128, 127) if signed else (0, 255)
    zp = zp if signed else zp + 128
    want = np.empty(n, dt)
    requant_fixed(acc.reshape(-1, channels).astype(np.float64), m, s, zp, lo, hi,
                  want.reshape(-1, channels), single_rounding=single)
    got = np.empty(n, dt)
    nq.requant(nq.qrequant(dt, channels, zp, lo, hi, single), np.concatenate([m, s]), acc, got,
               n)
    np.testing.assert_array_equal(got, want)


def _conv(geo, ydt, mode, yzp=0, lo=0, hi=0):
    return nq.qconv2d(**geo, x_dtype=np.int8, w_dtype=np.int8, y_dtype=ydt, x_zp=-3, y_zp=yzp,
                      y_lo=lo, y_hi=hi, requant=mode)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["one_pixel", "pixels", "3x3", "depthwise"]), st.integers(1, 70),
       st.integers(0, 2**31 - 1), st.booleans(), st.booleans())
def test_the_fused_epilogue_is_the_conv_then_the_requantization(kind, cout, seed, single, signed):
    """A TFLite convolution requantized in the kernel's epilogue
    (``requant="fixed"`` / ``"single"``: one pa_qconv2d_run) gives the bytes
    of the int32 accumulators (the same kernel) requantized by the NumPy
    form, on the 1x1 GEMM (one pixel: the one-row tile), im2col and
    depthwise paths, with random multipliers and shifts, extremes among
    them."""
    rng = np.random.default_rng(seed)
    dw = kind == "depthwise"
    cin = cout if dw else int(rng.integers(1, 50))
    k, hw = (1, 1) if kind == "one_pixel" else (1, 5) if kind == "pixels" else (3, 6)
    geo = dict(nhwc=True, n=1, c_in=cin, h=hw, w=hw, c_out=cout, h_out=hw, w_out=hw, kh=k, kw=k,
               sh=1, sw=1, dh=1, dw=1, pad_top=k // 2, pad_left=k // 2,
               groups=cin if dw else 1)
    x = rng.integers(-128, 128, (1, hw, hw, cin)).astype(np.int8)
    w = rng.integers(-127, 128, (cout, k, k, 1 if dw else cin)).astype(np.int8)
    bias = rng.integers(-50000, 50000, cout).astype(np.int32)
    m = rng.integers(2**30, 2**31, cout).astype(np.int32)
    s = rng.integers(-14, 1, cout).astype(np.int32)
    m[:1], s[:1] = 2**31 - 1, 30                # (saturation)
    s[1:2] = -31                                # (a zero point nearly only)
    ydt = np.int8 if signed else np.uint8
    lo, hi = (-120, 127) if signed else (5, 255)
    yzp = 7 if signed else 131
    d32, df = _conv(geo, np.int32, None), _conv(geo, ydt, "single" if single else "fixed",
                                                yzp, lo, hi)
    acc = np.empty((1, hw, hw, cout), np.int32)
    got = np.empty((1, hw, hw, cout), ydt)
    for desc, y, pack in ((d32, acc, lambda p: nq.pack(d32, w, None, bias, None, p)),
                          (df, got, lambda p: nq.pack_fixed(df, w, None, bias,
                                                            np.concatenate([m, s]), p))):
        packed = pack(np.empty(nq.packed_size(desc), np.uint8))
        sc = np.empty(max(nq.scratch_size(desc), 1), np.uint8)
        nq.run(desc, nq.ptr(packed), nq.ptr(x), nq.ptr(y), nq.ptr(sc), sc.nbytes)
    want = np.empty_like(got)
    requant_fixed(acc, m, s, yzp, lo, hi, want, single_rounding=single)
    np.testing.assert_array_equal(got, want)
