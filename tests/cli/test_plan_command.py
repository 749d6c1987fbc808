"""``pyarena plan``: output formats, round trips and exit codes."""
import json
import subprocess
import sys

import pytest

from pyarena.cli import main
from pyarena.graph import Graph
from pyarena.planning import Plan, load_intervals_csv
from pyarena.planning import validate


@pytest.fixture
def graph_file(tmp_path):
    g = Graph("cli")
    g.add_tensor("x", ["N", 3, 8, 8], role="input")
    g.add_tensor("w", [8, 3, 1, 1], role="constant")
    g.add_tensor("c", ["N", 8, 8, 8])
    g.add_tensor("a", ["N", 8, 8, 8])
    g.add_tensor("f", ["N", 512])
    g.add_tensor("y", ["N", 512], role="output")
    g.add_op("Conv", ["x", "w"], ["c"], name="conv", scratch_bytes=1000)
    g.add_op("Relu", ["c"], ["a"], name="relu")
    g.add_op("Flatten", ["a"], ["f"], name="flat")
    g.add_op("Sigmoid", ["f"], ["y"], name="sig")
    path = tmp_path / "g.json"
    g.save(path)
    return path


def test_json_to_stdout_round_trip(graph_file, capsys):
    rc = main(["plan", str(graph_file), "--input", "x=2,3,8,8", "--json", "-",
               "--time-limit", "0.5"])
    out, err = capsys.readouterr()
    assert rc == 0
    d = json.loads(out)
    assert "arena" in err                      # the summary moved to stderr
    assert d["num_ops"] == 4 and d["alignment"] == 64 and d["strategy"] == "best"
    names = {t for b in d["buffers"] for t in b["tensors"]}
    assert names == {"x", "c", "a", "f", "y", "conv::scratch"}
    assert d["arena_bytes"] >= d["lower_bound_bytes"] > 0
    assert d["naive_bytes"] >= d["arena_bytes"]
    g = Graph.load(graph_file)
    g.bind_inputs({"x": (2, 3, 8, 8)})
    g.validate()
    p = Plan.from_json(d, graph=g)
    assert validate(p) == []
    views = p.bind()
    assert views["y"].shape == (2, 512)


def test_options_files_and_no_inplace(graph_file, tmp_path, capsys):
    js, png, csv_out = tmp_path / "p.json", tmp_path / "p.png", tmp_path / "p.csv"
    rc = main(["plan", str(graph_file), "--input", "x=1,3,8,8", "--align", "128",
               "--strategy", "greedy-by-size", "--json", str(js), "--plot", str(png),
               "--csv-out", str(csv_out)])
    out = capsys.readouterr().out
    assert rc == 0 and "greedy-by-size" in out
    d = json.loads(js.read_text())
    assert d["alignment"] == 128 and all(b["offset"] % 128 == 0 for b in d["buffers"])
    assert png.read_bytes()[:4] == b"\x89PNG"
    rows = load_intervals_csv(csv_out)
    assert {r.name: r.offset for r in rows} == {b["name"]: b["offset"]
                                                for b in d["buffers"]}
    rc = main(["plan", str(graph_file), "--input", "x=1,3,8,8", "--no-inplace",
               "--json", str(js)])
    d2 = json.loads(js.read_text())
    assert rc == 0 and all(len(b["tensors"]) == 1 for b in d2["buffers"])
    assert d2["arena_bytes"] >= d["arena_bytes"] or d2["alignment"] != d["alignment"]


