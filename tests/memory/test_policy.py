import dataclasses

import numpy as np
import pytest

import pyarena
from pyarena import InvalidArgumentError, Policy
from pyarena._native import ffi, lib
from pyarena.errors import AlignmentError


def _poisoned():
    """A pa_pool_config_t of 0xab bytes: a field fill_config leaves shows."""
    cfg = ffi.new("pa_pool_config_t *")
    ffi.memmove(cfg, b"\xab" * ffi.sizeof("pa_pool_config_t"), ffi.sizeof("pa_pool_config_t"))
    return cfg


def test_defaults_match_the_c_defaults():
    """Policy() writes the C defaults into every field it always owns,
    whatever the struct held before (a poisoned one, not the defaults)."""
    cfg = ffi.new("pa_pool_config_t *")
    lib.pa_pool_config_default(cfg)
    mine = Policy().fill_config(_poisoned())
    for name in ("alignment", "mode", "growth", "limit", "release", "classes_per_doubling",
                 "learn", "auto_step", "huge_pages"):
        assert getattr(mine, name) == getattr(cfg, name), name
    # the Python default budget is the C default, spelled out
    assert mine.cache_budget == 16 << 20
    # C's 0 means "the default" for these: Python spells the defaults out
    assert (mine.learn_repeats, mine.learn_sequences, mine.learn_max_events) == (2, 16, 65536)


@pytest.mark.parametrize("kw, fields", [
    (dict(alignment=128), dict(alignment=128)),
    (dict(mode="buddy-only"), dict(mode=2)),
    (dict(mode="slab-only"), dict(mode=1)),
    (dict(growth="pow2"), dict(growth=0)),
    (dict(growth="none", limit=1 << 24), dict(growth=2, limit=1 << 24)),
    (dict(release="decommit"), dict(release=1)),
    (dict(fine_classes=2), dict(classes_per_doubling=2)),
    (dict(limit=3 << 20), dict(limit=3 << 20)),
    (dict(high_watermark=4 << 20), dict(high_watermark=4 << 20, low_watermark=4 << 20)),
    (dict(high_watermark=4 << 20, low_watermark=1 << 20),
     dict(high_watermark=4 << 20, low_watermark=1 << 20)),
    (dict(slab_max=4096, slab_size=1 << 17, buddy_region=1 << 21, large_threshold=1 << 16,
          chunk_size=1 << 22),
     dict(slab_max=4096, slab_size=1 << 17, buddy_region=1 << 21, large_threshold=1 << 16,
          chunk_size=1 << 22)),
    (dict(size_classes=(64, 192, 1024)), dict(num_classes=3)),
    (dict(learn=False, auto_step=True), dict(learn=0, auto_step=1)),
    (dict(learn_repeats=3, learn_sequences=4, learn_max_events=100),
     dict(learn_repeats=3, learn_sequences=4, learn_max_events=100)),
    (dict(cache_budget=None), dict(cache_budget=ffi.cast("size_t", -1))),
    (dict(cache_budget=0), dict(cache_budget=1)),
])
def test_fill_config_writes_what_the_policy_says(kw, fields):
    """Each non-default setting lands in its C field (from the C defaults)."""
    cfg = ffi.new("pa_pool_config_t *")
    lib.pa_pool_config_default(cfg)
    Policy(**kw).fill_config(cfg)
    for name, want in fields.items():
        assert getattr(cfg, name) == want, name
    if "size_classes" in kw:
        assert list(cfg.classes[0:3]) == [64, 192, 1024]


def test_size_classes_fill_every_entry_of_the_c_table():
    # pa_pool_config_t.classes has PA_POOL_MAX_CLASSES entries: all usable
    n = len(ffi.new("pa_pool_config_t *").classes)
    assert n == lib.PA_POOL_MAX_CLASSES
    classes = [64 * (i + 1) for i in range(n)]
    cfg = ffi.new("pa_pool_config_t *")
    lib.pa_pool_config_default(cfg)
    Policy(size_classes=classes).fill_config(cfg)
    assert cfg.num_classes == n and list(cfg.classes[0:n]) == classes
    with pytest.raises(InvalidArgumentError, match=f"{n + 1} classes"):
        Policy(size_classes=classes + [64 * (n + 1)])


def test_policy_is_a_frozen_dataclass():
    p = Policy(limit=1 << 20)
    assert dataclasses.is_dataclass(p)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.limit = 5
    q = p.replace(alignment=128)
    assert q.alignment == 128 and q.limit == 1 << 20 and p.alignment == 64
    assert p.as_dict()["limit"] == 1 << 20


