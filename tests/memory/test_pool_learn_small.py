"""A learning pool leaves to the zones a step with at most one block above
the slab sizes (csrc/alloc/pool_learn.c, mostly_small): the slab caches
serve the small blocks as cheaply as a plan and the zones reuse one large
block in place, so a plan would only add its per-step cost (the shipped
NumPy loop: 1.17x the plain pool's time per pair).  Such a loop gets no
plan and no region, keeps the plain pool's footprint and falls back at
the first judgement; with two large blocks a step the same loop is
planned and served.  Blocks stay intact throughout."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyarena import Policy, Pool

SLAB_MAX = 16 * 1024    # the default slab sizes
JUDGE = 64              # PA_LEARN_JUDGE


def loop_step(pool, small, big, tag):
    """A step: `small` slab-sized temporaries, and the `big` blocks live
    across them; every block filled and checked before it goes."""
    held = []
    for k, n in enumerate(big):
        a = pool.empty(n, np.uint8)
        a.fill((tag + k) & 0xFF)
        held.append((a, (tag + k) & 0xFF))
    for i, n in enumerate(small):
        t = pool.empty(n, np.uint8)
        t.fill((tag + 100 + i) & 0xFF)
        assert (t == ((tag + 100 + i) & 0xFF)).all()
        del t
    for a, v in held:
        assert (a == v).all()
    del held
    pool.step()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small=st.lists(st.integers(1, SLAB_MAX), min_size=2, max_size=12),
       big=st.lists(st.integers(SLAB_MAX + 1, 1 << 19), min_size=0, max_size=3),
       steps=st.integers(8, 24))
def test_a_step_with_at_most_one_large_block_is_never_planned(small, big, steps):
    pool = Pool()
    plain = Pool(Policy(learn=False))
    pool.step()
    for s in range(steps):
        loop_step(pool, small, big, s)
        loop_step(plain, small, big, s)
    st_ = pool.stats()
    if len(big) <= 1:
        assert st_.learned_sequences == 0 and st_.planned_bytes == 0 and st_.plan_hits == 0
        # the zones alone, as in the plain pool: the same memory
        assert st_.peak_reserved == plain.stats().peak_reserved
    else:
        assert st_.learned_sequences == 1 and st_.plan_steps >= steps - 4
    assert st_.requested == 0 and pool.check() == 0


def test_a_loop_of_small_steps_falls_back_at_the_first_judgement():
    """Nothing served over the window: the plain pool's turn, no plan
    made on the way."""
    pool = Pool()
    pool.step()
    for s in range(JUDGE + 2):
        loop_step(pool, [1024, 8, 4, 1024, 4, 1024], [1 << 18], s)
    st_ = pool.stats()
    assert st_.learn_fallbacks == 1 and st_.learned_sequences == 0
    assert st_.plan_hits == 0 and pool.check() == 0
