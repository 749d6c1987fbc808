"""Allocation traces: the recorder (a NEP 49 handler), the text format,
and the C replayer behind ``pyarena alloc-bench``."""
import gzip
import os

import numpy as np
import pytest

import pyarena
from pyarena import trace
from pyarena.errors import InvalidArgumentError
from pyarena.memory import replay as replay_mod
from pyarena.memory.trace import ALLOC, FREE, STEP, Trace, read_trace, write_trace


def events(path):
    """The event lines of a trace file (comments dropped)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return [ln.split() for ln in f if ln.strip() and not ln.startswith("#")]


def test_records_allocations_frees_and_steps_in_order(tmp_path):
    path = tmp_path / "t.trace"
    with trace.record(path) as rec:
        a = np.empty(100)
        b = np.empty(200, np.float32)
        del a
        trace.step()
        c = np.empty(7, np.int8)
        del b, c
    assert [e[0] for e in events(path)] == ["a", "a", "f", "s", "a", "f", "f"]
    ev = events(path)
    assert ev[0][2] == "800" and ev[1][2] == "800" and ev[4][2] == "7"
    assert ev[2][1] == ev[0][1]                       # the free names a's block
    assert {ev[5][1], ev[6][1]} == {ev[1][1], ev[4][1]}
    assert rec.counts["allocations"] == 3 and rec.counts["frees"] == 3
    assert rec.counts["steps"] == 1
    assert rec.counts["peak_live_bytes"] == 1600


def test_header_names_program_date_and_numpy(tmp_path):
    path = tmp_path / "t.trace"
    with trace.record(path, program="my prog --x"):
        np.empty(3)
    with open(path) as f:
        head = [ln for ln in f if ln.startswith("#")]
    assert head[0].strip() == "# pyarena-trace/1"
    t = read_trace(path)
    assert t.header["program"] == "my prog --x"
    assert t.header["numpy"] == np.__version__
    assert t.header["date"].endswith("Z")


def test_ids_unique_among_live_blocks_and_reused_after_free(tmp_path):
    path = tmp_path / "t.trace"
    with trace.record(path):
        keep = [np.empty(16 + i) for i in range(5)]
        for _ in range(50):
            x = np.empty(1000)
            del x
        del keep
    live = set()
    ids_seen = set()
    for e in events(path):
        if e[0] == "a":
            assert e[1] not in live
            live.add(e[1])
            ids_seen.add(e[1])
        elif e[0] == "f":
            live.remove(e[1])
    assert not live
    assert len(ids_seen) <= 7    # 55 allocations, never more than 6 live at once


def test_realloc_is_a_new_block_then_a_free(tmp_path):
    path = tmp_path / "t.trace"
    a = None
    with trace.record(path):
        a = np.zeros(100)
        a.resize(5000, refcheck=False)     # PyDataMem_UserRENEW
    ev = events(path)
    assert ev[0] == ["a", ev[0][1], "800"]
    assert ev[1][0] == "a" and ev[1][2] == "40000" and ev[1][1] != ev[0][1]
    assert ev[2] == ["f", ev[0][1]]
    assert a.shape == (5000,) and not a[:100].any()


def test_program_behaviour_unchanged_and_data_intact(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 64))
    expect = np.linalg.inv(x) @ x + np.sort(x, axis=0).cumsum(axis=1)
    with trace.record(tmp_path / "t.trace.gz"):
        got = np.linalg.inv(x) @ x + np.sort(x, axis=0).cumsum(axis=1)
    np.testing.assert_array_equal(got, expect)
    got[...] = 1.0            # the block made while recording stays usable after
    assert got.sum() == got.size


def test_gz_round_trip_and_peak_live_matches_counts(tmp_path):
    path = tmp_path / "t.trace.gz"
    with trace.record(path) as rec:
        for n in (10, 1000, 50, 20000, 3):
            y = np.ones(n)
            z = y * 2
            del y, z
    assert not (tmp_path / "t.part").exists()
    with gzip.open(path, "rt") as f:
        assert f.readline().startswith("# pyarena-trace/1")
    t = read_trace(path)
    # two arrays an iteration, plus NumPy's own scalar temporaries
    assert t.allocations == rec.counts["allocations"] >= 10
    assert t.peak_live_bytes == rec.counts["peak_live_bytes"]
    assert 2 * 20000 * 8 <= t.peak_live_bytes <= 2 * 20000 * 8 + 256
    out = tmp_path / "copy.trace"
    write_trace(out, t)
    u = read_trace(out)
    assert (u.kinds == t.kinds).all() and (u.ids == t.ids).all() and (u.sizes == t.sizes).all()


def test_step_without_recording_is_a_no_op():
    trace.step()
    assert trace.step() is None


def test_nested_recordings_both_see_the_inner_block(tmp_path):
    with trace.record(tmp_path / "outer.trace"):
        np.empty(11)
        with trace.record(tmp_path / "inner.trace"):
            a = np.empty(22)
            trace.step()
        del a
    outer, inner = events(tmp_path / "outer.trace"), events(tmp_path / "inner.trace")
    assert [e[0] for e in inner] == ["a", "s"]
    assert ["s"] in outer and ["a", outer[1][1], "176"] in outer


def test_automatic_steps_mark_the_ends_of_loop_iterations(tmp_path):
    path = tmp_path / "t.trace"
    keep = np.ones(3)                         # allocated before: not in the trace
    with trace.record(path, steps="auto"):
        base = np.empty(500)                  # live through the loop
        for i in range(300):
            a = np.ones(40 + i % 3)
            b = a + 1
            c = b * a
            del a, b, c
        del base
    t = read_trace(path)
    live = t.live_bytes()
    at_steps = live[t.kinds == STEP]
    baseline = 500 * 8
    assert np.count_nonzero(at_steps == baseline) >= 290
    assert np.count_nonzero(at_steps != baseline) <= 3    # only while warming up
    assert keep.sum() == 3


def test_automatic_steps_do_not_depend_on_what_came_before(tmp_path):
    """A few more allocations before the loop (an import, a cache) used to
    move every later mark (the window moved in half-windows counted from
    the first event): now the marks past the first window fall on the same
    loop allocations."""
    marks = []
    for extra in (0, 1, 3, 7):
        path = tmp_path / f"t{extra}.trace"
        with trace.record(path, steps="auto"):
            pre = [np.ones(10 + i) for i in range(extra)]
            base = np.empty(500)
            for i in range(400):
                a = np.ones(40 + i % 5)
                b = a + 1
                if i % 7 == 0:
                    c = b * a
                    d = c + b
                    del c, d
                del a, b
            del base, pre
        t = read_trace(path)
        kinds, sizes = np.asarray(t.kinds), np.asarray(t.sizes)
        start = np.nonzero((kinds == ALLOC) & (sizes == 500 * 8))[0][0]   # `base`
        allocs = np.cumsum(kinds == ALLOC)
        at = (allocs - allocs[start])[(kinds == STEP) & (np.arange(len(kinds)) > start)]
        marks.append(at[at > 600].tolist())            # past the first window
    assert len(marks[0]) > 200
    assert all(m == marks[0] for m in marks)


def test_no_automatic_steps_unless_asked(tmp_path):
    path = tmp_path / "t.trace"
    with trace.record(path, steps="none"):
        for _ in range(300):
            a = np.ones(40)
            del a
    assert read_trace(path).steps == 0


def test_callsites_name_the_allocating_line(tmp_path):
    path = tmp_path / "t.trace"
    with trace.record(path, callsites=True):
        a = np.empty(123)  # the line recorded
    line = test_callsites_name_the_allocating_line.__code__.co_firstlineno + 3
    t = read_trace(path)
    assert t.callsites == [f"{__file__}:{line}"]
    assert a.size == 123


def test_callsite_with_spaces_reads_back(tmp_path):
    t = Trace([ALLOC, FREE], [0, 0], [8, 0], callsites=["/my dir/prog x.py:12"])
    write_trace(tmp_path / "t.trace", t)
    assert read_trace(tmp_path / "t.trace").callsites == ["/my dir/prog x.py:12"]


def test_pool_serves_the_recorded_program(tmp_path):
    pool = pyarena.Pool()
    path = tmp_path / "t.trace"
    with trace.record(path, pool=pool) as rec:
        a = np.arange(100000, dtype=np.float64)
        s = pool.stats()
        total = float(a.sum())
        del a
    assert total == 99999 * 100000 / 2
    assert s.requested >= 800000            # the block came from the pool
    assert rec.counts["allocations"] >= 1


def test_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="steps"):
        trace.record("x.trace", steps="sometimes")


@pytest.mark.parametrize("text, why", [
    ("a 1\n", "bad event"),
    ("a 1 -8\n", "bad event"),
    ("x 1 8\n", "bad event"),
    ("f 1 2\n", "bad event"),
    ("s 3\n", "bad event"),
    ("a 4294967296 8\n", "bad event"),
    ("a -1 8\n", "bad event"),          # ids are unsigned 32-bit: one below the range
    ("a 4294967295 8\nf -1\n", "bad event"),
    ("a 1 9223372036854775808\n", "bad event"),   # sizes below 2**63
    ("a 1 8\na 1 8\n", "allocated again while live"),
    ("a 1 8\nf 2\n", "freed but not live"),
])
def test_malformed_traces_name_file_and_line(tmp_path, text, why):
    path = tmp_path / "bad.trace"
    path.write_text("# pyarena-trace/1\n" + text)
    with pytest.raises(InvalidArgumentError, match=why) as ei:
        read_trace(path)
    assert f"{path}:" in str(ei.value)


def test_damaged_gz_and_missing_file(tmp_path):
    path = tmp_path / "bad.trace.gz"
    path.write_bytes(gzip.compress(b"a 0 8\nf 0\n" * 100)[:30])
    with pytest.raises(InvalidArgumentError, match="not a readable trace"):
        read_trace(path)
    with pytest.raises(InvalidArgumentError, match="No such file"):
        read_trace(tmp_path / "none.trace")


def test_damaged_gz_body_is_a_clear_error(tmp_path):
    """A gzip stream whose compressed body is corrupted (zlib's own error,
    not an OSError) is refused like a truncated one."""
    data = bytearray(gzip.compress(b"a 0 8\nf 0\n" * 5000))
    for i in range(20, len(data) - 20, 7):
        data[i] ^= 0x5A
    path = tmp_path / "bad2.trace.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidArgumentError, match="not a readable trace"):
        read_trace(path)


def test_event_count_is_capped(tmp_path):
    """A small .gz that unpacks to many events is refused at the cap, with
    the line named; the cap can be raised."""
    path = tmp_path / "long.trace.gz"
    path.write_bytes(gzip.compress(b"# pyarena-trace/1\n" + b"a 0 8\nf 0\n" * 600))
    with pytest.raises(InvalidArgumentError, match=r"more than 1,000 events.*max_events") as e:
        read_trace(path, max_events=1000)
    assert ":1002:" in str(e.value)                  # the header, then event 1,001
    assert len(read_trace(path, max_events=1200)) == 1200
    with pytest.raises(InvalidArgumentError, match="max_events"):
        read_trace(path, max_events=0)


# -- the C replayer -------------------------------------------------------------
def hand_trace():
    """Blocks of 1, 4 and 2 MiB; 5 MiB live at most (worked by hand), with
    IDs far beyond the block count."""
    M = 1 << 20
    kinds = [ALLOC, ALLOC, FREE, ALLOC, STEP, FREE, FREE]
    ids = [7, 4000000000, 7, 12, 0, 4000000000, 12]
    sizes = [1 * M, 4 * M, 0, 2 * M, 0, 0, 0]
    return Trace(kinds, ids, sizes)


def test_peak_live_and_intervals_worked_by_hand():
    t = hand_trace()
    assert t.peak_live_bytes == 6 << 20          # 4 + 2 after the 1 MiB block is freed
    assert t.intervals() == [("b0", 1 << 20, 0, 1), ("b1", 4 << 20, 1, 4),
                             ("b2", 2 << 20, 3, 5)]
    assert t.slots().tolist() == [0, 1, 0, 0, 0, 1, 0]


@pytest.mark.parametrize("allocator", ["glibc", "pool-hybrid"])
def test_replay_touches_every_page(tmp_path, allocator):
    t = hand_trace()
    binary = tmp_path / "t.bin"
    t.to_binary(binary)
    r = replay_mod.replay(str(binary), allocator, t.peak_live_bytes, repeat=2, samples=10)
    assert "skipped" not in r, r
    assert r["events"] == len(t) - t.steps or r["events"] == len(t)
    # every page was written: the RSS grew by at least the live bytes' pages;
    # glibc maps these 1-4 MiB blocks one by one, so it grows by little more
    # (the process's own RSS before the replay is not counted)
    assert 0.95 <= r["footprint"] <= (1.1 if allocator == "glibc" else 2.0)
    assert r["ns_per_pair"] > 0 and r["ns_per_pair_min"] <= r["ns_per_pair_max"]
    assert r["samples"] and r["samples"][-1][0] == len(t) - 1


def test_replay_footprint_is_the_heap_not_the_code_pages(tmp_path):
    """The footprint counts anonymous memory only: the allocator's code
    pages, faulted in 64 KiB at a time, moved VmRSS's high-water mark by
    a quantum of 64 KiB between identical replays of this 258 KiB loop
    (1.07-1.71x its peak live).  Its anonymous growth is the same each
    time, and near the live bytes."""
    t = read_trace(os.path.join(os.path.dirname(pyarena.__file__), "data", "traces",
                                "numpy_loop.trace.gz"))
    binary = tmp_path / "t.bin"
    t.to_binary(binary)
    grows = []
    for _ in range(3):
        r = replay_mod.replay(str(binary), "pool-hybrid", t.peak_live_bytes, repeat=1,
                              samples=0)
        assert "skipped" not in r, r
        assert 1.0 <= r["footprint"] <= 1.2
        assert r["footprint_warm"] <= 1.2
        grows.append(r["peak_rss_growth_bytes"])
    assert max(grows) - min(grows) <= 8192, grows


def test_missing_library_is_skipped_with_its_package(tmp_path, monkeypatch):
    monkeypatch.setattr(replay_mod.ctypes.util, "find_library", lambda name: None)
    t = hand_trace()
    t.to_binary(tmp_path / "t.bin")
    r = replay_mod.replay(str(tmp_path / "t.bin"), "tcmalloc", t.peak_live_bytes)
    assert "libtcmalloc-minimal4" in r["skipped"]


def test_unknown_allocator_is_refused(tmp_path):
    with pytest.raises(InvalidArgumentError, match="unknown allocator"):
        replay_mod.replay(os.devnull, "hoard", 1)


def test_learned_pool_serves_repeated_steps(tmp_path):
    """Ten identical steps: the learning pool's warm replay stays near the
    live bytes (its plan), and every page is still touched."""
    kinds, ids, sizes = [], [], []
    for _ in range(10):
        for b, size in enumerate((1 << 20, 3 << 20, 2 << 20)):
            kinds.append(ALLOC)
            ids.append(b)
            sizes.append(size)
        for b in (1, 0, 2):
            kinds.append(FREE)
            ids.append(b)
            sizes.append(0)
        kinds.append(STEP)
        ids.append(0)
        sizes.append(0)
    t = Trace(kinds, ids, sizes)
    t.to_binary(tmp_path / "t.bin")
    r = replay_mod.replay(str(tmp_path / "t.bin"), "pool-learned", t.peak_live_bytes, repeat=2)
    assert "skipped" not in r, r
    assert r["footprint"] >= 0.95
    assert 0.95 <= r["footprint_warm"] <= 1.3
