"""Each weight held once: an ONNX model's weights stay views of the file
until the executor places them; a batch norm folded into a convolution and
the NHWC pass's NHWC weights are not computed into graph constants but
where the kernel lays its weights out (the graph's constant stays the
file's, read at setup only); constants computed at load live in the
graph's weights arena, which the executor shares; a kernel's copy of a
weight replaces the graph's array instead of adding to it."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pyarena import InferenceSession
from pyarena.graph import conv_weight_shape
from pyarena.importers import load_model
from pyarena.memory import Arena
from pyarena.memory.mapped import is_mapped
from pyarena.runtime import Executor, fuse, random_feeds
from pyarena.runtime.kernels.weight_scales import fold_scales
from pyarena.runtime.models import resnet

BIG = 4096


def _conv_bn_model(path, c=32, blocks=3, seed=0):
    """x -> (Conv -> BatchNormalization -> Relu) x blocks, weights >= 36 KiB."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(blocks):
        w = rng.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.1
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        for k, v in (("s", 1 + 0.1 * rng.standard_normal(c)), ("b", rng.standard_normal(c)),
                     ("m", rng.standard_normal(c)), ("v", rng.uniform(0.5, 2, c))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), f"{k}{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization",
                                   [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"]),
                  helper.make_node("Relu", [f"n{i}"], [f"r{i}"])]
        x = f"r{i}"
    g = helper.make_graph(nodes, "cbr", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, 12, 12])], [helper.make_tensor_value_info(
            x, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return x


def _big_constants(g):
    return [t for t in g.tensors.values()
            if t.role == "constant" and np.asarray(t.data).nbytes > BIG]


@pytest.mark.parametrize("native", [True, False])
def test_onnx_weights_stay_file_views_when_batch_norms_are_folded(tmp_path, native):
    path = str(tmp_path / "m.onnx")
    _conv_bn_model(path)
    g = load_model(path, native=native)
    big = _big_constants(g)
    assert len(big) == 3
    for t in big:       # as stored in the file: the fold is the kernel's
        d = np.asarray(t.data)
        assert is_mapped(d) and not d.flags.writeable, t.name
    convs = [op for op in g.ops if op.op_type == "Conv"]
    assert all(bool(op.notes.weight_scales) == native for op in convs)
    assert g.weights is None or g.weights.stats().used < BIG    # the folded biases


@pytest.mark.parametrize("native", [True, False])
def test_after_the_executor_each_weight_lives_in_its_arena(tmp_path, native):
    path = str(tmp_path / "m.onnx")
    out = _conv_bn_model(path)
    g = load_model(path, native=native)
    ref = Executor(load_model(path, native=native), weights=Arena()).run(
        random_feeds(g, seed=1))[out].copy()
    ex = Executor(g)
    for t in _big_constants(g):
        # native: the kernels hold the folded weights, the graph the file's
        # (read at setup only); else the kernels' copy is the graph's
        d = np.asarray(t.data)
        assert is_mapped(d) if native else ex.weights.owns(d), t.name
    big = sum(np.asarray(t.data).nbytes for t in _big_constants(g))
    assert ex.weights_bytes < 1.3 * big          # not the graph's copy + the kernels'
    np.testing.assert_array_equal(ex.run(random_feeds(g, seed=1))[out], ref)


def test_built_in_model_weights_are_held_once():
    # (at 160 no convolution has as few output pixels as the direct
    # kernel's rule takes: Conv._few_pixels)
    g = resnet(18, resolution=160)
    fuse(g)
    total = sum(np.asarray(t.data).nbytes for t in g.tensors.values() if t.role == "constant")
    ex = Executor(g)
    # all but the 3-channel stem's, which the few-input-channel kernel
    # packs into a layout of its own at setup, and the classifier's, which
    # the Gemm packs for the C core's SGEMM (the graph keeps its arrays)
    packed = ("conv_1.weight", "classifier.weight")
    kept = [t for t in _big_constants(g) if t.name not in packed]
    assert len(kept) == len(_big_constants(g)) - 2
    for t in kept:
        assert ex.weights.owns(np.asarray(t.data)), t.name
    assert ex.weights_bytes < 1.1 * total


def test_a_second_executor_on_the_same_graph_gives_the_same_outputs(tmp_path):
    path = str(tmp_path / "m.onnx")
    out = _conv_bn_model(path, seed=4)
    g = load_model(path)
    feeds = random_feeds(g, seed=2)
    a = Executor(g).run(feeds)[out].copy()
    b = Executor(g, weights=Arena()).run(feeds)[out].copy()
    c = Executor(g).run(feeds)[out]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_folded_batch_norm_weights_are_exact(tmp_path):
    path = str(tmp_path / "m.onnx")
    _conv_bn_model(path, c=128, blocks=1, seed=7)     # 2 blocks of output channels
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in m.graph.initializer}
    s = init["s0"] / np.sqrt(init["v0"] + 1e-5)
    want = (init["w0"] * s[:, None, None, None]).astype(np.float32)
    g = load_model(path)
    conv = next(op for op in g.ops if op.op_type == "Conv")
    w = np.asarray(g.tensors[conv.inputs[1]].data)
    np.testing.assert_array_equal(w, init["w0"].astype(np.float32))     # the file's
    np.testing.assert_array_equal(fold_scales(w, conv.notes.weight_scales), want)
    ex = Executor(g)
    k = next(k for k in ex.kernels if k.op is conv)     # im2col: (1, C_out, K) matrices
    assert k.path == "im2col" and ex.weights.owns(k.wm)
    np.testing.assert_array_equal(k.wm.reshape(want.shape), want)


# -- a weight a kernel packs is held once: the NHWC pass and folded batch norms --

def _block_bn(path, c=16, e=96, seed=0):
    """MobileNetV2's block with batch norms: 1x1 expand, depthwise 3x3,
    1x1 project (each Conv -> BatchNormalization), residual Add, pool,
    classifier; input [1, c, H, W].  The 1x1 weights are 6 KiB each."""
    rng = np.random.default_rng(seed)
    f = (lambda *s: rng.uniform(-1, 1, s).astype(np.float32))
    inits, nodes = {}, []

    def conv_bn(x, y, cin, cout, k, group=1):
        inits[f"{y}.w"] = f(cout, cin // group, k, k)
        inits.update({f"{y}.g": 1 + 0.1 * f(cout), f"{y}.b": f(cout), f"{y}.m": f(cout),
                      f"{y}.v": rng.uniform(0.5, 2, cout).astype(np.float32)})
        nodes.append(helper.make_node("Conv", [x, f"{y}.w"], [f"{y}.c"], group=group,
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("BatchNormalization",
                                      [f"{y}.c"] + [f"{y}.{p}" for p in "gbmv"], [y]))
    conv_bn("x", "e", c, e, 1)
    nodes.append(helper.make_node("Clip", ["e", "lo", "hi"], ["e6"]))
    conv_bn("e6", "d", e, e, 3, group=e)
    nodes.append(helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]))
    conv_bn("d6", "p", e, c, 1)
    nodes += [helper.make_node("Add", ["p", "x"], ["r"]),
              helper.make_node("GlobalAveragePool", ["r"], ["gp"]),
              helper.make_node("Flatten", ["gp"], ["fl"]),
              helper.make_node("Gemm", ["fl", "wf"], ["y"], transB=1)]
    inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32), wf=f(10, c))
    g = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                       [1, c, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def _held_bytes(ex):
    """The weights arena's bytes accounted for: the arrays the kernels (and
    a Conv's path, ``impl``) keep there, the constants placed for run time,
    and the graph's small constants there (folded biases), each rounded to
    the arena's 64."""
    seen = {}
    for k in ex.kernels:
        for v in [*vars(k).values(), *vars(getattr(k, "impl", k)).values()]:
            if isinstance(v, np.ndarray) and ex.weights.owns(v):
                seen[v.__array_interface__["data"][0]] = v.nbytes
    for v in ex.constants.values():
        seen[v.__array_interface__["data"][0]] = v.nbytes
    for t in ex.graph.tensors.values():
        d = np.asarray(t.data) if t.role == "constant" and t.data is not None else None
        if d is not None and d.nbytes <= BIG and ex.weights.owns(d):
            seen[d.__array_interface__["data"][0]] = d.nbytes
    return sum(-(-n // 64) * 64 for n in seen.values())


@pytest.mark.parametrize("layout", ["auto", "keep", "nhwc"])
def test_the_weights_arena_holds_the_kernels_weights_and_nothing_else(tmp_path, layout):
    path = str(tmp_path / "b.onnx")
    _block_bn(path)
    g = load_model(path, inputs={"x": [1, 16, 12, 10]}, layout=layout)
    assert (g.relaid is not None) == (layout != "keep")
    ex = Executor(g)
    # no folded or re-laid out copy beside the packed one: every byte of the
    # arena is a kernel's array, a constant read at run time or a bias
    assert ex.weights_bytes == _held_bytes(ex)
    for op in g.ops:        # (the depthwise weights, 3.4 KiB, are read as small values)
        d = np.asarray(g.tensors[op.inputs[1]].data) if op.op_type == "Conv" else None
        if d is not None and d.nbytes > BIG:
            assert is_mapped(d), op.name


def test_the_layout_pass_costs_no_weight_bytes(tmp_path):
    path = str(tmp_path / "b.onnx")
    _block_bn(path)
    sizes = {}
    for layout in ("auto", "keep"):
        ex = Executor(load_model(path, inputs={"x": [1, 16, 12, 10]}, layout=layout))
        modes = {getattr(k, "mode", None) for k in ex.kernels}
        sizes[layout] = ex.weights_bytes
        assert ("1x1" in modes) == (layout == "keep")        # NCHW 1x1: BLAS
    # the NHWC kernels pack the 1x1 weights (with the bias: a little more
    # than the BLAS path's copy of them) instead of keeping them twice
    assert sizes["auto"] <= sizes["keep"] + 2 * 64


def _materialized(g):
    """``g`` as the graph held its weights before: folded and re-laid out
    into new constants (what the kernels now do at setup)."""
    for op in g.ops:
        if op.op_type != "Conv" or not (op.notes.weight_scales or op.notes.weights_oihw):
            continue
        t = g.tensors[op.inputs[1]]
        w = fold_scales(np.asarray(t.data), op.notes.weight_scales)
        op.notes.weight_scales = ()
        shape = conv_weight_shape(op, w.shape)
        if op.notes.weights_oihw:
            op.notes.weights_oihw = False
            w = w.reshape(w.shape[0], w.shape[2], w.shape[3]).transpose(1, 2, 0)[None] \
                if op.attrs.get("weight_layout") == "1HWC" else w.transpose(0, 2, 3, 1)
        assert w.shape == shape
        name = f"{t.name}.materialized"
        g.add_tensor(name, w.shape, "float32", role="constant", data=np.ascontiguousarray(w))
        op.inputs[1] = name
    return g


@pytest.mark.parametrize("layout", ["auto", "keep"])
def test_weights_folded_by_the_kernels_give_the_same_bits(tmp_path, layout):
    path = str(tmp_path / "b.onnx")
    _block_bn(path, seed=3)
    shapes = {"x": [1, 16, 12, 10]}
    g = load_model(path, inputs=shapes, layout=layout)
    assert any(op.notes.weight_scales for op in g.ops)
    old = _materialized(load_model(path, inputs=shapes, layout=layout))
    feeds = random_feeds(g, seed=5)
    np.testing.assert_array_equal(Executor(g).run(feeds)["y"], Executor(old).run(feeds)["y"])


def test_fold_scales_rounds_after_each_fold_in_blocks():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((300, 64, 3, 3)).astype(np.float32)    # 2 blocks of rows
    s1, s2 = rng.uniform(0.5, 2, 300), rng.uniform(0.5, 2, 300)
    once = (w.astype(np.float64) * s1[:, None, None, None]).astype(np.float32)
    want = (once.astype(np.float64) * s2[:, None, None, None]).astype(np.float32)
    got = fold_scales(w, (s1.tobytes(), s2.tobytes()))
    np.testing.assert_array_equal(got, want)
    taps = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))       # (kh, kw, C): axis -1
    np.testing.assert_array_equal(fold_scales(taps, (s1.tobytes(), s2.tobytes()), -1),
                                  want[:, 0].transpose(1, 2, 0))
    assert fold_scales(w, ()) is w


def test_a_session_holds_each_weight_once_at_every_width(tmp_path):
    path = str(tmp_path / "b.onnx")
    _block_bn(path, seed=2)
    auto, keep = InferenceSession(path), InferenceSession(path, layout="keep")
    for width in (10, 14, 10, 21, 7):
        x = np.random.default_rng(width).standard_normal((1, 16, 9, width)).astype(np.float32)
        (y,) = auto.run(None, {"x": x})
        keep.run(None, {"x": x})
        fresh = Executor(load_model(path, inputs={"x": list(x.shape)})).run({"x": x})["y"]
        np.testing.assert_array_equal(y, fresh)
        assert auto.memory_info()["weights_bytes"] <= keep.memory_info()["weights_bytes"]
    g = auto._first
    for name, t in g.constants.items():     # the file's weights, read at setup only
        if name.endswith(".w") and np.asarray(t.data).nbytes > BIG:
            assert is_mapped(np.asarray(t.data)), name


def test_each_kernel_gives_back_the_file_pages_its_setup_read(tmp_path, monkeypatch):
    # the bind's peak holds one layer's weights from the file at a time, not
    # every layer's until the last kernel is built
    from pyarena.runtime import keeper
    path = str(tmp_path / "b.onnx")
    _block_bn(path)
    g = load_model(path, inputs={"x": [1, 16, 12, 10]})
    events, make, release = [], keeper.make_kernel, keeper.release_pages

    def made(op, *a, **k):
        events.append(("built", op.name))
        return make(op, *a, **k)

    def released(arr, *a, **k):
        events.append(("released", arr.__array_interface__["data"][0]
                       if isinstance(arr, np.ndarray) else None))
        return release(arr, *a, **k)
    monkeypatch.setattr(keeper, "make_kernel", made)
    monkeypatch.setattr(keeper, "release_pages", released)
    Executor(g)
    convs = [op for op in g.ops if op.op_type == "Conv"]
    for op, nxt in zip(convs, convs[1:]):
        w = np.asarray(g.tensors[op.inputs[1]].data)
        if not is_mapped(w):
            continue
        at = events.index(("released", w.__array_interface__["data"][0]))
        assert events.index(("built", op.name)) < at < events.index(("built", nxt.name))


def test_a_signature_prepared_before_any_run_lends_its_weights_to_the_next(
        tmp_path, monkeypatch):
    # no run yet: the last built executor's kernels are the prior, so the next
    # signature's convolutions take its layouts instead of folding the file's
    # weights and packing them again
    from pyarena.runtime.kernels import conv_weights
    path = str(tmp_path / "b.onnx")
    _block_bn(path, seed=6)
    s = InferenceSession(path)
    sigs = [(("x", (1, 16, 9, w), None),) for w in (10, 13)]
    ctx = s._context()
    a = s._executor(ctx, sigs[0])
    folds = []
    monkeypatch.setattr(conv_weights, "fold_scales", lambda *args: folds.append(args) or
                        fold_scales(*args))
    b = s._executor(ctx, sigs[1])
    assert folds == []
    lent = [(ka.path, kb.packed is ka.packed)
            for ka, kb in zip(a.kernels, b.kernels) if ka.op.op_type == "Conv"]
    assert lent == [("native-gemm", True), ("native-dw", True), ("native-gemm", True)]
    x = np.random.default_rng(0).standard_normal((1, 16, 9, 13)).astype(np.float32)
    fresh = Executor(load_model(path, inputs={"x": [1, 16, 9, 13]})).run({"x": x})["y"]
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], fresh)


