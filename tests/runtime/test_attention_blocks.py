"""An encoder's attention (pyarena.Attention over many query rows) on
the C core's blocked path (csrc/kernels/attention.c: four query rows at
a time, AVX-512 registers where usable) against the BLAS path it replaced
(kernels/attention_fused.py, ``BLAS_ROWS``) and onnxruntime."""
import numpy as np
import onnx
import pytest

from helpers.encoder_models import encoder
from helpers.model_zoo import ort_run
from pyarena.importers import load_model
from pyarena.runtime import Executor
from pyarena.runtime.kernels import attention_fused

ATT = "pyarena.Attention"


def _attention_kernels(ex):
    return [k for k, op in zip(ex.kernels, ex.graph.ops) if op.op_type == ATT]


# head sizes 48 (an output tile of 32 and one of 16), 24 (the scalar
# remainder) and 64; row counts not a multiple of the block of 4 nor of
# the 32-key score tile
@pytest.mark.parametrize("hidden,heads,rows", [(96, 2, 37), (48, 2, 70), (128, 2, 33)])
def test_the_blocked_path_matches_blas_and_onnxruntime(tmp_path, monkeypatch, hidden, heads,
                                                       rows):
    path = tmp_path / "enc.onnx"
    onnx.save(encoder(layers=2, hidden=hidden, heads=heads, seed=rows), str(path))
    feeds = {"x": np.random.default_rng(rows).standard_normal((2, rows, hidden))
             .astype(np.float32)}
    shapes = {"x": (2, rows, hidden)}
    c_ex = Executor(load_model(str(path), inputs=shapes))
    assert [k.blas for k in _attention_kernels(c_ex)] == [False, False]
    monkeypatch.setattr(attention_fused, "BLAS_ROWS", 4)
    blas_ex = Executor(load_model(str(path), inputs=shapes))
    assert [k.blas for k in _attention_kernels(blas_ex)] == [True, True]
    got, old = c_ex.run(feeds), blas_ex.run(feeds)
    ref = ort_run(path, feeds)
    for name, want in ref.items():
        np.testing.assert_allclose(got[name], old[name], rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=2e-5)
