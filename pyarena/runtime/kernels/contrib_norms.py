"""onnxruntime's fused normalizations of transformer graphs:
``com.microsoft`` SkipLayerNormalization and SkipSimplifiedLayerNormalization
(the residual ``input + skip + bias``, then LayerNorm or RMSNorm over the
last axis), EmbedLayerNormalization (word + position + segment embeddings,
then LayerNorm), and SimplifiedLayerNormalization, which onnxruntime
registers in the standard domain (RMSNormalization with its inverse RMS
as output 1).

Optional outputs as onnxruntime fills them: the rows' mean (0 for the
simplified form) and 1 / sqrt(var + eps) (float32, one per row), the
residual sum, and EmbedLayerNormalization's mask_index (the count of 1s
per row of the mask, 0 without one).  Scratch: the centred rows and the
two statistics, plus the residual sum when the graph does not read it."""
import math

import numpy as np

from ...errors import InvalidArgumentError
from . import shape_rules as rules
from ..._native import ffi
from . import shape_rules_contrib as crules
from .native import NATIVE_DTYPE
from .normalization import RMSNorm, moments
from .rows import layer_norm_rows
from .registry import Kernel, _carve, const, register


def _rms(s, m, v, d, inv, eps):
    """1/sqrt(mean(s^2) + eps) into ``v`` (rows of ``s``); ``m`` 0, ``d`` s."""
    np.square(s, out=d)
    np.add.reduce(d, axis=-1, out=v, keepdims=True)
    np.multiply(v, inv, out=v)
    np.add(v, eps, out=v)
    np.sqrt(v, out=v)
    np.reciprocal(v, out=v)
    m.fill(0)
    np.copyto(d, s)


class _RowNorm(Kernel):
    """A normalization over the last axis of a (rows, hidden) view with a
    gamma and an optional beta, whose outputs (y, mean, inv_std_var, sum)
    sit at ``self.slots``."""

    family = "reduce"
    onnx_domain = "com.microsoft"
    fold = "never"
    simplified = False

    def norm_setup(self, shape, out_slots):
        self.hidden = shape[-1]
        self.rows = math.prod(shape[:-1])
        self.inv = const(1.0 / max(self.hidden, 1), np.float32)
        self.eps = const(float(self.attrs.get("epsilon", 1e-12)), np.float32)
        named = list(self.op.outputs) + [""] * out_slots
        self.slots = [k for k in range(out_slots) if named[k]]
        view = (self.rows, self.hidden)
        self.scratch = [(view, self.dtype), ((self.rows, 1), np.float32),
                        ((self.rows, 1), np.float32)]
        return view

    def normalize(self, s, y, sc, gamma, beta, outs=None):
        """y = norm(s) * gamma + beta over (rows, hidden) views; the mean
        and inv_std_var to ``outs[1]``, ``outs[2]`` when given and read."""
        if self.use_native and not self.simplified and y.dtype == NATIVE_DTYPE and \
                not (outs and (1 in outs or 2 in outs)) and s.flags.c_contiguous and \
                y.flags.c_contiguous and gamma.flags.c_contiguous and gamma.size == self.hidden \
                and gamma.dtype == NATIVE_DTYPE and (beta is None or beta.dtype == NATIVE_DTYPE) \
                and (beta is None or (beta.flags.c_contiguous and beta.size == self.hidden)):
            layer_norm_rows(s, gamma, beta, y, self.eps, self.workers,
                            f"{self.op.op_type} {self.op.name!r}")      # (kernels/rows.c)
            return
        d, m, v = sc[:3]
        if self.simplified:
            _rms(s, m, v, d, self.inv, self.eps)
        else:
            moments(s, m, v, d, self.inv, self.eps)
        np.multiply(d, v, out=y)
        np.multiply(y, gamma, out=y)
        if beta is not None:
            np.add(y, beta, out=y)
        for k, stat in ((1, m), (2, v)):
            if outs and k in outs:
                np.copyto(outs[k].reshape(-1, 1), stat, casting="unsafe")


