"""TFLite STRIDED_SLICE / DEPTH_TO_SPACE (pyarena.kernels_tflite) against the
TFLite interpreter, and sparse-constant densification
(pyarena.importers.tflite_sparse): hand-encoded examples, and CSR /
block-sparse fp16 weights written into a .tflite (DENSIFY) vs the
interpreter."""
import numpy as np
import pytest

from helpers.tflite_util import TFLiteBuilder
from pyarena.runtime import Executor, random_feeds
from pyarena.importers import ModelImportError, UnsupportedOpError, load_model
from pyarena.importers.reference import reference_tflite
from pyarena.importers.tflite_sparse import DENSE, SPARSE_CSR, densify
from pyarena.planning import plan

# (begin, end, strides, masks) and the NumPy index it must equal
SLICES = [
    (([0, 1, 0, 0], [1, 5, 8, 4], [1, 2, 3, 1], {}), np.s_[0:1, 1:5:2, 0:8:3, 0:4]),
    (([0, 0, 2, 1], [1, 6, 8, 4], [1, 1, 2, 1], dict(ShrinkAxisMask=1, EndMask=0b1110)),
     np.s_[0, :, 2::2, 1:]),
    (([0, -1, 0, 0], [1, 0, 8, 4], [1, -1, 1, 1], dict(BeginMask=0b1101, EndMask=0b1101)),
     np.s_[:, -1:0:-1, :, :]),
    (([0, 1], [0, 3], [1, 1], dict(EllipsisMask=1)), np.s_[..., 1:3]),
    (([0, 0], [1, 1], [1, 1], dict(NewAxisMask=0b10, BeginMask=1, EndMask=1)),
     np.s_[:, None]),
    (([0, 2, 1, 0], [1, 3, 5, 4], [1, 1, 1, 1], dict(Offset=True)),
     np.s_[0:1, 2:5, 1:6, 0:4]),
]


def _movement_model(path):
    B = TFLiteBuilder()
    shape = (1, 6, 8, 4)
    x = B.tensor("x", shape)
    probe = np.zeros(shape)
    outs = []
    for k, ((b, e, s, masks), ref_idx) in enumerate(SLICES):
        y = B.tensor(f"slice{k}", probe[ref_idx].shape)
        ins = [x] + [B.const(f"{nm}{k}", np.array(v, np.int32), np.int32)
                     for nm, v in (("begin", b), ("end", e), ("strides", s))]
        opts = dict(BeginMask=0, EndMask=0, EllipsisMask=0, NewAxisMask=0,
                    ShrinkAxisMask=0)
        opts.update(masks)
        B.op("STRIDED_SLICE", ins, [y], ("StridedSliceOptions", opts))
        outs.append(y)
    z = B.tensor("d2s_in", (1, 3, 4, 8))
    d = B.tensor("d2s", (1, 6, 8, 2))
    B.op("DEPTH_TO_SPACE", [z], [d], ("DepthToSpaceOptions", dict(BlockSize=2)))
    return B.save(path, [x, z], outs + [d])


def test_strided_slice_and_depth_to_space_match_interpreter(tmp_path):
    path = _movement_model(tmp_path / "m.tflite")
    g = load_model(path)
    assert [op.op_type for op in g.ops].count("StridedSlice") == len(SLICES)
    ex = Executor(g, plan(g))
    feeds = random_feeds(g, seed=3)
    out = ex.run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    for k, (_, idx) in enumerate(SLICES):
        np.testing.assert_array_equal(out[f"slice{k}"], ref[f"slice{k}"])
        # and it is the NumPy slice (not a silent all-zero output)
        np.testing.assert_array_equal(out[f"slice{k}"].reshape(-1),
                                      feeds["x"][idx].reshape(-1))
    np.testing.assert_array_equal(out["d2s"], ref["d2s"])
    # DEPTH_TO_SPACE moves channels [(2i+j)C', (2i+j+1)C') to pixel (2h+i, 2w+j)
    np.testing.assert_array_equal(out["d2s"][0, 3, 5], feeds["d2s_in"][0, 1, 2, 6:8])
    np.testing.assert_array_equal(out["d2s"][0, 2, 5], feeds["d2s_in"][0, 1, 2, 2:4])


