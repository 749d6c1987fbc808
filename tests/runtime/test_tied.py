"""Tied weights held once (runtime/tied.py): a linear layer whose weight is
a Gather's table (a language model's tied embedding, transposed or as it
lies) reads the table's copy in the weights arena instead of packing a
second one, with the same results as the packed path and onnxruntime;
other weights are packed as before."""
import numpy as np
import pytest
from onnx import helper

import pyarena
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor, tied
from pyarena.runtime.tied import note_tied_weights

VOCAB, HIDDEN = 2048, 160          # a 1.25 MiB table: over TIED_MIN_BYTES


def _lm(path, form="transpose", vocab=VOCAB, hidden=HIDDEN, seed=0):
    """ids -> Gather(emb) -> Tanh -> logits by the tied weight, in ``form``:
    MatMul(h, Transpose(emb)), Gemm(h, emb, transB=1), or (``untied``) a
    MatMul over a separate copy of the table."""
    emb = np.random.default_rng(seed).standard_normal((vocab, hidden)).astype(np.float32)
    inits = {"emb": emb}
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"]),
             helper.make_node("Tanh", ["x"], ["h"])]
    if form == "transpose":
        nodes += [helper.make_node("Transpose", ["emb"], ["embT"], perm=[1, 0]),
                  helper.make_node("MatMul", ["h", "embT"], ["logits"])]
        ids = ["B", "S"]
    elif form == "gemm":
        nodes += [helper.make_node("Gemm", ["h", "emb"], ["logits"], transB=1)]
        ids = ["S"]
    else:
        inits["w"] = np.ascontiguousarray(emb.T)
        nodes += [helper.make_node("MatMul", ["h", "w"], ["logits"])]
        ids = ["B", "S"]
    make_model(nodes, {"ids": (ids, np.int64)}, {"logits": (None, np.float32)}, inits,
               path=path)
    return emb


def _ids(shape, seed, vocab=VOCAB):
    return np.random.default_rng(seed).integers(0, vocab, size=shape).astype(np.int64)


def _want(emb, ids):
    return np.tanh(emb[ids]) @ emb.T


@pytest.mark.parametrize("form", ["transpose", "gemm"])
def test_a_tied_output_layer_reads_the_embedding_and_holds_it_once(tmp_path, form):
    path = str(tmp_path / "lm.onnx")
    emb = _lm(path, form)
    s = pyarena.InferenceSession(path)
    shapes = [(1, 7), (1, 1), (2, 5)] if form == "transpose" else [(7,), (1,), (12,)]
    for i, shape in enumerate(shapes):
        ids = _ids(shape, i)
        (y,) = s.run(None, {"ids": ids})
        np.testing.assert_allclose(y, _want(emb, ids), rtol=1e-4, atol=1e-4)
        # the table once (and a few small things), not a packed copy beside it
        assert s.memory_info()["weights_bytes"] < 1.25 * emb.nbytes
    linear = [op for op in s._built.graph.ops if op.op_type in ("MatMul", "Gemm")]
    assert [op.notes.tied_weight[1] for op in linear] == ["emb"]


def test_an_untied_weight_is_packed_as_before(tmp_path):
    path = str(tmp_path / "lm.onnx")
    emb = _lm(path, "untied")
    s = pyarena.InferenceSession(path)
    ids = _ids((1, 9), 3)
    (y,) = s.run(None, {"ids": ids})
    np.testing.assert_allclose(y, _want(emb, ids), rtol=1e-4, atol=1e-4)
    assert s.memory_info()["weights_bytes"] >= 2 * emb.nbytes
    assert all(op.notes.tied_weight is None for op in s._built.graph.ops)
    assert any(getattr(k, "packed", None) is not None for k in s._built.kernels)


def test_a_small_table_is_packed_and_the_two_paths_agree(tmp_path, monkeypatch):
    # the tied path (BLAS over the table) and the packed one give the same
    # logits within float rounding, and match onnxruntime
    path = str(tmp_path / "lm.onnx")
    emb = _lm(path, "transpose")
    ids = _ids((2, 6), 4)
    got = {}
    for name, floor in (("tied", tied.TIED_MIN_BYTES), ("packed", emb.nbytes + 1)):
        monkeypatch.setattr(tied, "TIED_MIN_BYTES", floor)
        g = load_model(path, inputs={"ids": list(ids.shape)})
        ex = Executor(g)
        mm = next(k for op, k in zip(g.ops, ex.kernels) if op.op_type == "MatMul")
        assert (mm.path == "numpy") == (name == "tied")
        got[name] = ex.run({"ids": ids})["logits"].copy()
    np.testing.assert_allclose(got["tied"], got["packed"], rtol=1e-5, atol=1e-5)
    ort = pytest.importorskip("onnxruntime")
    (ref,) = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"ids": ids})
    np.testing.assert_allclose(got["tied"], ref, rtol=1e-5, atol=1e-5)