@register
class SkipLayerNorm(_RowNorm):
    """SkipLayerNormalization(input, skip, gamma, beta?, bias?) and
    SkipSimplifiedLayerNormalization(input, skip, gamma, bias?): the norm
    of input + skip (broadcast: (batch, seq, hidden), (1, seq, hidden) or
    (seq, hidden)) + bias; epsilon 1e-12 by default."""

    op_types = ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
    shape_rule = crules.skip_layer_norm

    def setup(self):
        self.simplified = self.op.op_type == "SkipSimplifiedLayerNormalization"
        self.beta_at = None if self.simplified else 3
        self.bias_at = 3 if self.simplified else 4
        x = self.shape(0)
        if len(x) not in (2, 3):
            self.malformed(f"input must be 2-D or 3-D, not {list(x)}")
        try:
            fits = np.broadcast_shapes(x, self.shape(1)) == x
        except ValueError:
            fits = False
        if not fits:
            self.malformed(f"skip {list(self.shape(1))} does not broadcast to the input "
                           f"{list(x)}")
        for i, what in ((2, "gamma"), (self.beta_at, "beta"), (self.bias_at, "bias")):
            if i is not None and self.has(i) and self.shape(i)[-1:] != x[-1:]:
                self.malformed(f"{what} {list(self.shape(i))} is not one per hidden unit "
                               f"({x[-1]})")
        view = self.norm_setup(x, 4)
        if 3 not in self.slots:
            self.scratch.append((view, self.dtype))

    def run(self, xs, ys, sc):
        outs = dict(zip(self.slots, ys))
        s = outs[3] if 3 in outs else sc[3].reshape(xs[0].shape)
        np.add(xs[0], xs[1], out=s)
        if self.has(self.bias_at):
            np.add(s, xs[self.bias_at], out=s)
        beta = xs[self.beta_at] if self.beta_at is not None and self.has(self.beta_at) \
            else None
        view = (self.rows, self.hidden)
        self.normalize(s.reshape(view), outs[0].reshape(view), sc, xs[2], beta, outs)

    def native_calls_scratch(self, xs, ys, sc):
        """[the ``add`` of input and skip, the ``layer_norm`` rows] as C
        call records (runs of them and their neighbours -- the linear
        layers around -- are one C call), the same steps as :meth:`run`
        when there is no bias (the import gives it to the MatMul before,
        runtime/fusion_linear.py), the skip has the input's shape and no
        mean / inv_std_var is read; else None."""
        outs = dict(zip(self.slots, ys))
        s = outs[3] if 3 in outs else _carve(sc, self.scratch)[3]
        x, skip, gamma, y = xs[0], xs[1], xs[2], outs[0]
        beta = xs[self.beta_at] if self.beta_at is not None and self.has(self.beta_at) \
            else None
        arrays = [x, skip, gamma, s, y] + ([] if beta is None else [beta])
        if self.simplified or not self.use_native or self._act is not None or \
                self.has(self.bias_at) or \
                1 in outs or 2 in outs or skip.shape != x.shape or s.size != x.size or \
                gamma.size != self.hidden or (beta is not None and beta.size != self.hidden) \
                or not all(isinstance(a, np.ndarray) and a.dtype == NATIVE_DTYPE and
                           a.flags.c_contiguous for a in arrays) or \
                any(np.may_share_memory(s, a) for a in (x, skip)):
            return None
        eps = self.__dict__.get("_eps_c")
        if eps is None:
            eps = self._eps_c = ffi.new("float *", float(self.eps))
        return [("add", None, None, x, skip, s, (s.size,)),
                ("layer_norm", eps, gamma, s, beta, y, (self.rows, self.hidden))]


@register
class EmbedLayerNorm(_RowNorm):
    """EmbedLayerNormalization(input_ids, segment_ids?, word, position,
    segment?, gamma, beta, mask?, position_ids?): word[ids] +
    position[position_ids or 0..seq-1] + segment[segment_ids], then
    LayerNorm (epsilon 1e-12 by default).  Ids outside their table are
    refused, as onnxruntime refuses them."""

    op_types = ("EmbedLayerNormalization",)
    shape_rule = crules.embed_layer_norm

    def setup(self):
        ids = self.shape(0)
        if len(ids) != 2:
            self.malformed(f"input_ids must be (batch, seq), not {list(ids)}")
        self.words, hidden = self.shape(2)
        self.positions = self.shape(3)[0]
        self.segment = self.has(1) and self.has(4)
        if not self.has(8) and ids[1] > self.positions:
            self.malformed(f"{ids[1]} positions but a position table of {self.positions}")
        self.view = self.norm_setup(ids + (hidden,), 3)
        self.full = ids + (hidden,)
        if 2 not in self.slots:
            self.scratch.append((self.view, self.dtype))

    def run(self, xs, ys, sc):
        outs = dict(zip(self.slots, ys))
        e = (outs[2] if 2 in outs else sc[3]).reshape(self.full)
        t = sc[0].reshape(self.full)
        self.in_table(xs[0], self.words, "word")
        np.take(xs[2], xs[0], axis=0, out=e)
        if self.has(8):
            pos = xs[8]
            self.in_table(pos, self.positions, "position")
            np.take(xs[3], pos, axis=0, out=t[:pos.shape[0]])
            np.add(e, t[:pos.shape[0]], out=e)
        else:
            np.add(e, xs[3][:self.full[1]], out=e)
        if self.segment:
            self.in_table(xs[1], self.shape(4)[0], "segment")
            np.take(xs[4], xs[1], axis=0, out=t)
            np.add(e, t, out=e)
        self.normalize(e.reshape(self.view), outs[0].reshape(self.view), sc, xs[5], xs[6])
        if 1 in outs:
            if self.has(7):
                np.sum(np.equal(xs[7], 1), axis=1, out=outs[1], dtype=outs[1].dtype)
            else:
                outs[1].fill(0)

    def in_table(self, idx, n, what):
        """InvalidArgumentError for an id outside [0, n) (onnxruntime's
        "input index out of range"; no negative ids)."""
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise InvalidArgumentError(f"operator {self.op.name!r} ({self.op.op_type}): a "
                                       f"{what} id is out of range [0, {n})")


@register
class SimplifiedLayerNorm(RMSNorm):
    """SimplifiedLayerNormalization (onnxruntime, standard domain): RMS
    normalization over the axes from ``axis`` on, times the scale;
    output 1 is 1 / sqrt(mean(x^2) + eps)."""

    op_types = ("SimplifiedLayerNormalization",)
    shape_rule = rules.layer_norm

    def statistics(self, x, m, v, d):
        super().statistics(x, m, v, d)
        np.copyto(m, v)         # (output 1 is the inverse RMS: LayerNorm's slot of the mean)