def test_strided_slice_needs_constant_begin(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (4, 4))
    b = B.tensor("b", (2,), np.int32)
    e = B.const("e", np.array([4, 4], np.int32), np.int32)
    s = B.const("s", np.array([1, 1], np.int32), np.int32)
    y = B.tensor("y", (4, 4))
    B.op("STRIDED_SLICE", [x, b, e, s], [y], ("StridedSliceOptions", dict(BeginMask=0)))
    path = B.save(tmp_path / "m.tflite", [x, b], [y])
    with pytest.raises(UnsupportedOpError, match="STRIDED_SLICE.*begin must be constant"):
        load_model(path)


def test_strided_slice_shape_mismatch_is_reported(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (4, 4))
    ins = [x] + [B.const(n, np.array(v, np.int32), np.int32)
                 for n, v in (("b", [0, 0]), ("e", [2, 4]), ("s", [1, 1]))]
    y = B.tensor("y", (3, 4))     # the slice is 2x4
    B.op("STRIDED_SLICE", ins, [y], ("StridedSliceOptions", dict(BeginMask=0)))
    path = B.save(tmp_path / "m.tflite", [x], [y])
    with pytest.raises(UnsupportedOpError, match=r"has shape \[2, 4\]"):
        load_model(path)


def test_densify_csr_matrix():
    # rows dense, columns CSR: row r holds indices[segments[r]:segments[r+1]]
    dense = densify([1, 2, 3, 4], [4, 4], [0, 1], [],
                    [(DENSE, 4, None, None), (SPARSE_CSR, 0, [0, 1, 2, 2, 4], [0, 2, 0, 3])])
    want = np.zeros((4, 4), int)
    want[0, 0], want[1, 2], want[3, 0], want[3, 3] = 1, 2, 3, 4
    np.testing.assert_array_equal(dense, want)


def test_densify_block_sparse_and_column_major_traversal():
    # 4x4 in 2x2 blocks; only blocks (0,1) and (1,0) stored, each row-major
    dense = densify(np.arange(1, 9, dtype=np.float16), [4, 4], [0, 1, 2, 3], [0, 1],
                    [(DENSE, 2, None, None), (SPARSE_CSR, 0, [0, 1, 2], [1, 0]),
                     (DENSE, 2, None, None), (DENSE, 2, None, None)])
    assert dense.dtype == np.float16
    np.testing.assert_array_equal(dense, [[0, 0, 1, 2], [0, 0, 3, 4],
                                          [5, 6, 0, 0], [7, 8, 0, 0]])
    # traversal order [1, 0]: stored column by column
    dense = densify([1, 2, 3, 4, 5, 6], [2, 3], [1, 0], [],
                    [(DENSE, 3, None, None), (DENSE, 2, None, None)])
    np.testing.assert_array_equal(dense, [[1, 3, 5], [2, 4, 6]])


