"""PatchedStage: a run of spatial ops executed one band of output rows at a
time (the stage and its bands are chosen by ``planning/patch.py``).

Setup reads the stage's band plan from the op (``patched_bands.py``),
builds one kernel per op and per distinct band geometry (the first, the
middle and the last band differ in their rows and their padding) with the
registry's ordinary kernels, and lays the band buffers out in the op's
workspace (``patched_buffers.py``: buffers whose lifetimes do not overlap
share bytes; staging where a row slice is not one block).  A run walks
the bands: per band and op, the copies before it, the kernel on its views,
the copy after it -- runs of C kernel calls as one ``CallList`` list.  A
steady-state run allocates nothing: the views are made once for the
workspace, input and output it is given.
"""
import numpy as np

from ..._native.kernels import CallList, copy_call, pack_call
from ...memory.heap import trim_heap
from ..batch import batch_runs
from ...graph import Op, Tensor
from .patched_bands import BandPlan, _rows
from .patched_buffers import BandBuffers
from .registry import Kernel, make_kernel, register


class _Sized:
    """What sizing a patched stage keeps of a band kernel: its workspace
    and the inputs it reads at run time.  A budget search sizes many
    stages at many band counts (hundreds of band kernels each): holding
    them all until the stage is sized made the search's peak -- and the
    heap it leaves behind -- megabytes larger than the plan it returns."""

    __slots__ = ("scratch_bytes", "runtime", "kept")

    def __init__(self, scratch_bytes, runtime, kept):
        self.scratch_bytes, self.runtime, self.kept = scratch_bytes, runtime, kept


