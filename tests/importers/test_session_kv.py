"""InferenceSession(kv_cache=MaxContext(n)) on a decoder built in code
(tests/helpers/kv_decoder.py): every step's logits and presents against
onnxruntime's plain past/present loop on the same model, the presents
handed back as views of caches reserved once, a fed-back present used
where it lies, any other past copied in once, no NumPy allocation in a
steady-state step, and the forms it does not recognise refused."""
import traceback

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import pyarena
from pyarena import InvalidArgumentError, Pool, UnsupportedOpError, numpy_allocator
from pyarena.importers.session_kv import mask_table
from helpers.kv_decoder import decoder_model, empty_past

HEADS, HIDDEN, LAYERS = 4, 32, 2


MODEL = decoder_model(layers=LAYERS, hidden=HIDDEN, heads=HEADS, vocab=64, seed=3)


@pytest.fixture(scope="module")
def model_bytes():
    return MODEL.SerializeToString()


def _ort(model_bytes):
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])


def _feeds(ids, start, past):
    return dict(input_ids=ids, position_ids=np.arange(start, start + ids.shape[1])[None]
                .repeat(ids.shape[0], 0), **past)


def _pasts(outs):
    return {k.replace("present", "past_key_values"): v for k, v in outs.items()
            if k.startswith("present")}


def _loop(session, prompt, steps, *, feed_back=None, copy=True):
    """Greedy decoding: [(feeds, outputs)] per call, the prompt first;
    ``feed_back(outputs)`` -> the next pasts (default: the presents)."""
    names = [o.name for o in session.get_outputs()]
    past = empty_past(MODEL, prompt.shape[0])
    got, ids, start = [], prompt, 0
    for _ in range(steps):
        feeds = _feeds(ids, start, past)
        outs = dict(zip(names, session.run(None, feeds) if copy else
                        session.run(None, feeds, copy=False)))
        got.append((feeds, outs))
        start += ids.shape[1]
        ids = outs["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
        past = (feed_back or _pasts)(outs)
    return got


def _ort_reference(model_bytes, runs):
    """onnxruntime's outputs for the same feeds, its own presents fed back."""
    ref = _ort(model_bytes)
    names = [o.name for o in ref.get_outputs()]
    out, past = [], None
    for feeds, _ in runs:
        f = dict(feeds)
        if past is not None:
            f.update(past)
        got = dict(zip(names, ref.run(None, f)))
        out.append(got)
        past = _pasts(got)
    return out


def _session(model_bytes, n, **kw):
    return pyarena.InferenceSession(model_bytes, kv_cache=pyarena.MaxContext(n), **kw)


def test_matches_onnxruntime_every_step_for_70_steps(model_bytes):
    prompt = np.array([[5, 9, 2, 7, 11]])
    kv = _session(model_bytes, 80)
    runs = _loop(kv, prompt, 70)
    ref = _ort_reference(model_bytes, runs)
    for i, ((_, got), want) in enumerate(zip(runs, ref)):
        assert set(got) == set(want)
        for name in want:
            assert got[name].shape == want[name].shape, (i, name)
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5,
                                       err_msg=f"step {i} {name}")
    # the same tokens: greedy decoding took the same path
    assert [int(f["input_ids"][0, -1]) for f, _ in runs[1:]] == \
        [int(w["logits"][0, -1].argmax()) for w in ref[:-1]]
    info = kv.memory_info()
    # one plan for the prompt, one for every decode step; a cache per pair
    assert info["kv_plans"] == 2 and info["kv_steps"] == 70
    assert info["kv_cache_allocations"] == 2 * LAYERS
    assert info["kv_cache_bytes"] == 2 * LAYERS * 1 * HEADS * 80 * (HIDDEN // HEADS) * 4
    assert info["kv_past_copies"] == 0 and info["kv_past_copied_bytes"] == 0


def test_matches_pyarena_without_kv_cache(model_bytes):
    prompt = np.array([[1, 2, 3]])
    kv = _session(model_bytes, 40)
    runs = _loop(kv, prompt, 20)
    plain = pyarena.InferenceSession(model_bytes)
    names = [o.name for o in plain.get_outputs()]
    past = None
    for feeds, got in runs:
        f = dict(feeds, **(past or {}))
        want = dict(zip(names, plain.run(None, f)))
        for name in names:      # sums over 40 keys, the dead ones 0: rounding only
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5)
        past = _pasts(want)


