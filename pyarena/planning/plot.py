"""Drawing a memory plan: op index across, arena offset up.

Each buffer is a rectangle spanning its lifetime and its bytes; tensors
sharing a buffer (in place, views) are one rectangle.  Scratch buffers are
hatched; dashed lines mark the lower bound and the arena size.  Needs
matplotlib (the ``plot`` extra), imported only when a plot is drawn.
"""
import os

from ..errors import InvalidArgumentError, PlotUnavailableError

__all__ = ["plot_plan", "patch_marks", "PlotUnavailableError"]


def patch_marks(plan):
    """[(op index, label)] for each patched stage of a budgeted plan (one
    op that runs a whole stage in bands; ``planning/patch.py``)."""
    budget = plan.budget or {}
    recs = budget.get("patches")
    if recs is None:                # a plan written when one stage was the most
        recs = [budget["patch"]] if budget.get("patch") else []
    if not recs or plan.graph is None:
        return []
    names = [op.name for op in plan.graph.ops]
    return [(names.index(rec["op"]), f"patched stage: {len(rec['ops'])} ops, "
             f"{rec['grid'][0]} x {rec['grid'][1]} patches")
            for rec in recs if rec["op"] in names]


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Rectangle
    except ImportError:
        raise PlotUnavailableError(
            "plotting a plan needs matplotlib: pip install 'pyarena[plot]'") from None
    return plt, PatchCollection, Rectangle


def plot_plan(plan, path, title=None, max_labels=40):
    """Write ``plan`` as a PNG or SVG (chosen by the extension of ``path``).
    Returns the path."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in (".png", ".svg", ".pdf"):
        raise InvalidArgumentError(f"plot path {path!r} must end in .png, .svg or .pdf")
    plt, PatchCollection, Rectangle = _pyplot()
    scale, unit = 1, "B"
    for s, u in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if plan.arena_bytes >= 4 * s:
            scale, unit = s, u
            break
    fig, ax = plt.subplots(figsize=(10, 5.5))
    try:
        cmap = plt.get_cmap("tab20")
        rects, colors, hatched = [], [], []
        scratch = {id(b) for b in plan.scratch.values()}
        for i, b in enumerate(plan.buffers):
            r = Rectangle((b.first - 0.45, b.offset / scale), b.last - b.first + 0.9,
                          max(b.size, 1) / scale)
            if id(b) in scratch:
                hatched.append(r)
            else:
                rects.append(r)
                colors.append(cmap(i % 20))
        ax.add_collection(PatchCollection(rects, facecolors=colors, edgecolors="k",
                                          linewidths=0.3 if len(rects) < 500 else 0))
        if hatched:
            ax.add_collection(PatchCollection(hatched, facecolors="none",
                                              edgecolors="0.3", hatch="///",
                                              linewidths=0.5))
        if len(plan.buffers) <= max_labels:
            for b in plan.buffers:
                label = b.name if len(b.tensors) == 1 else f"{b.name} (+{len(b.tensors) - 1})"
                ax.text((b.first + b.last) / 2, (b.offset + b.size / 2) / scale, label,
                        ha="center", va="center", fontsize=6, clip_on=True)
        for at, label in patch_marks(plan):
            ax.axvspan(at - 0.5, at + 0.5, color="tab:orange", alpha=0.25, label=label)
        bound = (plan.budget or {}).get("fixed_order_bound_bytes")
        if bound and (plan.budget or {}).get("patch"):
            ax.axhline(bound / scale, ls=":", color="0.4", lw=1,
                       label=f"fixed-order bound before patching {bound:,} B")
        ax.axhline(plan.lower_bound_bytes / scale, ls="--", color="tab:green", lw=1,
                   label=f"lower bound {plan.lower_bound_bytes:,} B")
        ax.axhline(plan.arena_bytes / scale, ls="--", color="tab:red", lw=1,
                   label=f"arena {plan.arena_bytes:,} B")
        ax.set_xlim(-0.5, max(plan.num_ops, 1) - 0.5)
        ax.set_ylim(0, max(plan.arena_bytes, bound or 0, 1) / scale * 1.05)
        ax.set_xlabel("op index")
        ax.set_ylabel(f"arena offset ({unit})")
        name = plan.graph.name if plan.graph is not None else "intervals"
        ax.set_title(title or f"{name}: {plan.strategy}, {len(plan.buffers)} buffers")
        ax.legend(loc="upper right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path
