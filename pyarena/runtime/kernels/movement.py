"""Data-movement kernels: views (Reshape, Flatten, Squeeze, Unsqueeze,
Identity, Dropout), Expand, Transpose, Concat, Split, Slice, Gather, Tile,
Pad, ReverseSequence, CenterCropPad, Col2Im and TensorScatter.  The "alias" kinds copy
nothing when the planner made the output the input's memory; scratch:
ReverseSequence's gather index, a padded Col2Im's image.
"""
import itertools
import math

import numpy as np

from ..._native.kernels import copy_call
from ...errors import InvalidArgumentError
from . import evaluators as ev
from . import shape_rules as rules
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .planes_native import planes_record, run_planes
from .registry import Kernel, const, register


@register
class Alias(Kernel):
    """Copies nothing when the planner made the output the input's memory."""

    op_types = ('Reshape', 'Flatten', 'Squeeze', 'Unsqueeze', 'Identity', 'Dropout')
    family = 'movement'
    inplace = 'alias'
    shape_rule = {'Reshape': moves.reshape, 'Flatten': moves.flatten,
                  'Squeeze': moves.squeeze, 'Unsqueeze': moves.unsqueeze,
                  'Identity': rules.same, 'Dropout': rules.dropout}
    evaluate = {'Reshape': ev.reshape, 'Squeeze': ev.squeeze, 'Unsqueeze': ev.unsqueeze,
                'Identity': ev.identity, 'Dropout': ev.dropout}
    fold = {'Identity': 'free'}
    # Identity and (inference) Dropout are element-wise in any layout, row for row
    nhwc = {'Identity': 'elementwise', 'Dropout': 'elementwise'}
    rows = {'Identity': 'local', 'Dropout': 'local'}
    qdq = {t: 'same_scale' for t in ('Reshape', 'Flatten', 'Squeeze', 'Unsqueeze')}
    tflite_int8 = {'RESHAPE': 'same', 'SQUEEZE': 'same', 'EXPAND_DIMS': 'same'}
    tflite = {
        'RESHAPE': ('Reshape', {}, tfl.shape_only),
        'SQUEEZE': ('Squeeze', {}, tfl.shape_only),
        'EXPAND_DIMS': ('Unsqueeze', {}, tfl.shape_only)}

    def setup(self):
        self.runtime = (0,)
        self.aliased = False        # bound to views of the same memory
        #: Dropout's mask output (all true: nothing is dropped), or False
        self.mask = self.op.op_type == "Dropout" and len(self.op.outputs) > 1 and \
            bool(self.op.outputs[1])
        if self.mask and not self.op.outputs[0]:
            self.fail("the mask output without the output is not supported")
        if self.op.op_type == "Dropout" and self.has(2):
            training = self.const(2, "training_mode")
            if ev.dropout_trains(0.5, training) and ev.dropout_trains(
                    self.const(1, "ratio") if self.has(1) else 0.5, training):
                self.fail(ev.DROPOUT_TRAINING)
        x, y = self.ins[0], self.outs[0]
        if x is not None and x.nbytes != y.nbytes:
            self.malformed(f"input {x.name!r} {list(x.shape)} and output {y.name!r} "
                           f"{list(y.shape)} hold different numbers of bytes")

    def bind(self, xs, ys):
        super().bind(xs, ys)
        x, y = xs[0], ys[0]
        self.aliased = x is not None and x.size > 0 and y.size > 0 and \
            x.__array_interface__["data"][0] == y.__array_interface__["data"][0]

    @property
    def idle(self):
        return self.aliased and self._act is None and not self.mask

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if self.mask:
            ys[1].fill(True)
        if x.size and y.size and x.__array_interface__["data"][0] == \
                y.__array_interface__["data"][0]:
            return
        np.copyto(y, x.reshape(y.shape))

@register
class Expand(Kernel):
    op_types = ('Expand',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.expand
    evaluate = ev.expand
    fold = 'expanding'

    def setup(self):
        self.runtime = (0,)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0])   # copyto broadcasts


