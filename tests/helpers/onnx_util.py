"""Test helper: single-node / small ONNX models, run by pyarena and by
onnxruntime.  Not a test module."""
import numpy as np


def make_model(nodes, inputs, outputs, inits=None, opset=17, path=None):
    """``inputs``/``outputs``: dict name -> (shape or None, dtype);
    ``inits``: dict name -> array.  Returns the ModelProto (saved to
    ``path`` if given)."""
    import onnx
    from onnx import helper, numpy_helper
    tp = lambda dt: helper.np_dtype_to_tensor_dtype(np.dtype(dt))  # noqa: E731
    ins = [helper.make_tensor_value_info(n, tp(dt), shp) for n, (shp, dt) in inputs.items()]
    outs = [helper.make_tensor_value_info(n, tp(dt), shp) for n, (shp, dt) in outputs.items()]
    g = helper.make_graph(nodes, "t", ins, outs,
                          [numpy_helper.from_array(np.asarray(v), k)
                           for k, v in (inits or {}).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    if path is not None:
        onnx.save(m, str(path))
    return m


def run_both(tmp_path, nodes, feeds, inits=None, outputs=("y",), opset=17, atol=1e-5,
             rtol=1e-4, plan=True, name="m", scratch_budget=None, native=True):
    """Import (each op's scratch within ``scratch_budget``; ``native`` False:
    NumPy / BLAS paths only) and execute with
    pyarena (planned arena, in-place on) and with onnxruntime; assert the
    outputs match; return (graph, ours, ref)."""
    from helpers.model_zoo import ort_run
    from pyarena.runtime import Executor
    from pyarena.importers import load_model
    path = tmp_path / f"{name}.onnx"
    make_model(nodes, {k: (list(v.shape), v.dtype) for k, v in feeds.items()},
               {o: (None, np.float32) for o in outputs}, inits, opset, path)
    g = load_model(str(path), scratch_budget=scratch_budget, native=native)
    # plan(g): the kernels' own scratch rules, as these tests check them
    # (Executor(g) alone narrows scratch to the slack at each step)
    from pyarena.planning import plan as make_plan
    ex = Executor(g, make_plan(g)) if plan else Executor(g, allocator="numpy")
    ours = {k: np.array(v) for k, v in ex.run(feeds).items()}
    ref = ort_run(path, feeds)
    for o in outputs:
        assert ours[o].shape == ref[o].shape, (o, ours[o].shape, ref[o].shape)
        np.testing.assert_allclose(ours[o], ref[o], atol=atol, rtol=rtol, err_msg=o)
    return g, ours, ref
