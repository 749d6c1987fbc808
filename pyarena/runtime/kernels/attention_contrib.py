"""onnxruntime's ``com.microsoft`` attention operators, on the shared
softmax(Q K^T * scale + bias) V (:func:`.attention_core.attend`, scale on
the product as onnxruntime's CPU kernels apply it):

* Attention: Q, K, V projected from one input by one weight (and bias),
  the past (2, batch, heads, past, size) cache before the new keys
  (present), mask_index as right-padding ends (batch), ends and starts
  (2 * batch), a 0/1 key mask (batch, total) or (batch, seq, total),
  unidirectional, attention_bias.
* MultiHeadAttention: Q, K, V given (3-D, or K / V as (batch, heads,
  len, size); not packed: onnxruntime's CPU kernel refuses those too),
  bias, key_padding_mask in Attention's forms, attention_bias, past /
  present.
* RotaryEmbedding: the standard op's rotation with position_ids as an
  offset (one value) or per token.

Masks as onnxruntime builds them: a masked key gets ``mask_filter_value``
(-10000 by default) instead of its score -- a finite value, so a row with
every key masked is a uniform softmax, not 0 -- and a key after the
query's position, with unidirectional, the float's lowest value.  Temporaries per run, as the standard
Attention kernel -- but for Attention in float32 as a BERT encoder uses
it: attention_native.py, native and in planned scratch.
GroupQueryAttention: attention_gqa.py."""
import numpy as np

from ...errors import InvalidArgumentError
from .attention_core import attend, heads, rotary_parts, rotate
from .attention_native import native_run, native_setup
from . import shape_rules as rules
from . import shape_rules_contrib as crules
from .registry import Kernel, register


def key_mask(mask, batch, sq, past, total, causal, fill, dt):
    """The additive (batch, 1, sq, total) mask of onnxruntime's contrib
    attentions from ``mask`` (None, or int32 in a mask_index form: see the
    module docstring), the causal rule and ``fill`` (mask_filter_value)."""
    fill = dt.type(fill)
    j = np.arange(total)
    if mask is None:
        m = np.zeros((batch, 1, total), dt)
    elif mask.ndim == 3:
        m = np.where(mask > 0, dt.type(0), fill)
    elif mask.ndim == 2:
        m = np.where(mask > 0, dt.type(0), fill)[:, None, :]
    else:
        ends = mask[:batch].reshape(batch, 1, 1)
        off = j >= ends
        if mask.shape[0] == 2 * batch:
            off |= j < np.minimum(mask[batch:], total).reshape(batch, 1, 1)
        m = np.where(off, fill, dt.type(0))
    m = np.broadcast_to(m, (batch, sq, total))
    if causal:
        later = j[None, :] > past + np.arange(sq)[:, None]
        m = np.where(later, np.finfo(dt).min, m)
    return m[:, None]


def _check_mask(k, mask, batch, sq, total):
    """Refuse a mask_index whose shape is none of the forms supported."""
    if mask is None:
        return
    ok = (len(mask) == 1 and mask[0] in (batch, 2 * batch)) or \
        (len(mask) == 2 and tuple(mask) == (batch, total)) or \
        (len(mask) == 3 and tuple(mask) == (batch, sq, total))
    if not ok:
        k.fail(f"mask {list(mask)} is not (batch), (2 * batch), (batch, {total}) or "
               f"(batch, {sq}, {total})")


