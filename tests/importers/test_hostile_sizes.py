"""Sizes computed before they are allocated: a tiny model whose constant
inputs make a huge tensor (a Range of 2e9 values, an Expand to 50,000 x
50,000) is refused by the memory limit with the tensor named -- never
allocated first.  Each import runs in a child process whose address space
is capped at 2 GiB, so allocating first fails there (MemoryError), where
the check refuses the model cleanly."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model

i64 = lambda *v: np.array(v, np.int64)  # noqa: E731

CASES = {
    "range": ([helper.make_node("Range", ["s", "l", "d"], ["r"]),
               helper.make_node("Cast", ["r"], ["rf"], to=1),
               helper.make_node("Add", ["rf", "x"], ["y"])],
              {"s": np.array(0, np.int64), "l": np.array(2_000_000_000, np.int64),
               "d": np.array(1, np.int64)}, "r"),
    "expand": ([helper.make_node("Expand", ["c", "shp"], ["e"]),
                helper.make_node("Add", ["e", "x"], ["y"])],
               {"c": np.ones(1, np.float32), "shp": i64(50000, 50000)}, "e"),
    "constant_of_shape": ([helper.make_node("ConstantOfShape", ["shp"], ["k"]),
                           helper.make_node("Cast", ["k"], ["kf"], to=1),
                           helper.make_node("Add", ["kf", "x"], ["y"])],
                          {"shp": i64(40000, 40000)}, "k"),
    # the indices' offsets are a constant of their shape, laid out when the
    # kernel is built: only a check before that refuses the model unharmed
    "gather_elements": ([helper.make_node("ConstantOfShape", ["shp"], ["idx"],
                                          value=helper.make_tensor("v", 7, [1], [0])),
                         helper.make_node("Expand", ["c", "row"], ["data"]),
                         helper.make_node("GatherElements", ["data", "idx"], ["g"], axis=0),
                         helper.make_node("Add", ["g", "x"], ["y"])],
                        {"shp": i64(40000, 40000), "c": np.ones((1, 1), np.float32),
                         "row": i64(1, 40000)}, "idx"),
    # a dilated average pool's divisors are laid out when its kernel is
    # built (for its scratch size too): the limit must come first
    "avg_pool": ([helper.make_node("ConstantOfShape", ["shp"], ["k"],
                                   value=helper.make_tensor("v", 1, [1], [1.0])),
                  helper.make_node("AveragePool", ["k"], ["p"], kernel_shape=[3, 3],
                                   pads=[2, 2, 2, 2], dilations=[2, 2]),
                  helper.make_node("ReduceMean", ["p"], ["m"], keepdims=0),
                  helper.make_node("Add", ["m", "x"], ["y"])],
                 {"shp": i64(1, 1, 40000, 40000)}, "k"),
    "tile": ([helper.make_node("Tile", ["c", "reps"], ["t"]),
              helper.make_node("Add", ["t", "x"], ["y"])],
             {"c": np.ones((1, 4), np.float32), "reps": i64(100000, 10000)}, "t"),
}

CHILD = textwrap.dedent('''
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    from pyarena import MemoryLimitError
    from pyarena.importers import load_model
    for path in sys.argv[1:]:
        try:
            load_model(path, max_memory=1 << 30)
        except MemoryLimitError as e:
            print("refused", e.tensor, e.needed)
        except BaseException as e:
            print("other", type(e).__name__, str(e)[:200].replace(chr(10), " "))
        else:
            print("accepted")
''')


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{case: its child's line}: every case imported in one child."""
    d = tmp_path_factory.mktemp("hostile")
    paths = []
    for name, (nodes, inits, _) in sorted(CASES.items()):
        path = d / f"{name}.onnx"
        make_model(nodes, {"x": ([1], np.float32)}, {"y": (None, np.float32)}, inits,
                   path=path)
        assert path.stat().st_size < 1000
        paths.append(str(path))
    r = subprocess.run([sys.executable, "-c", CHILD, *paths], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return dict(zip(sorted(CASES), r.stdout.splitlines()))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_huge_constant_result_is_refused_before_it_is_allocated(outcomes, name):
    words = outcomes[name].split()
    assert words[:2] == ["refused", CASES[name][2]], outcomes[name]
    assert int(words[2]) > 1 << 30


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """A model path or an external data file that is a FIFO: refused at
    once (opening it for reading would block until a writer came)."""
    import os

    import onnx
    from onnx import numpy_helper

    from pyarena.errors import ModelImportError
    from pyarena.importers import load_model
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    with pytest.raises(ModelImportError, match="not a regular file"):
        load_model(str(fifo))
    # external data: the weights' file is a FIFO
    w = numpy_helper.from_array(np.ones(256, np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "1024")):
        e = w.external_data.add()
        e.key, e.value = k, v
    os.mkfifo(tmp_path / "w.bin")
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"])], {"x": ([256], np.float32)},
                   {"y": (None, np.float32)})
    m.graph.initializer.append(w)
    path = tmp_path / "ext.onnx"
    onnx.save(m, str(path))
    with pytest.raises(ModelImportError, match="not a regular file"):
        load_model(str(path))