def _half_block(path, fp16, seed=0):
    """NHWC: 1x1 conv 16 -> 64 (the packed SGEMM), depthwise 3x3 (the native
    depthwise kernel), mean, fully connected; the conv weights float16
    through DEQUANTIZE (``fp16``) or float32 of the same (rounded) values."""
    from helpers.tflite_util import TFLiteBuilder
    rng = np.random.default_rng(seed)
    B = TFLiteBuilder()

    def weight(name, shape):
        w = (rng.standard_normal(shape) * 0.3).astype(np.float16)
        if not fp16:
            return B.const(name, w.astype(np.float32))
        out = B.tensor(name, shape)
        B.op("DEQUANTIZE", [B.const(name + "/f16", w, np.float16)], [out])
        return out
    f = (lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32))
    x = B.tensor("x", (1, 8, 8, 16))
    h1, h2 = B.tensor("h1", (1, 8, 8, 64)), B.tensor("h2", (1, 8, 8, 64))
    B.op("CONV_2D", [x, weight("pw/w", (64, 1, 1, 16)), B.const("pw/b", f(64))], [h1],
         ("Conv2DOptions", dict(Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=3,
                                DilationWFactor=1, DilationHFactor=1)))
    B.op("DEPTHWISE_CONV_2D", [h1, weight("dw/w", (1, 3, 3, 64)), B.const("dw/b", f(64))],
         [h2], ("DepthwiseConv2DOptions", dict(
             Padding=0, StrideW=1, StrideH=1, DepthMultiplier=1, FusedActivationFunction=1,
             DilationWFactor=1, DilationHFactor=1)))
    m = B.tensor("m", (1, 64))
    B.op("MEAN", [h2, B.const("axes", np.array([1, 2], np.int32), np.int32)], [m],
         ("ReducerOptions", dict(KeepDims=False)))
    y = B.tensor("y", (1, 10))
    B.op("FULLY_CONNECTED", [m, weight("fc/w", (10, 64)), B.const("fc/b", f(10))], [y],
         ("FullyConnectedOptions", dict(FusedActivationFunction=0)))
    return B.save(str(path), [x], [y])


