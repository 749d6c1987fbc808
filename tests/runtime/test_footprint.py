"""The process footprint: readings, the split of the peak into its parts,
the weights' accounts, and the report of ``pyarena run``."""
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from pyarena.cli import main
from pyarena.importers import load_model
from pyarena.runtime import Executor
from pyarena.runtime.footprint import Footprint, resident, weights_info

MIB = 1 << 20


def test_resident_reads_this_process():
    now, peak = resident()
    assert now is not None and now > 10 * MIB and peak >= now
    big = np.ones(64 * MIB // 8)                  # 64 MiB touched
    now2, peak2 = resident()
    assert now2 >= now + 48 * MIB and peak2 >= now2
    del big


def _readings(fp, base, load, bind, run, peaks, placed_load, placed_bind):
    fp.readings = {"base": (base, base), "load": (load, peaks[0]), "bind": (bind, peaks[1]),
                   "run": (run, peaks[2])}
    fp.placed = {"base": 0, "load": placed_load, "bind": placed_bind, "run": placed_bind}


def test_the_parts_add_up_to_the_peak():
    fp = Footprint()
    # base 40; load +15 of which 4 weights placed; bind +9 of which 6 more
    # weights; the run touches the 20 MiB arena and keeps 2 MiB more, with
    # a peak 1 MiB above that
    _readings(fp, 40 * MIB, 55 * MIB, 64 * MIB, 86 * MIB, (55 * MIB, 64 * MIB, 87 * MIB),
              4 * MIB, 10 * MIB)
    s = fp.split(10 * MIB, 20 * MIB)
    assert s["peak"] == 87 * MIB and s["base"] == 40 * MIB
    assert s["other"] == 87 * MIB - 40 * MIB - 10 * MIB - 20 * MIB
    assert s["load"] == 11 * MIB          # 15 - the 4 placed at load
    assert s["bind"] == 3 * MIB           # 9 - the 6 placed then
    assert s["inference"] == 2 * MIB      # 86 - 64 - the arena
    assert s["transient"] == 1 * MIB and s["transient_phase"] == "run"
    assert s["load"] + s["bind"] + s["inference"] + s["transient"] == s["other"]
    text = fp.format(10 * MIB, 20 * MIB)
    assert "peak RSS 87.0 MiB = baseline 40.0 MiB + weights 10.0 MiB + arena 20.0 MiB" \
        " + other 17.0 MiB" in text
    assert "load 11.0 MiB" in text and "inference 2.0 MiB" in text
    assert "transient 1.0 MiB (the peak above the end state, during run)" in text


def test_the_callers_inputs_are_their_own_part():
    """2 of bind's 9 MiB are the caller's input arrays: not "other"."""
    fp = Footprint()
    _readings(fp, 40 * MIB, 55 * MIB, 64 * MIB, 86 * MIB, (55 * MIB, 64 * MIB, 87 * MIB),
              4 * MIB, 10 * MIB)
    s = fp.split(10 * MIB, 20 * MIB, inputs=2 * MIB)
    assert s["inputs"] == 2 * MIB and s["bind"] == 1 * MIB
    assert s["other"] == 87 * MIB - 40 * MIB - 2 * MIB - 10 * MIB - 20 * MIB
    assert s["load"] + s["bind"] + s["inference"] + s["transient"] == s["other"]
    assert "baseline 40.0 MiB + inputs 2.0 MiB + weights 10.0 MiB" in \
        fp.format(10 * MIB, 20 * MIB, 2 * MIB)


def test_a_peak_reached_while_loading_is_a_load_transient():
    fp = Footprint()
    _readings(fp, 40 * MIB, 55 * MIB, 64 * MIB, 86 * MIB, (130 * MIB, 130 * MIB, 130 * MIB),
              4 * MIB, 10 * MIB)
    s = fp.split(10 * MIB, 20 * MIB)
    assert s["transient"] == 44 * MIB and s["transient_phase"] == "load"
    assert s["inference"] == 2 * MIB
    assert s["load"] + s["bind"] + s["inference"] + s["transient"] == s["other"]


def test_mark_takes_a_reading():
    fp = Footprint()
    fp.mark("base")
    fp.mark("load", 123)
    assert fp.placed["load"] == 123 and fp.readings["load"][1] >= fp.readings["base"][0]


def _model(path, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((64, 32, 3, 3)).astype(np.float32)       # mapped, 72 KiB
    # (5 x 5 pixels: more than the direct kernel's few-pixel rule takes, so
    # the convolution reads its weights as the file holds them)
    wm = rng.standard_normal((64 * 5 * 5, 10)).astype(np.float32)    # mapped, 62.5 KiB
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("MatMul", ["f", "wm"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 32, 5, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(wm, "wm")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return w, wm


def test_weights_info_counts_the_arena_and_the_file(tmp_path):
    path = str(tmp_path / "m.onnx")
    w, wm = _model(path)
    g = load_model(path, native=False)
    ex = Executor(g)
    info = weights_info(ex)
    assert info["arena"] == ex.weights_bytes >= w.nbytes + wm.nbytes
    # both weights are in the arena now (the conv's matrix is a reshape of
    # its weights; the MatMul reads its operand at run time)
    assert info["by_dtype"] == {"float32": w.nbytes + wm.nbytes}
    assert info["mapped"] == 0


def test_pyarena_run_reports_the_parts_of_its_peak(tmp_path, capsys):
    path = str(tmp_path / "m.onnx")
    w, wm = _model(path)
    assert main(["run", path, "--repeat", "1", "--no-reference"]) == 0
    text = capsys.readouterr().out
    m = re.search(r"peak RSS ([\d.,]+) MiB = baseline ([\d.,]+) MiB \+ inputs [\d.,]+ [KM]?i?B "
                  r"\+ weights ([\d.,]+) KiB "
                  r"\+ arena ([\d.,]+) KiB \+ other (-?[\d.,]+) (KiB|MiB)", text)
    assert m, text
    peak, base = float(m.group(1)), float(m.group(2))
    assert 10 < base < peak
    assert "other: load" in text and "bind" in text and "inference" in text
    # the conv's weights held as constants; the MatMul's read once to pack
    # them (the packed SGEMM keeps its own layout, not the constant)
    assert (f"float32 {w.nbytes / 1024:.1f} KiB of them the graph's constants; "
            f"{wm.nbytes / 1024:.1f} KiB more read from the file at setup only") in text


def test_executor_memory_info(tmp_path):
    path = str(tmp_path / "m.onnx")
    w, wm = _model(path)
    ex = Executor(load_model(path, native=False))
    info = ex.memory_info()
    assert info["weights_bytes"] == ex.weights_bytes
    assert info["weights_by_dtype"] == {"float32": w.nbytes + wm.nbytes}
    assert info["arena_bytes"] == ex.plan.arena_bytes > 0
    assert 10 * MIB < info["resident_bytes"] <= info["peak_resident_bytes"]
    assert Executor(load_model(path), allocator="numpy").memory_info()["arena_bytes"] == 0
