"""Per-output-channel scales folded into a convolution's weights.

Fusion (:mod:`pyarena.runtime.fusion`) folds a BatchNormalization or a
constant affine map after a Conv into it: it computes the new bias, keeps
the weights constant as the file has it and records the scale in the
op's ``notes.weight_scales``; the Conv kernel applies the scales here where
it lays its weights out, so the folded weights are held once, in the
kernel's layout.
"""
import numpy as np

__all__ = ["fold_scales"]


def fold_scales(w, scales, axis=0):
    """``w`` (float32) with the ``scales`` (a Conv's ``notes.weight_scales``)
    folded in along its output-channel ``axis``: each in float64, rounded
    to float32 after each -- bit for bit what folding them into the graph's
    weights one at a time gave.  A new array (a block of ~1 MiB of float64
    at a time), or ``w`` itself when there are none."""
    if not scales:
        return w
    src = np.moveaxis(np.asarray(w), axis, 0)
    out = np.empty(src.shape, np.float32)
    per = max(1, (1 << 20) // max(1, src[:1].size * 8))
    tail = (1,) * (src.ndim - 1)
    vs = [np.frombuffer(s, np.float64) for s in scales]
    buf = np.empty((min(per, src.shape[0]),) + src.shape[1:], np.float64)
    for i in range(0, src.shape[0], per):
        blk = buf[:len(src[i:i + per])]
        for k, v in enumerate(vs):      # float32 x float64 in float64: exact products
            np.multiply(src[i:i + per] if k == 0 else out[i:i + per],
                        v[i:i + per].reshape((-1,) + tail), out=blk)
            out[i:i + per] = blk        # rounded to float32 after each fold
    return np.moveaxis(out, 0, axis)