def test_tflite_float16_weights_are_read_from_the_file_once(tmp_path):
    g = load_model(_half_block(tmp_path / "h.tflite", fp16=True))
    for name in ("pw/w", "dw/w", "fc/w"):
        t = g.tensors[name]       # float32 to the graph, the file's float16 view
        assert t.dtype == "float32" and t.data.dtype == np.float16 and is_mapped(t.data)
    ex = Executor(g)
    assert [getattr(k, "path", None) for k in ex.kernels if k.op.op_type == "Conv"] == \
        ["native-gemm", "native-dw"]
    # the packed convolutions and the fully connected layer's packed SGEMM
    # weights: no float32 copy of a packed weight beside them
    assert ex.weights_bytes == _held_bytes(ex)
    fc = next(k for k in ex.kernels if k.op.op_type == "FullyConnected")
    assert fc.packed is not None and ex.weights.owns(fc.packed)
    for name in ("pw/w", "dw/w", "fc/w"):
        assert is_mapped(g.tensors[name].data)
    # the same values as float32 constants: the same bits out
    g32 = load_model(_half_block(tmp_path / "f.tflite", fp16=False))
    feeds = random_feeds(g, seed=4)
    np.testing.assert_array_equal(ex.run(feeds)["y"], Executor(g32).run(feeds)["y"])
    assert ex.weights_bytes <= Executor(load_model(str(tmp_path / "f.tflite"))).weights_bytes