def test_the_note_follows_the_memory_not_the_names(tmp_path):
    # a weight equal to the table but in memory of its own is not tied; a
    # stale note is cleared when the weight no longer shares the table
    path = str(tmp_path / "lm.onnx")
    _lm(path, "transpose")
    g = load_model(path, inputs={"ids": [1, 3]})
    assert [op.op_type for op in note_tied_weights(g)] == ["MatMul"]
    mm = next(op for op in g.ops if op.op_type == "MatMul")
    w = g.tensors[mm.inputs[1]]
    w.data = np.ascontiguousarray(w.data)        # the same values, copied
    assert note_tied_weights(g) == [] and mm.notes.tied_weight is None


def test_a_decoder_with_a_tied_head_decodes_the_same_tokens_with_its_kv_cache(tmp_path):
    from helpers.kv_decoder import decoder_model
    path = str(tmp_path / "dec.onnx")
    m = decoder_model(layers=1, hidden=128, heads=2, vocab=4096, ffn=256,
                      max_positions=40, seed=1)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    kv = pyarena.InferenceSession(path, kv_cache=pyarena.MaxContext(40))
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in kv.get_outputs()]
    past = {f"past_key_values.0.{p}": np.zeros((1, 2, 0, 64), np.float32)
            for p in ("key", "value")}
    ids, start = np.arange(1, 9, dtype=np.int64)[None], 0
    for _ in range(12):
        feeds = dict(input_ids=ids, position_ids=np.arange(
            start, start + ids.shape[1], dtype=np.int64)[None], **past)
        outs = dict(zip(names, kv.run(None, feeds)))
        want = ref.run(["logits"], feeds)[0]
        np.testing.assert_allclose(outs["logits"], want, rtol=1e-4, atol=1e-4)
        start += ids.shape[1]
        ids = np.array([[int(outs["logits"][0, -1].argmax())]], np.int64)
        past = {k.replace("present", "past_key_values"): v for k, v in outs.items()
                if k.startswith("present")}
    info = kv.memory_info()
    assert info["kv_past_copies"] == 0
    emb = 4096 * 128 * 4       # the table, held once: the other weights are ~0.4 MiB
    assert emb <= info["weights_bytes"] < emb + (1 << 20)


def test_a_tied_model_compiles_with_the_table_once_and_runs_bit_for_bit(tmp_path):
    import os
    from pyarena.importers.compiler import compile_model
    path, out = str(tmp_path / "lm.onnx"), str(tmp_path / "lm.pa")
    emb = _lm(path, "transpose")
    compile_model(path, out, inputs={"ids": [1, 5]})
    ids = _ids((1, 5), 8)
    (a,) = pyarena.InferenceSession(path).run(None, {"ids": ids})
    c = pyarena.InferenceSession(out)
    (b,) = c.run(None, {"ids": ids})
    assert np.array_equal(a, b)
    assert os.path.getsize(out) < 1.25 * emb.nbytes
    assert c.memory_info()["weights_bytes"] < 1.25 * emb.nbytes


@pytest.mark.parametrize("ref", [["nope", [1, 0]], ["emb", [0, 0]], ["emb", [1.0, 0.0]],
                                 ["emb", [0, 1]], ["emb"], "emb", ["embT", [1, 0]]])
def test_a_damaged_view_reference_in_a_compiled_graph_is_a_clear_error(tmp_path, ref):
    from pyarena.importers.compiled_codec import decode_graph, encode_graph
    from pyarena.importers.compiled_format import Blob
    path = str(tmp_path / "lm.onnx")
    _lm(path, "transpose")
    g = load_model(path, inputs={"ids": [1, 2]})
    blob = Blob()
    d = encode_graph(g, blob)
    (td,) = [t for t in d["tensors"] if "view_of" in t]
    assert td["view_of"][0] == "emb"
    td["view_of"] = ref
    with pytest.raises(ValueError):
        decode_graph(d, blob.arrays)