@register
class PatchedStage(Kernel):
    """The stage's ops run band by band, writing the stage output in place."""

    op_types = ("PatchedStage",)
    inplace = "none"

    def setup(self):
        self.plan = BandPlan(self.attrs, self.op.inputs[0], self.op.outputs[0], self.ins,
                             self.malformed)
        self.bands = self.plan.bands
        self.subs = {}          # (op index, band geometry) -> its kernel
        self._lenders = {}      # op index -> its last kernel built (setup only)
        self.buffers = BandBuffers(self.plan, self._kernel)
        if self.sizing:
            for k in self._lenders.values():
                k.discard()
        self._lenders = {}
        total = self.buffers.total
        self.scratch = [((total,), np.uint8)] if total else []
        self._runtime_inputs()
        self._n_whole = len(self.plan.whole)     # the inputs whose addresses key the views
        self._key = None
        self._what = f"patched stage {self.op.name!r}"

    @property
    def state_bytes(self):
        """What every band kernel kept (each band geometry of an op lays
        its weights out again) less the stage's constants, once."""
        kept = sum(k.kept if type(k) is _Sized else k.keep.kept for k in self.subs.values())
        return max(0, kept + self.keep.kept - self._const_bytes())

    def _kernel(self, i, op, req, pads, out_rows):
        """The kernel of op ``i`` for one band geometry (built once)."""
        key = (i, tuple(sorted((j, r[1] - r[0]) for j, r in req.items())),
               out_rows[1] - out_rows[0], pads)
        k = self.subs.get(key)
        if k is not None:
            return k
        plan = self.plan
        attrs, notes = self._band_attrs(i, op, req, pads)
        sub = Op(f"{self.op.name}/{op.name}", op.op_type, op.inputs, op.outputs, attrs=attrs,
                 notes=notes)
        ins = []
        for j, n in enumerate(op.inputs):
            if not n:
                ins.append(None)
            elif j in req:
                ins.append(Tensor(n, plan.rows_shape(n, req[j]), plan.shapes[n][1].name))
            else:
                ins.append(self.ins[plan.consts[n]])
        out = op.outputs[0]
        outs = [Tensor(out, _rows(plan.shapes[out][0], plan.h, out_rows),
                       plan.shapes[out][1].name)]
        # the op's kernel of another band geometry lends what does not
        # depend on the rows (packed weights, a PReLU's slopes): one copy
        k = make_kernel(sub, ins, outs, self.keep, self.scratch_budget, self.use_native,
                        prior=self._lenders.get(i))
        old, self._lenders[i] = self._lenders.get(i), k
        if self.sizing:     # only its workspace is asked: the kernel is not kept
            if old is not None:
                old.discard()
            k = _Sized(k.scratch_bytes, k.runtime, k.keep.kept)
        self.subs[key] = k
        return k

    def _band_attrs(self, i, op, req, pads):
        """Op ``i``'s attributes and notes in a band that reads rows ``req``
        of its inputs with padding ``pads`` of its own (None: the op's)."""
        attrs, notes = dict(op.attrs), op.notes.copy()
        if pads is None:
            return attrs, notes
        h, geo = self.plan.h, self.plan.geos[i]
        if geo[0] == "pad":
            begin, end = list(geo[3]), list(geo[4])
            begin[h], end[h] = pads
            attrs["pads"] = begin + end
        elif op.op_type == "Slice":     # the band's window from its row 0
            win = req[0][1] - req[0][0]
            axes = list(attrs["axes"])
            starts, ends, steps = list(attrs["starts"]), list(attrs["ends"]), list(attrs["steps"])
            if h not in axes:
                axes.append(h), starts.append(0), ends.append(win), steps.append(1)
            else:
                j = axes.index(h)
                starts[j], ends[j] = 0, win
            attrs.update(starts=starts, ends=ends, axes=axes, steps=steps)
        elif geo[0] == "resize":
            notes.band = (h, list(pads))
        else:
            attrs["pads"] = [pads[0], geo[4], pads[1], geo[6]]
            attrs["auto_pad"] = "NOTSET"
        return attrs, notes

    def _runtime_inputs(self):
        """The whole inputs and the constants some band kernel reads at run
        time."""
        plan = self.plan
        used = set(range(len(plan.whole)))
        for (i, *_), k in self.subs.items():
            op = plan.ops[i]
            for j, n in enumerate(op.inputs):
                if n in plan.consts and (k.runtime is None or j in k.runtime):
                    used.add(plan.consts[n])
        self.runtime = tuple(sorted(used))

    def _calls(self, xs, y, sc):
        """Per band and op, one at a time: (copies before, kernel, inputs,
        outputs, scratch, copy after)."""
        for k in self.subs.values():
            k.workers = self.workers
        plan, buffers = self.plan, self.buffers
        for band, (need, per_op) in enumerate(plan.needs):
            moves = buffers.moves(sc, band, need)
            for i, op, req, rows, k in plan.band_ops(need, per_op, self._kernel):
                pre, ins = buffers.band_inputs(sc, xs, i, op, req, need)
                dst, post = buffers.band_output(sc, y, i, op.outputs[0], rows, need)
                ksc = None
                if k.scratch_bytes:
                    o = buffers.offsets[("sc", i)]
                    ksc = sc[o:o + k.scratch_bytes]
                yield moves + pre, k, ins, [dst], ksc, post
                moves = []

    def _program(self, calls, hold=None):
        """The calls as runs of C kernel calls, each run one ``CallList``
        (``pa_calls_run``: no interpreter round trip per band and op), and
        the calls between them that are not one C call each, as they are."""
        if not self.batch_native:
            return list(calls)

        owners = []

        def records(call):
            pre, k, ins, outs, _, post = call
            # an array of its own (a band of padding alone): held too
            owners.extend(a for a in ins if isinstance(a, np.ndarray) and a.base is None)
            recs = [copy_call(d, s) for d, s in pre] + [k.native_call(ins, outs)] + (
                [] if post is None else [copy_call(*post)])
            # packed, the views as addresses: what they view is held (hold,
            # subs), and thousands of views -- or of tuples of addresses --
            # held until the run is made cost more than the arena the bands
            # saved
            return None if None in recs else [(k.op.name, pack_call(r)) for r in recs]
        return batch_runs(calls, records, lambda recs, names: CallList(
            recs, names, None if hold is None else (hold, owners)), min_run=1)

    #: False: every band's op is called from Python (for comparisons)
    batch_native = True

    def run(self, xs, ys, sc):
        buf = sc[0] if sc else np.empty(0, np.uint8)
        key = tuple(xs[k].__array_interface__["data"][0] for k in range(self._n_whole)) + (
            ys[0].__array_interface__["data"][0], buf.__array_interface__["data"][0])
        if key != self._key:
            # the records point into the inputs, the output and the workspace
            # (held below) and the band kernels' weights (held in subs)
            first = self._key is None
            self._all = self._program(self._calls(xs, ys[0], buf), (tuple(xs), ys[0], buf))
            self._key = key
            if first:   # the band views and records made the calls and are gone
                trim_heap()
        copyto, workers = np.copyto, self.workers
        for call in self._all:
            if type(call) is CallList:
                call.run(workers, self._what)
                continue
            pre, k, ins, outs, ksc, post = call
            for dst, src in pre:
                copyto(dst, src)
            k(ins, outs, ksc)
            if post is not None:
                copyto(post[0], post[1])