def test_a_kernel_reads_a_constant_held_in_another_dtype_in_its_own():
    from pyarena.graph import Op, Tensor
    from pyarena.runtime.kernels import make_kernel
    half = np.linspace(-2, 2, 12, dtype=np.float16).reshape(3, 4)
    ins = [Tensor("x", (3, 4)), Tensor("c", (3, 4), "float32", role="constant", data=half)]
    k = make_kernel(Op("add", "Add", ["x", "c"], ["y"]), ins, [Tensor("y", (3, 4))])
    c = k.const(1)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, half.astype(np.float32))


def test_a_weight_read_at_run_time_is_placed_slab_by_slab_from_its_file(
        tmp_path, monkeypatch):
    # the arena copy of a file weight is made a slab at a time, each slab's
    # file pages given back once copied: never the file's pages of the whole
    # weight beside its copy
    from helpers.onnx_util import make_model
    from pyarena.runtime import placement
    rng = np.random.default_rng(11)
    table = rng.standard_normal((1000, 700)).astype(np.float32)     # 2.7 MiB
    path = tmp_path / "gather.onnx"
    make_model([helper.make_node("Gather", ["table", "ids"], ["y"])],
               {"ids": ([5], np.int64)}, {"y": (None, np.float32)}, {"table": table},
               path=path)
    g = load_model(str(path))
    assert is_mapped(np.asarray(g.tensors["table"].data))
    released, release = [], placement.release_pages

    def counted(arr, *a, **k):
        released.append(arr.nbytes)
        return release(arr, *a, **k)
    monkeypatch.setattr(placement, "release_pages", counted)
    ex = Executor(g)
    slab = placement.PLACE_SLAB_BYTES
    assert released == [min(slab, table.nbytes - i) for i in range(0, table.nbytes, slab)]
    placed = np.asarray(g.tensors["table"].data)
    assert ex.weights.owns(placed) and not is_mapped(placed)
    np.testing.assert_array_equal(placed, table)
    ids = np.array([999, 0, 512, 3, 999], np.int64)
    np.testing.assert_array_equal(ex.run({"ids": ids})["y"], table[ids])
