"""onnxruntime's ``com.microsoft`` GroupQueryAttention, as its CPU kernel
computes it: causal attention of ``num_heads`` query heads over
``kv_num_heads`` key / value heads (each shared by a group of query
heads), the new keys and values written into the present cache after
each sequence's past.

Batch ``b`` has ``seqlens_k[b] + 1`` keys in all.  The first prompt (the
query as long as ``total_sequence_length``) has no past; otherwise the
past is that total less the new tokens, its keys read from past_key /
past_value and the new ones written after them (the present caches are
(batch, kv heads, max(past buffer, total), size), zero past each
sequence's end).  Query ``i`` sees the keys up to its own position
(past + i) -- the last ``local_window_size`` of them when that is set --
with ``softcap``, ``smooth_softmax`` (an extra zero logit in the
denominator) and ``do_rotary`` (the query's and the new keys' first
features rotated by the cos / sin caches at their positions).  Q, K, V
packed in one input when key and value are omitted.  Temporaries per
run, as the standard Attention kernel."""
import numpy as np

from ...errors import InvalidArgumentError
from .attention_core import attend, heads, masked, rotary_parts, rotate
from . import shape_rules_contrib as crules
from .registry import Kernel, register


@register
class GroupQueryAttention(Kernel):
    """GroupQueryAttention(query, key?, value?, past_key?, past_value?,
    seqlens_k, total_sequence_length, cos_cache?, sin_cache?): output,
    present_key, present_value (attention_bias, head_sink, position_ids
    and the qk output: not supported)."""

    op_types = ("GroupQueryAttention",)
    onnx_domain = "com.microsoft"
    family = "linalg"
    fold = "never"
    outputs_by_position = True
    shape_rule = crules.group_query_attention

    def setup(self):
        a = self.attrs
        self.n, self.nkv = int(a.get("num_heads", 0)), int(a.get("kv_num_heads", 0))
        if self.n < 1 or self.nkv < 1 or self.n % self.nkv:
            self.malformed(f"num_heads {self.n} must be a multiple of kv_num_heads "
                           f"{self.nkv} (both at least 1)")
        self.scale = float(a.get("scale", 0.0))
        self.softcap = float(a.get("softcap", 0.0))
        self.window = int(a.get("local_window_size", -1))
        self.smooth = bool(int(a.get("smooth_softmax", 0)))
        self.slots = [k for k, o in enumerate(self.op.outputs) if o]
        if 3 in self.slots or int(a.get("qk_output", 0)) or \
                any(self.has(i) for i in (9, 10, 11)):
            self.fail("position_ids, attention_bias, head_sink and the qk output are not "
                      "supported")
        q = self.shape(0)
        if len(q) != 3:
            self.fail(f"query must be (batch, seq, hidden), not {list(q)}")
        self.packed = not self.has(1)
        self.size = q[2] // (self.n + 2 * self.nkv) if self.packed else q[2] // self.n
        if self.has(3) != self.has(4):
            self.malformed("past_key and past_value go together")
        self.past = self.shape(3)[2] if self.has(3) else 0
        self.rotary = None
        if int(a.get("do_rotary", 0)):
            if not (self.has(7) and self.has(8)):
                self.malformed("do_rotary needs cos_cache and sin_cache")
            rot = 2 * self.shape(7)[-1]
            if rot > self.size:
                self.malformed(f"caches rotate {rot} features of heads of {self.size}")
            self.rotary = rotary_parts(rot, bool(int(a.get("rotary_interleaved", 0))))

    def split(self, xs):
        """Q, K, V as (batch, seq, heads * size)."""
        if not self.packed:
            return xs[0], xs[1], xs[2]
        dq, dk = self.n * self.size, self.nkv * self.size
        q = xs[0]
        return q[..., :dq], q[..., dq:dq + dk], q[..., dq + dk:]

    def turned(self, x, count, pos, cos, sin):
        """x (batch, seq, count * size) with its heads rotated at ``pos``."""
        b, s, _ = x.shape
        x4 = x.reshape(b, s, count, self.size)
        y4 = np.empty_like(x4)
        c, sn = cos[pos][:, :, None], sin[pos][:, :, None]
        rotate(x4, y4, c, sn, self.rotary, np.empty_like(y4[..., self.rotary[0]]))
        return y4.reshape(b, s, -1)

    def run(self, xs, ys, sc):
        x = list(xs) + [None] * (12 - len(xs))
        q, k, v = self.split(x)
        b, s = q.shape[0], q.shape[1]
        total = int(np.asarray(x[6]).reshape(-1)[0])
        ends = np.asarray(x[5]).reshape(-1).astype(np.int64) + 1        # keys per sequence
        first = s == total
        starts = np.zeros(b, np.int64) if first else ends - s           # each sequence's past
        if ends.shape[0] != b or starts.min() < 0 or ends.max() > max(total, self.past):
            raise InvalidArgumentError(f"operator {self.op.name!r} (GroupQueryAttention): "
                                       f"seqlens_k {list(ends - 1)} do not fit {s} new tokens "
                                       f"of {total}")
        if self.rotary is not None:
            pos = starts[:, None] + np.arange(s)[None, :]
            if pos.max() >= x[7].shape[0]:
                raise InvalidArgumentError(f"operator {self.op.name!r}: a position is "
                                           f"outside the cos / sin caches")
            q = self.turned(q, self.n, pos, x[7], x[8])
            k = self.turned(k, self.nkv, pos, x[7], x[8])
        length = max(total, self.past)
        pk = np.zeros((b, self.nkv, length, self.size), q.dtype)
        pv = np.zeros_like(pk)
        kh, vh = heads(k, self.nkv), heads(v, self.nkv)
        for i in range(b):      # per sequence: its past, then its new keys
            p0 = int(starts[i])
            if p0:
                pk[i, :, :p0] = x[3][i, :, :p0]
                pv[i, :, :p0] = x[4][i, :, :p0]
            pk[i, :, p0:p0 + s] = kh[i]
            pv[i, :, p0:p0 + s] = vh[i]
        bias = masked(self.allowed(starts, ends, s, length), q.dtype)
        scale = self.scale if self.scale else 1 / np.sqrt(self.size)
        y, _, _ = attend(heads(q, self.n), pk, pv, bias, scale, softcap=self.softcap,
                         smooth=self.smooth, what=f"operator {self.op.name!r}")
        got = (y.transpose(0, 2, 1, 3).reshape(b, s, -1), pk, pv)
        for slot, out in zip(self.slots, ys):
            np.copyto(out, got[slot], casting="unsafe")

    def allowed(self, starts, ends, s, length):
        """(batch, 1, seq, length): the keys each query sees."""
        i = np.arange(s).reshape(1, 1, s, 1)
        j = np.arange(length).reshape(1, 1, 1, length)
        at = starts.reshape(-1, 1, 1, 1) + i            # the query's own position
        ok = (j <= at) & (j < ends.reshape(-1, 1, 1, 1))
        if self.window > 0:
            ok &= j > at - self.window
        return ok
