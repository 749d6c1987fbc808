"""Transposed convolution over 3-D (and more) spatial inputs, NCHW, for
:class:`.conv.ConvTranspose` (which keeps the op's facts and its 1-D / 2-D
paths), and the geometry both share: the crop the pads imply
(:func:`transpose_pads`) and, per kernel tap along one axis, the input
positions whose contributions land in the output (:func:`tap_slices`).

As the 2-D path: per image and per band of the first spatial axis,
columns = W^T x by one batched matmul into the scratch, then each kernel
tap's columns added into the output positions they land on -- a loop over
the taps, never over elements.
"""
import itertools
import math

import numpy as np

from .registry import const, items_per_step

__all__ = ["transpose_pads", "tap_slices", "setup_transpose_nd", "run_transpose_nd"]


def transpose_pads(at, in_sp, out_sp, k, s, d):
    """The begin crop per spatial axis of a transposed convolution:
    explicit pads, or what auto_pad / output_shape / output_padding imply."""
    nsp = len(in_sp)
    auto = at.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    pads = at.get("pads")
    if auto == "VALID":
        return [0] * nsp
    if pads is not None and auto not in ("SAME_UPPER", "SAME_LOWER") and \
            "output_shape" not in at:
        return [int(p) for p in pads[:nsp]]
    opad = [int(v) for v in at.get("output_padding", [0] * nsp)]
    tot = [max(0, (n - 1) * st + (kk - 1) * dl + 1 + op - o)
           for n, o, kk, st, dl, op in zip(in_sp, out_sp, k, s, d, opad)]
    if auto == "SAME_UPPER":
        return [t // 2 for t in tot]
    return [t - t // 2 for t in tot]


def tap_slices(n_out, k, st, dl, p, lo, hi):
    """Per kernel tap along one axis: (input slice, output slice) of the
    input positions [lo, hi) whose contributions land inside the cropped
    output of n_out, or None when none does."""
    out = []
    for i in range(k):
        a = max(lo, -(-(p - i * dl) // st))
        b = min(hi - 1, (n_out - 1 + p - i * dl) // st)
        if a > b:
            out.append(None)
            continue
        o0 = a * st + i * dl - p
        out.append((slice(a - lo, b - lo + 1), slice(o0, o0 + (b - a) * st + 1, st)))
    return out


def setup_transpose_nd(k, w, at):
    """Weights, bands and scratch of ConvTranspose kernel ``k`` (NCHW, 3 or
    more spatial axes; ``w``: the (C, C_out / group, *kernel) weight)."""
    xs, ys = k.shape(0), k.oshape()
    nsp = len(xs) - 2
    if k.nhwc:
        k.fail(f"NHWC ConvTranspose with {nsp}-D spatial input is not supported")
    g = int(at.get("group", 1))
    N, C = xs[:2]
    in_sp, out_sp = list(xs[2:]), list(ys[2:])
    if w.ndim != nsp + 2 or w.shape[0] != C or g < 1 or C % g:
        k.malformed(f"weight {list(w.shape)} does not fit input {list(xs)} (group {g})")
    cog, ks = w.shape[1], list(w.shape[2:])
    cout = cog * g
    if len(ys) != len(xs) or ys[0] != N or ys[1] != cout:
        k.malformed(f"output {list(ys)} does not fit input {list(xs)} and weight "
                    f"{list(w.shape)}")
    s = [int(v) for v in at.get("strides", [1] * nsp)]
    d = [int(v) for v in at.get("dilations", [1] * nsp)]
    if len(s) != nsp or len(d) != nsp or min(s + d) < 1:
        k.malformed(f"strides {s} and dilations {d} must be {nsp} positive integers each")
    begin = transpose_pads(at, in_sp, out_sp, ks, s, d)
    taps = math.prod(ks)
    k.nd = (N, C, g, cog, cout, ks, in_sp)
    k.wm = k.keep(np.ascontiguousarray(w.reshape(g, C // g, cog * taps).transpose(0, 2, 1)))
    inner = math.prod(in_sp[1:])
    per_row = cout * taps * inner
    nh = items_per_step(k.scratch_budget, per_row * k.dtype.itemsize, in_sp[0], per_row)
    k.scratch = [((per_row * nh,), k.dtype)]
    rest = [tap_slices(out_sp[a], ks[a], s[a], d[a], begin[a], 0, in_sp[a])
            for a in range(1, nsp)]
    k.bands = []
    for h0 in range(0, in_sp[0], nh):
        h1 = min(h0 + nh, in_sp[0])
        first = tap_slices(out_sp[0], ks[0], s[0], d[0], begin[0], h0, h1)
        steps = []
        for tap in itertools.product(*[range(kk) for kk in ks]):
            per_axis = [first[tap[0]]] + [rest[a][tap[a + 1]] for a in range(nsp - 1)]
            if all(p is not None for p in per_axis):
                steps.append((tap, tuple(p[0] for p in per_axis),
                              tuple(p[1] for p in per_axis)))
        k.bands.append((h0, h1, steps))
    k.bias = None
    if k.has(2):
        k.bias = k.keep(k.const(2, "bias").astype(k.dtype).reshape((-1,) + (1,) * nsp))
    k.zero = const(0, k.dtype)


def run_transpose_nd(k, xs, ys, sc):
    N, C, g, cog, cout, ks, in_sp = k.nd
    buf = sc[0]
    x, y = xs[0], ys[0]
    inner = math.prod(in_sp[1:])
    taps = math.prod(ks)
    every = slice(None)
    for n in range(N):
        yn = y[n]
        if k.bias is not None:
            np.copyto(yn, k.bias)
        else:
            yn.fill(k.zero)
        xn = x[n].reshape(g, C // g, in_sp[0] * inner)
        for h0, h1, steps in k.bands:
            nb = h1 - h0
            cols = buf[:cout * taps * nb * inner]
            np.matmul(k.wm, xn[:, :, h0 * inner:h1 * inner],
                      out=cols.reshape(g, cog * taps, nb * inner))
            c = cols.reshape([cout] + ks + [nb] + in_sp[1:])
            for tap, src, dst in steps:
                out = yn[(every,) + dst]
                np.add(out, c[(every,) + tap + src], out=out)