def test_presents_are_views_of_one_cache(model_bytes):
    kv = _session(model_bytes, 16)
    runs = _loop(kv, np.array([[4, 4]]), 5)
    first, last = runs[0][1]["present.0.key"], runs[-1][1]["present.0.key"]
    assert first.shape == (1, HEADS, 2, HIDDEN // HEADS)
    assert last.shape == (1, HEADS, 6, HIDDEN // HEADS)
    assert np.shares_memory(first, last)
    assert first.__array_interface__["data"][0] == last.__array_interface__["data"][0]
    # the past rows were not moved: the first present is the last's prefix
    np.testing.assert_array_equal(first, last[:, :, :2])


def test_a_past_not_from_the_cache_is_copied_in_once(model_bytes):
    prompt = np.array([[3, 1, 4]])
    kv = _session(model_bytes, 24)
    runs = _loop(kv, prompt, 8, feed_back=lambda outs: {k: np.array(v) for k, v in
                                                         _pasts(outs).items()})
    ref = _ort_reference(model_bytes, runs)
    for (_, got), want in zip(runs, ref):
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=0, atol=1e-5)
    info = kv.memory_info()
    assert info["kv_past_copies"] == 7 * 2 * LAYERS     # every past after the prompt
    rows = sum(range(3, 3 + 7))                          # past lengths 3..9
    assert info["kv_past_copied_bytes"] == 2 * LAYERS * HEADS * (HIDDEN // HEADS) * 4 * rows


def test_an_earlier_present_fed_again_rewinds(model_bytes):
    """The present of step 2 fed after step 5: used where it lies (its rows
    are still the cache's first ones), the decoding goes on from there."""
    kv = _session(model_bytes, 24)
    runs = _loop(kv, np.array([[7, 3]]), 6)
    feeds2, outs2 = runs[2]
    nxt = outs2["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
    again = _feeds(nxt, 4, _pasts(outs2))
    got = dict(zip(outs2, kv.run(None, again)))
    want_runs = _ort_reference(model_bytes, runs[:3] + [(again, None)])
    np.testing.assert_allclose(got["logits"], want_runs[3]["logits"], rtol=0, atol=1e-5)
    assert kv.memory_info()["kv_past_copies"] == 0


def test_a_present_seen_through_another_view_is_used_where_it_lies(model_bytes):
    """The very views a run handed out are taken as they are (nothing
    compared); other view objects of the same rows go through the
    comparison: the same outputs bit for bit, no copy either way."""
    prompt = np.array([[6, 2, 9]])
    same = _loop(_session(model_bytes, 24), prompt, 8)
    other_kv = _session(model_bytes, 24)
    other = _loop(other_kv, prompt, 8, feed_back=lambda outs: {k: v[...] for k, v in
                                                              _pasts(outs).items()})
    for (_, a), (_, b) in zip(same, other):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    assert other_kv.memory_info()["kv_past_copies"] == 0


def test_batch_of_two(model_bytes):
    kv = _session(model_bytes, 20)
    runs = _loop(kv, np.array([[1, 2, 3], [9, 8, 7]]), 6)
    ref = _ort_reference(model_bytes, runs)
    for (_, got), want in zip(runs, ref):
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5)


def test_a_decode_step_allocates_nothing(model_bytes):
    kv = _session(model_bytes, 32)
    runs = _loop(kv, np.array([[2, 5]]), 4, copy=False)
    feeds, outs = runs[-1]
    past = _pasts(outs)
    ids = outs["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
    steps = [_feeds(ids, 5 + i, {}) for i in range(3)]
    names = [o.name for o in kv.get_outputs()]
    with numpy_allocator(Pool()) as counter:
        for f in steps:
            outs = dict(zip(names, kv.run(None, dict(f, **past), copy=False)))
            past = _pasts(outs)
    assert counter.allocations == 0
    # the counter sees the plain session's copies of the past
    plain = pyarena.InferenceSession(model_bytes)
    f = dict(steps[0], **{k: np.array(v) for k, v in past.items()})
    plain.run(None, f, copy=False)
    with numpy_allocator(Pool()) as counter:
        plain.run(None, f)
    assert counter.allocations > 0


def test_past_the_max_context_is_refused(model_bytes):
    kv = _session(model_bytes, 6)
    _loop(kv, np.array([[1, 2, 3, 4]]), 3)      # past 4 + 1, then 5 + 1 = 6
    with pytest.raises(InvalidArgumentError, match="max context 6"):
        _loop(kv, np.array([[1, 2, 3, 4]]), 4)
    with pytest.raises(InvalidArgumentError, match="MaxContext"):
        pyarena.MaxContext(0)
    with pytest.raises(InvalidArgumentError, match="kv_cache and buckets"):
        pyarena.InferenceSession(model_bytes, kv_cache=pyarena.MaxContext(8), buckets="pow2")


def test_mask_table_hand_worked():
    m = mask_table(2, 3)
    low = np.finfo(np.float32).min
    # row i allows columns c <= 3 + i
    assert m.shape == (2, 6)
    np.testing.assert_array_equal(m[0], [0, 0, 0, 0, low, low])
    np.testing.assert_array_equal(m[1], [0, 0, 0, 0, 0, low])
    # past 1: columns [2, 5): query 0 sees keys 0..1, query 1 keys 0..2
    np.testing.assert_array_equal(m[:, 2:5], [[0, 0, low], [0, 0, 0]])


def _gqa_decoder():
    """One GroupQueryAttention taking the past: not the Concat form."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_key", "past_value",
                                                    "seqlens_k", "total"],
                            ["y", "present_key", "present_value"], domain="com.microsoft",
                            num_heads=2, kv_num_heads=2)
    g = helper.make_graph([node], "gqa", [
        vi("q", TensorProto.FLOAT, [1, 1, 8]), vi("k", TensorProto.FLOAT, [1, 1, 8]),
        vi("v", TensorProto.FLOAT, [1, 1, 8]),
        vi("past_key", TensorProto.FLOAT, [1, 2, "past", 4]),
        vi("past_value", TensorProto.FLOAT, [1, 2, "past", 4]),
        vi("seqlens_k", TensorProto.INT32, [1]), vi("total", TensorProto.INT32, [])],
        [vi("y", TensorProto.FLOAT, None), vi("present_key", TensorProto.FLOAT, None),
         vi("present_value", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("com.microsoft", 1)])


def test_group_query_attention_form_is_refused_by_name():
    s = pyarena.InferenceSession(_gqa_decoder().SerializeToString(),
                                 kv_cache=pyarena.MaxContext(8))
    f = dict(q=np.zeros((1, 1, 8), np.float32), k=np.zeros((1, 1, 8), np.float32),
             v=np.zeros((1, 1, 8), np.float32), past_key=np.zeros((1, 2, 2, 4), np.float32),
             past_value=np.zeros((1, 2, 2, 4), np.float32),
             seqlens_k=np.array([2], np.int32), total=np.array(3, np.int32))
    with pytest.raises(UnsupportedOpError, match="GroupQueryAttention"):
        s.run(None, f)


def test_present_read_by_other_ops_is_refused():
    m = decoder_model(layers=1, hidden=16, heads=2, vocab=16, seed=1)
    # a ReduceSum over the present: the masked rows would count
    m.graph.node.append(helper.make_node("ReduceSum", ["present.0.value"], ["total"],
                                         keepdims=0))
    m.graph.output.append(helper.make_tensor_value_info("total", TensorProto.FLOAT, None))
    s = pyarena.InferenceSession(m.SerializeToString(), kv_cache=pyarena.MaxContext(8))
    with pytest.raises(UnsupportedOpError, match="present.0.value.*ReduceSum"):
        s.run(None, _feeds(np.array([[1]]), 0, empty_past(m)))


def test_past_read_by_other_ops_is_refused():
    m = decoder_model(layers=1, hidden=16, heads=2, vocab=16, seed=1)
    m.graph.node.append(helper.make_node("ReduceSum", ["past_key_values.0.key"], ["total"],
                                         keepdims=0))
    m.graph.output.append(helper.make_tensor_value_info("total", TensorProto.FLOAT, None))
    s = pyarena.InferenceSession(m.SerializeToString(), kv_cache=pyarena.MaxContext(8))
    with pytest.raises(UnsupportedOpError, match="past_key_values.0.key.*ReduceSum"):
        s.run(None, _feeds(np.array([[1]]), 0, empty_past(m)))


def test_a_model_without_the_concat_is_refused():
    m = decoder_model(layers=1, hidden=16, heads=2, vocab=16, seed=1)
    for node in m.graph.node:       # present made by another op than Concat
        if node.op_type == "Concat":
            node.op_type = "Sum"
            del node.attribute[:]
            node.input[:] = [node.input[0], node.input[0]]
    s = pyarena.InferenceSession(m.SerializeToString(), kv_cache=pyarena.MaxContext(8))
    with pytest.raises(UnsupportedOpError, match="no past/present pair.*Sum"):
        s.run(None, _feeds(np.array([[1]]), 0, empty_past(m)))


def test_a_past_at_the_cache_address_laid_out_otherwise_is_copied():
    """A past that starts where the cache does but reads it with other
    strides (a contiguous (1, heads, past, size) over the cache's memory)
    holds other values than the cache's rows: it is copied in."""
    kv = _session(model_bytes := MODEL.SerializeToString(), 16)
    runs = _loop(kv, np.array([[6, 1, 5]]), 2)
    feeds, outs = runs[-1]
    past = {}
    for k, v in _pasts(outs).items():
        flat = np.lib.stride_tricks.as_strided(v, shape=v.shape,
                                               strides=np.zeros(v.shape).astype(v.dtype).strides)
        assert flat.__array_interface__["data"][0] == v.__array_interface__["data"][0]
        past[k] = flat
    want_past = {k: np.array(v) for k, v in past.items()}    # the values it reads
    assert not all(np.array_equal(want_past[k], v) for k, v in _pasts(outs).items())
    f = _feeds(np.array([[3]]), 4, past)
    got = dict(zip(outs, kv.run(None, f)))
    ref = _ort(model_bytes)
    want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, dict(f, **want_past))))
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=0, atol=1e-5)
    assert kv.memory_info()["kv_past_copies"] == 2 * LAYERS


