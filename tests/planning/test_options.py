"""PlanOptions: the options of ``plan()`` as one value, checked once.

``plan(g, options)`` and ``plan(g, **kw)`` are the same plan; a bad value
raises the error ``plan()`` raises for it, whichever way it is given."""
import dataclasses

import numpy as np
import pytest

import pyarena
from pyarena import GraphBuilder
from pyarena.errors import InvalidArgumentError
from pyarena.planning import PlanOptions, plan
from pyarena.runtime import set_scratch
from pyarena.runtime.models import mobilenet_v2


def small():
    b = GraphBuilder("small", seed=1)
    x = b.input((1, 4, 8, 8))
    return b.finish([b.relu(b.conv(x, 4, 1))])


def mobilenet():
    return set_scratch(mobilenet_v2(resolution=64), native=False)


def same_plan(p, q):
    a, b = p.to_json(), q.to_json()
    for d in (a, b):
        d.pop("plan_seconds")
        for t in d.get("budget", {}).get("tried", ()):
            t.pop("seconds", None)
    orders = [None if x.schedule is None else x.schedule.order for x in (p, q)]
    return a == b and orders[0] == orders[1]


def test_the_defaults_are_plans_defaults():
    o = PlanOptions()
    assert (o.strategy, o.alignment, o.inplace, o.inplace_concat, o.time_limit) == \
        ("best", 64, True, True, 10.0)
    assert (o.rules, o.capacity, o.max_memory, o.memory_budget, o.rescratch) == (None,) * 5
    assert (o.schedule, o.patch, o.retargeted) == (False, True, False)
    assert pyarena.PlanOptions is PlanOptions and "PlanOptions" in pyarena.__all__


BAD = [
    (dict(strategy="fastest"), InvalidArgumentError, "unknown strategy 'fastest'"),
    (dict(alignment=48), InvalidArgumentError, "alignment 48 is not"),
    (dict(alignment=1.5), InvalidArgumentError, "alignment must be an integer"),
    (dict(alignment=True), InvalidArgumentError, "alignment must be an integer"),
    (dict(time_limit=0), InvalidArgumentError, "time_limit must be > 0"),
    (dict(time_limit="soon"), InvalidArgumentError, "time_limit must be a number"),
    (dict(capacity=0), InvalidArgumentError, "capacity must be a positive"),
    (dict(capacity=1.5), InvalidArgumentError, "capacity must be a positive"),
    (dict(max_memory=0), InvalidArgumentError, "max_memory must be >= 1"),
    (dict(max_memory="8G"), InvalidArgumentError, "max_memory must be an int"),
    (dict(memory_budget=0), InvalidArgumentError, "memory_budget must be >= 1"),
    (dict(memory_budget="1M"), InvalidArgumentError, "memory_budget must be an int"),
    (dict(memory_budget=10**9, capacity=10**9), InvalidArgumentError, "not both"),
    (dict(memory_budget=10**9, rescratch="set_scratch"), InvalidArgumentError,
     "rescratch must be a callable"),
]


@pytest.mark.parametrize("kw, error, message", BAD)
def test_a_bad_value_is_refused_with_plans_error(kw, error, message):
    with pytest.raises(error, match=message):
        PlanOptions(**kw)
    with pytest.raises(error, match=message):
        plan(small(), **kw)
    with pytest.raises(error, match=message):
        PlanOptions().replace(**kw)


def test_values_are_kept_as_checked():
    o = PlanOptions(alignment=np.int64(128), memory_budget=np.int32(5000),
                    max_memory=np.int64(1 << 30))
    assert type(o.alignment) is int and o.alignment == 128
    assert type(o.memory_budget) is int and type(o.max_memory) is int
    assert o == PlanOptions(alignment=128, memory_budget=5000, max_memory=1 << 30)
    assert PlanOptions(time_limit=None).time_limit is None      # the planner's 10 s


def test_options_are_frozen_and_replace_derives_a_checked_copy():
    o = PlanOptions(strategy="greedy-by-size")
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.strategy = "best"
    q = o.replace(capacity=4096, time_limit=0.25)
    assert (q.strategy, q.capacity, q.time_limit) == ("greedy-by-size", 4096, 0.25)
    assert (o.capacity, o.time_limit) == (None, 10.0)
    with pytest.raises(InvalidArgumentError, match="not both"):
        o.replace(memory_budget=1000).replace(capacity=1000)
    assert o.replace(memory_budget=1000).replace(memory_budget=None, capacity=1000)


def test_of_takes_options_a_mapping_or_nothing():
    o = PlanOptions(alignment=128)
    assert PlanOptions.of(o) is o
    assert PlanOptions.of(o, inplace=False) == PlanOptions(alignment=128, inplace=False)
    assert PlanOptions.of({"alignment": 128}) == o
    assert PlanOptions.of(None) == PlanOptions()
    with pytest.raises(TypeError, match="PlanOptions"):
        PlanOptions.of("greedy-by-size")
    with pytest.raises(TypeError, match="colour"):
        PlanOptions.of(None, colour="red")


def test_concat_needs_inplace():
    assert PlanOptions().concat and not PlanOptions(inplace=False).concat
    assert not PlanOptions(inplace_concat=False).concat


@pytest.mark.parametrize("kw", [
    dict(),
    dict(strategy="greedy-by-size", alignment=128),
    dict(inplace=False),
    dict(inplace_concat=False, time_limit=0.5),
    dict(rules={"Relu": "none"}),
    dict(schedule=True),
    dict(memory_budget=700_000),
    dict(memory_budget=1_100_000, patch=False, rescratch=False),
])
def test_plan_with_options_equals_plan_with_keywords(kw):
    p = plan(mobilenet(), **kw)
    q = plan(mobilenet(), PlanOptions(**kw))
    assert same_plan(p, q)
    if kw:      # the keywords change the options given
        key, value = next(iter(kw.items()))
        other = {"strategy": "first-fit"} if key != "strategy" else {"inplace": False}
        r = plan(mobilenet(), PlanOptions(**other), **kw)
        assert same_plan(r, plan(mobilenet(), **{**other, **kw}))


def test_plan_refuses_options_of_another_type():
    with pytest.raises(TypeError, match="PlanOptions"):
        plan(small(), "greedy-by-size")
    with pytest.raises(TypeError):
        plan(small(), colour="red")
