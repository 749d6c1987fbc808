"""A real TFLite model (MediaPipe's short-range face detector, vendored in
tests/data, see its README): import, plan, validate, run in the planned
arena with in-place reuse, compare with the TFLite interpreter, and no NumPy
data allocation after the first inference."""
import os

import numpy as np

from pyarena import Pool, numpy_allocator
from pyarena.runtime import Executor, random_feeds
from pyarena.importers import load_model
from pyarena.importers.reference import reference_tflite
from pyarena.planning import plan
from pyarena.planning import validate

MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                     "face_detection_short_range.tflite")


def _live_lower_bound(g):
    """Max over op steps of the bytes of the tensors alive then, computed
    here from the graph (not from the planner)."""
    first, last = {}, {}
    for i, op in enumerate(g.ops):
        for n in op.outputs:
            if n:
                first.setdefault(n, i)
                last.setdefault(n, i)
        for n in op.inputs:
            if n and g.tensors[n].role != "constant":
                first.setdefault(n, -1)
                last[n] = i
    for n in g.outputs:
        last[n] = len(g.ops)
    for n in g.inputs:
        first[n] = -1
    size = {n: g.tensors[n].nbytes for n in first}
    return max(sum(size[n] for n in first if first[n] <= i <= last[n])
               for i in range(-1, len(g.ops) + 1))


def test_face_detector_imports_plans_and_matches_interpreter():
    g = load_model(MODEL)
    types = {op.op_type for op in g.ops}
    assert {"Conv", "MaxPool", "Concat", "Reshape"} <= types
    # every block's channel Pad + Add + Relu went into its 1x1 convolution
    assert not {"Add", "Pad", "Relu"} & types
    assert sum(1 for op in g.ops if op.op_type == "Conv" and len(op.inputs) == 4) == 16
    assert {"Add", "Pad"} <= {op.op_type for op in load_model(MODEL, native=False).ops}
    assert list(g.tensors[g.inputs[0]].shape) == [1, 128, 128, 3]
    p = plan(g, inplace=True)
    assert validate(p, g) == []
    # the plan shares memory a lot, and no plan can beat the live-bytes bound
    # (naive: 5.5 MB with the residual blocks fused, 10.5 MB without; arena 1.6 MB)
    assert p.arena_bytes < p.naive_bytes / 3
    assert p.arena_bytes >= p.lower_bound_bytes
    # ... and on this chain-like detector the planner gets within 5% of it
    assert p.arena_bytes <= 1.05 * p.lower_bound_bytes
    # without in-place reuse, the lower bound is the graph's own peak of
    # live tensor bytes (+ scratch and alignment slack)
    p0 = plan(g, inplace=False)
    assert p0.lower_bound_bytes >= _live_lower_bound(g)
    ex = Executor(g, p)
    feeds = random_feeds(g, seed=5)
    out = {k: v.copy() for k, v in ex.run(feeds).items()}
    ref, why = reference_tflite(MODEL, feeds)
    assert ref is not None, why
    assert set(out) == set(ref)
    for k, v in out.items():
        scale = max(1.0, float(np.abs(ref[k]).max()))
        np.testing.assert_allclose(v, ref[k], rtol=0, atol=2e-5 * scale, err_msg=k)
    # every activation lies in the one planned block
    acts = [a for n, a in ex.arrays.items() if n not in ex.constants]
    lo = min(a.ctypes.data for a in acts)
    hi = max(a.ctypes.data + a.nbytes for a in acts)
    assert hi - lo <= p.arena_bytes
    # another input gives another answer, still matching
    feeds2 = random_feeds(g, seed=6)
    out2 = ex.run(feeds2)
    ref2, _ = reference_tflite(MODEL, feeds2)
    for k, v in out2.items():
        scale = max(1.0, float(np.abs(ref2[k]).max()))
        np.testing.assert_allclose(v, ref2[k], rtol=0, atol=2e-5 * scale, err_msg=k)
        assert not np.allclose(v, out[k])


def test_face_detector_allocates_nothing_after_first_inference():
    g = load_model(MODEL)
    ex = Executor(g, plan(g, inplace=True))
    feeds = random_feeds(g, seed=1)
    ex.run(feeds)
    pool = Pool()
    with numpy_allocator(pool) as counter:
        ex.run(feeds)
        ex.run(feeds)
    assert counter.allocations == 0
    # the counter does count: one fresh array per tensor in the unplanned mode
    naive = Executor(g, allocator="numpy")
    with numpy_allocator(pool) as counter:
        naive.run(feeds)
    assert counter.allocations >= len([t for t in g.tensors.values()
                                       if t.role != "constant"])