@pytest.mark.parametrize("kw, words", [
    (dict(mode="fast"), ["mode", "'fast'"]),
    (dict(alignment=48), ["alignment", "48"]),
    (dict(alignment=4), ["alignment", "4"]),
    (dict(alignment=8192), ["alignment", "8192"]),
    (dict(alignment=64.0), ["alignment", "64.0"]),
    (dict(growth="double"), ["growth", "'double'"]),
    (dict(release="free"), ["release", "'free'"]),
    (dict(fine_classes=3), ["fine_classes", "3"]),
    (dict(size_classes=[128, 64]), ["strictly increasing", "64"]),
    (dict(size_classes=[64, 100]), ["size_classes", "100"]),
    (dict(size_classes=[]), ["size_classes", "empty"]),
    (dict(size_classes=list(range(64, 64 * 50, 64))), ["49 classes"]),
    (dict(size_classes=5), ["size_classes", "5"]),
    (dict(slab_max=100), ["slab_max", "100"]),
    (dict(slab_size=5000), ["slab_size", "5000"]),
    (dict(buddy_region=3 << 16), ["buddy_region", str(3 << 16)]),
    (dict(buddy_region=1024), ["buddy_region", "1024"]),
    (dict(large_threshold=2 << 20), ["large_threshold", str(2 << 20)]),
    (dict(limit=0), ["limit", "0"]),
    (dict(limit=-5), ["limit", "-5"]),
    (dict(limit="1G"), ["limit", "'1G'"]),
    (dict(limit=True), ["limit", "True"]),
    (dict(limit=1 << 70), ["limit", "size_t"]),
    (dict(cache_budget=-1), ["cache_budget", "-1"]),
    (dict(chunk_size=0), ["chunk_size", "0"]),
    (dict(high_watermark=100, low_watermark=200), ["low_watermark", "200", "100"]),
    (dict(low_watermark=200), ["low_watermark", "high_watermark"]),
    (dict(growth="none"), ["growth='none'", "limit"]),
    (dict(limit=1 << 20, chunk_size=2 << 20), ["chunk_size", str(2 << 20)]),
    (dict(learn=1), ["learn", "True or False", "1"]),
    (dict(auto_step="yes"), ["auto_step", "'yes'"]),
    (dict(huge_pages=1), ["huge_pages", "True or False", "1"]),
    (dict(learn_repeats=0), ["learn_repeats", "0"]),
    (dict(learn_sequences=65), ["learn_sequences", "65"]),
    (dict(learn_sequences=0), ["learn_sequences", "0"]),
    (dict(learn_max_events=0), ["learn_max_events", "0"]),
])
def test_bad_policy_names_the_value(kw, words):
    with pytest.raises(InvalidArgumentError) as ei:
        Policy(**kw)
    msg = str(ei.value)
    for w in words:
        assert w in msg, (w, msg)


def test_alignment_errors_are_alignment_errors():
    with pytest.raises(AlignmentError):
        Policy(alignment=96)
    # and still ValueErrors for callers who catch those
    with pytest.raises(ValueError):
        Policy(alignment=96)


def test_mode_aliases_normalise():
    assert Policy(mode="slab").mode == "slab-only"
    assert Policy(mode="buddy_only").mode == "buddy-only"


def test_fill_config_maps_every_field():
    p = Policy(mode="buddy-only", alignment=256, size_classes=(256, 512, 1024),
               fine_classes=2, slab_max=2048, large_threshold=128 << 10,
               high_watermark=8 << 20, growth="requested", limit=64 << 20,
               cache_budget=0, release="decommit", chunk_size=2 << 20,
               slab_size=128 << 10, buddy_region=2 << 20)
    cfg = ffi.new("pa_pool_config_t *")
    lib.pa_pool_config_default(cfg)
    p.fill_config(cfg)
    assert cfg.mode == lib.PA_POOL_BUDDY_ONLY
    assert cfg.alignment == 256
    assert cfg.num_classes == 3 and list(cfg.classes[0:3]) == [256, 512, 1024]
    assert cfg.classes_per_doubling == 2
    assert cfg.slab_max == 2048 and cfg.large_threshold == 128 << 10
    assert cfg.high_watermark == 8 << 20 and cfg.low_watermark == 8 << 20
    assert cfg.growth == lib.PA_GROW_REQUESTED and cfg.limit == 64 << 20
    assert cfg.cache_budget == 1  # 0 = cache nothing (C reads 0 as default)
    assert cfg.release == lib.PA_RELEASE_DECOMMIT
    assert cfg.chunk_size == 2 << 20 and cfg.slab_size == 128 << 10
    assert cfg.buddy_region == 2 << 20
    assert cfg.huge_pages == 0
    q = Policy(learn=False, learn_repeats=5, learn_sequences=3, learn_max_events=100,
               auto_step=True, huge_pages=True)
    q.fill_config(cfg)
    assert (cfg.learn, cfg.learn_repeats, cfg.learn_sequences, cfg.learn_max_events,
            cfg.auto_step, cfg.huge_pages) == (0, 5, 3, 100, 1, 1)
    cfg2 = ffi.new("pa_pool_config_t *")
    Policy(cache_budget=None).fill_config(cfg2)
    assert cfg2.cache_budget == ffi.cast("size_t", -1)


