"""``pyarena plan MODEL --memory-budget BYTES`` and ``pyarena run MODEL
--memory-budget BYTES``: the fastest plan whose arena fits, exit 3 naming
the smallest arena reachable, exit 2 for a bad value."""
import json

import numpy as np
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena import PlanInfeasibleError, plan
from pyarena.cli import main
from pyarena.importers import load_model
from pyarena.runtime import set_scratch


def conv_model(tmp_path):
    """Two 3x3 convolutions (8 -> 64 -> 8 channels at 32x32): their im2col
    scratch is over the default per-op budget, so smaller budgets shrink it."""
    r = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    path = tmp_path / "conv.onnx"
    make_model(nodes, {"x": ([1, 8, 32, 32], np.float32)}, {"y": (None, np.float32)},
               {"w1": (r.standard_normal((64, 8, 3, 3)) * 0.1).astype(np.float32),
                "w2": (r.standard_normal((8, 64, 3, 3)) * 0.1).astype(np.float32)},
               path=path)
    return str(path)


def arenas(path):
    """(the default arena, the smallest reachable one) of the model."""
    default = plan(load_model(path)).arena_bytes
    g = set_scratch(load_model(path), 1)
    return default, min(plan(g).arena_bytes, plan(set_scratch(load_model(path), 1),
                                                  schedule=True).arena_bytes)


def test_plan_within_the_default_arena_changes_nothing(tmp_path, capsys):
    path = conv_model(tmp_path)
    default, _ = arenas(path)
    assert main(["plan", path, "--memory-budget", str(default), "--json", "-"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert d["arena_bytes"] == default
    assert d["budget"]["scratch_budget"] is None and not d["budget"]["order_changed"]
    assert "fits with the given order, scratch as given" in out.err
    assert main(["plan", path, "--json", "-"]) == 0
    assert "budget" not in json.loads(capsys.readouterr().out)


def test_plan_shrinks_the_scratch_to_fit(tmp_path, capsys):
    path = conv_model(tmp_path)
    default, smallest = arenas(path)
    budget = (default + smallest) // 2
    assert main(["plan", path, "--memory-budget", str(budget), "--json", "-"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert smallest <= d["arena_bytes"] <= budget < default
    assert d["budget"]["memory_budget"] == budget
    assert 1 <= d["budget"]["scratch_budget"] < 1 << 20
    assert f"scratch budget {d['budget']['scratch_budget']:,} B per op" in out.err


def test_plan_over_an_impossible_budget_exits_3_naming_the_smallest(tmp_path, capsys):
    path = conv_model(tmp_path)
    with pytest.raises(PlanInfeasibleError) as info:     # the API's smallest, any knob
        plan(load_model(path), memory_budget=1)
    smallest = info.value.smallest_bytes
    assert smallest < arenas(path)[1]    # the two convs in row bands: below scratch alone
    assert main(["plan", path, "--memory-budget", str(smallest - 64)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("pyarena plan: infeasible: no plan fits the memory budget")
    assert f"smallest total reached is {smallest:,} bytes" in err
    assert main(["plan", path, "--memory-budget", str(smallest)]) == 0


@pytest.mark.parametrize("value, why", [("0", "between 1 byte"), ("-5", "byte count"),
                                        ("abc", "byte count"), ("12 apples", "byte count")])
def test_bad_budgets_exit_2(tmp_path, capsys, value, why):
    path = conv_model(tmp_path)
    for cmd in ("plan", "run"):
        assert main([cmd, path, f"--memory-budget={value}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"pyarena {cmd}: error: --memory-budget") and why in err


def test_budget_with_capacity_or_a_csv_exits_2(tmp_path, capsys):
    path = conv_model(tmp_path)
    assert main(["plan", path, "--memory-budget", "1M", "--capacity", "1M"]) == 2
    assert "not both" in capsys.readouterr().err
    csv = tmp_path / "i.csv"
    csv.write_text("id,lower,upper,size\na,0,2,64\n")
    assert main(["plan", str(csv), "--memory-budget", "1M"]) == 2
    assert "--memory-budget does not apply to a CSV" in capsys.readouterr().err


def test_run_within_a_budget_gives_the_same_outputs(tmp_path, capsys):
    path = conv_model(tmp_path)
    _, smallest = arenas(path)
    budget = smallest
    base, small = tmp_path / "base.npz", tmp_path / "small.npz"
    assert main(["run", path, "--repeat", "1", "--no-reference", "--save", str(base)]) == 0
    capsys.readouterr()
    assert main(["run", path, "--repeat", "1", "--no-reference", "--save", str(small),
                 "--memory-budget", str(budget)]) == 0
    text = capsys.readouterr().out
    line = next(s for s in text.splitlines() if s.startswith("budget     "))
    assert line.startswith(f"budget     {budget:,} B: holds ")
    assert "; fits with the given order, scratch budget" in line
    # the split: total = arena + kernel state, within the budget, and the
    # state the bound kernels measured is the one the plan counted
    total, arena, state = (int(line.split(w, 1)[1].split(" B")[0].replace(",", ""))
                           for w in (" holds ", "= arena ", "+ kernel state "))
    assert total == arena + state <= budget
    assert f"kernels    state {state:,} B" in text
    a, b = np.load(base), np.load(small)
    np.testing.assert_allclose(b["y"], a["y"], rtol=1e-5, atol=1e-5)
    with pytest.raises(PlanInfeasibleError) as info:
        plan(load_model(path), memory_budget=1)
    smallest = info.value.smallest_bytes           # patched: below scratch alone
    assert main(["run", path, "--memory-budget", str(smallest - 64)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("pyarena run: infeasible:") and f"{smallest:,} bytes" in err


def test_plan_and_run_patch_a_stage_below_the_unpatched_floor(tmp_path, capsys):
    """A stride-2 stem: below the smallest arena of order and scratch, the
    first stage runs in row bands (planning/patch.py), same outputs."""
    r = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["b"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["b"], ["y"])]
    path = str(tmp_path / "stem.onnx")
    make_model(nodes, {"x": ([1, 3, 64, 64], np.float32)}, {"y": (None, np.float32)},
               {"w1": (r.standard_normal((32, 3, 3, 3)) * 0.1).astype(np.float32),
                "w2": (r.standard_normal((8, 32, 3, 3)) * 0.1).astype(np.float32)},
               path=path)
    g = load_model(path)
    floor = min(plan(set_scratch(load_model(path), 1)).arena_bytes, plan(g).arena_bytes)
    budget = floor * 3 // 4
    assert main(["plan", path, "--memory-budget", str(budget), "--json", "-"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    assert d["arena_bytes"] <= budget and d["budget"]["patch"]["grid"][0] >= 2
    assert " x 1 patches" in out.err
    base, small = tmp_path / "base.npz", tmp_path / "small.npz"
    assert main(["run", path, "--repeat", "1", "--no-reference", "--save", str(base)]) == 0
    assert main(["run", path, "--repeat", "1", "--no-reference", "--save", str(small),
                 "--memory-budget", str(budget)]) == 0
    capsys.readouterr()
    np.testing.assert_allclose(np.load(small)["y"], np.load(base)["y"], rtol=1e-5, atol=1e-6)
