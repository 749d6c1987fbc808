"""The scaled dot-product attention the attention kernels share: the
standard Attention (linalg.py) and onnxruntime's com.microsoft Attention,
MultiHeadAttention and GroupQueryAttention (attention_contrib.py) differ
in how they lay out Q, K and V and build the additive bias, not in
softmax(Q K^T * scale + bias) V.  Batched NumPy matrix products on
(batch, heads, seq, size) arrays; temporaries per call."""
import numpy as np

from ...errors import InvalidArgumentError

__all__ = ["heads", "masked", "attend", "rotary_parts", "rotate"]


def heads(x, count):
    """(batch, seq, count * size) -> (batch, count, seq, size), a view."""
    b, s, h = x.shape
    return x.reshape(b, s, count, h // count).transpose(0, 2, 1, 3)


def masked(allowed, dtype):
    """0 where ``allowed``, -inf elsewhere: an additive bias."""
    return np.where(allowed, dtype.type(0), dtype.type(-np.inf))


def attend(q, k, v, bias, scale, softcap=0.0, precision=None, split_scale=False,
           smooth=False, what="Attention"):
    """softmax(Q K^T * scale [softcapped] + bias) V over (batch, heads,
    seq, size) arrays; K and V with fewer heads than Q are repeated over
    the groups of query heads.  ``split_scale``: sqrt(scale) applied to Q
    and to K (ONNX's function) instead of scale to the product
    (onnxruntime's contrib kernels).  ``bias``: an additive term, or a
    list of them added to the scores in order (onnxruntime adds
    attention_bias, then its mask: the rounding differs).  ``precision``: the dtype the softmax
    runs in.  ``smooth``: one more logit, 0, in each row's denominator
    (onnxruntime's smooth softmax).  A query row whose bias is -inf
    everywhere gives 0; one whose scores are all -inf by Q and K gives NaN,
    as onnxruntime.  Returns
    (y, the scores before the bias, the probabilities)."""
    dt = q.dtype
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        if hq % hk:
            raise InvalidArgumentError(f"{what}: {hq} query heads do not group over {hk} "
                                       f"key heads")
        k, v = np.repeat(k, hq // hk, axis=1), np.repeat(v, hq // hk, axis=1)
    if split_scale:
        root = dt.type(np.sqrt(scale))
        qk = np.matmul(q * root, np.swapaxes(k * root, 2, 3))
    else:
        qk = np.matmul(q, np.swapaxes(k, 2, 3))
        qk *= dt.type(scale)
    if softcap > 0:
        qk = np.tanh(qk / dt.type(softcap)) * dt.type(softcap)
    terms = list(bias) if isinstance(bias, (list, tuple)) else [bias]
    scores = qk
    for t in terms:
        scores = scores + t
    bias = sum(terms[1:], terms[0])
    if precision is not None:
        scores = scores.astype(precision)
    top = np.max(scores, axis=-1, keepdims=True)
    if smooth:
        top = np.maximum(top, 0)
    empty = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    with np.errstate(invalid="ignore"):
        # a row the mask empties is 0 (below); one whose scores are all
        # -inf by the data is 0 / 0 = NaN, as onnxruntime gives
        p = np.exp(scores - top)
        total = np.sum(p, axis=-1, keepdims=True)
        if smooth:
            total += np.exp(-top)
        p = p / np.where(total == 0, 1, total)
    p = np.where(empty, 0, p)
    return np.matmul(p.astype(dt), v), qk, p


def rotary_parts(rot, interleaved):
    """The two feature slices a rotary embedding of the first ``rot``
    features turns into each other: even / odd ones (``interleaved``) or
    the two halves."""
    half = rot // 2
    return (slice(0, rot, 2), slice(1, rot, 2)) if interleaved else \
        (slice(0, half), slice(half, rot))


def rotate(x, y, cos, sin, parts, t):
    """y = x with its feature pairs ``parts`` rotated: y1 = cos x1 - sin x2,
    y2 = sin x1 + cos x2 (cos, sin broadcast to the pairs' shape; ``t``: a
    temporary of that shape); the features past them copied."""
    a, b = parts
    x1, x2, y1, y2 = x[..., a], x[..., b], y[..., a], y[..., b]
    np.copyto(y, x)
    np.multiply(cos, x1, out=y1)
    np.multiply(sin, x2, out=t)
    np.subtract(y1, t, out=y1)
    np.multiply(sin, x1, out=y2)
    np.multiply(cos, x2, out=t)
    np.add(y2, t, out=y2)