class _ContribAttention(Kernel):
    """What the contrib attentions share: the attributes, the mask and
    the softmax over the heads."""

    onnx_domain = "com.microsoft"
    family = "linalg"
    fold = "never"
    outputs_by_position = True

    def common_setup(self):
        a = self.attrs
        self.num_heads = int(a.get("num_heads", 0))
        if self.num_heads < 1:
            self.malformed("num_heads must be at least 1")
        self.causal = bool(int(a.get("unidirectional", 0)))
        self.fill = float(a.get("mask_filter_value", -10000.0))
        self.scale = float(a.get("scale", 0.0))
        self.slots = [k for k, o in enumerate(self.op.outputs) if o]

    def softmax_heads(self, q, k, v, mask, past, bias):
        """y (batch, seq, heads * v size) of Q, K, V (batch, heads, len,
        size) under ``mask`` (key_mask's form) + ``bias``."""
        b, _, sq, size = q.shape
        add = [key_mask(mask, b, sq, past, k.shape[2], self.causal, self.fill, q.dtype)]
        if bias is not None:        # (onnxruntime adds attention_bias first)
            add.insert(0, bias)
        scale = self.scale if self.scale else 1 / np.sqrt(size)
        y, _, _ = attend(q, k, v, add, scale, what=f"operator {self.op.name!r}")
        return y.transpose(0, 2, 1, 3).reshape(b, sq, -1)

    def emit(self, ys, got):
        for slot, out in zip(self.slots, ys):
            np.copyto(out, got[slot], casting="unsafe")


