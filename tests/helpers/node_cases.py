"""The ONNX backend node test cases (``onnx/backend/test/data/node/<case>``:
model.onnx, test_data_set_0/input_*.pb, output_*.pb), read from the onnx
package when it ships them, else written from the scripts they are
generated from (``onnx.backend.test.case.node.<op>``: importing one
records its cases), like ``backend-test-tools generate-data`` does."""
import importlib
import pathlib
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

NODE_DATA = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


def generated_cases(pattern, modules):
    """{name: case} of the cases whose name fully matches ``pattern`` (a
    compiled regex), recorded by importing ``onnx.backend.test.case.node.<m>``
    for each m in ``modules``."""
    from onnx.backend.test.case import node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in modules:
            importlib.import_module(f"onnx.backend.test.case.node.{m}")
    return {c.name: c for c in node._NodeTestCases if pattern.fullmatch(c.name)}


def node_case_names(pattern, modules):
    if NODE_DATA.is_dir():
        return sorted(p.name for p in NODE_DATA.iterdir() if pattern.fullmatch(p.name))
    return sorted(generated_cases(pattern, modules))


def case_dir(name, tmp_path, pattern, modules):
    """The case's directory (written under ``tmp_path`` when not shipped)."""
    if NODE_DATA.is_dir():
        return NODE_DATA / name
    case = generated_cases(pattern, modules)[name]
    d = tmp_path / name
    (d / "test_data_set_0").mkdir(parents=True)
    onnx.save(case.model, str(d / "model.onnx"))
    ins, outs = case.data_sets[0]
    for kind, vals, vis in (("input", ins, case.model.graph.input),
                            ("output", outs, case.model.graph.output)):
        for j, (v, vi) in enumerate(zip(vals, vis)):
            t = numpy_helper.from_array(np.asarray(v), vi.name)
            (d / "test_data_set_0" / f"{kind}_{j}.pb").write_bytes(t.SerializeToString())
    return d


def read_pb(path):
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, numpy_helper.to_array(t)


def read_data(d):
    """(inputs {name: array}, outputs [(name, array)]) of a case directory."""
    data = d / "test_data_set_0"
    ins = dict(read_pb(p) for p in sorted(data.glob("input_*.pb")))
    outs = [read_pb(p) for p in sorted(data.glob("output_*.pb"))]
    return ins, outs
