"""Concat in place: the producers of a Concat's inputs write straight into
their slices of its output.

A Concat copies every input into its slice of the output, so at that position
the inputs and the output are all live: twice the output's bytes.  When
an input's slice is one contiguous block of the output -- concatenation
along axis 0, or along an axis after only size-1 dims (the channels of a
batch-1 NCHW tensor) -- the input can *be* that block: its buffer moves
into the output's buffer at the slice's byte offset, its producer writes
there, and the Concat has nothing left to copy (its kernel skips an input
already in place).  The inputs never exist apart from the output, whose
buffer now lives from its first input's producer.

An input is placed when (checked here, at its Concat, on the buffers as
built so far -- :func:`pyarena.planning.sharing.share_buffers` does the
move):

* the op's kind is ``"concat"`` (the Concat kernel declares it), it has
  no fused activation (that would rewrite the slices, and so the inputs,
  after the copy) and :func:`concat_slices` finds contiguous slices;
* the input is produced by an op (its buffer holds no graph input, which
  the caller writes, and it is not a constant), is not empty, and its
  buffer is exactly the input: not already a slice of another Concat's
  output (a Concat of a Concat moves the inner output's whole buffer,
  slices and all, into the outer one);
* no other input of the same Concat uses that buffer (an input named
  twice is placed once and copied into its other slice);
* the estimate says it does not raise the peak (below).

A graph output among the inputs is fine: it lives to the end, so the
merged buffer does too, and no later op may overwrite it.  After the
move, the sharing rules see one buffer: an in-place overwrite of any
member needs every member dead, so an input read after the Concat is
never clobbered through the output, nor the output through the input.

The estimate: the bytes live at each position (padded, as the offset planner
counts them) of the plan without Concat in place; merging a Concat's
buffers holds the whole output from its first input's birth instead of
each input from its own, so at some positions it costs bytes and at the
Concat's own position it saves the inputs.  A Concat is merged only when the
largest sum of live bytes over the positions it changes stays at or below the
current peak (merges are tried in op order, each on the profile left by
the ones before).  :func:`pyarena.plan` then keeps the plan without Concat
in place when that one has the smaller arena, so the option never makes
an arena larger.
"""
import math

import numpy as np

from .result import padded_size

__all__ = ["concat_slices", "ConcatPlacer"]


def concat_slices(op, graph):
    """``[(input index, byte offset, bytes)]``: where each (named) input
    of Concat ``op`` lies in its output 0, when every slice is one
    contiguous block (axis 0, or only size-1 dims before the axis; equal
    dtypes; known shapes) and the op fuses no activation; else None."""
    if not op.outputs or not op.outputs[0] or \
            op.attrs.get("activation") not in (None, "", "NONE"):
        return None
    out = graph.tensors[op.outputs[0]]
    if out.shape is None or out.is_symbolic or not len(out.shape):
        return None
    shape = tuple(int(d) for d in out.shape)
    nd = len(shape)
    try:
        ax = int(op.attrs.get("axis", 0))
    except (TypeError, ValueError):
        return None
    ax = ax + nd if ax < 0 else ax
    if not 0 <= ax < nd or math.prod(shape[:ax]) != 1:
        return None
    slices, off = [], 0
    for k, name in enumerate(op.inputs):
        if not name:
            continue
        t = graph.tensors[name]
        if t.dtype != out.dtype or t.shape is None or t.is_symbolic or \
                len(t.shape) != nd or \
                any(int(a) != b for j, (a, b) in enumerate(zip(t.shape, shape)) if j != ax):
            return None
        n = t.nbytes
        slices.append((k, off, n))
        off += n
    return slices if off == out.nbytes else None


class _Block:
    """A buffer of the profile: padded size, lifetime, tensors, the
    tensors spanning it from its start (``top``) and whether it holds a
    graph input (``fed``)."""

    __slots__ = ("size", "first", "last", "members", "top", "fed")

    def __init__(self, size, first, last, members, top, fed):
        self.size, self.first, self.last = size, first, last
        self.members, self.top, self.fed = members, top, fed


#: a Concat with more candidate inputs than this drops them greedily
#: instead of trying every subset
_EXHAUSTIVE = 6