@register
class ConstantOfShape(Kernel):
    """A constant too large to fold at import (the importer folds only
    shape-sized values): filled at run time, planned like any tensor."""

    op_types = ('ConstantOfShape',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.constant_of_shape
    evaluate = ev.constant_of_shape
    fold = 'free'           # (it checks its own size)

    def setup(self):
        self.runtime = ()
        v = self.attrs.get("value")
        v = np.asarray(0.0 if v is None else v).reshape(-1)
        self.value = v[0] if v.size else 0

    def run(self, xs, ys, sc):
        ys[0].fill(self.value)


#: NCHW <-> NHWC Transposes of at most this many channels copy plane by plane
FEW_PLANES = 16


@register
class Transpose(Kernel):
    op_types = ('Transpose',)
    family = 'movement'
    inplace = 'transpose'
    shape_rule = moves.transpose
    evaluate = ev.transpose
    rows = 'transpose'
    qdq = 'same_scale'
    tflite = {'TRANSPOSE': ('Transpose', {})}

    def setup(self):
        self.runtime = (0,)
        nd = len(self.shape(0))
        perm = self.attrs.get("perm")
        if self.has(1):
            perm = self.const(1, "perm")
        self.perm = tuple(int(p) for p in perm) if perm is not None else \
            tuple(range(nd - 1, -1, -1))
        # NCHW <-> NHWC of few channels (an image into an NHWC region): one
        # copy per channel plane (contiguous on one side, a fixed stride on
        # the other) instead of one copy of a view whose innermost axis is
        # the channel's: 3 x 224 x 224 in 0.35 vs 1.8 ms (loaded machine)
        xs = self.shape(0)
        self.planes = None
        if nd == 4 and self.perm in ((0, 2, 3, 1), (0, 3, 1, 2)) and not self.ins[0].dynamic:
            c = xs[1] if self.perm == (0, 2, 3, 1) else xs[3]
            if 1 < c <= FEW_PLANES:
                self.planes = (xs[0], c, self.perm == (0, 2, 3, 1))

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if x.size and x.__array_interface__["data"][0] == y.__array_interface__["data"][0]:
            return   # the planner made it a view: only size-1 axes move
        if self.planes is not None:
            n, c, to_nhwc = self.planes
            if run_planes(x, y, n, c, to_nhwc, self.workers):
                return
            a, b = (y, x) if to_nhwc else (x, y)    # a: the NHWC side, b: the NCHW one
            av, bv = a.reshape(n, -1, c), b.reshape(n, c, -1)
            for i in range(n):
                for k in range(c):
                    if to_nhwc:
                        av[i, :, k] = bv[i, k]
                    else:
                        bv[i, k] = av[i, :, k]
            return
        np.copyto(y, x.transpose(self.perm))

    def native_calls(self, xs, ys):
        """A few-channel NCHW <-> NHWC reorder as one C record, or None."""
        if self.planes is None or self._act is not None:
            return None
        return planes_record(xs[0], ys[0], *self.planes)


def _copy_records(pairs):
    """``copy_call`` records of ``np.copyto(dst, src)`` for each pair, or
    None when one is not a block copy of two arrays of plain values (a pool
    tensor: None; strings)."""
    recs = []
    for dst, src in pairs:
        if not isinstance(dst, np.ndarray) or not isinstance(src, np.ndarray) or \
                dst.dtype.hasobject:
            return None
        rec = copy_call(dst, src)
        if rec is None:
            return None
        recs.append(rec)
    return recs


@register
class Concat(Kernel):
    """Copies each input into its slice of the output, except an input the
    planner placed in its slice already (its producer wrote it there:
    pyarena.planning.concat); with every input in place it does nothing."""

    op_types = ('Concat', 'Concatenation')
    family = 'movement'
    inplace = 'concat'
    shape_rule = {'Concat': moves.concat}
    evaluate = {'Concat': ev.concat}
    nhwc = {'Concat': 'concat'}
    rows = {'Concat': 'concat'}
    tflite = {'CONCATENATION': ('Concat', {}, tfl.concatenation)}

    def setup(self):
        nd = len(self.oshape())
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        self.bounds = []
        off = 0
        for t in self.ins:
            if t is None:
                self.bounds.append(None)
                continue
            n = int(t.shape[self.axis])
            self.bounds.append((off, off + n))
            off += n
        self.copies = None      # (input index, output slice) to copy, once views are bound

    def _copies(self, xs, y):
        pre = (slice(None),) * self.axis
        out = []
        for i, (x, b) in enumerate(zip(xs, self.bounds)):
            if b is None or b[1] <= b[0]:
                continue
            dst = y[pre + (slice(b[0], b[1]),)]
            if not (dst.flags.c_contiguous and x.flags.c_contiguous and
                    dst.__array_interface__["data"][0] == x.__array_interface__["data"][0]):
                out.append((i, dst))
        return out

    def bind(self, xs, ys):
        super().bind(xs, ys)
        self.copies = self._copies(xs, ys[0])     # the same views every run

    def run(self, xs, ys, sc):
        copies = self.copies if self.stable else self._copies(xs, ys[0])
        for i, dst in copies:
            np.copyto(dst, xs[i])

    def native_calls(self, xs, ys):
        """The copies as block-copy records (``copy_call``) on the bound
        views, or None (an input not in the arena, a fused activation)."""
        if not self.stable or self._act is not None or self.copies is None:
            return None
        return _copy_records([(dst, xs[i]) for i, dst in self.copies])

    def inputs_in_place(self):
        """The inputs found in their slices of the output (known once the
        executor bound its views)."""
        if self.copies is None:
            return []
        copied = {i for i, _ in self.copies}
        return [i for i, b in enumerate(self.bounds)
                if b is not None and b[1] > b[0] and i not in copied]

    @property
    def idle(self):
        return self.copies == [] and self._act is None

    @property
    def path(self):
        """"in place" when the planner put every input in its slice."""
        return "in place" if self.copies == [] else super().path


@register
class Split(Kernel):
    op_types = ('Split',)
    family = 'movement'
    inplace = 'none'
    nhwc = 'split'
    shape_rule = moves.split
    tflite = {'SPLIT': ('Split', {}, tfl.split), 'SPLIT_V': ('Split', {}, tfl.split_v)}
    tflite_int8 = {'SPLIT': 'select', 'SPLIT_V': 'select'}

    def setup(self):
        self.runtime = (0,)
        nd = len(self.shape(0))
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        self.bounds = []
        off = 0
        for t in self.outs:
            n = int(t.shape[self.axis])
            self.bounds.append((off, off + n))
            off += n

    def run(self, xs, ys, sc):
        pre = (slice(None),) * self.axis
        for y, b in zip(ys, self.bounds):
            np.copyto(y, xs[0][pre + (slice(*b),)])

    def native_calls(self, xs, ys):
        """Each output's slice as a block-copy record (``copy_call``), or None."""
        if self._act is not None:
            return None
        pre = (slice(None),) * self.axis
        return _copy_records([(y, None if xs[0] is None else xs[0][pre + (slice(*b),)])
                              for y, b in zip(ys, self.bounds)])


@register
class Slice(Kernel):
    op_types = ('Slice',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.sliced
    evaluate = ev.slice_values
    nhwc = 'slice'
    rows = 'slice'

    def setup(self):
        self.runtime = (0,)
        shp = self.shape(0)
        if self.has(1):
            starts = self.const(1, "starts")
            ends = self.const(2, "ends")
            axes = self.const(3, "axes") if self.has(3) else range(len(starts))
            steps = self.const(4, "steps") if self.has(4) else [1] * len(starts)
        else:
            starts, ends = self.attrs["starts"], self.attrs["ends"]
            axes = self.attrs.get("axes", range(len(starts)))
            steps = self.attrs.get("steps", [1] * len(starts))
        sl = [slice(None)] * len(shp)
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = int(a) + len(shp) if int(a) < 0 else int(a)
            s, e, st = int(s), int(e), int(st)
            n = shp[a]
            s = max(-n - 1, min(s, n + 1)) if abs(s) > n else s
            e = max(-n - 1, min(e, n + 1)) if abs(e) > n else e
            sl[a] = slice(s, e, st)
        self.sl = tuple(sl)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0][self.sl])

    def native_calls(self, xs, ys):
        """The slice as a block-copy record (``copy_call``: rows, a step
        over pixels...), or None (not equally spaced blocks)."""
        if self._act is not None or xs[0] is None or ys[0] is None:
            return None
        return _copy_records([(ys[0], xs[0][self.sl])])