@pytest.mark.parametrize("args, match", [
    (([1, 2], [2, 2], [0, 0], [], [(DENSE, 2, None, None)] * 2), "traversal_order"),
    (([1, 2, 3], [2, 2], [0, 1], [], [(DENSE, 2, None, None)] * 2), "addresses 4 values"),
    (([1], [2, 2], [0, 1], [], [(DENSE, 2, None, None), (SPARSE_CSR, 0, [0, 1], [5])]),
     "do not fit"),
    (([1, 2], [2, 2], [0, 1], [], [(DENSE, 2, None, None), (SPARSE_CSR, 0, [0, 1, 2], [0, 7])]),
     "outside its size 2"),
    (([1], [2, 2], [0, 1], [], [(DENSE, 2, None, None), (5, 0, None, None)]),
     "unknown format 5"),
    # an edited dense_size: refused before its positions are laid out
    (([1, 2, 3, 4], [4, 4], [0, 1], [],
      [(DENSE, 1 << 40, None, None), (SPARSE_CSR, 0, [0, 1, 2, 2, 4], [0, 2, 0, 3])]),
     r"dense_size 1099511627776, the dim it visits has size 4"),
    (([1, 2, 3, 4], [4, 4], [0, 1], [],
      [(DENSE, 3, None, None), (SPARSE_CSR, 0, [0, 1, 2, 4], [0, 2, 0, 3])]),
     "dense_size 3, the dim it visits has size 4"),
    (([1, 2, 3, 4], [2, 2], [0, 1], [], [(DENSE, 2, None, None), (DENSE, -1, None, None)]),
     "dense_size -1"),
    # a block dim's dense size must divide the dim it splits
    ((np.arange(8), [4, 4], [0, 1, 2, 3], [0, 1],
      [(DENSE, 2, None, None), (SPARSE_CSR, 0, [0, 1, 2], [1, 0]),
       (DENSE, 3, None, None), (DENSE, 2, None, None)]), "block size 3 does not divide"),
])
def test_densify_rejects_bad_descriptions(args, match):
    with pytest.raises(ValueError, match=match):
        densify(*args)



