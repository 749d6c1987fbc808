"""TFLite importer: flatbuffers written in the test, checked against the
TFLite interpreter (ai-edge-litert), and malformed files."""
import numpy as np
import pytest

from tflite_util import TFLiteBuilder, small_cnn
from pyarena.executor import Executor, random_feeds
from pyarena.importers import ModelImportError, UnsupportedOpError, load_model
from pyarena.importers.tflite import reference_tflite
from pyarena.plan import plan


@pytest.mark.parametrize("budget", [None, 1], ids=["whole", "row-bands"])
@pytest.mark.parametrize("fp16", [False, True], ids=["fp32", "fp16-weights"])
def test_small_cnn_matches_tflite_interpreter(tmp_path, fp16, budget, monkeypatch):
    if budget is not None:     # conv / pool scratch in one-row bands
        import pyarena.kernels
        monkeypatch.setattr(pyarena.kernels, "SCRATCH_BUDGET", budget)
    path = small_cnn(tmp_path / "m.tflite", fp16=fp16, extra_outputs=True)
    g = load_model(path)
    # NHWC kept, TFLite names canonicalised, fused activations as attributes
    convs = [op for op in g.ops if op.op_type == "Conv"]
    assert len(convs) == 3 and all(op.attrs["layout"] == "NHWC" for op in convs)
    assert convs[0].attrs["activation"] == "RELU6"
    assert {"Sigmoid", "HardSwish", "ReduceMean", "FullyConnected", "Resize",
            "Concat", "Pad", "Softmax", "Add", "AveragePool", "MaxPool"} <= \
        {op.op_type for op in g.ops}
    # fp16 weights: DEQUANTIZE folded into a float32 constant, not an op
    assert "DEQUANTIZE" not in {op.op_type for op in g.ops}
    w = g.tensors["conv1/w"]
    assert w.role == "constant" and w.data.dtype == np.float32
    assert convs[0].scratch_bytes > 0
    p = plan(g)
    ex = Executor(g, p)
    feeds = random_feeds(g, seed=4)
    out = ex.run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    assert set(ref) == set(out)
    for k in out:
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=2e-5, err_msg=k)
    # NHWC kernels, fused activations and resizes allocate nothing either
    from pyarena import Pool, numpy_allocator
    with numpy_allocator(Pool()) as counter:
        ex.run(feeds)
    assert counter.allocations == 0


def test_truncated_and_wrong_magic(tmp_path):
    good = open(small_cnn(tmp_path / "m.tflite"), "rb").read()
    for i, blob in enumerate([good[:len(good) // 3], good[:12], b"",
                              b"ABCDEFGH" + good[8:], b"\x00" * 64]):
        p = tmp_path / f"bad{i}.tflite"
        p.write_bytes(blob)
        with pytest.raises(ModelImportError) as e:
            load_model(str(p))
        assert str(p) in str(e.value)


def test_absurd_and_negative_dimensions(tmp_path):
    for shape, what in [((1 << 20, 1 << 20, 1 << 20), "absurd"), ((1, -3, 4), "negative")]:
        B = TFLiteBuilder()
        x = B.tensor("x", shape)
        y = B.tensor("y", shape)
        B.op("RELU", [x], [y])
        path = B.save(tmp_path / f"{what}.tflite", [x], [y])
        with pytest.raises(ModelImportError, match=what + "|" + "'x'"):
            load_model(path)


def test_quantized_and_unknown_ops_are_named(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4), np.int8, quant=([0.1], [0]))
    y = B.tensor("y", (1, 4), np.int8, quant=([0.1], [0]))
    B.op("RELU", [x], [y])
    path = B.save(tmp_path / "q.tflite", [x], [y])
    with pytest.raises(UnsupportedOpError, match="relu_0.*quantized"):
        load_model(path)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    y = B.tensor("y", (1, 4))
    B.op("SQUARED_DIFFERENCE", [x, x], [y])
    path = B.save(tmp_path / "u.tflite", [x], [y])
    with pytest.raises(UnsupportedOpError, match="squared_difference_0"):
        load_model(path)


def test_int8_weights_dequantized_at_import(tmp_path):
    r = np.random.default_rng(0)
    q = r.integers(-100, 100, (4, 6)).astype(np.int8)
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 6))
    wq = B.tensor("wq", (4, 6), np.int8, data=q, quant=([0.02], [3]))
    w = B.tensor("w", (4, 6))
    B.op("DEQUANTIZE", [wq], [w])
    y = B.tensor("y", (2, 4))
    B.op("FULLY_CONNECTED", [x, w, -1], [y], ("FullyConnectedOptions",
                                             dict(FusedActivationFunction=1)))
    path = B.save(tmp_path / "w8.tflite", [x], [y])
    g = load_model(path)
    np.testing.assert_allclose(g.tensors["w"].data, (q.astype(np.float32) - 3) * 0.02,
                               rtol=1e-6)
    feeds = random_feeds(g)
    out = Executor(g).run(feeds)["y"]
    ref, _ = reference_tflite(path, feeds)
    np.testing.assert_allclose(out, ref["y"], rtol=1e-4, atol=1e-5)


def test_cyclic_graph(tmp_path):
    from pyarena.graph import GraphError
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    a = B.tensor("a", (1, 4))
    b = B.tensor("b", (1, 4))
    y = B.tensor("y", (1, 4))
    B.op("ADD", [x, b], [a])
    B.op("RELU", [a], [b])
    B.op("RELU", [b], [y])
    path = B.save(tmp_path / "cyc.tflite", [x], [y])
    with pytest.raises(GraphError, match="cycle"):
        load_model(path)
