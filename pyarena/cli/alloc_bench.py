"""``pyarena alloc-bench TRACE ...``: replay allocation traces against
glibc, jemalloc, mimalloc, tcmalloc and pyarena's pool, side by side.

Each trace (docs/traces.md; ``pyarena trace`` records one) is replayed in
C, one fresh process per allocator, every page of every block touched:
once for memory, then ``--repeat`` times for time.  The table gives, per
allocator: ns per alloc/free pair (median thread CPU time, and the ratio
to glibc), footprint (peak RSS growth / peak live bytes; ``warm``: during a
second replay on the heap the first one left), fragmentation,
page faults and the RSS kept after the last free; above it the trace's
peak live bytes -- the lower bound of any static plan -- and the arena
pyarena's planner finds for the trace's blocks.  ``--sample`` replays the
traces shipped with pyarena (the demo model, a NumPy loop).

Exit status: 0; 2 for bad arguments or unreadable traces.
"""
import json
import os
import sys
import tempfile

from .._format import human_bytes
from ..errors import InvalidArgumentError

SAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "data", "traces")


def add_parser(sub):
    from ..memory.replay import ALLOCATORS
    p = sub.add_parser("alloc-bench", help="replay allocation traces against each allocator",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="*", metavar="TRACE", help="trace files (.gz ok)")
    p.add_argument("--sample", action="store_true", help="the traces shipped with pyarena")
    p.add_argument("--allocators", default=",".join(ALLOCATORS),
                   help=f"comma-separated subset of {','.join(ALLOCATORS)}")
    p.add_argument("--repeat", type=int, default=5, help="timed replays per allocator")
    p.add_argument("--json", metavar="OUT", help="write the rows as JSON ('-': stdout)")
    p.add_argument("--plot", metavar="OUT.png", help="footprint over time per allocator")
    p.add_argument("--no-plan", action="store_true", help="skip planning the trace")
    p.set_defaults(run=run)
    return p


def sample_traces():
    """The traces shipped with pyarena."""
    if not os.path.isdir(SAMPLES_DIR):
        return []
    return sorted(os.path.join(SAMPLES_DIR, f) for f in os.listdir(SAMPLES_DIR)
                  if f.endswith((".trace", ".trace.gz")))