class ConcatPlacer:
    """Decides, Concat by Concat, which inputs move into the output's
    buffer (see the module docstring), on the buffers planned without
    Concat in place (``base``); :meth:`choose` hands the decisions to
    :func:`~pyarena.planning.sharing.share_buffers`.  ``base_peak`` is the
    largest sum of padded bytes live at one position of ``base`` (that plan's
    lower bound), ``peak`` the estimate with the decisions taken."""

    def __init__(self, graph, table, life, base, alignment):
        self.graph = graph
        positions = max(len(graph.ops), 1)
        self.block = {}
        tensors = graph.tensors
        # the profile as the running sum of size changes (+size at a
        # buffer's first position, -size after its last), summed at once
        change = [0] * (positions + 1)
        for b in base:
            top = [t for t in b.tensors if t in tensors and tensors[t].nbytes == b.size]
            fed = any(t in tensors and tensors[t].role == "input" for t in b.tensors)
            blk = _Block(padded_size(b.size, alignment), b.first, b.last, list(b.tensors),
                         set(top), fed)
            change[b.first] += blk.size
            change[b.last + 1] -= blk.size
            for t in b.tensors:
                self.block[t] = blk
        self.profile = np.cumsum(np.array(change[:positions], dtype=np.int64))
        self.base_peak = self.peak = int(self.profile.max())
        self.slices = {}
        positions = {}
        kinds = {}
        for i, op in enumerate(graph.ops):
            kind = kinds.get(op.op_type)
            if kind is None:
                kind = kinds[op.op_type] = table.kind(op.op_type)
            if kind == "concat" and op.outputs and op.outputs[0] in life:
                s = concat_slices(op, graph)
                if s:
                    self.slices[op.name] = s
                    positions[op.name] = i
        self.picks = {}
        # the Concats at the highest positions first: they decide the peak
        for name in sorted(positions, key=lambda n: (-int(self.profile[positions[n]]), positions[n])):
            op = graph.ops[positions[name]]
            self.picks[name] = self._decide(op, self.slices[name])

    @property
    def any(self):
        """True when some input was picked (else planning with the placer
        gives the plan without)."""
        return any(self.picks.values())

    def _candidates(self, op, slices):
        own = self.block.get(op.outputs[0])
        seen, out = set(), []
        for k, _, n in slices:
            name = op.inputs[k]
            blk = self.block.get(name)
            if blk is None or n == 0 or blk is own or id(blk) in seen or blk.fed or \
                    name not in blk.top:
                continue
            seen.add(id(blk))
            out.append((k, blk))
        return own, out

    def _decide(self, op, slices):
        """The input indices to place: the subset of candidates whose merge
        gives the lowest peak, the larger subset on a tie; merged into the
        profile."""
        own, cands = self._candidates(op, slices)
        if not cands or own is None:
            return set()
        blocks = [own] + [b for _, b in cands]
        lo = min(b.first for b in blocks)
        hi = max(b.last for b in blocks)
        outside = max(int(self.profile[:lo].max(initial=0)),
                      int(self.profile[hi + 1:].max(initial=0)))

        def trial(subset):
            olds = [own] + [b for k, b in cands if k in subset]
            first, last = min(b.first for b in olds), max(b.last for b in olds)
            w = self.profile[lo:hi + 1].copy()
            for b in olds:
                w[b.first - lo:b.last - lo + 1] -= b.size
            w[first - lo:last - lo + 1] += max(b.size for b in olds)
            return max(outside, int(w.max())), w

        ks = [k for k, _ in cands]
        if len(ks) <= _EXHAUSTIVE:
            options = [{k for j, k in enumerate(ks) if m >> j & 1}
                       for m in range(1 << len(ks))]
        else:
            options = _greedy_drops(set(ks), lambda s: trial(s)[0])
        best = min(options, key=lambda s: (trial(s)[0], -len(s)))
        peak, window = trial(best)
        if not best or peak > self.peak:
            return set()
        self.profile[lo:hi + 1] = window
        self.peak = int(self.profile.max())
        olds = [own] + [b for k, b in cands if k in best]
        merged = _Block(max(b.size for b in olds), min(b.first for b in olds),
                        max(b.last for b in olds), [t for b in olds for t in b.members],
                        own.top, any(b.fed for b in olds))
        for t in merged.members:
            self.block[t] = merged
        return best

    def choose(self, op, group_of):
        """``[(input index, group, byte offset)]`` to move into the output
        of ``op`` now: the inputs decided on whose buffers, as built so
        far, are still exactly the input (empty for any other op)."""
        picks = self.picks.get(op.name)
        if not picks:
            return []
        out, used = [], set()
        for k, off, n in self.slices[op.name]:
            g = group_of.get(op.inputs[k])
            if k not in picks or g is None or id(g) in used or g.fed or \
                    g.at.get(op.inputs[k], 0) or g.size != n:
                continue
            used.add(id(g))
            out.append((k, g, off))
        return out


def _greedy_drops(ks, peak_of):
    """Subsets of ``ks`` from all of it, dropping one member at a time
    (the one whose drop gives the lowest peak), down to the empty set."""
    cur = set(ks)
    out = [set(cur)]
    while cur:
        drop = min(cur, key=lambda k: peak_of(cur - {k}))
        cur = cur - {drop}
        out.append(set(cur))
    return out
