"""Spectral-processing kernels: MelWeightMatrix (the triangular mel filter
bank of a DFT's bins).  Its inputs are scalars the kernel is built for
(constants, or values fed at run time), so setup works the matrix out
once, vectorised, and a run copies it."""
import numpy as np

from . import shape_rules as rules
from .registry import Kernel, register


def mel_weights(mels, dft, rate, low, high):
    """(dft // 2 + 1, mels) triangular filters between ``low`` and ``high``
    Hz, as ONNX's reference lays them out: mels + 2 edges a mel step
    apart (the step the range over mels + 2), each edge's bin
    ``(dft + 1) * hz // rate``; filter i rises from edge i to edge i + 1
    and falls to edge i + 2 (1 at its centre when it has no rise)."""
    def to_mel(hz):
        return 2595 * np.log1p(hz / 700) / np.log(10)
    lo_mel, hi_mel = to_mel(low), to_mel(high)
    edges = np.arange(mels + 2) * ((hi_mel - lo_mel) / (mels + 2)) + lo_mel
    hz = 700 * np.expm1(edges / 2595 * np.log(10))
    bins = (((dft + 1) * hz) // rate).astype(np.int64)
    lo, mid, hi = bins[:-2], bins[1:-1], bins[2:]
    j = np.arange(dft // 2 + 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.where(mid == lo, (j == mid).astype(float), (j - lo) / (mid - lo))
        fall = (hi - j) / (hi - mid)
    out = np.where((j >= lo) & (j <= mid), rise, 0.0)
    return np.where((j >= mid) & (j < hi) & (hi > mid), fall, out)


@register
class MelWeightMatrix(Kernel):
    """MelWeightMatrix (opset 17): :func:`mel_weights` in ``output_datatype``
    (float32 by default)."""

    op_types = ("MelWeightMatrix",)
    family = "other"
    shape_rule = rules.mel_weight_matrix
    fold = "expanding"

    def setup(self):
        self.runtime = ()
        vals = [np.asarray(self.const(i, what)).reshape(-1)[0] for i, what in enumerate(
            ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz",
             "upper_edge_hertz"))]
        mels, dft, rate = (int(v) for v in vals[:3])
        if mels < 1 or dft < 1 or rate < 1:
            self.malformed(f"num_mel_bins {mels}, dft_length {dft} and sample_rate {rate} "
                           f"must be positive")
        w = mel_weights(mels, dft, rate, float(vals[3]), float(vals[4]))
        if w.shape != self.oshape():
            self.malformed(f"the matrix is {list(w.shape)}, the output {list(self.oshape())}")
        self.w = self.keep(w.astype(self.dtype))

    def run(self, xs, ys, sc):
        np.copyto(ys[0], self.w)
