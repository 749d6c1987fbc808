"""The one timing loop (pyarena.runtime.timing): what runs when and what
each sample measures, on a fake clock -- no real durations are asserted."""
import types

import pytest

from pyarena.errors import InvalidArgumentError
from pyarena.runtime import timing


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _calls(clock, order):
    """``make(name, cost)``: a call that records its name in ``order`` and
    advances ``clock`` by ``cost`` seconds."""
    def make(name, cost):
        def fn():
            order.append(name)
            clock.now += cost
        return fn
    return make


def test_rounds_interleave_and_each_sample_times_its_own_call(monkeypatch):
    clock = FakeClock()
    # the module's own view of `time` only: nothing else sees the fake clock
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock))
    order = []
    make = _calls(clock, order)
    times = timing.time_calls({"a": make("a", 1.0), "b": make("b", 10.0)},
                              repeat=3, warmup=2)
    # two untimed warm-up rounds, then three timed rounds, a and b in turn
    assert order == ["a", "b"] * 5
    assert times == {"a": [1.0, 1.0, 1.0], "b": [10.0, 10.0, 10.0]}


def test_rotated_rounds_start_one_call_later(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock))
    order = []
    make = _calls(clock, order)
    times = timing.time_calls({"a": make("a", 1.0), "b": make("b", 2.0),
                               "c": make("c", 4.0)}, repeat=4, warmup=1, rotate=True)
    assert order == list("abc" "abc" "bca" "cab" "abc")
    assert times == {"a": [1.0] * 4, "b": [2.0] * 4, "c": [4.0] * 4}


def test_cpu_clock_reads_the_thread_time(monkeypatch):
    wall, cpu = FakeClock(), FakeClock()
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=wall,
                                                              thread_time=cpu))

    def fn():                 # 5 s of wall time, 2 s of this thread's CPU
        wall.now += 5.0
        cpu.now += 2.0
    assert timing.time_calls({"f": fn}, repeat=2, warmup=0, clock="cpu") == {"f": [2.0, 2.0]}
    assert timing.time_calls({"f": fn}, repeat=1, warmup=0) == {"f": [5.0]}
    with pytest.raises(InvalidArgumentError, match="clock must be"):
        timing.time_calls({"f": fn}, clock="cycles")


def test_no_warmup_and_one_round(monkeypatch):
    calls = []
    times = timing.time_calls({"x": lambda: calls.append(1)}, repeat=1, warmup=0)
    assert len(calls) == 1 and list(times) == ["x"] and len(times["x"]) == 1


def test_repeat_below_one_is_refused():
    with pytest.raises(InvalidArgumentError, match="repeat must be >= 1"):
        timing.time_calls({"x": lambda: None}, repeat=0)


def test_median():
    assert timing.median([3.0, 1.0, 2.0]) == 2.0
    assert timing.median([4.0, 1.0, 2.0, 3.0]) == 2.5