@register
class Gather(Kernel):
    op_types = ('Gather',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.gather
    evaluate = ev.gather

    def setup(self):
        nd = len(self.shape(0))
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        self.n = self.shape(0)[self.axis]
        if self.ins[1].data is not None:
            self.check_indices(self.ins[1].data, self.n, constant=True)
            self.idx = self.keep(np.asarray(self.ins[1].data).astype(np.intp))
            self.runtime = (0,)
        else:
            self.idx = None

    def run(self, xs, ys, sc):
        idx = self.idx
        if idx is None:
            idx = xs[1]
            self.check_indices(idx, self.n)
        # (within [-n, n-1]: "wrap" maps a negative index in one step)
        xs[0].take(idx, axis=self.axis, out=ys[0], mode="wrap")

@register
class Tile(Kernel):
    """y viewed as (r0, d0, r1, d1, ...) gets x broadcast over the r axes."""

    op_types = ('Tile',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.tile
    evaluate = ev.tile
    fold = 'expanding'

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        reps = [y // x if x else 1 for x, y in zip(xs, ys)]
        self.yview = tuple(v for r, d in zip(reps, xs) for v in (r, d))
        self.xview = tuple(v for d in xs for v in (1, d))

    def run(self, xs, ys, sc):
        np.copyto(ys[0].reshape(self.yview), xs[0].reshape(self.xview))

@register
class Pad(Kernel):
    op_types = ('Pad',)
    family = 'movement'
    inplace = 'none'
    shape_rule = moves.pad
    fold = 'expanding'
    nhwc = 'pad'
    rows = 'pad'
    tflite = {'PAD': ('Pad', {}, tfl.pad), 'PADV2': ('Pad', {}, tfl.pad),
              'MIRROR_PAD': ('Pad', {}, tfl.pad)}

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        nd = len(xs)
        pads = self.attrs.get("pads")
        if self.has(1):
            pads = self.const(1, "pads")
        pads = np.asarray(pads, dtype=np.int64).reshape(-1)
        if self.attrs.get("layout_pairs"):           # TFLite: [[b, e], ...]
            pads = pads.reshape(-1, 2).T.reshape(-1)
        axes = list(range(nd))
        if self.has(3):
            axes = [int(a) + nd if int(a) < 0 else int(a) for a in self.const(3, "axes")]
        begin, end = [0] * nd, [0] * nd
        k = len(axes)
        for i, a in enumerate(axes):
            begin[a], end[a] = int(pads[i]), int(pads[i + k])
        if min(begin + end) < 0:
            self.fail("negative pads (cropping) are not supported")
        value = float(self.attrs.get("value", 0.0))
        if self.has(2):
            value = float(self.const(2, "constant_value").reshape(-1)[0])
        mode = self.attrs.get("mode", "constant")
        if isinstance(mode, bytes):
            mode = mode.decode()
        if mode not in ("constant", "reflect", "edge", "wrap"):
            self.fail(f"mode {mode!r} is not supported")
        self.mode, self.value = mode, const(value, self.dtype)
        self.begin, self.end, self.xs = begin, end, xs
        self.inner = tuple(slice(b, b + d) for b, d in zip(begin, xs))
        if mode == "wrap" and any(d == 0 and (b or e) for d, b, e in zip(xs, begin, end)):
            self.malformed(f"cannot wrap-pad an empty axis (input {list(xs)})")

    def run(self, xs, ys, sc):
        y = ys[0]
        if self.mode == "constant":
            # borders only, axis by axis
            for a, (b, e) in enumerate(zip(self.begin, self.end)):
                pre = (slice(None),) * a
                if b:
                    y[pre + (slice(0, b),)].fill(self.value)
                if e:
                    y[pre + (slice(y.shape[a] - e, None),)].fill(self.value)
            np.copyto(y[self.inner], xs[0])
            return
        np.copyto(y[self.inner], xs[0])
        # fill axis by axis from the already-valid region: each border is one
        # strided copy (reflect: the rows after the border, mirrored; edge:
        # the first / last row, broadcast)
        cur = list(self.inner)
        reflect = self.mode == "reflect"
        for a, (b, e) in enumerate(zip(self.begin, self.end)):
            n = self.xs[a]
            if self.mode == "wrap":     # output i reads input (i - b) mod n
                src = list(cur)
                src[a] = slice(b, b + n)
                inner = y[tuple(src)]
                for lo, hi in ((0, b), (b + n, b + n + e)):
                    if hi > lo:
                        dst = list(cur)
                        dst[a] = slice(lo, hi)
                        np.copyto(y[tuple(dst)], inner.take(
                            (np.arange(lo, hi) - b) % n, axis=a))
                cur[a] = slice(None)
                continue
            if b:
                dst, src = list(cur), list(cur)
                dst[a] = slice(0, b)
                src[a] = slice(2 * b, b, -1) if reflect else slice(b, b + 1)
                np.copyto(y[tuple(dst)], y[tuple(src)])
            if e:
                dst, src = list(cur), list(cur)
                dst[a] = slice(b + n, b + n + e)
                last = b + n - 2
                src[a] = slice(last, last - e if last - e >= 0 else None, -1) if reflect \
                    else slice(b + n - 1, b + n)
                np.copyto(y[tuple(dst)], y[tuple(src)])
            cur[a] = slice(None)


@register
class ReverseSequence(Kernel):
    """Each batch entry's first ``sequence_lens[b]`` time steps reversed,
    the rest kept: one gather along the time axis, its source index (L - 1
    - t before L, t after) worked out in the scratch for the lengths fed."""

    op_types = ("ReverseSequence",)
    family = "movement"
    shape_rule = rules.same

    def setup(self):
        shp = self.shape(0)
        nd = len(shp)
        t_ax = int(self.attrs.get("time_axis", 0))
        b_ax = int(self.attrs.get("batch_axis", 1))
        if nd < 2 or {t_ax, b_ax} != {0, 1}:
            self.malformed(f"time_axis {t_ax} and batch_axis {b_ax} must be 0 and 1 of a "
                           f"tensor of rank >= 2 (shape {list(shp)})")
        self.t_ax, self.steps = t_ax, shp[t_ax]
        tshape, bshape = [1] * nd, [1] * nd
        tshape[t_ax], bshape[b_ax] = shp[t_ax], shp[b_ax]
        self.bshape = tuple(bshape)
        self.t = self.keep(np.arange(shp[t_ax], dtype=np.int64).reshape(tshape))
        self.t1 = self.keep(self.t + 1)
        both = tuple(max(a, b) for a, b in zip(tshape, bshape))
        self.scratch = [(both, np.int64), (both, np.bool_)]

    def run(self, xs, ys, sc):
        idx, after = sc
        lens = xs[1].reshape(self.bshape)
        if lens.size and (lens.min() < 0 or lens.max() > self.steps):
            raise InvalidArgumentError(
                f"operator {self.op.name!r} (ReverseSequence): sequence_lens "
                f"{lens.reshape(-1).tolist()} must lie in [0, {self.steps}]")
        np.subtract(lens, self.t1, out=idx)                 # L - 1 - t
        np.greater_equal(self.t, lens, out=after)
        np.copyto(idx, self.t, where=after)
        np.copyto(ys[0], np.take_along_axis(xs[0], idx, axis=self.t_ax))


@register
class CenterCropPad(Kernel):
    """Each of ``axes`` cropped or zero-padded about its centre to the
    target size (input 1: a constant or a value the kernel is built for):
    a fill and one copy between the overlapping slices."""

    op_types = ("CenterCropPad",)
    family = "movement"
    shape_rule = moves.center_crop_pad
    fold = "expanding"

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        src, dst = [slice(None)] * len(xs), [slice(None)] * len(xs)
        for a, (d, s) in enumerate(zip(xs, ys)):
            if s < d:       # crop: the centre, the odd element off the end
                src[a] = slice((d - s) // 2, (d - s) // 2 + s)
            elif s > d:     # pad: the input at the centre
                dst[a] = slice((s - d) // 2, (s - d) // 2 + d)
        target = [int(v) for v in np.asarray(self.const(1, "shape")).reshape(-1)]
        axes = [int(a) % len(xs) for a in self.attrs.get("axes", range(len(xs)))]
        if len(target) != len(axes) or any(ys[a] != t for a, t in zip(axes, target)):
            self.malformed(f"output {list(ys)} is not input {list(xs)} with axes {axes} "
                           f"sized {target}")
        self.src, self.dst = tuple(src), tuple(dst)
        self.padded = any(s > d for d, s in zip(xs, ys))

    def run(self, xs, ys, sc):
        if self.padded:
            ys[0].fill(0)
        np.copyto(ys[0][self.dst], xs[0][self.src])


@register
class Col2Im(Kernel):
    """The columns (N, C * prod(block), L) summed back into an image (N, C,
    *image_shape): one strided add per block position (strides,
    dilations, pads), into a padded image in the scratch when there are
    pads.  image_shape and block_shape are constants or values the kernel
    is built for."""

    op_types = ("Col2Im",)
    family = "movement"
    shape_rule = moves.col2im
    fold = "expanding"

    def setup(self):
        self.runtime = (0,)
        image = [int(v) for v in np.asarray(self.const(1, "image_shape")).reshape(-1)]
        block = [int(v) for v in np.asarray(self.const(2, "block_shape")).reshape(-1)]
        r = len(image)
        dil = [int(v) for v in self.attrs.get("dilations", [1] * r)]
        st = [int(v) for v in self.attrs.get("strides", [1] * r)]
        pads = [int(v) for v in self.attrs.get("pads", [0] * (2 * r))]
        xs = self.shape(0)
        if len(block) != r or len(dil) != r or len(st) != r or len(pads) != 2 * r or \
                min(block + st + dil) < 1 or len(xs) != 3 or xs[1] % math.prod(block):
            self.malformed(f"image_shape {image}, block_shape {block}, strides {st}, "
                           f"dilations {dil}, pads {pads} do not fit columns {list(xs)}")
        padded = [d + pads[i] + pads[i + r] for i, d in enumerate(image)]
        counts = [(p - (b - 1) * d - 1) // s + 1 for p, b, d, s in zip(padded, block, dil, st)]
        if math.prod(counts) != xs[2] or min(counts) < 1:
            self.malformed(f"{xs[2]} columns, but the blocks fit {counts} times in the padded "
                           f"image {padded}")
        n, c = xs[0], xs[1] // math.prod(block)
        self.cols = (n, c) + tuple(block) + tuple(counts)
        self.taps = [(k, tuple(slice(i * d, i * d + s * (m - 1) + 1, s) for i, d, s, m in
                               zip(k, dil, st, counts)))
                     for k in itertools.product(*(range(b) for b in block))]
        self.inner = tuple(slice(pads[i], pads[i] + image[i]) for i in range(r))
        self.padded = any(pads)
        self.scratch = [((n, c) + tuple(padded), self.dtype)] if self.padded else []

    def run(self, xs, ys, sc):
        cols = xs[0].reshape(self.cols)
        img = sc[0] if self.padded else ys[0]
        img.fill(0)
        lead = (slice(None), slice(None))
        for k, where in self.taps:
            part = img[lead + where]
            np.add(part, cols[lead + k], out=part)
        if self.padded:
            np.copyto(ys[0], img[lead + self.inner])


@register
class TensorScatter(Kernel):
    """TensorScatter (opset 24): the past cache with each batch entry's
    update written along ``axis`` (default -2) from its write index (0
    when omitted), wrapping round in ``circular`` mode: a copy, then one
    fancy-indexed assignment through views with that axis second."""

    op_types = ("TensorScatter",)
    family = "movement"
    shape_rule = rules.same
    fold = "expanding"

    def setup(self):
        cs, us = self.shape(0), self.shape(1)
        self.axis = int(self.attrs.get("axis", -2)) % max(len(cs), 1)
        mode = self.attrs.get("mode", "linear")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("linear", "circular"):
            self.fail(f"mode {mode!r} is not linear or circular")
        if self.axis == 0 or len(us) != len(cs) or us[self.axis] > cs[self.axis] or any(
                u != c for i, (u, c) in enumerate(zip(us, cs)) if i != self.axis):
            self.malformed(f"update {list(us)} does not fit cache {list(cs)} along axis "
                           f"{self.axis} (not the batch axis)")
        self.circular = mode == "circular"
        self.size = cs[self.axis]
        self.steps = self.keep(np.arange(us[self.axis], dtype=np.int64)[None, :])
        self.rows = self.keep(np.arange(cs[0], dtype=np.int64)[:, None])

    def run(self, xs, ys, sc):
        y = ys[0]
        np.copyto(y, xs[0])
        start = xs[2].astype(np.int64).reshape(-1, 1) if self.has(2) else 0
        where = start + self.steps
        if self.circular:
            where = where % self.size
        elif where.size and (where.min() < 0 or where.max() >= self.size):
            raise InvalidArgumentError(
                f"operator {self.op.name!r} (TensorScatter): write indices "
                f"{np.ravel(start).tolist()} put the update past the cache's {self.size} "
                f"positions")
        np.moveaxis(y, self.axis, 1)[self.rows, where] = np.moveaxis(xs[1], self.axis, 1)