@pytest.mark.parametrize("mode", ["hybrid", "slab-only", "buddy-only"])
def test_every_mode_makes_a_working_pool(mode):
    pool = pyarena.Pool(Policy(mode=mode, alignment=128))
    arrs = [pool.empty(n, np.uint8) for n in (1, 100, 5000, 300_000)]
    for a in arrs:
        assert a.ctypes.data % 128 == 0
        a[:] = 7
    assert all(int(a.sum()) == 7 * a.size for a in arrs)
    assert pool.check() == 0
    assert pool.policy.mode == mode


def test_pool_keyword_shortcut_and_replace():
    pool = pyarena.Pool(limit=4 << 20)
    assert pool.policy == Policy(limit=4 << 20)
    pool2 = pyarena.Pool(Policy(alignment=256), limit=4 << 20)
    assert pool2.policy.alignment == 256 and pool2.policy.limit == 4 << 20
    with pytest.raises(TypeError):
        pyarena.Pool(policy={"limit": 5})
    with pytest.raises(InvalidArgumentError, match="limit"):
        pyarena.Pool(limit=-1)


from hypothesis import assume, given, settings, strategies as st  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20


@st.composite
def policies(draw):
    alignment = draw(st.sampled_from([8, 16, 64, 256, 4096]))
    kw = dict(mode=draw(st.sampled_from(["hybrid", "slab-only", "buddy-only"])),
              alignment=alignment,
              fine_classes=draw(st.sampled_from([1, 2, 4, 8])),
              growth=draw(st.sampled_from(["pow2", "requested", "none"])),
              release=draw(st.sampled_from(["unmap", "decommit"])),
              cache_budget=draw(st.sampled_from([None, 0, 4 * KiB, 16 * MiB])),
              learn=draw(st.booleans()), auto_step=draw(st.booleans()),
              learn_repeats=draw(st.integers(1, 4)),
              learn_sequences=draw(st.integers(1, 64)))
    if draw(st.booleans()):
        n = draw(st.integers(1, 12))
        steps = draw(st.lists(st.integers(1, 64), min_size=n, max_size=n))
        classes, c = [], 0
        for s in steps:
            c += s * alignment
            classes.append(c)
        kw["size_classes"] = tuple(classes)
    if draw(st.booleans()):
        kw["slab_max"] = alignment * draw(st.integers(1, 64))
    if draw(st.booleans()):
        kw["buddy_region"] = 1 << draw(st.integers(16, 22))
    if draw(st.booleans()):
        kw["large_threshold"] = draw(st.integers(1, kw.get("buddy_region", MiB)))
    if draw(st.booleans()):
        kw["slab_size"] = 4 * KiB * draw(st.integers(1, 32))
    if draw(st.booleans()) or kw["growth"] == "none":
        kw["limit"] = draw(st.integers(1, 64 * MiB))
    if draw(st.booleans()):
        kw["chunk_size"] = draw(st.integers(1, kw.get("limit", 8 * MiB)))
    if draw(st.booleans()):
        high = draw(st.integers(1, 64 * MiB))
        kw["high_watermark"] = high
        kw["low_watermark"] = draw(st.integers(0, high))
    try:
        return Policy(**kw)
    except InvalidArgumentError as e:   # growth='none' with a chunk too small
        if "cannot hold one" not in str(e):
            raise
        assume(False)


@settings(max_examples=150, deadline=None)
@given(policy=policies(), sizes=st.lists(st.integers(0, 2 * MiB), max_size=6))
def test_any_valid_policy_makes_a_pool_or_a_clear_error(policy, sizes):
    # The Python checks may let through a combination the C pool rejects;
    # that must be a clear InvalidArgumentError, never a crash.
    try:
        pool = pyarena.Pool(policy)
    except InvalidArgumentError as e:
        assert "pool creation" in str(e)
        return
    except pyarena.OutOfMemoryError:
        return
    assert pool.policy == policy and pool.alignment == policy.alignment
    arrs = []
    pool.step()
    for i, n in enumerate(sizes):
        try:
            a = pool.empty(n, np.uint8)
        except pyarena.OutOfMemoryError:
            continue
        a.fill(i)
        assert a.ctypes.data % policy.alignment == 0
        arrs.append((a, i))
        pool.step()
    for a, i in arrs:
        assert (a == i).all()
    assert pool.check() == 0


def test_slab_max_must_be_a_multiple_of_the_policy_alignment():
    from pyarena import Policy
    from pyarena.errors import InvalidArgumentError
    assert Policy(alignment=64, slab_max=128).slab_max == 128
    with pytest.raises(InvalidArgumentError, match="multiple of the alignment 64"):
        Policy(alignment=64, slab_max=96)          # a multiple of 8, not of 64
