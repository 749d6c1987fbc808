"""Every code block of README.md runs as written.

The blocks name files a reader brings (``model.onnx``, ``recognizer.onnx``,
``model.tflite`` ...); the test makes them in a scratch folder, then runs

* the Python blocks one after the other in one fresh interpreter, as a
  reader following the page would;
* each line of the shell blocks with ``bash -c``, exit status 0 (the
  ``benchmarks/`` scripts from the repository root, the rest in the
  scratch folder);
* the C block inside a ``main`` against the built ``libpyarena.a``.

The first block is the install: its two commands stay exactly as they are
(checked); of them only ``python -m pyarena demo`` runs here (``pip
install`` changes the environment, ``pytest`` is this suite).  The two
benchmark scripts take a minute or more: they run under ``-m slow``.
Every subprocess imports this checkout's pyarena (PYTHONPATH).
"""
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from helpers.tflite_util import small_cnn

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w*)\n(.*?)```", README, re.S)]
INSTALL = ('pip install -e ".[plot]" && python -m pyarena demo\n'
           'pip install -e ".[all]" && pytest\n')
SLOW = ("benchmarks/bench_edge.py", "benchmarks/bench_memory.py")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]]
                                                       if env.get("PYTHONPATH") else []))
    env["MPLBACKEND"] = "Agg"
    return env


def _cnn(path, dims, out="y", metadata=None):
    """x[dims] -> Conv 3->8 /2 -> Relu -> Conv 8->16 /2 -> Relu ->
    GlobalAveragePool -> Flatten -> Gemm -> ``out`` [N, 10]."""
    r = np.random.default_rng(0)
    w = lambda *s: (r.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4, strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], [out], transB=1)]
    make_model(nodes, {"x": (dims, np.float32)}, {out: (None, np.float32)},
               {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(16, 8, 3, 3), "b2": w(16),
                "fw": w(10, 16), "fb": w(10)}, path=path)


def _recognizer(path):
    """x[N, 3, 48, W] -> Conv 3->4 -> Relu -> y[N, 4, 48, W]; with metadata."""
    import onnx
    r = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["y"])]
    m = make_model(nodes, {"x": (["N", 3, 48, "W"], np.float32)},
                   {"y": (["N", 4, 48, "W"], np.float32)},
                   {"w": r.standard_normal((4, 3, 3, 3)).astype(np.float32)})
    m.metadata_props.add(key="character", value="a\nb\nc")
    onnx.save(m, str(path))


PROGRAM = '''"""A NumPy program to trace."""
import numpy as np
w = np.random.rand(64, 64)
for _ in range(5):
    y = np.tanh(np.random.rand(16, 64) @ w)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """The files the README's blocks name."""
    d = tmp_path_factory.mktemp("readme")
    _cnn(d / "model.onnx", ["N", 3, 224, 224])
    _recognizer(d / "recognizer.onnx")
    small_cnn(d / "model.tflite")
    from pyarena.runtime.models import mobilenet_v2
    g = mobilenet_v2(resolution=96, width=0.5)
    g.save(d / "graph.json")
    (d / "instance.csv").write_text("id,lower,upper,size\n" + "".join(
        f"{i},{i},{i + 3},{(i % 5 + 1) * 65536}\n" for i in range(40)))
    (d / "my_program.py").write_text(PROGRAM)
    from helpers.encoder_models import encoder
    from helpers.kv_decoder import decoder_model
    import onnx
    onnx.save(encoder(layers=1, hidden=32, heads=4), str(d / "encoder.onnx"))
    onnx.save(decoder_model(layers=2, hidden=32, heads=4, vocab=64), str(d / "decoder.onnx"))
    # (onnxruntime is one of the test extras: its quantizer makes the int8 model)
    from onnxruntime.quantization import quantize_dynamic
    quantize_dynamic(str(d / "model.onnx"), str(d / "model_int8.onnx"))
    return d


def _shell_lines(slow):
    out = []
    for i, (lang, text) in enumerate(BLOCKS):
        if lang != "bash" or i == 0:
            continue
        for line in text.splitlines():
            if line.strip() and any(s in line for s in SLOW) == slow:
                out.append(line)
    return out


def _run(line, folder):
    cwd = ROOT if "benchmarks/" in line else folder
    r = subprocess.run(["bash", "-c", line], cwd=cwd, env=_env(), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def test_the_install_block_stays_as_it_is_and_the_demo_runs(tmp_path):
    assert BLOCKS[0] == ("bash", INSTALL)
    r = subprocess.run([sys.executable, "-m", "pyarena", "demo"], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "outputs agree across modes" in r.stdout


@pytest.mark.parametrize("line", _shell_lines(slow=False))
def test_shell_lines_run(line, folder):
    _run(line, folder)


@pytest.mark.slow
@pytest.mark.parametrize("line", _shell_lines(slow=True))
def test_benchmark_lines_run(line, folder):
    _run(line, folder)


def test_python_blocks_run_in_order(folder):
    code = "\n\n".join(text for lang, text in BLOCKS if lang == "python")
    script = folder / "readme_blocks.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], cwd=folder, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (folder / "plan.png").exists()


def test_the_c_block_compiles_and_runs(tmp_path):
    import pyarena
    (body,) = [text for lang, text in BLOCKS if lang == "c"]
    src = tmp_path / "readme.c"
    src.write_text('#include <stdio.h>\n#include "pyarena.h"\n\nint main(void)\n{\n'
                   + textwrap.indent(body, "    ") + "    return st == PA_OK ? 0 : 1;\n}\n")
    exe = tmp_path / "readme"
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-I", pyarena.get_include(),
                        str(src), pyarena.get_library("static"), "-lpthread", "-o", str(exe)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