def test_a_transposed_present_read_by_other_ops_is_refused():
    m = decoder_model(layers=1, hidden=16, heads=2, vocab=16, seed=1)
    m.graph.node.extend([
        helper.make_node("Transpose", ["present.0.key"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("Add", ["kt", "kt"], ["twice"])])
    m.graph.output.append(helper.make_tensor_value_info("twice", TensorProto.FLOAT, None))
    s = pyarena.InferenceSession(m.SerializeToString(), kv_cache=pyarena.MaxContext(8))
    with pytest.raises(UnsupportedOpError, match="'present.0.key' is read by Transpose"):
        s.run(None, _feeds(np.array([[1]]), 0, empty_past(m)))


def test_weights_held_once(model_bytes):
    """Four imports (a probe and a step graph for the prompt, then for a
    decode step) hold the weights as a plain session's two signatures do."""
    kv = _session(model_bytes, 16)
    runs = _loop(kv, np.array([[4, 2, 9]]), 3)
    plain = pyarena.InferenceSession(model_bytes)
    plain.run(None, runs[0][0])
    plain.run(None, dict(runs[1][0], **{k: np.array(v) for k, v in
                                         _pasts(runs[0][1]).items()}))
    file_bytes = sum(np.prod(t.dims) * 4 for t in MODEL.graph.initializer
                     if t.data_type == TensorProto.FLOAT)
    # (small folds differ: the causal mask's shape is the step's)
    assert kv.memory_info()["weights_bytes"] <= 1.05 * plain.memory_info()["weights_bytes"]
    assert kv.memory_info()["weights_bytes"] < 1.5 * file_bytes



def test_a_later_step_shares_the_first_steps_weights_and_packing(model_bytes, monkeypatch):
    """The decode step's graph reads the prompt step's constants (the
    model file's initializers taken as the first import placed them,
    without comparing) and its linear layers take the prompt step's
    packed weights, not packed again; its outputs still match
    onnxruntime's (test_matches_onnxruntime_every_step_for_70_steps)."""
    import pyarena._native.kernels as nk
    # weights of 4 KiB and more: read where they lie in the file (smaller
    # ones are decoded again by each import, and packed again)
    model = decoder_model(layers=1, hidden=64, heads=4, vocab=64, seed=5)
    kv = pyarena.InferenceSession(model.SerializeToString(), kv_cache=pyarena.MaxContext(16))
    names = [o.name for o in kv.get_outputs()]
    outs = dict(zip(names, kv.run(None, _feeds(np.array([[4, 2, 9]]), 0, empty_past(model)))))
    packs, pack = [], nk.pack_conv2d

    def counted(*a, **k):       # (the import's own folds may pack: not counted)
        if any(f.name in ("build_kernels", "executor_kernels")
               for f in traceback.extract_stack()):
            packs.append(1)
        return pack(*a, **k)
    monkeypatch.setattr(nk, "pack_conv2d", counted)
    kv.run(None, _feeds(np.array([[1]]), 3, _pasts(outs)))
    assert packs == []
    first, later = (st for st in kv._kv._steps.values())
    inits = {t.name for t in model.graph.initializer}
    shared = [n for n, t in later.graph.tensors.items()
              if t.role == "constant" and n in inits and n in first.graph.tensors]
    assert shared
    for n in shared:
        assert later.graph.tensors[n].data is first.graph.tensors[n].data, n
    packed = {k.op.name: k.packed for k in first.executor.kernels
              if getattr(k, "packed", None) is not None}
    linear = [k for k in later.executor.kernels if k.op.name in packed]
    assert len(linear) >= 4
    for k in linear:
        assert k.packed is packed[k.op.name], k.op.name


def test_presents_no_attention_reads_are_refused():
    """The attention reads the new keys and values, not the presents:
    no scores over the cache to mask, so the mode refuses."""
    m = decoder_model(layers=1, hidden=16, heads=2, vocab=16, seed=1)
    new = {n.output[0]: n.input[1] for n in m.graph.node if n.op_type == "Concat"}
    for node in m.graph.node:
        if node.op_type != "Concat":
            node.input[:] = [new.get(x, x) for x in node.input]
    s = pyarena.InferenceSession(m.SerializeToString(), kv_cache=pyarena.MaxContext(8))
    with pytest.raises(UnsupportedOpError, match="no attention over the presents"):
        s.run(None, _feeds(np.array([[1]]), 0, empty_past(m)))


def test_a_fused_attention_reads_only_the_live_rows(model_bytes):
    """The import fuses each attention (pyarena.Attention): the step graph
    feeds it the past length instead of a mask, and the cache rows past
    the live ones are never read -- NaN written there changes nothing."""
    kv = _session(model_bytes, 24)
    runs = _loop(kv, np.array([[3, 1, 4]]), 2)
    step = next(s for s in kv._kv._steps.values() if s.rows == 1)
    fused = [op for op in step.graph.ops if op.op_type == "pyarena.Attention"]
    assert len(fused) == LAYERS and all(op.inputs[-1] == "pyarena.kv_position" for op in fused)
    assert "pyarena.kv_mask" not in step.graph.tensors
    # the heads' Transposes before the cache writes are absorbed too
    appends = [op for op in step.graph.ops if op.op_type == "pyarena.KvCacheAppend"]
    assert len(appends) == 2 * LAYERS and all(op.attrs["perm"] == [0, 2, 1, 3]
                                              for op in appends)
    assert "Transpose" not in [op.op_type for op in step.graph.ops]
    for cache in kv._kv._caches.values():
        cache[:, :, 5:] = np.nan        # past the 3 + 1 rows written, and the next
    runs += _loop(kv, np.array([[3, 1, 4]]), 3)[-1:]      # (rewinds: prompt, then 2 steps)
    want = _ort_reference(model_bytes, runs[2:])
    for (_, got), ref in zip(runs[2:], want):
        assert np.isfinite(got["logits"]).all()
        np.testing.assert_allclose(got["logits"], ref["logits"], rtol=0, atol=1e-5)
