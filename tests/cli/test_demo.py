"""``pyarena demo`` and the MobileNetV2 it runs."""
import os
import re
import subprocess
import sys

import numpy as np

import pyarena
from pyarena.cli import main
from pyarena.runtime import Executor, random_feeds
from pyarena.runtime.models import mobilenet_v2


def _graph_to_onnx(g, path):
    """Write a pyarena Graph whose ops are ONNX ops as an .onnx file."""
    import onnx
    from onnx import helper, numpy_helper
    nodes = [helper.make_node(op.op_type, op.inputs, op.outputs, name=op.name,
                              **{k: v for k, v in op.attrs.items() if not k.startswith("_")})
             for op in g.ops]
    inits = [numpy_helper.from_array(np.asarray(t.data), t.name) for t in g.by_role("constant")]
    vi = lambda n: helper.make_tensor_value_info(  # noqa: E731
        n, onnx.TensorProto.FLOAT, list(g.tensors[n].shape))
    m = helper.make_model(helper.make_graph(nodes, g.name, [vi(n) for n in g.inputs],
                                            [vi(n) for n in g.outputs], inits),
                          opset_imports=[helper.make_opsetid("", 10)])  # Clip min/max attrs
    m.ir_version = 8
    onnx.save(m, path)


def test_mobilenet_v2_matches_onnxruntime(tmp_path):
    from helpers.model_zoo import ort_run
    g = mobilenet_v2(resolution=64, seed=1)
    assert sum(op.op_type == "Conv" and op.attrs["group"] > 1 for op in g.ops) == 17
    assert sum(op.op_type == "Add" for op in g.ops) == 10
    path = str(tmp_path / "mbv2.onnx")
    _graph_to_onnx(g, path)
    feeds = random_feeds(g, seed=2)
    out = Executor(g).run(feeds)["prob"]
    ref = ort_run(path, feeds)["prob"]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-6)


def test_demo_table(tmp_path, capsys):
    png = tmp_path / "plan.png"
    assert main(["demo", "--resolution", "96", "--repeat", "2", "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\((a|b|c|d)\) .*?\s+([\d.,]+) (B|KiB|MiB)\s+([\d.]+) ms\s+(\S+)", line)
        if m:
            scale = {"B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(3)]
            rows[m.group(1)] = (float(m.group(2).replace(",", "")) * scale,
                                int(m.group(5).replace(",", "")))
    assert set(rows) == {"a", "b", "c", "d"}, text
    assert rows["c"][1] == 0                      # no allocation with the plan
    assert rows["a"][1] > 100                      # one per tensor without it
    assert rows["c"][0] * 4 < rows["a"][0]         # the arena is far smaller
    # plain NumPy under a learning pool: as many allocations as np.empty,
    # nearly all from the learned plan, in far less memory
    assert rows["d"][1] >= rows["a"][1]
    assert rows["d"][0] * 2 < rows["a"][0]
    hits = re.search(r"\(d\).*?(\d+)% from learned plans", text)
    assert hits and int(hits.group(1)) >= 90, text
    assert "learning pool:" in text
    assert "outputs agree across modes: max |diff| = 0" in text
    assert png.exists() and png.stat().st_size > 1000


def test_demo_needs_only_the_base_install(tmp_path):
    code = ("import sys\n"
            "for m in ('onnx', 'onnxruntime', 'tflite', 'flatbuffers', 'matplotlib'):\n"
            "    sys.modules[m] = None\n"
            "from pyarena.cli import main\n"
            "sys.exit(main(['demo', '--resolution', '64', '--repeat', '1', '--plot', "
            f"{str(tmp_path / 'p.png')!r}]))\n")
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(pyarena.__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(c) static plan" in r.stdout
    assert "matplotlib is not installed" in r.stdout
    assert not (tmp_path / "p.png").exists()


def test_demo_charges_the_pool_what_it_reserved_from_the_os():
    # the dynamic mode's cost is the pool's peak reservation, not the bytes
    # live at its worst moment (those go in the note)
    from pyarena.cli import demo
    pool = pyarena.Pool()
    big = pool.empty(3 << 20, np.uint8)
    del big

    class Ran:  # what an Executor reports after a run
        last_peak_bytes, last_allocations = 1000, 7

    ex_pool, ex_plan = Ran(), Ran()
    peak, allocs, note = demo._memory(ex_pool, ex_plan, ex_pool, None, pool, 0)
    assert peak == pool.stats().peak_reserved >= 3 << 20
    assert allocs == 7 and "1,000 B" in note
