"""End to end: a tiny BERT-like encoder (2 layers, hidden 32) built from
standard ONNX ops, and the com.microsoft form onnxruntime's transformer
optimizer fuses it into (EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu or FastGelu), run by pyarena's
InferenceSession and by onnxruntime: the same hidden states."""
import collections
import logging

import numpy as np
import pytest

import pyarena

from helpers.contrib_models import assert_close, both
from helpers.tiny_bert import bert_feeds, tiny_bert

optimizer = pytest.importorskip("onnxruntime.transformers.optimizer")
pytest.importorskip("sympy")        # (the optimizer's shape inference needs it)


def _fused(model, approximate_gelu=False):
    """The optimizer's fused form of a copy of ``model`` (it rewrites the
    ModelProto it is given in place)."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    copy = type(model)()
    copy.CopyFrom(model)
    options = FusionOptions("bert")
    options.enable_gelu_approximation = approximate_gelu
    logging.disable(logging.WARNING)
    try:
        out = optimizer.optimize_model(copy, model_type="bert", num_heads=4, hidden_size=32,
                                       opt_level=0, optimization_options=options)
    finally:
        logging.disable(logging.NOTSET)
    return out.model


def _ops(model):
    return collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)


def test_the_unfused_encoder_matches_onnxruntime():
    feeds = bert_feeds(np.random.default_rng(0))
    got, ref = both(tiny_bert().SerializeToString(), feeds)
    assert_close(got, ref, atol=1e-5)


@pytest.mark.parametrize("approximate_gelu", [False, True])
def test_the_optimizer_fused_encoder_matches_onnxruntime(approximate_gelu):
    model = tiny_bert()
    fused = _fused(model, approximate_gelu)
    ops = _ops(fused)
    ms = "com.microsoft"
    assert not [op for op in _ops(model) if op[0] == ms]        # the input stays unfused
    # the fused form is what this test is about: the contrib ops are there
    assert ops[(ms, "EmbedLayerNormalization")] == 1
    assert ops[(ms, "Attention")] == 2
    assert ops[(ms, "SkipLayerNormalization")] == 4
    assert ops[(ms, "FastGelu" if approximate_gelu else "BiasGelu")] == 2
    assert ops[("ai.onnx", "Softmax")] == ops[("ai.onnx", "Erf")] == 0
    for seed, (batch, seq) in enumerate([(2, 7), (1, 5), (3, 9)]):
        feeds = bert_feeds(np.random.default_rng(seed), batch, seq)
        got, ref = both(fused.SerializeToString(), feeds)
        assert_close(got, ref, atol=1e-5)
        if not approximate_gelu:        # (FastGelu computes another function than erf)
            unfused, = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)
            np.testing.assert_allclose(got[0], unfused, rtol=1e-4, atol=1e-4)
