"""Smoke test of the C pool benchmark (benchmarks/c/bench_pool.c).

Builds the driver into a temp dir and replays short traces against glibc
and the three pool modes and the learning pool (told the traces' step
marks).  With --strict the driver exits 1 unless, for each pool row,
the pool's own statistics agree with the trace: the peak of live requested
bytes equals the trace's peak (computed by the trace generator, not by the
pool), nothing is live at the end and pa_pool_check() finds no broken
invariant.  No timing is asserted.
"""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "c"


def _build(tmp_path):
    subprocess.run(["make", "-s", "-C", str(ROOT / "csrc")], check=True,
                   capture_output=True)
    build = tmp_path / "build"
    subprocess.run(["make", "-s", "-C", str(BENCH), f"BUILD={build}"],
                   check=True, capture_output=True)
    return build / "bench_pool"


def _rows(text):
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| allocator"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.setdefault(cells[0], []).append(cells)
    return rows


# the C core and the driver are compiled here (minutes on a fresh checkout
# of a loaded 2-core machine): the 60 s hang limit is for the run, not this
@pytest.mark.timeout(900)
def test_bench_pool_short_traces_agree_with_pool_stats(tmp_path):
    exe = _build(tmp_path)
    proc = subprocess.run(
        [str(exe), "--n", "3000", "--inferences", "2", "--reps", "1",
         "--allocs", "glibc,pool-hybrid,pool-slab,pool-buddy,pool-learned",
         "--strict", "--dump", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "MISMATCH" not in proc.stderr
    rows = _rows(proc.stdout)
    # the three pool modes and glibc ran every trace and got figures
    for name in ("glibc", "pool-hybrid", "pool-slab", "pool-buddy", "pool-learned"):
        assert len(rows[name]) == 5, (name, rows.get(name))
        for cells in rows[name]:
            assert float(cells[1]) > 0          # ns per pair
            assert float(cells[4]) > 0          # peak RSS / peak live
            assert float(cells[12]) > 0         # the same after warm-up
            assert float(cells[13]) >= 0        # page faults per step then
    for name in ("pool-hybrid", "pool-slab", "pool-buddy", "pool-learned"):
        for cells in rows[name]:
            # reserved / requested at the peaks is at least 1
            assert float(cells[7]) >= 1.0, cells
    # the dumped traces are balanced: every alloc is freed exactly once;
    # the inference traces mark the end of each inference
    csvs = sorted(tmp_path.glob("*.csv"))
    assert len(csvs) == 5
    for path in csvs:
        live = {}
        lines = path.read_text().splitlines()
        assert lines[0] == "op,slot,size"
        steps = 0
        for line in lines[1:]:
            op, slot, size = line.split(",")
            if op == "s":
                steps += 1
                if "loguniform" not in path.name:
                    assert not live, "an inference ended with blocks live"
            elif op == "a":
                assert slot not in live
                assert int(size) > 0
                live[slot] = int(size)
            else:
                assert op == "f" and slot in live
                del live[slot]
        assert not live, path
        assert steps >= 1, path
    # the header line states the trace's peak live bytes
    assert re.search(r"peak live [0-9.]+ MiB", proc.stdout)
