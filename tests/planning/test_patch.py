"""The row-band arithmetic of patched stages (planning/patch.py), checked
against brute force: the rows of every tensor that an output band depends
on, found by following each output row through each op's taps, lie in the
rows the band computes (a dilated kernel's last gap may be computed too),
and each band op's padding makes its output exactly its rows."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyarena import InvalidArgumentError
from pyarena.graph import Graph
from pyarena.planning.patch import (band_needs, band_rows, op_geometry, stage_needs,
                                   stages)
from pyarena.planning.result import _budget_from_json


@given(st.integers(1, 300), st.integers(1, 40))
def test_bands_cover_the_rows_once_in_order(rows, n):
    bands = band_rows(rows, n)
    assert bands[0][0] == 0 and bands[-1][1] == rows
    assert all(a < b for a, b in bands)
    assert all(x[1] == y[0] for x, y in zip(bands, bands[1:]))
    assert len(bands) <= min(n, rows)
    sizes = [b - a for a, b in bands]
    assert set(sizes[:-1]) <= {sizes[0]} and sizes[-1] <= sizes[0]


SPATIAL = st.tuples(st.sampled_from(["Conv", "MaxPool", "Relu", "Add", "Pad", "Resize"]),
                    st.sampled_from([1, 2, 3, 5]), st.sampled_from([1, 2]),
                    st.sampled_from([1, 2, 3]), st.integers(0, 3), st.integers(0, 3))


def build(layers, h):
    """A chain; an Add reads the previous tensor and the one before it."""
    g = Graph("g")
    g.add_tensor("t0", (1, 2, h, 6), role="input")
    names, shapes = ["t0"], {"t0": (1, 2, h, 6)}
    for i, (kind, k, s, d, pt, pb) in enumerate(layers):
        x = names[-1]
        hh = shapes[x][2]
        y = f"t{i + 1}"
        if kind in ("Conv", "MaxPool"):
            ext = d * (k - 1) + 1
            if hh + pt + pb < ext or max(pt, pb) >= ext:
                continue
            ho = (hh + pt + pb - ext) // s + 1
            attrs = {"strides": [s, 1], "pads": [pt, 0, pb, 0], "dilations": [d, 1]}
            if kind == "Conv":
                g.add_tensor(f"w{i}", (2, 2, k, 1), role="constant")
                ins = [x, f"w{i}"]
            else:
                attrs["kernel_shape"] = [k, 1]
                ins = [x]
            shape = (1, 2, ho, 6)
        elif kind == "Pad":     # (pt, pb) rows of zeros, one column on the left
            ins, shape = [x], (1, 2, hh + pt + pb, 6)
            attrs = {"mode": "constant", "pads": [0, 0, pt, 1, 0, 0, pb, 0]}
        elif kind == "Resize" and hh <= 40:  # x s rows (+ pt: a scale that is no integer)
            ins, shape = [x], (1, 2, hh * s + pt, 6)
            attrs = {"mode": "linear" if d != 2 else "nearest",
                     "coordinate_transformation_mode": CTM[k]}
        elif kind == "Add" and len(names) > 1 and shapes[names[-2]] == shapes[x]:
            ins, attrs, shape = [x, names[-2]], {}, shapes[x]
        else:
            ins, attrs, shape, kind = [x], {}, shapes[x], "Relu"
        g.add_tensor(y, shape)
        g.add_op(kind, ins, [y], name=f"op{i}", **attrs)
        names.append(y)
        shapes[y] = shape
    return g, shapes


CTM = {1: "half_pixel", 2: "asymmetric", 3: "align_corners", 5: "pytorch_half_pixel"}


def resize_taps(op, hin, hout, o):
    """The input rows output row ``o`` of a Resize reads (ONNX's formulas,
    dividing by the scale as they do)."""
    mode, scale = op.attrs["coordinate_transformation_mode"], hout / hin
    if mode in ("half_pixel", "pytorch_half_pixel"):
        c = (o + 0.5) / scale - 0.5
    elif mode == "asymmetric":
        c = o / scale
    else:
        c = o * (hin - 1) / (hout - 1) if hout > 1 else 0.0
    c = min(max(c, 0.0), hin - 1)
    if op.attrs["mode"] == "nearest":        # round_prefer_floor
        return {min(max(math.ceil(c - 0.5), 0), hin - 1)}
    return {math.floor(c), min(math.floor(c) + 1, hin - 1)}


def brute(g, y, band):
    """tensor -> the set of its rows that rows ``band`` of ``y`` depend on."""
    deps = {y: set(range(*band))}
    for op in reversed(g.ops):
        rows = deps.get(op.outputs[0], set())
        if op.op_type == "Pad":    # output row o is input row o - top (or padding)
            pt = op.attrs["pads"][2]
            hin = g.tensors[op.inputs[0]].shape[2]
            deps.setdefault(op.inputs[0], set()).update(
                o - pt for o in rows if 0 <= o - pt < hin)
        elif op.op_type == "Resize":
            hin, hout = g.tensors[op.inputs[0]].shape[2], g.tensors[op.outputs[0]].shape[2]
            deps.setdefault(op.inputs[0], set()).update(
                r for o in rows for r in resize_taps(op, hin, hout, o))
        elif op.op_type in ("Conv", "MaxPool"):
            s, d, k, pt = op_geometry(op, g, 2)[:4]
            hin = g.tensors[op.inputs[0]].shape[2]
            need = {o * s - pt + d * t for o in rows for t in range(k)}
            deps.setdefault(op.inputs[0], set()).update(r for r in need if 0 <= r < hin)
        else:
            for n in op.inputs:
                deps.setdefault(n, set()).update(rows)
    return deps


@settings(max_examples=150, deadline=None)
@given(st.lists(SPATIAL, min_size=1, max_size=5), st.integers(4, 40), st.data())
def test_band_needs_are_the_hull_of_the_rows_each_band_depends_on(layers, h, data):
    g, shapes = build(layers, h)
    if not g.ops:
        return
    y = g.ops[-1].outputs[0]
    rows = shapes[y][2]
    n = data.draw(st.integers(1, rows))
    geos = {i: op_geometry(op, g, 2) for i, op in enumerate(g.ops)
            if op.op_type in ("Conv", "MaxPool", "Pad", "Resize")}
    for band in band_rows(rows, n):
        need, per_op = band_needs(g.ops, shapes, y, band, 2, geos)
        deps = brute(g, y, band)
        for name, rs in deps.items():
            if rs:   # a tensor a band needs: computed for (at least) the hull of its rows
                lo, hi = need[name]
                assert 0 <= lo <= min(rs) and max(rs) < hi <= shapes[name][2], name
        for i, op in enumerate(g.ops):
            if per_op[i] is None:   # only a band of padding reads it: no rows needed
                assert not deps.get(op.outputs[0])
                continue
            req, pads, made = per_op[i]
            assert made == need[op.outputs[0]]     # no reuse: the whole window
            if op.op_type == "Pad":  # real rows + band padding = the band's rows
                (r0, r1), out = req[0], need[op.outputs[0]]
                assert r1 - r0 + pads[0] + pads[1] == out[1] - out[0]
                assert 0 <= r0 <= r1 <= shapes[op.inputs[0]][2]
                assert pads[0] <= op.attrs["pads"][2] and pads[1] <= op.attrs["pads"][6]
                assert set(range(r0, r1)) <= deps.get(op.inputs[0], set()) | set(
                    range(need.get(op.inputs[0], (0, 0))[0],
                          need.get(op.inputs[0], (0, 0))[1]))
            elif op.op_type == "Resize":    # its band's coordinates, from its first row
                r0, r1 = req[0]
                assert len(pads) == need[op.outputs[0]][1] - need[op.outputs[0]][0]
                assert 0 <= min(pads) and max(pads) <= r1 - r0 - 1
            elif i in geos:   # the band pads make the band conv's output exactly the band
                s, d, k, _ = geos[i][:4]
                r0, r1 = req[0]
                out = need[op.outputs[0]]
                assert (r1 - r0 + pads[0] + pads[1] - d * (k - 1) - 1) // s + 1 == \
                    out[1] - out[0]
                assert 0 <= pads[0] <= op.attrs["pads"][0]
                assert 0 <= pads[1] <= op.attrs["pads"][2]


@settings(max_examples=150, deadline=None)
@given(st.lists(SPATIAL, min_size=1, max_size=5), st.integers(4, 40), st.data())
def test_row_reuse_computes_each_needed_row_once_and_keeps_what_later_bands_read(
        layers, h, data):
    g, shapes = build(layers, h)
    if not g.ops:
        return
    y = g.ops[-1].outputs[0]
    rows = shapes[y][2]
    bands = band_rows(rows, data.draw(st.integers(1, rows)))
    geos = {i: op_geometry(op, g, 2) for i, op in enumerate(g.ops)
            if op.op_type in ("Conv", "MaxPool", "Pad", "Resize")}
    x = g.ops[0].inputs[0]
    computed, window = {}, {}       # tensor -> rows made so far; its last window
    steps = stage_needs(g.ops, shapes, y, bands, 2, geos, reuse=True)
    fill = len(steps) - len(bands)          # the steps that fill the first band's windows
    assert fill >= 0
    for k, (need, per_op) in enumerate(steps):
        for name, (lo, hi) in need.items():
            # the window starts no higher than the last one: the rows it
            # keeps are still in the buffer (the stage input is whole: its
            # window is only where a band reads, and may move up -- a
            # Resize's reader and an Add's of the same input)
            assert name == x or window.get(name, (0, 0))[0] <= lo
            window[name] = (lo, hi)
        for i, op in enumerate(g.ops):
            if per_op[i] is None:
                continue
            req, _, (a, b) = per_op[i]
            for j, (r0, r1) in req.items():     # reads rows of the input's window
                if r0 < r1 and op.inputs[j] != x:
                    lo, hi = need[op.inputs[j]]
                    assert lo <= r0 <= r1 <= hi
                    assert set(range(r0, r1)) <= computed[op.inputs[j]]
            mine = set(range(a, b))
            assert not mine & computed.get(op.outputs[0], set())     # no row twice
            computed.setdefault(op.outputs[0], set()).update(mine)
        if k < fill:
            assert per_op[len(g.ops) - 1] is None    # no row of the output while filling
            continue
        for name, rs in brute(g, y, bands[k - fill]).items():   # all it needs is made by now
            if name != x:
                assert rs <= computed.get(name, set()) <= set(range(shapes[name][2]))


def test_no_stage_without_a_spatial_op_or_with_an_unknown_op():
    g = Graph("g")
    g.add_tensor("x", (1, 2, 8, 8), role="input")
    g.add_tensor("a", (1, 2, 8, 8))
    g.add_tensor("y", (1, 2, 8, 8), role="output")
    g.add_op("Relu", ["x"], ["a"], name="r")
    g.add_op("Softmax", ["a"], ["y"], name="s")
    assert stages(g) == []


def test_budget_json_keeps_the_patch_record_and_refuses_a_bad_one():
    b = {"memory_budget": 10, "order_changed": False, "scratch_budget": None, "tried": [],
         "fixed_order_bound_bytes": 40, "patch": {"op": "p", "grid": [4, 1]},
         "patches": [{"op": "p", "grid": [4, 1]}, {"op": "q", "grid": [8, 1]}]}
    assert _budget_from_json(b) == b
    one = {k: v for k, v in b.items() if k != "patches"}   # before a second stage
    assert _budget_from_json(one) == {**one, "patches": [b["patch"]]}
    old = {k: b[k] for k in ("memory_budget", "order_changed", "scratch_budget", "tried")}
    assert _budget_from_json(old) == old      # a plan made before patching
    with pytest.raises(InvalidArgumentError, match="patch"):
        _budget_from_json({**b, "patch": [1]})
    with pytest.raises(InvalidArgumentError, match="patches"):
        _budget_from_json({**b, "patches": [1]})


def test_only_the_stage_inputs_window_moves_up_between_reuse_steps():
    """Resize then Add(resized, input): the input is read at one row for
    the Resize and at the band's rows for the Add, so its window (a cut of
    the whole input, never held) moves up between steps; the held tensors'
    windows never do."""
    g, shapes = build([("Resize", 1, 1, 1, 0, 0), ("Add", 1, 1, 1, 0, 0)], 4)
    y, x = g.ops[-1].outputs[0], g.ops[0].inputs[0]
    geos = {0: op_geometry(g.ops[0], g, 2)}
    window, moved = {}, set()
    for need, _ in stage_needs(g.ops, shapes, y, band_rows(shapes[y][2], 2), 2, geos,
                               reuse=True):
        for name, (lo, hi) in need.items():
            if window.get(name, (0, 0))[0] > lo:
                moved.add(name)
            window[name] = (lo, hi)
    assert moved == {x}