def test_csv_input_output_and_capacity(tmp_path, capsys):
    src = tmp_path / "i.csv"
    src.write_text("id,lower,upper,size\na,0,2,100\nb,1,3,50\nc,2,4,100\n")
    out = tmp_path / "o.csv"
    assert main(["plan", str(src), "--csv-out", str(out), "--json", "-"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["alignment"] == 1 and d["lower_bound_bytes"] == 150
    rows = load_intervals_csv(out)
    assert [(r.name, r.first, r.last, r.size) for r in rows] == \
        [("a", 0, 1, 100), ("b", 1, 2, 50), ("c", 2, 3, 100)]
    assert all(r.offset is not None for r in rows)
    # a fit within 150 bytes exists (a and c can share)
    assert main(["plan", str(src), "--capacity", "150", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["arena_bytes"] <= 150
    assert main(["plan", str(src), "--capacity", "149"]) == 3
    assert "infeasible" in capsys.readouterr().err


@pytest.mark.parametrize("args,needle", [
    (["plan", "{dir}/missing.json"], "no such file"),
    (["plan", "{dir}/g.txt"], "unknown model format"),
    (["plan", "{graph}", "--input", "x=1,3"], "rank"),
    (["plan", "{graph}", "--input", "x1,3,8,8"], "NAME=D0"),
    (["plan", "{graph}", "--input", "x=1,a,8,8"], "integers"),
    (["plan", "{graph}", "--input", "x=1,-3,8,8"], "negative dimension"),
    (["plan", "{graph}", "--input", "x=1,3,8,8", "--input", "x=1,3,8,8"], "given twice"),
    (["plan", "{graph}", "--input", "zz=1"], "unknown graph input"),
    (["plan", "{graph}", "--input", "x=1,3,8,8", "--align", "24"], "power of two"),
    (["plan", "{graph}", "--input", "x=1,3,8,8", "--time-limit", "0"], "time-limit"),
    (["plan", "{dir}/bad.json"], "not valid JSON"),
    (["plan", "{dir}/bad.csv"], "bad.csv:2"),
    (["plan", "{dir}/b.onnx"], "pip install pyarena[onnx]"),
])
def test_bad_input_exit_codes(args, needle, graph_file, tmp_path, capsys, monkeypatch):
    (tmp_path / "g.txt").write_text("x")
    (tmp_path / "bad.json").write_text("{nope")
    (tmp_path / "bad.csv").write_text("id,lower,upper,size\n1,2,x,3\n")
    (tmp_path / "b.onnx").write_bytes(b"\0")
    argv = [a.format(dir=tmp_path, graph=graph_file) for a in args]
    # as if the onnx extra were not installed (None in sys.modules: ImportError)
    monkeypatch.setitem(sys.modules, "onnx", None)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_module_entry_point(graph_file):
    r = subprocess.run([sys.executable, "-m", "pyarena", "plan", str(graph_file),
                        "--input", "x=1,3,8,8", "--json", "-", "--strategy", "first-fit"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strategy"] == "first-fit"
    r = subprocess.run([sys.executable, "-m", "pyarena", "plan", str(graph_file),
                        "--strategy", "nope"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_no_inplace_concat(tmp_path, capsys):
    g = Graph("cat")
    g.add_tensor("x", [1, 3, 8, 8], role="input")
    g.add_tensor("w", [8, 3], role="constant")
    for n in ("a", "b"):
        g.add_tensor(n, [1, 8, 8, 8])
    g.add_tensor("y", [1, 16, 8, 8], role="output")
    g.add_op("Conv", ["x", "w"], ["a"], name="conv_a")
    g.add_op("Conv", ["x", "w"], ["b"], name="conv_b")
    g.add_op("Concat", ["a", "b"], ["y"], name="cat", axis=1)
    path = tmp_path / "cat.json"
    g.save(path)
    js = tmp_path / "p.json"
    plans = {}
    for flag in ([], ["--no-inplace-concat"]):
        assert main(["plan", str(path), "--json", str(js)] + flag) == 0
        plans[bool(flag)] = json.loads(js.read_text())
    on, off = plans[False], plans[True]
    assert [r["mode"] for r in on["reuses"]] == ["concat", "concat"]
    assert on["offsets"]["b"] == on["offsets"]["y"] + 8 * 8 * 8 * 4
    assert off["reuses"] == [] and on["arena_bytes"] < off["arena_bytes"]
    assert "2 Concat inputs in place" in capsys.readouterr().out
