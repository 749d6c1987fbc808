"""``pyarena demo``: the main job on a real network, no download needed.

Builds MobileNetV2 in code (``pyarena.runtime.models.mobilenet_v2``, seeded random
weights; base install only), plans its activation memory, binds every
tensor and scratch buffer into one arena, runs it, and compares four ways
of getting tensor memory for the same kernels:

(a) one fresh ``np.empty`` per tensor, every inference, no reuse;
(b) the dynamic :class:`pyarena.Pool` (allocate at production, free after
    the last reader);
(c) the static plan (one arena, fixed offsets, in-place reuse);
(d) plain NumPy: ``np.empty`` per tensor, each array simply dropped after
    its last reader (no pool calls), with NumPy's allocator routed to a
    learning pool (``numpy_allocator(pool)`` and ``pool.step()`` after each
    inference): after warm-up every allocation comes from a learned plan.

Peak memory is what the mode holds for activations and scratch: for (a) the
bytes live at the worst moment of one inference (counted by the executor,
buffer by buffer), for (b) the pool's peak reservation from the OS, for (c)
the arena's size, for (d) the learning pool's peak reservation after
warm-up; NumPy data allocations are counted by
routing them through :func:`pyarena.numpy_allocator`.  Writes the plan picture when
matplotlib is installed.
"""
import sys
import time

import numpy as np

from .._format import human_bytes
from ..errors import InvalidArgumentError


def add_parser(sub):
    p = sub.add_parser("demo", help="plan and run MobileNetV2 four ways (no download)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resolution", type=int, default=224, help="input size (default 224)")
    p.add_argument("--repeat", type=int, default=10, help="timed inferences per mode")
    p.add_argument("--plot", default="pyarena_demo_plan.png", metavar="PATH",
                   help="where to write the plan picture ('' for none)")
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads (default 1: stable timings on a shared machine)")
    p.set_defaults(run=run)
    return p




class _Progress:
    def __init__(self):
        self.t0 = time.perf_counter()

    def step(self, what):
        self.t = time.perf_counter()
        print(f"  {what} ...", end="", flush=True)

    def done(self, extra=""):
        print(f" {time.perf_counter() - self.t:.1f} s{extra}", flush=True)


def run(args):
    from ..memory import Pool, numpy_allocator
    from ..planning import plan
    from ..runtime import Executor, median, random_feeds, set_blas_threads, time_calls
    from ..runtime.models import mobilenet_v2
    if args.repeat < 1:
        raise InvalidArgumentError(f"--repeat must be >= 1, not {args.repeat}")
    if args.threads:
        set_blas_threads(args.threads)
    pr = _Progress()
    print(f"pyarena demo: MobileNetV2 at {args.resolution}x{args.resolution}, "
          f"seeded random weights, NumPy kernels\n")
    pr.step("building the network")
    g = mobilenet_v2(resolution=args.resolution, seed=args.seed)
    pr.done(f"  ({len(g.ops)} ops, {len(g.tensors)} tensors)")
    pr.step("planning the activation arena")
    p = plan(g, strategy="best", alignment=64, inplace=True, time_limit=5.0)
    pr.done()
    pr.step("binding views and loading weights")
    ex_plan = Executor(g, p)
    pool = Pool()
    ex_np = Executor(g, allocator="numpy", weights=ex_plan.weights)
    ex_pool = Executor(g, allocator=(pool.empty, pool.free), weights=ex_plan.weights)
    learner = _Learner(Executor(g, allocator=(np.empty, _drop), weights=ex_plan.weights),
                       Pool(), numpy_allocator)
    modes = {"(a) np.empty per tensor": ex_np, "(b) dynamic Pool": ex_pool,
             "(c) static plan": ex_plan, "(d) NumPy under a learning pool": learner}
    pr.done(f"  (weights {human_bytes(ex_plan.weights_bytes)} in an Arena)")
    feeds = random_feeds(g, seed=args.seed)
    pr.step("first inference in each mode")
    ref = {k: v.copy() for k, v in ex_plan.run(feeds).items()}
    diffs = [max(float(np.max(np.abs(out[k] - ref[k]))) for k in ref)
             for out in (ex.run(feeds) for ex in modes.values() if ex is not ex_plan)]
    pr.done()
    learner.warm_up(feeds)
    pr.step(f"timing {args.repeat} inferences per mode (interleaved)")
    times = time_calls({name: (lambda ex=ex: ex.run(feeds)) for name, ex in modes.items()},
                       repeat=args.repeat, warmup=0)
    pr.done()
    pr.step("counting allocations")
    rows = []
    for name, ex in modes.items():
        if ex is learner:
            rows.append((name, *learner.memory(feeds), median(times[name])))
            continue
        with numpy_allocator(Pool()) as counter:
            ex.run(feeds)
        rows.append((name, *_memory(ex, ex_plan, ex_pool, p, pool, counter.allocations),
                     median(times[name])))
    pr.done()
    _report(rows, p, diffs, ref)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("plan picture: matplotlib is not installed "
                  "(pip install pyarena[plot]); skipped")
        else:
            p.plot(args.plot)
            print(f"plan picture written to {args.plot}")
    sys.stdout.flush()
    return 0