def memory_available():
    """Bytes of memory available to new processes (Linux), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def plan_trace(t):
    """(strategy, arena bytes, lower bound) of a static plan of the trace's
    blocks (alignment 1; lifetimes in events)."""
    from ..planning import plan_intervals
    bufs = t.intervals()
    if not bufs:
        return "none", 0, 0
    strategy = "best" if len(bufs) <= 20000 else "greedy-by-size"
    p = plan_intervals(bufs, strategy=strategy, alignment=1, time_limit=2.0)
    return p.chosen_strategy, p.arena_bytes, p.lower_bound_bytes


def bench_trace(path, allocators, repeat, plan=True):
    """The report of one trace: a dict with the trace's facts and a row per
    allocator (see pyarena.memory.replay)."""
    from ..memory.replay import replay
    from ..memory.trace import read_trace
    t = read_trace(path)
    if t.allocations == 0:
        raise InvalidArgumentError(f"{path}: the trace holds no allocation")
    peak = t.peak_live_bytes
    avail = memory_available()
    if avail is not None and 2 * peak > avail:
        raise InvalidArgumentError(
            f"{path}: the trace peaks at {human_bytes(peak)} live; replaying it needs about "
            f"twice that and this machine has {human_bytes(avail)} available")
    report = {"trace": path, "events": len(t), "allocations": t.allocations,
              "steps": t.steps, "peak_live_bytes": peak, "program": t.header.get("program")}
    if plan:
        report["plan_strategy"], report["plan_arena_bytes"], report["lower_bound_bytes"] = \
            plan_trace(t)
    with tempfile.TemporaryDirectory(prefix="pyarena-replay-") as tmp:
        binary = os.path.join(tmp, "trace.bin")
        t.to_binary(binary)
        rows = [replay(binary, a, peak, repeat=repeat) for a in allocators]
    for r in rows:
        r["peak_live_bytes"] = peak
        r["trace"] = path
    report["rows"] = rows
    return report


def print_report(rep, out=sys.stdout):
    print(f"\n{rep['trace']}: {rep['events']:,} events, {rep['allocations']:,} allocations, "
          f"{rep['steps']:,} steps; peak live {human_bytes(rep['peak_live_bytes'])}", file=out)
    if "plan_arena_bytes" in rep:
        print(f"static plan of the trace: {human_bytes(rep['plan_arena_bytes'])} "
              f"({rep['plan_strategy']}; lower bound {human_bytes(rep['lower_bound_bytes'])}, "
              f"{rep['plan_arena_bytes'] / max(rep['peak_live_bytes'], 1):.3f} x peak live)",
              file=out)
    base = next((r["ns_per_pair"] for r in rep["rows"] if r["allocator"] == "glibc"
                 and "skipped" not in r), None)
    hdr = (f"{'allocator':<13}{'ns/pair':>9}{'min..max':>16}{'vs glibc':>9}{'footprint':>10}"
           f"{'warm':>7}{'frag':>7}{'faults':>9}{'RSS kept':>11}")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in rep["rows"]:
        if "skipped" in r:
            print(f"{r['allocator']:<13}  skipped: {r['skipped']}", file=out)
            continue
        ratio = f"{r['ns_per_pair'] / base:.2f}" if base else "-"
        span = f"{r['ns_per_pair_min']:.0f}..{r['ns_per_pair_max']:.0f}"
        frag = f"{r['fragmentation']:.1%}" if r["fragmentation"] is not None else "-"
        print(f"{r['allocator']:<13}{r['ns_per_pair']:>9.1f}{span:>16}{ratio:>9}"
              f"{r['footprint']:>10.3f}{r['footprint_warm']:>7.3f}{frag:>7}{r['page_faults']:>9,}"
              f"{human_bytes(r['rss_kept_bytes']):>11}", file=out)


def plot_reports(reports, path):
    """Footprint (RSS growth / peak live) over the replay, per allocator."""
    from ..planning.plot import _pyplot
    plt = _pyplot()[0]
    fig, axes = plt.subplots(len(reports), 1, figsize=(9, 3.2 * len(reports)), squeeze=False)
    try:
        for ax, rep in zip(axes[:, 0], reports):
            peak = max(rep["peak_live_bytes"], 1)
            for r in rep["rows"]:
                if "skipped" in r or not r["samples"]:
                    continue
                xs, ys = zip(*r["samples"])
                ax.plot(xs, [y / peak for y in ys], label=r["allocator"], lw=1)
            ax.axhline(1.0, color="k", ls="--", lw=0.8, label="peak live")
            ax.set_title(os.path.basename(rep["trace"]), fontsize=9)
            ax.set_xlabel("event")
            ax.set_ylabel("RSS growth / peak live")
            ax.legend(fontsize=7, ncol=3)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def run(args):
    from ..memory.replay import ALLOCATORS
    traces = list(args.traces) + (sample_traces() if args.sample else [])
    if not traces:
        raise InvalidArgumentError("give trace files, or --sample for the shipped ones")
    allocators = [a.strip() for a in args.allocators.split(",") if a.strip()]
    bad = [a for a in allocators if a not in ALLOCATORS]
    if bad:
        raise InvalidArgumentError(f"unknown allocator(s) {bad}; choose from "
                                   f"{', '.join(ALLOCATORS)}")
    if not 1 <= args.repeat <= 1000:
        raise InvalidArgumentError(f"--repeat must be in 1..1000, not {args.repeat}")
    report_out = sys.stderr if args.json == "-" else sys.stdout
    reports = []
    for path in traces:
        rep = bench_trace(path, allocators, args.repeat, plan=not args.no_plan)
        print_report(rep, report_out)
        reports.append(rep)
    if args.json:
        rows = [{k: v for k, v in r.items() if k != "samples"}
                for rep in reports for r in rep["rows"]]
        text = json.dumps(rows, indent=1)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    if args.plot:
        plot_reports(reports, args.plot)
        print(f"plot written to {args.plot}", file=report_out)
    return 0