def _sparse_fc_model(path):
    """x -> FULLY_CONNECTED with CSR weights, and with 2x2-block-sparse fp16
    weights, each through DENSIFY (+ DEQUANTIZE for fp16)."""
    B = TFLiteBuilder()
    x = B.tensor("x", (2, 4))
    # (4, 4) CSR: rows dense, columns sparse
    w1s = B.tensor("w1_sparse", (4, 4), np.float32, data=[1.5, -2, 3, 0.5],
                   sparsity=([0, 1], [], [(DENSE, 4, None, None),
                                          (SPARSE_CSR, 0, [0, 1, 2, 2, 4], [0, 2, 0, 3])]))
    w1 = B.tensor("w1", (4, 4))
    B.op("DENSIFY", [w1s], [w1])
    y1 = B.tensor("y1", (2, 4))
    B.op("FULLY_CONNECTED", [x, w1, -1], [y1], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    # (4, 4) fp16 in 2x2 blocks, blocks (0, 1) and (1, 0) stored
    w2s = B.tensor("w2_sparse", (4, 4), np.float16, data=np.arange(1, 9) / 4,
                   sparsity=([0, 1, 2, 3], [0, 1],
                             [(DENSE, 2, None, None), (SPARSE_CSR, 0, [0, 1, 2], [1, 0]),
                              (DENSE, 2, None, None), (DENSE, 2, None, None)]))
    w2h = B.tensor("w2_fp16", (4, 4), np.float16)
    B.op("DENSIFY", [w2s], [w2h])
    w2 = B.tensor("w2", (4, 4))
    B.op("DEQUANTIZE", [w2h], [w2])
    y2 = B.tensor("y2", (2, 4))
    B.op("FULLY_CONNECTED", [x, w2, -1], [y2], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    return B.save(path, [x], [y1, y2])


def test_sparse_weights_are_densified_at_import(tmp_path):
    path = _sparse_fc_model(tmp_path / "sparse.tflite")
    g = load_model(path)
    # DENSIFY / DEQUANTIZE folded: only the two products remain
    assert [op.op_type for op in g.ops] == ["FullyConnected", "FullyConnected"]
    w1 = np.zeros((4, 4), np.float32)
    w1[0, 0], w1[1, 2], w1[3, 0], w1[3, 3] = 1.5, -2, 3, 0.5
    np.testing.assert_array_equal(g.tensors["w1"].data, w1)
    w2 = g.tensors["w2"].data
    assert w2.dtype == np.float32
    np.testing.assert_array_equal(w2[:2, 2:], [[0.25, 0.5], [0.75, 1.0]])
    np.testing.assert_array_equal(w2[2:, :2], [[1.25, 1.5], [1.75, 2.0]])
    assert not w2[:2, :2].any() and not w2[2:, 2:].any()
    ex = Executor(g, plan(g))
    feeds = random_feeds(g, seed=2)
    out = ex.run(feeds)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    for k in ("y1", "y2"):
        np.testing.assert_allclose(out[k], ref[k], rtol=1e-6, atol=1e-6)


def test_bad_sparsity_is_a_clear_import_error(tmp_path):
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 4))
    ws = B.tensor("w_sparse", (4, 4), np.float32, data=[1.0, 2.0],   # 3 indices, 2 values
                  sparsity=([0, 1], [], [(DENSE, 4, None, None),
                                         (SPARSE_CSR, 0, [0, 1, 2, 2, 3], [0, 2, 0])]))
    w = B.tensor("w", (4, 4))
    B.op("DENSIFY", [ws], [w])
    y = B.tensor("y", (1, 4))
    B.op("FULLY_CONNECTED", [x, w, -1], [y], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    path = B.save(tmp_path / "bad.tflite", [x], [y])
    with pytest.raises(ModelImportError, match="w_sparse.*addresses 3 values.*holds 2"):
        load_model(path)


def test_only_the_kept_weights_reach_the_weights_arena(tmp_path):
    """DENSIFY -> DEQUANTIZE of a 64x64 fp16 sparse weight: the float32
    value the product reads is the arena's one allocation; the densified
    fp16 intermediate (8 KiB) never reaches it."""
    n, per_row = 64, 8
    rng = np.random.default_rng(4)
    cols = np.sort(np.stack([rng.choice(n, per_row, replace=False) for _ in range(n)]), 1)
    vals = rng.uniform(-1, 1, n * per_row).astype(np.float16)
    B = TFLiteBuilder()
    x = B.tensor("x", (2, n))
    ws = B.tensor("w_sparse", (n, n), np.float16, data=vals,
                  sparsity=([0, 1], [], [(DENSE, n, None, None),
                                         (SPARSE_CSR, 0, list(range(0, n * per_row + 1, per_row)),
                                          cols.reshape(-1).tolist())]))
    wh = B.tensor("w_fp16", (n, n), np.float16)
    B.op("DENSIFY", [ws], [wh])
    w = B.tensor("w", (n, n))
    B.op("DEQUANTIZE", [wh], [w])
    y = B.tensor("y", (2, n))
    B.op("FULLY_CONNECTED", [x, w, -1], [y], ("FullyConnectedOptions", dict(
        FusedActivationFunction=0)))
    path = B.save(tmp_path / "sparse64.tflite", [x], [y])
    g = load_model(path, native=False)
    assert "w_fp16" not in g.tensors
    dense = np.zeros((n, n), np.float32)
    dense[np.repeat(np.arange(n), per_row), cols.reshape(-1)] = vals.astype(np.float32)
    np.testing.assert_array_equal(g.tensors["w"].data, dense)
    st = g.weights.stats()
    assert st.count == 1 and st.used == dense.nbytes


def test_grouped_pointwise_conv_nhwc(tmp_path):
    """A grouped 1x1 CONV_2D (NHWC, 2 groups of 4 input channels: the
    importer reads groups from the filter depth) stays on im2col + BLAS --
    the batched 1x1 path is NCHW only -- and computes each group apart."""
    r = np.random.default_rng(6)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 5, 6, 8))
    y = B.tensor("y", (1, 5, 6, 6))
    wv = r.standard_normal((6, 1, 1, 4)).astype(np.float32)
    B.op("CONV_2D", [x, B.const("w", wv), B.const("b", np.zeros(6))], [y],
         ("Conv2DOptions", dict(Padding=1, StrideW=1, StrideH=1,
                                FusedActivationFunction=0, DilationWFactor=1,
                                DilationHFactor=1)))
    g = load_model(B.save(tmp_path / "g.tflite", [x], [y]))
    ex = Executor(g, plan(g))
    assert ex.kernels[0].path == "im2col"
    feeds = random_feeds(g, seed=7)
    xv = feeds["x"].reshape(30, 2, 4)
    want = np.einsum("pgc,goc->pgo", xv, wv.reshape(2, 3, 4)).reshape(1, 5, 6, 6)
    np.testing.assert_allclose(ex.run(feeds)["y"], want, rtol=1e-5, atol=1e-5)


