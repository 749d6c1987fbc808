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


def untyped_model(nodes, feeds, outputs, inits=None, opset=17):
    """A ModelProto of ``nodes`` whose inputs are typed by ``feeds`` (name ->
    array) and whose ``outputs`` carry no type: the runtimes say what they
    give.  ``inits``: name -> array."""
    from onnx import helper, numpy_helper
    tp = lambda dt: helper.np_dtype_to_tensor_dtype(np.dtype(dt))  # noqa: E731
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, tp(v.dtype), list(v.shape))
                     for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, 0, None) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    for o in g.output:
        o.ClearField("type")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
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


def focus_csp(path, h=32, w=24, c=8, rng=None):
    """A YOLOv5-style head of a detector, as ONNX: the "Focus" layer (four
    step-2 Slices of the NCHW image, their channels concatenated), a 3x3
    conv, a stride-2 3x3 conv, and a CSP block (two 1x1 branches, one
    through a residual 3x3, concatenated, then a 1x1 conv).  Returns the
    path; input "images" (1, 3, h, w), output "y"."""
    from onnx import helper
    rng = np.random.default_rng(7) if rng is None else rng

    def w_(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)
    i64 = (lambda *v: np.array(v, np.int64))
    nodes, inits = [], {"two": i64(2, 2), "big": i64(1 << 30, 1 << 30), "hw": i64(2, 3),
                        "z": i64(0, 0), "o": i64(0, 1), "oo": i64(1, 0), "one": i64(1, 1)}
    parts = []
    for k, start in enumerate(("z", "oo", "o", "one")):
        nodes.append(helper.make_node("Slice", ["images", start, "big", "hw", "two"],
                                      [f"s{k}"]))
        parts.append(f"s{k}")
    nodes.append(helper.make_node("Concat", parts, ["f"], axis=1))
    convs = [("f", "a", 12, c, 3, 1), ("a", "b", c, 2 * c, 3, 2), ("b", "p", 2 * c, c, 1, 1),
             ("b", "q", 2 * c, c, 1, 1), ("p", "p2", c, c, 3, 1)]
    for x, y, ci, co, k, s in convs:
        inits[f"{y}.w"], inits[f"{y}.b"] = w_(co, ci, k, k), w_(co)
        nodes.append(helper.make_node("Conv", [x, f"{y}.w", f"{y}.b"], [f"{y}.c"],
                                      pads=[k // 2] * 4, strides=[s, s]))
        nodes.append(helper.make_node("Relu", [f"{y}.c"], [y]))
    nodes.append(helper.make_node("Add", ["p2", "p"], ["r"]))
    nodes.append(helper.make_node("Concat", ["r", "q"], ["cat"], axis=1))
    inits["y.w"], inits["y.b"] = w_(2 * c, 2 * c, 1, 1), w_(2 * c)
    nodes.append(helper.make_node("Conv", ["cat", "y.w", "y.b"], ["y"]))
    make_model(nodes, {"images": ([1, 3, h, w], np.float32)}, {"y": (None, np.float32)},
               inits, path=path)
    return path