@register
class MsAttention(_ContribAttention):
    """com.microsoft Attention(input, weights, bias?, mask_index?, past?,
    attention_bias?, past_sequence_length?): Q, K, V = input @ weights +
    bias, split by ``qkv_hidden_sizes`` (default three equal parts)."""

    op_types = ("com.microsoft.Attention",)
    shape_rule = crules.ms_attention

    def setup(self):
        self.common_setup()
        a = self.attrs
        if int(a.get("do_rotary", 0)) or int(a.get("past_present_share_buffer", 0)):
            self.fail("do_rotary and past_present_share_buffer are not supported")
        x, w = self.shape(0), self.shape(1)
        if len(x) != 3 or len(w) != 2 or w[0] != x[2]:
            self.malformed(f"input {list(x)} and weights {list(w)} do not multiply")
        sizes = list(a.get("qkv_hidden_sizes", []) or []) or [w[1] // 3] * 3
        if len(sizes) != 3 or sum(sizes) != w[1] or sizes[0] != sizes[1] or \
                any(s % self.num_heads for s in sizes):
            self.malformed(f"qkv_hidden_sizes {sizes} do not split weights {list(w)} into "
                           f"{self.num_heads} heads")
        self.sizes = sizes
        past = self.shape(4) if self.has(4) else None
        if past is not None and (len(past) != 5 or past[0] != 2 or sizes[1] != sizes[2]):
            self.malformed(f"past {list(past)} is not (2, batch, heads, past, size)")
        self.past = past[3] if past is not None else 0
        _check_mask(self, self.shape(3) if self.has(3) else None, x[0], x[1],
                    self.past + x[1])
        native_setup(self, x, w)

    @property
    def path(self):
        return "native" if self.fast else "numpy"

    def run(self, xs, ys, sc):
        if self.fast:
            native_run(self, xs, ys, sc)
            return
        x = list(xs) + [None] * (7 - len(xs))
        inp, w, b, mask, past, bias = x[:6]
        qkv = np.matmul(inp, w)
        if b is not None:
            qkv += b
        hq, hk, _ = self.sizes
        n = self.num_heads
        q, k, v = (heads(qkv[..., lo:hi], n) for lo, hi in
                   ((0, hq), (hq, hq + hk), (hq + hk, qkv.shape[-1])))
        if past is not None:
            k = np.concatenate((past[0], k), axis=2)
            v = np.concatenate((past[1], v), axis=2)
        y = self.softmax_heads(q, k, v, mask, self.past, bias)
        self.emit(ys, (y, np.stack((k, v)) if 1 in self.slots else None))


@register
class MultiHeadAttention(_ContribAttention):
    """com.microsoft MultiHeadAttention(query, key?, value?, bias?,
    key_padding_mask?, attention_bias?, past_key?, past_value?): the
    forms in the module docstring; present_key / present_value the keys
    and values attended to, (batch, heads, total, size)."""

    op_types = ("MultiHeadAttention",)
    shape_rule = crules.multi_head_attention

    def setup(self):
        self.common_setup()
        q = self.shape(0)
        k = self.shape(1) if self.has(1) else None
        v = self.shape(2) if self.has(2) else None
        if len(q) == 5 or (k is not None and len(k) == 5):
            self.fail("packed QKV or KV is not supported (as in onnxruntime's CPU kernel)")
        self.form = "bnsh" if k is not None and len(k) == 4 else "bsd"
        if len(q) != 3 or k is None or v is None or len(k) != len(v):
            self.malformed(f"query {list(q)} with key {k} and value {v} is no form of "
                           f"MultiHeadAttention")
        if 3 in self.slots or any(self.has(i) for i in (8, 9)):
            self.fail("the qk output, past_sequence_length and cache_indirection are not "
                      "supported")
        if self.has(6) != self.has(7):
            self.malformed("past_key and past_value go together")
        if self.has(6) and self.form == "bnsh":
            self.malformed("past_key with key and value laid out (batch, heads, len, size)")
        self.past = self.shape(6)[2] if self.has(6) else 0
        kl = k[2] if self.form == "bnsh" else k[1]
        _check_mask(self, self.shape(4) if self.has(4) else None, q[0], q[1],
                    self.past + kl)

    def projected(self, xs):
        """Q, K, V as (batch, heads, len, size), the bias added."""
        x = list(xs) + [None] * (10 - len(xs))
        q, k, v, b = x[:4]
        n = self.num_heads
        d, dv = q.shape[2], (v.shape[2] if v.ndim == 3 else v.shape[1] * v.shape[3])
        if b is not None:
            q = q + b[:d]
            if self.form == "bsd":
                k = k + b[d:2 * d]
                v = v + b[2 * d:2 * d + dv]
        if self.form == "bsd":
            k, v = heads(k, n), heads(v, n)
        return heads(q, n), k, v

    def run(self, xs, ys, sc):
        x = list(xs) + [None] * (10 - len(xs))
        q, k, v = self.projected(xs)
        if x[6] is not None:
            k = np.concatenate((x[6], k), axis=2)
            v = np.concatenate((x[7], v), axis=2)
        y = self.softmax_heads(q, k, v, x[4], self.past, x[5])
        self.emit(ys, (y, k, v))


@register
class MsRotaryEmbedding(Kernel):
    """com.microsoft RotaryEmbedding(input, position_ids, cos_cache,
    sin_cache): the standard op's rotation; position_ids (batch, seq), or
    one value: the first position, the others following it."""

    op_types = ("com.microsoft.RotaryEmbedding",)
    onnx_domain = "com.microsoft"
    family = "linalg"
    shape_rule = rules.same

    def setup(self):
        xs, half = self.shape(0), self.shape(2)[-1]
        rot = int(self.attrs.get("rotary_embedding_dim", 0)) or 2 * half
        if len(xs) == 4:
            b, h, s, d = xs
            self.to4 = lambda a: a.transpose(0, 2, 1, 3)
        elif len(xs) == 3:
            h = int(self.attrs.get("num_heads", 0)) or xs[2] // rot
            if h < 1 or xs[2] % h:
                self.malformed(f"a 3-D input {list(xs)} needs num_heads dividing its last dim")
            b, s, d = xs[0], xs[1], xs[2] // h
            self.to4 = lambda a: a.reshape(b, s, h, d)
        else:
            self.malformed(f"input must be 3-D or 4-D, not {list(xs)}")
        if rot != 2 * half or rot > d or self.shape(3)[-1] != half:
            self.malformed(f"caches of {half} and {self.shape(3)[-1]} do not rotate "
                           f"{rot} of {d} features")
        self.seq = s
        self.parts = rotary_parts(rot, bool(int(self.attrs.get("interleaved", 0))))
        self.scratch = [((b, s, h, half), self.dtype)]

    def run(self, xs, ys, sc):
        pos = xs[1].astype(np.int64, copy=False)
        if pos.size == 1:
            pos = pos.reshape(1, 1) + np.arange(self.seq).reshape(1, -1)
        if pos.size and (pos.min() < 0 or pos.max() >= xs[2].shape[0]):
            raise InvalidArgumentError(f"operator {self.op.name!r} (RotaryEmbedding): a "
                                       f"position is outside the caches")
        cos, sin = xs[2][pos], xs[3][pos]
        rotate(self.to4(xs[0]), self.to4(ys[0]), cos[:, :, None], sin[:, :, None], self.parts,
               sc[0])
