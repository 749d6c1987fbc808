"""erf in vectorised NumPy, shared by the Erf and Gelu kernels and Erf's
evaluator (folding): a rational approximation on whole arrays, never
``math.erf`` per element (the ONNX reference evaluator's way)."""
import numpy as np

from .registry import const

__all__ = ["ErfMixin", "erf_values"]


# erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (outside, erf is +-1 in
# float32): the rational approximation Eigen uses for float; max abs error
# 4.2e-7 against math.erf on [-6, 6] (tests/test_kernels.py checks it).
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)


class ErfMixin:
    def erf_consts(self, dtype=None):
        """The approximation's constants in ``dtype`` (None: the kernel's)."""
        d = self.dtype if dtype is None else np.dtype(dtype)
        self.ep = [const(v, d) for v in _ERF_P]
        self.eq = [const(v, d) for v in _ERF_Q]
        self.four, self.mfour = const(4, d), const(-4, d)

    def erf(self, u, e, t):
        """e = erf(u) where u is a buffer it may overwrite; t: a temporary."""
        np.minimum(u, self.four, out=u)
        np.maximum(u, self.mfour, out=u)
        np.multiply(u, u, out=t)                   # t = x^2
        np.multiply(t, self.ep[0], out=e)
        np.add(e, self.ep[1], out=e)
        for c in self.ep[2:]:
            np.multiply(e, t, out=e)
            np.add(e, c, out=e)
        np.multiply(e, u, out=e)                   # e = x P(x^2)
        np.multiply(t, self.eq[0], out=u)
        np.add(u, self.eq[1], out=u)
        for c in self.eq[2:]:
            np.multiply(u, t, out=u)
            np.add(u, c, out=u)
        np.divide(e, u, out=e)


def erf_values(x):
    """erf(x) by the kernel's own rational approximation, for folding (the
    ONNX reference evaluator calls math.erf once per element)."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:     # in float32, as ONNX's reference
        return erf_values(x.astype(np.float32)).astype(x.dtype)
    k = ErfMixin()
    k.dtype = x.dtype
    k.erf_consts()
    u = np.array(x, copy=True).reshape(-1)
    e, t = np.empty_like(u), np.empty_like(u)
    k.erf(u, e, t)
    return e.reshape(x.shape)
