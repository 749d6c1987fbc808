"""Test helpers: the small real models the `onnx` package ships, with
random weights so their outputs are informative, and onnxruntime
references.  Not a test module (no test_ prefix)."""
import os

import numpy as np


def onnx_data_dir():
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def light_model_path(name):
    return os.path.join(onnx_data_dir(), "light", f"light_{name}.onnx")


def randomized_light_model(name, out_path, seed=0):
    """The onnx package's ``light_<name>`` model (real architecture, weights
    made by ConstantOfShape) with every ConstantOfShape replaced by a seeded
    random initializer of the same shape; writes ``out_path``."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(light_model_path(name))
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    keep = []
    new_inits = []
    for n in m.graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = [int(d) for d in inits[n.input[0]]]
            if len(shape) == 1:
                v = rng.uniform(0.5, 1.5, shape)
            else:
                fan = int(np.prod(shape[1:]))
                v = rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan)
            new_inits.append(numpy_helper.from_array(v.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    m.graph.initializer.extend(new_inits)
    m.ir_version = max(m.ir_version, 4)   # initializers need not be graph inputs
    onnx.save(m, out_path)
    return out_path


def ort_run(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))
