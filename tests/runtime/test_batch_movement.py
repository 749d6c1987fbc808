"""A YOLO-style block (3x3 convolutions, Split, a residual Add, Concat) in
NHWC: every op a native call record -- the convolutions' SGEMM, the Split
and Concat block copies, the Add's ``pa_add`` -- so the executor runs the
block as one batch; the batch gives the bits of the ops run one by one
(NumPy's copies and add), the same at one and three threads, and matches
onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from pyarena.runtime import batch as batch_mod
from pyarena._native.kernels import CallList
from pyarena.runtime.batch import Batch


def _rnd(r, *shape):
    return r.uniform(-1, 1, shape).astype(np.float32)


def _block(path):
    from helpers.onnx_util import make_model
    r = np.random.default_rng(11)
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Split", ["c0", "sp"], ["s0", "s1"], axis=1),
        helper.make_node("Conv", ["s1", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Add", ["c1", "s1"], ["a"]),
        helper.make_node("Concat", ["s0", "s1", "a"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w2", "b2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    inits = {"w0": _rnd(r, 16, 8, 3, 3), "b0": _rnd(r, 16), "sp": np.array([8, 8], np.int64),
             "w1": _rnd(r, 8, 8, 3, 3), "b1": _rnd(r, 8), "w2": _rnd(r, 12, 24, 3, 3),
             "b2": _rnd(r, 12)}
    make_model(nodes, {"x": ([1, 8, 20, 18], np.float32)}, {"y": (None, np.float32)}, inits,
               path=path)


def _executor(path, threads):
    from pyarena.importers import load_model
    from pyarena.planning import plan
    from pyarena.runtime import Executor
    g = load_model(str(path), layout="nhwc")
    return Executor(g, plan(g), threads=threads)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_detector_block_runs_as_one_batch_with_the_bits_of_its_ops(tmp_path, threads,
                                                                     monkeypatch):
    from helpers.model_zoo import ort_run
    path = tmp_path / "block.onnx"
    _block(path)
    x = np.random.default_rng(3).uniform(-2, 2, (1, 8, 20, 18)).astype(np.float32)
    ex = _executor(path, threads)
    batches = [s[0] for s in ex._runner.busy if isinstance(s[0], Batch)]
    names = {n for b in batches for n in b.calls.names}
    ops = {op.op_type: op.name for op in ex.graph.ops}
    for t in ("Split", "Add", "Concat", "Conv"):
        assert ops[t] in names, t
    kinds = [k for b in batches for k in b.calls.kinds]
    assert kinds.count("add") == 1 and kinds.count("copy") >= 4    # 2 Split + 3 Concat copies
    got = np.array(ex.run({"x": x})["y"])
    np.testing.assert_allclose(got, ort_run(path, {"x": x})["y"], rtol=1e-4, atol=1e-4)
    # the same ops one by one (NumPy's Split, Add and Concat): the same bits
    monkeypatch.setattr(batch_mod.Batch, "__init__", None)
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = _executor(path, 1)
    assert not any(isinstance(s[0], Batch) for s in one._runner.busy)
    np.testing.assert_array_equal(np.array(one.run({"x": x})["y"]), got)


def test_add_of_broadcast_or_other_types_stays_on_numpy():
    """Only a two-operand float32 Add of one shape is a ``pa_add`` record."""
    from pyarena.runtime.kernels.binary_native import add_calls

    class Op:
        op_type = "Add"

    class K:
        op, binary, _act = Op(), True, None
    a, b = np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)
    y = np.empty((2, 3), np.float32)
    assert add_calls(K(), [a, b], [y])[0][0] == "add"
    assert add_calls(K(), [a, b], [a])[0][0] == "add"                  # in place
    assert add_calls(K(), [a, np.ones((1, 3), np.float32)], [y]) is None   # broadcast
    assert add_calls(K(), [a.astype(np.float64), b], [y]) is None
    assert add_calls(K(), [a, b[:, ::-1]], [y]) is None                # not contiguous
    buf = np.zeros(8, np.float32)
    assert add_calls(K(), [buf[:6].reshape(2, 3), b], [buf[1:7].reshape(2, 3)]) is None
    K.op.op_type = "Sub"
    assert add_calls(K(), [a, b], [y]) is None


def _focus(path, steps=(2, 2), starts=(0, 1)):
    """YOLOv5's Focus (space to depth by Slices with steps and a Concat)
    before a 3x3 convolution, plus a Slice with a negative step."""
    from helpers.onnx_util import make_model
    r = np.random.default_rng(5)
    nodes, parts, inits = [], [], {}
    for i, (a, b) in enumerate([(starts[0], starts[0]), (starts[1], starts[0]),
                                (starts[0], starts[1]), (starts[1], starts[1])]):
        for ax, s, t in ((2, a, f"h{i}"), (3, b, f"f{i}")):
            inits[f"st{i}{ax}"] = np.array([s], np.int64)
            inits[f"en{i}{ax}"] = np.array([1 << 30], np.int64)
            inits[f"ax{i}{ax}"] = np.array([ax], np.int64)
            inits[f"sp{i}{ax}"] = np.array([steps[ax - 2]], np.int64)
            nodes.append(helper.make_node(
                "Slice", [f"h{i}" if ax == 3 else "x", f"st{i}{ax}", f"en{i}{ax}",
                          f"ax{i}{ax}", f"sp{i}{ax}"], [t]))
        parts.append(f"f{i}")
    nodes.append(helper.make_node("Concat", parts, ["cat"], axis=1))
    nodes.append(helper.make_node("Conv", ["cat", "w", "b"], ["y"], pads=[1, 1, 1, 1]))
    inits.update({"w": _rnd(r, 8, 12, 3, 3), "b": _rnd(r, 8), "rs": np.array([-1], np.int64),
                  "re": np.array([-(1 << 30)], np.int64), "ra": np.array([1], np.int64),
                  "rp": np.array([-2], np.int64)})
    nodes.append(helper.make_node("Slice", ["x", "rs", "re", "ra", "rp"], ["rev"]))
    make_model(nodes, {"x": ([1, 3, 24, 18], np.float32)},
               {"y": (None, np.float32), "rev": (None, np.float32)}, inits, path=path)


@pytest.mark.parametrize("steps,starts", [((2, 2), (0, 1)), ((3, 2), (1, 0))])
def test_strided_slices_are_copy_records_with_the_bits_of_numpy(tmp_path, monkeypatch, steps,
                                                               starts):
    """The Focus block's Slices (steps over rows and pixels of NHWC: blocks
    of 3 floats) run as block copies in the batch: the bits of NumPy's
    slicing op by op, and onnxruntime's results; a negative step too."""
    from helpers.model_zoo import ort_run
    path = tmp_path / "focus.onnx"
    _focus(path, steps, starts)
    x = np.random.default_rng(4).uniform(-2, 2, (1, 3, 24, 18)).astype(np.float32)
    ex = _executor(path, 1)
    names = {n for s in ex._runner.busy if isinstance(s[0], Batch) for n in s[0].calls.names}
    slices = [op.name for op in ex.graph.ops if op.op_type == "Slice"]
    assert len(slices) == 9 and all(n in names for n in slices[:8])
    rev = [b for b in ex._runner.bound if b[0].op.name == slices[8]][0]     # on its own
    assert rev[0].native_calls(rev[1], rev[2])[0][-1][2] < 0    # one copy, rows backwards
    got = {k: np.array(v) for k, v in ex.run({"x": x}).items()}
    ref = ort_run(path, {"x": x})
    np.testing.assert_array_equal(got["rev"], ref["rev"])
    out = np.full(ref["rev"].shape, np.nan, np.float32)    # its record run on fresh arrays
    CallList(rev[0].native_calls([x], [out])).run(None, "rev")
    np.testing.assert_array_equal(out, ref["rev"])
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(batch_mod.Batch, "__init__", None)
    monkeypatch.setattr("pyarena.runtime.modes.batch_runs",
                        lambda items, records_of, wrap: list(items))
    one = _executor(path, 1)
    for k, v in one.run({"x": x}).items():
        np.testing.assert_array_equal(np.array(v), got[k])