def _drop(array):
    """Mode (d)'s "free": nothing; the executor lets go of the array and
    Python's reference counting frees it, as in any NumPy program."""


class _Learner:
    """Mode (d): the np.empty executor, NumPy's allocator routed to a
    learning pool, one pool step per inference."""

    def __init__(self, ex, pool, numpy_allocator):
        self.ex, self.pool = ex, pool
        self.alloc = numpy_allocator(pool)

    def run(self, feeds):
        with self.alloc:
            out = self.ex.run(feeds)
        self.pool.step()
        return out

    def warm_up(self, feeds, steps=4):
        for _ in range(steps):
            self.run(feeds)
        self.pool.reset_peak()   # the peaks from here on: after warm-up

    def memory(self, feeds):
        """(peak bytes after warm-up, allocations per inference, note)."""
        st0 = self.pool.stats()
        n0 = self.alloc.allocations
        self.run(feeds)
        st = self.pool.stats()
        allocs = self.alloc.allocations - n0
        hits = st.plan_hits - st0.plan_hits
        return (st.peak_reserved, allocs,
                f"{hits / max(allocs, 1):.0%} from learned plans; NumPy holds "
                f"{human_bytes(st.peak_requested)} at its worst moment")


def _memory(ex, ex_plan, ex_pool, p, pool, npallocs):
    """(peak bytes, allocations per inference, note) of one mode."""
    if ex is ex_plan:
        return p.arena_bytes, npallocs, "one arena, allocated once at bind time"
    peak, allocs = ex.last_peak_bytes, ex.last_allocations
    if ex is ex_pool:
        # what the pool holds from the OS is its real cost; the live bytes
        # at the worst moment are the floor
        note = f"from the pool; live at worst moment {human_bytes(peak)}"
        return max(peak, pool.stats().peak_reserved), allocs, note
    return peak, allocs, f"{npallocs} by NumPy"


def _report(rows, p, diffs, ref):
    print()
    print(f"{'memory for activations':<32}{'peak':>12}{'time/inference':>16}"
          f"{'allocs/inference':>18}")
    for name, peak, allocs, note, t in rows:
        print(f"{name:<32}{human_bytes(peak):>12}{t * 1e3:>13.1f} ms{allocs:>18,}   {note}")
    base = rows[0]
    plan_row = next(r for r in rows if r[0].startswith("(c)"))
    print(f"\nstatic plan vs np.empty: {base[1] / max(plan_row[1], 1):.1f}x less memory, "
          f"time ratio {plan_row[4] / base[4]:.2f}")
    learn_row = next((r for r in rows if r[0].startswith("(d)")), None)
    if learn_row is not None:
        print(f"learning pool: {base[1] / max(learn_row[1], 1):.1f}x less memory than "
              f"np.empty, {learn_row[1] / max(plan_row[1], 1):.2f}x the static plan, "
              f"time ratio {learn_row[4] / base[4]:.2f}")
    print(f"plan: arena {human_bytes(p.arena_bytes)}, lower bound "
          f"{human_bytes(p.lower_bound_bytes)}{' (optimal)' if p.optimal else ''}, naive sum "
          f"{human_bytes(p.naive_bytes)}, planned in {p.plan_seconds * 1e3:.0f} ms")
    print(f"outputs agree across modes: max |diff| = {max(diffs) if diffs else 0.0:.2g}; "
          f"top class {int(np.argmax(ref['prob']))}")