def _conv3x3_relu6(tmp_path, name, hw, cin, cout, stride, padding, seed):
    """A 3x3 NHWC CONV_2D (bias, RELU6) written to ``name`` and imported:
    ``(graph, its executor, the file)``."""
    r = np.random.default_rng(seed)
    B = TFLiteBuilder()
    h, w_ = hw
    x = B.tensor("x", (1, h, w_, cin))
    ho, wo = ((h - 1) // stride + 1, (w_ - 1) // stride + 1) if padding == 0 else \
        ((h - 3) // stride + 1, (w_ - 3) // stride + 1)
    y = B.tensor("y", (1, ho, wo, cout))
    w = B.const("w", r.standard_normal((cout, 3, 3, cin)) * 0.3)
    b = B.const("b", r.standard_normal(cout))
    B.op("CONV_2D", [x, w, b], [y], ("Conv2DOptions", dict(
        Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=3,
        DilationWFactor=1, DilationHFactor=1)))
    path = B.save(tmp_path / name, [x], [y])
    g = load_model(path)
    return g, Executor(g, plan(g)), path


def _matches_interpreter(g, ex, path, seed):
    feeds = random_feeds(g, seed=seed)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    np.testing.assert_allclose(ex.run(feeds)["y"], ref["y"], rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("cout,stride,padding", [(1, 1, 0), (3, 2, 1), (4, 1, 1), (5, 1, 0)],
                         ids=str)
def test_few_output_channels_on_the_dot_kernel(tmp_path, cout, stride, padding):
    """A 3x3 NHWC CONV_2D with at most 4 output channels (a heatmap head)
    runs the native dot-product kernel by default, no workspace, and
    matches the interpreter; with 5 it runs the packed SGEMM on the whole
    tensor (the padding read as zeros: no workspace either)."""
    g, ex, path = _conv3x3_relu6(tmp_path, "few.tflite", (13, 17), 10, cout, stride, padding,
                                 seed=4)
    assert ex.kernels[0].path == ("native" if cout <= 4 else "native-gemm")
    assert g.ops[0].scratch_bytes == 0
    _matches_interpreter(g, ex, path, seed=5)


@pytest.mark.parametrize("cin,stride,padding", [(3, 2, 0), (4, 1, 1), (1, 2, 1), (5, 2, 0)],
                         ids=str)
def test_few_input_channels_on_the_stack_tile_kernel(tmp_path, cin, stride, padding):
    """A 3x3 NHWC CONV_2D over at most 4 input channels (a stem over RGB)
    runs the native stack-tile kernel by default, no workspace, and matches
    the interpreter; with 5 it runs the packed SGEMM on the whole tensor
    (the padding read as zeros: no workspace either)."""
    g, ex, path = _conv3x3_relu6(tmp_path, "stem.tflite", (15, 21), cin, 19, stride, padding,
                                 seed=8)
    assert ex.kernels[0].path == ("native" if cin <= 4 else "native-gemm")
    assert g.ops[0].scratch_bytes == 0
    _matches_interpreter(g, ex, path, seed=9)


@pytest.mark.parametrize("hw,cin,cout", [(7, 150, 37), (5, 9, 16), (3, 200, 130), (5, 24, 3),
                                         (6, 16, 24), (4, 12, 12), (3, 40, 29)], ids=str)
def test_pointwise_conv_nhwc_matches_interpreter(tmp_path, hw, cin, cout):
    """NHWC CONV_2D 1x1 with RELU6 runs the native packed SGEMM whatever
    its input channels, and matches the interpreter: full blocks of 16
    output channels, a last block of at most 8 (the half-width tile) and
    blocks ending in a partial vector."""
    r = np.random.default_rng(3)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, hw, hw + 2, cin))
    y = B.tensor("y", (1, hw, hw + 2, cout))
    w = B.const("w", r.standard_normal((cout, 1, 1, cin)) * 0.2)
    b = B.const("b", r.standard_normal(cout))
    B.op("CONV_2D", [x, w, b], [y], ("Conv2DOptions", dict(
        Padding=1, StrideW=1, StrideH=1, FusedActivationFunction=3,
        DilationWFactor=1, DilationHFactor=1)))
    path = B.save(tmp_path / "pw.tflite", [x], [y])
    g = load_model(path)
    ex = Executor(g, plan(g))
    assert ex.kernels[0].path == "native-gemm"
    feeds = random_feeds(g, seed=2)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    np.testing.assert_allclose(ex.run(feeds)["y"], ref["y"], rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("hw,k,s,cin,cout,path_", [
    ((32, 32), 2, 2, 64, 64, "native-gemm"),     # iris landmark's 2x2 stride-2 layers
    ((9, 11), 2, 2, 12, 21, "native-gemm"),      # odd sides: a last row / column unread
    ((2, 2), 2, 1, 128, 40, "native-gemm"),      # one output pixel
    ((8, 8), 3, 1, 16, 24, "native-gemm"),       # overlapping VALID windows: in place too
], ids=str)
def test_patch_conv_nhwc_matches_interpreter(tmp_path, hw, k, s, cin, cout, path_):
    """NHWC CONV_2D, VALID, windows that do not overlap (kernel <= stride)
    or a single output pixel: the packed SGEMM reads each window in place
    (no im2col scratch) and matches the interpreter; overlapping VALID
    windows run the same SGEMM on the whole tensor (no scratch either)."""
    r = np.random.default_rng(5)
    ho, wo = (hw[0] - k) // s + 1, (hw[1] - k) // s + 1
    B = TFLiteBuilder()
    x = B.tensor("x", (1, hw[0], hw[1], cin))
    y = B.tensor("y", (1, ho, wo, cout))
    w = B.const("w", r.standard_normal((cout, k, k, cin)) * 0.2)
    b = B.const("b", r.standard_normal(cout))
    B.op("CONV_2D", [x, w, b], [y], ("Conv2DOptions", dict(
        Padding=1, StrideW=s, StrideH=s, FusedActivationFunction=1,
        DilationWFactor=1, DilationHFactor=1)))
    path = B.save(tmp_path / "patch.tflite", [x], [y])
    g = load_model(path)
    ex = Executor(g, plan(g))
    assert ex.kernels[0].path == path_
    assert g.ops[0].scratch_bytes == 0
    feeds = random_feeds(g, seed=4)
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    np.testing.assert_allclose(ex.run(feeds)["y"], ref["y"], rtol=1e-4, atol=5e-5)


@pytest.mark.parametrize("fused", [0, 3], ids=["none", "relu6"])
def test_a_residual_add_keeps_its_own_fused_activation(tmp_path, fused):
    """CONV_2D 1x1 -> ADD(., r) with the ADD's own fused RELU6 (MediaPipe's
    pose landmark model has 15): the residual fused into the conv keeps the
    ADD's activation."""
    r = np.random.default_rng(5)
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 6, 5, 8))
    y0 = B.tensor("y0", (1, 6, 5, 16))
    B.op("CONV_2D", [x, B.const("w0", r.standard_normal((16, 1, 1, 8))), B.const(
        "b0", r.standard_normal(16))], [y0], ("Conv2DOptions", dict(
            Padding=1, StrideW=1, StrideH=1, FusedActivationFunction=0,
            DilationWFactor=1, DilationHFactor=1)))
    c = B.tensor("c", (1, 6, 5, 16))
    B.op("CONV_2D", [x, B.const("w", r.standard_normal((16, 1, 1, 8))), B.const(
        "b", r.standard_normal(16))], [c], ("Conv2DOptions", dict(
            Padding=1, StrideW=1, StrideH=1, FusedActivationFunction=0,
            DilationWFactor=1, DilationHFactor=1)))
    y = B.tensor("y", (1, 6, 5, 16))
    B.op("ADD", [c, y0], [y], ("AddOptions", dict(FusedActivationFunction=fused)))
    path = B.save(tmp_path / "res.tflite", [x], [y])
    g = load_model(path)
    assert [op.op_type for op in g.ops] == ["Conv", "Conv"]
    assert g.ops[1].attrs.get("activation", "NONE") == ("RELU6" if fused else "NONE")
    feeds = {"x": r.standard_normal((1, 6, 5, 8)).astype(np.float32) * 2}
    ref, why = reference_tflite(path, feeds)
    assert ref is not None, why
    out = Executor(g, plan(g)).run(feeds)["y"]
    assert (out.max() <= 6.0) == bool(fused) or not fused
    np.testing.assert_allclose(out, ref["y"], rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("c,k,stride,padding", [(5, 3, 2, 0), (12, 2, 2, 1), (28, 3, 1, 0),
                                                (8, 2, 1, 0)], ids=str)
def test_nhwc_pools_match_interpreter(tmp_path, op, c, k, stride, padding):
    """NHWC max / average pools on the native kernel (channel vectors of 8,
    the tail one overlapping vector; under 8 channels through the stack)
    match the interpreter, SAME windows at the border included."""
    B = TFLiteBuilder()
    h, w_ = 11, 14
    x = B.tensor("x", (1, h, w_, c))
    ho, wo = ((h - 1) // stride + 1, (w_ - 1) // stride + 1) if padding == 0 else \
        ((h - k) // stride + 1, (w_ - k) // stride + 1)
    y = B.tensor("y", (1, ho, wo, c))
    B.op(op, [x], [y], ("Pool2DOptions", dict(Padding=padding, StrideW=stride, StrideH=stride,
                                              FilterWidth=k, FilterHeight=k,
                                              FusedActivationFunction=0)))
    path = B.save(tmp_path / "pool.tflite", [x], [y])
    g = load_model(path)
    ex = Executor(g, plan(g))
    assert ex.kernels[0].path == "native"
    _matches_interpreter(g, ex, path, seed=11)


@pytest.mark.parametrize("mult", [1, 2, 3])
def test_depthwise_conv_with_a_depth_multiplier_matches_interpreter(tmp_path, mult):
    """DEPTHWISE_CONV_2D, 1HWC weights: output channel c * M + m reads input
    channel c (TFLite's depth multiplier M)."""
    r = np.random.default_rng(mult)
    cin = 4
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 6, 7, cin))
    y = B.tensor("y", (1, 6, 7, cin * mult))
    w = B.const("w", r.standard_normal((1, 3, 3, cin * mult)) * 0.3)
    b = B.const("b", r.standard_normal(cin * mult))
    B.op("DEPTHWISE_CONV_2D", [x, w, b], [y], ("DepthwiseConv2DOptions", dict(
        Padding=0, StrideW=1, StrideH=1, DepthMultiplier=mult, FusedActivationFunction=0,
        DilationWFactor=1, DilationHFactor=1)))
    path = B.save(tmp_path / f"dw{mult}.tflite", [x], [y])
    for native in (True, False):
        g = load_model(path, native=native)
        _matches_interpreter(g, Executor(g, plan(g)), path, seed=mult)
